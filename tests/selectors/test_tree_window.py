"""The tree window: what a tree view shows first and loads on demand."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from sessiontree.core.context_builder import build_context_from_path
from sessiontree.selectors import tree_window as tw
from sessiontree.selectors.entry_context import compare_leaves, context_steps, entry_context, find_entries
from tests.contract.conftest import provider  # noqa: F401  (the provider fixture: every provider)


def message(entry_id: str, parent_id: str | None, text: str = "hi", role: str = "user") -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": role, "content": text},
    }


class FakeView:
    """A provider ``read()`` view over plain entries (any shape, even damaged)."""

    def __init__(self, entries: list[dict], leaf: str | None) -> None:
        self._entries = entries
        self._by_id = {e["id"]: e for e in entries}
        self.state = SimpleNamespace(
            session_id="s", leaf_entry_id=leaf, status="active", in_flight_entry_id=None, entry_count=len(entries)
        )
        self.loaded: list[str] = []

    def parents(self):
        return {e["id"]: e.get("parentId") for e in self._entries}

    def all_entries(self, types=None):
        return [e for e in self._entries if types is None or e["type"] in types]

    def entries(self, ids):
        self.loaded.extend(ids)
        return [self._by_id[i] for i in ids]


class FakeProvider:
    def __init__(self, entries: list[dict], leaf: str | None) -> None:
        self.view = FakeView(entries, leaf)

    @contextmanager
    def read(self, session_id):
        yield self.view


def layout(rows) -> list[tuple[str, str]]:
    return [(row.kind, row.entry_id) for row in rows]


def test_branches_off_the_active_path_fold_and_are_named_by_their_first_message():
    entries = [
        message("a", None),
        {"type": "label", "id": "l", "parentId": "a", "timestamp": "t", "targetId": "a", "label": "x"},
        message("b", "l", "the side road"),
        message("c", "a", "the main road"),
        message("d", "c"),
    ]

    window = tw.tree_window(FakeProvider(entries, "d"), "s")

    assert layout(window.rows) == [("entry", "a"), ("branch", "l"), ("entry", "c"), ("entry", "d")]
    branch = window.rows[1]
    assert branch.size == 2 and branch.level == 1 and not branch.open
    assert branch.name_entry["id"] == "b"  # its first message, not the label entry it starts with
    assert [r.entry_id for r in window.entry_rows if r.on_active_path] == ["a", "c", "d"]
    assert [r.entry_id for r in window.entry_rows if r.is_leaf] == ["d"]
    assert window.rows[0].is_branch_point


def test_focus_unfolds_the_branch_on_its_way():
    entries = [message("a", None), message("b", "a"), message("c", "b"), message("x", "a"), message("y", "x")]

    window = tw.tree_window(FakeProvider(entries, "y"), "s", focus_entry_id="c")

    assert layout(window.rows) == [("entry", "a"), ("branch", "b"), ("entry", "x"), ("entry", "y")]
    assert window.rows[1].open
    assert layout(window.rows[1].rows) == [("entry", "b"), ("entry", "c")]


def test_long_runs_collapse_and_expand_in_chunks():
    count = 2000
    entries = [message(f"e{i:05d}", f"e{i - 1:05d}" if i else None) for i in range(count)]
    fake = FakeProvider(entries, f"e{count - 1:05d}")

    window = tw.tree_window(fake, "s")

    kinds = [row.kind for row in window.rows]
    assert kinds.count("run") == 1
    shown = [row.entry_id for row in window.entry_rows]
    assert shown[0] == "e00000" and shown[-1] == f"e{count - 1:05d}"
    assert len(shown) == (tw.EDGE + 1) + (tw.EDGE + tw.TAIL)  # the start, and the tail with its edge
    run = next(row for row in window.rows if row.kind == "run")
    assert run.size == count - len(shown)
    assert len(set(fake.view.loaded)) <= len(shown) + 1  # payloads of the window only

    expanded = tw.run_window(fake, "s", run.entry_id, run.size)
    assert [r.entry_id for r in expanded.entry_rows] == [f"e{i:05d}" for i in range(3, 3 + tw.RUN_CHUNK)]
    rest = expanded.rows[-1]
    assert rest.kind == "run" and rest.size == run.size - tw.RUN_CHUNK


def test_labelled_entries_compactions_and_branch_points_stay_visible_in_a_long_line():
    entries = [message(f"e{i:04d}", f"e{i - 1:04d}" if i else None) for i in range(400)]
    entries.append(
        {"type": "label", "id": "lab", "parentId": "e0399", "timestamp": "t", "targetId": "e0100", "label": "here"}
    )
    entries.append(message("side", "e0200", "a side branch"))

    window = tw.tree_window(FakeProvider(entries, "lab"), "s")

    shown = {row.entry_id for row in window.entry_rows}
    assert {"e0100", "e0200"} <= shown
    assert "side" in {row.entry_id for row in window.rows if row.kind == "branch"}
    assert {"e0098", "e0099", "e0101", "e0102"} <= shown  # neighbours
    assert "e0050" not in shown


def test_the_row_budget_bounds_a_bushy_tree():
    entries = []
    for i in range(3000):
        parent = f"m{i - 1}" if i else None
        entries += [message(f"s{i}", parent), message(f"m{i}", parent)]

    window = tw.tree_window(FakeProvider(entries, "m2999"), "s")

    assert len(list(window.iter_rows())) <= tw.MAX_ROWS + 3
    assert window.rows[-1].kind == "run"


def test_orphans_become_roots_and_cycles_are_listed_as_unreachable():
    entries = [message("a", None), message("x", "missing"), message("p", "q"), message("q", "p")]

    window = tw.tree_window(FakeProvider(entries, "a"), "s")

    assert layout(window.rows) == [("branch", "x"), ("entry", "a"), ("entry", "p"), ("entry", "q")]
    assert [row.unreachable for row in window.rows[2:]] == [True, True]


def test_compacted_entries_follow_the_context_builder_rule():
    path = ["a", "b", "c", "k", "d"]
    markers = {"k": {"type": "compaction", "id": "k", "firstKeptEntryId": "b"}}

    assert tw.compacted_entries(path, markers) == {"a": "k"}
    assert tw.compacted_entries(path, {"k": {"type": "compaction", "id": "k", "firstKeptEntryId": "zz"}}) == {
        "a": "k",
        "b": "k",
        "c": "k",
    }
    assert tw.compacted_entries(path, {}) == {}


def test_context_steps_say_what_became_of_each_entry():
    path = [
        {"type": "model_change", "id": "m", "parentId": None, "timestamp": "t", "provider": "p", "modelId": "x"},
        message("a", "m", "old question"),
        message("b", "a", "kept question"),
        {
            "type": "compaction",
            "id": "k",
            "parentId": "b",
            "timestamp": "t",
            "summary": "S",
            "firstKeptEntryId": "b",
            "tokensBefore": 9,
        },
        message("c", "k", "new question"),
    ]

    steps, compaction_id = context_steps(path, build_context_from_path(path))

    assert compaction_id == "k"
    assert [(s.entry["id"], s.status) for s in steps] == [
        ("m", "not_a_message"),
        ("a", "compacted"),
        ("b", "sent"),
        ("k", "summary"),
        ("c", "sent"),
    ]


# --- on every provider ---------------------------------------------------------------------------


def build_branched(provider) -> dict[str, str]:  # noqa: F811
    session = provider.create_session(session_id="sel")
    sid = session["session_id"]
    ids = {}
    ids["root"] = provider.append_message(sid, {"role": "user", "content": "start here"})["id"]
    ids["answer"] = provider.append_message(sid, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]})[
        "id"
    ]
    ids["left"] = provider.append_message(sid, {"role": "user", "content": "go left"})["id"]
    provider.switch_leaf(sid, ids["answer"])
    ids["right"] = provider.append_message(sid, {"role": "user", "content": "go right"})["id"]
    ids["right2"] = provider.append_message(sid, {"role": "assistant", "content": [{"type": "text", "text": "went"}]})[
        "id"
    ]
    return ids


def test_parents_are_read_in_append_order(provider):  # noqa: F811
    ids = build_branched(provider)

    with provider.read("sel") as view:
        order = list(view.parents())

    assert order == [ids["root"], ids["answer"], ids["left"], ids["right"], ids["right2"]]


def test_window_entry_context_compare_and_find_on_every_provider(provider):  # noqa: F811
    ids = build_branched(provider)

    window = tw.tree_window(provider, "sel")
    assert layout(window.rows) == [
        ("entry", ids["root"]),
        ("entry", ids["answer"]),
        ("branch", ids["left"]),
        ("entry", ids["right"]),
        ("entry", ids["right2"]),
    ]
    assert (
        tw.branch_window(provider, "sel", ids["left"], level=1).entry_rows[0].entry["message"]["content"] == "go left"
    )

    detail = entry_context(provider, "sel", ids["left"])
    assert detail.path_tail == [ids["root"], ids["answer"], ids["left"]] and detail.depth == 2
    assert not detail.on_active_path and len(detail.context["messages"]) == 3 and detail.tokens > 0

    comparison = compare_leaves(provider, "sel", ids["left"], ids["right2"])
    assert comparison.common_ancestor_id == ids["answer"]
    assert [e["id"] for e in comparison.a.entries] == [ids["left"]]
    assert [e["id"] for e in comparison.b.entries] == [ids["right"], ids["right2"]]

    assert [e["id"] for e in find_entries(provider, "sel", show="user").entries] == [
        ids["root"],
        ids["left"],
        ids["right"],
    ]
    assert [e["id"] for e in find_entries(provider, "sel", text="RIGHT").entries] == [ids["right"]]


def test_unknown_entries_are_not_found(provider):  # noqa: F811
    from sessiontree.core.errors import EntryNotFound, InvalidEntry

    build_branched(provider)
    with pytest.raises(EntryNotFound):
        entry_context(provider, "sel", "nope")
    with pytest.raises(EntryNotFound):
        tw.branch_window(provider, "sel", "nope")
    with pytest.raises(InvalidEntry):
        find_entries(provider, "sel", show="everything")


def test_the_kept_shape_follows_appends_labels_and_leaf_moves(provider):  # noqa: F811
    ids = build_branched(provider)
    tw.tree_window(provider, "sel")  # the shape is kept from here on

    new = provider.append_message("sel", {"role": "user", "content": "one more"})
    provider.append_label_change("sel", ids["root"], "start")
    after_append = tw.tree_window(provider, "sel")
    provider.switch_leaf("sel", ids["left"])
    after_move = tw.tree_window(provider, "sel")

    rows = {row.entry_id: row for row in after_append.entry_rows}
    assert new["id"] in rows and rows[ids["root"]].label == "start"
    assert after_move.skeleton.leaf_entry_id == ids["left"]
    assert [r.entry_id for r in after_move.entry_rows if r.on_active_path] == [ids["root"], ids["answer"], ids["left"]]


def test_the_shape_cache_is_bounded_by_entries_too(monkeypatch):
    """A worker keeps at most ``SHAPE_CACHE_ENTRIES`` entries of shapes in all,
    however few sessions: the oldest go first, a larger shape is not kept."""
    monkeypatch.setattr(tw, "SHAPE_CACHE_ENTRIES", 250)
    tw.clear_shape_cache()

    def view(name: str, count: int) -> FakeView:
        entries = [message(f"{name}{i}", f"{name}{i - 1}" if i else None) for i in range(count)]
        fake = FakeView(entries, entries[-1]["id"])
        fake.state.pk, fake.state.session_id = hash(name), name
        return fake

    views = {name: view(name, count) for name, count in (("a", 100), ("b", 100), ("c", 100), ("big", 300))}
    shapes = {name: tw.read_shape(fake) for name, fake in views.items() if name != "big"}
    assert tw.read_shape(views["c"]) is shapes["c"]  # kept
    assert tw.read_shape(views["a"]) is not shapes["a"]  # gone: a, b and c hold 300 > 250 entries
    assert tw.read_shape(views["big"]) is not tw.read_shape(views["big"])  # larger than the budget: never kept
    assert sum(shape.count for shape in tw._shapes.values()) <= 250
    tw.clear_shape_cache()
