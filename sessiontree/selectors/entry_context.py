"""One entry in full, the LLM context the model would get with it as the
leaf, two leaves compared, and entries found by kind or text.

Context steps say, for every entry on the path, what became of it: sent as a
message, left out because a compaction summarized it, or never a message
(labels, settings, custom entries). Reads go through the provider contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sessiontree.core.compaction import estimate_context_tokens, estimate_tokens
from sessiontree.core.context_builder import build_context_from_path, entry_to_message
from sessiontree.core.entries import message_of
from sessiontree.core.errors import BadInput, EntryNotFound
from sessiontree.core.path import walk_path
from sessiontree.core.types import Entry, LabelInfo, SessionContext
from sessiontree.providers.base import SessionTreeProvider

from .tree_window import read_shape

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
    path_ids: list[str]
    label: LabelInfo | None
    context: SessionContext
    steps: list[ContextStep]
    tokens: int  # estimated size of the whole context
    children: list[str]
    on_active_path: bool
    is_leaf: bool
    leaf_entry_id: str | None
    compaction_id: str | None  # the compaction the context starts from
    hidden_steps: int = 0  # steps left out of ``steps`` (long paths show both ends)
    left_out: int = 0  # path entries a compaction left out of the context


def context_steps(path: Sequence[Entry], context: SessionContext) -> tuple[list[ContextStep], str | None]:
    """Each path entry's fate in ``context`` (built from ``path``)."""
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


def _shorten_steps(steps: list[ContextStep]) -> tuple[list[ContextStep], int]:
    if len(steps) <= MAX_STEPS:
        return steps, 0
    head = MAX_STEPS // 4
    tail = MAX_STEPS - head
    return [*steps[:head], *steps[-tail:]], len(steps) - MAX_STEPS


def entry_context(provider: SessionTreeProvider, session_id: str, entry_id: str) -> EntryContext:
    """``entry_id`` in full, its path, label, children, and the context with it as the leaf."""
    with provider.read(session_id) as view:
        state = view.state
        shape = read_shape(view)
        parent = shape.parent
        if entry_id not in parent:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        path_ids = walk_path(entry_id, parent)
        path = view.entries(path_ids)
        labels = shape.labels
        leaf_id = state.leaf_entry_id
        active = set(walk_path(leaf_id, parent)) if leaf_id is not None and leaf_id in parent else set()
    children = list(shape.children.get(entry_id, ()))
    context = build_context_from_path(path)
    steps, compaction_id = context_steps(path, context)
    shown, hidden = _shorten_steps(steps)
    return EntryContext(
        entry=path[-1],
        path_ids=path_ids,
        label=labels.get(entry_id),
        context=context,
        steps=shown,
        tokens=estimate_context_tokens(context["messages"]).tokens,
        children=children,
        on_active_path=entry_id in active,
        is_leaf=entry_id == leaf_id,
        leaf_entry_id=leaf_id,
        compaction_id=compaction_id,
        hidden_steps=hidden,
        left_out=sum(1 for step in steps if step.status == "compacted"),
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


@dataclass
class LeafComparison:
    common_ancestor_id: str | None
    common_ancestor: Entry | None
    common_depth: int
    a: BranchSide
    b: BranchSide
    rows: list[tuple[Entry | None, Entry | None]] = field(default_factory=list)


def _side(leaf_entry_id: str, path: list[Entry], common_index: int) -> BranchSide:
    context = build_context_from_path(path)
    divergent = path[common_index + 1 :]
    divergent_tokens = sum(estimate_tokens(message) for e in divergent if (message := entry_to_message(e)) is not None)
    return BranchSide(
        leaf_entry_id=leaf_entry_id,
        entries=divergent[:MAX_SIDE],
        count=len(divergent),
        context_tokens=estimate_context_tokens(context["messages"]).tokens,
        divergent_tokens=divergent_tokens,
        messages=len(context["messages"]),
    )


def compare_leaves(provider: SessionTreeProvider, session_id: str, a: str, b: str) -> LeafComparison:
    """Where the paths to ``a`` and ``b`` part, what each has since, and what each costs."""
    with provider.read(session_id) as view:
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
    side_a = _side(a, entries_a, common_index)
    side_b = _side(b, entries_b, common_index)
    width = max(len(side_a.entries), len(side_b.entries))
    rows = [
        (
            side_a.entries[i] if i < len(side_a.entries) else None,
            side_b.entries[i] if i < len(side_b.entries) else None,
        )
        for i in range(width)
    ]
    common_id = path_a[common_index] if common_index >= 0 else None
    return LeafComparison(
        common_ancestor_id=common_id,
        common_ancestor=by_id[common_id] if common_id is not None else None,
        common_depth=common_index,
        a=side_a,
        b=side_b,
        rows=rows,
    )


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


def _matches_text(entry: Entry, needle: str) -> bool:
    return needle in orjson.dumps(entry).decode("utf-8").casefold()


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
    ``user`` messages, ``labelled`` ones, or ``all``) whose JSON contains
    ``text`` (case-insensitive), one page at a time."""
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
