"""How the admin shows one entry: a marker (what kind of line it is), a short
preview, and for custom entries readable fields instead of a Python repr.

Structured roleplay entries (every ``pi-roleplay-*`` custom type and the
``roleplay_finalize_turn`` tool result) get a marker of their own (``rp
commit``, ``rp correction``, ``rp review``…) and fields: ids, an ops summary,
the reason (``roleplay_entry_fields``). Other custom entries are shown by the
renderer registered for their ``customType`` (exact name, or a prefix ending
in ``-`` or ``*``), else as their data's fields in JSON:

    from sessiontree.admin.entry_display import register_custom_entry_renderer

    register_custom_entry_renderer("my-extension-*", my_fields)

A renderer takes the entry's ``data`` (any JSON value) and returns a list of
``(name, text)`` fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from roleplay.schema import roleplay_entry_kind, roleplay_payload
from sessiontree.core.entries import message_of
from sessiontree.core.types import Entry

PREVIEW_CHARS = 140

Fields = list[tuple[str, str]]
CustomEntryRenderer = Callable[[Any], Fields]

_renderers: dict[str, CustomEntryRenderer] = {}


def register_custom_entry_renderer(custom_type: str, renderer: CustomEntryRenderer) -> None:
    """Show custom entries of ``custom_type`` (or of a prefix: ``"pi-roleplay-*"``) with ``renderer``."""
    _renderers[custom_type.rstrip("*")] = renderer


def renderer_for(custom_type: Any) -> CustomEntryRenderer | None:
    if not isinstance(custom_type, str):
        return None
    if custom_type in _renderers:
        return _renderers[custom_type]
    prefixes = [key for key in _renderers if key.endswith("-") and custom_type.startswith(key)]
    return _renderers[max(prefixes, key=len)] if prefixes else None


def to_json(value: Any, *, pretty: bool = False) -> str:
    """JSON as Pi writes it (non-ASCII kept); never a Python repr."""
    option = orjson.OPT_INDENT_2 if pretty else 0
    try:
        return orjson.dumps(value, option=option).decode("utf-8")
    except TypeError:  # a value orjson refuses (huge int, non-string key): still JSON
        import json

        return json.dumps(value, indent=2 if pretty else None, ensure_ascii=False, default=str)


def shorten(text: str, limit: int = PREVIEW_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def content_text(content: Any) -> str:
    """The readable text of a message's content: text blocks, tool calls, images."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind == "thinking":
                parts.append(f"(thinking) {block.get('thinking', '')}")
            elif kind == "toolCall":
                parts.append(f"→ {block.get('name', '?')}({shorten(to_json(block.get('arguments', {})), 60)})")
            elif kind == "image":
                parts.append("[image]")
    return " ".join(parts)


def message_text(message: Mapping[str, Any]) -> str:
    """One context message (or an entry's message) as readable text."""
    role = message.get("role")
    if role == "toolResult":
        return f"{message.get('toolName', '?')}: {content_text(message.get('content'))}"
    if role == "bashExecution":
        return f"$ {message.get('command', '')}\n{message.get('output', '')}"
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary") or "")
    return content_text(message.get("content"))


def custom_fields(entry: Entry) -> Fields:
    """A custom entry's data (or a roleplay turn result's details) as readable fields."""
    if roleplay_entry_kind(entry) is not None:
        try:
            return roleplay_entry_fields(entry)
        except Exception:  # a malformed payload: show it as JSON rather than fail the page
            return [("data", to_json(roleplay_payload(entry)))]
    data = entry.get("data")
    renderer = renderer_for(entry.get("customType"))
    if renderer is not None:
        try:
            return renderer(data)
        except Exception:  # a malformed payload: show it as JSON rather than fail the page
            pass
    if isinstance(data, Mapping):
        return [(str(key), value if isinstance(value, str) else to_json(value)) for key, value in data.items()]
    return [("data", to_json(data))] if data is not None else []


def fields_text(fields: Fields) -> str:
    return " · ".join(f"{name}: {value}" if name else value for name, value in fields)


def describe_entry(entry: Entry) -> tuple[str, str]:
    """(marker, preview) for one entry: what kind of line it is and a short text."""
    marker = roleplay_marker(entry)
    if marker is not None:
        return marker, shorten(fields_text(custom_fields(entry)))
    entry_type = entry.get("type")
    if entry_type == "message":
        message = entry.get("message") or {}
        role = str(message.get("role", "?"))
        return role, shorten(message_text(message))
    if entry_type == "compaction":
        return "compaction", shorten(
            f"keeps from {entry.get('firstKeptEntryId')}, {entry.get('tokensBefore')} tokens before: "
            f"{entry.get('summary', '')}"
        )
    if entry_type == "branch_summary":
        return "branch summary", shorten(f"from {entry.get('fromId')}: {entry.get('summary', '')}")
    if entry_type == "model_change":
        return "model", f"{entry.get('provider')}/{entry.get('modelId')}"
    if entry_type == "thinking_level_change":
        return "thinking", str(entry.get("thinkingLevel"))
    if entry_type == "label":
        text = entry.get("label")
        return "label", f'{entry.get("targetId")} ← "{text}"' if text else f"{entry.get('targetId')} (cleared)"
    if entry_type == "session_info":
        return "session name", shorten(str(entry.get("name") or ""))
    if entry_type == "custom":
        return "custom", shorten(f"{entry.get('customType')} · {fields_text(custom_fields(entry))}")
    if entry_type == "custom_message":
        return "custom message", shorten(f"{entry.get('customType')}: {content_text(entry.get('content'))}")
    extra = {key: value for key, value in entry.items() if key not in ("type", "id", "parentId", "timestamp")}
    return str(entry_type), shorten(to_json(extra))


# --- roleplay custom entries -----------------------------------------------------------------


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
    kind = roleplay_entry_kind(entry)
    payload = roleplay_payload(entry)
    if kind is None or not isinstance(payload, Mapping):
        return [("data", to_json(payload))]
    fields: Fields = []
    if kind == "turn":
        if payload.get("turnId") is not None:
            fields.append(("turn", str(payload["turnId"])))
        fields += _commit_fields(payload.get("commit"))
        if message_of(entry).get("isError"):
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
