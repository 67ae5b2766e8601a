"""Roleplay state as a pure function of one branch's entries.

``reduce_branch(path_entries, character_id)`` reads a root-first active path
and returns the character's ``RoleplayState``. Rules (``docs/roleplay.md``):

- only structured roleplay entries count (see ``roleplay.schema``); branch
  summaries, compaction summaries and message text never change state;
- entries of another ``characterId`` are ignored (and listed as ignored);
- it starts from the latest valid checkpoint *on the path* (hash verified),
  found by a backward scan, and applies the entries after it in path order,
  so the cost depends on the entries since that checkpoint, not path length;
- stored history never makes it raise: a malformed entry or a commit whose
  RFC 6902 ops cannot be applied is skipped whole and listed in ``problems``.

No Django here: this module must stay importable and testable on its own.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any, Final, TypedDict

import jsonpatch
from jsonpointer import JsonPointer, JsonPointerException

from sessiontree.core.types import Entry

from .schema import (
    AMENDABLE_OPS,
    RoleplayValidationError,
    compute_state_hash,
    roleplay_entry_kind,
    roleplay_payload,
    validate_checkpoint_data,
    validate_payload,
)

NON_CANON_BOUNDARY_NOTE: Final = (
    "Branch summary may describe an abandoned alternate timeline. "
    "Do not treat it as current roleplay canon unless the Current Character View "
    "or current-branch messages independently establish the same fact."
)

CHARACTER_VIEW_HEADING: Final = "## Current Character View"


class RoleplayIdentity(TypedDict):
    character_id: str | None
    # "argument" | "identity-entry" | "structured-entry" | None (nothing on the path)
    source: str | None
    entry_id: str | None
    locked: bool
    locked_at_entry_id: str | None


class RoleplayState(TypedDict):
    character_id: str | None
    state: dict[str, Any]
    revision: int
    events: list[Any]
    memories: list[Any]
    pending_reviews: list[dict[str, Any]]
    decided_reviews: list[dict[str, Any]]
    incomplete_turns: list[dict[str, Any]]
    state_hash: str
    provenance: dict[str, str]
    archived: bool
    # Extras beyond DESIGN §7:
    archive: dict[str, Any] | None
    last_commit_id: str | None
    problems: list[dict[str, Any]]
    ignored_entries: list[dict[str, Any]]
    checkpoint_entry_id: str | None
    identity: RoleplayIdentity


# Exceptions a patch op may raise on a document it does not fit.
_PATCH_ERRORS = (
    jsonpatch.JsonPatchException,
    JsonPointerException,
    AttributeError,
    KeyError,
    IndexError,
    TypeError,
    ValueError,
)


class PatchFailed(Exception):
    """An RFC 6902 op could not be applied; the message says which and why."""


_JSON_TYPES = {
    "str": "a string",
    "dict": "an object",
    "list": "an array",
    "int": "a number",
    "float": "a number",
    "bool": "true or false",
    "NoneType": "null",
}
_PY_CLASS = re.compile(r"<class '(?:[\w.]*\.)?(\w+)'>")


def json_type_name(value: Any) -> str:
    """What a JSON value is, in JSON's words ("a string", "an object"…)."""
    return _JSON_TYPES.get(type(value).__name__, type(value).__name__)


def _pointer_text(tokens: Sequence[str]) -> str:
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens) or "the state"


