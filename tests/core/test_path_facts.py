"""Path facts (``core/path_facts.py``): the context built from the leaf's facts
and the few entries they name equals the context built from the whole path,
for random trees (Hypothesis) and for the recorded Pi sessions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontree.core.context_builder import build_context_from_path
from sessiontree.core.path import build_entry_index, path_entries
from sessiontree.core.path_facts import (
    PathFacts,
    ancestor_at,
    build_context_from_segment,
    context_path,
    facts_for,
    facts_in_order,
    walk_segment,
)
from tests.core.test_properties import PROPERTY_SETTINGS, session_trees


class Index:
    """An in-memory store of ``entries`` with their facts, as a provider keeps them."""

    def __init__(self, entries: list[dict]) -> None:
        self.by_id = {}
        self.facts = {}
        for entry, facts in zip(entries, facts_in_order(entries), strict=True):
            self.by_id.setdefault(entry["id"], entry)
            self.facts.setdefault(entry["id"], facts)
        self.lookups = 0

    def lookup(self, ids):
        self.lookups += 1
        return {i: (self.by_id[i], self.facts[i]) for i in ids if i in self.by_id}

    def segment(self, leaf_id, top):
        steps = self.facts[leaf_id].depth - top
        return walk_segment(leaf_id, steps, lambda i: self.by_id[i].get("parentId"), self.by_id.__getitem__)

    def context(self, leaf_id):
        return context_path(leaf_id, self.facts[leaf_id], self.lookup, self.segment)


@st.composite
def edited_trees(draw, max_entries: int = 40) -> list[dict]:
    """``session_trees`` plus what the facts must get right: context edits
    (replace or omit, of entries on or off the path), system messages in a
    kept range, messages with no content, compactions naming no entry or
    themselves, assistant messages that are not objects, thinking changes
    without a level, and parents that name no entry (Pi's forks)."""
    entries = draw(session_trees(max_entries=max_entries))
    out: list[dict] = []
    for index, entry in enumerate(entries):
        entry = dict(entry)
        roll = draw(st.integers(0, 29))
        earlier = [e["id"] for e in out] or [entry["id"]]
        if roll == 0 and out:
            entry = {
                "type": "context_edit",
                "id": entry["id"],
                "parentId": entry["parentId"],
                "timestamp": entry["timestamp"],
                "targetId": draw(st.sampled_from(earlier)),
                "replacement": draw(st.sampled_from([None, {"content": "edited"}, {"content": [{"type": "text"}]}])),
            }
        elif roll == 1:
            entry = {**entry, "type": "message", "message": {"role": "system", "content": f"sys {index}"}}
        elif roll == 2:
            entry = {**entry, "type": "message", "message": {"role": "user", "content": None}}
        elif roll == 3 and entry["type"] == "compaction":
            entry["firstKeptEntryId"] = draw(st.sampled_from([None, entry["id"], "ffffffff", 7]))
        elif roll == 4:
            entry = {**entry, "type": "message", "message": "not an object"}
        elif roll == 5:
            entry = {**entry, "type": "thinking_level_change"}
            entry.pop("thinkingLevel", None)
        elif roll == 6 and index > 0:
            entry["parentId"] = draw(st.sampled_from(["0000dead", entries[-1]["id"]]))  # missing, or a later entry
        elif roll == 7:
            entry = {**entry, "type": "model_change", "provider": "q", "modelId": f"m{index}"}
        out.append(entry)
    return out


@PROPERTY_SETTINGS
@given(edited_trees())
def test_context_from_the_facts_equals_the_context_from_the_whole_path(entries):
    index = Index(entries)
    by_id = build_entry_index(entries)
    for leaf_id in by_id:
        try:
            full = build_context_from_path(path_entries(leaf_id, by_id))
        except Exception:  # a cycle through a later parent: no context either way
            assert not index.facts[leaf_id].exact
            continue
        segment = index.context(leaf_id)
        if segment is None:
            assert not index.facts[leaf_id].exact, leaf_id
            continue
        assert build_context_from_segment(segment) == full, leaf_id


@PROPERTY_SETTINGS
@given(session_trees())
def test_facts_describe_the_path(entries):
    index = Index(entries)
    by_id = build_entry_index(entries)
    for leaf_id, facts in index.facts.items():
        path = path_entries(leaf_id, by_id)
        assert facts.exact
        assert facts.depth == len(path) - 1
        compactions = [e["id"] for e in path if e["type"] == "compaction"]
        assert facts.compaction_id == (compactions[-1] if compactions else None)
        thinking = [e["id"] for e in path if e["type"] == "thinking_level_change"]
        assert facts.thinking_id == (thinking[-1] if thinking else None)
        models = [
            e["id"]
            for e in path
            if e["type"] == "model_change" or (e["type"] == "message" and e["message"].get("role") == "assistant")
        ]
        assert facts.model_id == (models[-1] if models else None)


def _chain(count: int, every: int) -> list[dict]:
    entries: list[dict] = []
    parent = None
    for index in range(count):
        entry_id = f"{index:08x}"
        base = {"id": entry_id, "parentId": parent, "timestamp": "2026-04-19T00:00:00.000Z"}
        if index and index % every == 0:
            entry = {**base, "type": "compaction", "summary": "s", "firstKeptEntryId": f"{index - every // 3:08x}"}
        else:
            role = "user" if index % 2 else "assistant"
            entry = {**base, "type": "message", "message": {"role": role, "content": f"m{index}", "model": "x"}}
        entries.append(entry)
        parent = entry_id
    return entries


def test_a_long_session_reads_only_the_kept_segment():
    entries = _chain(2000, 400)
    index = Index(entries)
    read: list[str] = []
    segment = context_path(
        entries[-1]["id"],
        index.facts[entries[-1]["id"]],
        index.lookup,
        lambda leaf, top: read.extend([leaf]) or index.segment(leaf, top),
    )
    assert segment is not None
    # The last compaction is entry 1600 and keeps from 1467: 533 entries, none before.
    assert len(segment) == 2000 - 1467
    assert index.lookups == 2
    assert build_context_from_segment(segment) == build_context_from_path(entries)


def test_an_in_flight_leaf_gets_its_facts_from_its_parent():
    parent = PathFacts(4, "c", "m", None, True, "q", 3)
    streaming = {"id": "x", "parentId": "p", "type": "message", "message": {"role": "assistant", "content": []}}
    # Without the facts of the parent's jump, it jumps to its parent.
    assert facts_for(streaming, parent, parent_known=True) == PathFacts(5, "c", "x", None, True, "p", 4)
    # With them, Myers' rule: the parent's jump spans 1 level as the jump's own does, so twice as far.
    jump = PathFacts(3, None, None, None, True, "r", 2)
    assert facts_for(streaming, parent, parent_known=True, parent_jump=jump)[5:] == ("r", 2)
    assert facts_for(streaming, None, parent_known=False).exact is False


@pytest.mark.parametrize("name", ["large-session.jsonl", "before-compaction.jsonl"])
def test_pi_sessions_give_the_same_context_at_every_entry(name):
    from tests.core.test_pi_fixtures import loaded

    _header, entries, _migrated = loaded(name)
    index = Index(entries)
    by_id = build_entry_index(entries)
    compacted = 0
    for leaf_id in by_id:
        segment = index.context(leaf_id)
        assert segment is not None
        assert build_context_from_segment(segment) == build_context_from_path(path_entries(leaf_id, by_id))
        compacted += index.facts[leaf_id].compaction_id is not None
    if name == "before-compaction.jsonl":
        assert compacted  # the corpus exercises the compaction branch


@given(session_trees())
def test_the_ancestor_at_any_depth_is_found_in_few_steps(entries):
    """``ancestor_at`` gives the entry the walk finds at every depth of every
    exact entry's path, in O(log depth) steps (Myers' bound, 3 log2)."""
    index = Index(entries)
    by_id = build_entry_index(entries)
    for entry_id, facts in index.facts.items():
        if not facts.exact:
            assert ancestor_at(entry_id, 0, index.facts.get, lambda i: by_id[i].get("parentId")) is None
            continue
        path = [e["id"] for e in path_entries(entry_id, by_id)]
        assert len(path) == facts.depth + 1
        for depth in range(facts.depth + 1):
            steps = []

            def facts_of(i, steps=steps):
                steps.append(i)
                return index.facts.get(i)

            assert ancestor_at(entry_id, depth, facts_of, lambda i: by_id[i].get("parentId")) == path[depth]
            assert len(steps) - 1 <= 3 * max(1, (facts.depth - depth).bit_length()) + 2
        assert ancestor_at(entry_id, facts.depth + 1, index.facts.get, lambda i: None) is None
        assert ancestor_at(entry_id, -1, index.facts.get, lambda i: None) is None


def test_jumps_keep_a_long_chain_logarithmic():
    entries = [{"type": "message", "id": "e0", "parentId": None, "message": {"role": "user", "content": "x"}}]
    for i in range(1, 100_000):
        entries.append({"type": "message", "id": f"e{i}", "parentId": f"e{i - 1}", "message": {"role": "user"}})
    facts = dict(zip((e["id"] for e in entries), facts_in_order(entries), strict=True))
    parent_of = {e["id"]: e["parentId"] for e in entries}
    for leaf, depth in [("e99999", 0), ("e99999", 1), ("e99999", 50_000), ("e77777", 12_345), ("e99999", 99_998)]:
        steps = []

        def facts_of(i, steps=steps):
            steps.append(i)
            return facts.get(i)

        assert ancestor_at(leaf, depth, facts_of, parent_of.get) == f"e{depth}"
        assert len(steps) <= 3 * 17 + 2, (leaf, depth, len(steps))
