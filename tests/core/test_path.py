"""Tree and path logic (plan task 2, path half)."""

from __future__ import annotations

import pytest

from sessiontree.core.errors import CorruptSessionTree, EntryNotFound
from sessiontree.core.path import (
    build_entry_index,
    build_tree,
    entry_depths,
    find_common_ancestor_entry_id,
    get_path_to_leaf,
    group_children_by_parent,
    resolve_latest_labels,
)


def entry(entry_id: str, parent_id: str | None) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": f"2026-04-19T00:00:0{len(entry_id)}.000Z",
        "message": {"role": "user", "content": entry_id},
    }


def label(entry_id: str, parent_id: str | None, target_id: str, text: str | None, **extra) -> dict:
    return {
        "type": "label",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": extra.pop("timestamp", "2026-04-19T00:00:02.000Z"),
        "targetId": target_id,
        "label": text,
        **extra,
    }


def ids(entries) -> list[str]:
    return [e["id"] for e in entries]


# --- the plan's cases ------------------------------------------------------


def test_builds_root_to_leaf_path():
    assert ids(get_path_to_leaf([entry("a", None), entry("b", "a"), entry("c", "b")], "c")) == ["a", "b", "c"]


def test_rejects_missing_leaf_and_cycles():
    with pytest.raises(EntryNotFound, match="Entry missing not found"):
        get_path_to_leaf([entry("a", None)], "missing")
    with pytest.raises(CorruptSessionTree, match="Cycle detected"):
        get_path_to_leaf([entry("a", "c"), entry("b", "a"), entry("c", "b")], "c")


def test_finds_common_ancestor():
    entries = [entry("a", None), entry("b", "a"), entry("c", "b"), entry("d", "b")]
    assert find_common_ancestor_entry_id(entries, "c", "d") == "b"


def test_groups_children_and_resolves_latest_labels():
    label1 = label("l1", "a", "a", "old", timestamp="2026-04-19T00:00:02.000Z")
    label2 = label("l2", "l1", "a", "new", timestamp="2026-04-19T00:00:03.000Z")
    assert group_children_by_parent([entry("a", None), entry("b", "a")])[None] == ["a"]
    assert resolve_latest_labels([entry("a", None), label1, label2])["a"]["label"] == "new"
    assert build_entry_index([entry("a", None)])["a"]["id"] == "a"


# --- get_path_to_leaf ------------------------------------------------------


def test_path_follows_the_leafs_branch_only():
    entries = [entry("a", None), entry("b", "a"), entry("c", "b"), entry("d", "b"), entry("e", "d")]
    assert ids(get_path_to_leaf(entries, "c")) == ["a", "b", "c"]
    assert ids(get_path_to_leaf(entries, "e")) == ["a", "b", "d", "e"]
    assert ids(get_path_to_leaf(entries, "a")) == ["a"]


def test_path_returns_the_stored_entry_objects():
    entries = [entry("a", None), entry("b", "a")]
    path = get_path_to_leaf(entries, "b")
    assert path[0] is entries[0] and path[1] is entries[1]


def test_none_leaf_is_an_empty_path():
    assert get_path_to_leaf([entry("a", None)], None) == []


def test_missing_leaf_is_entry_not_found_naming_it():
    with pytest.raises(EntryNotFound) as caught:
        get_path_to_leaf([entry("a", None)], "deadbeef")
    assert "deadbeef" in str(caught.value)
    assert caught.value.code == "entry_not_found"


def test_missing_parent_is_corrupt_naming_entry_and_parent():
    entries = [entry("root0001", None), entry("child001", "gone0001"), entry("leaf0001", "child001")]
    with pytest.raises(CorruptSessionTree) as caught:
        get_path_to_leaf(entries, "leaf0001")
    assert "child001" in str(caught.value)
    assert "gone0001" in str(caught.value)
    assert caught.value.code == "corrupt_session_tree"


def test_cycle_is_corrupt_naming_the_entry():
    entries = [entry("aaaa0001", "cccc0003"), entry("bbbb0002", "aaaa0001"), entry("cccc0003", "bbbb0002")]
    with pytest.raises(CorruptSessionTree, match="Cycle detected") as caught:
        get_path_to_leaf(entries, "cccc0003")
    assert "cccc0003" in str(caught.value)


def test_self_parent_is_a_cycle():
    with pytest.raises(CorruptSessionTree, match="selfself"):
        get_path_to_leaf([entry("selfself", "selfself")], "selfself")


def test_path_uses_a_given_index():
    entries = [entry("a", None), entry("b", "a")]
    by_id = build_entry_index(entries)
    # The index wins over the list: providers pass an index built once.
    assert ids(get_path_to_leaf([], "b", by_id)) == ["a", "b"]


def test_deep_path_has_no_recursion_limit():
    chain = [entry("n0", None)] + [entry(f"n{i}", f"n{i - 1}") for i in range(1, 10_000)]
    path = get_path_to_leaf(chain, "n9999")
    assert len(path) == 10_000
    assert path[0]["id"] == "n0" and path[-1]["id"] == "n9999"


