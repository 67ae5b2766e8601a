"""The tree window of a large session, read by key (issue 23): what the
window shows is read around the end of its line (the path's last entries,
the root's first ones, the focused entry's neighbours, the folded branches
on the way, their labels), never the whole shape.

The oracle is the layout from the whole shape (``read_skeleton``), which
smaller sessions and other storages still use: with a window that holds the
whole line, both give the same rows; with a small window, the same entries
are reached by expanding the runs."""

from __future__ import annotations

import dataclasses
import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.selectors import tree_window as tw
from tests.providers.test_history_reads import long_session

pytestmark = pytest.mark.django_db

TS = "2026-04-19T00:00:00.000Z"


def bushy_session(seed: int, count: int) -> list[dict]:
    """``long_session`` plus labels, a longer side branch with its own
    branches, and side entries near the root."""
    rng = random.Random(seed)
    entries = long_session(count)
    ids = [e["id"] for e in entries if not (e["type"] == "message" and "side" in str(e["message"]["content"]))]
    extra: list[dict] = []
    for n in range(6):
        target = rng.choice(ids)
        extra.append({"id": f"lab{n:04d}", "parentId": None, "type": "label", "targetId": target, "label": f"l{n}"})
    # a branch of 12 entries off an early entry, with a branch of its own
    parent = ids[5]
    for n in range(12):
        extra.append(
            {"id": f"br{n:04d}", "parentId": parent, "type": "message", "message": {"role": "user", "content": f"b{n}"}}
        )
        parent = f"br{n:04d}"
    extra.append({"id": "brx", "parentId": "br0003", "type": "message", "message": {"role": "user", "content": "x"}})
    extra.append(
        {"id": "root-side", "parentId": ids[0], "type": "message", "message": {"role": "user", "content": "r"}}
    )
    last = entries[-1]["id"]
    out = list(entries)
    extra.sort(key=lambda entry: entry["type"] == "label")  # the labels last: the leaf is the last one
    for entry in extra:
        if entry["type"] == "label":  # labels are appended at the leaf, as a client does
            entry["parentId"] = last
            last = entry["id"]
        out.append({"timestamp": TS, **entry})
    return out


def shape_of(rows) -> list:
    out = []
    for row in rows:
        out.append(
            (
                row.kind,
                row.level,
                row.entry_id,
                row.depth if row.kind == "entry" else None,
                row.on_active_path,
                row.is_leaf,
                row.is_branch_point,
                row.label,
                row.compacted_by,
                row.size,
                row.open,
                row.sibling_index,
                row.sibling_count,
                row.prev_sibling,
                row.next_sibling,
                row.child_count,
                row.entry["id"] if row.entry else None,
                row.name_entry["id"] if row.name_entry else None,
                shape_of(row.rows),
            )
        )
    return out


def whole(monkeypatch, read):
    """``read`` laid out from the whole shape."""
    with monkeypatch.context() as patch:
        patch.setattr(tw, "KEYED_FROM", 10**9)
        tw.clear_shape_cache()
        return read()


def keyed(monkeypatch, read, *, window: int, peek: int = 10**6):
    with monkeypatch.context() as patch:
        patch.setattr(tw, "KEYED_FROM", 0)
        patch.setattr(tw, "LINE_WINDOW", window)
        patch.setattr(tw, "BRANCH_PEEK", peek)
        calls: list[str] = []
        original = tw._KeyedRead.__init__

        def spy(self, *args, **kwargs):
            calls.append("keyed")
            original(self, *args, **kwargs)

        patch.setattr(tw._KeyedRead, "__init__", spy)
        patch.setattr(tw, "read_skeleton", _refused)
        result = read()
        assert calls, "the window was not read by key"
        return result


def _refused(view):
    raise AssertionError("the whole shape was read")


@pytest.fixture
def session(provider):
    entries = bushy_session(3, 900)
    provider.create_session(session_id="big", entries=entries)
    return provider, entries


def test_a_window_holding_the_whole_line_shows_what_the_whole_shape_shows(session, monkeypatch):
    provider, entries = session
    leaf = provider.get_session("big")["leaf_entry_id"]
    path = [e["id"] for e in provider.get_active_path("big")]
    cases = [
        {},
        {"focus_entry_id": "br0010"},  # in a folded branch: it opens
        {"focus_entry_id": path[300]},
        {"focus_entry_id": leaf},
        {"line_entry_id": "root-side"},  # the main line through an alternative near the root
    ]
    for kwargs in cases:
        want = whole(monkeypatch, lambda kwargs=kwargs: tw.tree_window(provider, "big", **kwargs))
        got = keyed(monkeypatch, lambda kwargs=kwargs: tw.tree_window(provider, "big", **kwargs), window=10_000)
        assert shape_of(got.rows) == shape_of(want.rows), kwargs
        assert (got.focus_entry_id, got.line_entry_id) == (want.focus_entry_id, want.line_entry_id)
        assert got.skeleton.entry_count == want.skeleton.entry_count == len(entries)
        assert got.skeleton.active_length == want.skeleton.active_length == len(path)
        assert got.skeleton.marker_count == want.skeleton.marker_count
        assert got.skeleton.compacted_count == want.skeleton.compacted_count > 0


