"""Roleplay commands: read the state, and append structured entries to the current branch.

Every function here is thin: read the active path from the provider, reduce
it with ``roleplay.reducer.reduce_branch``, validate the input with
``roleplay.schema`` against that reduced state, and append the entry (or
entries, all or none) through the operations layer
(``sessiontree.services.entries``, audited with the caller's ``actor`` and
``channel``) as a child of the leaf that was read (``expected_leaf_id``), so
a leaf moved meanwhile by someone else gives ``LeafConflict`` instead of a
commit on the wrong branch. Bad input raises ``RoleplayValidationError``,
an unknown review ``ReviewNotFound``, a decided one ``ReviewAlreadyDecided``
(``roleplay/errors.py`` gives each its category); nothing is appended then.
REST views, admin pages and the ``rp`` command call these functions and
nothing below them.

The reads the faces render — ``inspect_state_detail`` (the state panel, with
provenance made readable), ``diff_states`` (two entries compared),
``list_reviews``/``get_review`` (the review queue) — are one consistent read
each, and load only the entries the reduction needs
(``reducer.reduce_branch_from_ids``); ``roleplay/inspection.py`` builds the
views.

Navigation and forks are not roleplay writes: ``history_goto`` and
``history_fork`` delegate to ``sessiontree.services`` and only report the
state the new position derives. ``compact_with_checkpoint`` compacts and then
appends the automatic checkpoint as the compaction entry's child.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, Literal, TypedDict

from sessiontree import services as tree_services
from sessiontree.core.entries import custom_entry
from sessiontree.core.errors import EntryNotFound, LeafConflict, SessionNotFound
from sessiontree.core.path import walk_path
from sessiontree.core.pi_session_file import gc_paused, now_iso
from sessiontree.core.types import UNSET, Entry, SessionTreeSession, Unset
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.services.hooks import HookEvent

from . import inspection, schema
from .errors import CharacterArchived, NoRoleplayCharacter, ReviewAlreadyDecided, ReviewNotFound
from .inspection import DiffItem, ProvenanceRecord, StateRow
from .operations import RoleplayOperation
from .reducer import (
    PatchFailed,
    RoleplayIdentity,
    RoleplayState,
    apply_patch,
    make_checkpoint_data,
    reduce_branch,
    reduce_branch_from_ids,
)
from .schema import RoleplayValidationError

__all__ = [
    "CharacterArchived",
    "NoRoleplayCharacter",
    "ReviewAlreadyDecided",
    "ReviewNotFound",
    "RoleplayValidationError",
    "amend_review",
    "archive",
    "compact_with_checkpoint",
    "correct_state",
    "create_checkpoint",
    "decide_review",
    "diff_states",
    "get_review",
    "history_fork",
    "history_goto",
    "inspect_state",
    "inspect_state_detail",
    "list_checkpoints",
    "list_reviews",
    "plan_write",
    "repair_turn",
    "review_queue",
]

ReviewStatus = Literal["pending", "accepted", "rejected"]


class Branch(TypedDict):
    leaf_entry_id: str | None
    path: list[Entry]
    state: RoleplayState


# --- reading -----------------------------------------------------------------


def _read_branch(
    provider: SessionTreeProvider,
    session_id: str,
    leaf_entry_id: str | Unset | None = UNSET,
    *,
    character_id: str | None = None,
) -> Branch:
    """The leaf (the one given, or the session's), its path and the reduced state, read once."""
    if isinstance(leaf_entry_id, Unset):
        session = provider.get_session(session_id)
        if session is None:
            raise SessionNotFound(f"Session {session_id} not found")
        leaf_entry_id = session["leaf_entry_id"]
    path = provider.get_active_path(session_id, leaf_entry_id)
    return {"leaf_entry_id": leaf_entry_id, "path": path, "state": reduce_branch(path, character_id)}


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
        state, _ = reduce_branch_from_ids(_path_ids(view, session_id, leaf), view.entries, character_id)
    return state


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


def _path_ids(view: Any, session_id: str, leaf_entry_id: str | None) -> list[str]:
    if leaf_entry_id is None:
        return []
    try:
        return walk_path(leaf_entry_id, view.parents())
    except EntryNotFound:
        raise EntryNotFound(f"Entry {leaf_entry_id} not found in session {session_id}") from None


class _ReadBranch(TypedDict):
    ids: list[str]
    state: RoleplayState
    entries: dict[str, Entry]  # the path's entries the views need (and more), by id


def _reduce_in_view(
    view: Any,
    session_id: str,
    leaf_entry_id: str | None,
    character_id: str | None,
    cache: dict[str, Entry],
) -> _ReadBranch:
    """Reduce the path to ``leaf_entry_id`` inside one consistent read, loading
    only what the reduction and the views need (``reduce_branch_from_ids``)."""
    ids = _path_ids(view, session_id, leaf_entry_id)
    state, _ = reduce_branch_from_ids(ids, view.entries, character_id, cache=cache)
    on_path = set(ids)
    missing = [i for i in inspection.entry_ids_needed(state) if i in on_path and i not in cache]
    if missing:
        for entry in view.entries(missing):
            cache[str(entry.get("id"))] = entry
    entries = {i: cache[i] for i in inspection.entry_ids_needed(state) if i in on_path}
    return {"ids": ids, "state": state, "entries": entries}


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
        branch = _reduce_in_view(view, session_id, leaf, character_id, {})
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
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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
        sides = [_reduce_in_view(view, session_id, end, character_id, cache) for end in ends]
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
        state, _ = reduce_branch_from_ids(_path_ids(view, session_id, leaf), view.entries, character_id)
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
        position = {entry_id: index for index, entry_id in enumerate(_path_ids(view, session_id, leaf))}
        found = [
            entry
            for entry in view.all_entries(types=("custom",))
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


# --- writing -----------------------------------------------------------------


def _current_branch(
    provider: SessionTreeProvider, session_id: str, expected_leaf_id: str | Unset | None = UNSET
) -> Branch:
    """The branch at the session's leaf; ``LeafConflict`` when the caller saw another leaf."""
    branch = _read_branch(provider, session_id)
    if not isinstance(expected_leaf_id, Unset) and expected_leaf_id != branch["leaf_entry_id"]:
        raise LeafConflict(
            f"Session {session_id}: the leaf is {branch['leaf_entry_id'] or 'none'}, not {expected_leaf_id or 'none'} "
            "(someone appended or moved it meanwhile); nothing was appended"
        )
    return branch


def _writable_branch(
    provider: SessionTreeProvider, session_id: str, action: str, expected_leaf_id: str | Unset | None = UNSET
) -> Branch:
    """The current branch, refused when it has no character or the character is archived."""
    branch = _current_branch(provider, session_id, expected_leaf_id)
    state = branch["state"]
    if state["character_id"] is None:
        raise NoRoleplayCharacter(
            f"Session {session_id}: no roleplay character on the current branch "
            f"(leaf {branch['leaf_entry_id']}); cannot {action}"
        )
    if state["archived"]:
        archive_entry = (state.get("archive") or {}).get("entryId")
        raise CharacterArchived(
            f"Session {session_id}: character {state['character_id']} is archived on this branch "
            f"(entry {archive_entry}); cannot {action}. Navigate before the archive entry or fork to continue."
        )
    return branch


Actor = Any  # a user, a name such as "cli:alice", or a services.Actor


def _provider(provider: SessionTreeProvider | None, session_id: str) -> SessionTreeProvider:
    """``provider``, or the one that stores ``session_id``."""
    return provider if provider is not None else get_provider_for_session(session_id)


def _append(
    provider: SessionTreeProvider,
    session_id: str,
    branch: Branch,
    items: list[tuple[str, Any]],
    *,
    operation: str,
    actor: Actor,
    channel: str,
) -> Entry:
    """Append ``(custom_type, data)`` entries at the branch's leaf, all or none
    and audited as ``operation``; returns the last one."""
    if _planning.get():
        raise _Planned(_plan(session_id, branch, items, operation))
    written = tree_services.entries.append_entries(
        session_id=session_id,
        entries=[custom_entry(custom_type, data) for custom_type, data in items],
        actor=actor,
        channel=channel,
        provider=provider,
        expected_leaf_id=branch["leaf_entry_id"],
        operation=operation,
    )
    return written[-1]


# --- planning: a write's checks without the append ------------------------------------


class WritePlan(TypedDict):
    """What a write would append, and the state after it (``plan_write``)."""

    operation: str
    session_id: str
    leaf_entry_id: str | None  # the leaf the entries would be appended to
    entries: list[Entry]  # as they would be appended; ids are placeholders ("new-1", …)
    before: RoleplayState
    after: RoleplayState  # the state reduced from the path with the entries appended
    changes: inspection.ChangeLists  # pointers changed, added and removed, with their values


class _Planned(Exception):  # control flow out of _append, never seen by callers
    def __init__(self, plan: WritePlan) -> None:
        super().__init__(plan["operation"])
        self.plan = plan


_planning: ContextVar[bool] = ContextVar("roleplay_planning", default=False)


def _plan(session_id: str, branch: Branch, items: list[tuple[str, Any]], operation: str) -> WritePlan:
    parent, stamp, entries = branch["leaf_entry_id"], now_iso(), []
    for number, (custom_type, data) in enumerate(items, 1):
        body = custom_entry(custom_type, copy.deepcopy(data))
        entry: Entry = {"type": "custom", "id": f"new-{number}", "parentId": parent, "timestamp": stamp, **body}
        entries.append(entry)
        parent = entry["id"]
    before = branch["state"]
    after = reduce_branch([*branch["path"], *entries])
    return {
        "operation": operation,
        "session_id": session_id,
        "leaf_entry_id": branch["leaf_entry_id"],
        "entries": entries,
        "before": before,
        "after": after,
        "changes": inspection.document_changes(before["state"], after["state"]),
    }


def plan_write(write: Callable[..., Entry], **kwargs: Any) -> WritePlan:
    """Run ``write`` (``correct_state``, ``decide_review``, ``amend_review``,
    ``repair_turn``, ``archive``, ``create_checkpoint``) with all its checks,
    appending nothing: what it would append at the leaf and the state after.

    Raises what the write would raise (``RoleplayValidationError``,
    ``ReviewNotFound``, ``CharacterArchived``, ``LeafConflict``…), so a face
    can show a confirmation page that says exactly what confirming does, or
    the reason it cannot be done. Nothing is audited: nothing happened.
    """
    token = _planning.set(True)
    try:
        write(**kwargs)
    except _Planned as planned:
        return planned.plan
    finally:
        _planning.reset(token)
    raise RuntimeError(f"{getattr(write, '__name__', write)!r} is not a roleplay write: it appended nothing to plan")


def _check_ops_apply(state: RoleplayState, ops: list[dict[str, Any]], where: str) -> None:
    try:
        apply_patch(state["state"], ops)
    except PatchFailed as exc:
        raise RoleplayValidationError(
            f"{where}: does not apply to the current state ({exc}); {_state_hint(state)}"
        ) from None


def _state_hint(state: RoleplayState, limit: int = 8) -> str:
    """Which values the state holds, so a failed op's author sees the paths that exist."""
    pointers = [
        row["pointer"]
        for row in inspection.state_rows(state["state"], {})
        if row["node"] != "object" and not isinstance(row["key"], int)  # not an array's items
    ]
    if not pointers:
        return 'the state is empty: an "add" op creates a value'
    shown = ", ".join(pointers[:limit]) + (f" and {len(pointers) - limit} more" if len(pointers) > limit else "")
    return f'values on this branch: {shown}; an "add" op creates a value that is not there yet'


def _commit_id_of(entry: Entry) -> str | None:
    """The commit id an entry carries (turn result, commit, repair), if any."""
    kind = schema.roleplay_entry_kind(entry)
    payload = schema.roleplay_payload(entry)
    if not isinstance(payload, dict):
        return None
    if kind == "commit":
        commit: Any = payload
    elif kind in ("turn", "repair"):
        commit = payload.get("commit")
    else:
        return None
    commit_id = commit.get("commitId") if isinstance(commit, dict) else None
    return commit_id if isinstance(commit_id, str) else None


def _commit_ids_on_path(path: list[Entry], character_id: str) -> set[str]:
    ids: set[str] = set()
    for entry in path:
        payload = schema.roleplay_payload(entry)
        if isinstance(payload, dict) and payload.get("characterId") == character_id:
            commit_id = _commit_id_of(entry)
            if commit_id is not None:
                ids.add(commit_id)
    return ids


def _commit_that_set(branch: Branch, pointer: str) -> str | None:
    """The commit id behind the provenance of ``pointer`` (or of its nearest recorded ancestor)."""
    provenance = branch["state"]["provenance"]
    candidate = pointer
    while True:
        entry_id = provenance.get(candidate)
        if entry_id is not None:
            break
        if not candidate:
            return None
        candidate = candidate.rsplit("/", 1)[0]
    entry = next((e for e in branch["path"] if e.get("id") == entry_id), None)
    if entry is None:
        return None
    commit_id = _commit_id_of(entry)
    if commit_id is not None:
        return commit_id
    # An accepted review: its change belongs to the commit that proposed it.
    for review in branch["state"]["decided_reviews"]:
        if review.get("decisionEntryId") == entry_id:
            return review.get("commitId")
    return None


def correct_state(
    *,
    session_id: str,
    payload: dict[str, Any],
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: str | Unset | None = UNSET,
) -> Entry:
    """``/rp state correct {json}``: append a ``manual-correction`` commit on the current branch.

    The tree is never moved: this records that the current timeline's record
    was wrong; rewriting history is ``history_goto``/``history_fork``.
    ``reason`` is required; ``from`` (the value believed recorded) guards the
    change; ``correctsCommitId`` must name a commit on this branch. When it is
    omitted, the commit that last set the corrected path (from provenance) is
    recorded, with ``correctsCommitIdInferred: true``.
    """
    provider = _provider(provider, session_id)
    branch = _writable_branch(provider, session_id, "correct the state", expected_leaf_id)
    state = branch["state"]
    character_id = state["character_id"]
    assert character_id is not None
    data = schema.correction_commit_data(payload, character_id=character_id)
    where = f"state correction {data['commitId']}"
    corrects = data.get("correctsCommitId")
    if corrects is not None:
        if corrects not in _commit_ids_on_path(branch["path"], character_id):
            raise RoleplayValidationError(
                f"{where}: correctsCommitId {corrects} is not a commit of {character_id} on the current branch"
            )
    else:
        target = next(op["path"] for op in data["ops"] if op["op"] != "test")
        inferred = _commit_that_set(branch, target)
        if inferred is not None:
            data["correctsCommitId"] = inferred
            data["correctsCommitIdInferred"] = True
    _check_ops_apply(state, data["ops"], where)
    return _append(
        provider,
        session_id,
        branch,
        [(schema.COMMIT_TYPE, data)],
        operation=RoleplayOperation.CORRECT_STATE,
        actor=actor,
        channel=channel,
    )


def _pending_review(state: RoleplayState, review_id: str, session_id: str) -> dict[str, Any]:
    for review in state["pending_reviews"]:
        if review["reviewId"] == review_id:
            return review
    for review in state["decided_reviews"]:
        if review["reviewId"] == review_id:
            decided = "accepted" if review.get("decision") == "accept" else "rejected"
            raise ReviewAlreadyDecided(
                f"Session {session_id}: review {review_id} was already {decided} on this branch "
                f"(entry {review.get('decisionEntryId')}); a decision is final"
            )
    pending = ", ".join(r["reviewId"] for r in state["pending_reviews"]) or "none"
    raise ReviewNotFound(f"Session {session_id}: no review {review_id} on the current branch (pending: {pending})")


def amend_review(
    *,
    session_id: str,
    review_id: str,
    value: Any,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: str | Unset | None = UNSET,
) -> Entry:
    """Append an amendment replacing the proposed value of a pending review; it stays pending."""
    provider = _provider(provider, session_id)
    branch = _writable_branch(provider, session_id, f"amend review {review_id}", expected_leaf_id)
    state = branch["state"]
    review = _pending_review(state, review_id, session_id)
    if review["op"].get("op") not in schema.AMENDABLE_OPS:
        raise RoleplayValidationError(
            f"review {review_id}: proposes a {review['op'].get('op')!r} op, which has no value to amend"
        )
    assert state["character_id"] is not None
    data = schema.build_review_amendment_data(character_id=state["character_id"], review_id=review_id, value=value)
    return _append(
        provider,
        session_id,
        branch,
        [(schema.REVIEW_AMENDMENT_TYPE, data)],
        operation=RoleplayOperation.AMEND_REVIEW,
        actor=actor,
        channel=channel,
    )


def decide_review(
    *,
    session_id: str,
    review_id: str,
    decision: str,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    value: Any = UNSET,
    expected_leaf_id: str | Unset | None = UNSET,
) -> Entry:
    """Accept or reject a pending review; returns the decision entry.

    ``value`` (accept only) amends the proposal first: an amendment entry,
    then the decision as its child, both or neither. An accept whose op would
    not apply to the current state is refused before anything is appended.
    """
    provider = _provider(provider, session_id)
    if decision not in schema.REVIEW_DECISIONS:
        raise RoleplayValidationError(f"review {review_id}: decision must be accept or reject, got {decision!r}")
    if decision == "reject" and not isinstance(value, Unset):
        raise RoleplayValidationError(f"review {review_id}: a value can only be given when accepting")
    branch = _writable_branch(provider, session_id, f"{decision} review {review_id}", expected_leaf_id)
    state = branch["state"]
    character_id = state["character_id"]
    assert character_id is not None
    review = _pending_review(state, review_id, session_id)
    amendment = None
    if not isinstance(value, Unset):
        if review["op"].get("op") not in schema.AMENDABLE_OPS:
            raise RoleplayValidationError(
                f"review {review_id}: proposes a {review['op'].get('op')!r} op, which has no value to amend"
            )
        amendment = schema.build_review_amendment_data(character_id=character_id, review_id=review_id, value=value)
    data = schema.build_review_decision_data(character_id=character_id, review_id=review_id, decision=decision)
    if decision == "accept":
        op = dict(review["op"])
        if amendment is not None:
            op["value"] = amendment["value"]
        elif "amendment" in review:
            op["value"] = review["amendment"]["value"]
        _check_ops_apply(state, [op], f"accepting review {review_id}")
    items: list[tuple[str, Any]] = []
    if amendment is not None:
        items.append((schema.REVIEW_AMENDMENT_TYPE, amendment))
    items.append((schema.REVIEW_DECISION_TYPE, data))
    return _append(
        provider,
        session_id,
        branch,
        items,
        operation=RoleplayOperation.ACCEPT_REVIEW if decision == "accept" else RoleplayOperation.REJECT_REVIEW,
        actor=actor,
        channel=channel,
    )


def create_checkpoint(
    *,
    session_id: str,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: str | Unset | None = UNSET,
    **extra: Any,
) -> Entry:
    """Append a checkpoint of the current branch's state as the leaf's child.

    Allowed for an archived character (it stores, it changes nothing).
    ``extra`` fields are stored in the checkpoint's data alongside the state.
    """
    provider = _provider(provider, session_id)
    branch = _current_branch(provider, session_id, expected_leaf_id)
    if branch["state"]["character_id"] is None:
        raise NoRoleplayCharacter(
            f"Session {session_id}: no roleplay character on the current branch "
            f"(leaf {branch['leaf_entry_id']}); nothing to checkpoint"
        )
    data = make_checkpoint_data(branch["state"])
    data.update(extra)
    return _append(
        provider,
        session_id,
        branch,
        [(schema.CHECKPOINT_TYPE, data)],
        operation=RoleplayOperation.CHECKPOINT,
        actor=actor,
        channel=channel,
    )


def repair_turn(
    *,
    session_id: str,
    proposal: dict[str, Any],
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: str | Unset | None = UNSET,
) -> Entry:
    """``/rp turn repair {json}``: append the missing commit of an incomplete turn.

    The turn must be marked incomplete on this branch; the ops must apply and
    proposed review ids must be new on the branch.
    """
    provider = _provider(provider, session_id)
    branch = _writable_branch(provider, session_id, "repair a turn", expected_leaf_id)
    state = branch["state"]
    assert state["character_id"] is not None
    data = schema.repair_data_from_proposal(proposal, character_id=state["character_id"])
    turn_id = data["turnId"]
    if not any(turn["turnId"] == turn_id for turn in state["incomplete_turns"]):
        incomplete = ", ".join(t["turnId"] for t in state["incomplete_turns"]) or "none"
        raise RoleplayValidationError(
            f"turn repair {turn_id}: not an incomplete turn on the current branch (incomplete: {incomplete})"
        )
    known = {r["reviewId"] for r in state["pending_reviews"]} | {r["reviewId"] for r in state["decided_reviews"]}
    for item in data["commit"].get("reviews") or []:
        if item["reviewId"] in known:
            raise RoleplayValidationError(f"turn repair {turn_id}: review {item['reviewId']} already exists")
    _check_ops_apply(state, data["commit"]["ops"], f"turn repair {turn_id}")
    return _append(
        provider,
        session_id,
        branch,
        [(schema.REPAIR_TYPE, data)],
        operation=RoleplayOperation.REPAIR_TURN,
        actor=actor,
        channel=channel,
    )


def archive(
    *,
    session_id: str,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    reason: str | None = None,
    expected_leaf_id: str | Unset | None = UNSET,
) -> Entry:
    """Archive the character on this branch: from here on its state is read-only.

    Branch-local like every roleplay entry: navigating before it, or forking
    before it, gives a writable character again. The session's own status is
    not touched.
    """
    provider = _provider(provider, session_id)
    branch = _writable_branch(provider, session_id, "archive it again", expected_leaf_id)
    assert branch["state"]["character_id"] is not None
    data = schema.build_archive_data(character_id=branch["state"]["character_id"], reason=reason)
    return _append(
        provider,
        session_id,
        branch,
        [(schema.ARCHIVE_TYPE, data)],
        operation=RoleplayOperation.ARCHIVE,
        actor=actor,
        channel=channel,
    )


# --- the session tree, for roleplay -----------------------------------------------


def history_goto(
    *,
    session_id: str,
    entry_id: str,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    summarize: bool = False,
    summarizer: Any = None,
    label: str | None = None,
) -> dict[str, Any]:
    """``/rp history goto``: move the leaf (``navigate_tree``); the state is re-derived from the new path.

    Returns ``navigate_tree``'s result plus ``state``, the reduced state at the new leaf.
    """
    provider = _provider(provider, session_id)
    result = tree_services.navigate_tree(
        provider=provider,
        session_id=session_id,
        target_id=entry_id,
        summarize=summarize,
        summarizer=summarizer,
        label=label,
        actor=actor,
        channel=channel,
    )
    return {**result, "state": inspect_state(provider, session_id)}


def history_fork(
    *,
    session_id: str,
    entry_id: str,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    position: Literal["before", "at"] = "before",
) -> dict[str, Any]:
    """``/rp history fork``: a new session from ``entry_id`` (``fork_session``).

    The new session's state is reduced from its own copied path, never taken
    from the source. Returns ``{"session", "state"}``.
    """
    provider = _provider(provider, session_id)
    session: SessionTreeSession = tree_services.fork_session(
        provider=provider, session_id=session_id, entry_id=entry_id, position=position, actor=actor, channel=channel
    )
    return {"session": session, "state": inspect_state(provider, session["session_id"])}


def checkpoint_after_compaction(
    *,
    session_id: str,
    compaction: Entry,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
) -> Entry | None:
    """Append the automatic checkpoint as the compaction entry's child.

    Runs as an ``after_compact`` hook (roleplay/apps.py), so after every
    ``sessiontree.services.compact_session``, audited with its actor and
    channel. Only when the branch has a character; ``None`` otherwise, or when
    someone appended after the compaction first.
    """
    provider = _provider(provider, session_id)
    branch = _read_branch(provider, session_id, compaction["id"])
    if branch["state"]["character_id"] is None:
        return None
    data = make_checkpoint_data(branch["state"])
    data.update({"trigger": "compaction", "compactionEntryId": compaction["id"]})
    try:
        return _append(
            provider,
            session_id,
            branch,
            [(schema.CHECKPOINT_TYPE, data)],
            operation=RoleplayOperation.CHECKPOINT,
            actor=actor,
            channel=channel,
        )
    except LeafConflict:
        # A checkpoint anywhere else would not be the compaction's child, and
        # it is only a shortcut for the reducer: the compaction stands alone.
        return None


def _checkpoint_hook(event: HookEvent) -> None:
    if event.result is not None:
        checkpoint_after_compaction(
            provider=event.provider,
            session_id=event.session_id,
            compaction=event.result,
            actor=event.actor,
            channel=event.channel,
        )


def compact_with_checkpoint(
    *, session_id: str, actor: Actor, channel: str, provider: SessionTreeProvider | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Compact (``compact_session``) and report the automatic checkpoint the
    compaction hook appended as the compaction's child (``None`` when the
    branch has no character or nothing was compacted).

    Returns ``{"compaction": Entry | None, "checkpoint": Entry | None}``.
    """
    provider = _provider(provider, session_id)
    compaction = tree_services.compact_session(
        provider=provider, session_id=session_id, actor=actor, channel=channel, **kwargs
    )
    checkpoint = None
    if compaction is not None:
        session = provider.get_session(session_id)
        leaf_id = session["leaf_entry_id"] if session else None
        if leaf_id is not None and leaf_id != compaction["id"]:
            leaf = provider.get_entry(session_id, leaf_id)
            if leaf.get("parentId") == compaction["id"] and leaf.get("customType") == schema.CHECKPOINT_TYPE:
                checkpoint = leaf
    return {"compaction": compaction, "checkpoint": checkpoint}


def register_hooks() -> None:
    tree_services.register_hook("after_compact", _checkpoint_hook)
