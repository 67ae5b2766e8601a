"""Erasing an entry's text in place, keeping the tree and Pi's format valid.

An erased entry keeps ``type``, ``id``, ``parentId`` and ``timestamp`` (so
every path, every child and every context built through it still works) and
a message keeps its ``role`` and the ids that pair it with others
(``toolCallId``, a tool call's ``id`` and ``name``). Every field that carries
text becomes the marker: a content list holds ``{"type": "text", "text":
"[erased]"}`` where the text, an image or an unknown block was; a content
string, a summary, a shell command or its output is ``"[erased]"``; a
thinking block's text is ``"[erased]"`` (its provider signature dropped); a
tool call's arguments, a tool result's ``details``, a custom entry's ``data``
and a summary's ``details`` become ``null``. Numbers and flags (usage, exit
codes) stay.

Pure functions: the providers write what this returns, the operations layer
decides what to erase (``sessiontree/services/moderation.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .types import Entry

ERASED = "[erased]"
ERASED_BLOCK: dict[str, str] = {"type": "text", "text": ERASED}

BASE_FIELDS = frozenset({"type", "id", "parentId", "timestamp"})
# Message fields that are neither text nor a secret: roles, ids pairing a
# result with its call, the model and its usage, flags.
_MESSAGE_KEPT = frozenset(
    {
        "role",
        "toolCallId",
        "toolName",
        "provider",
        "model",
        "api",
        "usage",
        "stopReason",
        "timestamp",
        "isError",
        "exitCode",
        "cancelled",
        "truncated",
        "excludeFromContext",
        "customType",
        "display",
        "fromId",
        "tokensBefore",
    }
)
_MESSAGE_TEXT = frozenset({"command", "output", "summary", "errorMessage", "fullOutputPath"})
_MESSAGE_OBJECTS = frozenset({"details"})


def _erase_block(block: Any) -> dict[str, Any]:
    if isinstance(block, Mapping):
        kind = block.get("type")
        if kind == "thinking":
            return {"type": "thinking", "thinking": ERASED}
        if kind == "toolCall":
            erased: dict[str, Any] = {"type": "toolCall"}
            for key in ("id", "name"):
                if key in block:
                    erased[key] = block[key]
            erased["arguments"] = None
            return erased
    return dict(ERASED_BLOCK)


def erase_content(content: Any) -> Any:
    """Content (a string or a list of blocks) with its text erased. Adjacent
    erased text blocks become one: how many there were says nothing useful."""
    if isinstance(content, str):
        return ERASED
    if not isinstance(content, list):
        return None
    erased: list[dict[str, Any]] = []
    for block in content:
        new = _erase_block(block)
        if new == ERASED_BLOCK and erased and erased[-1] == ERASED_BLOCK:
            continue
        erased.append(new)
    return erased or [dict(ERASED_BLOCK)]


def _erase_message(message: Mapping[str, Any]) -> dict[str, Any]:
    erased: dict[str, Any] = {}
    for key, value in message.items():
        if key == "content":
            erased[key] = erase_content(value)
        elif key in _MESSAGE_KEPT:
            erased[key] = copy.deepcopy(value)
        elif key in _MESSAGE_TEXT:
            erased[key] = ERASED if isinstance(value, str) else None
        elif key in _MESSAGE_OBJECTS:
            erased[key] = None
        else:
            erased[key] = _erase_unknown(value)
    return erased


def _erase_unknown(value: Any) -> Any:
    """A field erase knows nothing about: text goes, numbers and flags stay."""
    if isinstance(value, str):
        return ERASED
    if isinstance(value, bool | int | float) or value is None:
        return value
    return None


def erase_entry(entry: Entry) -> Entry:
    """A copy of ``entry`` with every text-bearing field erased (see the module docstring)."""
    kind = entry.get("type")
    erased: Entry = {}
    for key, value in entry.items():
        if key in BASE_FIELDS:
            erased[key] = value
        elif kind == "message" and key == "message" and isinstance(value, Mapping):
            erased[key] = _erase_message(value)
        elif kind == "custom_message" and key == "content":
            erased[key] = erase_content(value)
        elif kind == "custom_message" and key in ("customType", "display"):
            erased[key] = value
        elif kind in ("compaction", "branch_summary") and key == "summary":
            erased[key] = ERASED
        elif kind == "compaction" and key in ("firstKeptEntryId", "tokensBefore", "fromHook", "usage", "systemMessage"):
            # The system prompt in force is configuration, not conversation: kept.
            erased[key] = copy.deepcopy(value)
        elif (
            (kind == "branch_summary" and key in ("fromId", "fromHook"))
            or (kind == "custom" and key == "customType")
            or (kind == "context_edit" and key == "targetId")
        ):
            erased[key] = value
        elif kind == "context_edit" and key == "replacement":
            erased[key] = None if value is None else {"content": erase_content(value.get("content"))}
        elif kind in ("label", "session_info", "model_change", "thinking_level_change", "usage"):
            # Operator labels, session names and settings carry no conversation.
            erased[key] = copy.deepcopy(value)
        elif key in ("details", "data"):
            erased[key] = None
        else:
            erased[key] = _erase_unknown(value)
    return erased


def is_erased(entry: Entry) -> bool:
    """Whether erasing ``entry`` again would change nothing."""
    return erase_entry(entry) == entry
