"""Roleplay reads: the state at any entry, the review queue, the state panel's
detail, the diff of two entries, the checkpoints on a path.

Each is one consistent read (``provider.read``) that loads only the entries
the reduction needs (``reducer.reduce_branch_from_ids``: the head up to the
identity's lock and the tail from the latest checkpoint); none moves the
leaf. ``inspect_state``, ``list_reviews`` and ``review_queue`` also read the
path's ids by key (``KeyedPath``: the storage's path facts and jumps), so
their cost follows what they read, not the path's length; a session without
roleplay entries reads no path at all. ``roleplay/inspection.py`` builds the
views.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal, TypedDict, overload

from sessiontree.core.errors import EntryNotFound
from sessiontree.core.path import walk_path
from sessiontree.core.pi_session_file import gc_paused
from sessiontree.core.types import UNSET, Entry, Unset
from sessiontree.providers import keyed_reads
from sessiontree.providers.base import SessionTreeProvider

from .. import inspection, schema
from ..errors import ReviewNotFound
from ..inspection import DiffItem, ProvenanceRecord, StateRow
from ..reducer import RoleplayIdentity, RoleplayState, reduce_branch, reduce_branch_from_ids, reduce_branch_lazily
from ..schema import RoleplayValidationError

ReviewStatus = Literal["pending", "accepted", "rejected"]


def inspect_state(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    leaf_entry_id: str | Unset | None = UNSET,
    character_id: str | None = None,
) -> RoleplayState:
    """The roleplay state at the session's leaf, or at ``leaf_entry_id`` (any entry, any branch).

    Reading never moves the leaf. ``character_id`` overrides the branch's own
    identity (to look at another character's entries on the same path). One
    consistent read that loads only the entries the reduction needs: the
    head up to the identity's lock and the tail from the latest checkpoint.
    """
    with provider.read(session_id) as view, gc_paused():
        leaf = view.state.leaf_entry_id if isinstance(leaf_entry_id, Unset) else leaf_entry_id
        state = _reduce_at(view, session_id, leaf, character_id)
    return state


def _has_roleplay_entries(view: Any) -> bool:
    """Whether the session may hold an entry the reducer reads: a message
    naming ``roleplay_finalize_turn`` as its tool (any role: a doubt counts
    as yes) or a roleplay ``custom`` entry, anywhere in its tree. Two reads
    by key of at most one entry each, in no order (no sort of the matches)."""
    if keyed_reads.tool_results(view, (schema.TURN_TOOL_NAME,), limit=1, ordered=False):
        return True
    return bool(keyed_reads.custom_entries(view, schema.ROLEPLAY_CUSTOM_TYPES, limit=1, ordered=False))


def state_in_view(
    view: Any, session_id: str, leaf_entry_id: str | None, character_id: str | None = None
) -> RoleplayState:
    """``inspect_state`` inside a read the caller holds (``provider.read``), for
    reads that build more than the state from the same snapshot (the roleplay
    context)."""
    return _reduce_at(view, session_id, leaf_entry_id, character_id)


def _reduce_at(view: Any, session_id: str, leaf_entry_id: str | None, character_id: str | None) -> RoleplayState:
    """``reduce_branch`` of the path to ``leaf_entry_id``, read lazily: by key
    (``reduce_keyed``) where the path facts allow, else the walked path's
    head up to the identity's lock and tail from the latest checkpoint
    (``reduce_branch_from_ids``)."""
    try:
        found = reduce_keyed(view, leaf_entry_id, character_id, {})
    except PathUnclear:
        found = None
    if found is not None:
        return found[1]
    state, _ = reduce_branch_from_ids(walked_path_ids(view, session_id, leaf_entry_id), view.entries, character_id)
    return state


def reduce_keyed(
    view: Any, leaf_entry_id: str | None, character_id: str | None, cache: dict[str, Entry]
) -> tuple[KeyedPath, RoleplayState, list[Entry]] | None:
    """The path to ``leaf_entry_id`` as a ``KeyedPath``, its state and the
    entries it was reduced from (``reducer.reduce_branch_lazily``), or
    ``None`` when the leaf's path facts are not exact (the caller walks).

    The reduction reads the head up to the identity's lock and the tail from
    the latest checkpoint (``reduce_branch_from_ids``), their ids by key. A
    session without any roleplay entry has nothing on any path for the
    reducer: every entry of the path is skipped, so the state is that of the
    empty path, whatever the path's length. The path asks whether the session
    has any (``_has_roleplay_entries``) before it reads a second slice
    without having met one, and the reduction stops there.
    ``PathUnclear`` when the stored rows disagree with the facts."""
    if leaf_entry_id is None:
        return None
    facts = keyed_reads.entry_facts(view, [leaf_entry_id]).get(leaf_entry_id)
    if facts is None or not facts.exact:
        return None
    path = KeyedPath(view, leaf_entry_id, facts.depth)
    reduced: list[Entry] = []
    try:
        state, reduced = reduce_branch_lazily(path, path.load, character_id, cache=cache, chunk=CHUNK)
    except _NoRoleplay:
        state = reduce_branch([], character_id)
    path.reducing = False  # later reads (a diff's common ancestor) read what they ask for
    return path, state, reduced


class PathUnclear(Exception):
    """The stored rows do not agree with the leaf's path facts: walk the path instead."""


class _NoRoleplay(Exception):
    """The session holds no entry the reducer reads: its state is the empty path's."""


class KeyedPath(Sequence[str]):
    """The ids of the path to ``leaf`` (root first), read by key as they are
    asked for: what ``reduce_branch_from_ids`` reads (the head up to the
    identity's lock, the tail back to the latest checkpoint) and nothing in
    between. A slice is read with its entries from the nearest known entry
    below it, up by the path facts' jumps to the slice's bottom and then by
    parent (``keyed_reads.path_entries``: O(log depth) + the slice), so the
    cost follows what is asked for, not the path's length."""

    def __init__(self, view: Any, leaf: str, depth: int) -> None:
        self.view = view
        self.depth = depth
        self.known: dict[int, str] = {depth: leaf}
        self.known_depths = [depth]  # ascending
        self.loaded: dict[str, Entry] = {}
        self.reads = 0
        self.has_roleplay: bool | None = None
        self.reducing = True  # while the reducer reads: stop at a session without roleplay entries

    def __len__(self) -> int:
        return self.depth + 1

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, int):
            at = index + len(self) if index < 0 else index
            return self[at : at + 1][0]
        low, high, step = index.indices(len(self))
        if step != 1:
            raise ValueError("a path slice steps by one")
        if high <= low:
            return []
        if any(depth not in self.known for depth in range(low, high)):
            self._read(low, high - 1)
        return [self.known[depth] for depth in range(low, high)]

    def _read(self, low: int, bottom: int) -> None:
        """Learn the ids (and entries) at depths ``low``..``bottom``; before a
        second slice, make sure the session has roleplay entries at all
        (``_NoRoleplay``): free when the first slice held one."""
        if self.reducing and self.reads and self.has_roleplay is None:
            seen = any(schema.roleplay_entry_kind(entry) is not None for entry in self.loaded.values())
            self.has_roleplay = seen or _has_roleplay_entries(self.view)
            if not self.has_roleplay:
                raise _NoRoleplay
        self.reads += 1
        above = self.known_depths[bisect.bisect_left(self.known_depths, bottom)]  # the nearest known at or below
        start = self.known[above]
        parent = self.loaded[start].get("parentId") if start in self.loaded else None
        if above == bottom + 1 and isinstance(parent, str):
            start = parent  # the slice ends right above an entry read: start from its parent
        found = keyed_reads.path_entries(self.view, start, low, bottom)
        if found is None or (above <= bottom and found[above - low].get("id") != self.known[above]):
            raise PathUnclear
        for offset, entry in enumerate(found):
            entry_id = str(entry.get("id"))
            if self.known.setdefault(low + offset, entry_id) != entry_id:
                raise PathUnclear
            self.loaded.setdefault(entry_id, entry)
        below = self.loaded.get(self.known[bottom + 1]) if bottom + 1 in self.known else None
        if below is not None and below.get("parentId") != self.known[bottom]:
            raise PathUnclear
        self.known_depths = sorted(self.known)

    def on_path(self, ids: Collection[str]) -> set[str]:
        """Those of ``ids`` that lie on the path: known ones, and others whose
        depth (their path facts, one read by key) holds them on the path."""
        known = set(self.known.values())
        found = {i for i in ids if i in known}
        unknown = [i for i in ids if i not in known]
        if unknown:
            for entry_id, facts in keyed_reads.entry_facts(self.view, unknown).items():
                if facts.depth <= self.depth and self[facts.depth] == entry_id:
                    found.add(entry_id)
        return found

    def load(self, ids: Sequence[str]) -> list[Entry]:
        """The entries of ``ids`` in that order: those read with the ids, the
        others by key in bounded batches."""
        missing = [i for i in ids if i not in self.loaded]
        for start in range(0, len(missing), _LOAD_BATCH):
            for entry in self.view.entries(missing[start : start + _LOAD_BATCH]):
                self.loaded[str(entry.get("id"))] = entry
        return [self.loaded[i] for i in ids]


