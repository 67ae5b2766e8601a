"""Readable views of a reduced roleplay state: provenance, a row tree, reviews, a diff.

Pure functions of a root-first path and its ``RoleplayState`` (no Django,
no provider): ``roleplay.service`` reads the path and calls them, and the
faces (admin, REST, ``rp``) render what they return.

- ``provenance_records``: for every JSON pointer the reducer's ``provenance``
  maps, the entry that last set it and what kind of write that was (a turn, a
  correction with its reason, a repair, an accepted review, or another commit).
- ``state_rows``: the state document as a flat list of rows in document
  order, each with its depth and the provenance that covers it.
- ``review_views``/``incomplete_turn_views``: what a review queue and a repair
  action need.
- ``diff_reduced``: changed, added and removed pointers between two reduced
  branches of one session, with the entries behind each side;
  ``document_changes`` the same for two states without provenance (what a
  planned write changes).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, NotRequired, TypedDict

from jsonpointer import escape as escape_pointer_part

from sessiontree.core.types import Entry

from .reducer import PatchFailed, RoleplayState, apply_patch
from .schema import AMENDABLE_OPS, canonical_state_json, roleplay_entry_kind, roleplay_payload

ProvenanceKind = Literal["turn", "correction", "repair", "review", "commit", "unknown"]
PROVENANCE_KINDS: Final[tuple[ProvenanceKind, ...]] = ("turn", "correction", "repair", "review", "commit", "unknown")

# A commit's ``source`` → the kind of write it was.
_KIND_BY_SOURCE: Final[Mapping[str, ProvenanceKind]] = {
    "turn": "turn",
    "manual-correction": "correction",
    "repair": "repair",
}

# Problems after which the reducer skipped an entry whole (its ops were not applied).
_SKIPPED_PROBLEMS: Final = frozenset({"patch_failed", "malformed"})


class ProvenanceRecord(TypedDict):
    """The entry behind a value. Keys that do not apply to the kind are ``None``."""

    pointer: str  # where the reducer recorded it (an array op is recorded at the array)
    entry_id: str
    # turn: a roleplay_finalize_turn result, or a pi-roleplay-commit with source "turn";
    # correction: source "manual-correction"; repair: a pi-roleplay-repair (or a commit
    # with source "repair"); review: an accepted review's decision entry; commit: any
    # other commit; unknown: the entry is not on the path (a hand-made checkpoint).
    kind: ProvenanceKind
    commit_id: str | None  # for a review: the commit that proposed it
    source: str | None  # the commit's ``source``
    reason: str | None  # a correction's (or a repair's) reason
    corrects_commit_id: str | None
    review_id: str | None
    note: str | None  # a review's note
    turn_id: str | None
    timestamp: str | None  # the entry's


class StateRow(TypedDict):
    """One node of the state document. Rows come in document order (depth first)."""

    pointer: str
    depth: int  # 0 for the state's top-level keys
    key: str | int  # the member name, or the index inside an array
    node: Literal["object", "array", "value"]
    value: Any  # the value for a "value" row; None for an object or array
    size: int | None  # members or items of an object or array; None for a value
    provenance: ProvenanceRecord | None  # recorded at this pointer, or at the nearest ancestor
    inherited: bool  # True when the provenance was recorded at an ancestor


class DiffItem(TypedDict):
    pointer: str
    old_value: NotRequired[Any]  # changed and removed items
    new_value: NotRequired[Any]  # changed and added items
    # Each side: the record covering the pointer (its own or its nearest
    # ancestor's) first, then the records of pointers below it, by pointer.
    from_provenance: list[ProvenanceRecord]
    to_provenance: list[ProvenanceRecord]
    # Where a side has no value, the latest entry on that side after the
    # common ancestor whose ops reached the pointer (None: the side never had it).
    from_removed_by: NotRequired[ProvenanceRecord | None]
    to_removed_by: NotRequired[ProvenanceRecord | None]


class DiffLists(TypedDict):
    changed: list[DiffItem]
    added: list[DiffItem]
    removed: list[DiffItem]


# --- pointers ---------------------------------------------------------------------


def child_pointer(pointer: str, key: str | int) -> str:
    return f"{pointer}/{escape_pointer_part(str(key))}"


def _ancestors(pointer: str) -> Iterable[str]:
    """``pointer``'s proper ancestors, nearest first, down to the root ``""``."""
    while pointer:
        pointer = pointer.rsplit("/", 1)[0]
        yield pointer