# --- build_entry_index -----------------------------------------------------


def test_duplicate_ids_are_corrupt():
    entries = [entry("dup00001", None), entry("b", "dup00001"), entry("dup00001", "b")]
    with pytest.raises(CorruptSessionTree, match="dup00001"):
        build_entry_index(entries)
    with pytest.raises(CorruptSessionTree, match="dup00001"):
        get_path_to_leaf(entries, "b")


def test_entry_without_string_id_is_corrupt():
    with pytest.raises(CorruptSessionTree):
        build_entry_index([{"type": "message", "parentId": None}])
    with pytest.raises(CorruptSessionTree):
        build_entry_index([{"type": "message", "id": 7, "parentId": None}])


def test_index_maps_every_id_to_its_entry():
    entries = [entry("a", None), entry("b", "a"), entry("c", "a")]
    index = build_entry_index(entries)
    assert list(index) == ["a", "b", "c"]
    assert all(index[e["id"]] is e for e in entries)


# --- group_children_by_parent ----------------------------------------------


def test_children_keep_append_order_not_id_order():
    entries = [entry("r", None), entry("z", "r"), entry("m", "r"), entry("a", "r"), entry("q", "m"), entry("r2", None)]
    children = group_children_by_parent(entries)
    assert children == {None: ["r", "r2"], "r": ["z", "m", "a"], "m": ["q"]}


def test_no_entries_no_children():
    assert group_children_by_parent([]) == {}


# --- resolve_latest_labels -------------------------------------------------


def test_latest_label_wins_and_records_its_entry():
    entries = [
        entry("a", None),
        label("l1", "a", "a", "old", timestamp="2026-04-19T00:00:02.000Z"),
        label("l2", "l1", "a", "new", timestamp="2026-04-19T00:00:03.000Z"),
    ]
    assert resolve_latest_labels(entries) == {
        "a": {"label": "new", "label_entry_id": "l2", "timestamp": "2026-04-19T00:00:03.000Z"}
    }


@pytest.mark.parametrize("cleared", ["", None])
def test_empty_or_none_label_clears(cleared):
    entries = [entry("a", None), label("l1", "a", "a", "keep"), label("l2", "l1", "a", cleared)]
    assert resolve_latest_labels(entries) == {}


def test_absent_label_key_clears():
    clearing = label("l2", "l1", "a", None)
    del clearing["label"]
    entries = [entry("a", None), label("l1", "a", "a", "keep"), clearing]
    assert resolve_latest_labels(entries) == {}


def test_label_after_clear_applies_again():
    entries = [
        entry("a", None),
        label("l1", "a", "a", "one"),
        label("l2", "l1", "a", ""),
        label("l3", "l2", "a", "three"),
    ]
    assert resolve_latest_labels(entries)["a"]["label"] == "three"
    assert resolve_latest_labels(entries)["a"]["label_entry_id"] == "l3"


def test_labels_of_different_targets_are_independent():
    entries = [
        entry("a", None),
        entry("b", "a"),
        label("l1", "b", "a", "for-a"),
        label("l2", "l1", "b", "for-b"),
        label("l3", "l2", "a", ""),
    ]
    assert {k: v["label"] for k, v in resolve_latest_labels(entries).items()} == {"b": "for-b"}


def test_labels_count_in_append_order_across_branches():
    # Labels on another branch still apply: labels are session-wide bookmarks.
    entries = [
        entry("a", None),
        entry("b", "a"),
        label("l1", "b", "a", "from-b"),
        entry("c", "a"),
        label("l2", "c", "a", "from-c"),
    ]
    assert resolve_latest_labels(entries)["a"]["label"] == "from-c"


def test_label_without_string_target_is_ignored():
    entries = [entry("a", None), label("l1", "a", None, "x")]  # type: ignore[arg-type]
    assert resolve_latest_labels(entries) == {}


def test_target_entry_is_never_modified():
    target = entry("a", None)
    before = dict(target)
    resolve_latest_labels([target, label("l1", "a", "a", "x")])
    assert target == before


# --- find_common_ancestor_entry_id -----------------------------------------


def test_common_ancestor_of_an_entry_and_its_ancestor_is_the_ancestor():
    entries = [entry("a", None), entry("b", "a"), entry("c", "b")]
    assert find_common_ancestor_entry_id(entries, "c", "a") == "a"
    assert find_common_ancestor_entry_id(entries, "a", "c") == "a"
    assert find_common_ancestor_entry_id(entries, "c", "c") == "c"


def test_common_ancestor_is_the_deepest_shared_entry():
    entries = [
        entry("a", None),
        entry("b", "a"),
        entry("c", "b"),
        entry("d", "c"),
        entry("e", "c"),
        entry("f", "e"),
        entry("g", "a"),
    ]
    assert find_common_ancestor_entry_id(entries, "d", "f") == "c"
    assert find_common_ancestor_entry_id(entries, "f", "g") == "a"


