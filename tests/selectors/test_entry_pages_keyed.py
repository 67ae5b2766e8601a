"""Pages of a session's entries read by key from a position (issue 23):
``keyed_reads.ids_in_order``/``position_of`` and ``entry_page_at`` give what
the append order says, of any types, forward and backward, with an entry in
flight and inside a write unit, on every storage; the project's storages
answer without reading the skeleton or every entry of a type."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sessiontree.core.errors import EntryNotFound
from sessiontree.providers import keyed_reads
from sessiontree.selectors.entries import entry_page_at
from tests.whole_reads import whole_reads_refused

pytestmark = pytest.mark.django_db

TS = "2026-04-19T00:00:00.000Z"
TYPE_SETS: list[list[str] | None] = [None, ["label"], ["message"], ["label", "model_change"], ["custom", "label"]]


def mixed_tree(seed: int, count: int) -> list[dict]:
    rng = random.Random(seed)
    entries: list[dict] = []
    for i in range(count):
        parent = None
        if entries:
            parent = entries[-1]["id"] if rng.random() < 0.8 else rng.choice(entries)["id"]
        roll = rng.random()
        if entries and roll < 0.1:
            entry: dict[str, Any] = {"type": "label", "targetId": rng.choice(entries)["id"], "label": "x"}
        elif roll < 0.14:
            entry = {"type": "model_change", "provider": "p", "modelId": f"m{i}"}
        else:
            entry = {"type": "message", "message": {"role": "user", "content": f"m{i}"}}
        entries.append({"id": f"q{seed:02d}{i:05x}", "parentId": parent, "timestamp": TS, **entry})
    return entries


def check_order(view, entries: list[dict], rng: random.Random) -> None:
    order = [e["id"] for e in entries]
    positions = [keyed_reads.position_of(view, entry_id) for entry_id in order]
    assert all(isinstance(at, int) for at in positions)
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert keyed_reads.position_of(view, "nope") is None
    by_type = {e["id"]: e["type"] for e in entries}
    probes = sorted({0, positions[0], positions[-1], positions[-1] + 1, *rng.sample(positions, 8)})
    for types in TYPE_SETS:
        chosen = [(at, i) for at, i in zip(positions, order, strict=True) if types is None or by_type[i] in types]
        for start in probes:
            for limit in (1, 3, 50, 10_000):
                after = [pair for pair in chosen if pair[0] >= start][:limit]
                assert keyed_reads.ids_in_order(view, start, limit, types) == after, (types, start, limit)
                before = [pair for pair in chosen if pair[0] < start][-limit:]
                assert keyed_reads.ids_in_order(view, start, limit, types, before=True) == before
        assert keyed_reads.ids_in_order(view, 0, 0, types) == []


@pytest.mark.parametrize("seed", range(3))
def test_ids_in_order_follow_the_append_order(any_provider, seed):
    entries = mixed_tree(seed, 300)
    any_provider.create_session(session_id="s", entries=entries)
    with any_provider.read("s") as view:
        check_order(view, entries, random.Random(seed))


def test_an_entry_in_flight_comes_last(any_provider):
    entries = mixed_tree(4, 80)
    any_provider.create_session(session_id="s", entries=entries)
    streaming = any_provider.begin_in_flight_entry(
        "s", {"type": "message", "message": {"role": "assistant", "content": ""}}
    )
    with any_provider.read("s") as view:
        check_order(view, [*entries, streaming], random.Random(4))


def test_entries_written_in_the_same_unit_are_seen(any_provider):
    entries = mixed_tree(5, 60)
    any_provider.create_session(session_id="s", entries=entries)

    def work(writer):
        first = writer.append({"type": "message", "message": {"role": "user", "content": "one"}})
        second = writer.append({"type": "label", "targetId": first["id"], "label": "y"})
        check_order(writer._txn, [*entries, first, second], random.Random(5))

    any_provider.transact("s", work)


def pages(provider, types, size: int, *, backward: bool = False) -> list[str]:
    """Every entry, paging with the positions each page gives."""
    seen: list[str] = []
    if not backward:
        page = entry_page_at(provider, "s", limit=size, types=types)
        while True:
            seen += [e["id"] for e in page.entries]
            if page.next_position is None:
                return seen
            page = entry_page_at(provider, "s", position=page.next_position, limit=size, types=types)
    page = entry_page_at(provider, "s", position=10**12, before=True, limit=size, types=types)
    while True:
        seen = [e["id"] for e in page.entries] + seen
        if page.previous_position is None:
            return seen
        page = entry_page_at(provider, "s", position=page.previous_position, before=True, limit=size, types=types)


def test_paging_forward_and_backward_reads_every_entry_once(any_provider):
    entries = mixed_tree(6, 230)
    any_provider.create_session(session_id="s", entries=entries)
    for types in TYPE_SETS:
        want = [e["id"] for e in entries if types is None or e["type"] in types]
        for size in (1, 7, 100, 1000):
            assert pages(any_provider, types, size) == want, (types, size)
            assert pages(any_provider, types, size, backward=True) == want, (types, size)


def test_after_starts_after_the_entry_whatever_its_type(any_provider):
    entries = mixed_tree(7, 120)
    any_provider.create_session(session_id="s", entries=entries)
    order = [e["id"] for e in entries]
    for at in (0, 17, 60, len(order) - 1):
        page = entry_page_at(any_provider, "s", limit=5, types=["label"], after=order[at])
        want = [e["id"] for e in entries[at + 1 :] if e["type"] == "label"][:5]
        assert [e["id"] for e in page.entries] == want
        assert (page.previous_position is None) == (not any(e["type"] == "label" for e in entries[: at + 1]))
    with pytest.raises(EntryNotFound):
        entry_page_at(any_provider, "s", limit=5, after="nope")


def test_the_projects_storages_page_by_key(provider, monkeypatch):
    entries = mixed_tree(8, 300)
    provider.create_session(session_id="s", entries=entries)
    with whole_reads_refused(provider, monkeypatch):
        for types in TYPE_SETS:
            want = [e["id"] for e in entries if types is None or e["type"] in types]
            assert pages(provider, types, 40) == want
            assert pages(provider, types, 40, backward=True) == want
