"""Children, subtrees and the entries aimed at an entry, read by key
(``keyed_reads.children_of``/``child_ids``/``subtree``/``entries_targeting``),
equal what the whole session says, on every storage: random trees with
branches, labels and context edits, read as stored, with an entry in flight
and with entries written in the same unit (a file storage's pending lines)."""

from __future__ import annotations

import random

import pytest

from sessiontree.providers import keyed_reads
from tests.contract.conftest import make_provider

pytestmark = pytest.mark.django_db

TS = "2026-04-19T00:00:00.000Z"


def random_tree(seed: int, count: int) -> list[dict]:
    rng = random.Random(seed)
    entries: list[dict] = []
    for i in range(count):
        entry_id = f"k{seed:02d}{i:05x}"
        parent = None
        if entries:
            # Mostly the previous entry (a line), sometimes an earlier one (a branch).
            parent = entries[-1]["id"] if rng.random() < 0.8 else rng.choice(entries)["id"]
        roll = rng.random()
        if entries and roll < 0.08:
            entry = {"type": "label", "targetId": rng.choice(entries)["id"], "label": rng.choice(["a", "b", ""])}
        elif entries and roll < 0.12:
            entry = {"type": "context_edit", "targetId": rng.choice(entries)["id"], "replacement": None}
        else:
            entry = {"type": "message", "message": {"role": "user", "content": f"m{i}"}}
        entries.append({"id": entry_id, "parentId": parent, "timestamp": TS, **entry})
    return entries


def expected(entries: list[dict]) -> tuple[dict[str, list[str]], dict[str, list[dict]]]:
    children: dict[str, list[str]] = {e["id"]: [] for e in entries}
    targeting: dict[str, list[dict]] = {}
    for entry in entries:
        if entry.get("parentId") is not None:
            children[entry["parentId"]].append(entry["id"])
        if entry["type"] in ("label", "context_edit"):
            targeting.setdefault(entry["targetId"], []).append(entry)
    return children, targeting


def below(children: dict[str, list[str]], entry_id: str, order: list[str]) -> list[str]:
    found = {entry_id}
    stack = [entry_id]
    while stack:
        for kid in children[stack.pop()]:
            found.add(kid)
            stack.append(kid)
    return [i for i in order if i in found]


