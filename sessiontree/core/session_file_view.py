"""A session file opened for reading the active path, without decoding every entry.

Most entries of a branched session are off the path from the leaf to the
root, and a context needs even less: the entries from the latest compaction's
kept range on, plus the latest settings. So opening a file reads only a
skeleton of every line — its type, id and parent id, taken from the line's
text where Pi and we write them (``{"type":…,"id":…,"parentId":…`` at the
start, or ``"id":…,"parentId":…}`` at the end of a migrated v1 line) — and
decodes a line in full only when it is needed. A line whose skeleton cannot
be read that way is decoded in full at once.

The default leaf (the last entry), what Pi opens a session at, is read
without any skeleton: from the last line backwards, parent by parent, each
entry decoded once and its part of the context taken while it is fresh
(``_PathFirstView``). What is decoded is kept, so it skips the young
garbage collections (``gc_paused(promote=True)``).

What it answers is exactly what ``load_entries_from_file`` followed by
``get_path_to_leaf`` / ``build_session_context`` answer (tests compare
them): files before version 3 are loaded and migrated in full, and a line
that turns out not to be JSON when decoded (a torn write whose skeleton
looked whole) makes the view fall back to a full load.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .context_builder import (
    _ABSENT,
    DEFAULT_THINKING_LEVEL,
    UNSET,
    _Unset,
    apply_context_edit,
    build_context_from_path,
    context_settings,
    empty_context,
    entry_context_messages,
    walk_to_root,
)
from .errors import CorruptSessionTree, EntryNotFound
from .path import build_entry_index
from .pi_session_file import (
    gc_paused,
    is_session_header,
    load_entries_from_file,
    migrate_to_current_version,
    split_header,
)
from .types import CURRENT_SESSION_VERSION, Entry, SessionContext

# Skeleton of a line as written by Pi and by us (ids are plain: no escapes).
_PREFIX = re.compile(rb'\{"type":"([^"\\]*)","id":"([^"\\]*)","parentId":(?:"([^"\\]*)"|null)[,}]')
_TYPE = re.compile(rb'\{"type":"([^"\\]*)"')
_SUFFIX = re.compile(rb',"id":"([^"\\]*)","parentId":(?:"([^"\\]*)"|null)\}\s*\Z')
_SUFFIX_WINDOW = 160
# Entry types whose latest occurrence on the path sets a context setting.
_SETTINGS_TYPES = (b"thinking_level_change", b"model_change")
# From this file size on, the entries a read decodes skip the young
# collections (``gc_paused(promote=True)``); below, collecting them costs
# about what collecting the young generations beforehand does.
_PROMOTE_BYTES = 64 << 10


class _TornLine(Exception):
    """A line whose skeleton was read does not decode: fall back to a full load."""


class _NotFast(Exception):
    """The default leaf's path cannot be read the fast way: use the skeleton view."""


