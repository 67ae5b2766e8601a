"""The snapshot payload: everything about one session at once."""

from __future__ import annotations

import orjson

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.snapshot import build_snapshot


def session_meta(leaf_entry_id: str | None) -> dict:
    return {
        "session_id": "0190a3c4-0000-7000-8000-000000000001",
        "provider": "file",
        "root_entry_id": "u1",
        "leaf_entry_id": leaf_entry_id,
        "cwd": "/w",
        "session_file": None,
        "parent_session_id": None,
        "agent_id": None,
        "user_id": None,
        "title": "demo",
        "status": "active",
        "metadata": {},
        "created_at": "2026-04-19T00:00:00.000Z",
        "updated_at": "2026-04-19T00:00:00.000Z",
    }


def message(entry_id, parent_id, role, content):
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": "2026-04-19T00:00:01.000Z",
        "message": {"role": role, "content": content},
    }


ENTRIES = [
    message("u1", None, "user", "root"),
    {
        "type": "label",
        "id": "l1",
        "parentId": "u1",
        "timestamp": "2026-04-19T00:00:02.000Z",
        "targetId": "u1",
        "label": "入口",
    },
    message("a1", "l1", "assistant", "branch a"),
    {
        "type": "thinking_level_change",
        "id": "t1",
        "parentId": "u1",
        "timestamp": "2026-04-19T00:00:03.000Z",
        "thinkingLevel": "high",
    },
    message("a2", "t1", "assistant", "branch b"),
    {
        "type": "compaction",
        "id": "c1",
        "parentId": "a2",
        "timestamp": "2026-04-19T00:00:04.000Z",
        "summary": "sum",
        "firstKeptEntryId": "a2",
        "tokensBefore": 10,
    },
    message("u2", "c1", "user", "after"),
    message("r2", None, "user", "second root"),
]

KEYS = {
    "session",
    "entries",
    "active_path",
    "root_entry_ids",
    "children_by_parent_id",
    "labels_by_entry_id",
    "runtime_context",
}


def test_snapshot_keys_and_contents():
    session = session_meta("u2")
    snapshot = build_snapshot(session, ENTRIES)
    assert set(snapshot) == KEYS
    assert snapshot["session"] == session
    assert snapshot["entries"] == ENTRIES
    assert snapshot["active_path"] == ["u1", "t1", "a2", "c1", "u2"]
    assert snapshot["root_entry_ids"] == ["u1", "r2"]
    assert snapshot["children_by_parent_id"] == {
        "u1": ["l1", "t1"],
        "l1": ["a1"],
        "t1": ["a2"],
        "a2": ["c1"],
        "c1": ["u2"],
    }
    assert snapshot["labels_by_entry_id"] == {
        "u1": {"label": "入口", "label_entry_id": "l1", "timestamp": "2026-04-19T00:00:02.000Z"}
    }


def test_runtime_context_is_the_context_at_the_leaf():
    for leaf in ["u2", "a1", "c1", "r2"]:
        snapshot = build_snapshot(session_meta(leaf), ENTRIES)
        assert snapshot["runtime_context"] == build_session_context(ENTRIES, leaf)
    snapshot = build_snapshot(session_meta("u2"), ENTRIES)
    assert snapshot["runtime_context"]["thinking_level"] == "high"
    assert snapshot["runtime_context"]["source_entry_ids"] == ["c1", "a2", "u2"]


def test_leaf_on_another_branch():
    snapshot = build_snapshot(session_meta("a1"), ENTRIES)
    assert snapshot["active_path"] == ["u1", "l1", "a1"]
    assert [m["content"] for m in snapshot["runtime_context"]["messages"]] == ["root", "branch a"]


def test_none_leaf_gives_an_empty_path_and_context():
    snapshot = build_snapshot(session_meta(None), ENTRIES)
    assert snapshot["active_path"] == []
    assert snapshot["runtime_context"] == {
        "messages": [],
        "thinking_level": "off",
        "model": None,
        "source_entry_ids": [],
    }
    # Everything else is still there.
    assert snapshot["entries"] == ENTRIES
    assert snapshot["root_entry_ids"] == ["u1", "r2"]


def test_empty_session():
    snapshot = build_snapshot(session_meta(None), [])
    assert snapshot["entries"] == []
    assert snapshot["active_path"] == []
    assert snapshot["children_by_parent_id"] == {}
    assert snapshot["root_entry_ids"] == []
    assert snapshot["labels_by_entry_id"] == {}


def test_snapshot_is_json_serializable_with_string_keys():
    snapshot = build_snapshot(session_meta("u2"), ENTRIES)
    decoded = orjson.loads(orjson.dumps(snapshot))
    assert decoded["root_entry_ids"] == ["u1", "r2"]
    assert decoded["active_path"] == snapshot["active_path"]


def test_entries_are_a_copy_of_the_list_not_the_callers_list():
    entries = list(ENTRIES)
    snapshot = build_snapshot(session_meta("u2"), entries)
    entries.append(message("x", "u2", "user", "later"))
    assert len(snapshot["entries"]) == len(ENTRIES)


def test_a_leaf_missing_from_the_entries_is_an_error():
    import pytest

    from sessiontree.core.errors import EntryNotFound

    session = {"session_id": "s", "leaf_entry_id": "ghost"}
    with pytest.raises(EntryNotFound, match="ghost"):
        build_snapshot(
            session, [{"type": "message", "id": "a", "parentId": None, "timestamp": "", "message": {"role": "user"}}]
        )


def test_an_entry_named_root_keeps_its_children_and_the_roots_stay_listed():
    """The roots used to share the children map under the key "root", which
    an entry with the id "root" (any string is a valid id) overwrote."""
    entries = [
        message("root", None, "user", "a"),
        message("kid", "root", "assistant", "b"),
        message("r2", None, "user", "c"),
    ]
    snapshot = build_snapshot(session_meta("kid"), entries)
    assert snapshot["root_entry_ids"] == ["root", "r2"]
    assert snapshot["children_by_parent_id"] == {"root": ["kid"]}
    assert snapshot["active_path"] == ["root", "kid"]
