"""Entries found by their key (``core/entry_keys.py``, issue 23).

The registry's rules and what they give; then, on every storage (the
memory one by the generic fallback), ``keyed_reads.entries_with_key``
against the keys computed over the whole session: entries stored together
or one by one, completed in flight, erased, read again by a new process
(the ``file`` storage's sidecar, which is not used under other rules), and
``mysql`` rows stored before the column existed (the migration's backfill).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.db import connection

from sessiontree import services
from sessiontree.core import entry_keys
from sessiontree.core.types import Entry
from sessiontree.providers import file_sidecar, keyed_reads
from sessiontree.providers.file_provider import clear_index_cache
from tests.providers.test_history_reads import long_session

STAMP = "2026-04-19T00:00:00.000Z"
RULE = "test-key"


def value_of(entry: Entry) -> Any:
    """The test rule: a custom entry's ``data.ref``, a tool result's ``details.ref``."""
    payload = entry.get("data") if entry.get("type") == "custom" else (entry.get("message") or {}).get("details")
    return payload.get("ref") if isinstance(payload, dict) else None


@pytest.fixture
def rule():
    entry_keys.register_entry_key(RULE, key=value_of, custom_types=("x-ref",), tool_names=("ref_tool",))
    yield RULE
    entry_keys.unregister_entry_key(RULE)


def custom(entry_id: str, parent: str | None, data: Any, custom_type: str = "x-ref") -> Entry:
    return {"type": "custom", "id": entry_id, "parentId": parent, "timestamp": STAMP, "customType": custom_type} | {
        "data": data
    }


def message(details: Any, tool: str = "ref_tool") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": "call-1",
        "toolName": tool,
        "content": [],
        "details": details,
        "isError": False,
    }


def tool_result(entry_id: str, parent: str | None, details: Any, tool: str = "ref_tool") -> Entry:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": STAMP,
        "message": message(details, tool),
    }


# --- the registry -----------------------------------------------------------------------------


def test_a_rule_keys_the_entries_it_names_and_nothing_else(rule):
    assert entry_keys.entry_key(custom("a", None, {"ref": "r1"})) == "test-key:r1"
    assert entry_keys.entry_key(tool_result("b", None, {"ref": "r2"})) == "test-key:r2"
    assert entry_keys.key_of(RULE, "r1") == "test-key:r1"
    for entry in (
        custom("c", None, {"ref": "r1"}, custom_type="x-other"),  # a custom type it does not name
        tool_result("d", None, {"ref": "r1"}, tool="other_tool"),
        custom("e", None, {"ref": ""}),  # an empty value
        custom("f", None, {"ref": 7}),  # not a string
        custom("g", None, None),
        custom("h", None, {"ref": "x" * entry_keys.MAX_KEY_LENGTH}),  # longer than a storage keeps
        {"type": "custom_message", "id": "i", "customType": "x-ref", "content": "t", "data": {"ref": "r1"}},
        {"type": "message", "id": "j", "message": "not an object"},
        {"type": "label", "id": "k", "targetId": "a"},
    ):
        assert entry_keys.entry_key(entry) is None, entry
    assert entry_keys.key_of(RULE, "x" * entry_keys.MAX_KEY_LENGTH) is None
    assert entry_keys.key_of(RULE, None) is None


def test_rules_are_checked_when_registered(rule):
    for name in ("", "a:b", None):
        with pytest.raises(ValueError, match="name"):
            entry_keys.register_entry_key(name, key=value_of, custom_types=("y",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="names no custom type"):
        entry_keys.register_entry_key("empty", key=value_of)
    with pytest.raises(ValueError, match="keyed by 'test-key'"):
        entry_keys.register_entry_key("other", key=value_of, custom_types=("x-ref",))
    with pytest.raises(ValueError, match="keyed by 'test-key'"):
        entry_keys.register_entry_key("other", key=value_of, tool_names=("ref_tool",))
    assert "other" not in entry_keys.signature()
    # The same name again replaces the rule; a new version changes the signature.
    before = entry_keys.signature()
    entry_keys.register_entry_key(RULE, key=value_of, custom_types=("x-ref",), tool_names=("ref_tool",), version=2)
    assert entry_keys.signature() != before and "test-key@2" in entry_keys.signature()
    entry_keys.unregister_entry_key(RULE)
    assert "test-key" not in entry_keys.signature()
    assert entry_keys.entry_key(custom("a", None, {"ref": "r1"})) is None


# --- on every storage ---------------------------------------------------------------------------


def keyed_session(count: int) -> list[Entry]:
    """A long session with keyed entries spread through it: refs repeat (two
    entries may carry one value), one of another type, one with no value."""
    entries = long_session(count)
    last = entries[-1]["id"]
    extra = [
        custom("k0000001", None, {"ref": "one"}),
        tool_result("k0000002", None, {"ref": "two"}),
        custom("k0000003", None, {"ref": "one"}),
        custom("k0000004", None, {"ref": "one"}, custom_type="x-other"),
        tool_result("k0000005", None, {"ref": "ONE"}),  # another value (a collation may not think so)
        custom("k0000006", None, {"noref": True}),
    ]
    for entry in extra:
        entry["parentId"] = last
        entries.append(entry)
        last = entry["id"]
    return entries


def expected(entries: list[Entry], value: str) -> list[str]:
    key = entry_keys.key_of(RULE, value)
    return [e["id"] for e in entries if entry_keys.entry_key(e) == key]


def keyed_ids(provider, session_id: str, value: str) -> list[str]:
    key = entry_keys.key_of(RULE, value)
    assert key is not None
    with provider.read(session_id) as view:
        return [e["id"] for e in keyed_reads.entries_with_key(view, key)]


def test_entries_are_found_by_their_key(any_provider, rule):
    provider = any_provider
    entries = keyed_session(300)
    provider.create_session(session_id="keys", entries=entries)
    # One by one too (the append path of each storage), a child of the leaf.
    appended = [
        provider.append_custom_entry("keys", "x-ref", {"ref": "two"}),
        provider.append_message("keys", message({"ref": "one"})),
    ]
    every = [*entries, *appended]
    assert [e["id"] for e in every if entry_keys.entry_key(e)] and len(appended) == 2
    for value in ("one", "two", "ONE", "none"):
        assert keyed_ids(provider, "keys", value) == expected(every, value), value
    assert keyed_ids(provider, "keys", "one") == ["k0000001", "k0000003", appended[1]["id"]]
    # A new process (the file storage from its sidecar) finds the same.
    clear_index_cache()
    for value in ("one", "two", "ONE"):
        assert keyed_ids(provider, "keys", value) == expected(every, value), value


def test_an_entry_completed_in_flight_is_found_by_its_final_key(any_provider, rule):
    provider = any_provider
    provider.create_session(session_id="flight", entries=long_session(20))
    started = provider.begin_in_flight_entry("flight", {"type": "message", "message": message({"ref": "early"})})
    assert keyed_ids(provider, "flight", "early") == [started["id"]]
    provider.update_in_flight_entry("flight", started["id"], {"message": message({"ref": "final"})}, complete=True)
    assert keyed_ids(provider, "flight", "early") == []
    assert keyed_ids(provider, "flight", "final") == [started["id"]]


def test_an_erased_entry_is_no_longer_found_by_its_key(provider, rule):
    entries = keyed_session(40)
    provider.create_session(session_id="erased", entries=entries)
    assert keyed_ids(provider, "erased", "one") == ["k0000001", "k0000003"]
    services.erasure.erase_entry(
        session_id="erased",
        entry_id="k0000001",
        reason="test",
        actor="system",
        channel="internal",
        scope="entry",
        provider=provider,
    )
    assert keyed_ids(provider, "erased", "one") == ["k0000003"]


def test_a_sidecar_written_under_other_rules_is_not_read(tmp_path, db, rule):
    """The ``file`` storage's sidecar holds the keys its rules gave: a
    process with other rules reads the file again instead."""
    from tests.contract.conftest import make_provider

    provider = make_provider("file", tmp_path)
    provider.create_session(session_id="rules", entries=keyed_session(300))
    assert keyed_ids(provider, "rules", "one") == ["k0000001", "k0000003"]
    assert any(file_sidecar.path_of(path).exists() for path in (tmp_path / "sessions").rglob("*.jsonl"))
    entry_keys.register_entry_key(RULE, key=lambda e: "same", custom_types=("x-ref",), version=2)
    clear_index_cache()
    assert keyed_ids(provider, "rules", "same") == ["k0000001", "k0000003", "k0000006"]


# --- rows stored before the column ----------------------------------------------------------------


def test_the_migration_keys_the_rows_stored_before_it(db, rule, tmp_path):
    from tests.contract.conftest import make_provider

    provider = make_provider("mysql", tmp_path)
    entries = keyed_session(50)
    provider.create_session(session_id="backfill", entries=entries)
    table = connection.ops.quote_name("neta_agent_session_entry")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET entry_key = NULL")
    assert keyed_ids(provider, "backfill", "one") == []  # the rows as an older version stored them
    migration = importlib.import_module("sessiontree.migrations.0025_entry_key")
    # What the migration's RunPython is given (the schema editor's connection
    # and quoting; SQLite's editor cannot open inside the test's transaction).
    editor = SimpleNamespace(connection=connection, quote_name=connection.ops.quote_name)
    migration.key_stored_rows(django_apps, editor)
    for value in ("one", "two", "ONE"):
        assert keyed_ids(provider, "backfill", value) == expected(entries, value), value


def test_which_storages_know_every_key(any_provider, rule, request):
    """``keys_complete``: the ``file`` index computed every line's key under
    the rules in force (not once they changed), the generic answer computes
    every entry's; a ``mysql`` row may have been stored without a rule."""
    provider = any_provider
    provider.create_session(session_id="complete", entries=keyed_session(20))
    kind = request.node.callspec.params["any_provider"]
    with provider.read("complete") as view:
        assert keyed_reads.keys_complete(view) is (kind != "mysql"), kind
    entry_keys.register_entry_key(RULE, key=value_of, custom_types=("x-ref",), version=2)
    with provider.read("complete") as view:
        assert keyed_reads.keys_complete(view) is (kind not in ("mysql", "file")), kind
    clear_index_cache()  # a new process: the file read again under the new rules
    with provider.read("complete") as view:
        assert keyed_reads.keys_complete(view) is (kind != "mysql"), kind
