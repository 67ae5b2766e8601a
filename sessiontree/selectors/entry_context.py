"""One entry in full, the LLM context the model would get with it as the
leaf, two leaves compared, and entries found by kind or text.

Context steps say, for every entry on the path, what became of it: sent as a
message, left out because a compaction summarized it, or never a message
(labels, settings, custom entries). Reads go through the provider contract.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sessiontree.core.compaction import ContextUsageEstimate, estimate_context_tokens, estimate_tokens
from sessiontree.core.context_builder import build_context_from_path, entry_to_message
from sessiontree.core.entries import message_of
from sessiontree.core.errors import BadInput, EntryNotFound
from sessiontree.core.path import resolve_latest_labels, walk_path
from sessiontree.core.path_facts import PathFacts, build_context_from_segment
from sessiontree.core.text import entry_role, entry_text
from sessiontree.core.types import Entry, LabelInfo, SessionContext
from sessiontree.providers import keyed_reads
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.template import context_entries, read_path

from .tree_window import KEYED_FROM, NAME_LOOKAHEAD, read_shape, read_skeleton

# Context steps shown in full at most; longer contexts show their two ends.
MAX_STEPS = 400


@dataclass
class ContextStep:
    """What one entry of the path contributes to the context."""

    entry: Entry
    status: str  # "sent" | "compacted" | "summary" | "not_a_message"
    message: dict[str, Any] | None = None  # what is sent for it
    compacted_by: str = ""
    tokens: int = 0


@dataclass
class EntryContext:
    entry: Entry
    depth: int  # the entry's ancestors
    path_tail: list[str]  # the last ids of its path (at most ``PATH_TAIL``), root first, the entry last
    label: LabelInfo | None
    context: SessionContext
    steps: list[ContextStep]  # the context's segment: from the first entry it keeps (or its root) to the entry
    tokens: int  # estimated size of the whole context
    usage: ContextUsageEstimate  # how ``tokens`` was counted: provider-reported usage + estimated messages
    children: list[str]
    on_active_path: bool
    is_leaf: bool
    leaf_entry_id: str | None
    compaction_id: str | None  # the compaction the context starts from
    hidden_steps: int = 0  # steps left out of ``steps`` (long segments show both ends)
    left_out: int = 0  # path entries a compaction left out of the context (above the segment, and in it)

    @property
    def path_length(self) -> int:
        return self.depth + 1


# The path ids an entry panel reads: its last ``PATH_TAIL`` (a longer path
# says how many more are above them).
PATH_TAIL = 100


def context_steps(path: Sequence[Entry], context: SessionContext) -> tuple[list[ContextStep], str | None]:
    """Each path entry's fate in ``context`` (built from ``path``, or from a
    segment of it: see ``context_segment``)."""
    sent = dict(zip(context["source_entry_ids"], context["messages"], strict=True))
    compaction_id = None
    for entry in reversed(path):
        if entry.get("type") == "compaction":
            compaction_id = entry["id"]
            break
    steps = []
    before_compaction = compaction_id is not None
    for entry in path:
        message = sent.get(entry["id"])
        if entry["id"] == compaction_id:
            steps.append(ContextStep(entry, "summary", message, tokens=estimate_tokens(message or {})))
            before_compaction = False
        elif message is not None:
            steps.append(ContextStep(entry, "sent", message, tokens=estimate_tokens(message)))
        elif before_compaction and (entry_to_message(entry) is not None or entry.get("type") == "compaction"):
            # A message (or an older summary) the latest compaction summarized away.
            steps.append(ContextStep(entry, "compacted", compacted_by=compaction_id or ""))
        else:
            steps.append(ContextStep(entry, "not_a_message"))
    return steps, compaction_id


def context_segment(built_from: Sequence[Entry]) -> list[Entry]:
    """The path segment the context is made of, out of what it is built from
    (``template.context_entries``: the whole path, or the segment after the
    entries above it that only set the model or the thinking level): from the
    nearest compaction's first kept entry (the compaction itself when it keeps
    nothing of the path; the root without a compaction) down to the leaf."""
    if not built_from:
        return []
    start = len(built_from) - 1
    while start > 0 and built_from[start].get("parentId") == built_from[start - 1].get("id"):
        start -= 1
    chain = list(built_from[start:])
    at = next((i for i in range(len(chain) - 1, -1, -1) if chain[i].get("type") == "compaction"), None)
    if at is None:
        return chain
    first_kept = chain[at].get("firstKeptEntryId")
    kept = next((i for i in range(at) if chain[i].get("id") == first_kept), at)
    return chain[kept:]


def _shorten_steps(steps: list[ContextStep]) -> tuple[list[ContextStep], int]:
    if len(steps) <= MAX_STEPS:
        return steps, 0
    head = MAX_STEPS // 4
    tail = MAX_STEPS - head
    return [*steps[:head], *steps[-tail:]], len(steps) - MAX_STEPS


def _on_path_to(view: Any, leaf_id: str | None, facts: Mapping[str, PathFacts], entry_id: str) -> bool:
    """Whether ``entry_id`` is on the path to ``leaf_id``: the leaf's ancestor at
    the entry's depth, walked by parent (ids only) over the depths between them."""
    if leaf_id is None:
        return False
    if leaf_id == entry_id:
        return True
    leaf, own = facts.get(leaf_id), facts.get(entry_id)
    if leaf is not None and own is not None and leaf.exact and own.exact:
        return leaf.depth > own.depth and keyed_reads.path_ids(view, leaf_id, leaf.depth - own.depth)[0] == entry_id
    return entry_id in keyed_reads.path_ids(view, leaf_id, view.state.entry_count)