_LOAD_BATCH = 1000
CHUNK = 256  # the first slice of the head, and of the tail, that the reduction reads


def list_reviews(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    leaf_entry_id: str | Unset | None = UNSET,
    include_decided: bool = False,
    character_id: str | None = None,
) -> list[dict[str, Any]]:
    """Reviews on the branch: pending ones (proposal order), then decided ones if asked.

    Each is the reducer's record (``reviewId``, ``op``, ``note``, ``commitId``
    and ``entryId`` of the proposing entry, ``amendment``: ``{"value",
    "entryId"}`` when amended; decided ones add ``decision``,
    ``decisionEntryId`` and, accepted, ``appliedOp``) plus ``status``
    (pending, accepted or rejected), ``effectiveOp`` (what accepting applies,
    or applied), ``amendable`` and, for a pending review, ``appliesNow`` and
    ``applyError``: whether accepting it would apply to the state now.
    """
    state = inspect_state(provider, session_id, leaf_entry_id=leaf_entry_id, character_id=character_id)
    return inspection.review_views(state, include_decided=include_decided)


def get_review(
    provider: SessionTreeProvider,
    session_id: str,
    review_id: str,
    *,
    leaf_entry_id: str | Unset | None = UNSET,
    character_id: str | None = None,
) -> dict[str, Any]:
    """One review of the branch, pending or decided, as ``list_reviews`` shows it.

    ``ReviewNotFound`` (404, exit 3) when no review with this id was proposed
    on the path to the leaf.
    """
    for view in list_reviews(
        provider, session_id, leaf_entry_id=leaf_entry_id, include_decided=True, character_id=character_id
    ):
        if view["reviewId"] == review_id:
            return view
    raise ReviewNotFound(f"Session {session_id}: no review {review_id} on this branch")