def test_a_small_window_shows_the_root_the_runs_and_the_end_and_runs_expand_to_the_same_rows(session, monkeypatch):
    provider, _ = session
    path = [e["id"] for e in provider.get_active_path("big")]
    window = 120
    got = keyed(monkeypatch, lambda: tw.tree_window(provider, "big"), window=window)
    top = len(path) - window
    # the root's first entries (and the branches folded there), then one run down to the window
    head = got.rows[: next(i for i, row in enumerate(got.rows) if row.kind == "run")]
    assert [row.entry_id for row in head if row.kind == "entry"] == path[: tw.EDGE + 1]
    assert {row.entry_id for row in head if row.kind == "branch"} == {"root-side"}
    first_run = got.rows[len(head)]
    assert first_run.entry_id == path[tw.EDGE + 1] and first_run.size == top - (tw.EDGE + 1)
    shown = [row.entry_id for row in got.entry_rows]
    assert shown[-1] == path[-1] and got.entry_rows[-1].is_leaf
    assert path[-tw.TAIL :] == shown[-tw.TAIL :]
    assert all(row.on_active_path for row in got.entry_rows)
    # Expanding any run of the window, read by key, gives what the whole shape gives.
    for row in [r for r in got.rows if r.kind == "run"]:
        want = whole(monkeypatch, lambda row=row: tw.run_window(provider, "big", row.entry_id, row.size))
        again = keyed(
            monkeypatch, lambda row=row: tw.run_window(provider, "big", row.entry_id, row.size), window=window
        )
        assert shape_of(again.rows) == shape_of(want.rows)


def test_a_folded_branch_opens_to_the_same_rows(session, monkeypatch):
    provider, _ = session
    for entry_id in ("br0000", "br0004", "root-side", "00000019", "00000320"):  # the last on the active path
        want = whole(monkeypatch, lambda entry_id=entry_id: tw.branch_window(provider, "big", entry_id, level=2))
        got = keyed(
            monkeypatch, lambda entry_id=entry_id: tw.branch_window(provider, "big", entry_id, level=2), window=50
        )
        assert shape_of(got.rows) == shape_of(want.rows), entry_id
    # A branch larger than the read limit is laid out from the whole shape.
    monkeypatch.setattr(tw, "BRANCH_READ_LIMIT", 5)
    monkeypatch.setattr(tw, "KEYED_FROM", 0)
    got = tw.branch_window(provider, "big", "br0000", level=2)
    want = whole(monkeypatch, lambda: tw.branch_window(provider, "big", "br0000", level=2))
    assert shape_of(got.rows) == shape_of(want.rows)


def test_a_focus_far_above_the_window_is_shown_with_its_neighbours(session, monkeypatch):
    provider, _ = session
    path = [e["id"] for e in provider.get_active_path("big")]
    got = keyed(monkeypatch, lambda: tw.tree_window(provider, "big", focus_entry_id=path[200]), window=100)
    shown = [row.entry_id for row in got.rows if row.kind == "entry"]
    assert path[200 - tw.EDGE : 200 + tw.EDGE + 1] == [i for i in shown if i in path[190:211]]
    runs = [row for row in got.rows if row.kind == "run"]
    assert runs[0].entry_id == path[tw.EDGE + 1] and runs[0].size == 200 - tw.EDGE - (tw.EDGE + 1)
    assert runs[1].entry_id == path[200 + tw.EDGE + 1]


def test_what_the_facts_cannot_say_is_laid_out_from_the_whole_shape(session, monkeypatch):
    """A focus in a branch that leaves the line above the window: the whole shape, same rows as before."""
    provider, _ = session
    with monkeypatch.context() as patch:
        patch.setattr(tw, "KEYED_FROM", 0)
        patch.setattr(tw, "LINE_WINDOW", 50)
        got = tw.tree_window(provider, "big", focus_entry_id="br0010")
    want = whole(monkeypatch, lambda: tw.tree_window(provider, "big", focus_entry_id="br0010"))
    assert shape_of(got.rows) == shape_of(want.rows)