def entry_context(provider: SessionTreeProvider, session_id: str, entry_id: str) -> EntryContext:
    """``entry_id`` in full, the end of its path, label, children, and the
    context with it as the leaf: read by key from the storage's path facts
    (``core/path_facts.py``), so it costs the context's segment, not the path
    (the whole path is read only where the facts cannot say)."""
    with provider.read(session_id) as view:
        state = view.state
        leaf_id = state.leaf_entry_id
        facts = keyed_reads.entry_facts(view, [entry_id] if leaf_id is None else [entry_id, leaf_id])
        own = facts.get(entry_id)
        if own is not None and own.exact:
            built_from = context_entries(view, entry_id)
            depth = own.depth
            tail = keyed_reads.path_ids(view, entry_id, min(depth, PATH_TAIL - 1))
        else:  # facts that cannot say (a streaming entry, an orphan's subtree): the whole path
            if view.get(entry_id) is None:
                raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
            built_from = read_path(view, entry_id)
            depth = len(built_from) - 1
            tail = [entry["id"] for entry in built_from[-PATH_TAIL:]]
        if not built_from or built_from[-1].get("id") != entry_id:  # pragma: no cover - a damaged store
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        children = keyed_reads.child_ids(view, entry_id)
        # A childless entry other than the leaf is a tip of another branch.
        on_active = leaf_id == entry_id or (bool(children) and _on_path_to(view, leaf_id, facts, entry_id))
        label = keyed_reads.label_of(view, entry_id)
    context = build_context_from_segment(built_from)
    segment = context_segment(built_from)
    steps, compaction_id = context_steps(segment, context)
    shown, hidden = _shorten_steps(steps)
    usage = estimate_context_tokens(context["messages"])
    above = depth + 1 - len(segment)
    return EntryContext(
        entry=built_from[-1],
        depth=depth,
        path_tail=tail,
        label=label,
        context=context,
        steps=shown,
        tokens=usage.tokens,
        usage=usage,
        children=children,
        on_active_path=on_active,
        is_leaf=entry_id == leaf_id,
        leaf_entry_id=leaf_id,
        compaction_id=compaction_id,
        hidden_steps=hidden,
        left_out=(above if compaction_id is not None else 0) + sum(1 for step in steps if step.status == "compacted"),
    )


# --- two leaves compared ------------------------------------------------------------------------