def check(view, entries: list[dict]) -> None:
    children, targeting = expected(entries)
    order = [e["id"] for e in entries]
    parents = {e["id"]: e.get("parentId") for e in entries}
    assert keyed_reads.children_of(view, order) == children
    for entry_id in order:
        assert keyed_reads.child_ids(view, entry_id) == children[entry_id]
        under = keyed_reads.subtree(view, entry_id)
        assert list(under) == below(children, entry_id, order)
        assert under == {i: parents[i] for i in under}
        for types in (("label",), ("context_edit",), ("label", "context_edit")):
            want = [e["id"] for e in targeting.get(entry_id, []) if e["type"] in types]
            assert [e["id"] for e in keyed_reads.entries_targeting(view, entry_id, types)] == want
    for types in (("label",), ("label", "context_edit")):
        some = order[::7]
        want = [e["id"] for e in entries if e["type"] in types and e.get("targetId") in set(some)]
        assert [e["id"] for e in keyed_reads.entries_targeting_any(view, some, types)] == want
        assert keyed_reads.count_types(view, types) == sum(1 for e in entries if e["type"] in types)
    root = order[0]
    assert keyed_reads.root_ids(view, 5) == [root]
    for entry_id in order[:: max(1, len(order) // 20)]:
        size = len(below(children, entry_id, order))
        assert keyed_reads.subtree_within(view, entry_id, size) == keyed_reads.subtree(view, entry_id)
        if size > 1:
            assert keyed_reads.subtree_within(view, entry_id, size - 1) is None
    # Disjoint subtrees in one read: the children of each branch point.
    for entry_id in order:
        kids = children[entry_id]
        if len(kids) < 2:
            continue
        for limit in (1, 3, 10_000):
            together = keyed_reads.subtrees(view, kids, limit=limit)
            for kid in kids:
                full = keyed_reads.subtree(view, kid)
                if len(full) <= limit:
                    assert together[kid] == full and list(together[kid]) == list(full)
                else:  # read in part: more than the limit, all of them in the subtree, in append order
                    part = together[kid]
                    assert len(part) > limit and part.items() <= full.items()
                    assert list(part) == [i for i in full if i in part]
    assert keyed_reads.children_of(view, ["nope"]) == {"nope": []}
    # A path and its entries' children together: as the two reads give them.
    for entry_id in order[:: max(1, len(order) // 15)]:
        for steps in (0, 1, 25, 10_000):
            ids = keyed_reads.path_ids(view, entry_id, steps)
            assert keyed_reads.path_and_children(view, entry_id, steps) == (ids, {i: children[i] for i in ids})
    # The entries aimed at some, after a line was read around its end (the
    # ``mysql`` storage answers from the rows read where it can): the same.
    for entry_id in (order[-1], order[len(order) // 2], order[5]):
        keyed_reads.path_and_children(view, entry_id, 25)
        for types in (("label",), ("label", "context_edit")):
            for some in (order[::7], order[-60:], [*order[:5], *order[-5:]]):
                want = [e["id"] for e in entries if e["type"] in types and e.get("targetId") in set(some)]
                assert [e["id"] for e in keyed_reads.entries_targeting_any(view, some, types)] == want
    # Types by key, after the walks above (a storage may answer from what they read): the stored ones.
    types = {e["id"]: e["type"] for e in entries}
    assert keyed_reads.entry_types(view, [*order[::-3], "nope"]) == {i: types[i] for i in order[::-3]}
    assert keyed_reads.subtree(view, "nope") == {}
    # The levels below some entries, level by level, each parent's children in append order.
    for starts in ([root], order[:: max(1, len(order) // 5)]):
        for depth in (0, 1, 3, 60):
            want, level, seen = [], list(dict.fromkeys(starts)), set(starts)
            while len(want) < depth:
                next_level = [(kid, parent) for parent in level for kid in children[parent] if kid not in seen]
                seen.update(kid for kid, _ in next_level)
                if not next_level:
                    break
                want.append(next_level)
                level = [kid for kid, _ in next_level]
            got = keyed_reads.levels_below(view, starts, depth)
            # A level's order: append order (mysql, by seq) or parent by parent (generic): compare as sets per
            # level, and each parent's children in append order.
            assert [sorted(x) for x in got] == [sorted(x) for x in want], (starts, depth)
            for level_got in got:
                by_parent: dict[str, list[str]] = {}
                for kid, parent in level_got:
                    by_parent.setdefault(parent, []).append(kid)
                assert all(kids == [k for k in children[parent] if k in kids] for parent, kids in by_parent.items())
    # The latest branch tips among the last entries, latest first (positions as ids_in_order gives them).
    positions = dict((entry_id, at) for at, entry_id in keyed_reads.ids_in_order(view, 0, len(order) + 1))
    tips = [i for i in reversed(order) if not children[i]]
    for limit, scan in ((1, 1), (3, 10), (5, 60), (10_000, 10_000)):
        want = [(positions[i], i) for i in tips if i in set(order[-scan:])][:limit]
        assert keyed_reads.latest_tips(view, limit, scan) == want, (limit, scan)
        tail = keyed_reads.tail_parents(view, scan)
        assert [(at, i) for at, i, _ in tail] == [(positions[i], i) for i in order[-scan:]]
        assert keyed_reads.tips_in(view, tail, limit) == want, (limit, scan)


@pytest.mark.parametrize("seed", range(4))
def test_keyed_children_and_targets_equal_the_whole_session(any_provider, seed):
    entries = random_tree(seed, 240)
    any_provider.create_session(session_id="s", entries=entries)
    with any_provider.read("s") as view:
        check(view, entries)


def test_an_entry_in_flight_is_a_child_of_its_parent(any_provider):
    entries = random_tree(7, 60)
    any_provider.create_session(session_id="s", entries=entries)
    leaf = any_provider.get_session("s")["leaf_entry_id"]
    streaming = any_provider.begin_in_flight_entry(
        "s", {"type": "message", "message": {"role": "assistant", "content": ""}}
    )
    entry = {**streaming, "parentId": leaf}
    with any_provider.read("s") as view:
        check(view, [*entries, entry])


def test_entries_written_in_the_same_unit_are_seen(any_provider):
    entries = random_tree(11, 60)
    any_provider.create_session(session_id="s", entries=entries)
    seen: list[dict] = []

    def work(writer):
        first = writer.append({"type": "message", "message": {"role": "user", "content": "one"}})
        second = writer.append({"type": "label", "targetId": first["id"], "label": "x"})
        seen.extend([first, second])
        check(writer._txn, [*entries, first, second])

    any_provider.transact("s", work)
    with any_provider.read("s") as view:
        check(view, [*entries, *seen])


def test_subtrees_far_from_the_end_are_walked_down_by_parent(provider, monkeypatch):
    """The ``mysql`` storage reads the subtrees of entries near the end of the
    session from its last rows, and walks down by parent when those rows
    are too many: both give what the whole session says."""
    from sessiontree.providers import mysql_provider

    monkeypatch.setattr(mysql_provider, "TAIL_SCAN", 3)
    entries = random_tree(5, 240)
    provider.create_session(session_id="s", entries=entries)
    with provider.read("s") as view:
        check(view, entries)


def test_counts_by_type_follow_appends(any_provider):
    """Counted once, the counts stay right as entries arrive (the file index keeps them up to date)."""
    entries = random_tree(9, 80)
    any_provider.create_session(session_id="s", entries=entries)
    with any_provider.read("s") as view:
        assert keyed_reads.count_types(view, ("label",)) == sum(1 for e in entries if e["type"] == "label")
    target = entries[3]["id"]
    for n in range(5):
        any_provider.append_entry("s", {"type": "label", "targetId": target, "label": f"x{n}"})
    with any_provider.read("s") as view:
        assert keyed_reads.count_types(view, ("label",)) == sum(1 for e in entries if e["type"] == "label") + 5
        assert (
            keyed_reads.count_types(view, ("label", "context_edit"))
            == sum(1 for e in entries if e["type"] in ("label", "context_edit")) + 5
        )


def test_types_a_walk_read_need_no_statement(db):
    """The ``mysql`` storage's walks (a path up, the children of a line) read
    each row's type with its parent: the tree page's markers among its line
    then cost no statement more (issue 23: 4 ms of the page at 100k on MariaDB)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessiontree.providers.factory import get_provider

    provider = get_provider("mysql")
    entries = random_tree(11, 300)
    provider.create_session(session_id="typed", entries=entries)
    types = {e["id"]: e["type"] for e in entries}
    leaf = entries[-1]["id"]
    with provider.read("typed") as view:
        line = keyed_reads.path_ids(view, leaf, 50)
        kids = keyed_reads.children_of(view, line)
        seen = [*line, *(kid for found in kids.values() for kid in found)]
        with CaptureQueriesContext(connection) as captured:
            assert keyed_reads.entry_types(view, seen) == {i: types[i] for i in seen}
        assert captured.captured_queries == []
    with provider.read("typed") as view:
        with CaptureQueriesContext(connection) as captured:
            line, kids = keyed_reads.path_and_children(view, leaf, 80)
        # The line and its children in one range of rows around its end, and
        # one walk above the range where the line leaves it (this tree's
        # branches hang from anywhere): two statements at most.
        assert 1 <= len(captured.captured_queries) <= 2
        seen = [*line, *(kid for found in kids.values() for kid in found)]
        with CaptureQueriesContext(connection) as captured:
            assert keyed_reads.entry_types(view, seen) == {i: types[i] for i in seen}
        assert captured.captured_queries == []
        other = [i for i in types if i not in set(seen)][:5]
        with CaptureQueriesContext(connection) as captured:
            assert keyed_reads.entry_types(view, [*seen[:3], *other]) == {i: types[i] for i in [*seen[:3], *other]}
        assert len(captured.captured_queries) == 1  # the others only, in one statement


def test_tips_in_a_tail_whose_parents_are_not_all_ids():
    """A parent that is not an id (a list, a number: a damaged entry held by a
    storage that keeps parents as stored) names no entry: it is not a parent."""

    class View:
        def children_of(self, ids):
            return {entry_id: [] for entry_id in ids}

    tail = [(0, "a", None), (1, "b", ["a"]), (2, "c", "a"), (3, "d", 7)]
    assert keyed_reads.tips_in(View(), tail, 10) == [(3, "d"), (2, "c"), (1, "b")]


def user_message(entry_id: str, parent_id: str) -> dict:
    return {
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": TS,
        "type": "message",
        "message": {"role": "user", "content": entry_id},
    }


def disordered(entries: list[dict]) -> list[dict]:
    """``entries`` with a few stored before their parents (a copy in another
    order, as a hand-edited file can hold): the root stays first."""
    moved = [entries[i] for i in (len(entries) - 40, len(entries) // 2, len(entries) // 3)]
    rest = [entry for entry in entries if entry not in moved]
    return [rest[0], *moved, *rest[1:]]


@pytest.mark.parametrize("seed", range(3))
def test_keyed_reads_of_a_session_stored_out_of_order_equal_the_whole_session(any_provider, seed):
    """Children stored before their parents are children all the same, as Pi
    links them (it looks a parent up among all the file's entries). The
    ``mysql`` storage's reads from the rows appended after an entry (a
    subtree, a line's children) are for sessions stored in order only: its
    subtrees of the entries near the end missed them before (read from the
    rows after the earliest of the entries). The ``file`` index made such an
    entry a root for good, its parent childless."""
    entries = disordered(random_tree(seed, 240))
    any_provider.create_session(session_id="s", entries=entries)
    with any_provider.read("s") as view:
        assert getattr(view, "in_order", False) is False
        check(view, entries)
    # The same file read again by a new process: from the whole file, and from its sidecar.
    if any_provider.kind == "file":
        from sessiontree.providers.file_provider import clear_index_cache

        for _ in range(2):
            clear_index_cache()
            with any_provider.read("s") as view:
                check(view, entries)


def test_an_entry_stored_before_its_parent_joins_it_when_the_parent_is_appended(any_provider):
    """A copy whose parent is not stored yet starts a tree until the parent
    comes (in a later write, on a file: a later extend of its index, or after
    the index was read back from its sidecar); then it is that parent's child."""
    from sessiontree.core.path import tree_stats

    entries = random_tree(21, 40)
    any_provider.create_session(session_id="s", entries=entries[:30])
    early = {**entries[35], "parentId": "late0001"}
    any_provider.transact("s", lambda writer: writer.copy_entry(dict(early)))
    with any_provider.read("s") as view:
        assert early["id"] in keyed_reads.root_ids(view, 5)
    if any_provider.kind == "file":  # the next write's index comes from the sidecar (a new process)
        from tests.providers.test_file_sidecar import saved

        assert saved(any_provider, "s").is_file()
    late = user_message("late0001", entries[29]["id"])
    any_provider.transact("s", lambda writer: writer.copy_entry(dict(late)))
    stored = [*entries[:30], early, late]
    with any_provider.read("s") as view:
        assert keyed_reads.children_of(view, ["late0001"]) == {"late0001": [early["id"]]}
        assert keyed_reads.root_ids(view, 5) == [entries[0]["id"]]
    stats = tree_stats(stored)
    session = any_provider.get_session("s")
    assert (session["entry_count"], session["branch_count"], session["root_entry_id"]) == (
        stats.entry_count,
        stats.branch_count,
        stats.root_entry_id,
    )


def test_the_mysql_session_row_says_whether_its_entries_were_stored_in_order(db, tmp_path):
    """``rows_in_order``: set by a create whose entries each follow their
    parent, kept by appends and copies in order, cleared for good by an entry
    copied before its parent, and recomputed from the rows by a repair."""
    from sessiontree.models import AgentSession

    provider = make_provider("mysql", tmp_path)

    def in_order(session_id: str) -> bool:
        return AgentSession.objects.get(session_id=session_id).rows_in_order

    entries = random_tree(4, 60)
    provider.create_session(session_id="a", entries=entries)
    provider.create_session(session_id="empty")
    provider.create_session(session_id="b", entries=disordered(random_tree(5, 240)))
    assert in_order("a") and in_order("empty") and not in_order("b")
    provider.append_message("a", {"role": "user", "content": "more"})
    provider.append_message("empty", {"role": "user", "content": "first"})
    assert in_order("a") and in_order("empty")

    provider.create_session(session_id="c", entries=entries[:10])
    provider.transact("c", lambda writer: [writer.copy_entry(dict(e)) for e in entries[10:30]])
    assert in_order("c")
    early, later = user_message("early001", "later001"), user_message("later001", entries[29]["id"])
    provider.transact("c", lambda writer: writer.copy_entry(early))
    assert not in_order("c")
    provider.transact("c", lambda writer: writer.copy_entry(later))
    assert not in_order("c")
    with provider.read("c") as view:
        assert keyed_reads.path_and_children(view, "later001", 3)[1]["later001"] == ["early001"]
        assert keyed_reads.children_of(view, ["later001"]) == {"later001": ["early001"]}

    # A label copied before the entry it aims at clears it too (the labels of a line are read among its rows).
    provider.create_session(session_id="d", entries=entries[:10])
    aimed = {
        "id": "aim00001",
        "parentId": entries[9]["id"],
        "timestamp": TS,
        "type": "label",
        "targetId": "tgt00001",
        "label": "early",
    }
    provider.transact("d", lambda writer: writer.copy_entry(dict(aimed)))
    assert not in_order("d")
    forward = [*entries[:10], {**aimed, "targetId": entries[20]["id"]}, *entries[10:30]]
    provider.create_session(session_id="e", entries=forward)
    assert not in_order("e")
    provider.append_entry("a", {"type": "label", "targetId": entries[3]["id"], "label": "fine"})
    assert in_order("a")

    # A repair reads it from the rows again.
    AgentSession.objects.filter(session_id="a").update(rows_in_order=False)
    provider.storage.recompute_meta("a", before_commit=None)
    provider.storage.recompute_meta("c", before_commit=None)
    provider.storage.recompute_meta("e", before_commit=None)
    assert in_order("a") and not in_order("c") and not in_order("e")