class SessionFileView:
    """Header, skeleton and on-demand entries of one session file."""

    def __init__(self, data: bytes, header: dict[str, Any]) -> None:
        self._data = data
        self.header = header
        self._ids: list[bytes] = []
        self._parents: list[bytes | None] = []
        self._types: list[bytes] = []
        self._starts = array("q")
        self._ends = array("q")
        self._index: dict[bytes, int] = {}
        self._decoded: dict[int, Entry] = {}

    # --- building ------------------------------------------------------------
    def _add(self, entry_id: bytes, parent_id: bytes | None, entry_type: bytes, start: int, end: int) -> int:
        if entry_id in self._index:
            raise CorruptSessionTree(f"Duplicate entry id {entry_id.decode('utf-8', 'replace')}")
        position = len(self._ids)
        self._index[entry_id] = position
        self._ids.append(entry_id)
        self._parents.append(parent_id)
        self._types.append(entry_type)
        self._starts.append(start)
        self._ends.append(end)
        return position

    def _add_decoded(self, obj: Any, start: int, end: int) -> None:
        if not isinstance(obj, dict) or obj.get("type") == "session":
            return
        entry_id = obj.get("id")
        if not isinstance(entry_id, str):
            raise CorruptSessionTree(f"Entry without a string id: type={obj.get('type')!r}")
        parent = obj.get("parentId")
        entry_type = obj.get("type")
        position = self._add(
            entry_id.encode(),
            parent.encode() if isinstance(parent, str) else None,
            entry_type.encode() if isinstance(entry_type, str) else b"",
            start,
            end,
        )
        self._decoded[position] = obj

    def _scan(self, start: int) -> None:
        """Read the skeleton of every line from ``start`` on."""
        data = self._data
        size = len(data)
        find = data.find
        prefix = _PREFIX.match
        add = self._add
        while start < size:
            end = find(b"\n", start)
            if end < 0:
                end = size
            match = prefix(data, start, end)
            if match is not None:
                entry_type, entry_id, parent_id = match.groups()
                add(entry_id, parent_id, entry_type, start, end)
            elif data[start:end].strip():
                self._scan_other(start, end)
            start = end + 1
        # A last line without its newline counts only if it is whole JSON.
        if self._ids and self._ends[-1] == size and size and data[-1:] != b"\n":
            self._entry(len(self._ids) - 1)

    def _scan_other(self, start: int, end: int) -> None:
        data = self._data
        type_match = _TYPE.match(data, start, end)
        suffix = _SUFFIX.search(data, max(start, end - _SUFFIX_WINDOW), end) if type_match is not None else None
        if suffix is not None and type_match is not None and type_match.group(1) != b"session":
            entry_id, parent_id = suffix.groups()
            self._add(entry_id, parent_id, type_match.group(1), start, end)
            return
        try:
            obj = orjson.loads(memoryview(data)[start:end])
        except orjson.JSONDecodeError:
            return  # a malformed line: skipped, as every reader skips it
        self._add_decoded(obj, start, end)

    # --- entries ---------------------------------------------------------------
    @property
    def _big(self) -> bool:
        """Whether what a read decodes is worth promoting (``gc_paused``)."""
        return len(self._data) >= _PROMOTE_BYTES

    def _entry(self, position: int) -> Entry:
        entry = self._decoded.get(position)
        if entry is None:
            try:
                entry = orjson.loads(memoryview(self._data)[self._starts[position] : self._ends[position]])
            except orjson.JSONDecodeError:
                raise _TornLine from None
            if not isinstance(entry, dict) or entry.get("id") != self._ids[position].decode():
                raise _TornLine
            self._decoded[position] = entry
        return entry

    @property
    def entry_count(self) -> int:
        return len(self._ids)

    @property
    def leaf_id(self) -> str | None:
        """Pi's default leaf: the last entry of the file."""
        return self._ids[-1].decode() if self._ids else None

    def _path_positions(self, leaf_entry_id: str) -> list[int]:
        position = self._index.get(leaf_entry_id.encode())
        if position is None:
            raise EntryNotFound(f"Entry {leaf_entry_id} not found")
        positions: list[int] = []
        seen: set[int] = set()
        index = self._index
        parents = self._parents
        current: int | None = position
        while current is not None:
            if current in seen:
                raise CorruptSessionTree(f"Cycle detected at entry {self._ids[current].decode()}")
            seen.add(current)
            positions.append(current)
            parent = parents[current]
            current = index.get(parent) if parent is not None else None
        positions.reverse()
        return positions

    def path(self, leaf_entry_id: str | None | _Unset = UNSET) -> list[Entry]:
        """The entries from the root to ``leaf_entry_id`` (default: the last entry)."""
        leaf = self.leaf_id if isinstance(leaf_entry_id, _Unset) else leaf_entry_id
        if leaf is None:
            return []
        with gc_paused(promote=self._big):
            return [self._entry(p) for p in self._path_positions(leaf)]

    def context(self, leaf_entry_id: str | None | _Unset = UNSET) -> SessionContext:
        """``build_session_context`` at ``leaf_entry_id`` (default: the last entry),
        decoding only what the context is made of."""
        leaf = self.leaf_id if isinstance(leaf_entry_id, _Unset) else leaf_entry_id
        if leaf is None:
            return empty_context()
        with gc_paused(promote=self._big):
            positions = self._path_positions(leaf)
            types = self._types
            # Only the latest compaction's region can reach the model.
            region_start = 0
            for i in range(len(positions) - 1, -1, -1):
                if types[positions[i]] == b"compaction":
                    first_kept = self._entry(positions[i]).get("firstKeptEntryId")
                    region_start = i
                    kept = self._index.get(first_kept.encode()) if isinstance(first_kept, str) else None
                    for j in range(i - 1, -1, -1):
                        if positions[j] == kept:
                            region_start = j
                            break
                    break
            region = [self._entry(p) for p in positions[region_start:]]
            context = build_context_from_path(region)
            if region_start:
                # Settings come from the whole path: its latest thinking level,
                # and its latest model change or assistant message.
                context["thinking_level"], context["model"] = context_settings(self._settings_entries(positions))
            return context

    def _settings_entries(self, positions: Sequence[int]) -> list[Entry]:
        thinking: int | None = None
        model: int | None = None
        types = self._types
        for i in range(len(positions) - 1, -1, -1):
            position = positions[i]
            entry_type = types[position]
            if thinking is None and entry_type == _SETTINGS_TYPES[0]:
                if "thinkingLevel" in self._entry(position):  # one without a level changes nothing
                    thinking = position
            elif model is None and (
                entry_type == _SETTINGS_TYPES[1] or (entry_type == b"message" and _is_assistant(self._entry(position)))
            ):
                model = position
            if thinking is not None and model is not None:
                break
        return [self._entry(p) for p in sorted(p for p in (thinking, model) if p is not None)]