MAX_SIDE = 500  # divergent entries shown per side


@dataclass
class BranchSide:
    leaf_entry_id: str
    entries: list[Entry]  # after the common ancestor, root first (at most MAX_SIDE)
    count: int  # all divergent entries
    context_tokens: int  # estimated size of the whole context at this leaf
    divergent_tokens: int  # estimated tokens of the messages after the common ancestor
    messages: int  # messages in the context at this leaf
    usage: ContextUsageEstimate | None = None  # how ``context_tokens`` was counted
    depth: int = 0  # the leaf's depth


@dataclass
class AlignedRow:
    """One line of two compared branches, aligned from their common ancestor.

    ``kind``: ``same`` (both sides hold an entry with the same content),
    ``changed`` (both hold an entry at this point of the conversation, with
    different content), ``only_a`` / ``only_b`` (one side has an entry the
    other has nothing for)."""

    kind: str
    a: Entry | None
    b: Entry | None
    a_depth: int = 0
    b_depth: int = 0


@dataclass
class LeafComparison:
    common_ancestor_id: str | None
    common_ancestor: Entry | None
    common_depth: int
    a: BranchSide
    b: BranchSide
    rows: list[AlignedRow] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        found = {"same": 0, "changed": 0, "only_a": 0, "only_b": 0}
        for row in self.rows:
            found[row.kind] += 1
        return found


def _side(leaf_entry_id: str, path: list[Entry], common_index: int) -> BranchSide:
    return _side_of(leaf_entry_id, build_context_from_path(path), path[common_index + 1 :], len(path) - 1)


def _side_of(leaf_entry_id: str, context: SessionContext, divergent: list[Entry], depth: int) -> BranchSide:
    """One side of a comparison: the context at its leaf and its entries after the common ancestor."""
    divergent_tokens = sum(estimate_tokens(message) for e in divergent if (message := entry_to_message(e)) is not None)
    usage = estimate_context_tokens(context["messages"])
    return BranchSide(
        leaf_entry_id=leaf_entry_id,
        entries=divergent[:MAX_SIDE],
        count=len(divergent),
        context_tokens=usage.tokens,
        divergent_tokens=divergent_tokens,
        messages=len(context["messages"]),
        usage=usage,
        depth=depth,
    )


_NOT_CONTENT = frozenset({"id", "parentId", "timestamp"})


def content_key(entry: Entry) -> str:
    """What an entry says, without where it sits: its type, its role, its text
    (else its other fields). Two entries with the same key say the same thing."""
    text = entry_text(entry)
    if text:
        return f"{entry.get('type')}\x00{entry_role(entry) or ''}\x00{text}"
    rest = {key: value for key, value in entry.items() if key not in _NOT_CONTENT}
    if entry.get("type") == "message" and isinstance(rest.get("message"), Mapping):
        message = dict(rest["message"])
        for volatile in ("timestamp", "usage", "responseId"):
            message.pop(volatile, None)
        rest["message"] = message
    return orjson.dumps(rest, option=orjson.OPT_SORT_KEYS, default=str).decode("utf-8")


def _kind_key(entry: Entry) -> str:
    return f"{entry.get('type')}\x00{entry_role(entry) or entry.get('customType') or ''}"


def align_branches(a: Sequence[Entry], b: Sequence[Entry], *, a_depth: int = 0, b_depth: int = 0) -> list[AlignedRow]:
    """The entries after a common ancestor on two branches, aligned by what they
    say rather than by position: equal entries side by side (``same``), runs
    that differ paired by kind where they can (``changed``), the rest on one
    side only. Depths count from the ancestor's depth + 1."""
    keys_a = [content_key(entry) for entry in a]
    keys_b = [content_key(entry) for entry in b]
    rows: list[AlignedRow] = []
    depth = {"a": a_depth, "b": b_depth}

    def add(kind: str, x: Entry | None, y: Entry | None) -> None:
        if x is not None:
            depth["a"] += 1
        if y is not None:
            depth["b"] += 1
        rows.append(AlignedRow(kind, x, y, depth["a"] if x is not None else 0, depth["b"] if y is not None else 0))

    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for x, y in zip(a[i1:i2], b[j1:j2], strict=True):
                add("same", x, y)
            continue
        for left, right in _pair_by_kind(a[i1:i2], b[j1:j2]):
            kind = "changed" if left is not None and right is not None else ("only_a" if left is not None else "only_b")
            add(kind, left, right)
    return rows


