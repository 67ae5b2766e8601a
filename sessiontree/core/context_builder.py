"""What the LLM sees: Pi's ``buildSessionContext`` semantics (Pi 1.6), plus
the ids of the entries each message came from.

Walk the active path (root → leaf). The latest ``thinking_level_change`` and
``model_change`` — or an assistant message's provider/model — give the
settings. With a compaction on the path, the latest one speaks first (its
``systemMessage`` checkpoint, if any, then its summary), then the non-system
entries from ``firstKeptEntryId`` up to it, then everything after it.
``message``, ``custom_message`` and ``branch_summary`` entries become
messages; labels, session info, usage, custom entries and settings never do.
A ``context_edit`` replaces or omits the content of an earlier message in the
context; the stored entry stays as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from .errors import BadInput, EntryNotFound
from .path import build_entry_index, path_entries
from .types import UNSET, Entry, ModelRef, SessionContext, Unset

# ``UNSET`` and ``Unset`` live in ``core.types``; imported here for the callers of old.

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


# JavaScript drops ``undefined`` object values when it writes JSON; a message
# built from an entry must leave out the keys the entry does not have, or our
# context would show ``null`` where Pi shows nothing.
_ABSENT: Final = object()


def _present(entry: Entry, key: str) -> Any:
    return entry.get(key, _ABSENT)


def _message(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not _ABSENT}


def compaction_summary_message(entry: Entry) -> dict[str, Any]:
    return _message(
        role="compactionSummary",
        summary=_present(entry, "summary"),
        tokensBefore=_present(entry, "tokensBefore"),
        timestamp=iso_to_epoch_ms(entry.get("timestamp")),
    )


def branch_summary_message(entry: Entry) -> dict[str, Any]:
    return _message(
        role="branchSummary",
        summary=_present(entry, "summary"),
        fromId=_present(entry, "fromId"),
        timestamp=iso_to_epoch_ms(entry.get("timestamp")),
    )


def custom_message(entry: Entry) -> dict[str, Any]:
    """A ``custom_message`` entry as a message; no content at all becomes ``[]`` (Pi 1.x)."""
    content = entry.get("content")
    return _message(
        role="custom",
        customType=_present(entry, "customType"),
        content=[] if content is None else content,
        display=_present(entry, "display"),
        details=_present(entry, "details"),
        timestamp=iso_to_epoch_ms(entry.get("timestamp")),
    )


# Roles whose ``content`` Pi fills in when a stored message has none (null or
# missing): hand-edited files, old versions and forks can hold such messages.
_BLOCK_CONTENT_ROLES = frozenset({"user", "assistant", "toolResult"})
# Roles a ``context_edit`` replacement changes the content of.
EDITABLE_ROLES = frozenset({"user", "assistant", "toolResult", "custom"})


def entry_context_messages(entry: Entry) -> list[dict[str, Any]]:
    """The messages one entry contributes to a context (Pi's
    ``sessionEntryToContextMessages``): a message (null content filled in), a
    custom message, a branch summary with text, a compaction (its system
    checkpoint, if it has one, then its summary). Everything else: none."""
    entry_type = entry.get("type")
    if entry_type == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return []
        if message.get("content") is None:
            role = message.get("role")
            if role == "system":
                return [{**message, "content": ""}]
            if role in _BLOCK_CONTENT_ROLES:
                return [{**message, "content": []}]
        return [message]
    if entry_type == "custom_message":
        return [custom_message(entry)]
    if entry_type == "branch_summary" and entry.get("summary"):
        return [branch_summary_message(entry)]
    if entry_type == "compaction":
        summary = compaction_summary_message(entry)
        system_message = entry.get("systemMessage")
        return [system_message, summary] if system_message else [summary]
    return []


def entry_to_message(entry: Entry) -> dict[str, Any] | None:
    """The conversation message an entry contributes, or ``None`` (a
    compaction's summary is not one: only the latest compaction on a path
    speaks, through ``build_context_from_path``)."""
    if entry.get("type") == "compaction":
        return None
    messages = entry_context_messages(entry)
    return messages[0] if messages else None


def apply_context_edit(messages: list[dict[str, Any]], edit: Entry | None) -> list[dict[str, Any]]:
    """``messages`` of one entry with its latest ``context_edit`` applied:
    ``replacement: null`` omits them, otherwise the content of user,
    assistant, tool-result and custom messages is replaced (a string given for
    an assistant or tool result becomes one text block)."""
    if edit is None:
        return messages
    replacement = edit.get("replacement")
    if replacement is None:
        return []
    new_content = replacement.get("content") if isinstance(replacement, dict) else None
    edited: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role not in EDITABLE_ROLES:
            edited.append(message)
            continue
        content = new_content
        if role in ("assistant", "toolResult") and isinstance(content, str):
            content = [{"type": "text", "text": content}]
        edited.append({**message, "content": content})
    return edited


def _role(entry: Entry) -> Any:
    """A message entry's role (``None`` when its message is not an object)."""
    message = entry.get("message")
    return message.get("role") if isinstance(message, dict) else None


