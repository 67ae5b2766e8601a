"""Roleplay writes: corrections, review amendments and decisions,
checkpoints, turn repairs, archiving the character.

Each reads the current branch once (``branch.current_branch``: the state by
key, as ``reads.inspect_state`` reads it), checks its input with
``roleplay.schema`` against the reduced state (and, where a check needs an
entry of the path, reads it by key inside the same read), and appends its
entries (all or none) through the operations layer
(``sessiontree.services.entries.append_entries``, audited with the caller's
``actor`` and ``channel`` as a ``RoleplayOperation``) as children of the leaf
it read, so a leaf moved meanwhile is ``LeafConflict`` instead of a commit on
the wrong branch. Nothing is appended when a check fails.
"""

from __future__ import annotations

from typing import Any

from sessiontree import services as tree_services
from sessiontree.core import entry_keys
from sessiontree.core.entries import custom_entry
from sessiontree.core.types import UNSET, Entry, Unset
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.services.idempotency import idempotent

from .. import inspection, schema
from ..errors import NoRoleplayCharacter, ReviewAlreadyDecided, ReviewNotFound
from ..operations import RoleplayOperation
from ..reducer import PatchFailed, RoleplayState, apply_patch, make_checkpoint_data
from ..schema import RoleplayValidationError
from . import planning
from .branch import Actor, Branch, current_branch, resolve_provider, writable_branch


def append(
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
    planning.intercept(session_id, branch, items, operation)
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


def _commits_on_path(branch: Branch, character_id: str, commit_id: str) -> bool:
    """Whether an entry of ``character_id`` on the branch carries the commit
    ``commit_id``: found by its key (the entries carrying a commit are
    stored with its id as their key), however far back. Where the key finds
    nothing and the storage cannot say its keys are complete (a ``mysql``
    row stored by a process without the rule has none:
    ``sessiontree.core.entry_keys``), read back from the leaf, so a recent
    commit is found in the tail the reduction read."""

    def carries(entry: Entry) -> bool:
        payload = schema.roleplay_payload(entry)
        return (
            isinstance(payload, dict)
            and payload.get("characterId") == character_id
            and schema.commit_id_of(entry) == commit_id
        )

    key = entry_keys.key_of(schema.COMMIT_KEY, commit_id)
    path = branch["path"]
    if key is not None and path.keyed(key, carries):
        return True
    if key is not None and path.keys_complete():
        return False
    return path.latest(carries) is not None


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
    entry = branch["path"].entry(entry_id)
    if entry is None:
        return None
    commit_id = schema.commit_id_of(entry)
    if commit_id is not None:
        return commit_id
    # An accepted review: its change belongs to the commit that proposed it.
    for review in branch["state"]["decided_reviews"]:
        if review.get("decisionEntryId") == entry_id:
            return review.get("commitId")
    return None


@idempotent()
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
    provider = resolve_provider(provider, session_id)
    with writable_branch(provider, session_id, "correct the state", expected_leaf_id) as branch:
        state = branch["state"]
        character_id = state["character_id"]
        assert character_id is not None
        data = schema.correction_commit_data(payload, character_id=character_id)
        where = f"state correction {data['commitId']}"
        corrects = data.get("correctsCommitId")
        if corrects is not None:
            if not _commits_on_path(branch, character_id, corrects):
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
    return append(
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


@idempotent()
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
    provider = resolve_provider(provider, session_id)
    with writable_branch(provider, session_id, f"amend review {review_id}", expected_leaf_id) as branch:
        state = branch["state"]
        review = _pending_review(state, review_id, session_id)
        if review["op"].get("op") not in schema.AMENDABLE_OPS:
            raise RoleplayValidationError(
                f"review {review_id}: proposes a {review['op'].get('op')!r} op, which has no value to amend"
            )
        assert state["character_id"] is not None
        data = schema.build_review_amendment_data(character_id=state["character_id"], review_id=review_id, value=value)
    return append(
        provider,
        session_id,
        branch,
        [(schema.REVIEW_AMENDMENT_TYPE, data)],
        operation=RoleplayOperation.AMEND_REVIEW,
        actor=actor,
        channel=channel,
    )


@idempotent()
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
    provider = resolve_provider(provider, session_id)
    if decision not in schema.REVIEW_DECISIONS:
        raise RoleplayValidationError(f"review {review_id}: decision must be accept or reject, got {decision!r}")
    if decision == "reject" and not isinstance(value, Unset):
        raise RoleplayValidationError(f"review {review_id}: a value can only be given when accepting")
    with writable_branch(provider, session_id, f"{decision} review {review_id}", expected_leaf_id) as branch:
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
    return append(
        provider,
        session_id,
        branch,
        items,
        operation=RoleplayOperation.ACCEPT_REVIEW if decision == "accept" else RoleplayOperation.REJECT_REVIEW,
        actor=actor,
        channel=channel,
    )


@idempotent()
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
    provider = resolve_provider(provider, session_id)
    with current_branch(provider, session_id, expected_leaf_id) as branch:
        if branch["state"]["character_id"] is None:
            raise NoRoleplayCharacter(
                f"Session {session_id}: no roleplay character on the current branch "
                f"(leaf {branch['leaf_entry_id']}); nothing to checkpoint"
            )
        data = make_checkpoint_data(branch["state"])
        data.update(extra)
    return append(
        provider,
        session_id,
        branch,
        [(schema.CHECKPOINT_TYPE, data)],
        operation=RoleplayOperation.CHECKPOINT,
        actor=actor,
        channel=channel,
    )


@idempotent()
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
    provider = resolve_provider(provider, session_id)
    with writable_branch(provider, session_id, "repair a turn", expected_leaf_id) as branch:
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
    return append(
        provider,
        session_id,
        branch,
        [(schema.REPAIR_TYPE, data)],
        operation=RoleplayOperation.REPAIR_TURN,
        actor=actor,
        channel=channel,
    )


@idempotent()
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
    provider = resolve_provider(provider, session_id)
    with writable_branch(provider, session_id, "archive it again", expected_leaf_id) as branch:
        assert branch["state"]["character_id"] is not None
        data = schema.build_archive_data(character_id=branch["state"]["character_id"], reason=reason)
    return append(
        provider,
        session_id,
        branch,
        [(schema.ARCHIVE_TYPE, data)],
        operation=RoleplayOperation.ARCHIVE,
        actor=actor,
        channel=channel,
    )
