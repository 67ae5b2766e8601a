"""How the admin shows one entry: a marker (what kind of line it is), a short
preview, and for custom entries readable fields instead of a Python repr.

Admin plug-ins (``plugins.py``) may give entries a marker and fields of their
own (the roleplay layer does for its structured entries: ``rp commit``, ``rp
correction``…); a plug-in's marker wins, and the preview is then the entry's
fields. Other custom entries are shown by the renderer registered for their
``customType`` (exact name, or a prefix ending in ``-`` or ``*``), else as
their data's fields in JSON:

    from sessiontree.admin.plugins import register_custom_entry_renderer

    register_custom_entry_renderer("my-extension-*", my_fields)

A renderer takes the entry's ``data`` (any JSON value) and returns a list of
``(name, text)`` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from sessiontree.core.types import Entry

from . import plugins
from .plugins import CustomEntryRenderer, Fields
from .plugins import register_custom_entry_renderer as register_custom_entry_renderer  # where it used to live

PREVIEW_CHARS = 140


def renderer_for(custom_type: Any) -> CustomEntryRenderer | None:
    return plugins.registry().custom_entry_renderer(custom_type)


def to_json(value: Any, *, pretty: bool = False) -> str:
    """JSON as Pi writes it (non-ASCII kept); never a Python repr."""
    option = orjson.OPT_INDENT_2 if pretty else 0
    try:
        return orjson.dumps(value, option=option).decode("utf-8")
    except TypeError:  # a value orjson refuses (huge int, non-string key): still JSON
        import json

        return json.dumps(value, indent=2 if pretty else None, ensure_ascii=False, default=str)


def shorten(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters: cut at the last word
    boundary before the limit (mid-word only when a single word is longer),
    with an ellipsis that says something was cut."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-\u2013\u2014") + "…"


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


def entry_fields(entry: Entry) -> Fields | None:
    """The fields the entry panel shows: a plug-in's for an entry it renders, a
    custom entry's data as fields, ``None`` for any other entry."""
    fields = plugins.registry().entry_fields(entry)
    if fields is not None:
        return fields
    return custom_fields(entry) if entry.get("type") == "custom" else None


def custom_fields(entry: Entry) -> Fields:
    """A custom entry's data (or an entry a plug-in renders) as readable fields."""
    fields = plugins.registry().entry_fields(entry)
    if fields is not None:
        return fields
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


BODY_MARKERS = {"compaction": "compaction", "branch_summary": "branch summary", "custom_message": "custom message"}


def body_marker(entry: Entry) -> str | None:
    """The marker of an entry whose body the admin renders (a message, a summary,
    a custom message), without computing a preview; ``None`` for the others."""
    entry_type = entry.get("type")
    if entry_type == "message":
        message = entry.get("message")
        return str(message.get("role", "?")) if isinstance(message, Mapping) else "?"
    return BODY_MARKERS.get(str(entry_type))


def describe_entry(entry: Entry) -> tuple[str, str]:
    """(marker, preview) for one entry: what kind of line it is and a short text."""
    marker = plugins.registry().marker(entry)
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
    if entry_type == "context_edit":
        replacement = entry.get("replacement")
        if not isinstance(replacement, dict):
            return "context edit", f"{entry.get('targetId')} left out of the model's context"
        return "context edit", shorten(
            f"{entry.get('targetId')} → the model gets: {content_text(replacement.get('content'))}"
        )
    extra = {key: value for key, value in entry.items() if key not in ("type", "id", "parentId", "timestamp")}
    return str(entry_type), shorten(to_json(extra))