# --- reading for the faces: the state panel and the diff ------------------------------------


class StateDetail(TypedDict):
    """The state at one entry, made readable (see ``inspect_state_detail``)."""

    session_id: str
    leaf_entry_id: str | None  # the entry the state was reduced at
    session_leaf_entry_id: str | None  # the session's leaf when it was read
    at_session_leaf: bool
    path_length: int
    character_id: str | None
    identity: RoleplayIdentity
    revision: int
    state_hash: str
    state: dict[str, Any]
    rows: list[StateRow]
    provenance: dict[str, ProvenanceRecord]
    events: list[Any]
    events_total: int
    memories: list[Any]
    memories_total: int
    pending_reviews: list[dict[str, Any]]
    decided_reviews: list[dict[str, Any]]
    incomplete_turns: list[dict[str, Any]]
    archived: bool
    archive: dict[str, Any] | None
    last_commit_id: str | None
    checkpoint_entry_id: str | None
    problems: list[dict[str, Any]]
    ignored_entries: list[dict[str, Any]]


class DiffEnd(TypedDict):
    entry_id: str | None
    character_id: str | None
    revision: int
    state_hash: str
    path_length: int


# Functional form: "from" is a Python keyword.
StateDiff = TypedDict(
    "StateDiff",
    {
        "session_id": str,
        "character_id": str | None,
        "common_ancestor_entry_id": str | None,
        "from": DiffEnd,
        "to": DiffEnd,
        "changed": list[DiffItem],
        "added": list[DiffItem],
        "removed": list[DiffItem],
    },
)


def walked_path_ids(view: Any, session_id: str, leaf_entry_id: str | None) -> list[str]:
    if leaf_entry_id is None:
        return []
    try:
        return walk_path(leaf_entry_id, view.parents())
    except EntryNotFound:
        raise EntryNotFound(f"Entry {leaf_entry_id} not found in session {session_id}") from None


class _ReadBranch(TypedDict):
    ids: Sequence[str]
    state: RoleplayState
    entries: dict[str, Entry]  # the path's entries the views need (and more), by id


