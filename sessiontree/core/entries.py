"""Building and validating entries before they are appended.

Both providers run every append through ``prepare_new_entry`` so that the same
input is accepted or refused the same way, with the same message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .context_builder import iso_to_epoch_ms
from .errors import EntryNotFound, EntryTooLarge, InvalidEntry, InvalidTree, ParentNotLeaf
from .ids import new_entry_id
from .path import find_cycles
from .pi_session_file import now_iso
from .types import ENTRY_TYPES, Entry

MAX_ENTRY_ID_LENGTH = 64
# Limits every provider applies before a write (settings SESSIONTREE_MAX_ENTRY_BYTES
# and SESSIONTREE_MAX_ENTRY_DEPTH override them). The defaults are what MariaDB
# stores with its own defaults: a 16 MiB packet holds a 6 MiB line even when
# escaping doubles it, and a JSON column nests at most 32 levels, which the
# ``mysql`` provider's ``extra`` column reaches at entry depth 31.
DEFAULT_MAX_ENTRY_BYTES = 6 * 1024 * 1024
DEFAULT_MAX_ENTRY_DEPTH = 30
# Fields an in-flight patch may never change: they place the entry in the tree.
FROZEN_FIELDS = frozenset({"id", "parentId", "type"})


def message_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A ``message`` entry's agent message, or ``{}``: a hand-edited file may
    hold anything there (a string, a list), which readers must survive."""
    message = entry.get("message")
    return message if isinstance(message, dict) else {}


# How much of the first user message a session's meta row keeps, for lists
# of untitled sessions (``first_message_preview``).
PREVIEW_LENGTH = 120
_SPACES = re.compile(r"\s+")


def first_message_preview(entries: Iterable[Mapping[str, Any]]) -> str | None:
    """A short preview of the first user message among ``entries`` (append
    order): its text blocks joined, whitespace collapsed, cut to
    ``PREVIEW_LENGTH`` characters; ``""`` for a user message without text
    (an image); ``None`` when there is no user message.

    The only source of a meta row's ``first_message_preview``, whichever
    storage or operation writes it (so whatever later erases message text
    knows where that copy comes from)."""
    for entry in entries:
        if entry.get("type") != "message":
            continue
        message = message_of(entry)
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = " ".join(
                block["text"]
                for block in content
                if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
            )
        else:
            text = ""
        text = _SPACES.sub(" ", text).strip()
        return text if len(text) <= PREVIEW_LENGTH else text[: PREVIEW_LENGTH - 1].rstrip() + "…"
    return None


def _require_str(entry: Entry, key: str, *, allow_empty: bool = True) -> None:
    value = entry.get(key)
    if not isinstance(value, str) or (not allow_empty and not value):
        raise InvalidEntry(f"{entry.get('type')} entry needs a {'non-empty ' if not allow_empty else ''}string '{key}'")


