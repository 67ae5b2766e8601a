"""Properties of the pure kernel over random session trees (Hypothesis)."""

from __future__ import annotations

import collections
import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.fork import build_branched_entries
from sessiontree.core.path import (
    build_entry_index,
    build_tree,
    get_path_to_leaf,
    group_children_by_parent,
    resolve_latest_labels,
)
from sessiontree.core.pi_session_file import parse_session_entries, serialize_file
from sessiontree.core.types import ENTRY_TYPES

PROPERTY_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KINDS = [
    "user",
    "assistant",
    "toolResult",
    "label",
    "label",
    "thinking_level_change",
    "model_change",
    "compaction",
    "branch_summary",
    "custom_message",
    "custom",
    "session_info",
]


def ancestors(entry_id: str | None, parents: dict[str, str | None]) -> list[str]:
    """Root-first ids from the root to ``entry_id`` (a reference walk, independent of path.py)."""
    chain: list[str] = []
    while entry_id is not None:
        chain.append(entry_id)
        entry_id = parents[entry_id]
    return chain[::-1]


@st.composite
def session_trees(draw, max_entries: int = 40) -> list[dict]:
    """Entries in append order: each attaches to an earlier entry (often the
    latest, as appends do; sometimes an older one, as after a branch), or
    starts a new root after a reset. Labels sit on the path like Pi's do."""
    count = draw(st.integers(min_value=1, max_value=max_entries))
    entries: list[dict] = []
    parents: dict[str, str | None] = {}
    for index in range(count):
        entry_id = f"{index:08x}"
        if index == 0 or draw(st.integers(0, 19)) == 0:
            parent_id = None
        elif draw(st.booleans()):
            parent_id = entries[-1]["id"]
        else:
            parent_id = entries[draw(st.integers(0, index - 1))]["id"]
        parents[entry_id] = parent_id
        base = {
            "id": entry_id,
            "parentId": parent_id,
            "timestamp": f"2026-04-19T00:{index // 60:02d}:{index % 60:02d}.000Z",
        }
        kind = draw(st.sampled_from(KINDS))
        earlier_id = entries[draw(st.integers(0, index - 1))]["id"] if entries else entry_id
        if kind in {"user", "toolResult"}:
            entry = {"type": "message", **base, "message": {"role": kind, "content": f"{kind} {index}"}}
        elif kind == "assistant":
            provider, model = draw(st.sampled_from([("anthropic", "claude"), ("openai", "gpt"), ("google", "gemini")]))
            entry = {
                "type": "message",
                **base,
                "message": {"role": "assistant", "content": f"reply {index}", "provider": provider, "model": model},
            }
        elif kind == "label":
            entry = {
                "type": "label",
                **base,
                "targetId": earlier_id,
                "label": draw(st.sampled_from(["a", "b", "", None])),
            }
        elif kind == "thinking_level_change":
            entry = {"type": kind, **base, "thinkingLevel": draw(st.sampled_from(["off", "low", "high"]))}
        elif kind == "model_change":
            entry = {"type": kind, **base, "provider": "p", "modelId": draw(st.sampled_from(["m1", "m2"]))}
        elif kind == "compaction":
            on_path = ancestors(parent_id, parents) or [entry_id]
            first_kept = draw(st.sampled_from([*on_path, earlier_id]))
            entry = {
                "type": kind,
                **base,
                "summary": f"summary {index}",
                "firstKeptEntryId": first_kept,
                "tokensBefore": index,
            }
        elif kind == "branch_summary":
            entry = {
                "type": kind,
                **base,
                "fromId": earlier_id,
                "summary": draw(st.sampled_from(["", "went elsewhere"])),
            }
        elif kind == "custom_message":
            entry = {"type": kind, **base, "customType": "note", "content": f"note {index}", "display": True}
        elif kind == "custom":
            entry = {"type": kind, **base, "customType": "state", "data": {"n": index}}
        else:
            entry = {"type": kind, **base, "name": f"name {index}"}
        entries.append(entry)
    return entries


@PROPERTY_SETTINGS
@given(session_trees())
def test_every_path_runs_root_to_leaf(entries):
    parents = {e["id"]: e["parentId"] for e in entries}
    for leaf in entries:
        path = get_path_to_leaf(entries, leaf["id"])
        assert path[0]["parentId"] is None
        assert path[-1] is leaf
        for previous, current in itertools.pairwise(path):
            assert current["parentId"] == previous["id"]
        assert [e["id"] for e in path] == ancestors(leaf["id"], parents)


@PROPERTY_SETTINGS
@given(session_trees())
def test_tree_contains_every_entry_once_under_its_parent(entries):
    children = group_children_by_parent(entries)
    seen: list[str] = []
    roots = build_tree(entries)
    assert [n["entry"]["id"] for n in roots] == children[None]
    stack = list(roots)
    while stack:
        node = stack.pop()
        entry_id = node["entry"]["id"]
        seen.append(entry_id)
        assert [c["entry"]["id"] for c in node["children"]] == children.get(entry_id, [])
        stack.extend(node["children"])
    assert collections.Counter(seen) == collections.Counter(e["id"] for e in entries)