def _reduce_in_view(
    view: Any,
    session_id: str,
    leaf_entry_id: str | None,
    character_id: str | None,
    cache: dict[str, Entry],
    *,
    keyed: bool = False,
) -> _ReadBranch:
    """Reduce the path to ``leaf_entry_id`` inside one consistent read, loading
    only what the reduction and the views need (``reduce_branch_from_ids``).
    ``keyed``: the path's ids are read by key too (``reduce_keyed``), where
    the path facts allow; else the path is walked."""
    if keyed:
        try:
            found = reduce_keyed(view, leaf_entry_id, character_id, cache)
            if found is not None:
                path, state, _ = found
                needed = inspection.entry_ids_needed(state)
                return _branch(view, path, state, path.on_path(needed), cache)
        except PathUnclear:
            pass
    ids = walked_path_ids(view, session_id, leaf_entry_id)
    state, _ = reduce_branch_from_ids(ids, view.entries, character_id, cache=cache)
    on_path = set(ids)
    return _branch(view, ids, state, {i for i in inspection.entry_ids_needed(state) if i in on_path}, cache)


def _branch(
    view: Any, ids: Sequence[str], state: RoleplayState, needed: set[str], cache: dict[str, Entry]
) -> _ReadBranch:
    """The branch read: its ids, state, and the ``needed`` entries (on the path) the views look up."""
    missing = [i for i in needed if i not in cache]
    if missing:
        for entry in view.entries(missing):
            cache[str(entry.get("id"))] = entry
    return {"ids": ids, "state": state, "entries": {i: cache[i] for i in needed}}


def inspect_state_detail(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    leaf_entry_id: str | Unset | None = UNSET,
    character_id: str | None = None,
    max_events: int | None = None,
    max_memories: int | None = None,
) -> StateDetail:
    """The state at the session's leaf, or at ``leaf_entry_id`` (any entry of
    any branch; ``None`` = the empty path), with everything a state panel shows.

    Besides the reducer's fields: ``provenance`` maps each pointer the
    reducer records to a ``ProvenanceRecord`` (the entry that last set it,
    its kind — turn, correction, repair, review, commit — its commit id, a
    correction's reason…); ``rows`` is the state as a flat list in document
    order, each row with the provenance covering it; ``pending_reviews`` and
    ``decided_reviews`` are ``list_reviews`` records; ``incomplete_turns``
    add ``markedAt`` and a ``repairTemplate``. ``max_events``/``max_memories``
    keep only the latest ones (``events_total``/``memories_total`` count
    them all). One consistent read that loads only the entries the reduction
    needs (from the latest checkpoint); never moves the leaf.
    ``SessionNotFound``/``EntryNotFound`` (404, exit 3).
    """
    with provider.read(session_id) as view, gc_paused():
        session_leaf = view.state.leaf_entry_id
        leaf = session_leaf if isinstance(leaf_entry_id, Unset) else leaf_entry_id
        branch = _reduce_in_view(view, session_id, leaf, character_id, {}, keyed=True)
    state, entries = branch["state"], branch["entries"]
    records = inspection.provenance_records(entries, state)
    views = inspection.review_views(state, include_decided=True)
    events, memories = state["events"], state["memories"]
    return {
        "session_id": session_id,
        "leaf_entry_id": leaf,
        "session_leaf_entry_id": session_leaf,
        "at_session_leaf": leaf == session_leaf,
        "path_length": len(branch["ids"]),
        "character_id": state["character_id"],
        "identity": state["identity"],
        "revision": state["revision"],
        "state_hash": state["state_hash"],
        "state": state["state"],
        "rows": inspection.state_rows(state["state"], records),
        "provenance": records,
        "events": events if max_events is None else events[len(events) - max(max_events, 0) :],
        "events_total": len(events),
        "memories": memories if max_memories is None else memories[len(memories) - max(max_memories, 0) :],
        "memories_total": len(memories),
        "pending_reviews": [v for v in views if v["status"] == "pending"],
        "decided_reviews": [v for v in views if v["status"] != "pending"],
        "incomplete_turns": inspection.incomplete_turn_views(entries, state),
        "archived": state["archived"],
        "archive": state["archive"],
        "last_commit_id": state["last_commit_id"],
        "checkpoint_entry_id": state["checkpoint_entry_id"],
        "problems": state["problems"],
        "ignored_entries": state["ignored_entries"],
    }