def test_no_common_ancestor_between_separate_roots():
    entries = [entry("a", None), entry("b", "a"), entry("x", None), entry("y", "x")]
    assert find_common_ancestor_entry_id(entries, "b", "y") is None


def test_common_ancestor_with_none_is_none():
    entries = [entry("a", None)]
    assert find_common_ancestor_entry_id(entries, None, "a") is None
    assert find_common_ancestor_entry_id(entries, "a", None) is None


def test_common_ancestor_of_unknown_entry_raises():
    with pytest.raises(EntryNotFound, match="nowhere1"):
        find_common_ancestor_entry_id([entry("a", None)], "a", "nowhere1")


# --- build_tree ------------------------------------------------------------


def shape(nodes) -> list:
    """(id, label, children) tuples, for comparing small trees."""
    return [(n["entry"]["id"], n["label"], shape(n["children"])) for n in nodes]


def test_tree_children_keep_append_order_and_carry_labels():
    entries = [
        entry("r", None),
        entry("z", "r"),
        entry("m", "r"),
        label("l1", "m", "z", "bookmark"),
        entry("a", "r"),
    ]
    assert shape(build_tree(entries)) == [
        ("r", None, [("z", "bookmark", []), ("m", None, [("l1", None, [])]), ("a", None, [])]),
    ]


def test_tree_nodes_hold_the_stored_entries():
    entries = [entry("a", None), entry("b", "a")]
    roots = build_tree(entries)
    assert roots[0]["entry"] is entries[0]
    assert roots[0]["children"][0]["entry"] is entries[1]


def test_tree_uses_given_labels():
    entries = [entry("a", None), label("l1", "a", "a", "from-entries")]
    given = {"a": {"label": "given", "label_entry_id": "x", "timestamp": ""}}
    assert build_tree(entries, given)[0]["label"] == "given"


def test_orphans_become_roots_in_append_order():
    entries = [entry("a", None), entry("o1", "ghost"), entry("b", "a"), entry("o2", "ghost2"), entry("c", "o1")]
    assert shape(build_tree(entries)) == [
        ("a", None, [("b", None, [])]),
        ("o1", None, [("c", None, [])]),
        ("o2", None, []),
    ]


def test_entry_that_is_its_own_parent_is_a_root():
    entries = [entry("self", "self"), entry("kid", "self")]
    assert shape(build_tree(entries)) == [("self", None, [("kid", None, [])])]


def test_tree_of_nothing_is_empty():
    assert build_tree([]) == []


def test_ten_thousand_deep_chain_builds_without_recursion():
    chain = [entry("n0", None)] + [entry(f"n{i}", f"n{i - 1}") for i in range(1, 10_000)]
    roots = build_tree(chain)
    assert len(roots) == 1
    # Walk iteratively: comparing or printing this tree recursively would itself overflow.
    depth, node = 0, roots[0]
    while node["children"]:
        assert len(node["children"]) == 1
        node = node["children"][0]
        depth += 1
    assert depth == 9_999
    assert node["entry"]["id"] == "n9999"


def test_tree_contains_every_entry_once():
    entries = [entry("a", None), entry("b", "a"), entry("c", "a"), entry("d", "c"), entry("e", None)]
    seen: list[str] = []
    stack = list(build_tree(entries))
    while stack:
        node = stack.pop()
        seen.append(node["entry"]["id"])
        stack.extend(node["children"])
    assert sorted(seen) == ["a", "b", "c", "d", "e"]


# --- entry_depths ----------------------------------------------------------


def test_entry_depths():
    entries = [
        entry("a", None),
        entry("b", "a"),
        entry("c", "b"),
        entry("d", "a"),
        entry("x", None),
        entry("orphan", "ghost"),
        entry("y", "orphan"),
    ]
    assert entry_depths(entries) == {"a": 0, "b": 1, "c": 2, "d": 1, "x": 0, "orphan": 0, "y": 1}


def test_entry_depths_deep_chain():
    chain = [entry("n0", None)] + [entry(f"n{i}", f"n{i - 1}") for i in range(1, 10_000)]
    assert entry_depths(chain)["n9999"] == 9_999


def test_find_cycles_reports_each_cycle_once_from_where_it_closes():
    from sessiontree.core.path import find_cycles

    parent_of = {
        "root": None,
        "a": "root",
        "x": "y",  # x -> y -> z -> x
        "y": "z",
        "z": "x",
        "lead": "y",  # leads into that cycle: not a cycle of its own
        "self": "self",
        "lost": "gone",  # a missing parent ends the chain (read as a root)
    }
    assert list(find_cycles(parent_of)) == [["x", "y", "z"], ["self"]]
    assert list(find_cycles({"a": None, "b": "a"})) == []
