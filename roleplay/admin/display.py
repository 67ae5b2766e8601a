"""How roleplay entries read in the session admin: a marker of their own in the
tree (``rp commit``, ``rp correction``, ``rp review``…) and fields (ids, an
ops summary, the reason) instead of their JSON. Registered as the roleplay
admin plug-in's entry markers and renderers (``roleplay/admin/__init__.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from sessiontree.admin.entry_display import shorten, to_json
from sessiontree.admin.plugins import CustomEntryRenderer, Fields
from sessiontree.core.entries import message_of
from sessiontree.core.types import Entry

from ..schema import KIND_BY_CUSTOM_TYPE, RoleplayEntryKind, roleplay_entry_kind, roleplay_payload


def summarize_ops(ops: Any, limit: int = 4) -> str:
    """JSON Patch ops in a line: ``replace /location = "inn"; remove /hat``."""
    if not isinstance(ops, list):
        return to_json(ops)
    parts = []
    for op in ops[:limit]:
        if not isinstance(op, Mapping):
            parts.append(to_json(op))
            continue
        text = f"{op.get('op')} {op.get('path')}"
        if "from" in op:
            text += f" from {op.get('from')}"
        if "value" in op:
            text += f" = {shorten(to_json(op.get('value')), 60)}"
        parts.append(text)
    if len(ops) > limit:
        parts.append(f"… {len(ops) - limit} more")
    return "; ".join(parts) if parts else "no ops"


def _ids(items: Any, key: str) -> str:
    if not isinstance(items, list):
        return ""
    ids = [str(item.get(key)) for item in items if isinstance(item, Mapping) and item.get(key) is not None]
    return ", ".join(ids) if ids else str(len(items))


def _commit_fields(commit: Any) -> Fields:
    """A commit's body (a ``pi-roleplay-commit``'s data, a turn's or a repair's ``commit``)."""
    if not isinstance(commit, Mapping):
        return [("commit", to_json(commit))]
    fields: Fields = []
    if commit.get("commitId") is not None:
        fields.append(("commit", str(commit["commitId"])))
    if "ops" in commit:
        fields.append(("ops", summarize_ops(commit["ops"])))
    if commit.get("reason"):
        fields.append(("reason", str(commit["reason"])))
    if commit.get("correctsCommitId") is not None:
        inferred = " (inferred)" if commit.get("correctsCommitIdInferred") else ""
        fields.append(("corrects", f"{commit['correctsCommitId']}{inferred}"))
    if commit.get("source") is not None:
        fields.append(("source", str(commit["source"])))
    for key in ("events", "memories"):
        if isinstance(commit.get(key), list) and commit[key]:
            fields.append((key, str(len(commit[key]))))
    if isinstance(commit.get("reviews"), list) and commit["reviews"]:
        fields.append(("reviews proposed", _ids(commit["reviews"], "reviewId")))
    return fields


# Marker of each roleplay entry kind in the tree (a commit's by its source).
ROLEPLAY_MARKERS = {
    "turn": "rp turn",
    "commit": "rp commit",
    "review-decision": "rp review",
    "review-amendment": "rp amendment",
    "checkpoint": "rp checkpoint",
    "turn-status": "rp turn status",
    "repair": "rp repair",
    "archive": "rp archive",
    "identity": "rp identity",
}
_COMMIT_MARKERS = {"manual-correction": "rp correction", "repair": "rp repair", "turn": "rp turn"}


def roleplay_marker(entry: Entry) -> str | None:
    """The tree marker of a structured roleplay entry, ``None`` for any other entry."""
    kind = roleplay_entry_kind(entry)
    if kind is None:
        return None
    if kind == "commit":
        data = entry.get("data")
        source = data.get("source") if isinstance(data, Mapping) else None
        return _COMMIT_MARKERS.get(source, "rp commit") if isinstance(source, str) else "rp commit"
    return ROLEPLAY_MARKERS[kind]


def roleplay_entry_fields(entry: Entry) -> Fields:
    """A structured roleplay entry (every ``pi-roleplay-*`` custom type and the
    ``roleplay_finalize_turn`` result) as fields: ids, an ops summary, the reason."""
    is_error = bool(message_of(entry).get("isError")) if entry.get("type") == "message" else False
    return payload_fields(roleplay_entry_kind(entry), roleplay_payload(entry), is_error=is_error)


def payload_fields(kind: RoleplayEntryKind | None, payload: Any, *, is_error: bool = False) -> Fields:
    """The fields of a roleplay entry of ``kind`` carrying ``payload`` (its
    ``data``, or a turn result's ``details``); a malformed payload as JSON."""
    try:
        return _payload_fields(kind, payload, is_error=is_error)
    except Exception:  # a malformed payload: show it as JSON rather than fail the page
        return [("data", to_json(payload))]


def _payload_fields(kind: RoleplayEntryKind | None, payload: Any, *, is_error: bool) -> Fields:
    if kind is None or not isinstance(payload, Mapping):
        return [("data", to_json(payload))]
    fields: Fields = []
    if kind == "turn":
        if payload.get("turnId") is not None:
            fields.append(("turn", str(payload["turnId"])))
        fields += _commit_fields(payload.get("commit"))
        if is_error:
            fields.append(("error", "the tool call failed: the reducer ignores this turn"))
    elif kind == "commit":
        fields += _commit_fields(payload)
    elif kind == "repair":
        fields.append(("turn", str(payload.get("turnId"))))
        fields += _commit_fields(payload.get("commit"))
    elif kind == "review-decision":
        fields += [("review", str(payload.get("reviewId"))), ("decision", str(payload.get("decision")))]
    elif kind == "review-amendment":
        fields += [("review", str(payload.get("reviewId"))), ("value", shorten(to_json(payload.get("value")), 80))]
    elif kind == "checkpoint":
        fields.append(("revision", str(payload.get("revision"))))
        fields.append(("state hash", str(payload.get("stateHash", ""))[:12]))
        reviews = payload.get("reviews")
        if isinstance(reviews, Mapping) and isinstance(reviews.get("pending"), list):
            fields.append(("pending reviews", str(len(reviews["pending"]))))
        if payload.get("trigger"):
            fields.append(("trigger", f"{payload['trigger']} {payload.get('compactionEntryId') or ''}".strip()))
        if payload.get("archived"):
            fields.append(("archived", "yes"))
    elif kind == "turn-status":
        fields += [("turn", str(payload.get("turnId"))), ("status", str(payload.get("status")))]
    if kind in ("turn-status", "archive") and payload.get("reason"):
        fields.append(("reason", str(payload["reason"])))
    if payload.get("characterId") is not None:  # last: the tree's preview is cut, the panel shows it all
        fields.append(("character", str(payload["characterId"])))
    return fields


def custom_entry_renderers() -> dict[str, CustomEntryRenderer]:
    """A renderer (data → fields) for each roleplay custom type."""
    return {custom_type: partial(payload_fields, kind) for custom_type, kind in KIND_BY_CUSTOM_TYPE.items()}


def turn_result_fields(entry: Entry) -> Fields | None:
    """A ``roleplay_finalize_turn`` result's details as fields; ``None`` for any other entry."""
    if entry.get("type") != "message" or roleplay_entry_kind(entry) != "turn":
        return None
    return roleplay_entry_fields(entry)
