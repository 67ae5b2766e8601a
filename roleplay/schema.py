"""Structured roleplay entries: their shapes, validation and builders.

Roleplay state is carried by ordinary Pi entries (see ``docs/roleplay.md``):

- a ``message`` entry whose message is the ``roleplay_finalize_turn`` tool
  result; its ``details`` hold the turn's commit;
- ``custom`` entries whose ``customType`` is one of the ``pi-roleplay-*``
  types below, with the payload in ``data``.

Validators raise ``RoleplayValidationError`` with a message naming the
offending commit/review/turn (or entry) id. The service calls them on user
input before appending; the reducer calls the same validators on stored
entries and turns a failure into a recorded problem instead of an exception.
Builders return validated ``data``/``details`` dicts for the service.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any, Final, Literal

import orjson
from jsonpointer import JsonPointer, JsonPointerException

from sessiontree.core import entry_keys
from sessiontree.core.errors import InvalidEntry
from sessiontree.core.types import Entry

TURN_TOOL_NAME: Final = "roleplay_finalize_turn"

COMMIT_TYPE: Final = "pi-roleplay-commit"
REVIEW_DECISION_TYPE: Final = "pi-roleplay-review-decision"
REVIEW_AMENDMENT_TYPE: Final = "pi-roleplay-review-amendment"
CHECKPOINT_TYPE: Final = "pi-roleplay-checkpoint"
TURN_STATUS_TYPE: Final = "pi-roleplay-turn-status"
REPAIR_TYPE: Final = "pi-roleplay-repair"
ARCHIVE_TYPE: Final = "pi-roleplay-archive"
# Ours, not in the seed: the session's role selection before the first reply.
IDENTITY_TYPE: Final = "pi-roleplay-identity"

RoleplayEntryKind = Literal[
    "turn",
    "commit",
    "review-decision",
    "review-amendment",
    "checkpoint",
    "turn-status",
    "repair",
    "archive",
    "identity",
]

KIND_BY_CUSTOM_TYPE: Final[Mapping[str, RoleplayEntryKind]] = {
    COMMIT_TYPE: "commit",
    REVIEW_DECISION_TYPE: "review-decision",
    REVIEW_AMENDMENT_TYPE: "review-amendment",
    CHECKPOINT_TYPE: "checkpoint",
    TURN_STATUS_TYPE: "turn-status",
    REPAIR_TYPE: "repair",
    ARCHIVE_TYPE: "archive",
    IDENTITY_TYPE: "identity",
}
ROLEPLAY_CUSTOM_TYPES: Final = frozenset(KIND_BY_CUSTOM_TYPE)

COMMIT_SOURCES: Final = ("turn", "manual-correction", "repair")
REVIEW_DECISIONS: Final = ("accept", "reject")
TURN_STATUSES: Final = ("incomplete", "complete")
PATCH_OPS: Final = ("add", "remove", "replace", "move", "copy", "test")
# A review proposes a change; a bare ``test`` would change nothing when accepted.
REVIEW_OPS: Final = ("add", "remove", "replace", "move", "copy")
# Ops whose ``value`` an amendment may replace.
AMENDABLE_OPS: Final = ("add", "replace")

CORRECTION_PAYLOAD_KEYS: Final = frozenset({"op", "path", "value", "from", "ops", "reason", "correctsCommitId"})
REPAIR_PROPOSAL_KEYS: Final = frozenset({"turnId", "ops", "events", "memories", "reviews", "reason"})


class RoleplayValidationError(InvalidEntry):
    """A roleplay entry (or the user input for one) does not have the required shape."""

    code = "invalid_roleplay_entry"


# --- hashing -------------------------------------------------------------


def canonical_state_json(state: Any) -> str:
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compute_state_hash(state: Any) -> str:
    """SHA-256 hex of the state as JSON with sorted keys and no spaces (UTF-8)."""
    return hashlib.sha256(canonical_state_json(state).encode("utf-8")).hexdigest()


# --- classification --------------------------------------------------------


def roleplay_entry_kind(entry: Entry) -> RoleplayEntryKind | None:
    """Which structured roleplay entry this is, or ``None`` for any other entry.

    Only ``custom`` entries count as custom roleplay entries: a
    ``custom_message`` is text for the model, never state.
    """
    entry_type = entry.get("type")
    if entry_type == "custom":
        custom_type = entry.get("customType")
        return KIND_BY_CUSTOM_TYPE.get(custom_type) if isinstance(custom_type, str) else None
    if entry_type == "message":
        message = entry.get("message")
        if (
            isinstance(message, dict)
            and message.get("role") == "toolResult"
            and message.get("toolName") == TURN_TOOL_NAME
        ):
            return "turn"
    return None


def roleplay_payload(entry: Entry) -> Any:
    """The part of a roleplay entry that carries its fields: ``details`` or ``data``."""
    if entry.get("type") == "message":
        message = entry.get("message")
        return message.get("details") if isinstance(message, dict) else None
    return entry.get("data")


def commit_id_of(entry: Entry) -> str | None:
    """The commit id an entry carries (turn result, commit, repair), if any."""
    kind = roleplay_entry_kind(entry)
    payload = roleplay_payload(entry)
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


# The entries that carry a commit are stored with the commit's id as their
# key (``sessiontree.core.entry_keys``): a correction that names a commit
# finds it by key, not by reading the path back to it.
COMMIT_KEY: Final = "rp-commit"


def register_commit_key() -> None:
    """Key turn results, commits and repairs by their commit id (the app's ``ready``)."""
    entry_keys.register_entry_key(
        COMMIT_KEY, key=commit_id_of, custom_types=(COMMIT_TYPE, REPAIR_TYPE), tool_names=(TURN_TOOL_NAME,)
    )


# --- field checks ------------------------------------------------------------


def _fail(where: str, problem: str) -> RoleplayValidationError:
    return RoleplayValidationError(f"{where}: {problem}")


def _require_mapping(value: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _require_id(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"'{key}' is required and must be a non-empty string")
    return value


def _optional_id(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"'{key}' must be a non-empty string when given")
    return value


def _optional_list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(where, f"'{key}' must be a list, got {type(value).__name__}")
    return value


def _require_json_pointer(value: Any, where: str, what: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"{what} must be a JSON pointer string")
    try:
        JsonPointer(value)
    except JsonPointerException as exc:
        raise _fail(where, f"{what} {value!r} is not a JSON pointer ({exc})") from None
    return value


def require_json_value(value: Any, where: str, what: str = "value") -> Any:
    """Reject what a JSON file could not hold (sets, NaN, objects…) before it is stored.

    Both checks are needed: ``json`` refuses NaN (orjson would write null), and
    orjson — the providers' codec — refuses integers beyond 64 bits and
    non-string keys, which ``json`` would accept and the append would then
    fail on with a bare ``TypeError``.
    """
    try:
        json.dumps(value, allow_nan=False)
        orjson.dumps(value)
    except (TypeError, ValueError) as exc:
        raise _fail(where, f"{what} is not plain JSON ({exc})") from None
    return value


def _label(data: Mapping[str, Any], key: str, fallback: str) -> str:
    value = data.get(key) if isinstance(data, Mapping) else None
    return f"{fallback} {value}" if isinstance(value, str) and value else fallback


def validate_patch_op(op: Any, *, where: str, allowed: tuple[str, ...] = PATCH_OPS) -> dict[str, Any]:
    """One RFC 6902 operation: a known ``op``, a pointer ``path``, ``value`` or ``from`` as needed."""
    op = _require_mapping(op, where, "a patch operation")
    name = op.get("op")
    if name not in allowed:
        raise _fail(where, f"unknown or unsupported patch op {name!r} (expected one of {', '.join(allowed)})")
    _require_json_pointer(op.get("path"), where, f"'{name}' op path")
    if name in ("add", "replace", "test") and "value" not in op:
        raise _fail(where, f"'{name}' op at {op.get('path')!r} needs a 'value'")
    if name in ("move", "copy"):
        _require_json_pointer(op.get("from"), where, f"'{name}' op 'from'")
    return op


def validate_patch_ops(ops: Any, *, where: str, allow_empty: bool = True) -> list[dict[str, Any]]:
    if not isinstance(ops, list):
        raise _fail(where, f"'ops' must be a list of RFC 6902 operations, got {type(ops).__name__}")
    if not ops and not allow_empty:
        raise _fail(where, "'ops' must not be empty")
    for index, op in enumerate(ops):
        validate_patch_op(op, where=f"{where} op {index}")
    return ops


def validate_review_item(item: Any, *, where: str) -> dict[str, Any]:
    item = _require_mapping(item, where, "a review")
    review_id = _require_id(item, "reviewId", where)
    here = f"{where} review {review_id}"
    validate_patch_op(item.get("op"), where=here, allowed=REVIEW_OPS)
    note = item.get("note")
    if note is not None and not isinstance(note, str):
        raise _fail(here, "'note' must be a string")
    return item


def validate_commit_body(body: Any, *, where: str) -> dict[str, Any]:
    """What every commit carries: ``commitId``, ``ops`` and optional events, memories, reviews."""
    body = _require_mapping(body, where, "the commit")
    commit_id = _require_id(body, "commitId", where)
    here = f"{where} {commit_id}"
    validate_patch_ops(body.get("ops"), where=here)
    _optional_list(body, "events", here)
    _optional_list(body, "memories", here)
    seen: set[str] = set()
    for item in _optional_list(body, "reviews", here):
        review_id = validate_review_item(item, where=here)["reviewId"]
        if review_id in seen:
            raise _fail(here, f"review {review_id} is proposed twice")
        seen.add(review_id)
    return body


# --- entry payloads ----------------------------------------------------------


def validate_turn_result_details(details: Any) -> dict[str, Any]:
    """``details`` of the ``roleplay_finalize_turn`` tool result."""
    where = "roleplay_finalize_turn result"
    details = _require_mapping(details, where, "details")
    _require_id(details, "characterId", where)
    _optional_id(details, "turnId", where)
    validate_commit_body(details.get("commit"), where=f"{where} commit")
    return details


def validate_commit_data(data: Any) -> dict[str, Any]:
    where = _label(data, "commitId", COMMIT_TYPE)
    data = _require_mapping(data, where, "data")
    _require_id(data, "characterId", where)
    source = data.get("source")
    if source not in COMMIT_SOURCES:
        raise _fail(where, f"'source' must be one of {', '.join(COMMIT_SOURCES)}, got {source!r}")
    validate_commit_body(data, where=COMMIT_TYPE)
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _fail(where, "'reason' must be a string")
    if source == "manual-correction":
        if not isinstance(reason, str) or not reason.strip():
            raise _fail(where, "'reason' is required for a manual-correction commit")
        if not data["ops"]:
            raise _fail(where, "a manual-correction commit needs at least one op")
    _optional_id(data, "correctsCommitId", where)
    return data


def validate_review_decision_data(data: Any) -> dict[str, Any]:
    where = _label(data, "reviewId", REVIEW_DECISION_TYPE)
    data = _require_mapping(data, where, "data")
    _require_id(data, "reviewId", where)
    _require_id(data, "characterId", where)
    decision = data.get("decision")
    if decision not in REVIEW_DECISIONS:
        raise _fail(where, f"'decision' must be accept or reject, got {decision!r}")
    return data


def validate_review_amendment_data(data: Any) -> dict[str, Any]:
    where = _label(data, "reviewId", REVIEW_AMENDMENT_TYPE)
    data = _require_mapping(data, where, "data")
    _require_id(data, "reviewId", where)
    _require_id(data, "characterId", where)
    if "value" not in data:
        raise _fail(where, "'value' (the amended proposed value) is required")
    return data


def validate_turn_status_data(data: Any) -> dict[str, Any]:
    where = _label(data, "turnId", TURN_STATUS_TYPE)
    data = _require_mapping(data, where, "data")
    _require_id(data, "characterId", where)
    _require_id(data, "turnId", where)
    status = data.get("status")
    if status not in TURN_STATUSES:
        raise _fail(where, f"'status' must be incomplete or complete, got {status!r}")
    return data


def validate_repair_data(data: Any) -> dict[str, Any]:
    where = _label(data, "turnId", REPAIR_TYPE)
    data = _require_mapping(data, where, "data")
    character_id = _require_id(data, "characterId", where)
    _require_id(data, "turnId", where)
    commit = validate_commit_body(data.get("commit"), where=f"{where} commit")
    if commit.get("source", "repair") != "repair":
        raise _fail(where, f"the commit of a repair must have source 'repair', got {commit.get('source')!r}")
    if commit.get("characterId", character_id) != character_id:
        raise _fail(where, "the commit's characterId differs from the repair's")
    return data


def validate_archive_data(data: Any) -> dict[str, Any]:
    where = ARCHIVE_TYPE
    data = _require_mapping(data, where, "data")
    _require_id(data, "characterId", where)
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _fail(where, "'reason' must be a string")
    return data


def validate_identity_data(data: Any) -> dict[str, Any]:
    where = IDENTITY_TYPE
    data = _require_mapping(data, where, "data")
    _require_id(data, "characterId", where)
    return data


def validate_checkpoint_data(data: Any) -> dict[str, Any]:
    """A checkpoint is usable only when complete and its ``stateHash`` matches its ``state``."""
    where = CHECKPOINT_TYPE
    data = _require_mapping(data, where, "data")
    _require_id(data, "characterId", where)
    revision = data.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise _fail(where, f"'revision' must be a non-negative integer, got {revision!r}")
    _require_mapping(data.get("state"), where, "'state'")
    for key in ("events", "memories", "incompleteTurns", "problems", "ignoredEntries"):
        _optional_list(data, key, where)
    for key in ("events", "memories", "incompleteTurns"):
        if key not in data:
            raise _fail(where, f"'{key}' is required")
    reviews = _require_mapping(data.get("reviews"), where, "'reviews'")
    for item in _optional_list(reviews, "pending", f"{where} reviews"):
        _require_id(_require_mapping(item, where, "a pending review"), "reviewId", where)
        validate_patch_op(item.get("op"), where=f"{where} review {item['reviewId']}", allowed=REVIEW_OPS)
    for item in _optional_list(reviews, "decided", f"{where} reviews"):
        _require_id(_require_mapping(item, where, "a decided review"), "reviewId", where)
        if item.get("decision") not in REVIEW_DECISIONS:
            raise _fail(where, f"decided review {item['reviewId']} has no accept/reject decision")
    for item in data["incompleteTurns"]:
        _require_id(_require_mapping(item, where, "an incomplete turn"), "turnId", where)
    provenance = _require_mapping(data.get("provenance", {}), where, "'provenance'")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in provenance.items()):
        raise _fail(where, "'provenance' must map JSON pointers to entry ids")
    archived = data.get("archived", False)
    if not isinstance(archived, bool):
        raise _fail(where, "'archived' must be true or false")
    state_hash = data.get("stateHash")
    if not isinstance(state_hash, str):
        raise _fail(where, "'stateHash' is required")
    try:
        actual = compute_state_hash(data["state"])
    except (TypeError, ValueError) as exc:
        raise _fail(where, f"'state' cannot be hashed ({exc})") from None
    if actual != state_hash:
        raise _fail(where, f"'stateHash' {state_hash[:12]}… does not match the state ({actual[:12]}…)")
    return data


PAYLOAD_VALIDATORS: Final = {
    "turn": validate_turn_result_details,
    "commit": validate_commit_data,
    "review-decision": validate_review_decision_data,
    "review-amendment": validate_review_amendment_data,
    "checkpoint": validate_checkpoint_data,
    "turn-status": validate_turn_status_data,
    "repair": validate_repair_data,
    "archive": validate_archive_data,
    "identity": validate_identity_data,
}


def validate_payload(kind: RoleplayEntryKind, payload: Any) -> dict[str, Any]:
    return PAYLOAD_VALIDATORS[kind](payload)


def validate_roleplay_entry(entry: Entry) -> tuple[RoleplayEntryKind, dict[str, Any]] | None:
    """Validate a whole entry: ``(kind, payload)`` for a roleplay entry, ``None`` for any other.

    The error message names the entry id as well as the payload's own id.
    """
    kind = roleplay_entry_kind(entry)
    if kind is None:
        return None
    try:
        return kind, validate_payload(kind, roleplay_payload(entry))
    except RoleplayValidationError as exc:
        raise RoleplayValidationError(f"entry {entry.get('id')}: {exc}") from None


# --- builders ------------------------------------------------------------------


def new_commit_id() -> str:
    return f"commit-{secrets.token_hex(8)}"


def new_review_id() -> str:
    return f"review-{secrets.token_hex(8)}"


def build_commit_data(
    *,
    character_id: str,
    ops: list[dict[str, Any]],
    source: str,
    commit_id: str | None = None,
    reason: str | None = None,
    corrects_commit_id: str | None = None,
    events: list[Any] | None = None,
    memories: list[Any] | None = None,
    reviews: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``data`` of a ``pi-roleplay-commit`` entry, validated."""
    data: dict[str, Any] = {
        "commitId": commit_id or new_commit_id(),
        "characterId": character_id,
        "source": source,
        "ops": ops,
    }
    if reason is not None:
        data["reason"] = reason
    if corrects_commit_id is not None:
        data["correctsCommitId"] = corrects_commit_id
    for key, value in (("events", events), ("memories", memories), ("reviews", reviews)):
        if value:
            data[key] = value
    require_json_value(data, f"{COMMIT_TYPE} {data['commitId']}", "the commit")
    return validate_commit_data(data)


def correction_commit_data(payload: Any, *, character_id: str, commit_id: str | None = None) -> dict[str, Any]:
    """The ``/rp state correct`` JSON → a ``manual-correction`` commit.

    Two forms: one op inline (``{"op","path","value","from"?,"reason",
    "correctsCommitId"?}``) or ``{"ops": [...], "reason", ...}``. Inline,
    ``from`` on ``replace``/``remove`` is the value the user believes is
    recorded; it becomes a ``test`` op guarding the change, so a correction
    made against a different value than the stored one fails instead of
    silently overwriting it. On ``move``/``copy`` it is RFC 6902's source path.
    """
    where = "state correction"
    payload = _require_mapping(payload, where, "the correction")
    unknown = sorted(set(payload) - CORRECTION_PAYLOAD_KEYS)
    if unknown:
        raise _fail(where, f"unknown field(s) {', '.join(unknown)}")
    reason = payload.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise _fail(where, "'reason' is required and must not be empty")
    if "ops" in payload:
        if "op" in payload or "path" in payload:
            raise _fail(where, "give either one inline op or 'ops', not both")
        ops = validate_patch_ops(payload["ops"], where=where, allow_empty=False)
    else:
        op = {key: payload[key] for key in ("op", "path", "value", "from") if key in payload}
        name = op.get("op")
        if name == "test":
            raise _fail(where, "a 'test' op alone corrects nothing")
        if name in ("replace", "remove") and "from" in op:
            expected = op.pop("from")
            validate_patch_op(op, where=where)
            ops = [{"op": "test", "path": op["path"], "value": expected}, op]
        else:
            if name == "add" and "from" in op:
                raise _fail(where, "'from' (the recorded value) only applies to replace and remove")
            ops = [validate_patch_op(op, where=where)]
    return build_commit_data(
        character_id=character_id,
        ops=ops,
        source="manual-correction",
        commit_id=commit_id,
        reason=reason.strip(),
        corrects_commit_id=_optional_id(payload, "correctsCommitId", where),
    )


def repair_data_from_proposal(proposal: Any, *, character_id: str, commit_id: str | None = None) -> dict[str, Any]:
    """The ``/rp turn repair`` JSON (``{"turnId", "ops", "events"?, "memories"?,
    "reviews"?, "reason"?}``) → ``data`` of a ``pi-roleplay-repair`` entry."""
    where = "turn repair"
    proposal = _require_mapping(proposal, where, "the repair proposal")
    unknown = sorted(set(proposal) - REPAIR_PROPOSAL_KEYS)
    if unknown:
        raise _fail(where, f"unknown field(s) {', '.join(unknown)}")
    turn_id = _require_id(proposal, "turnId", where)
    commit: dict[str, Any] = {
        "commitId": commit_id or new_commit_id(),
        "characterId": character_id,
        "source": "repair",
        "ops": proposal.get("ops", []),
    }
    for key in ("events", "memories", "reviews"):
        if proposal.get(key):
            commit[key] = proposal[key]
    reason = proposal.get("reason")
    if reason is not None:
        if not isinstance(reason, str):
            raise _fail(where, "'reason' must be a string")
        commit["reason"] = reason
    data = {"characterId": character_id, "turnId": turn_id, "commit": commit}
    require_json_value(data, f"{where} {turn_id}", "the repair")
    return validate_repair_data(data)


def build_review_decision_data(*, character_id: str, review_id: str, decision: str) -> dict[str, Any]:
    return validate_review_decision_data({"reviewId": review_id, "characterId": character_id, "decision": decision})


def build_review_amendment_data(*, character_id: str, review_id: str, value: Any) -> dict[str, Any]:
    data = {"reviewId": review_id, "characterId": character_id, "value": value}
    require_json_value(value, f"{REVIEW_AMENDMENT_TYPE} {review_id}")
    return validate_review_amendment_data(data)


def build_turn_status_data(
    *, character_id: str, turn_id: str, status: str, reason: str | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {"characterId": character_id, "turnId": turn_id, "status": status}
    if reason is not None:
        data["reason"] = reason
    return validate_turn_status_data(data)


def build_archive_data(*, character_id: str, reason: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"characterId": character_id}
    if reason is not None:
        data["reason"] = reason
    return validate_archive_data(data)


def build_identity_data(*, character_id: str) -> dict[str, Any]:
    return validate_identity_data({"characterId": character_id})


def build_turn_result_message(
    *,
    tool_call_id: str,
    character_id: str,
    commit: dict[str, Any],
    turn_id: str | None = None,
    text: str = "Turn finalized.",
    timestamp: int | None = None,
) -> dict[str, Any]:
    """The ``toolResult`` message of a ``roleplay_finalize_turn`` call, in Pi's message shape."""
    details: dict[str, Any] = {"characterId": character_id, "commit": commit}
    if turn_id is not None:
        details["turnId"] = turn_id
    require_json_value(details, f"{TURN_TOOL_NAME} result", "details")
    validate_turn_result_details(details)
    message: dict[str, Any] = {
        "role": "toolResult",
        "toolCallId": tool_call_id,
        "toolName": TURN_TOOL_NAME,
        "content": [{"type": "text", "text": text}],
        "details": details,
        "isError": False,
    }
    if timestamp is not None:
        message["timestamp"] = timestamp
    return message
