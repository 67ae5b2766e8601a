"""What storage cannot hold is refused alike on every provider, typed, before any write.

Found by bad-input probes: an entry nested 31+ levels raised MariaDB's untyped
IntegrityError 4025 on ``mysql`` while ``file`` accepted it; a 30 MB message
raised OperationalError 2006 (packet too large). Both are ``EntryTooLarge``
now (an ``InvalidEntry``; HTTP 413, exit 2), on every provider, and nothing is
stored.
"""

from __future__ import annotations

import pytest

from sessiontree.core.entries import DEFAULT_MAX_ENTRY_BYTES, DEFAULT_MAX_ENTRY_DEPTH
from sessiontree.core.errors import CATEGORIES, EntryTooLarge, InvalidEntry
from tests.contract.conftest import PROVIDER_KINDS, make_provider


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    provider = make_provider(request.param, tmp_path)
    provider.create_session(session_id="s1")
    provider.append_message("s1", {"role": "user", "content": "first"})
    return provider


def nested(levels: int) -> dict:
    """A message entry whose JSON nests ``levels`` levels deep (the entry is level 1)."""
    value: object = "bottom"
    for _ in range(levels - 2):  # entry (1) → message (2) → content lists (3 … levels)
        value = [value]
    return {"type": "message", "message": {"role": "user", "content": value}}


def test_the_defaults_are_what_mariadb_stores_by_default():
    assert DEFAULT_MAX_ENTRY_DEPTH == 30
    assert DEFAULT_MAX_ENTRY_BYTES == 6 * 1024 * 1024
    assert CATEGORIES[EntryTooLarge.category].http_status == 413


def test_an_entry_at_the_depth_limit_is_stored_and_one_level_more_is_refused(provider):
    stored = provider.append_entry("s1", nested(DEFAULT_MAX_ENTRY_DEPTH))
    assert provider.get_entry("s1", stored["id"]) == stored  # MariaDB's JSON columns hold it
    before = provider.list_entries("s1")
    with pytest.raises(EntryTooLarge, match="deeper than 30 levels") as caught:
        provider.append_entry("s1", nested(DEFAULT_MAX_ENTRY_DEPTH + 1))
    assert isinstance(caught.value, InvalidEntry)
    with pytest.raises(EntryTooLarge):
        provider.append_entry("s1", nested(10_000))  # a depth bomb costs nothing
    assert provider.list_entries("s1") == before


def test_an_entry_beyond_the_size_limit_is_refused_before_anything_is_written(provider):
    before = provider.list_entries("s1")
    huge = {"role": "user", "content": "x" * (30 * 1024 * 1024)}
    with pytest.raises(EntryTooLarge, match="SESSIONTREE_MAX_ENTRY_BYTES"):
        provider.append_message("s1", huge)
    assert provider.list_entries("s1") == before
    leaf = provider.get_session("s1")["leaf_entry_id"]
    with pytest.raises(EntryTooLarge):
        provider.begin_in_flight_entry("s1", {"type": "message", "message": huge})
    streaming = provider.begin_in_flight_entry("s1", {"type": "message", "message": {"role": "assistant"}})
    with pytest.raises(EntryTooLarge):
        provider.update_in_flight_entry("s1", streaming["id"], {"message": huge})
    assert provider.update_in_flight_entry("s1", streaming["id"], {}, complete=True)["parentId"] == leaf


def test_the_limits_are_settings(provider, settings):
    settings.SESSIONTREE_MAX_ENTRY_BYTES = 200
    settings.SESSIONTREE_MAX_ENTRY_DEPTH = 5
    with pytest.raises(EntryTooLarge, match="limit is 200"):
        provider.append_message("s1", {"role": "user", "content": "y" * 300})
    with pytest.raises(EntryTooLarge, match="deeper than 5"):
        provider.append_entry("s1", nested(6))
    provider.append_entry("s1", nested(5))


def test_copied_entries_obey_the_limits_too(provider, settings):
    settings.SESSIONTREE_MAX_ENTRY_DEPTH = 5
    entries = [{**nested(6), "id": "deep0001", "parentId": None, "timestamp": "t"}]
    with pytest.raises(EntryTooLarge):
        provider.create_session(session_id="copy", entries=entries)
    assert provider.get_session("copy") is None


def test_session_metadata_obeys_the_depth_limit_too(provider):
    """Found on MariaDB: metadata 40 levels deep failed at the database
    (IntegrityError 4025), a 500 through the admin or a command."""
    deep: object = "x"
    for _ in range(40):
        deep = {"k": deep}
    with pytest.raises(EntryTooLarge, match="metadata nests deeper"):
        provider.update_session("s1", metadata=deep)
    with pytest.raises(EntryTooLarge):
        provider.create_session(session_id="s2", metadata=deep)
    assert provider.get_session("s1")["metadata"] == {} and provider.get_session("s2") is None
    shallow: object = "x"
    for _ in range(DEFAULT_MAX_ENTRY_DEPTH - 1):
        shallow = {"k": shallow}
    assert provider.update_session("s1", metadata=shallow)["metadata"] == shallow