def _covers(op_pointer: str, pointer: str) -> bool:
    """An op at ``op_pointer`` reaches ``pointer`` (the same node or one of its ancestors)."""
    return op_pointer == pointer or pointer.startswith(op_pointer + "/")


def _pointer_sort_key(pointer: str) -> tuple[str, ...]:
    return tuple(pointer.split("/")[1:])


# --- provenance ---------------------------------------------------------------------


def _blank_record(pointer: str, entry_id: str, kind: ProvenanceKind) -> ProvenanceRecord:
    return {
        "pointer": pointer,
        "entry_id": entry_id,
        "kind": kind,
        "commit_id": None,
        "source": None,
        "reason": None,
        "corrects_commit_id": None,
        "review_id": None,
        "note": None,
        "turn_id": None,
        "timestamp": None,
    }


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def describe_entry(
    pointer: str, entry_id: str, entry: Entry | None, decisions: Mapping[str, dict[str, Any]]
) -> ProvenanceRecord:
    """What kind of write ``entry`` (``entry_id``) was, as a provenance record for ``pointer``.

    ``decisions`` maps a decision entry's id to its decided review (the
    reducer's ``decided_reviews`` by ``decisionEntryId``).
    """
    if entry is None:
        return _blank_record(pointer, entry_id, "unknown")
    kind = roleplay_entry_kind(entry)
    payload = roleplay_payload(entry)
    payload = payload if isinstance(payload, dict) else {}
    record = _blank_record(pointer, entry_id, "commit")
    record["timestamp"] = _str_or_none(entry.get("timestamp"))
    commit: Any = None
    if kind == "turn":
        record["kind"] = "turn"
        record["source"] = "turn"
        record["turn_id"] = _str_or_none(payload.get("turnId"))
        commit = payload.get("commit")
    elif kind == "commit":
        source = _str_or_none(payload.get("source"))
        record["kind"] = _KIND_BY_SOURCE.get(source or "", "commit")
        record["source"] = source
        record["corrects_commit_id"] = _str_or_none(payload.get("correctsCommitId"))
        commit = payload
    elif kind == "repair":
        record["kind"] = "repair"
        record["source"] = "repair"
        record["turn_id"] = _str_or_none(payload.get("turnId"))
        commit = payload.get("commit")
    elif kind == "review-decision":
        record["kind"] = "review"
        review = decisions.get(entry_id) or {}
        record["review_id"] = _str_or_none(payload.get("reviewId"))
        record["commit_id"] = _str_or_none(review.get("commitId"))
        record["note"] = _str_or_none(review.get("note"))
        return record
    if isinstance(commit, dict):
        record["commit_id"] = _str_or_none(commit.get("commitId"))
        record["reason"] = _str_or_none(commit.get("reason"))
    return record


def _decisions_by_entry(state: RoleplayState) -> dict[str, dict[str, Any]]:
    return {r["decisionEntryId"]: r for r in state["decided_reviews"] if "decisionEntryId" in r}


EntryLookup = Mapping[str, Entry]


def entries_by_id(path_entries: Iterable[Entry]) -> dict[str, Entry]:
    """id → entry for a path (the lookup the functions below take)."""
    return {str(entry.get("id")): entry for entry in path_entries}


def entry_ids_needed(state: RoleplayState) -> set[str]:
    """The entries the views of ``state`` look up: provenance and incomplete-turn markers."""
    needed = set(state["provenance"].values())
    needed.update(t["entryId"] for t in state["incomplete_turns"] if isinstance(t.get("entryId"), str))
    return needed


