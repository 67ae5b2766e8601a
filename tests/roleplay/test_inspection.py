"""roleplay.inspection on its own (pure): rows, provenance records, the document diff."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.inspection import (
    compare_documents,
    diff_reduced,
    entries_by_id,
    provenance_records,
    records_for,
    state_rows,
    value_at,
)
from roleplay.reducer import reduce_branch

from .entry_tree import EntryTree


def test_rows_escape_keys_and_keep_document_order():
    document = {"a/b": {"~x": 1}, "list": [{"k": None}, []], "empty": {}}
    rows = state_rows(document, {})
    assert [(r["pointer"], r["depth"], r["key"], r["node"]) for r in rows] == [
        ("/a~1b", 0, "a/b", "object"),
        ("/a~1b/~0x", 1, "~x", "value"),
        ("/list", 0, "list", "array"),
        ("/list/0", 1, 0, "object"),
        ("/list/0/k", 2, "k", "value"),
        ("/list/1", 1, 1, "array"),
        ("/empty", 0, "empty", "object"),
    ]
    for row in rows:
        found = value_at(document, row["pointer"])
        assert found == row["value"] if row["node"] == "value" else len(found) == row["size"]
    assert rows[4]["value"] is None and rows[4]["node"] == "value"  # a JSON null is a value
    assert rows[6]["size"] == 0 and rows[2]["size"] == 2


def test_rows_of_a_deep_state_do_not_recurse():
    document: dict = {}
    node = document
    for _ in range(5000):
        node["n"] = {}
        node = node["n"]
    rows = state_rows(document, {})
    assert len(rows) == 5000 and rows[-1]["depth"] == 4999


def test_compare_documents_is_strict_about_json_types_and_compares_arrays_whole():
    old = {"flag": 1, "n": 1, "list": [1, 2], "obj": {"x": 1, "y": {"z": 1}}, "gone": {"deep": 1}}
    new = {"flag": True, "n": 1.0, "list": [1, 2, 3], "obj": {"x": 1, "y": 2}, "new": [1]}
    changed, added, removed = compare_documents(old, new)
    assert changed == ["/flag", "/list", "/n", "/obj/y"]
    assert added == ["/new"]
    assert removed == ["/gone"]
    assert compare_documents(old, copy.deepcopy(old)) == ([], [], [])


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b"]))
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c/d", "~e"]), children, max_size=3)
    ),
    max_leaves=12,
)
documents = st.dictionaries(st.sampled_from(["p", "q", "r", "s/t"]), json_values, max_size=4)


@settings(max_examples=300, deadline=None)
@given(documents, documents)
def test_the_diff_as_a_patch_turns_old_into_new(old, new):
    changed, added, removed = compare_documents(old, new)
    ops = [{"op": "remove", "path": p} for p in removed]
    ops += [{"op": "replace", "path": p, "value": value_at(new, p)} for p in changed]
    ops += [{"op": "add", "path": p, "value": value_at(new, p)} for p in added]
    assert jsonpatch.apply_patch(old, ops) == new
    # Each pointer is named once, and never together with one of its ancestors.
    pointers = changed + added + removed
    assert len(set(pointers)) == len(pointers)
    assert not any(a != b and b.startswith(a + "/") for a in pointers for b in pointers)


def test_provenance_records_and_a_diff_from_plain_entries():
    tree = EntryTree()
    root = tree.commit([{"op": "add", "path": "/a", "value": {"b": 1, "c": 2}}])  # commit-1
    left = tree.commit([{"op": "replace", "path": "/a/b", "value": 5}], source="manual-correction", reason="typo")
    tree.go_to(root)
    right = tree.commit([{"op": "remove", "path": "/a/c"}], source="repair")
    left_path, right_path = tree.path(left), tree.path(right)
    left_state, right_state = reduce_branch(left_path), reduce_branch(right_path)

    records = provenance_records(entries_by_id(left_path), left_state)
    assert list(records) == ["/a", "/a/b"]
    assert records["/a"]["kind"] == "turn" and records["/a"]["commit_id"] == "commit-1"
    assert records["/a/b"]["kind"] == "correction" and records["/a/b"]["reason"] == "typo"
    assert [r["pointer"] for r in records_for(records, "/a")] == ["/a", "/a/b"]
    assert [r["pointer"] for r in records_for(records, "/a/c")] == ["/a"]

    diff = diff_reduced(
        {"state": left_state, "entries": entries_by_id(left_path), "after_ancestor": lambda: left_path[1:]},
        {"state": right_state, "entries": entries_by_id(right_path), "after_ancestor": lambda: right_path[1:]},
    )
    [changed] = diff["changed"]
    [removed] = diff["removed"]
    assert diff["added"] == []
    assert (changed["pointer"], changed["old_value"], changed["new_value"]) == ("/a/b", 5, 1)
    assert changed["from_provenance"][0]["kind"] == "correction"
    assert changed["to_provenance"][0]["commit_id"] == "commit-1"
    assert (removed["pointer"], removed["old_value"]) == ("/a/c", 2)
    assert removed["to_removed_by"]["kind"] == "repair" and removed["to_removed_by"]["entry_id"] == right


def test_a_provenance_entry_missing_from_the_path_is_unknown():
    tree = EntryTree()
    root = tree.commit([{"op": "add", "path": "/a", "value": 1}])
    path = tree.path(root)
    state = reduce_branch(path)
    state["provenance"]["/b"] = "feedf00d"  # as a hand-made checkpoint could carry
    records = provenance_records(entries_by_id(path), state)
    assert records["/b"]["kind"] == "unknown" and records["/b"]["entry_id"] == "feedf00d"
    assert records["/a"]["kind"] == "turn"


def test_the_pure_roleplay_modules_import_no_django():
    code = (
        "import sys\n"
        "import roleplay.errors, roleplay.inspection, roleplay.reducer, roleplay.schema\n"
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