def _is_assistant(entry: Entry) -> bool:
    message = entry.get("message")
    return isinstance(message, dict) and message.get("role") == "assistant"


class _FullView(SessionFileView):
    """Every entry decoded (files to migrate, or a torn line met on the way)."""

    def __init__(self, header: dict[str, Any], entries: list[Entry]) -> None:
        super().__init__(b"", header)
        self._entries = entries
        self._by_id = build_entry_index(entries)

    @property
    def entry_count(self) -> int:
        return len(self._entries)

    @property
    def leaf_id(self) -> str | None:
        return self._entries[-1]["id"] if self._entries else None

    def path(self, leaf_entry_id: str | None | _Unset = UNSET) -> list[Entry]:
        leaf = self.leaf_id if isinstance(leaf_entry_id, _Unset) else leaf_entry_id
        if leaf is None:
            return []
        found = self._by_id.get(leaf)
        if found is None:
            raise EntryNotFound(f"Entry {leaf} not found")
        return walk_to_root(found, self._by_id)

    def context(self, leaf_entry_id: str | None | _Unset = UNSET) -> SessionContext:
        return build_context_from_path(self.path(leaf_entry_id))


def _full_view(path: str | os.PathLike[str]) -> SessionFileView | None:
    file_entries = load_entries_from_file(path)
    if not file_entries:
        return None
    migrate_to_current_version(file_entries)
    header, entries = split_header(file_entries)
    return _FullView(header or {}, entries)


def open_session_file(path: str | os.PathLike[str]) -> SessionFileView:
    """Open a Pi session file for reading its paths and contexts.

    Raises ``CorruptSessionTree`` when the file is not a session (its first
    valid line is not a session header, as ``load_entries_from_file`` sees
    it) or holds a duplicate id, and ``FileNotFoundError`` when it is missing.
    """
    data = Path(path).read_bytes()
    start = 0
    header: Any = None
    # The header: the first line that is valid JSON.
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end]
        start = end + 1
        if not line.strip():
            continue
        try:
            header = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(header, dict):
            break
    if not is_session_header(header):
        raise CorruptSessionTree(f"{Path(path).name} is not a Pi session file (its first line is not a session header)")
    version = header.get("version", 1)
    if not isinstance(version, int) or version < CURRENT_SESSION_VERSION:
        view = _full_view(path)
        assert view is not None
        return view
    return _PathFirstView(data, header, start, path)