def _common_prefix_length(a: Sequence[str], b: Sequence[str]) -> int:
    """How many entries two root-first paths share: a binary search (a tree's
    paths agree up to their common ancestor and differ below it), so two
    keyed paths read O(log depth) of their ids, not the whole paths."""
    low, high = 0, min(len(a), len(b))  # the first ``low`` agree; past ``high`` none does
    if high and a[high - 1] == b[high - 1]:
        return high  # one path holds the other (the same leaf, or a leaf and its ancestor)
    while low < high:
        middle = (low + high) // 2
        if a[middle] == b[middle]:
            low = middle + 1
        else:
            high = middle
    return low


def diff_states(
    provider: SessionTreeProvider,
    session_id: str,
    from_entry_id: str | Unset | None,
    to_entry_id: str | Unset | None,
    *,
    character_id: str | None = None,
) -> StateDiff:
    """What differs between the state at ``from_entry_id`` and at ``to_entry_id``
    (two entries or leaves of one session, e.g. two branches; ``UNSET`` = the
    session's leaf, ``None`` = the empty path).

    Returns ``{"session_id", "character_id", "common_ancestor_entry_id",
    "from": end, "to": end, "changed", "added", "removed"}`` where an end is
    ``{"entry_id", "character_id", "revision", "state_hash", "path_length"}``
    and each item is ``{"pointer", "old_value"? (changed, removed),
    "new_value"? (changed, added), "from_provenance", "to_provenance",
    "from_removed_by"? (added), "to_removed_by"? (removed)}``. Objects are
    compared member by member, arrays as whole values (the reducer attributes
    array ops to the array); items are sorted by pointer. Provenance lists
    hold ``ProvenanceRecord``s: the record covering the pointer, then those
    below it; ``*_removed_by`` is the latest entry after the common ancestor
    on the side without the value whose ops reached the pointer (``None``
    when that side never had it).

    Each side resolves its own character unless ``character_id`` is given;
    two different characters are refused (``RoleplayValidationError``).
    ``SessionNotFound``/``EntryNotFound`` (404, exit 3) for unknown ids. One
    consistent read; entries both paths share are loaded once, and only
    those the two reductions need (each from its latest checkpoint).
    """
    with provider.read(session_id) as view, gc_paused():
        session_leaf = view.state.leaf_entry_id
        ends = [session_leaf if isinstance(e, Unset) else e for e in (from_entry_id, to_entry_id)]
        cache: dict[str, Entry] = {}
        sides = [_reduce_in_view(view, session_id, end, character_id, cache, keyed=True) for end in ends]
        shared = _common_prefix_length(sides[0]["ids"], sides[1]["ids"])
        states = [side["state"] for side in sides]
        characters = sorted({s["character_id"] for s in states if s["character_id"] is not None})
        if len(characters) > 1:
            raise RoleplayValidationError(
                f"Session {session_id}: the two entries have different characters ({', '.join(characters)}); "
                "name the character to compare"
            )

        def after_ancestor(side: _ReadBranch) -> Callable[[], list[Entry]]:
            def load() -> list[Entry]:
                ids = side["ids"][shared:]
                missing = [i for i in ids if i not in cache]
                if missing:
                    for entry in view.entries(missing):
                        cache[str(entry.get("id"))] = entry
                return [cache[i] for i in ids]

            return load

        lists = inspection.diff_reduced(
            {"state": states[0], "entries": sides[0]["entries"], "after_ancestor": after_ancestor(sides[0])},
            {"state": states[1], "entries": sides[1]["entries"], "after_ancestor": after_ancestor(sides[1])},
        )

    def end(entry_id: str | None, side: _ReadBranch) -> DiffEnd:
        return {
            "entry_id": entry_id,
            "character_id": side["state"]["character_id"],
            "revision": side["state"]["revision"],
            "state_hash": side["state"]["state_hash"],
            "path_length": len(side["ids"]),
        }

    return {
        "session_id": session_id,
        "character_id": characters[0] if characters else None,
        "common_ancestor_entry_id": sides[0]["ids"][shared - 1] if shared else None,
        "from": end(ends[0], sides[0]),
        "to": end(ends[1], sides[1]),
        "changed": lists["changed"],
        "added": lists["added"],
        "removed": lists["removed"],
    }


class ReviewQueue(TypedDict):
    """The review queue at one entry (see ``review_queue``)."""

    session_id: str
    leaf_entry_id: str | None  # the entry the queue was read at
    session_leaf_entry_id: str | None  # the session's leaf when it was read
    at_session_leaf: bool
    character_id: str | None
    pending: list[dict[str, Any]]
    decided: list[dict[str, Any]]


