"""The roleplay model's context reads what it returns (issue 23): the
messages from the entries the context needs (the storage's path facts) and
the state by the keyed reduction, never the whole path; the result equals
the one built from the whole root-to-leaf path (random trees on both
providers, a long roleplay session with branch summaries and compactions),
and its statements do not grow with the session."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.context import build_roleplay_context, roleplay_context_from_path
from roleplay.services import reads
from sessiontree.core.errors import EntryNotFound
from sessiontree.core.path import get_path_to_leaf
from tests.roleplay.test_state_reads import STAMP, build_tree, long_roleplay_session, no_walk, patched, steps

pytestmark = pytest.mark.django_db

_sessions = itertools.count()


def refusing_whole_paths(provider):
    """The provider's whole-path read, refused."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the whole path was read")

    return patched(provider, "get_active_path", refused)


def keyed(provider, session_id: str, **kwargs: Any) -> Any:
    with patched(reads, "walked_path_ids", no_walk), refusing_whole_paths(provider):
        return build_roleplay_context(provider, session_id, **kwargs)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(steps, min_size=1, max_size=30),
    roleplay=st.sampled_from(["all", "turns", "none"]),
    at=st.integers(min_value=0, max_value=1 << 30),
)
def test_the_context_at_any_entry_is_the_whole_paths(provider, plan, roleplay, at):
    entries = build_tree(plan, roleplay)
    session_id = f"rpc-{next(_sessions)}"
    provider.create_session(session_id=session_id, entries=entries)
    leaf = entries[at % len(entries)]["id"]
    want = roleplay_context_from_path(get_path_to_leaf(entries, leaf))
    assert keyed(provider, session_id, leaf_entry_id=leaf) == want
    assert keyed(provider, session_id) == roleplay_context_from_path(get_path_to_leaf(entries, entries[-1]["id"]))


def with_summaries_and_compactions(count: int) -> list[dict[str, Any]]:
    """``long_roleplay_session`` with a branch summary and a compaction on the
    main path now and then (what the roleplay context drops and starts from)."""
    entries = long_roleplay_session(count)
    out: list[dict[str, Any]] = []
    for entry in entries:
        out.append(entry)
        at = len(out)
        if entry["parentId"] is not None and at % 211 == 0:
            out.append(
                {
                    "type": "branch_summary",
                    "id": f"b{at:07x}",
                    "parentId": entry["id"],
                    "timestamp": STAMP,
                    "fromId": entry["parentId"],
                    "summary": f"left branch {at}",
                }
            )
        elif entry["parentId"] is not None and at % 401 == 0:
            out.append(
                {
                    "type": "compaction",
                    "id": f"c{at:07x}",
                    "parentId": entry["id"],
                    "timestamp": STAMP,
                    "summary": f"compacted {at}",
                    "firstKeptEntryId": out[-40]["id"],
                    "tokensBefore": at,
                }
            )
    # Each entry's parent is the one before it on its own path: re-chain those that followed an inserted one.
    previous: dict[str, str] = {}
    for i, entry in enumerate(out):
        if entry["type"] in ("branch_summary", "compaction"):
            previous[entry["parentId"]] = entry["id"]
        elif entry["parentId"] in previous and i and out[i - 1]["id"] == previous[entry["parentId"]]:
            entry["parentId"] = previous.pop(entry["parentId"])
    return out


def test_a_long_roleplay_session_is_read_by_key(provider):
    entries = with_summaries_and_compactions(1600)
    provider.create_session(session_id="long", entries=entries)
    path = get_path_to_leaf(entries, entries[-1]["id"])
    assert any(e["type"] == "branch_summary" for e in path) and any(e["type"] == "compaction" for e in path)
    for leaf in (entries[-1]["id"], path[-30]["id"], path[len(path) // 2]["id"], entries[5]["id"]):
        want = roleplay_context_from_path(get_path_to_leaf(entries, leaf))
        got = keyed(provider, "long", leaf_entry_id=leaf)
        assert got == want, leaf
    latest = keyed(provider, "long")
    assert (
        latest["roleplay"]["removed_branch_summary_entry_ids"] or latest["messages"][0]["role"] == "compactionSummary"
    )
    assert latest["roleplay"]["character_id"] is not None


def test_no_leaf_and_an_unknown_leaf(provider):
    entries = long_roleplay_session(60)
    provider.create_session(session_id="s", entries=entries)
    assert keyed(provider, "s", leaf_entry_id=None) == roleplay_context_from_path([])
    with pytest.raises(EntryNotFound, match="Entry nope not found in session s"):
        keyed(provider, "s", leaf_entry_id="nope")


def statements(provider, session_id: str) -> int:
    build_roleplay_context(provider, session_id)  # warm: the file index
    with CaptureQueriesContext(connection) as queries:
        context = build_roleplay_context(provider, session_id)
    assert context["roleplay"]["character_id"] is not None
    return len(queries)


def compacted_at_the_end(count: int) -> list[dict[str, Any]]:
    """``long_roleplay_session`` compacted near its end: its context holds the
    same messages at any length (as a long conversation's does)."""
    entries = long_roleplay_session(count, every=100)
    compaction = {
        "type": "compaction",
        "id": "c-end",
        "parentId": entries[-1]["id"],
        "timestamp": STAMP,
        "summary": "so far",
        "firstKeptEntryId": entries[-40]["id"],
        "tokensBefore": count,
    }
    tail = [compaction]
    for i in range(20):
        role = "user" if i % 2 else "assistant"
        message = {"role": role, "content": f"after {i}", **({"model": "m"} if role == "assistant" else {})}
        tail.append(
            {"type": "message", "id": f"t{i:04d}", "parentId": tail[-1]["id"], "timestamp": STAMP, "message": message}
        )
    return [*entries, *tail]


def test_statements_do_not_grow_with_the_session(provider):
    provider.create_session(session_id="short", entries=compacted_at_the_end(1000))
    provider.create_session(session_id="long", entries=compacted_at_the_end(5000))
    assert statements(provider, "short") == statements(provider, "long")