class _PathFirstView(SessionFileView):
    """The default leaf's path found by searching each parent's line
    backwards from its child's (parents are written before their children),
    so a context at the last entry reads no other line. Anything else — an
    explicit leaf, an id that cannot be found that way, a torn line — goes to
    the skeleton view, built on first need."""

    def __init__(self, data: bytes, header: dict[str, Any], start: int, path: str | os.PathLike[str]) -> None:
        self._data = data
        self.header = header
        self._start = start
        self._source = path
        self._skeleton: SessionFileView | None = None

    def _view(self) -> SessionFileView:
        if self._skeleton is None:
            view = SessionFileView(self._data, self.header)
            try:
                with gc_paused():
                    view._scan(self._start)
                self._skeleton = _SafeView(view, self._source)
            except _TornLine:
                full = _full_view(self._source)
                assert full is not None
                self._skeleton = full
        return self._skeleton

    @property
    def entry_count(self) -> int:
        return self._view().entry_count

    @property
    def leaf_id(self) -> str | None:
        return self._view().leaf_id

    def _last_entry(self) -> tuple[Entry, int] | None:
        """The last line that is an entry, and where it starts; ``None`` when
        the file has no entry. ``_NotFast`` when that entry has no string id
        (the skeleton view names the problem)."""
        data = self._data
        first = self._start
        end = len(data)
        while end > first:
            line_start = max(data.rfind(b"\n", first, end - 1) + 1, first)
            line = memoryview(data)[line_start:end]
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                obj = None  # blank, malformed or torn: not an entry
            if isinstance(obj, dict) and obj.get("type") != "session":
                if not isinstance(obj.get("id"), str):
                    raise _NotFast
                return obj, line_start
            end = line_start - 1
        return None

    def _fast_path(self, context: bool = False) -> tuple[list[Entry], SessionContext | None] | None:
        """The default leaf's path, root first; with ``context``, its context
        instead (and no path). ``None`` when the skeleton view must decide (a
        parent not found before its child, a duplicate id on the path, an id
        that is not a string).

        Each parent is the nearest line before its child's that decodes to an
        entry with the parent's id. Pi writes a child right after its parent
        except where the leaf moved, so the line just before is tried first
        and only when it is not the parent is the file searched backwards for
        the parent's id.

        The context is what ``build_context_from_path`` builds, gathered on
        the way with each entry read right after it is decoded and then let
        go: messages leaf first (reversed at the end), those of the latest
        compaction's kept range without system messages, none from before
        it; each entry's latest context edit met first; the settings from
        the first thinking-level change, and assistant message or model
        change, met. A context edit whose target comes after it on the path
        (never written so by Pi or us) leaves the context to
        ``build_context_from_path``: ``([], None)``."""
        try:
            last = self._last_entry()
        except _NotFast:
            return None
        if last is None:
            return [], (empty_context() if context else None)
        entry, before = last
        data = self._data
        view = memoryview(data)
        loads = orjson.loads
        rfind = data.rfind
        first = self._start
        # The byte before ``first`` ends the header line: every search for a
        # line start finds a newline at or after it.
        newline_floor = first - 1
        path = [entry]
        append = path.append
        entry_id: str = entry["id"]
        ids = [entry_id]
        add_id = ids.append
        messages: list[dict[str, Any]] = []
        sources: list[str] = []
        add_message = messages.append
        add_source = sources.append
        thinking_level: Any = _ABSENT
        model: Any = _ABSENT
        # The latest compaction, its id, its firstKeptEntryId, and how many
        # messages came after it; whether its first kept entry was met.
        compaction: Entry | None = None
        compaction_id = ""
        kept_from: Any = _ABSENT
        after = 0
        kept_found = False
        # The latest context edit of each target (the first met), and once
        # there is one, the ids walked so far.
        edits: dict[Any, Entry] = {}
        walked: set[str] | None = None
        collecting = context  # messages still wanted (not before the kept range)
        while True:
            entry_type = entry.get("type")
            if entry_type == "session":
                return None  # a header line where a parent was expected
            if context:
                last_kept = kept_from is not _ABSENT and collecting and entry_id == kept_from
                if entry_type == "message":
                    message = entry.get("message")
                    if message.__class__ is dict:
                        if not collecting or (kept_from is not _ABSENT and message.get("role") == "system"):
                            pass  # not selected
                        elif message.get("content") is None or (edits and entry_id in edits):
                            for entry_message in reversed(self._edited_messages(entry, edits)):
                                add_message(entry_message)
                                add_source(entry_id)
                        else:
                            add_message(message)
                            add_source(entry_id)
                        if model is _ABSENT and message.get("role") == "assistant":
                            model = {"provider": message.get("provider"), "modelId": message.get("model")}
                elif entry_type == "thinking_level_change":
                    if thinking_level is _ABSENT and "thinkingLevel" in entry:
                        thinking_level = entry["thinkingLevel"]
                elif entry_type == "model_change":
                    if model is _ABSENT:
                        model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
                elif not collecting:
                    pass
                elif entry_type == "compaction":
                    if compaction is None:
                        compaction, compaction_id = entry, entry_id
                        kept_from = entry.get("firstKeptEntryId")
                        after = len(messages)
                    # an older one in the kept range: only the latest speaks
                elif entry_type == "context_edit":
                    target = entry.get("targetId")
                    if walked is None:
                        walked = set(ids)
                    if target in walked:
                        return [], None  # its target is behind it: the builder decides
                    edits.setdefault(target, entry)
                else:
                    for entry_message in reversed(self._edited_messages(entry, edits)):
                        add_message(entry_message)
                        add_source(entry_id)
                if last_kept:
                    kept_found = True
                    collecting = False
            parent_id = entry.get("parentId")
            if parent_id.__class__ is not str:
                if parent_id is None:
                    break
                return None
            line_end = before - 1
            # Not found (-1) only when ``before`` is the first line: no parent there.
            line_start = rfind(b"\n", newline_floor, line_end) + 1
            if not line_start:
                return None
            try:
                obj = loads(view[line_start:line_end])
                found = obj["id"] == parent_id
            except (orjson.JSONDecodeError, KeyError, TypeError):
                found = False
            if not found:
                searched = self._search_parent(parent_id, before)
                if searched is None:
                    return None
                obj, line_start = searched
            if not context:
                append(obj)
            add_id(parent_id)
            if walked is not None:
                walked.add(parent_id)
            entry = obj
            entry_id = parent_id
            before = line_start
        if len(set(ids)) != len(ids):
            return None  # a duplicate id: let the skeleton view name it
        if not context:
            path.reverse()
            return path, None
        if compaction is not None and not kept_found:
            del messages[after:]  # its first kept entry is not on the path: it keeps nothing
            del sources[after:]
        messages.reverse()
        sources.reverse()
        if compaction is not None:
            speaking = self._edited_messages(compaction, edits)
            messages[:0] = speaking
            sources[:0] = [compaction_id] * len(speaking)
        return [], {
            "messages": messages,
            "thinking_level": DEFAULT_THINKING_LEVEL if thinking_level is _ABSENT else thinking_level,
            "model": None if model is _ABSENT else model,
            "source_entry_ids": sources,
        }

    @staticmethod
    def _edited_messages(entry: Entry, edits: dict[Any, Entry]) -> list[dict[str, Any]]:
        messages = entry_context_messages(entry)
        return apply_context_edit(messages, edits.get(entry["id"])) if edits else messages

    def _search_parent(self, parent_id: str, before: int) -> tuple[Entry, int] | None:
        """The nearest entry with id ``parent_id`` whose line starts before
        ``before``, found by its ``"id":…,"parentId":`` text, and where its
        line starts."""
        data = self._data
        first = self._start
        rfind = data.rfind
        needle = b'"id":' + orjson.dumps(parent_id) + b',"parentId":'
        position = rfind(needle, first, before)
        while position >= 0:
            line_start = max(rfind(b"\n", first, position) + 1, first)
            line_end = data.find(b"\n", position)
            if line_end < 0:
                line_end = len(data)
            match = _PREFIX.match(data, line_start, line_end)
            if match is None or match.start(2) == position + 6:
                try:
                    obj = orjson.loads(memoryview(data)[line_start:line_end])
                except orjson.JSONDecodeError:
                    obj = None
                if isinstance(obj, dict) and obj.get("id") == parent_id and obj.get("type") != "session":
                    return obj, line_start
            position = rfind(needle, first, position)
        return None

    def path(self, leaf_entry_id: str | None | _Unset = UNSET) -> list[Entry]:
        if isinstance(leaf_entry_id, _Unset) and self._skeleton is None:
            with gc_paused(promote=self._big):
                found = self._fast_path()
            if found is not None:
                return found[0]
        return self._view().path(leaf_entry_id)

    def context(self, leaf_entry_id: str | None | _Unset = UNSET) -> SessionContext:
        if isinstance(leaf_entry_id, _Unset) and self._skeleton is None:
            with gc_paused(promote=self._big):
                found = self._fast_path(context=True)
                if found is not None and found[1] is None:
                    found = self._fast_path()
                    if found is not None:
                        return build_context_from_path(found[0])
            if found is not None and found[1] is not None:
                return found[1]
        return self._view().context(leaf_entry_id)


class _SafeView(SessionFileView):
    """A skeleton view whose reads fall back to a full load on a torn line."""

    def __init__(self, view: SessionFileView, path: str | os.PathLike[str]) -> None:
        self.__dict__.update(view.__dict__)
        self._path = path
        self._fallback: SessionFileView | None = None

    def _full(self) -> SessionFileView:
        if self._fallback is None:
            self._fallback = _full_view(self._path)
            assert self._fallback is not None
        return self._fallback

    def path(self, leaf_entry_id: str | None | _Unset = UNSET) -> list[Entry]:
        if self._fallback is not None:
            return self._fallback.path(leaf_entry_id)
        try:
            return super().path(leaf_entry_id)
        except _TornLine:
            return self._full().path(leaf_entry_id)

    def context(self, leaf_entry_id: str | None | _Unset = UNSET) -> SessionContext:
        if self._fallback is not None:
            return self._fallback.context(leaf_entry_id)
        try:
            return super().context(leaf_entry_id)
        except _TornLine:
            return self._full().context(leaf_entry_id)