def select_context_entries(path: Sequence[Entry]) -> list[Entry]:
    """The entries a context is made of (Pi's ``buildContextEntries``): the
    whole path, or with a compaction on it, the latest compaction first, then
    the non-system entries from its ``firstKeptEntryId`` up to it, then every
    entry after it. A ``firstKeptEntryId`` that names no earlier entry (null,
    or the compaction's own id: a retain-none compaction) keeps nothing."""
    compaction_index = None
    for index in range(len(path) - 1, -1, -1):
        if path[index].get("type") == "compaction":
            compaction_index = index
            break
    if compaction_index is None:
        return list(path)
    compaction = path[compaction_index]
    first_kept_id = compaction.get("firstKeptEntryId")
    selected = [compaction]
    kept = False
    for entry in path[:compaction_index]:
        if entry["id"] == first_kept_id:
            kept = True
        if kept and not (entry.get("type") == "message" and _role(entry) == "system"):
            selected.append(entry)
    selected.extend(path[compaction_index + 1 :])
    return selected


ProjectedEntry = tuple[Entry, list[dict[str, Any]]]


def project_path(path: Sequence[Entry]) -> list[ProjectedEntry]:
    """Each selected entry with the messages it puts in the context (Pi's
    ``buildSessionProjection``): the latest ``context_edit`` per target among
    the selected entries applies; an older compaction that lies in the kept
    range contributes nothing, only the latest one (first) speaks."""
    selected = select_context_entries(path)
    edits: dict[Any, Entry] = {}
    for entry in selected:
        if entry.get("type") == "context_edit":
            edits[entry.get("targetId")] = entry
    projected: list[ProjectedEntry] = []
    for index, entry in enumerate(selected):
        if entry.get("type") == "compaction" and index > 0:
            projected.append((entry, []))
        else:
            projected.append((entry, apply_context_edit(entry_context_messages(entry), edits.get(entry["id"]))))
    return projected


def walk_to_root(leaf: Entry, by_id: Mapping[str, Entry]) -> list[Entry]:
    """Root-first path from ``leaf``, tolerant as Pi is (``path.walk_path``):
    an entry whose parent is missing acts as a root; a cycle is an error."""
    return path_entries(leaf["id"], by_id)


def empty_context() -> SessionContext:
    return {"messages": [], "thinking_level": DEFAULT_THINKING_LEVEL, "model": None, "source_entry_ids": []}