@pytest.mark.parametrize("count", [3000, 12000])
def test_the_window_reads_a_fixed_number_of_statements(provider, monkeypatch, count):
    provider.create_session(session_id="s", entries=long_session(count))
    monkeypatch.setattr(tw, "KEYED_FROM", 0)
    with CaptureQueriesContext(connection) as captured:
        window = tw.tree_window(provider, "s")
    assert window.entry_rows[-1].is_leaf
    STATEMENTS[(provider.kind, count)] = len(captured.captured_queries)
    if (provider.kind, 3000) in STATEMENTS and (provider.kind, 12000) in STATEMENTS:
        assert STATEMENTS[(provider.kind, 3000)] == STATEMENTS[(provider.kind, 12000)]


STATEMENTS: dict = {}


def test_a_line_through_a_recent_alternative_keeps_the_active_path_marked(session, monkeypatch):
    provider, entries = session
    path = [e["id"] for e in provider.get_active_path("big")]
    on_path = set(path)
    side = next(e for e in reversed(entries) if e["type"] == "message" and "side" in str(e["message"]["content"]))
    line = [e["id"] for e in provider.get_active_path("big", side["id"])]
    got = keyed(monkeypatch, lambda: tw.tree_window(provider, "big", line_entry_id=side["id"]), window=100)
    assert got.line_entry_id == side["id"]
    main = [row for row in got.rows if row.kind == "entry"]
    assert [row.entry_id for row in main][-1] == side["id"]
    assert all(row.entry_id in line for row in main)
    assert all(row.on_active_path == (row.entry_id in on_path) for row in got.iter_rows() if row.kind == "entry")
    fork = line[-2]
    folded = [row for row in got.rows if row.kind == "branch" and row.entry_id in on_path]
    assert len(folded) == 1 and folded[0].size == len(path) - path.index(fork) - 1


def test_a_large_folded_branch_is_read_in_part_and_says_so(session, monkeypatch):
    provider, _ = session
    path = [e["id"] for e in provider.get_active_path("big")]
    got = keyed(monkeypatch, lambda: tw.tree_window(provider, "big", line_entry_id="root-side"), window=1000, peek=50)
    folded = next(row for row in got.rows if row.kind == "branch" and row.entry_id == path[1])
    assert folded.size_more and folded.size == 50
    assert folded.name_entry is not None and folded.name_entry["id"] in path
    from sessiontree.admin.tree_rows import rows_html

    urls = {"branch": "/b/", "run": "/r/", "entry": "/e/"}
    assert "branch of more than 50 entries" in rows_html([folded], urls)
    # Opened, the branch is read whole: its size is exact.
    opened = keyed(monkeypatch, lambda: tw.branch_window(provider, "big", path[1], level=1), window=1000, peek=50)
    want = whole(monkeypatch, lambda: tw.branch_window(provider, "big", path[1], level=1))
    assert shape_of(opened.rows) == shape_of(want.rows)


def test_two_leaves_compared_by_key_as_from_the_whole_paths(session, monkeypatch):
    """``compare_leaves`` of a large session: the common ancestor found by
    the jumps, each side's entries after it and its context by key; the same
    comparison as from the two whole paths, with the whole shape refused."""
    from sessiontree.selectors import entry_context as ec

    provider, _ = session
    path = [e["id"] for e in provider.get_active_path("big")]
    pairs = [
        (path[-1], "br0011"),  # the leaf and a branch off an early entry
        ("br0011", "brx"),  # two branches of one side branch
        ("brx", "br0003"),  # a tip and its own ancestor
        (path[-1], path[-1]),  # the same entry
        (path[400], path[-1]),  # an entry of the line and the leaf
        ("root-side", path[-1]),
        (path[-1], "nope"),
    ]

    def outcome(call):
        try:
            return call()
        except Exception as exc:
            return (type(exc).__name__, str(exc))

    for a, b in pairs:
        with monkeypatch.context() as patch:
            patch.setattr(ec, "KEYED_FROM", 10**9)
            want = outcome(lambda a=a, b=b: ec.compare_leaves(provider, "big", a, b))
        with monkeypatch.context() as patch:
            patch.setattr(ec, "KEYED_FROM", 0)
            patch.setattr(ec, "read_shape", _refused)
            got = outcome(lambda a=a, b=b: ec.compare_leaves(provider, "big", a, b))
        assert got == want, (a, b)