def _pair_by_kind(a: Sequence[Entry], b: Sequence[Entry]) -> Iterator[tuple[Entry | None, Entry | None]]:
    """Two differing runs paired where their kinds (type and role) line up, in order."""
    matcher = difflib.SequenceMatcher(None, [_kind_key(e) for e in a], [_kind_key(e) for e in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            yield from zip(a[i1:i2], b[j1:j2], strict=True)
            continue
        yield from ((x, None) for x in a[i1:i2])
        yield from ((None, y) for y in b[j1:j2])


def compare_leaves(provider: SessionTreeProvider, session_id: str, a: str, b: str) -> LeafComparison:
    """Where the paths to ``a`` and ``b`` part, what each has since, and what each costs.

    From ``KEYED_FROM`` entries on (storages with path facts), read by key
    (issue 23): the common ancestor's depth by a search over the two paths'
    ancestors (the jumps), each side's entries after it, each side's context
    from the entries it needs; not the two whole paths."""
    with provider.read(session_id) as view:
        keyed = _compare_by_key(view, session_id, a, b)
        if keyed is not None:
            return keyed
        parent = read_shape(view).parent
        for entry_id in (a, b):
            if entry_id not in parent:
                raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        path_a = walk_path(a, parent)
        path_b = walk_path(b, parent)
        common_index = -1
        for index, (x, y) in enumerate(zip(path_a, path_b, strict=False)):
            if x != y:
                break
            common_index = index
        wanted = list(dict.fromkeys([*path_a, *path_b]))
        by_id = dict(zip(wanted, view.entries(wanted), strict=True))
    entries_a = [by_id[entry_id] for entry_id in path_a]
    entries_b = [by_id[entry_id] for entry_id in path_b]
    common_id = path_a[common_index] if common_index >= 0 else None
    return _comparison(
        _side(a, entries_a, common_index),
        _side(b, entries_b, common_index),
        common_index,
        common_id,
        by_id[common_id] if common_id is not None else None,
    )


def _comparison(
    side_a: BranchSide, side_b: BranchSide, common_index: int, common_id: str | None, common: Entry | None
) -> LeafComparison:
    rows = align_branches(side_a.entries, side_b.entries, a_depth=common_index, b_depth=common_index)
    return LeafComparison(
        common_ancestor_id=common_id,
        common_ancestor=common,
        common_depth=common_index,
        a=side_a,
        b=side_b,
        rows=rows,
    )


def _compare_by_key(view: Any, session_id: str, a: str, b: str) -> LeafComparison | None:
    """``compare_leaves`` read by key, ``None`` where the facts cannot say."""
    if getattr(view, "entry_facts", None) is None or view.state.entry_count < KEYED_FROM:
        return None
    facts = keyed_reads.entry_facts(view, [a, b])
    for entry_id in (a, b):
        if entry_id not in facts:
            if entry_id in view.known_ids([entry_id]):
                return None  # held without facts (an entry in flight): the whole shape says
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
    fa, fb = facts[a], facts[b]
    if not (fa.exact and fb.exact):
        return None
    common = _common_depth(view, a, fa.depth, b, fb.depth)
    if common is None:
        return None
    sides = []
    for entry_id, own in ((a, fa), (b, fb)):
        divergent = keyed_reads.path_entries(view, entry_id, common + 1, own.depth) if own.depth > common else []
        if divergent is None:
            return None
        context = build_context_from_segment(context_entries(view, entry_id))
        sides.append(_side_of(entry_id, context, divergent, own.depth))
    common_id = keyed_reads.ancestor_at(view, a, common) if common >= 0 else None
    if common >= 0 and common_id is None:
        return None
    common_entry = view.entries([common_id])[0] if common_id is not None else None
    return _comparison(sides[0], sides[1], common, common_id, common_entry)


def _common_depth(view: Any, a: str, depth_a: int, b: str, depth_b: int) -> int | None:
    """The depth of the deepest common ancestor of ``a`` and ``b`` (-1: none,
    two roots), found from the bottom: the first depth up where the two
    paths agree by a galloping then binary search (a tree's paths agree above
    their common ancestor and differ below it), each probe two reads of an
    ancestor by the jumps. ``None`` when an ancestor cannot be read."""
    cache: dict[tuple[str, int], str | None] = {}

    def ancestor(entry_id: str, depth: int) -> str | None:
        key = (entry_id, depth)
        if key not in cache:
            cache[key] = keyed_reads.ancestor_at(view, entry_id, depth)
        return cache[key]

    def agree(depth: int) -> bool | None:
        x, y = ancestor(a, depth), ancestor(b, depth)
        if x is None or y is None:
            return None
        return x == y

    top = min(depth_a, depth_b)
    # Galloping up from the shallower leaf's depth: where the paths agree.
    step, high = 1, top
    low = -1  # the deepest depth known to agree (-1: none yet)
    while high >= 0:
        found = agree(high)
        if found is None:
            return None
        if found:
            low = high
            break
        top = high - 1  # every depth from here down differs
        high -= step
        step *= 2
    if low < 0 and high < 0:
        found = agree(0)
        if found is None:
            return None
        if not found:
            return -1
        low = 0
    # The answer lies in [low, top]: the paths agree at ``low`` and differ past ``top``.
    while low < top:
        middle = (low + top + 1) // 2
        found = agree(middle)
        if found is None:
            return None
        if found:
            low = middle
        else:
            top = middle - 1
    return low


# --- the latest branch tips, by key ---------------------------------------------------------

TIPS_SCAN = 5_000


def recent_tips(view: Any, limit: int, *, scan: int | None = None) -> list[str] | None:
    """Up to ``limit`` branch tips (entries without children) among the
    session's last ``scan`` entries (``TIPS_SCAN``), the latest ones, in
    append order, by key (``keyed_reads.latest_tips``: one statement on
    ``mysql``), whatever the session's length. ``None`` for a storage without
    path facts (the caller reads the whole shape)."""
    if getattr(view, "entry_facts", None) is None:
        return None
    found = keyed_reads.latest_tips(view, limit, TIPS_SCAN if scan is None else scan)
    return [entry_id for _, entry_id in sorted(found)]


# --- branch tips, named ----------------------------------------------------------------------

TIPS_NAMED = 200


@dataclass
class BranchTip:
    """The end of a branch, named so an operator can tell it from the others."""

    entry_id: str
    is_leaf: bool
    depth: int
    fork_id: str | None  # where its branch leaves the active path (None: the active path itself)
    size: int  # entries from the fork to the tip
    label: str  # the latest label on the branch, if any
    name_entry: Entry | None  # the first message of the branch (the leaf's: the latest user message)
    tip_entry: Entry | None
    on_active_path: bool = False


def branch_tips(provider: SessionTreeProvider, session_id: str, *, limit: int = TIPS_NAMED) -> list[BranchTip]:
    """The session's branch tips (the leaf first, then the others, latest first),
    each with where its branch leaves the active path, its size, its latest
    label and the message it is named by.

    Under ``KEYED_FROM`` entries (or on a storage without path facts): from
    the whole shape, one batch of payloads. From it on, by key (issue 23):
    the latest tips among the last ``TIPS_SCAN`` entries, each walked up to
    the active path (``keyed_reads.walk_to_path``), the leaf named by its
    last ``LEAF_LABEL_SCAN`` path entries; the work is the branches shown,
    not the session."""
    with provider.read(session_id) as view:
        found = _tips_by_key(view, limit)
        if found is None:
            found = _tips_from_shape(view, limit)
        named, labels, depths, leaf = found
        wanted: dict[str, None] = {}
        for tip, branch, fork in named:
            wanted[tip] = None
            head = branch[-NAME_LOOKAHEAD * 4 :] if fork is None else branch[:NAME_LOOKAHEAD]
            wanted.update(dict.fromkeys(head))
        ids = list(wanted)
        by_id = dict(zip(ids, view.entries(ids), strict=True)) if ids else {}
    tips: list[BranchTip] = []
    for tip, branch, fork in named:
        if fork is None:
            recent = [by_id[e] for e in reversed(branch[-NAME_LOOKAHEAD * 4 :])]
            name = next((e for e in recent if entry_role(e) == "user"), None)
        else:
            first = [by_id[e] for e in branch[:NAME_LOOKAHEAD]]
            name = next((e for e in first if entry_role(e) == "user"), None) or next(
                (e for e in first if e.get("type") == "message"), first[0] if first else None
            )
        label = next((labels[e]["label"] for e in reversed(branch) if e in labels), "")
        tips.append(
            BranchTip(
                entry_id=tip,
                is_leaf=tip == leaf,
                depth=depths[tip],
                fork_id=fork,
                size=len(branch) if fork is not None else 0,
                label=label,
                name_entry=name,
                tip_entry=by_id.get(tip),
                on_active_path=tip == leaf,  # a tip on the path has no child: the leaf
            )
        )
    return tips


# (tip, its branch root first, fork) of each tip shown; the labels aimed at the
# branches' entries; each tip's depth; the leaf.
_NamedTips = tuple[list[tuple[str, list[str], str | None]], Mapping[str, LabelInfo], Mapping[str, int], str | None]

# The leaf's label is the latest label among its last this many path entries (by key).
LEAF_LABEL_SCAN = 900


def _tips_from_shape(view: Any, limit: int) -> _NamedTips:
    """``branch_tips``'s reading from the whole shape."""
    skeleton = read_skeleton(view)
    shape = skeleton.shape
    active = skeleton.active
    leaf = skeleton.leaf_entry_id
    tips = list(reversed(shape.tips()))
    if leaf is not None and leaf in shape.parent:
        tips = [leaf, *(tip for tip in tips if tip != leaf)]
    on_path = {entry_id: depth for depth, entry_id in enumerate(skeleton.active_path)}
    named: list[tuple[str, list[str], str | None]] = []
    depths: dict[str, int] = {}
    for tip in tips[:limit]:
        branch: list[str] = []
        seen: set[str] = set()
        current: str | None = tip
        while current is not None and current not in active and current not in seen:  # (a parent cycle: damaged)
            branch.append(current)
            seen.add(current)
            current = shape.parent_of(current)
        if current in seen:
            current = None
        if not branch:  # the leaf, or a tip on the active path: name it by its own recent past
            named.append((tip, walk_path(tip, shape.parent), None))
            depths[tip] = on_path[tip]
        else:
            named.append((tip, list(reversed(branch)), current))
            # Below its fork, or the whole path up from a root off the active path.
            depths[tip] = on_path[current] + len(branch) if current is not None else len(branch) - 1
    return named, skeleton.labels, depths, leaf


def _tips_by_key(view: Any, limit: int) -> _NamedTips | None:
    """``branch_tips``'s reading by key; ``None`` where the whole shape must say."""
    state = view.state
    leaf = state.leaf_entry_id
    if leaf is None or getattr(view, "entry_facts", None) is None or state.entry_count < KEYED_FROM:
        return None
    # The last entries with their parents: the tips among them, and the walks
    # up from them and from the leaf as far as they reach, without a statement.
    tail = keyed_reads.tail_parents(view, TIPS_SCAN)
    latest = [entry_id for _, entry_id in keyed_reads.tips_in(view, tail, limit)]
    tips = [leaf, *(tip for tip in latest if tip != leaf)][: max(limit, 1)]
    facts = keyed_reads.entry_facts(view, tips)
    if any(tip not in facts or not facts[tip].exact for tip in tips):
        return None  # an entry in flight, or facts that cannot say
    parents = {entry_id: parent for _, entry_id, parent in tail}
    walks = keyed_reads.walk_to_path(view, leaf, tips[1:], window=TIPS_SCAN, tail=parents)
    if walks is None:
        return None
    named: list[tuple[str, list[str], str | None]] = [
        (leaf, keyed_reads.path_up(view, leaf, LEAF_LABEL_SCAN - 1, parents), None)
    ]
    for tip in tips[1:]:
        walked, fork = walks[tip]
        named.append((tip, list(reversed(walked)), fork))
    targets = list(dict.fromkeys(entry_id for _, branch, _ in named for entry_id in branch))
    labels: dict[str, LabelInfo] = {}
    for at in range(0, len(targets), _LABEL_BATCH):  # every label of a target comes in its batch
        labels.update(
            resolve_latest_labels(keyed_reads.entries_targeting_any(view, targets[at : at + _LABEL_BATCH], ("label",)))
        )
    return named, labels, {tip: facts[tip].depth for tip in tips}, leaf


# Targets asked for at once (the mysql provider reads by key up to 2,000).
_LABEL_BATCH = 2000


# --- entries found by kind or text -----------------------------------------------------------

ENTRY_FILTERS: tuple[str, ...] = ("all", "messages", "user", "labelled")


@dataclass
class EntryMatches:
    entries: list[Entry]  # this page of matches, append order
    total: int
    page: int
    pages: int
    labels: dict[str, LabelInfo]
    active: set[str]
    leaf_entry_id: str | None


def _string_values(value: Any) -> Iterator[str]:
    """The strings inside a JSON value (values only: never an object's keys)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _string_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_values(item)


def searchable_text(entry: Entry) -> str:
    """What "find" looks in: the entry's words (``core.text.entry_text``:
    messages, tool calls and results, summaries), a custom entry's string
    values, a label's text, a session name; never JSON keys, ids, types or
    numbers (so "usage" does not find every assistant message)."""
    kind = entry.get("type")
    if kind == "custom":
        return "\n".join(_string_values(entry.get("data")))
    if kind == "label":
        return str(entry.get("label") or "")
    if kind == "session_info":
        return str(entry.get("name") or "")
    return entry_text(entry)


def _matches_text(entry: Entry, needle: str) -> bool:
    return needle in searchable_text(entry).casefold() or entry.get("id") == needle


def find_entries(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    show: str = "all",
    text: str = "",
    page: int = 1,
    per_page: int = 200,
) -> EntryMatches:
    """Entries of the session (append order) of one kind (``messages``,
    ``user`` messages, ``labelled`` ones, or ``all``) whose text
    (``searchable_text``) contains ``text`` (case-insensitive), or whose id
    is ``text``, one page at a time."""
    if show not in ENTRY_FILTERS:
        raise BadInput(f"Unknown entry filter {show!r}; use one of {', '.join(ENTRY_FILTERS)}")
    needle = text.strip().casefold()
    with provider.read(session_id) as view:
        state = view.state
        shape = read_shape(view)
        parent = shape.parent
        labels = shape.labels
        if show == "labelled":
            ids = [entry_id for entry_id in parent if entry_id in labels]
            candidates = view.entries(ids)
        elif show in ("messages", "user"):
            candidates = view.all_entries(types=("message",))
            if show == "user":
                candidates = [e for e in candidates if message_of(e).get("role") == "user"]
        else:
            candidates = view.all_entries()
        leaf_id = state.leaf_entry_id
        active = set(walk_path(leaf_id, parent)) if leaf_id is not None and leaf_id in parent else set()
    if needle:
        candidates = [entry for entry in candidates if _matches_text(entry, needle)]
    total = len(candidates)
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    return EntryMatches(
        entries=candidates[(page - 1) * per_page : page * per_page],
        total=total,
        page=page,
        pages=pages,
        labels=labels,
        active=active,
        leaf_entry_id=leaf_id,
    )