def validate_entry_shape(entry: Any, by_id: Mapping[str, Entry]) -> None:
    """Raise ``InvalidEntry`` unless ``entry`` is a well-formed entry of one of Pi's eleven types.

    ``by_id`` is the session's current index: referenced entries (a label's
    target, a compaction's first kept entry) must exist in it.
    """
    if not isinstance(entry, dict):
        raise InvalidEntry(f"An entry must be a JSON object, not {type(entry).__name__}")
    entry_type = entry.get("type")
    if entry_type not in ENTRY_TYPES:
        raise InvalidEntry(f"Unknown entry type {entry_type!r}; expected one of {', '.join(sorted(ENTRY_TYPES))}")
    if "timestamp" in entry and not isinstance(entry["timestamp"], str):
        raise InvalidEntry("timestamp must be an ISO-8601 string")
    if entry_type == "message":
        message = entry.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or not message["role"]:
            raise InvalidEntry("message entry needs a 'message' object with a string 'role'")
    elif entry_type == "thinking_level_change":
        _require_str(entry, "thinkingLevel", allow_empty=False)
    elif entry_type == "model_change":
        _require_str(entry, "provider", allow_empty=False)
        _require_str(entry, "modelId", allow_empty=False)
    elif entry_type == "compaction":
        _require_str(entry, "summary")
        if "firstKeptEntryId" not in entry:
            raise InvalidEntry("compaction entry needs 'firstKeptEntryId' (an entry id, or null to keep none)")
        first_kept = entry["firstKeptEntryId"]
        if first_kept is not None:
            # null, or the compaction's own id: a retain-none compaction.
            _require_str(entry, "firstKeptEntryId", allow_empty=False)
        tokens = entry.get("tokensBefore")
        # JSON (and JavaScript, Pi's language) has one number type: 5.0 is
        # the integer 5, as JSON Schema's "integer" says too.
        if (
            isinstance(tokens, bool)
            or not isinstance(tokens, int | float)
            or (isinstance(tokens, float) and not tokens.is_integer())
            or tokens < 0
        ):
            raise InvalidEntry("compaction entry needs a non-negative integer 'tokensBefore'")
        system_message = entry.get("systemMessage")
        if system_message is not None and (
            not isinstance(system_message, dict) or system_message.get("role") != "system"
        ):
            raise InvalidEntry("compaction systemMessage must be a message object with role 'system'")
        if entry.get("usage") is not None and not isinstance(entry.get("usage"), dict):
            raise InvalidEntry("compaction usage must be an object")
        if first_kept is not None and first_kept != entry.get("id") and first_kept not in by_id:
            raise EntryNotFound(f"Entry {first_kept} not found (compaction firstKeptEntryId)")
    elif entry_type == "branch_summary":
        _require_str(entry, "summary")
        _require_str(entry, "fromId", allow_empty=False)
    elif entry_type == "custom":
        _require_str(entry, "customType", allow_empty=False)
    elif entry_type == "custom_message":
        _require_str(entry, "customType", allow_empty=False)
        if not isinstance(entry.get("content"), str | list):
            raise InvalidEntry("custom_message entry needs 'content' (a string or a list of content blocks)")
        if not isinstance(entry.get("display"), bool):
            raise InvalidEntry("custom_message entry needs a boolean 'display'")
    elif entry_type == "label":
        _require_str(entry, "targetId", allow_empty=False)
        if entry["targetId"] not in by_id:
            raise EntryNotFound(f"Entry {entry['targetId']} not found (label target)")
        if entry.get("label") is not None and not isinstance(entry.get("label"), str):
            raise InvalidEntry("label must be a string, or null to clear")
    elif entry_type == "session_info" and entry.get("name") is not None and not isinstance(entry.get("name"), str):
        raise InvalidEntry("session_info name must be a string")
    elif entry_type == "context_edit":
        _require_str(entry, "targetId", allow_empty=False)
        if "replacement" not in entry:
            raise InvalidEntry("context_edit entry needs 'replacement': null to omit the target, or {'content': …}")
        replacement = entry["replacement"]
        if replacement is not None and (
            not isinstance(replacement, dict) or not isinstance(replacement.get("content"), str | list)
        ):
            raise InvalidEntry("context_edit replacement must be null or an object with string or list 'content'")
        if entry["targetId"] not in by_id:
            raise EntryNotFound(f"Entry {entry['targetId']} not found (context_edit target)")
    elif entry_type == "usage":
        for key in ("kind", "provider", "model"):
            _require_str(entry, key)
        if not isinstance(entry.get("usage"), dict):
            raise InvalidEntry("usage entry needs a 'usage' object")


def prepare_new_entry(entry: Any, *, leaf_entry_id: str | None, by_id: Mapping[str, Entry]) -> Entry:
    """A validated copy of ``entry`` ready to store as a child of ``leaf_entry_id``.

    ``id`` is kept if given (and must be new), else generated; ``parentId`` is
    always the leaf (a different one is refused: move the leaf first);
    ``timestamp`` is kept if given, else now. Key order: Pi's base fields
    first, then the rest as given.
    """
    validate_entry_shape(entry, by_id)
    entry_id = entry.get("id")
    if entry_id is None:
        entry_id = new_entry_id(by_id)
    elif not isinstance(entry_id, str) or not entry_id or len(entry_id) > MAX_ENTRY_ID_LENGTH:
        raise InvalidEntry(f"Entry id must be a non-empty string of at most {MAX_ENTRY_ID_LENGTH} characters")
    elif entry_id in by_id:
        raise InvalidEntry(f"Duplicate entry id {entry_id}")
    if "parentId" in entry and entry["parentId"] is not None and not isinstance(entry["parentId"], str):
        raise InvalidEntry(f"Entry {entry_id} names a parentId that is no entry id: {entry['parentId']!r}")
    if "parentId" in entry and entry["parentId"] != leaf_entry_id:
        raise ParentNotLeaf(
            f"Entry {entry_id} names parentId {entry['parentId']!r} but the leaf is {leaf_entry_id!r}; "
            "switch the leaf first (entries are always appended to the leaf)"
        )
    prepared: Entry = {
        "type": entry["type"],
        "id": entry_id,
        "parentId": leaf_entry_id,
        "timestamp": entry.get("timestamp") or now_iso(),
    }
    for key, value in entry.items():
        if key not in prepared:
            prepared[key] = value
    if prepared["type"] == "compaction" and prepared.get("firstKeptEntryId") is None:
        # A retain-none compaction names itself, as Pi's appendCompaction writes it.
        prepared["firstKeptEntryId"] = entry_id
    return prepared