def _patch_error_text(op: Any, exc: Exception, document: Any) -> str:
    """Why ``op`` failed on ``document``, in the state's terms: which value is
    in the way and what it holds; never a Python type repr."""
    if isinstance(op, dict) and isinstance(exc, jsonpatch.JsonPatchTestFailed):
        try:
            actual = JsonPointer(op["path"]).resolve(document)
        except (JsonPointerException, KeyError, TypeError):
            actual = None
        return f"test failed: {op['path']} holds {_json_text(actual)}, not {_json_text(op.get('value'))}"
    if isinstance(op, dict) and isinstance(op.get("path"), str) and "non-container" in str(exc):
        try:
            tokens = JsonPointer(op["path"]).parts
        except JsonPointerException:
            tokens = []
        current = document
        for index, token in enumerate(tokens):
            if not isinstance(current, (dict, list)):
                where = _pointer_text(tokens[:index])
                return (
                    f"{where} is {json_type_name(current)} ({_json_text(current)}), not an object or an array, "
                    f"so it has no member {token!r}"
                )
            try:
                current = current[token] if isinstance(current, dict) else current[int(token)]
            except (KeyError, IndexError, ValueError):
                break
    return _PY_CLASS.sub(lambda match: _JSON_TYPES.get(match.group(1), match.group(1)), str(exc))


def _json_text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:79] + "…"


# --- identity ------------------------------------------------------------------


def _is_reply(entry: Entry) -> bool:
    message = entry.get("message") if entry.get("type") == "message" else None
    return isinstance(message, dict) and message.get("role") == "assistant"


def _payload_character_id(entry: Entry) -> Any:
    payload = roleplay_payload(entry)
    return payload.get("characterId") if isinstance(payload, dict) else None


def resolve_session_identity(path_entries: Sequence[Entry]) -> tuple[RoleplayIdentity, int | None]:
    """The session's role identity from the path, and the index where it locked.

    Before the character's first reply or first structured state, the latest
    ``pi-roleplay-identity`` entry is the selection (it may still change).
    The first assistant reply or structured roleplay entry locks it; without
    any selection, the first structured entry's ``characterId`` is the
    identity. The scan stops there, so it is cheap on long paths.
    """
    identity: RoleplayIdentity = {
        "character_id": None,
        "source": None,
        "entry_id": None,
        "locked": False,
        "locked_at_entry_id": None,
    }
    for index, entry in enumerate(path_entries):
        kind = roleplay_entry_kind(entry)
        if kind == "identity":
            character_id = _payload_character_id(entry)
            if isinstance(character_id, str) and character_id:
                identity["character_id"] = character_id
                identity["source"] = "identity-entry"
                identity["entry_id"] = entry.get("id")
            continue
        if kind is None and not (_is_reply(entry) and identity["character_id"] is not None):
            continue
        if identity["character_id"] is None:
            character_id = _payload_character_id(entry)
            if not isinstance(character_id, str) or not character_id:
                continue  # a malformed structured entry cannot fix the identity
            identity["character_id"] = character_id
            identity["source"] = "structured-entry"
            identity["entry_id"] = entry.get("id")
        identity["locked"] = True
        identity["locked_at_entry_id"] = entry.get("id")
        return identity, index
    return identity, None


# --- patching ----------------------------------------------------------------------


def _provenance_pointer(document: Any, path: str) -> str:
    """Where provenance is recorded for an op at ``path``.

    Inside an array, indexes shift on every insert/remove, so an op on an
    element is attributed to the array itself.
    """
    parts = JsonPointer(path).parts
    container = document
    for index, part in enumerate(parts):
        if isinstance(container, list):
            return JsonPointer.from_parts(parts[:index]).path
        if isinstance(container, dict) and part in container:
            container = container[part]
        else:
            break
    return path


def _owned(value: Any, owned: dict[int, Any]) -> Any:
    """``value`` itself if this patch already copied it, else a shallow copy it now owns."""
    if id(value) in owned:
        return value
    duplicate = dict(value) if isinstance(value, dict) else list(value)
    # Keyed by id and kept alive here, so an id cannot be reused by another object meanwhile.
    owned[id(duplicate)] = duplicate
    return duplicate