def provenance_records(entries: EntryLookup, state: RoleplayState) -> dict[str, ProvenanceRecord]:
    """Every pointer of ``state["provenance"]`` → its record, ordered by pointer.

    ``entries`` maps ids to the path's entries (at least those provenance
    names); an id it lacks is not on the path, a record of kind ``unknown``.
    """
    provenance = state["provenance"]
    decisions = _decisions_by_entry(state)
    return {
        pointer: describe_entry(pointer, provenance[pointer], entries.get(provenance[pointer]), decisions)
        for pointer in sorted(provenance, key=_pointer_sort_key)
    }


def covering_record(records: Mapping[str, ProvenanceRecord], pointer: str) -> ProvenanceRecord | None:
    """The record at ``pointer`` or at its nearest ancestor."""
    if pointer in records:
        return records[pointer]
    for ancestor in _ancestors(pointer):
        if ancestor in records:
            return records[ancestor]
    return None


def records_for(records: Mapping[str, ProvenanceRecord], pointer: str) -> list[ProvenanceRecord]:
    """The covering record of ``pointer`` first, then those recorded below it (by pointer)."""
    result: list[ProvenanceRecord] = []
    covering = covering_record(records, pointer)
    if covering is not None:
        result.append(covering)
    prefix = pointer + "/"
    result.extend(records[p] for p in sorted((p for p in records if p.startswith(prefix)), key=_pointer_sort_key))
    return result


# --- the state as rows ------------------------------------------------------------------


def state_rows(document: Mapping[str, Any], records: Mapping[str, ProvenanceRecord]) -> list[StateRow]:
    """The state as rows in document order, each with the provenance that covers it.

    Iterative, so a deeply nested state cannot exhaust the stack.
    """
    rows: list[StateRow] = []
    root_record = records.get("")
    # (pointer, depth, key, value, inherited record)
    stack: list[tuple[str, int, str | int, Any, ProvenanceRecord | None]] = [
        (child_pointer("", key), 0, key, value, root_record) for key, value in reversed(list(document.items()))
    ]
    while stack:
        pointer, depth, key, value, inherited = stack.pop()
        own = records.get(pointer)
        record = own if own is not None else inherited
        node: Literal["object", "array", "value"]
        children: list[tuple[str | int, Any]]
        if isinstance(value, dict):
            node, children = "object", list(value.items())
        elif isinstance(value, list):
            node, children = "array", list(enumerate(value))
        else:
            node, children = "value", []
        rows.append(
            {
                "pointer": pointer,
                "depth": depth,
                "key": key,
                "node": node,
                "value": value if node == "value" else None,
                "size": len(value) if node != "value" else None,
                "provenance": record,
                "inherited": own is None and record is not None,
            }
        )
        for child_key, child in reversed(children):
            stack.append((child_pointer(pointer, child_key), depth + 1, child_key, child, record))
    return rows


# --- reviews and incomplete turns -----------------------------------------------------------


def effective_op(review: Mapping[str, Any]) -> dict[str, Any]:
    """The op accepting the review applies: the proposed one, with an amendment's value."""
    op = dict(review["op"])
    if "amendment" in review:
        op["value"] = review["amendment"]["value"]
    return op