def check_copied_entries(entries: Any) -> list[Entry]:
    """``entries`` if they can be stored verbatim as a session (a fork, an
    import): JSON objects with usable, unique ids and no cycle. An entry whose
    parent is missing is accepted: reads treat it as a root, as Pi does with
    its own files. Raises ``InvalidEntry`` (``InvalidTree`` for duplicates and
    cycles) naming the entry, before anything is stored."""
    if not isinstance(entries, list):
        raise InvalidEntry(f"Entries to copy must be a list, not {type(entries).__name__}")
    parent_of: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise InvalidEntry(f"An entry must be a JSON object, not {type(entry).__name__}")
        entry_id = entry.get("id")
        if not isinstance(entry_id, str) or not entry_id or len(entry_id) > MAX_ENTRY_ID_LENGTH:
            raise InvalidEntry(
                f"Entry id {entry_id!r} must be a non-empty string of at most {MAX_ENTRY_ID_LENGTH} characters"
            )
        if entry_id in parent_of:
            raise InvalidTree(f"Duplicate entry id {entry_id}")
        parent_of[entry_id] = entry.get("parentId")
    cycle = next(find_cycles(parent_of), None)
    if cycle is not None:
        raise InvalidTree(f"Cycle detected at entry {cycle[0]}")
    return entries


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects/arrays deeper than ``limit`` levels
    (the value itself is level 1). Visits containers only, and stops at the
    first one beyond the limit, so a hostile 100,000-level value costs little."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(current, dict):
            stack.extend((child, depth + 1) for child in current.values() if isinstance(child, dict | list))
        elif isinstance(current, list):
            stack.extend((child, depth + 1) for child in current if isinstance(child, dict | list))
    return False


def check_entry_depth(entry: Entry, *, max_depth: int) -> None:
    """Refuse an entry that nests JSON deeper than ``max_depth`` levels with
    ``EntryTooLarge`` (checked before encoding: a depth bomb never reaches
    the encoder)."""
    if json_depth_exceeds(entry, max_depth):
        raise EntryTooLarge(
            f"Entry {entry.get('id')} nests JSON deeper than {max_depth} levels (SESSIONTREE_MAX_ENTRY_DEPTH)"
        )


def line_nests_at_most(line: bytes, max_depth: int) -> bool:
    """Whether an entry's JSON line surely nests at most ``max_depth`` levels:
    JSON cannot nest deeper than it has opening brackets (those inside
    strings only overestimate), so most lines settle the depth check with
    two byte counts instead of a walk."""
    return line.count(b"{") + line.count(b"[") <= max_depth


def check_entry_size(entry: Entry, line_bytes: int, *, max_bytes: int) -> None:
    """Refuse an entry whose JSON line is over ``max_bytes`` with ``EntryTooLarge``."""
    if line_bytes > max_bytes:
        raise EntryTooLarge(
            f"Entry {entry.get('id')} is {line_bytes:,} bytes as JSON; the limit is {max_bytes:,} "
            "(SESSIONTREE_MAX_ENTRY_BYTES)"
        )


def apply_in_flight_patch(entry: Entry, patch: Any, by_id: Mapping[str, Entry]) -> Entry:
    """The in-flight ``entry`` with ``patch`` merged in (top-level keys), validated."""
    if not isinstance(patch, dict):
        raise InvalidEntry("An in-flight patch must be a JSON object")
    frozen = FROZEN_FIELDS & patch.keys()
    changed = [key for key in frozen if patch[key] != entry.get(key)]
    if changed:
        raise InvalidEntry(f"Cannot change {', '.join(sorted(changed))} of in-flight entry {entry['id']}")
    merged = {**entry, **patch}
    validate_entry_shape(merged, by_id)
    return merged