def _own_containers(document: Any, path: str, owned: dict[int, Any]) -> Any:
    """Copy (shallowly) the containers from the root down to the parent of
    ``path``'s target: the only ones an op at ``path`` changes. Returns the root.

    Path copying instead of a deep copy of the whole state per commit: the
    caller's document is never modified, and the cost is the length of the
    path, not the size of the state. Where the path does not resolve, the
    walk stops; the op then fails before changing anything not owned.
    """
    if not isinstance(document, dict | list):
        return document
    document = _owned(document, owned)
    container = document
    for part in JsonPointer(path).parts[:-1]:
        key: str | int
        if isinstance(container, dict) and part in container:
            key = part
        elif isinstance(container, list) and part.isdigit() and int(part) < len(container):
            key = int(part)
        else:
            break
        child = container[key]
        if not isinstance(child, dict | list):
            break
        child = _owned(child, owned)
        container[key] = child
        container = child
    return document


def apply_patch(state: dict[str, Any], ops: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Apply RFC 6902 ``ops`` to ``state``, all or nothing, without modifying it.

    Returns the new state and the provenance changes (``("set"|"remove",
    pointer)``). Raises ``PatchFailed`` naming the failing op; ``state`` is
    never modified: every container an op changes is copied first (the new
    state shares the unchanged parts with ``state``). The service may call
    this to check a correction first.
    """
    document: Any = state
    owned: dict[int, Any] = {}
    changes: list[tuple[str, str]] = []
    for index, raw_op in enumerate(ops):
        # Copy the op so values inserted into the document never alias the stored entry.
        op = copy.deepcopy(raw_op)
        try:
            name = op.get("op")
            path = op["path"]
            target = _provenance_pointer(document, path)
            source = _provenance_pointer(document, op["from"]) if name == "move" else None
            if name != "test":
                document = _own_containers(document, path, owned)
                if name == "move":
                    document = _own_containers(document, op["from"], owned)
            document = jsonpatch.JsonPatch([op]).apply(document, in_place=True)
        except _PATCH_ERRORS as exc:
            description = f"{op.get('op')} {op.get('path')!r}" if isinstance(op, dict) else repr(op)
            raise PatchFailed(f"op {index} ({description}) failed: {_patch_error_text(op, exc, document)}") from None
        if name in ("add", "replace", "copy"):
            changes.append(("set", target))
        elif name == "remove":
            changes.append(("set" if target != path else "remove", target))
        elif name == "move":
            assert source is not None
            changes.append(("set" if source != op["from"] else "remove", source))
            changes.append(("set", target))
    if not isinstance(document, dict):
        raise PatchFailed(f"the state must stay a JSON object, the ops made it {type(document).__name__}")
    return document, changes


def _apply_provenance(provenance: dict[str, str], changes: list[tuple[str, str]], entry_id: str) -> None:
    for action, pointer in changes:
        if pointer == "":
            provenance.clear()
        else:
            prefix = pointer + "/"
            for key in [k for k in provenance if k == pointer or k.startswith(prefix)]:
                del provenance[key]
        if action == "set":
            provenance[pointer] = entry_id


# --- reduction ----------------------------------------------------------------------


class _Reduction:
    """The running result while walking the path; emits a ``RoleplayState``."""

    def __init__(self, character_id: str | None, identity: RoleplayIdentity) -> None:
        self.character_id = character_id
        self.identity = identity
        self.state: dict[str, Any] = {}
        self.revision = 0
        self.events: list[Any] = []
        self.memories: list[Any] = []
        self.pending: dict[str, dict[str, Any]] = {}
        self.decided: dict[str, dict[str, Any]] = {}
        self.incomplete: dict[str, dict[str, Any]] = {}
        self.provenance: dict[str, str] = {}
        self.archived = False
        self.archive: dict[str, Any] | None = None
        self.last_commit_id: str | None = None
        self.problems: list[dict[str, Any]] = []
        self.ignored: list[dict[str, Any]] = []
        self.checkpoint_entry_id: str | None = None

    def load_checkpoint(self, data: dict[str, Any], entry_id: str | None) -> None:
        # Copies: the reduction must never modify the stored checkpoint entry.
        self.state = copy.deepcopy(data["state"])
        self.revision = data["revision"]
        self.events = list(data["events"])
        self.memories = list(data["memories"])
        reviews = data["reviews"]
        self.pending = {r["reviewId"]: r for r in reviews.get("pending") or []}
        self.decided = {r["reviewId"]: r for r in reviews.get("decided") or []}
        self.incomplete = {t["turnId"]: t for t in data["incompleteTurns"]}
        self.provenance = dict(data.get("provenance") or {})
        self.archived = data.get("archived", False)
        self.archive = data.get("archive")
        self.last_commit_id = data.get("lastCommitId")
        self.problems = list(data.get("problems") or [])
        self.ignored = list(data.get("ignoredEntries") or [])
        self.checkpoint_entry_id = entry_id

    def problem(self, entry_id: Any, code: str, reason: str) -> None:
        self.problems.append({"entryId": entry_id, "code": code, "reason": reason})

    def ignore(self, entry_id: Any, character_id: Any, reason: str) -> None:
        self.ignored.append({"entryId": entry_id, "characterId": character_id, "reason": reason})

    # Each applied commit and each applied accepted review is one revision.

    def apply_commit(self, entry_id: str, body: dict[str, Any]) -> bool:
        commit_id = body["commitId"]
        try:
            new_state, changes = apply_patch(self.state, body["ops"])
        except PatchFailed as exc:
            self.problem(entry_id, "patch_failed", f"commit {commit_id} skipped: {exc}")
            return False
        proposals: list[dict[str, Any]] = []
        for item in body.get("reviews") or []:
            review_id = item["reviewId"]
            if review_id in self.pending or review_id in self.decided:
                self.problem(
                    entry_id, "duplicate_review", f"commit {commit_id} re-proposes review {review_id}; kept the first"
                )
                continue
            proposals.append(
                {
                    "reviewId": review_id,
                    "op": item["op"],
                    "note": item.get("note", ""),
                    "commitId": commit_id,
                    "entryId": entry_id,
                }
            )
        self.state = new_state
        _apply_provenance(self.provenance, changes, entry_id)
        self.revision += 1
        self.events.extend(body.get("events") or [])
        self.memories.extend(body.get("memories") or [])
        for proposal in proposals:
            self.pending[proposal["reviewId"]] = proposal
        self.last_commit_id = commit_id
        return True

    def _pending_review(self, entry_id: str, review_id: str, action: str) -> dict[str, Any] | None:
        review = self.pending.get(review_id)
        if review is not None:
            return review
        if review_id in self.decided:
            self.problem(entry_id, "review_already_decided", f"{action} of review {review_id} ignored: already decided")
        else:
            self.problem(
                entry_id,
                "unknown_review",
                f"{action} of review {review_id} ignored: no such pending review on this branch",
            )
        return None

    def amend_review(self, entry_id: str, data: dict[str, Any]) -> None:
        review_id = data["reviewId"]
        review = self._pending_review(entry_id, review_id, "amendment")
        if review is None:
            return
        if review["op"].get("op") not in AMENDABLE_OPS:
            self.problem(
                entry_id,
                "amendment_not_applicable",
                f"review {review_id} proposes a {review['op'].get('op')!r} op, which has no value to amend",
            )
            return
        # New record rather than an update: the old one may belong to a stored checkpoint.
        self.pending[review_id] = {**review, "amendment": {"value": data["value"], "entryId": entry_id}}

    def decide_review(self, entry_id: str, data: dict[str, Any]) -> None:
        review_id = data["reviewId"]
        review = self._pending_review(entry_id, review_id, data["decision"])
        if review is None:
            return
        decided = {**review, "decision": data["decision"], "decisionEntryId": entry_id}
        if data["decision"] == "accept":
            op = dict(review["op"])
            if "amendment" in review:
                op["value"] = review["amendment"]["value"]
            try:
                new_state, changes = apply_patch(self.state, [op])
            except PatchFailed as exc:
                # Left pending so it can be amended and accepted again.
                self.problem(entry_id, "patch_failed", f"accepting review {review_id} failed, still pending: {exc}")
                return
            self.state = new_state
            _apply_provenance(self.provenance, changes, entry_id)
            self.revision += 1
            decided["appliedOp"] = op
        del self.pending[review_id]
        self.decided[review_id] = decided

    def set_turn_status(self, entry_id: str, data: dict[str, Any]) -> None:
        turn_id = data["turnId"]
        if data["status"] == "incomplete":
            if turn_id not in self.incomplete:
                record = {"turnId": turn_id, "entryId": entry_id}
                if isinstance(data.get("reason"), str):
                    record["reason"] = data["reason"]
                self.incomplete[turn_id] = record
        else:
            self.incomplete.pop(turn_id, None)

    def repair(self, entry_id: str, data: dict[str, Any]) -> None:
        if self.apply_commit(entry_id, data["commit"]):
            self.incomplete.pop(data["turnId"], None)

    def set_archived(self, entry_id: str, data: dict[str, Any]) -> None:
        self.archived = True
        self.archive = {"entryId": entry_id, "reason": data.get("reason")}

    def result(self) -> RoleplayState:
        return {
            "character_id": self.character_id,
            "state": self.state,
            "revision": self.revision,
            "events": self.events,
            "memories": self.memories,
            "pending_reviews": list(self.pending.values()),
            "decided_reviews": list(self.decided.values()),
            "incomplete_turns": list(self.incomplete.values()),
            "state_hash": compute_state_hash(self.state),
            "provenance": self.provenance,
            "archived": self.archived,
            "archive": self.archive,
            "last_commit_id": self.last_commit_id,
            "problems": self.problems,
            "ignored_entries": self.ignored,
            "checkpoint_entry_id": self.checkpoint_entry_id,
            "identity": self.identity,
        }


def _find_checkpoint(
    path_entries: Sequence[Entry], character_id: str
) -> tuple[int, dict[str, Any] | None, dict[str, str]]:
    """Backward scan for the latest valid checkpoint of ``character_id``.

    Returns its index (-1 when none), its data, and why each later checkpoint
    of this character was rejected (entry id → reason). A cheap type test per
    entry; only this character's checkpoints are hashed.
    """
    rejected: dict[str, str] = {}
    for index in range(len(path_entries) - 1, -1, -1):
        entry = path_entries[index]
        if entry.get("type") != "custom" or roleplay_entry_kind(entry) != "checkpoint":
            continue
        data = entry.get("data")
        if not isinstance(data, dict) or data.get("characterId") != character_id:
            continue
        try:
            validate_checkpoint_data(data)
        except RoleplayValidationError as exc:
            rejected[str(entry.get("id"))] = str(exc)
            continue
        return index, data, rejected
    return -1, None, rejected


def reduce_branch(path_entries: Sequence[Entry], character_id: str | None = None) -> RoleplayState:
    """The roleplay state of ``character_id`` on a root-first path.

    ``character_id=None`` resolves the session's role identity from the path
    (see ``resolve_session_identity``); with no identity, the state is empty.
    """
    lock_index: int | None
    if character_id is None:
        identity, lock_index = resolve_session_identity(path_entries)
        if identity["character_id"] is None:
            return _Reduction(None, identity).result()
        character_id = identity["character_id"]
    else:
        identity = {
            "character_id": character_id,
            "source": "argument",
            "entry_id": None,
            "locked": True,
            "locked_at_entry_id": None,
        }
        lock_index = -1

    reduction = _Reduction(character_id, identity)
    start, checkpoint, rejected_checkpoints = _find_checkpoint(path_entries, character_id)
    if checkpoint is not None:
        reduction.load_checkpoint(checkpoint, path_entries[start].get("id"))

    for index in range(start + 1, len(path_entries)):
        entry = path_entries[index]
        kind = roleplay_entry_kind(entry)
        if kind is None:
            continue
        entry_id = str(entry.get("id"))  # entries on a path always have a string id
        payload = roleplay_payload(entry)
        entry_character = payload.get("characterId") if isinstance(payload, dict) else None

        if kind == "identity":
            # Selections before the lock were superseded legitimately; after it, a switch is refused.
            locked = lock_index is not None and index > lock_index
            if locked and entry_character != character_id:
                reduction.ignore(entry_id, entry_character, "identity is locked; a role cannot be switched mid-session")
            continue
        if not isinstance(entry_character, str) or not entry_character:
            reduction.problem(entry_id, "malformed", f"{kind} entry without a characterId skipped")
            continue
        if entry_character != character_id:
            reduction.ignore(entry_id, entry_character, f"{kind} entry of another character")
            continue
        if kind == "turn" and entry["message"].get("isError"):
            reduction.ignore(entry_id, entry_character, "roleplay_finalize_turn result is an error")
            continue
        if kind == "checkpoint":
            # Every valid checkpoint of this character lies at or before ``start``.
            reason = rejected_checkpoints.get(str(entry_id), "not usable")
            reduction.problem(entry_id, "invalid_checkpoint", f"checkpoint ignored: {reason}")
            continue
        try:
            data = validate_payload(kind, payload)
        except RoleplayValidationError as exc:
            reduction.problem(entry_id, "malformed", f"{kind} entry skipped: {exc}")
            continue

        if kind == "turn":
            reduction.apply_commit(entry_id, data["commit"])
        elif kind == "commit":
            reduction.apply_commit(entry_id, data)
        elif kind == "review-decision":
            reduction.decide_review(entry_id, data)
        elif kind == "review-amendment":
            reduction.amend_review(entry_id, data)
        elif kind == "turn-status":
            reduction.set_turn_status(entry_id, data)
        elif kind == "repair":
            reduction.repair(entry_id, data)
        elif kind == "archive":
            reduction.set_archived(entry_id, data)
    return reduction.result()


EntryLoader = Callable[[Sequence[str]], Sequence[Entry]]


def _is_usable_checkpoint(entry: Entry, character_id: str) -> bool:
    if entry.get("type") != "custom" or roleplay_entry_kind(entry) != "checkpoint":
        return False
    data = entry.get("data")
    if not isinstance(data, dict) or data.get("characterId") != character_id:
        return False
    try:
        validate_checkpoint_data(data)
    except RoleplayValidationError:
        return False
    return True


def reduce_branch_from_ids(
    path_ids: Sequence[str],
    load: EntryLoader,
    character_id: str | None = None,
    *,
    cache: MutableMapping[str, Entry] | None = None,
    chunk: int = 256,
) -> tuple[RoleplayState, MutableMapping[str, Entry]]:
    """``reduce_branch`` of the path ``path_ids`` (root first), loading only the entries it needs.

    ``load(ids)`` returns the entries of ``ids`` in that order (a provider
    view's ``entries``). What the reduction reads: the head of the path up to
    the entry that locks the identity (unless ``character_id`` is given), and
    the tail from the latest valid checkpoint of the character, found by
    loading backwards in growing chunks. The entries in between are carried
    by the checkpoint, so the result equals ``reduce_branch`` of the whole
    path (property-tested); the cost follows the entries since the
    checkpoint, not the path's length, on any storage.

    Returns the state and ``cache`` (id → entry, every entry loaded, which
    callers reuse for provenance or a second branch of the same session).
    """
    loaded: MutableMapping[str, Entry] = {} if cache is None else cache
    state, _ = reduce_branch_lazily(path_ids, load, character_id, cache=loaded, chunk=chunk)
    return state, loaded


def reduce_branch_lazily(
    path_ids: Sequence[str],
    load: EntryLoader,
    character_id: str | None = None,
    *,
    cache: MutableMapping[str, Entry] | None = None,
    chunk: int = 256,
) -> tuple[RoleplayState, list[Entry]]:
    """``reduce_branch_from_ids``, returning the entries the state was reduced
    from instead of the cache: the head up to the identity's lock and the
    tail from the latest valid checkpoint (or the whole path when there is no
    lock or no such checkpoint).

    Without ``character_id``, ``reduce_branch([*reduced, *more])`` equals
    ``reduce_branch([*path, *more])`` for any entries ``more`` appended
    after the path: the identity locks in the head, and the latest valid
    checkpoint is the tail's first entry or one of ``more``. So a write can
    tell the state after its entries without the path's middle."""
    loaded: MutableMapping[str, Entry] = {} if cache is None else cache
    total = len(path_ids)

    def entries(low: int, high: int) -> list[Entry]:
        missing = [entry_id for entry_id in path_ids[low:high] if entry_id not in loaded]
        if missing:
            for entry in load(missing):
                loaded[str(entry.get("id"))] = entry
        return [loaded[entry_id] for entry_id in path_ids[low:high]]

    head = 0  # entries [0, head) must be read for the identity
    if character_id is None:
        end = min(chunk, total)
        while True:
            identity, lock_index = resolve_session_identity(entries(0, end))
            if lock_index is not None or end == total:
                break
            end = min(total, end * 4)
        if lock_index is None or identity["character_id"] is None:
            # No structured entry and no reply on the path: the whole path is loaded already.
            whole = entries(0, total)
            return reduce_branch(whole, None), whole
        resolved = identity["character_id"]
        head = lock_index + 1
    else:
        resolved = character_id

    start: int | None = None
    low, size = total, chunk
    while low > head and start is None:
        next_low = max(head, low - size)
        segment = entries(next_low, low)
        for offset in range(len(segment) - 1, -1, -1):
            if _is_usable_checkpoint(segment[offset], resolved):
                start = next_low + offset
                break
        low, size = next_low, size * 2
    reduced = entries(0, total) if start is None else entries(0, head) + entries(start, total)
    return reduce_branch(reduced, character_id), reduced


def make_checkpoint_data(state: RoleplayState) -> dict[str, Any]:
    """``data`` of a ``pi-roleplay-checkpoint`` entry holding a reduced state.

    A deep copy, so later changes to ``state`` cannot alter what is stored.
    """
    if not state.get("character_id"):
        raise RoleplayValidationError("pi-roleplay-checkpoint: no character identity on this branch to checkpoint")
    data = {
        "characterId": state["character_id"],
        "revision": state["revision"],
        "state": state["state"],
        "events": state["events"],
        "memories": state["memories"],
        "reviews": {"pending": state["pending_reviews"], "decided": state["decided_reviews"]},
        "incompleteTurns": state["incomplete_turns"],
        "provenance": state["provenance"],
        "archived": state["archived"],
        "archive": state.get("archive"),
        "lastCommitId": state.get("last_commit_id"),
        "problems": state.get("problems", []),
        "ignoredEntries": state.get("ignored_entries", []),
        "stateHash": compute_state_hash(state["state"]),
    }
    return copy.deepcopy(data)


# --- the model's view ---------------------------------------------------------------------


def _one_line(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in ("summary", "text", "description", "content"):
            if isinstance(item.get(key), str):
                return item[key]
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


def render_character_view(state: RoleplayState, *, max_events: int = 10, max_memories: int = 10) -> str:
    """The "Current Character View" block given to the model: canon state only.

    Pending reviews are left out on purpose: they are proposals, not canon.
    """
    lines = [CHARACTER_VIEW_HEADING]
    lines.append(f"Character: {state.get('character_id') or '(none)'}")
    lines.append(f"Revision: {state.get('revision', 0)}")
    if state.get("archived"):
        lines.append("Status: archived")
    lines.append("State:")
    lines.append(json.dumps(state.get("state") or {}, ensure_ascii=False, sort_keys=True, indent=2))
    events = state.get("events") or []
    if events and max_events > 0:
        lines.append("Recent events:")
        lines.extend(f"- {_one_line(event)}" for event in events[-max_events:])
    memories = state.get("memories") or []
    if memories and max_memories > 0:
        lines.append("Memories:")
        lines.extend(f"- {_one_line(memory)}" for memory in memories[-max_memories:])
    return "\n".join(lines)