def review_view(review: Mapping[str, Any], status: str, state: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A review record for a queue: the reducer's record (``reviewId``, ``op``,
    ``note``, ``commitId``, ``entryId``, ``amendment``?, ``decision``?,
    ``decisionEntryId``?, ``appliedOp``?) plus ``status``, ``effectiveOp``,
    ``amendable`` and, for a pending review when ``state`` is given,
    ``appliesNow`` and ``applyError`` (whether accepting would apply to it)."""
    view: dict[str, Any] = {**review, "status": status}
    view["effectiveOp"] = review.get("appliedOp") or effective_op(review)
    view["amendable"] = status == "pending" and review["op"].get("op") in AMENDABLE_OPS
    if status == "pending" and state is not None:
        try:
            apply_patch(dict(state), [view["effectiveOp"]])
        except PatchFailed as exc:
            view["appliesNow"], view["applyError"] = False, str(exc)
        else:
            view["appliesNow"], view["applyError"] = True, None
    return view


def review_views(state: RoleplayState, *, include_decided: bool = False) -> list[dict[str, Any]]:
    """Pending reviews in proposal order, then (if asked) decided ones in decision order."""
    views = [review_view(r, "pending", state["state"]) for r in state["pending_reviews"]]
    if include_decided:
        views += [
            review_view(r, "accepted" if r.get("decision") == "accept" else "rejected")
            for r in state["decided_reviews"]
        ]
    return views


def incomplete_turn_views(entries: EntryLookup, state: RoleplayState) -> list[dict[str, Any]]:
    """Each incomplete turn (``turnId``, ``entryId`` of the status entry,
    ``reason``?) plus ``markedAt`` (that entry's timestamp) and
    ``repairTemplate``, the ``repair_turn`` proposal to fill in."""
    views = []
    for turn in state["incomplete_turns"]:
        marked = entries.get(turn.get("entryId") or "")
        views.append(
            {
                **turn,
                "markedAt": marked.get("timestamp") if marked is not None else None,
                "repairTemplate": {"turnId": turn["turnId"], "ops": [], "events": [], "memories": [], "reason": ""},
            }
        )
    return views


# --- diff --------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1``, ``1.0`` and ``true`` are different values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict | list):
        return canonical_state_json(a) == canonical_state_json(b)
    return bool(a == b)


def compare_documents(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Pointers changed, added and removed from ``old`` to ``new``, each sorted by pointer.

    Objects are compared member by member; anything else (arrays included,
    which the reducer attributes as a whole) as one value. A member present
    on one side only is one item, whatever it holds.
    """
    changed: list[str] = []
    added: list[str] = []
    removed: list[str] = []
    stack: list[tuple[str, Mapping[str, Any], Mapping[str, Any]]] = [("", old, new)]
    while stack:
        pointer, a, b = stack.pop()
        for key, value in a.items():
            here = child_pointer(pointer, key)
            if key not in b:
                removed.append(here)
            elif isinstance(value, dict) and isinstance(b[key], dict):
                stack.append((here, value, b[key]))
            elif not _same(value, b[key]):
                changed.append(here)
        added.extend(child_pointer(pointer, key) for key in b if key not in a)
    return (
        sorted(changed, key=_pointer_sort_key),
        sorted(added, key=_pointer_sort_key),
        sorted(removed, key=_pointer_sort_key),
    )


class ChangeItem(TypedDict):
    pointer: str
    old_value: NotRequired[Any]  # changed and removed items
    new_value: NotRequired[Any]  # changed and added items


class ChangeLists(TypedDict):
    changed: list[ChangeItem]
    added: list[ChangeItem]
    removed: list[ChangeItem]


def document_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> ChangeLists:
    """``compare_documents`` with the values: what a write changes in the state."""
    changed, added, removed = compare_documents(old, new)
    return {
        "changed": [
            {"pointer": p, "old_value": copy.deepcopy(value_at(old, p)), "new_value": copy.deepcopy(value_at(new, p))}
            for p in changed
        ],
        "added": [{"pointer": p, "new_value": copy.deepcopy(value_at(new, p))} for p in added],
        "removed": [{"pointer": p, "old_value": copy.deepcopy(value_at(old, p))} for p in removed],
    }


def value_at(document: Any, pointer: str) -> Any:
    """The value at an existing ``pointer`` (``KeyError``/``IndexError`` otherwise)."""
    for part in pointer.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        document = document[int(key)] if isinstance(document, list) else document[key]
    return document


def applied_changes(segment: Sequence[Entry], state: RoleplayState) -> list[tuple[str, Entry, list[dict[str, Any]]]]:
    """``(entry_id, entry, ops)`` of every entry of ``segment`` (a stretch of
    the path ``state`` was reduced from) whose ops the reduction applied:
    commits, turn results and repairs of the character (not skipped as a
    problem), and accepted reviews' decisions."""
    character_id = state["character_id"]
    skipped = {p.get("entryId") for p in state["problems"] if p.get("code") in _SKIPPED_PROBLEMS}
    accepted = {
        r["decisionEntryId"]: r.get("appliedOp")
        for r in state["decided_reviews"]
        if r.get("decision") == "accept" and "decisionEntryId" in r
    }
    changes: list[tuple[str, Entry, list[dict[str, Any]]]] = []
    for entry in segment:
        kind = roleplay_entry_kind(entry)
        if kind not in ("turn", "commit", "repair", "review-decision"):
            continue
        entry_id = str(entry.get("id"))
        if kind == "review-decision":
            op = accepted.get(entry_id)
            if isinstance(op, dict):
                changes.append((entry_id, entry, [op]))
            continue
        payload = roleplay_payload(entry)
        if not isinstance(payload, dict) or payload.get("characterId") != character_id or entry_id in skipped:
            continue
        if kind == "turn" and entry["message"].get("isError"):
            continue
        commit = payload if kind == "commit" else payload.get("commit")
        ops = commit.get("ops") if isinstance(commit, dict) else None
        if isinstance(ops, list):
            changes.append((entry_id, entry, [op for op in ops if isinstance(op, dict)]))
    return changes


def _removed_by(
    pointer: str,
    changes: Sequence[tuple[str, Entry, list[dict[str, Any]]]],
    decisions: Mapping[str, dict[str, Any]],
) -> ProvenanceRecord | None:
    """The latest change whose ops reached ``pointer`` (removed it, or replaced or moved an ancestor)."""
    for entry_id, entry, ops in reversed(changes):
        for op in reversed(ops):
            if op.get("op") == "test":
                continue
            paths = [op.get("path")]
            if op.get("op") == "move":
                paths.append(op.get("from"))
            for op_pointer in paths:
                if isinstance(op_pointer, str) and _covers(op_pointer, pointer):
                    return describe_entry(op_pointer, entry_id, entry, decisions)
    return None


class DiffSide(TypedDict):
    state: RoleplayState
    entries: EntryLookup  # the side's path entries, at least those its provenance names
    # The side's path after the common ancestor, loaded only when an item needs it.
    after_ancestor: Callable[[], Sequence[Entry]]


def diff_reduced(from_side: DiffSide, to_side: DiffSide) -> DiffLists:
    """What differs between two reduced branches of one session.

    Entries up to the common ancestor are common to both paths, so every
    difference was made after it, on one side or the other.
    """
    sides = (from_side, to_side)
    records = [provenance_records(side["entries"], side["state"]) for side in sides]
    decisions = [_decisions_by_entry(side["state"]) for side in sides]
    changes: list[list[tuple[str, Entry, list[dict[str, Any]]]] | None] = [None, None]

    def removed_by(side: int, pointer: str) -> ProvenanceRecord | None:
        found = changes[side]
        if found is None:
            found = changes[side] = applied_changes(sides[side]["after_ancestor"](), sides[side]["state"])
        return _removed_by(pointer, found, decisions[side])

    old_doc, new_doc = from_side["state"]["state"], to_side["state"]["state"]
    changed, added, removed = compare_documents(old_doc, new_doc)
    result: DiffLists = {"changed": [], "added": [], "removed": []}
    for pointer in changed:
        result["changed"].append(
            {
                "pointer": pointer,
                "old_value": copy.deepcopy(value_at(old_doc, pointer)),
                "new_value": copy.deepcopy(value_at(new_doc, pointer)),
                "from_provenance": records_for(records[0], pointer),
                "to_provenance": records_for(records[1], pointer),
            }
        )
    for pointer in added:
        result["added"].append(
            {
                "pointer": pointer,
                "new_value": copy.deepcopy(value_at(new_doc, pointer)),
                "from_provenance": [],
                "to_provenance": records_for(records[1], pointer),
                "from_removed_by": removed_by(0, pointer),
            }
        )
    for pointer in removed:
        result["removed"].append(
            {
                "pointer": pointer,
                "old_value": copy.deepcopy(value_at(old_doc, pointer)),
                "from_provenance": records_for(records[0], pointer),
                "to_provenance": [],
                "to_removed_by": removed_by(1, pointer),
            }
        )
    return result