# --- typed entry builders (the provider's append_* methods use these) -------


def message_entry(message: Any) -> Entry:
    return {"type": "message", "message": message}


def thinking_level_change_entry(thinking_level: str) -> Entry:
    return {"type": "thinking_level_change", "thinkingLevel": thinking_level}


def model_change_entry(provider: str, model_id: str) -> Entry:
    return {"type": "model_change", "provider": provider, "modelId": model_id}


def compaction_entry(
    *,
    summary: str,
    first_kept_entry_id: str | None,
    tokens_before: int,
    details: Any = None,
    from_hook: bool | None = None,
    usage: Any = None,
    system_message: Any = None,
) -> Entry:
    """``first_kept_entry_id=None``: a retain-none compaction (stored with its
    own id there). ``system_message``: the prompt and tools in force (see
    ``compaction.current_system_message``); it is stored with the entry's own
    timestamp, as Pi stores it, so the entry's timestamp is set here."""
    entry: Entry = {
        "type": "compaction",
        "summary": summary,
        "firstKeptEntryId": first_kept_entry_id,
        "tokensBefore": tokens_before,
    }
    if details is not None:
        entry["details"] = details
    if usage is not None:
        entry["usage"] = usage
    if from_hook is not None:
        entry["fromHook"] = from_hook
    if system_message is not None:
        timestamp = now_iso()
        entry["timestamp"] = timestamp
        entry["systemMessage"] = {**system_message, "timestamp": iso_to_epoch_ms(timestamp)}
    return entry


def branch_summary_entry(
    *,
    branch_from_entry_id: str | None,
    summary: str,
    details: Any = None,
    from_hook: bool | None = None,
    from_id: str | None = None,
    usage: Any = None,
) -> Entry:
    """``from_id``: the leaf being left (Pi's ``fromId``); defaults to the
    new position, ``"root"`` before the root."""
    entry: Entry = {"type": "branch_summary", "fromId": from_id or branch_from_entry_id or "root", "summary": summary}
    if details is not None:
        entry["details"] = details
    if usage is not None:
        entry["usage"] = usage
    if from_hook is not None:
        entry["fromHook"] = from_hook
    return entry


def custom_entry(custom_type: str, data: Any = None) -> Entry:
    entry: Entry = {"type": "custom", "customType": custom_type}
    if data is not None:
        entry["data"] = data
    return entry


def custom_message_entry(custom_type: str, content: Any, *, display: bool = True, details: Any = None) -> Entry:
    entry: Entry = {"type": "custom_message", "customType": custom_type, "content": content, "display": display}
    if details is not None:
        entry["details"] = details
    return entry


def label_entry(target_id: str, label: str | None) -> Entry:
    entry: Entry = {"type": "label", "targetId": target_id}
    if label:
        entry["label"] = label
    return entry


def session_info_entry(name: str) -> Entry:
    """Line breaks become spaces and the ends are trimmed, as Pi stores a
    name (#5999); an empty name clears the session name."""
    return {"type": "session_info", "name": js_trim(_LINE_BREAKS.sub(" ", name)) if isinstance(name, str) else name}


def context_edit_entry(target_id: str, replacement: Any) -> Entry:
    """Replace (``{"content": …}``) or omit (``None``) an earlier message in
    the context from here on; the target entry itself never changes."""
    return {"type": "context_edit", "targetId": target_id, "replacement": replacement}


def usage_entry(kind: str, provider: str, model: str, usage: Any, note: str | None = None) -> Entry:
    """Usage a model reported outside any assistant message (cache warming…): never in the context."""
    entry: Entry = {"type": "usage", "kind": kind, "provider": provider, "model": model, "usage": usage}
    if note:
        entry["note"] = note
    return entry


# What JavaScript's String.prototype.trim removes (its WhiteSpace and
# LineTerminator sets), which differs from Python's str.strip.
_JS_WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_LINE_BREAKS = re.compile(r"[\r\n]+")


def js_trim(text: str) -> str:
    return text.strip(_JS_WHITESPACE)


def resolve_session_name(entries: Iterable[Entry]) -> str | None:
    """The session's name: the latest ``session_info`` entry in the file,
    whatever branch it is on; an empty (or blank) name clears it (Pi's
    ``getSessionName``)."""
    name: Any = None
    for entry in entries:
        if entry.get("type") == "session_info":
            name = entry.get("name")
    if not isinstance(name, str):
        return None
    return js_trim(name) or None
