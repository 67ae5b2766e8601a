"""Types (plan task 1) and identifiers (plan task 2, ids half)."""

from __future__ import annotations

import re
import typing
import uuid

import pytest

from sessiontree.core import ids
from sessiontree.core.ids import new_entry_id, new_session_id
from sessiontree.core.types import (
    CURRENT_SESSION_VERSION,
    ENTRY_TYPES,
    SessionHeader,
    SessionMessageEntry,
    SessionTreeEntry,
    SessionTreeSession,
)

HEX8 = re.compile(r"^[0-9a-f]{8}$")


def test_represents_a_pi_compatible_session_header_and_entries():
    header: SessionHeader = {
        "type": "session",
        "version": 1,
        "id": "s1",
        "timestamp": "2026-04-19T00:00:00.000Z",
        "cwd": "C:/workspace",
    }
    entry: SessionMessageEntry = {
        "type": "message",
        "id": "e1",
        "parentId": None,
        "timestamp": "2026-04-19T00:00:00.000Z",
        "message": {"role": "user", "content": "hello"},
    }
    session: SessionTreeSession = {
        "session_id": header["id"],
        "provider": "file",
        "root_entry_id": entry["id"],
        "leaf_entry_id": entry["id"],
        "cwd": header["cwd"],
        "session_file": None,
        "parent_session_id": None,
        "agent_id": None,
        "user_id": None,
        "title": None,
        "status": "active",
        "metadata": {},
        "created_at": header["timestamp"],
        "updated_at": header["timestamp"],
    }
    assert session["leaf_entry_id"] == entry["id"]
    # TypedDicts are plain dicts at run time: no conversion layer between Pi's JSON and ours.
    assert type(session) is dict and type(entry) is dict


def test_session_meta_keys_are_the_contract_names():
    assert SessionTreeSession.__required_keys__ == {
        "session_id",
        "provider",
        "root_entry_id",
        "leaf_entry_id",
        "cwd",
        "session_file",
        "parent_session_id",
        "agent_id",
        "user_id",
        "title",
        "status",
        "metadata",
        "created_at",
        "updated_at",
    }


def test_header_version_and_parent_session_are_optional():
    assert SessionHeader.__required_keys__ == {"type", "id", "timestamp", "cwd"}
    assert SessionHeader.__optional_keys__ == {"version", "parentSession"}
    assert CURRENT_SESSION_VERSION == 3


def test_entry_types_are_pis_eleven():
    assert {
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "context_edit",
        "usage",
    } == ENTRY_TYPES


def test_entry_union_has_one_shape_per_entry_type_with_the_base_keys():
    shapes = typing.get_args(SessionTreeEntry)
    assert len(shapes) == len(ENTRY_TYPES) == 11
    for shape in shapes:
        assert {"type", "id", "parentId", "timestamp"} <= shape.__required_keys__


# --- ids -------------------------------------------------------------------


def test_new_session_id_is_a_uuid7():
    session_id = new_session_id()
    parsed = uuid.UUID(session_id)
    assert parsed.version == 7
    assert str(parsed) == session_id


def test_new_session_ids_are_unique_and_time_ordered():
    generated = [new_session_id() for _ in range(500)]
    assert len(set(generated)) == 500
    # Generated in a tight loop (many per millisecond): still sorted by creation.
    assert sorted(generated) == generated


def test_new_entry_id_is_eight_hex_chars():
    for _ in range(200):
        assert HEX8.match(new_entry_id())


def test_new_entry_id_avoids_existing_ids(monkeypatch):
    candidates = iter(["aaaaaaaa", "bbbbbbbb", "cccccccc"])
    monkeypatch.setattr(ids.secrets, "token_hex", lambda n: next(candidates))
    assert new_entry_id({"aaaaaaaa", "bbbbbbbb"}) == "cccccccc"


def test_new_entry_id_rechecks_every_candidate_against_existing():
    class RejectFirstFive:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def __contains__(self, candidate: object) -> bool:
            self.asked.append(str(candidate))
            return len(self.asked) <= 5

    existing = RejectFirstFive()
    result = new_entry_id(existing)
    assert len(existing.asked) == 6
    assert result == existing.asked[-1]
    assert HEX8.match(result)


def test_new_entry_id_falls_back_to_full_uuid_when_all_short_ids_collide():
    class EveryShortIdTaken:
        def __contains__(self, candidate: object) -> bool:
            return isinstance(candidate, str) and len(candidate) == 8

    result = new_entry_id(EveryShortIdTaken())
    assert len(result) == 36
    assert str(uuid.UUID(result)) == result


@pytest.mark.parametrize("existing", [set(), frozenset(), {}, []])
def test_new_entry_id_accepts_any_container(existing):
    assert HEX8.match(new_entry_id(existing))