def test_the_marker_count_kept_per_process_follows_the_session(session, monkeypatch):
    """The keyed window's marker count is kept per process under the
    session's content key: viewed again it costs no statement, and a marker
    appended since is counted (the key moves with the entry count)."""
    provider, _ = session

    def count() -> int:
        return keyed(monkeypatch, lambda: tw.tree_window(provider, "big"), window=50).skeleton.marker_count

    tw.clear_shape_cache()
    before = count()
    assert before == whole(monkeypatch, lambda: tw.tree_window(provider, "big")).skeleton.marker_count
    tw.clear_shape_cache()
    count()
    with CaptureQueriesContext(connection) as captured:
        assert count() == before
    assert not [q for q in captured.captured_queries if "COUNT(" in q["sql"].upper()]
    leaf = provider.get_session("big")["leaf_entry_id"]
    provider.append_entry(
        "big",
        {"type": "branch_summary", "id": "bsum0001", "parentId": leaf, "timestamp": TS, "fromId": leaf, "summary": "s"},
    )
    assert count() == before + 1 == whole(monkeypatch, lambda: tw.tree_window(provider, "big")).skeleton.marker_count


# --- the compare page's branch tips, by key ----------------------------------------------------


def tips_of(found) -> list:
    """Every field of each tip (the naming and tip entries whole)."""
    return [dataclasses.astuple(tip) for tip in found]


def test_the_branch_tips_read_by_key_are_those_of_the_whole_shape(session, monkeypatch):
    """``branch_tips`` of a large session walks each tip up to the active
    path by key (issue 23: it read the whole shape, 6.9 s on ``mysql`` at 1M
    entries after each new entry): with every tip in the scan and the leaf's
    whole path in its label scan, it names the same tips, forks, sizes,
    labels and messages as the whole shape, with the leaf at the end of the
    line, moved back into it, and on a side branch."""
    from sessiontree.selectors import entry_context as ec

    provider, _ = session
    path = [e["id"] for e in provider.get_active_path("big")]
    label = {"type": "label", "id": "labbr", "parentId": path[-1], "timestamp": TS, "targetId": "br0007"}
    provider.append_entry("big", {**label, "label": "side"})

    def both() -> list:
        with monkeypatch.context() as patch:
            patch.setattr(ec, "KEYED_FROM", 10**9)
            tw.clear_shape_cache()
            want = tips_of(ec.branch_tips(provider, "big"))
        with monkeypatch.context() as patch:
            patch.setattr(ec, "KEYED_FROM", 0)
            patch.setattr(ec, "LEAF_LABEL_SCAN", 10**6)
            patch.setattr(ec, "read_skeleton", _refused)
            patch.setattr(ec, "read_shape", _refused)
            got = tips_of(ec.branch_tips(provider, "big"))
        assert got == want
        return got

    tips = {tip[0]: tip for tip in both()}
    assert tips["br0011"][3] == path[5] and tips["br0011"][4] == 12 and tips["br0011"][5] == "side"
    assert tips["brx"][3] == path[5] and tips["brx"][4] == 5  # through a branch point off the path
    provider.switch_leaf("big", path[450])  # the old line's end is a branch now; the leaf has a child
    assert {tip[0]: tip for tip in both()}["labbr"][3] == path[450]
    provider.switch_leaf("big", "br0005")  # the leaf on the side branch: the main line leaves it at path[5]
    assert {tip[0]: tip for tip in both()}["brx"][3] == "br0003"


class _Without:
    """A view without one of its own keyed reads (the generic answer is used)."""

    def __init__(self, view, name: str) -> None:
        self._view, self._name = view, name

    def __getattr__(self, name: str):
        if name == self._name:
            raise AttributeError(name)
        return getattr(self._view, name)


