"""What the LLM sees: Pi's ``buildSessionContext`` semantics, plus the ids of
the entries each message came from.

Walk the active path (root → leaf). The latest ``thinking_level_change`` and
``model_change`` — or an assistant message's provider/model — give the
settings. With a compaction on the path, its summary comes first, then the
entries from ``firstKeptEntryId`` up to the compaction, then everything after
it. ``message``, ``custom_message`` and ``branch_summary`` entries become
messages; labels, session info, custom entries and settings never do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from .errors import EntryNotFound
from .path import build_entry_index, path_entries
from .types import Entry, ModelRef, SessionContext


class _Unset:
    """Marker for "argument omitted" where ``None`` has a meaning of its own."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()

DEFAULT_THINKING_LEVEL = "off"


def iso_to_epoch_ms(timestamp: Any) -> int | None:
    """``"2026-04-19T00:00:01.000Z"`` → epoch milliseconds (``None`` when unparsable, as JS gives NaN)."""
    if not isinstance(timestamp, str):
        return None
    try:
        parsed = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        # JavaScript's Date reads a zone-less date-time as local time; our
        # servers run in UTC, so UTC is the faithful reading.
        parsed = parsed.replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)


def compaction_summary_message(entry: Entry) -> dict[str, Any]:
    return {
        "role": "compactionSummary",
        "summary": entry.get("summary"),
        "tokensBefore": entry.get("tokensBefore"),
        "timestamp": iso_to_epoch_ms(entry.get("timestamp")),
    }


def branch_summary_message(entry: Entry) -> dict[str, Any]:
    return {
        "role": "branchSummary",
        "summary": entry.get("summary"),
        "fromId": entry.get("fromId"),
        "timestamp": iso_to_epoch_ms(entry.get("timestamp")),
    }


def custom_message(entry: Entry) -> dict[str, Any]:
    return {
        "role": "custom",
        "customType": entry.get("customType"),
        "content": entry.get("content"),
        "display": entry.get("display"),
        "details": entry.get("details"),
        "timestamp": iso_to_epoch_ms(entry.get("timestamp")),
    }


def entry_to_message(entry: Entry) -> dict[str, Any] | None:
    """The context message an entry contributes, or ``None``."""
    entry_type = entry.get("type")
    if entry_type == "message":
        return entry.get("message")
    if entry_type == "custom_message":
        return custom_message(entry)
    if entry_type == "branch_summary" and entry.get("summary"):
        return branch_summary_message(entry)
    return None


def walk_to_root(leaf: Entry, by_id: Mapping[str, Entry]) -> list[Entry]:
    """Root-first path from ``leaf``, tolerant as Pi is (``path.walk_path``):
    an entry whose parent is missing acts as a root; a cycle is an error."""
    return path_entries(leaf["id"], by_id)


def empty_context() -> SessionContext:
    return {"messages": [], "thinking_level": DEFAULT_THINKING_LEVEL, "model": None, "source_entry_ids": []}


def build_session_context(
    entries: Sequence[Entry],
    leaf_id: str | None | _Unset = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> SessionContext:
    """Build the LLM context for the path ending at ``leaf_id``.

    ``leaf_id`` omitted → the last entry; ``None`` → an empty context (the
    leaf was reset before the first entry). Unlike Pi, an explicit leaf id that
    does not exist raises ``EntryNotFound`` instead of silently using the last
    entry: a caller asking for a specific position must not get another one.
    """
    if leaf_id is None:
        return empty_context()
    if by_id is None:
        by_id = build_entry_index(entries)
    if isinstance(leaf_id, _Unset):
        if not entries:
            return empty_context()
        leaf = entries[-1]
    else:
        found = by_id.get(leaf_id)
        if found is None:
            raise EntryNotFound(f"Entry {leaf_id} not found")
        leaf = found
    return build_context_from_path(walk_to_root(leaf, by_id))


def build_context_from_path(path: Sequence[Entry]) -> SessionContext:
    """Context for an already resolved root-first path (providers that load
    only the path's payloads call this directly)."""
    thinking_level = DEFAULT_THINKING_LEVEL
    model: ModelRef | None = None
    compaction_index: int | None = None
    for index, entry in enumerate(path):
        entry_type = entry.get("type")
        if entry_type == "thinking_level_change":
            thinking_level = entry.get("thinkingLevel", thinking_level)
        elif entry_type == "model_change":
            model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}  # type: ignore[assignment]
        elif entry_type == "message":
            message = entry.get("message") or {}
            if message.get("role") == "assistant":
                model = {"provider": message.get("provider"), "modelId": message.get("model")}  # type: ignore[assignment]
        elif entry_type == "compaction":
            compaction_index = index

    messages: list[dict[str, Any]] = []
    source_entry_ids: list[str] = []

    def emit(entry: Entry) -> None:
        message = entry_to_message(entry)
        if message is not None:
            messages.append(message)
            source_entry_ids.append(entry["id"])

    if compaction_index is None:
        for entry in path:
            emit(entry)
    else:
        compaction = path[compaction_index]
        messages.append(compaction_summary_message(compaction))
        source_entry_ids.append(compaction["id"])
        first_kept_id = compaction.get("firstKeptEntryId")
        kept = False
        for entry in path[:compaction_index]:
            if entry["id"] == first_kept_id:
                kept = True
            if kept:
                emit(entry)
        for entry in path[compaction_index + 1 :]:
            emit(entry)

    return {
        "messages": messages,
        "thinking_level": thinking_level,
        "model": model,
        "source_entry_ids": source_entry_ids,
    }