def review_queue(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    leaf_entry_id: str | Unset | None = UNSET,
    character_id: str | None = None,
) -> ReviewQueue:
    """``list_reviews`` with everything decided, split into ``pending`` and
    ``decided``, and the leaf it was read at: the session's leaf at that
    moment is what a caller passes back as ``expected_leaf_id`` when it
    decides, so a decision is never made on a queue the caller did not see.
    One consistent read (from the latest checkpoint); never moves the leaf.
    """
    with provider.read(session_id) as view, gc_paused():
        session_leaf = view.state.leaf_entry_id
        leaf = session_leaf if isinstance(leaf_entry_id, Unset) else leaf_entry_id
        state = _reduce_at(view, session_id, leaf, character_id)
    views = inspection.review_views(state, include_decided=True)
    return {
        "session_id": session_id,
        "leaf_entry_id": leaf,
        "session_leaf_entry_id": session_leaf,
        "at_session_leaf": leaf == session_leaf,
        "character_id": state["character_id"],
        "pending": [v for v in views if v["status"] == "pending"],
        "decided": [v for v in views if v["status"] != "pending"],
    }


class CheckpointRecord(TypedDict):
    """One ``pi-roleplay-checkpoint`` entry on a path, without its stored state."""

    entry_id: str
    parent_id: str | None
    timestamp: str | None
    character_id: str | None
    revision: int | None
    state_hash: str | None
    trigger: str | None  # "compaction" for the checkpoint a compaction appends; None when made on demand
    compaction_entry_id: str | None
    valid: bool  # whether the reducer may start from it (complete, and its hash matches its state)
    problem: str | None  # why it is not valid


class CheckpointList(TypedDict):
    session_id: str
    leaf_entry_id: str | None
    session_leaf_entry_id: str | None
    at_session_leaf: bool
    checkpoints: list[CheckpointRecord]


def _checkpoint_record(entry: Entry) -> CheckpointRecord:
    data = entry.get("data")
    fields: dict[str, Any] = data if isinstance(data, dict) else {}
    problem: str | None = None
    try:
        schema.validate_checkpoint_data(data)
    except RoleplayValidationError as exc:
        problem = str(exc)

    def text(key: str) -> str | None:
        value = fields.get(key)
        return value if isinstance(value, str) else None

    revision = fields.get("revision")
    parent = entry.get("parentId")
    timestamp = entry.get("timestamp")
    return {
        "entry_id": str(entry.get("id")),
        "parent_id": parent if isinstance(parent, str) else None,
        "timestamp": timestamp if isinstance(timestamp, str) else None,
        "character_id": text("characterId"),
        "revision": revision if isinstance(revision, int) and not isinstance(revision, bool) else None,
        "state_hash": text("stateHash"),
        "trigger": text("trigger"),
        "compaction_entry_id": text("compactionEntryId"),
        "valid": problem is None,
        "problem": problem,
    }


def list_checkpoints(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    leaf_entry_id: str | Unset | None = UNSET,
    character_id: str | None = None,
) -> CheckpointList:
    """The checkpoints on the path to the session's leaf (or to ``leaf_entry_id``),
    root first, as ``CheckpointRecord``s: which entry, which character,
    revision and state hash, whether a compaction made it, and whether the
    reducer may use it. A checkpoint belongs to its tree node, so after a
    move the list is the new path's. ``character_id`` keeps only that
    character's. The stored state is left out (read the entry for it).
    One consistent read; never moves the leaf.
    """
    with provider.read(session_id) as view, gc_paused():
        session_leaf = view.state.leaf_entry_id
        leaf = session_leaf if isinstance(leaf_entry_id, Unset) else leaf_entry_id
        position = {entry_id: index for index, entry_id in enumerate(walked_path_ids(view, session_id, leaf))}
        found = [
            entry
            for entry in keyed_reads.custom_entries(view, (schema.CHECKPOINT_TYPE,))
            if entry.get("id") in position and schema.roleplay_entry_kind(entry) == "checkpoint"
        ]
        found.sort(key=lambda entry: position[str(entry.get("id"))])
        records = [_checkpoint_record(entry) for entry in found]
    if character_id is not None:
        records = [record for record in records if record["character_id"] == character_id]
    return {
        "session_id": session_id,
        "leaf_entry_id": leaf,
        "session_leaf_entry_id": session_leaf,
        "at_session_leaf": leaf == session_leaf,
        "checkpoints": records,
    }