def test_walks_up_to_the_path_meet_it_where_the_whole_path_says(provider):
    """``keyed_reads.walk_to_path`` against the walk over the whole parent map,
    on random trees (two roots among them), random leaves and starts, with
    windows that hold the whole path, part of it (deeper stops asked by the
    jumps) or nothing, by the storage's own ``branch_walks`` and the generic one."""
    from sessiontree.core.path import walk_path
    from sessiontree.providers import keyed_reads

    rng = random.Random(11)
    entries: list[dict] = []
    for n in range(700):
        parent = None
        if n and n != 350:  # entry 350 starts a second tree
            back = rng.choice([1, 1, 1, 2, 3, 10, 60]) if rng.random() < 0.25 else 1
            parent = entries[max(0, len(entries) - back)]["id"]
        entries.append(
            {
                "id": f"w{n:05d}",
                "parentId": parent,
                "timestamp": TS,
                "type": "message",
                "message": {"role": "user", "content": f"m{n}"},
            }
        )
    provider.create_session(session_id="walks", entries=entries)
    with provider.read("walks") as view:
        parents = dict(view.parents())
        ids = list(parents)
        for leaf in [ids[-1], ids[340], ids[349], *rng.sample(ids, 5)]:
            active = set(walk_path(leaf, parents))
            starts = [entry_id for entry_id in rng.sample(ids, 60) if entry_id not in active]
            want = {}
            for start in starts:
                up, current = [], start
                while current is not None and current not in active:
                    up.append(current)
                    current = parents.get(current)
                want[start] = (up, current)
            for window in (0, 3, 40, 10**6):
                assert keyed_reads.walk_to_path(view, leaf, starts, window=window) == want, (leaf, window)
            generic = _Without(view, "branch_walks")
            assert keyed_reads.walk_to_path(generic, leaf, starts, window=40) == want, leaf
            assert keyed_reads.branch_walks(view, starts, leaf, 5) == keyed_reads.branch_walks(generic, starts, leaf, 5)
            # With the session's last entries walked in memory first (the leaf in them or not).
            for scan in (1, 30, 200, 10**4):
                tail = {entry_id: parent for _, entry_id, parent in keyed_reads.tail_parents(view, scan)}
                assert keyed_reads.walk_to_path(view, leaf, starts, window=40, tail=tail) == want, (leaf, scan)
                for steps in (0, 5, 120, 10**4):
                    want_path = keyed_reads.path_ids(view, leaf, steps)
                    assert keyed_reads.path_up(view, leaf, steps, tail) == want_path, (leaf, scan, steps)


def test_a_child_stored_before_its_parent_keeps_the_parent_from_the_tips(provider):
    """``tips_in`` takes an entry of the last ones that none of them names as
    a parent for a tip only once no entry at all does: a copied session can
    hold a child before its parent (the child a root until the parent came)."""
    from sessiontree.providers import keyed_reads

    def entry(entry_id: str, parent: str | None) -> dict:
        message = {"role": "user", "content": entry_id}
        return {"id": entry_id, "parentId": parent, "timestamp": TS, "type": "message", "message": message}

    entries = [entry("a", None), entry("early-child", "late"), entry("b", "a"), entry("late", "b"), entry("c", "b")]
    provider.create_session(session_id="order", entries=entries)
    with provider.read("order") as view:
        tail = keyed_reads.tail_parents(view, 2)  # "late" and "c": none names the other
        assert [entry_id for _, entry_id, _ in tail] == ["late", "c"]
        # Whether "late" has a child is the storage's to say: the rows name it as
        # "early-child"'s parent; the file's index made "early-child" a root.
        kids = keyed_reads.children_of(view, ["late"])["late"]
        if "MySQL" in type(provider).__name__:
            assert kids == ["early-child"]
        want = ["c"] if kids else ["c", "late"]
        assert [entry_id for _, entry_id in keyed_reads.tips_in(view, tail, 10)] == want
        assert [entry_id for _, entry_id in keyed_reads.latest_tips(view, 10, 2)] == want


def test_labels_are_read_for_the_rows_a_window_can_show_not_for_folded_branches(session, monkeypatch):
    """The window's labels: aimed at the line's entries (and those of a branch
    read whole), not at the entries read only to size a folded branch (never
    a row of this window; opened, the branch reads its own). The label shows
    on the line as from the whole shape."""
    from sessiontree.providers import keyed_reads

    provider, _ = session
    path = [e["id"] for e in provider.get_active_path("big")]
    folded_root = path[1]  # root-side's line goes through the root's other child: path[1] folds
    with provider.read("big") as view:
        inside = [i for i in keyed_reads.subtree(view, folded_root, limit=40) if i != folded_root][:5]
    provider.append_entry("big", {"type": "label", "targetId": inside[0], "label": "deep in a folded branch"})
    provider.append_entry("big", {"type": "label", "targetId": "root-side", "label": "on the line"})
    asked: list[set[str]] = []
    real = keyed_reads.entries_targeting_any

    def spy(view, target_ids, types):
        asked.append(set(target_ids))
        return real(view, target_ids, types)

    monkeypatch.setattr(keyed_reads, "entries_targeting_any", spy)
    got = keyed(monkeypatch, lambda: tw.tree_window(provider, "big", line_entry_id="root-side"), window=1000, peek=50)
    assert asked and all(not set(inside) & ids for ids in asked), asked
    assert any("root-side" in ids for ids in asked)
    labelled = {row.entry_id: row.label for row in got.rows if row.kind == "entry" and row.label}
    want = whole(monkeypatch, lambda: tw.tree_window(provider, "big", line_entry_id="root-side"))
    assert labelled == {row.entry_id: row.label for row in want.rows if row.kind == "entry" and row.label}
    assert labelled.get("root-side") == "on the line"
