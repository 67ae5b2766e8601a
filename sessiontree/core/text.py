"""The text an entry holds, as moderation reads it: what search indexes,
what classifiers scan, and what an erase must leave nothing of.

Pure functions over Pi's entry dicts. ``entry_text`` is the words a person
or a model wrote or read: message content (text, thinking, tool-call names
and arguments, tool results, shell commands and their output), custom
messages, compaction and branch summaries, and the content of context edits
(a hide notice, or an original text restored by an unhide). Ids, types,
times, model names and usage numbers are not text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .compaction import js_json_stringify
from .types import Entry


def _content_pieces(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            yield block["text"]
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            yield block["thinking"]
        elif kind == "toolCall":
            if isinstance(block.get("name"), str):
                yield block["name"]
            arguments = block.get("arguments")
            if arguments not in (None, {}, ""):
                yield arguments if isinstance(arguments, str) else js_json_stringify(arguments)


def message_pieces(message: Mapping[str, Any]) -> Iterator[str]:
    """The text of one agent message, piece by piece."""
    role = message.get("role")
    if role == "bashExecution":
        for key in ("command", "output"):
            if isinstance(message.get(key), str):
                yield message[key]
        return
    if role in ("branchSummary", "compactionSummary") and isinstance(message.get("summary"), str):
        yield message["summary"]
    yield from _content_pieces(message.get("content"))
    if isinstance(message.get("errorMessage"), str):
        yield message["errorMessage"]


def entry_pieces(entry: Mapping[str, Any]) -> Iterator[str]:
    """The text of ``entry``, piece by piece (empty pieces left out)."""
    kind = entry.get("type")
    pieces: Iterator[str]
    if kind == "message" and isinstance(entry.get("message"), Mapping):
        pieces = message_pieces(entry["message"])
    elif kind == "custom_message":
        pieces = _content_pieces(entry.get("content"))
    elif kind in ("compaction", "branch_summary"):
        pieces = iter([entry["summary"]] if isinstance(entry.get("summary"), str) else [])
    elif kind == "context_edit" and isinstance(entry.get("replacement"), Mapping):
        pieces = _content_pieces(entry["replacement"].get("content"))
    else:
        pieces = iter(())
    return (piece for piece in pieces if piece)


# Roles whose message holds text beside or instead of its content.
_ROLES_BEYOND_CONTENT = frozenset(["bashExecution", "branchSummary", "compactionSummary"])


def entry_text(entry: Entry) -> str:
    """The text of ``entry`` as one string (pieces on their own lines); ``""`` when it holds none."""
    if entry.get("type") == "message":
        # The commonest entry (a message whose content is one string, no
        # error) without the pieces' generators: every append builds its
        # search row from this. The same text as the general way below.
        message = entry.get("message")
        if isinstance(message, Mapping) and "errorMessage" not in message:
            content = message.get("content")
            if isinstance(content, str) and message.get("role") not in _ROLES_BEYOND_CONTENT:
                return content
    return "\n".join(entry_pieces(entry))


def entry_role(entry: Mapping[str, Any]) -> str | None:
    """A message entry's role (``None`` for every other entry)."""
    message = entry.get("message") if entry.get("type") == "message" else None
    role = message.get("role") if isinstance(message, Mapping) else None
    return role if isinstance(role, str) else None