def build_session_context(
    entries: Sequence[Entry],
    leaf_id: str | None | Unset = UNSET,
    by_id: Mapping[str, Entry] | None = None,
    *,
    leaf_entry_id: str | None | Unset = UNSET,
) -> SessionContext:
    """Build the LLM context for the path ending at the leaf.

    The leaf is ``leaf_entry_id`` (the name every other call uses) or
    ``leaf_id`` (this function's name in the Python API contract; positional
    or keyword); giving both with different values is ``BadInput``. Omitted →
    the last entry; ``None`` → an empty context (the leaf was reset before the
    first entry). Unlike Pi, an explicit leaf id that does not exist raises
    ``EntryNotFound`` instead of silently using the last entry: a caller asking
    for a specific position must not get another one.
    """
    if not isinstance(leaf_entry_id, Unset):
        if not isinstance(leaf_id, Unset) and leaf_id != leaf_entry_id:
            raise BadInput(f"leaf_id {leaf_id!r} and leaf_entry_id {leaf_entry_id!r} name different leaves")
        leaf_id = leaf_entry_id
    if leaf_id is None:
        return empty_context()
    if by_id is None:
        by_id = build_entry_index(entries)
    if isinstance(leaf_id, Unset):
        if not entries:
            return empty_context()
        leaf = entries[-1]
    else:
        found = by_id.get(leaf_id)
        if found is None:
            raise EntryNotFound(f"Entry {leaf_id} not found")
        leaf = found
    return build_context_from_path(walk_to_root(leaf, by_id))


def context_settings(path: Sequence[Entry]) -> tuple[str, ModelRef | None]:
    """Thinking level and model at the end of ``path``: the latest
    ``thinking_level_change`` that names a level, and the latest
    ``model_change`` or assistant message (its provider and model). Read
    from the end, so a long path is seldom read in full."""
    thinking_level: Any = _ABSENT
    model: Any = _ABSENT
    for index in range(len(path) - 1, -1, -1):
        entry = path[index]
        entry_type = entry.get("type")
        if entry_type == "message":
            if model is _ABSENT:
                message = entry.get("message")
                if isinstance(message, dict) and message.get("role") == "assistant":
                    model = {"provider": message.get("provider"), "modelId": message.get("model")}
                    if thinking_level is not _ABSENT:
                        break
        elif entry_type == "thinking_level_change":
            if thinking_level is _ABSENT and "thinkingLevel" in entry:
                thinking_level = entry["thinkingLevel"]
                if model is not _ABSENT:
                    break
        elif entry_type == "model_change" and model is _ABSENT:
            model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
            if thinking_level is not _ABSENT:
                break
    return (
        DEFAULT_THINKING_LEVEL if thinking_level is _ABSENT else thinking_level,
        None if model is _ABSENT else model,
    )


def build_context_from_path(path: Sequence[Entry]) -> SessionContext:
    """Context for an already resolved root-first path (providers that load
    only the path's payloads call this directly).

    What ``project_path`` projects, in one pass over the selected entries: a
    message entry's message is taken as it is (no copy), other entries go
    through ``entry_context_messages``, and a path with a ``context_edit``
    among the selected entries is projected by ``project_path`` itself."""
    thinking_level, model = context_settings(path)
    selected: Sequence[Entry] = path
    for index in range(len(path) - 1, -1, -1):
        if path[index].get("type") == "compaction":
            selected = select_context_entries(path)
            break
    messages: list[dict[str, Any]] = []
    source_entry_ids: list[str] = []
    add_message = messages.append
    add_source = source_entry_ids.append
    for index, entry in enumerate(selected):
        entry_type = entry.get("type")
        if entry_type == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("content") is not None:
                add_message(message)
                add_source(entry["id"])
                continue
        elif entry_type == "context_edit":
            messages, source_entry_ids = _projected_messages(path)
            break
        elif entry_type == "compaction" and index > 0:
            continue  # an older compaction in the kept range: only the latest speaks
        for entry_message in entry_context_messages(entry):
            add_message(entry_message)
            add_source(entry["id"])
    return {
        "messages": messages,
        "thinking_level": thinking_level,
        "model": model,
        "source_entry_ids": source_entry_ids,
    }


def _projected_messages(path: Sequence[Entry]) -> tuple[list[dict[str, Any]], list[str]]:
    messages: list[dict[str, Any]] = []
    source_entry_ids: list[str] = []
    for entry, entry_messages in project_path(path):
        for message in entry_messages:
            messages.append(message)
            source_entry_ids.append(entry["id"])
    return messages, source_entry_ids
