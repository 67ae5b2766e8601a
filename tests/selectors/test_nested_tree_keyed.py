"""The REST API's tree window of a large session, read by key (issue 23):
the start node, each level's children, the window's payloads and the labels
aimed at it, never the whole skeleton; the answer equals the one laid out
from the whole skeleton (which small sessions use) on random trees, at
every depth, from the roots and from any entry, with an entry in flight."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.core.errors import EntryNotFound
from sessiontree.selectors import nested_tree as nt
from tests.whole_reads import whole_reads_refused

pytestmark = pytest.mark.django_db

TS = "2026-04-19T00:00:00.000Z"


def bushy_tree(seed: int, count: int) -> list[dict]:
    """A line with many branches (some of them long), labels set and cleared."""
    rng = random.Random(seed)
    entries: list[dict] = []
    for i in range(count):
        parent = None
        if entries:
            parent = entries[-1]["id"] if rng.random() < 0.75 else rng.choice(entries)["id"]
        roll = rng.random()
        if entries and roll < 0.1:
            entry: dict[str, Any] = {
                "type": "label",
                "targetId": rng.choice(entries)["id"],
                "label": rng.choice(["a", "b", ""]),
            }
        elif roll < 0.15:
            entry = {"type": "model_change", "provider": "p", "modelId": f"m{i}"}
        else:
            role = rng.choice(["user", "assistant", "toolResult"])
            entry = {"type": "message", "message": {"role": role, "content": f"m{i}"}}
        entries.append({"id": f"n{seed:02d}{i:05x}", "parentId": parent, "timestamp": TS, **entry})
    return entries


def keyed(provider, monkeypatch, **kwargs):
    """``nested_tree`` with the window read by key, the whole-session reads refused."""
    with monkeypatch.context() as patch, whole_reads_refused(provider, monkeypatch):
        patch.setattr(nt, "KEYED_FROM", 0)
        return nt.nested_tree(provider, "s", **kwargs)


def whole(provider, monkeypatch, **kwargs):
    with monkeypatch.context() as patch:
        patch.setattr(nt, "KEYED_FROM", 10**12)
        return nt.nested_tree(provider, "s", **kwargs)


def cases(entries: list[dict], rng: random.Random) -> list[dict]:
    some = rng.sample([e["id"] for e in entries], 12)
    return [
        {},
        {"depth": 0},
        {"depth": 1},
        {"depth": 7},
        {"depth": nt.MAX_TREE_DEPTH},
        *({"root": entry_id, "depth": rng.choice([0, 2, 5, 50])} for entry_id in some),
    ]


@pytest.mark.parametrize("seed", range(3))
def test_the_window_read_by_key_equals_the_one_from_the_whole_skeleton(provider, monkeypatch, seed):
    entries = bushy_tree(seed, 400)
    provider.create_session(session_id="s", entries=entries)
    for kwargs in cases(entries, random.Random(seed)):
        want = whole(provider, monkeypatch, **kwargs)
        assert keyed(provider, monkeypatch, **kwargs) == want, kwargs
    assert any(node["children"] for node in want["roots"]) or want["roots"][0]["child_count"] == 0


def test_an_entry_in_flight_is_in_the_window(provider, monkeypatch):
    entries = bushy_tree(5, 120)
    provider.create_session(session_id="s", entries=entries)
    provider.begin_in_flight_entry("s", {"type": "message", "message": {"role": "assistant", "content": ""}})
    leaf = provider.get_session("s")["leaf_entry_id"]
    for kwargs in ({}, {"root": leaf, "depth": 3}, {"depth": nt.MAX_TREE_DEPTH}):
        assert keyed(provider, monkeypatch, **kwargs) == whole(provider, monkeypatch, **kwargs)


def test_an_unknown_root_is_entry_not_found_both_ways(provider, monkeypatch):
    provider.create_session(session_id="s", entries=bushy_tree(6, 30))
    with pytest.raises(EntryNotFound):
        keyed(provider, monkeypatch, root="nope")
    with pytest.raises(EntryNotFound):
        whole(provider, monkeypatch, root="nope")


def test_a_large_session_is_read_by_key_by_default(provider, monkeypatch):
    """From ``KEYED_FROM`` entries on, without any patching of the threshold."""
    entries = bushy_tree(8, nt.KEYED_FROM + 10)
    provider.create_session(session_id="s", entries=entries)
    calls: list[int] = []
    original = nt._keyed_levels

    def spy(*args: Any) -> Any:
        found = original(*args)
        calls.append(found is not None)
        return found

    monkeypatch.setattr(nt, "_keyed_levels", spy)
    got = nt.nested_tree(provider, "s", depth=4)
    assert calls == [True]
    assert got == whole(provider, monkeypatch, depth=4)


def statements(provider, session_id: str, **kwargs) -> int:
    nt.nested_tree(provider, session_id, **kwargs)  # warm: the file storage indexes its file once
    with CaptureQueriesContext(connection) as captured:
        nt.nested_tree(provider, session_id, **kwargs)
    return len(captured.captured_queries)


def line(count: int) -> list[dict]:
    entries: list[dict] = []
    for i in range(count):
        entries.append(
            {
                "id": f"e{i:06d}",
                "parentId": entries[-1]["id"] if entries else None,
                "timestamp": TS,
                "type": "message",
                "message": {"role": "user", "content": f"m{i}"},
            }
        )
    return entries


def test_statements_follow_the_window_not_the_session(provider, monkeypatch):
    """The same window of a session 8x longer takes as many statements."""
    monkeypatch.setattr(nt, "KEYED_FROM", 0)
    provider.create_session(session_id="small", entries=line(500))
    provider.create_session(session_id="large", entries=line(4000))
    for kwargs in ({"depth": 20}, {"root": "e000300", "depth": 20}):
        assert statements(provider, "small", **kwargs) == statements(provider, "large", **kwargs), kwargs