@PROPERTY_SETTINGS
@given(session_trees())
def test_context_messages_come_from_the_path_one_to_one(entries):
    by_id = build_entry_index(entries)
    for leaf in entries:
        context = build_session_context(entries, leaf["id"], by_id)
        path_ids = {e["id"] for e in get_path_to_leaf(entries, leaf["id"], by_id)}
        assert len(context["source_entry_ids"]) == len(context["messages"])
        assert set(context["source_entry_ids"]) <= path_ids
        for entry_id, message in zip(context["source_entry_ids"], context["messages"], strict=True):
            if by_id[entry_id]["type"] == "message":
                assert message is by_id[entry_id]["message"]


def _message(entry_id, parent_id, text):
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": "t",
        "message": {"role": "user", "content": text},
    }


# A compaction that keeps entries from a label entry: the fork drops the label,
# so it must keep from the next copied entry (found by this property).
COMPACTION_KEEPING_FROM_A_LABEL = [
    _message("u1", None, "1"),
    {"type": "label", "id": "l1", "parentId": "u1", "timestamp": "t", "targetId": "u1", "label": "x"},
    _message("u2", "l1", "2"),
    {
        "type": "compaction",
        "id": "c1",
        "parentId": "u2",
        "timestamp": "t",
        "summary": "s",
        "firstKeptEntryId": "l1",
        "tokensBefore": 1,
    },
    _message("u3", "c1", "3"),
]
# Pi 0.58.3's fork loses everything before a label; ours re-attaches.
MESSAGE_AFTER_LABELS = [
    _message("u1", None, "1"),
    {"type": "label", "id": "l1", "parentId": "u1", "timestamp": "t", "targetId": "u1", "label": "x"},
    {"type": "label", "id": "l2", "parentId": "l1", "timestamp": "t", "targetId": "u1", "label": "y"},
    _message("u2", "l2", "2"),
]


@PROPERTY_SETTINGS
@example(entries=COMPACTION_KEEPING_FROM_A_LABEL, leaf_pick=4)
@example(entries=MESSAGE_AFTER_LABELS, leaf_pick=3)
@example(entries=MESSAGE_AFTER_LABELS, leaf_pick=2)
@given(entries=session_trees(), leaf_pick=st.integers(min_value=0))
def test_fork_context_equals_the_source_context_at_the_fork_point(entries, leaf_pick):
    leaf = entries[leaf_pick % len(entries)]
    path = get_path_to_leaf(entries, leaf["id"])
    labels = resolve_latest_labels(entries)
    source_context = build_session_context(entries, leaf["id"])

    copy = build_branched_entries(path, labels)

    kept = [e for e in path if e["type"] != "label"]
    copied_non_labels = [e for e in copy if e["type"] != "label"]
    assert [e["id"] for e in copied_non_labels] == [e["id"] for e in kept]
    assert len({e["id"] for e in copy}) == len(copy)
    source_label_ids = {e["id"] for e in entries if e["type"] == "label"}
    assert not source_label_ids & {e["id"] for e in copy}
    if not kept:
        assert copy == []
        assert source_context["messages"] == []
        return

    # The copy is one unbroken chain: dropping labels orphaned nothing.
    assert [e["id"] for e in get_path_to_leaf(copy, copy[-1]["id"])] == [e["id"] for e in copy]
    assert build_session_context(copy, kept[-1]["id"]) == source_context
    assert build_session_context(copy) == source_context

    kept_ids = {e["id"] for e in kept}
    assert {t: info["label"] for t, info in resolve_latest_labels(copy).items()} == {
        t: info["label"] for t, info in labels.items() if t in kept_ids
    }


@PROPERTY_SETTINGS
@given(session_trees())
def test_fork_leaves_the_source_entries_unchanged(entries):
    snapshot = serialize_file(entries)
    leaf = entries[-1]
    build_branched_entries(get_path_to_leaf(entries, leaf["id"]), resolve_latest_labels(entries))
    assert serialize_file(entries) == snapshot


# --- JSONL round trip ------------------------------------------------------

json_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=20)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=12,
)
random_entries = st.builds(
    lambda entry_type, entry_id, parent_id, timestamp, extra: {
        "type": entry_type,
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": timestamp,
        **{k: v for k, v in extra.items() if k not in {"type", "id", "parentId", "timestamp"}},
    },
    st.sampled_from(sorted(ENTRY_TYPES)) | json_text,
    json_text,
    st.none() | json_text,
    json_text,
    st.dictionaries(json_text, json_values, max_size=5),
)


@PROPERTY_SETTINGS
@given(st.lists(random_entries, max_size=8))
def test_jsonl_round_trip_is_identity(entries):
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/", "extra": {"kept": [1, 2.5]}}
    data = serialize_file([header, *entries])
    assert data.count(b"\n") == len(entries) + 1  # one line per entry, whatever the strings hold
    parsed = parse_session_entries(data)
    assert parsed == [header, *entries]
    # Key order survives too (dict equality ignores it; the bytes do not).
    assert serialize_file(parsed) == data
