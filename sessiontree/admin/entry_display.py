"""How the admin shows one entry: a marker (what kind of line it is), a short
preview, and for custom entries readable fields instead of a Python repr.

Custom entries are shown by the renderer registered for their ``customType``
(exact name, or a prefix ending in ``-`` or ``*``); the rest as compact JSON.
The roleplay layer's ``pi-roleplay-*`` entries have one here (commit id,
ops summary, reason, …); another module can register a richer one:

    from sessiontree.admin.entry_display import register_custom_entry_renderer

    register_custom_entry_renderer("pi-roleplay-commit", my_commit_fields)

A renderer takes the entry's ``data`` (any JSON value) and returns a list of
``(name, text)`` fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

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


def custom_fields(entry: Mapping[str, Any]) -> Fields:
    """A custom entry's data as readable fields."""
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


_ROLEPLAY_KEYS = (
    ("commitId", "commit"),
    ("characterId", "character"),
    ("source", "source"),
    ("reviewId", "review"),
    ("decision", "decision"),
    ("turnId", "turn"),
    ("status", "status"),
    ("revision", "revision"),
    ("stateHash", "state hash"),
    ("correctsCommitId", "corrects"),
)


def roleplay_fields(data: Any) -> Fields:
    """A ``pi-roleplay-*`` entry's data: ids, an ops summary and the reason first."""
    if not isinstance(data, Mapping):
        return [("data", to_json(data))]
    fields: Fields = [(name, str(data[key])) for key, name in _ROLEPLAY_KEYS if data.get(key) is not None]
    if "ops" in data:
        fields.append(("ops", summarize_ops(data["ops"])))
    if "value" in data:
        fields.append(("value", shorten(to_json(data["value"]), 80)))
    if data.get("reason"):
        fields.append(("reason", str(data["reason"])))
    for key in ("events", "memories", "reviews"):
        if isinstance(data.get(key), list) and data[key]:
            fields.append((key, str(len(data[key]))))
    return fields


register_custom_entry_renderer("pi-roleplay-*", roleplay_fields)
