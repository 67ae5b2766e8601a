"""The ``file`` storage: one Pi JSONL file per session, meta in the database.

``<root>/<session_id>.jsonl`` (or, for a Pi file indexed where it lies, the
row's ``session_file``) holds the header line and one line per entry, exactly
as Pi writes them; status, title and lineage live in the session's
``AgentSession`` row. Writes to one session are serialized with an exclusive
``flock`` on its file; each write appends complete lines and never rewrites
the file (the one exception: migrating a v1/v2 file to v3 once, as Pi does).

**The file is the truth.** The row also records the leaf and how many entries
the file held when the row was last written (``entry_count``). A file that
holds more (Pi appending to the file itself) has its last entry as the leaf,
as Pi decides on load, and its counts follow; the next write stores that in
the row.

A write's lines and its row update (plus the operations layer's audit record)
are made durable together: the lines are written last inside the database
transaction, and cut off again if the commit fails. A writer that dies after
its lines reached the file but before its transaction committed leaves lines
nobody was told about (a client retrying with its idempotency key would store
them twice): before writing, the writer leaves an intent beside the file
(``<file>.writing``: where its lines start, their ids and the entry count the
row has once they are committed), removed after the commit. Whoever locks the
file next and finds an intent asks the row (waiting for the dead writer's
transaction to end): committed, the lines stay; not, they are cut off.

Each process caches the index of the files it has read, keyed by (inode,
size, mtime); when the file grew, only the appended tail is read. The index
is the file's skeleton (ids, parents, types, each line's offset and length),
not its payloads: those are read again with ``pread`` on demand, the most
recent ones kept decoded within a byte budget (``_Payloads``). A process
that has no index of a file yet loads it from the file's persisted index
(``file_sidecar``: beside the file, validated against it) when there is one
that still describes the file, instead of decoding every line.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import functools
import glob
import hashlib
import heapq
import itertools
import logging
import os
import stat
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from sessiontree.core import entry_keys
from sessiontree.core.entries import first_message_preview
from sessiontree.core.errors import (
    CommitOutcomeUnknown,
    CorruptSessionTree,
    EntryNotFound,
    ImmutableEntry,
    InvalidSessionId,
    SessionAlreadyExists,
    SessionNotFound,
    SessionTreeError,
    StorageUnavailable,
)
from sessiontree.core.ids import new_entry_id
from sessiontree.core.path import TreeStats, tree_stats
from sessiontree.core.path_facts import PathFacts, ancestor_at, child_facts, context_path_in_memory
from sessiontree.core.pi_session_file import append_lines, migrate_to_current_version, serialize_file, serialize_line
from sessiontree.core.session_reader import (
    BLANK,
    MALFORMED,
    SessionReader,
    decode_line,
    gc_paused,
    is_session_header,
    read_chunks,
    read_session_bytes,
    whole_lines_end,
)
from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.core.verify import MetaCounts, scan_session_bytes

from . import db_errors, file_sidecar, keyed_reads, meta, search_index
from .port import (
    BeforeCommit,
    EntryErasure,
    ErasedEntry,
    ErasureDone,
    MetaRecount,
    RewrittenFile,
    SessionState,
    StoredScan,
    StoredWrite,
    TornTailCut,
    TreeFields,
)
from .template import TreeProvider

KIND = "file"
T = TypeVar("T")
logger = logging.getLogger(__name__)


# --- the per-process index of a file -------------------------------------------------

# What a process keeps of a session file is its skeleton (ids, parents, types,
# where each line lies); payloads are read again from the file on demand and a
# bounded number of them stay decoded (``_Payloads``).
DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
DEFAULT_CACHE_SESSIONS = 16
DEFAULT_CACHE_ENTRIES = 2_000_000
# Lines read together by one pread when an id list names entries close in the file.
_RUN_GAP = 64 * 1024
_RUN_BYTES = 8 * 1024 * 1024
_tokens = itertools.count(1)
# A load reads (and decodes) the file this much at a time: small enough that
# what a chunk decodes to is dropped while still in the processor's cache.
_LOAD_CHUNK = 256 * 1024


class FileIndex:
    """What a process knows of one session file: its header and skeleton.

    Per entry, in append order: its id, ``parentId``, ``type`` and where its
    line lies in the file (offset and length). No payload is kept here: an
    entry is read again from its line (``_Payloads`` keeps the most recent
    ones decoded, within a bound). Entries enter only through ``extend``."""

    __slots__ = (
        "compactions",
        "fact_compaction",
        "fact_depth",
        "fact_exact",
        "fact_jump",
        "fact_jump_depth",
        "fact_model",
        "fact_thinking",
        "first_child",
        "first_root",
        "has_child",
        "header",
        "ids",
        "inode",
        "key_at",
        "key_rules",
        "keyed",
        "lengths",
        "more_children",
        "mtime_ns",
        "offset",
        "offsets",
        "parents",
        "position",
        "roots",
        "sidecar_entries",
        "size",
        "token",
        "type_counts",
        "types",
        "waiting",
        "with_children",
    )

    def __init__(self, *, inode: int, size: int, mtime_ns: int, offset: int, header: dict[str, Any]) -> None:
        self.inode = inode
        self.size = size
        self.mtime_ns = mtime_ns
        self.offset = offset  # bytes consumed: everything up to the last complete line
        self.header = header
        self.token = next(_tokens)  # names this index's payloads in the process's cache
        self.sidecar_entries = 0  # how many of its entries the file's sidecar holds, as far as this process knows
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self.parents: list[str | None] = []
        self.types: list[Any] = []
        self.offsets = array("q")
        self.lengths = array("q")
        self.has_child = bytearray()
        self.with_children = 0  # for the tree stats: how many entries have a child
        # Children by position: each entry's first child (-1: none), and the
        # later children of the entries that have more than one (branch points).
        self.first_child = array("q")
        self.more_children: dict[int, list[int]] = {}
        # Positions of the entries whose parent is not in the file (roots; a
        # healthy file has one). An entry whose parent comes later in the file
        # is one until its parent comes, then that parent's child, as Pi links
        # them (it looks a parent up among all the file's entries).
        self.roots: list[int] = []
        # Those parents not come yet → the positions of the entries naming them
        # (not persisted: ``loaded`` rebuilds it from ``roots`` and ``parents``).
        self.waiting: dict[str, list[int]] = {}
        # Entries by type, counted the first time they are asked for and kept
        # up to date by ``extend`` from then on (the tree page's summary).
        self.type_counts: collections.Counter[Any] | None = None
        self.compactions = 0
        self.first_root: str | None = None
        # Each entry's path facts (core/path_facts.py), computed as entries
        # arrive, as columns by position (``facts_of`` gives an entry's as a
        # PathFacts): the depth, the positions of the nearest compaction,
        # model and thinking entries (-1: none), whether exact, and the
        # jump's position and depth. 25 bytes an entry, where a tuple in a
        # dict by id took ~190.
        self.fact_depth = array("i")
        self.fact_compaction = array("i")
        self.fact_model = array("i")
        self.fact_thinking = array("i")
        self.fact_exact = bytearray()
        self.fact_jump = array("i")
        self.fact_jump_depth = array("i")
        # Positions (ascending) by key, for the reads by key (``keyed_reads``):
        # ("custom", customType) of ``custom`` entries and ("tool", toolName)
        # of ``message`` entries whose message names a tool.
        self.keyed: dict[tuple[str, str], list[int]] = {}
        # Entries by their key (``core/entry_keys.py``): the position of the
        # one entry with it, or the positions (ascending) of several; and the
        # rules the keys were computed under (a sidecar is read only under the same).
        self.key_at: dict[str, Any] = {}
        self.key_rules = entry_keys.signature()

    def extend(self, entries: Sequence[Entry], spans: Sequence[int], *, keep: bool = True) -> None:
        """Add entries read or written after the ones known, with where each
        one's line lies (``spans``: offset, length, two ints an entry), all
        or none: a refused tail leaves the index as it was, so the same error
        (naming the same entry) comes back on the next read. ``keep``: the
        decoded entries go to the payload cache (the newest that fit)."""
        if not entries:
            return
        if len(spans) != 2 * len(entries):
            raise ValueError("two span ints per entry")
        position, ids, parents, types, has_child = self.position, self.ids, self.parents, self.types, self.has_child
        keyed, first_child = self.keyed, self.first_child
        # Entries a key rule looks at (``core/entry_keys.py``): their key too.
        key_tools, key_customs = entry_keys.keyed_tool_names(), entry_keys.keyed_custom_types()
        keyed_here: list[tuple[str, int]] = []
        depth_of, compaction_of, model_of = self.fact_depth, self.fact_compaction, self.fact_model
        thinking_of, exact_of, jump_of, jump_depth_of = (
            self.fact_thinking,
            self.fact_exact,
            self.fact_jump,
            self.fact_jump_depth,
        )
        new_ids: list[Any] = [entry.get("id") for entry in entries]
        if (
            not all(type(entry_id) is str for entry_id in new_ids)
            or len(set(new_ids)) != len(new_ids)
            or not position.keys().isdisjoint(new_ids)
        ):
            self._refuse(new_ids)
        base = len(ids)
        intern = sys.intern
        waiting = self.waiting
        has_child.extend(bytes(len(entries)))
        first_child.extend(itertools.repeat(-1, len(entries)))
        add_id, add_parent, add_type = ids.append, parents.append, types.append
        with_children = 0  # parents that got their first child here (``_adopt`` counts its own)
        at = base
        for entry_id, entry in zip(new_ids, entries, strict=True):
            parent_id = entry.get("parentId")
            if parent_id.__class__ is not str:
                # ``None``, or a value that names no entry (Pi looks it up as a
                # key: a list or a number finds nothing): the entry starts a tree.
                parent_id = None
            parent_at = position.get(parent_id) if parent_id is not None else None
            if parent_at is not None:
                parent_id = ids[parent_at]  # one string object per id
                if not has_child[parent_at]:
                    has_child[parent_at] = 1
                    with_children += 1
                    first_child[parent_at] = at
                else:
                    self.more_children.setdefault(parent_at, []).append(at)
                # The path facts (``path_facts.child_facts``, by position): the
                # parent's, with what this entry sets.
                depth = depth_of[parent_at]
                compaction, model, thinking = compaction_of[parent_at], model_of[parent_at], thinking_of[parent_at]
                exact = exact_of[parent_at]
                jump = jump_of[parent_at]
                if depth + jump_depth_of[jump] == 2 * jump_depth_of[parent_at]:
                    jump, jump_depth = jump_of[jump], jump_depth_of[jump]
                else:
                    jump, jump_depth = parent_at, depth
                depth += 1
            else:
                self.roots.append(at)
                if self.first_root is None:
                    self.first_root = entry_id
                if parent_id is not None and parent_id != entry_id:
                    waiting.setdefault(parent_id, []).append(at)  # a parent later in the file
                # A root's facts (not exact when its parentId names no entry known now).
                compaction = model = thinking = -1
                depth, exact, jump, jump_depth = 0, entry.get("parentId") is None, at, 0
            entry_type = entry.get("type")
            if entry_type.__class__ is str:
                entry_type = intern(entry_type)
                if entry_type == "message":  # most entries: asked first
                    message = entry.get("message")
                    if message.__class__ is dict:
                        tool = message.get("toolName")
                        if tool.__class__ is str:
                            keyed.setdefault(("tool", tool), []).append(at)
                            if tool in key_tools and (key := entry_keys.entry_key(entry)) is not None:
                                keyed_here.append((key, at))
                        if message.get("role") == "assistant":
                            model = at
                elif entry_type == "compaction":
                    self.compactions += 1
                    compaction = at
                elif entry_type == "model_change":
                    model = at
                elif entry_type == "thinking_level_change":
                    if "thinkingLevel" in entry:
                        thinking = at
                elif entry_type == "custom":
                    custom_type = entry.get("customType")
                    if custom_type.__class__ is str:
                        keyed.setdefault(("custom", custom_type), []).append(at)
                        if custom_type in key_customs and (key := entry_keys.entry_key(entry)) is not None:
                            keyed_here.append((key, at))
                elif entry_type == "label" or entry_type == "context_edit":
                    target = entry.get("targetId")
                    if target.__class__ is str:
                        keyed.setdefault(("target", target), []).append(at)
            depth_of.append(depth)
            compaction_of.append(compaction)
            model_of.append(model)
            thinking_of.append(thinking)
            exact_of.append(exact)
            jump_of.append(jump)
            jump_depth_of.append(jump_depth)
            position[entry_id] = at
            if waiting and entry_id in waiting:
                self._adopt(at, entry_id, waiting.pop(entry_id))
            add_id(entry_id)
            add_parent(parent_id)
            add_type(entry_type)
            at += 1
        self.with_children += with_children
        key_at = self.key_at
        for key, where in keyed_here:
            found = key_at.get(key)
            if found is None:
                key_at[key] = where
            elif found.__class__ is list:
                found.append(where)
            else:
                key_at[key] = [found, where]
        self.offsets.extend(spans[0::2])
        self.lengths.extend(spans[1::2])
        if self.type_counts is not None:
            self.type_counts.update(types[base:at])
        if keep:
            _payloads.keep_many(self.token, list(zip(range(base, at), entries, spans[1::2], strict=True)))

    def loaded(self) -> None:
        """What is not persisted with the index, rebuilt once its slots are read
        back (``file_sidecar.load``): the parents named by roots that the file
        does not hold (yet)."""
        waiting: dict[str, list[int]] = {}
        for at in self.roots:
            parent_id = self.parents[at]
            if parent_id is not None and parent_id != self.ids[at]:
                waiting.setdefault(parent_id, []).append(at)
        self.waiting = waiting

    def _adopt(self, at: int, entry_id: str, early: list[int]) -> None:
        """The entries stored before their parent ``entry_id`` (at ``at``, being
        added) become its first children, in append order; no longer roots.
        Their path facts stay as they came (a root's, not exact): reads of
        them walk the path."""
        for child in early:
            if not self.has_child[at]:
                self.has_child[at] = 1
                self.with_children += 1
                self.first_child[at] = child
            else:
                self.more_children.setdefault(at, []).append(child)
            self.roots.remove(child)
        first = self.roots[0] if self.roots else None
        self.first_root = None if first is None else entry_id if first == at else self.ids[first]

    def _refuse(self, new_ids: list[Any]) -> None:
        """The error naming the first entry that cannot join the index."""
        seen: set[str] = set()
        for entry_id in new_ids:
            if not isinstance(entry_id, str):
                raise CorruptSessionTree(f"Entry without a string id in session {self.header.get('id')}")
            if entry_id in self.position or entry_id in seen:
                raise CorruptSessionTree(f"Duplicate entry id {entry_id} in session {self.header.get('id')}")
            seen.add(entry_id)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.position

    def parent_of(self, entry_id: str) -> str | None:
        return self.parents[self.position[entry_id]]

    def facts_of(self, entry_id: Any) -> PathFacts | None:
        """The path facts of ``entry_id`` (``None``: not in the index)."""
        at = self.position.get(entry_id)
        if at is None:
            return None
        ids = self.ids
        compaction, model, thinking = self.fact_compaction[at], self.fact_model[at], self.fact_thinking[at]
        return _new_facts(
            PathFacts,
            (
                self.fact_depth[at],
                ids[compaction] if compaction >= 0 else None,
                ids[model] if model >= 0 else None,
                ids[thinking] if thinking >= 0 else None,
                bool(self.fact_exact[at]),
                ids[self.fact_jump[at]],
                self.fact_jump_depth[at],
            ),
        )

    def has_children(self, entry_id: str) -> bool:
        at = self.position.get(entry_id)
        return at is not None and bool(self.has_child[at])

    def children_at(self, at: int) -> list[int]:
        """The positions of the children of the entry at ``at``, in append order."""
        first = self.first_child[at]
        if first < 0:
            return []
        more = self.more_children.get(at)
        return [first, *more] if more else [first]

    @property
    def last_id(self) -> str | None:
        return self.ids[-1] if self.ids else None

    @property
    def stats(self) -> TreeStats:
        count = len(self.ids)
        return TreeStats(count, count - self.with_children, self.compactions, self.first_root)

    # --- payloads, read again from the file ------------------------------------------
    def read(self, fd: int, positions: Sequence[int]) -> list[Entry]:
        """The entries at ``positions`` (in that order), from the cache or
        their lines in the file open as ``fd``; lines close together are
        read with one ``pread``."""
        found: list[Entry | None] = _payloads.get_many(self.token, positions)
        missing = sorted({at for at, entry in zip(positions, found, strict=True) if entry is None})
        if missing:
            read = dict(self._read_lines(fd, missing))
            found = [entry if entry is not None else read[at] for at, entry in zip(positions, found, strict=True)]
        return found  # type: ignore[return-value]

    def iter_all(self, fd: int, positions: Sequence[int] | None = None) -> Iterator[Entry]:
        """Every entry (or those at ``positions``, ascending) in append
        order, read in bounded runs (never the whole file at once)."""
        wanted = range(len(self.ids)) if positions is None else positions
        step = 4096
        for start in range(0, len(wanted), step):
            yield from self.read(fd, wanted[start : start + step])

    def _read_lines(self, fd: int, positions: list[int]) -> Iterator[tuple[int, Entry]]:
        """(position, entry) for ``positions`` (ascending), decoded from the file."""
        offsets, lengths = self.offsets, self.lengths
        kept: list[tuple[int, Entry, int]] = []
        run_start = 0
        total = len(positions)
        with gc_paused():
            while run_start < total:
                first = positions[run_start]
                begin = offsets[first]
                end = begin + lengths[first]
                run_end = run_start + 1
                while run_end < total:
                    at = positions[run_end]
                    if offsets[at] - end > _RUN_GAP or offsets[at] + lengths[at] - begin > _RUN_BYTES:
                        break
                    end = max(end, offsets[at] + lengths[at])
                    run_end += 1
                data = os.pread(fd, end - begin, begin)
                view = memoryview(data)
                for at in positions[run_start:run_end]:
                    start = offsets[at] - begin
                    length = lengths[at]
                    entry = _decode_entry_line(view[start : start + length])
                    if type(entry) is not dict or entry.get("id") != self.ids[at]:
                        raise CorruptSessionTree(
                            f"Entry {self.ids[at]} of session {self.header.get('id')} changed in its file "
                            "after it was read"
                        )
                    kept.append((at, entry, length))
                    yield at, entry
                run_start = run_end
        _payloads.keep_many(self.token, kept)


_new_facts = tuple.__new__


class _FactsById(Mapping[str, PathFacts]):
    """An index's path facts by id, for ``path_facts.child_facts``."""

    def __init__(self, index: FileIndex) -> None:
        self._index = index

    def get(self, key: Any, default: Any = None) -> Any:
        found = self._index.facts_of(key)
        return default if found is None else found

    def __getitem__(self, key: str) -> PathFacts:
        found = self._index.facts_of(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._index.ids)

    def __len__(self) -> int:
        return len(self._index.ids)


_types: dict[Any, Any] = {}


def _intern_type(entry_type: Any) -> Any:
    """One string object per entry type (a million entries share a handful)."""
    if type(entry_type) is not str:
        return entry_type
    return _types.setdefault(entry_type, entry_type) if len(_types) < 1024 else entry_type


def _decode_entry_line(line: memoryview) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return decode_line(bytes(line))


class _Payloads:
    """The decoded entries a process keeps, least recently used first out,
    within ``SESSIONTREE_FILE_CACHE_BYTES`` (counted as the bytes of their
    lines; decoded, an entry takes about twice that). Keyed by (index
    token, position): an index dropped or replaced leaves its entries to age out."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[int, int], tuple[Entry, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def budget() -> int:
        return int(getattr(settings, "SESSIONTREE_FILE_CACHE_BYTES", DEFAULT_CACHE_BYTES))

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def drop(self, token: int) -> None:
        """Forget every entry of one index (a file rewritten, cut or dropped:
        an erased entry's old content must not linger in memory either)."""
        with self._lock:
            stale = [key for key in self._entries if key[0] == token]
            for key in stale:
                self._bytes -= self._entries.pop(key)[1]

    def get_many(self, token: int, positions: Sequence[int]) -> list[Entry | None]:
        entries = self._entries
        found: list[Entry | None] = []
        with self._lock:
            for at in positions:
                key = (token, at)
                kept = entries.get(key)
                if kept is None:
                    found.append(None)
                else:
                    entries.move_to_end(key)
                    found.append(kept[0])
        return found

    def keep_many(self, token: int, items: Sequence[tuple[int, Entry, int]]) -> None:
        """Keep (position, entry, line length) items, the last ones most
        recent; only the newest that fit in the budget are kept at all."""
        budget = self.budget()
        if budget <= 0 or not items:
            return
        first = len(items)
        total = 0
        while first > 0 and total + items[first - 1][2] <= budget:
            first -= 1
            total += items[first][2]
        entries = self._entries
        with self._lock:
            for at, entry, length in items[first:] if first else items:
                key = (token, at)
                old = entries.pop(key, None)
                if old is not None:
                    self._bytes -= old[1]
                entries[key] = (entry, length)
                self._bytes += length
            while self._bytes > budget and entries:
                _key, (_entry, length) = entries.popitem(last=False)
                self._bytes -= length


_payloads = _Payloads()


class _FileReplaced(Exception):
    """Another process renamed a migrated file over the one we opened."""


# The indexes of the files this process read, most recently used last, at most
# ``SESSIONTREE_FILE_CACHE_SESSIONS`` of them.
_cache: OrderedDict[str, FileIndex] = OrderedDict()
_cache_lock = threading.Lock()
# Session id → its file, as the meta row last said: lets a write lock the file
# before its one read of the row (which then confirms the path, or the write
# starts again on the row's). Bounded: cleared when full.
_paths: dict[str, Path] = {}
MAX_KNOWN_PATHS = 100_000


def clear_index_cache() -> None:
    """Forget every parsed file (and where each session's file is)."""
    with _cache_lock:
        _cache.clear()
        _paths.clear()
    _payloads.clear()


def _cached_index(key: str) -> FileIndex | None:
    with _cache_lock:
        index = _cache.get(key)
        if index is not None:
            _cache.move_to_end(key)
        return index


def _keep_index(key: str, index: FileIndex) -> None:
    """Cache ``index`` as the most recently used; the least recently used
    go while more than ``SESSIONTREE_FILE_CACHE_SESSIONS`` indexes or
    ``SESSIONTREE_FILE_CACHE_ENTRIES`` entries in all are kept."""
    sessions = max(1, int(getattr(settings, "SESSIONTREE_FILE_CACHE_SESSIONS", DEFAULT_CACHE_SESSIONS)))
    entries = int(getattr(settings, "SESSIONTREE_FILE_CACHE_ENTRIES", DEFAULT_CACHE_ENTRIES))
    with _cache_lock:
        _cache[key] = index
        _cache.move_to_end(key)
        total = sum(len(kept) for kept in _cache.values())
        dropped: list[FileIndex] = []
        while len(_cache) > 1 and (len(_cache) > sessions or total > entries):
            dropped.append(_cache.popitem(last=False)[1])
            total -= len(dropped[-1])
    for gone in dropped:
        _payloads.drop(gone.token)


def cache_usage() -> dict[str, int]:
    """What this process keeps of session files: indexes, their entries, and
    the decoded payloads (count and bytes of their lines)."""
    with _cache_lock:
        indexes = list(_cache.values())
    return {
        "sessions": len(indexes),
        "entries": sum(len(index) for index in indexes),
        "payloads": len(_payloads),
        "payload_bytes": _payloads.size_bytes,
    }


def _forget(path: Path) -> None:
    with _cache_lock:
        index = _cache.pop(str(path), None)
    if index is not None:
        _payloads.drop(index.token)


def _known_path(session_id: str) -> Path | None:
    with _cache_lock:
        return _paths.get(session_id)


@functools.lru_cache(maxsize=65536)
def _file_path(name: str) -> Path:
    """A row's ``session_file`` as a path, parsed once per process (paths are
    immutable; parsing one costs more than the rest of a read's bookkeeping)."""
    return Path(name)


def _remember_path(session_id: str, path: Path) -> None:
    if _paths.get(session_id) is path:  # the usual case: known already (a plain dict read)
        return
    with _cache_lock:
        if len(_paths) >= MAX_KNOWN_PATHS:
            _paths.clear()
        _paths[session_id] = path


def _forget_path(session_id: str) -> None:
    with _cache_lock:
        _paths.pop(session_id, None)


class _Entries(Mapping[str, Entry]):
    """A file's entries by id, read on demand (``FileIndex.read``), with a
    few entries on top (in flight, or written by this unit and not yet in
    the file's index). ``in`` asks the skeleton only."""

    __slots__ = ("_fd", "_index", "_top")

    def __init__(self, index: FileIndex, fd: int, top: Mapping[str, Entry]) -> None:
        self._index = index
        self._fd = fd
        self._top = top

    def __getitem__(self, key: str) -> Entry:
        found = self._top.get(key)
        if found is not None:
            return found
        at = self._index.position[key]
        return self._index.read(self._fd, [at])[0]

    def __contains__(self, key: object) -> bool:
        return key in self._top or key in self._index.position

    def __iter__(self) -> Iterator[str]:
        yield from self._index.ids
        yield from (key for key in self._top if key not in self._index.position)

    def __len__(self) -> int:
        return len(self._index.ids) + sum(1 for key in self._top if key not in self._index.position)


class _Parents(Mapping[str, Any]):
    """``entry id → parentId`` from a file's skeleton (no payload read),
    with the entries on top of it, iterated in append order."""

    __slots__ = ("_index", "_top")

    def __init__(self, index: FileIndex, top: Mapping[str, Entry]) -> None:
        self._index = index
        self._top = top

    def __getitem__(self, key: str) -> Any:
        at = self._index.position.get(key)
        if at is not None:
            return self._index.parents[at]
        return self._top[key].get("parentId")

    def __contains__(self, key: object) -> bool:
        return key in self._index.position or key in self._top

    def __iter__(self) -> Iterator[str]:
        yield from self._index.ids
        yield from (key for key in self._top if key not in self._index.position)

    def __len__(self) -> int:
        return len(self._index.ids) + sum(1 for key in self._top if key not in self._index.position)


# --- the session's meta row, read without the ORM (the hot path) ----------------------

_q = connection.ops.quote_name
# The meta row and the storage's own column: the in-flight entry.
_SELECT_ROW = meta.select_sql([_q("in_flight_entry")])
_UPDATE_ROW = (
    f"UPDATE {meta.TABLE} SET {_q('leaf_entry_id')} = %s, {_q('root_entry_id')} = %s, {_q('entry_count')} = %s, "
    f"{_q('branch_count')} = %s, {_q('compaction_count')} = %s, {_q('in_flight_entry')} = %s, "
    f"{_q('first_message_preview')} = %s, {_q('updated_at')} = %s WHERE {_q('session_id')} = %s"
)


@dataclass
class _Row:
    """The session's meta row and the file storage's own column."""

    meta: meta.MetaRow
    in_flight_entry: Entry | None

    @property
    def session_id(self) -> str:
        return self.meta.session_id


def _select_row(session_id: str) -> _Row:
    row, (in_flight,) = meta.fetch_row(_SELECT_ROW, session_id, provider=KIND)
    if isinstance(in_flight, str | bytes):
        in_flight = orjson.loads(in_flight)
    return _Row(row, in_flight or None)


def _state(row: _Row, index: FileIndex) -> SessionState:
    """The session as the file says: the row's leaf while the file holds what
    the row has seen, else the file's last entry (Pi's rule)."""
    stats = index.stats
    recorded = row.meta
    in_flight = row.in_flight_entry
    if in_flight is not None:
        leaf: str | None = in_flight["id"]
    elif stats.entry_count != recorded.entry_count or (
        recorded.leaf_entry_id is not None and recorded.leaf_entry_id not in index
    ):
        leaf = index.last_id
    else:
        leaf = recorded.leaf_entry_id
    return SessionState(
        pk=recorded.pk,
        session_id=recorded.session_id,
        provider=KIND,
        status=recorded.status,
        leaf_entry_id=leaf,
        root_entry_id=stats.root_entry_id,
        entry_count=stats.entry_count,
        branch_count=stats.branch_count,
        compaction_count=stats.compaction_count,
        in_flight_entry_id=in_flight["id"] if in_flight is not None else None,
        first_message_preview=recorded.first_message_preview,
    )


def _tree_fields(state: SessionState | meta.MetaRow) -> TreeFields:
    return TreeFields(
        state.entry_count, state.branch_count, state.compaction_count, state.root_entry_id, state.leaf_entry_id
    )


# --- reads and writes -----------------------------------------------------------------


class FileView:
    """One session's file and row, read under a shared lock (``fd`` is the
    file, open while the view is used: payloads are read from it)."""

    def __init__(self, row: _Row, index: FileIndex, fd: int) -> None:
        self.row = row
        self.index = index
        self.fd = fd
        self.in_flight_entry: Entry | None = row.in_flight_entry
        self.state = _state(row, index)
        self.written_at: Any = None  # the row's new updated_at, once a write stored it

    def _top(self) -> Mapping[str, Entry]:
        """Entries not in the file's index: the in-flight one."""
        if self.in_flight_entry is None:
            return {}
        return {self.in_flight_entry["id"]: self.in_flight_entry}

    def _by_id(self) -> Mapping[str, Entry]:
        return _Entries(self.index, self.fd, self._top())

    def session(self) -> SessionTreeSession:
        """The row as stored, the tree as the file says."""
        return self.row.meta.session(self.state, updated_at=self.written_at)

    def recount(self) -> MetaRecount:
        return MetaRecount(_tree_fields(self.row.meta), _tree_fields(self.state), self.row.meta.title)

    def parents(self) -> Mapping[str, Any]:
        return _Parents(self.index, self._top())

    def entries(self, ids: Sequence[str]) -> list[Entry]:
        top = self._top()
        position = self.index.position
        if not top:
            return self.index.read(self.fd, [position[entry_id] for entry_id in ids])
        stored = self.index.read(self.fd, [position[entry_id] for entry_id in ids if entry_id not in top])
        found = iter(stored)
        return [top[entry_id] if entry_id in top else next(found) for entry_id in ids]

    def _top_in_order(self) -> list[Entry]:
        """The entries on top of the file's (this unit's pending lines, then
        the one in flight), in the order they came."""
        return list(self._top().values())

    def all_entries(self, types: Collection[str] | None = None) -> list[Entry]:
        index = self.index
        if types is None:
            stored = list(index.iter_all(self.fd))
        else:
            wanted = set(types)
            stored = list(index.iter_all(self.fd, [at for at, kind in enumerate(index.types) if kind in wanted]))
        top = [entry for entry in self._top_in_order() if entry["id"] not in index.position]
        if types is not None:
            top = [entry for entry in top if entry.get("type") in types]
        return [*stored, *top]

    def _keyed(
        self, kind: str, names: Collection[str], limit: int | None, matches: Callable[[Entry], bool]
    ) -> list[Entry]:
        """The entries the index lists under (``kind``, name) for ``names``, in
        append order (the first ``limit``), then the matching ones on top."""
        index = self.index
        # Each list is ascending: merged, the first ``limit`` cost what they are.
        merged = heapq.merge(*(index.keyed.get((kind, name), ()) for name in set(names)))
        positions = list(merged if limit is None else itertools.islice(merged, max(limit, 0)))
        found = index.read(self.fd, positions)
        if limit is None or len(found) < limit:
            top = [e for e in self._top_in_order() if e["id"] not in index.position and matches(e)]
            found += top if limit is None else top[: limit - len(found)]
        return found

    def custom_entries(
        self, custom_types: Collection[str], limit: int | None = None, *, ordered: bool = True
    ) -> list[Entry]:
        """``custom`` entries of ``custom_types`` from the index (``keyed_reads``)."""
        wanted = set(custom_types)
        return self._keyed(
            "custom", wanted, limit, lambda e: e.get("type") == "custom" and e.get("customType") in wanted
        )

    def tool_results(
        self, tool_names: Collection[str], limit: int | None = None, *, ordered: bool = True
    ) -> list[Entry]:
        """``message`` entries naming one of ``tool_names`` from the index (``keyed_reads``)."""
        wanted = set(tool_names)
        return self._keyed("tool", wanted, limit, lambda e: keyed_reads.names_tool(e, wanted))

    def entries_with_key(self, key: str) -> list[Entry]:
        """The entries whose key (``core/entry_keys.py``) is ``key``, from the index (``keyed_reads``)."""
        index = self.index
        at = index.key_at.get(key)
        found = index.read(self.fd, [] if at is None else at if at.__class__ is list else [at])
        top = [e for e in self._top_in_order() if e["id"] not in index.position and entry_keys.entry_key(e) == key]
        return [*found, *top]

    def keys_complete(self) -> bool:
        """Whether ``entries_with_key`` knows every entry's key (``keyed_reads``):
        the index computed them from every line under the rules in force."""
        return self.index.key_rules == entry_keys.signature()

    def iter_stored(self) -> Iterator[Entry]:
        """The file's entries in append order, read in bounded runs."""
        return self.index.iter_all(self.fd)

    def get(self, entry_id: str) -> Entry | None:
        top = self._top()
        if entry_id in top:
            return top[entry_id]
        at = self.index.position.get(entry_id)
        return self.index.read(self.fd, [at])[0] if at is not None else None

    def context_entries(self, leaf_entry_id: str) -> list[Entry] | None:
        """The entries the context at ``leaf_entry_id`` needs, from the index's
        path facts (their lines read by offset, together, nothing else)."""
        parents = self.parents()
        return context_path_in_memory(
            leaf_entry_id, self._facts_of, self._by_id(), segment_ids=self.entries, parent_of=parents.__getitem__
        )

    def entry_facts(self, ids: Collection[str]) -> dict[str, PathFacts]:
        """The index's path facts of the ``ids`` it knows (``keyed_reads``)."""
        return {i: facts for i in dict.fromkeys(ids) if (facts := self._facts_of(i)) is not None}

    def _top_children(self) -> dict[str, list[str]]:
        """Children among the entries not in the file's index yet (in flight, pending)."""
        out: dict[str, list[str]] = {}
        for entry_id, entry in self._top().items():
            parent_id = entry.get("parentId")
            if isinstance(parent_id, str) and entry_id not in self.index.position:
                out.setdefault(parent_id, []).append(entry_id)
        return out

    def children_of(self, ids: Collection[str]) -> dict[str, list[str]]:
        """Each of ``ids`` → its children, in append order, from the index (``keyed_reads``)."""
        index = self.index
        names, position = index.ids, index.position
        top = self._top_children()
        out: dict[str, list[str]] = {}
        for entry_id in ids:
            at = position.get(entry_id)
            kids = [names[child] for child in index.children_at(at)] if at is not None else []
            kids.extend(top.get(entry_id, ()))
            out[entry_id] = kids
        return out

    def child_ids(self, entry_id: str) -> list[str]:
        """``entry_id``'s children, from the index (``keyed_reads``)."""
        return self.children_of([entry_id])[entry_id]

    def subtree(self, entry_id: str, limit: int | None = None) -> dict[str, str | None]:
        """``entry_id`` and every entry below it → its parent, in append order,
        walked down the index's children (``keyed_reads``); the walk stops
        once it found more than ``limit``."""
        parents = self.parents()
        if entry_id not in parents:
            return {}
        index = self.index
        names, position = index.ids, index.position
        top = self._top_children()
        found: set[str] = {entry_id}
        stack = collections.deque([entry_id])  # level by level: a limited walk keeps the nearest levels
        while stack:
            current = stack.popleft()
            at = position.get(current)
            kids = [names[child] for child in index.children_at(at)] if at is not None else []
            for kid in (*kids, *top.get(current, ())):
                if kid not in found:
                    found.add(kid)
                    stack.append(kid)
            if limit is not None and len(found) > limit:
                break
        in_index = sorted(position[i] for i in found if i in position)
        ordered = [names[at] for at in in_index] + [i for i in self._top() if i in found and i not in position]
        return {i: parents[i] for i in ordered}

    def entry_types(self, ids: Collection[str]) -> dict[str, Any]:
        """Each known id's ``type``, from the index (``keyed_reads``)."""
        index, top = self.index, self._top()
        out: dict[str, Any] = {}
        for entry_id in ids:
            if entry_id in top:
                out[entry_id] = top[entry_id].get("type")
            elif (at := index.position.get(entry_id)) is not None:
                out[entry_id] = index.types[at]
        return out

    def root_ids(self, limit: int) -> list[str]:
        """The index's roots (``keyed_reads``), then one in flight without a parent."""
        index = self.index
        found = [index.ids[at] for at in index.roots[: max(limit, 0)]]
        found += [i for i, e in self._top().items() if i not in index.position and e.get("parentId") is None]
        return found[: max(limit, 0)]

    def count_types(self, types: Collection[str]) -> int:
        """Entries of ``types`` (``keyed_reads``): the index's counts by type
        (counted once per index, then kept up to date as entries arrive)."""
        index = self.index
        if index.type_counts is None:
            index.type_counts = collections.Counter(index.types)
        counts = index.type_counts
        top = sum(1 for i, e in self._top().items() if i not in index.position and e.get("type") in types)
        return sum(counts[kind] for kind in set(types)) + top

    def ids_in_order(
        self, start: int, limit: int, types: Collection[str] | None = None, *, before: bool = False
    ) -> list[tuple[int, str]]:
        """``keyed_reads.ids_in_order``: positions are the index's (the file's
        lines in order), then the entries on top of the file. Of some types,
        the index's types are scanned from ``start`` (in growing slices) until
        ``limit`` match: no payload is read."""
        index = self.index
        count = len(index)
        top = [
            (count + n, entry) for n, entry in enumerate(e for i, e in self._top().items() if i not in index.position)
        ]
        wanted = None if types is None else set(types)
        on_top = [(at, entry["id"]) for at, entry in top if wanted is None or entry.get("type") in wanted]
        if before:
            found = [pair for pair in on_top if pair[0] < start][-limit:]
            end = min(start, count)
            step = max(limit, 4096)
            while len(found) < limit and end > 0:
                begin = max(0, end - step)
                picked = self._positions(begin, end, wanted)
                found = [(at, index.ids[at]) for at in picked[-(limit - len(found)) :]] + found
                end = begin
                step *= 2
            return found
        found = []
        at = max(start, 0)
        step = max(limit, 4096)
        while len(found) < limit and at < count:
            end = min(count, at + step)
            found += [(p, index.ids[p]) for p in self._positions(at, end, wanted)[: limit - len(found)]]
            at = end
            step *= 2
        found += [pair for pair in on_top if pair[0] >= start][: limit - len(found)]
        return found

    def latest_tips(self, limit: int, scan: int) -> list[tuple[int, str]]:
        """``keyed_reads.latest_tips``: the index's children flags, from the end."""
        index = self.index
        top = [entry for entry_id, entry in self._top().items() if entry_id not in index.position]
        count = len(index)
        # Entries on top of the file: the last of them has no child; the others are parents of the next.
        found: list[tuple[int, str]] = []
        parents_on_top = {entry.get("parentId") for entry in top}
        for n in range(len(top) - 1, -1, -1):
            if len(found) < limit and top[n]["id"] not in parents_on_top:
                found.append((count + n, top[n]["id"]))
        has_child, ids = index.has_child, index.ids
        for at in range(count - 1, max(count - max(scan - len(top), 0), 0) - 1, -1):
            if len(found) >= limit:
                break
            if not has_child[at] and ids[at] not in parents_on_top:
                found.append((at, ids[at]))
        return found

    def _positions(self, begin: int, end: int, wanted: set[str] | None) -> list[int]:
        """The positions ``begin`` … ``end - 1`` of the index whose type is ``wanted`` (all with ``None``)."""
        if wanted is None:
            return list(range(begin, end))
        return [at for at, kind in enumerate(self.index.types[begin:end], begin) if kind in wanted]

    def position_of(self, entry_id: str) -> int | None:
        """``keyed_reads.position_of``: the index's position, or past it for the entries on top."""
        index = self.index
        at = index.position.get(entry_id)
        if at is not None:
            return at
        for n, known in enumerate(i for i in self._top() if i not in index.position):
            if known == entry_id:
                return len(index) + n
        return None

    def entries_targeting_any(self, target_ids: Collection[str], types: Collection[str]) -> list[Entry]:
        """The entries of ``types`` aimed at any of ``target_ids``, by the index's keys (``keyed_reads``)."""
        wanted, kinds = set(target_ids), set(types)
        return [
            entry
            for entry in self._keyed("target", wanted, None, lambda e: e.get("targetId") in wanted)
            if entry.get("type") in kinds
        ]

    def entries_targeting(self, target_id: str, types: Collection[str]) -> list[Entry]:
        """The entries of ``types`` aimed at ``target_id`` (labels, context
        edits), by the index's keys (``keyed_reads``)."""
        wanted = set(types)
        return [
            entry
            for entry in self._keyed("target", [target_id], None, lambda e: e.get("targetId") == target_id)
            if entry.get("type") in wanted
        ]

    def ancestor_at(self, entry_id: str, depth: int) -> str | None:
        """``path_facts.ancestor_at`` over the index (``keyed_reads``)."""
        parents = self.parents()
        return ancestor_at(entry_id, depth, self._facts_of, parents.get)

    def _facts_of(self, entry_id: str) -> PathFacts | None:
        if self.in_flight_entry is not None and entry_id == self.in_flight_entry["id"]:
            return child_facts(self.in_flight_entry, _FactsById(self.index))
        return self.index.facts_of(entry_id)

    def known_ids(self, named: Collection[str]) -> Mapping[str, Any]:
        return self._by_id()


class FileWrite(FileView):
    """One session locked for writing: lines to append, the row to update."""

    def __init__(self, row: _Row, index: FileIndex, fd: int) -> None:
        super().__init__(row, index, fd)
        self.pending: list[tuple[Entry, bytes]] = []
        self.pending_by_id: dict[str, Entry] = {}
        self.pending_with_children: set[str] = set()
        self.row_changed = False

    def _top(self) -> Mapping[str, Entry]:
        if self.in_flight_entry is None:
            return self.pending_by_id
        top = dict(self.pending_by_id)
        top[self.in_flight_entry["id"]] = self.in_flight_entry
        return top

    def new_entry_id(self) -> str:
        return new_entry_id(self._by_id())

    def _count_child_of(self, parent_id: str | None, entry: Entry) -> None:
        state = self.state
        if parent_id is None:
            state.branch_count += 1
            if state.root_entry_id is None:
                state.root_entry_id = entry["id"]
        elif self.index.has_children(parent_id) or parent_id in self.pending_with_children:
            state.branch_count += 1  # a sibling: one more tip
        else:
            self.pending_with_children.add(parent_id)  # the parent stops being a tip
        if entry.get("type") == "compaction":
            state.compaction_count += 1
        state.entry_count += 1

    def insert(self, entry: Entry, *, generated_id: bool = False, line: bytes | None = None) -> Entry:
        self.pending.append((entry, line if line is not None else serialize_line(entry)))
        self.pending_by_id[entry["id"]] = entry
        self._count_child_of(entry.get("parentId"), entry)
        self.state.leaf_entry_id = entry["id"]
        self.row_changed = True
        return entry

    def in_flight(self) -> Entry | None:
        return self.in_flight_entry

    def insert_in_flight(self, entry: Entry, *, generated_id: bool = False) -> Entry:
        self.in_flight_entry = entry
        self.state.in_flight_entry_id = entry["id"]
        self.state.leaf_entry_id = entry["id"]
        self.row_changed = True
        return entry

    def replace_in_flight(self, entry: Entry, *, complete: bool, line: bytes | None = None) -> None:
        if complete:
            self.in_flight_entry = None
            self.state.in_flight_entry_id = None
            self.insert(entry, line=line)
        else:
            self.in_flight_entry = entry
        self.row_changed = True

    def discard_in_flight(self) -> Entry:
        # The streaming entry lives in the meta row only: the file never saw it.
        entry = self.in_flight_entry
        assert entry is not None  # the template checks it first
        self.in_flight_entry = None
        self.state.in_flight_entry_id = None
        self.state.leaf_entry_id = entry.get("parentId")
        self.row_changed = True
        return entry

    def set_leaf(self, entry_id: str | None) -> None:
        if entry_id is not None and entry_id not in self._by_id():
            raise EntryNotFound(f"Entry {entry_id} not found in session {self.state.session_id}")
        self.state.leaf_entry_id = entry_id
        self.row_changed = True

    def unseen_entries(self) -> list[Entry]:
        """Entries the file holds beyond those its row has seen: lines a
        writer that bypassed this storage appended (Pi itself, or one killed
        between its line and its row update). This unit's row update
        records them, so this unit indexes them."""
        recorded = self.row.meta.entry_count
        index = self.index
        return index.read(self.fd, range(recorded, len(index))) if len(index) > recorded else []

    def row_params(self) -> list[Any]:
        state = self.state
        in_flight = orjson.dumps(self.in_flight_entry).decode() if self.in_flight_entry is not None else None
        self.written_at = timezone.now()
        return [
            state.leaf_entry_id,
            state.root_entry_id,
            state.entry_count,
            state.branch_count,
            state.compaction_count,
            in_flight,
            state.first_message_preview,
            connection.ops.adapt_datetimefield_value(self.written_at),
            state.session_id,
        ]


# --- the storage ------------------------------------------------------------------------


class FileStorage:
    kind = KIND

    def __init__(self, root: str | os.PathLike[str] | None = None, *, fsync: bool | None = None) -> None:
        self._root = Path(root) if root is not None else None
        self._fsync = fsync

    # --- configuration ------------------------------------------------------------------
    @property
    def root(self) -> Path:
        root = self._root if self._root is not None else Path(settings.SESSIONTREE_FILE_ROOT)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailable(f"Session folder {root} cannot be created ({exc.strerror})") from None
        return root

    @property
    def fsync(self) -> bool:
        if self._fsync is not None:
            return self._fsync
        return getattr(settings, "SESSIONTREE_FSYNC", "never") == "always"

    def path_for(self, session_id: str) -> Path:
        """Where a new session's file goes; never outside the root, whatever the id says."""
        meta.validate_session_id(session_id)
        root = self.root.resolve()
        path = root / f"{session_id}.jsonl"
        if path.parent != root:  # pragma: no cover - validate_session_id already refuses separators
            raise InvalidSessionId(f"Invalid session id {session_id!r}")
        return path

    def _path(self, row: _Row) -> Path:
        """The session's file: the one its row names (a Pi file indexed in
        place), else ``<root>/<id>.jsonl``."""
        return _file_path(row.meta.session_file) if row.meta.session_file else self.path_for(row.session_id)

    # --- index ------------------------------------------------------------------------
    def _refresh(self, path: Path, fd: int) -> FileIndex:
        """The up-to-date index of the file open as ``fd``: cached, else
        from the file's sidecar (``file_sidecar``), else loaded from the
        whole file; then the lines appended since are read."""
        st = os.fstat(fd)
        key = str(path)
        cached = _cached_index(key)
        sidecar = file_sidecar.enabled()
        if cached is None and sidecar:
            # What the sidecar and the tail read build is kept: promoted as a load's is (gc_paused).
            with gc_paused(promote=True):
                loaded = file_sidecar.load(path, fd, st, FileIndex)
                if loaded is not None:
                    self._extend_from_tail(path, fd, st, loaded, sidecar=sidecar)
                    _keep_index(key, loaded)  # once whole: the cache's bound counts its entries
                    return loaded
        if cached is not None and cached.inode == st.st_ino and st.st_size >= cached.size:
            return self._extend_from_tail(path, fd, st, cached, sidecar=sidecar)
        if cached is not None:  # replaced (an erase, a migration) or cut: its payloads are stale
            _forget(path)
        index = self._load(path, fd, st)
        _keep_index(key, index)
        if sidecar:
            file_sidecar.save(path, fd, index)
        return index

    @staticmethod
    def _extend_from_tail(path: Path, fd: int, st: os.stat_result, index: FileIndex, *, sidecar: bool) -> FileIndex:
        """``index`` (of the same file, up to ``index.size``) with the lines appended since."""
        if st.st_size == index.size and st.st_mtime_ns == index.mtime_ns:
            return index
        spans: list[int] = []
        reader = SessionReader(offset=index.offset, after_header=True, spans=spans)
        tail: list[Entry] = []
        for chunk_entries, _ in read_chunks(fd, reader, size=st.st_size):
            tail += chunk_entries
        index.extend(tail, spans)
        index.offset = reader.offset
        index.size, index.mtime_ns = st.st_size, st.st_mtime_ns
        if sidecar and file_sidecar.due(index):
            file_sidecar.save(path, fd, index)
        return index

    def _load(self, path: Path, fd: int, st: os.stat_result) -> FileIndex:
        """One pass over the file: each chunk's entries enter the index (which
        keeps their skeleton and lines' places) and are dropped, but for the
        newest ones the payload cache keeps."""
        spans: list[int] = []
        reader = SessionReader(spans=spans)
        index: FileIndex | None = None
        budget = _payloads.budget()
        # The entries of the file's last ``budget`` bytes, for the payload
        # cache: (first position, entries, line lengths). Only those are kept
        # while the pass goes on; the others are dropped with their chunk, so
        # the pass works on a chunk's worth of objects, not a budget's (a
        # window of the newest chunks kept as it moved, 16 MiB of lines,
        # cost ~50 ms of a first load at 100,000 entries: objects freed long
        # after they were made, far from the cache).
        keep_from = st.st_size - budget if budget > 0 else st.st_size + 1
        newest: list[tuple[int, list[Entry], list[int]]] = []
        # What the payload cache keeps is long-lived: it goes straight to the
        # oldest collector generation instead of being walked on the way.
        with gc_paused(promote=True):
            for chunk_entries, _ in read_chunks(fd, reader, size=st.st_size, chunk_bytes=_LOAD_CHUNK):
                if index is None:
                    header = reader.header
                    if header is None:
                        continue  # no header yet (lines Pi skips before it)
                    if migrate_to_current_version([dict(header)]):
                        # Rewritten as v3 (under the exclusive lock): read anew.
                        self._migrate(path, fd, st)
                        raise _FileReplaced
                    index = FileIndex(
                        inode=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns, offset=0, header=header
                    )
                first = len(index)
                index.extend(chunk_entries, spans, keep=False)
                if chunk_entries and spans[-2] >= keep_from:
                    kept = 0
                    while spans[2 * kept] < keep_from:
                        kept += 1
                    newest.append((first + kept, chunk_entries[kept:], spans[2 * kept + 1 :: 2]))
                spans.clear()
            if index is None:
                raise CorruptSessionTree(f"{path.name} is not a Pi session file ({reader.reason})")
            for first, chunk_entries, lengths in newest:
                _payloads.keep_many(
                    index.token, list(zip(range(first, first + len(lengths)), chunk_entries, lengths, strict=True))
                )
        index.offset = reader.offset
        return index

    def _migrate(self, path: Path, fd: int, st: os.stat_result) -> tuple[dict[str, Any], list[Entry]]:
        """Rewrite a v1/v2 file as v3 once, as Pi does: ids the v1 migration
        invents must be the same in every process from now on.

        Lines the reader skips (malformed, stray headers, torn) would be lost
        by the rewrite, so when there are any the original bytes are kept
        beside the file as ``<name>.pre-v3.bak`` first."""
        # Under the exclusive lock, re-read: another process may have migrated first.
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.stat(path).st_ino != st.st_ino:
            raise _FileReplaced
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        read = read_session_bytes(data)
        if read.header is None:
            raise CorruptSessionTree(f"{path.name} is not a Pi session file ({read.reason})")
        objs = [read.header, *read.entries]
        migrate_to_current_version(objs)
        dropped = read.skipped_lines + (1 if read.torn_bytes else 0)
        if dropped:
            backup = path.with_name(path.name + ".pre-v3.bak")
            if not backup.exists():
                backup.write_bytes(data)
                logger.warning(
                    "Migrating %s to v3 drops %d unreadable line(s); original kept as %s",
                    path.name,
                    dropped,
                    backup.name,
                )
        tmp = path.with_name(path.name + ".migrating")
        tmp.write_bytes(serialize_file(objs))
        os.replace(tmp, path)
        file_sidecar.delete(path)
        return objs[0], objs[1:]

    @contextmanager
    def _open(self, path: Path, session_id: str, *, exclusive: bool) -> Iterator[tuple[int, FileIndex]]:
        """The file open and locked (shared or exclusive), with its index.

        Refuses what must never be followed or read as a session: a symbolic
        link (writes would land in another file), a folder, anything that is
        not a regular file."""
        flags = (os.O_RDWR | os.O_APPEND if exclusive else os.O_RDONLY) | os.O_NOFOLLOW
        while True:
            try:
                fd = os.open(path, flags)
            except FileNotFoundError:
                raise SessionNotFound(f"Session {session_id} has no file {path.name}") from None
            except OSError as exc:
                raise _storage_error(path, exc) from None
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise CorruptSessionTree(f"{path.name} of session {session_id} is not a regular file")
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                # A migration may have renamed a new file over the one we
                # opened while we waited for the lock: start again on it.
                if st.st_ino != os.stat(path).st_ino:
                    continue
                if os.path.lexists(_intent_path(path)):  # a writer died in its write
                    if exclusive:
                        _settle_intent(path, fd, session_id)
                    else:
                        fcntl.flock(fd, fcntl.LOCK_UN)  # our own shared lock would block the exclusive one
                        self._settle_exclusively(path, session_id)
                        continue
                try:
                    index = self._refresh(path, fd)
                except _FileReplaced:
                    continue
                except OSError as exc:
                    raise _storage_error(path, exc) from None
                if index.inode != os.fstat(fd).st_ino:
                    continue
                yield fd, index
                return
            finally:
                os.close(fd)

    @staticmethod
    def _settle_exclusively(path: Path, session_id: str) -> None:
        """A reader found a dead writer's intent: settle it under an exclusive lock."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
        except OSError as exc:
            raise _storage_error(path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                _settle_intent(path, fd, session_id)
        finally:
            os.close(fd)

    # --- port: reads ---------------------------------------------------------------------
    def read(self, session_id: str) -> AbstractContextManager[FileView]:
        return self._read(_select_row(session_id))

    @contextmanager
    def _read(self, row: _Row) -> Iterator[FileView]:
        path = self._path(row)
        with self._open(path, row.session_id, exclusive=False) as (_fd, index):
            _remember_path(row.session_id, path)
            yield FileView(row, index, _fd)

    def session(self, session_id: str) -> SessionTreeSession:
        """The session's meta with the leaf and counts as its file says; as
        stored in the row when the file cannot be read (it may be damaged:
        the meta stays inspectable, reads of entries say what is wrong)."""
        row = _select_row(session_id)  # SessionNotFound: no such session
        try:
            with self._read(row) as view:
                return view.session()
        except SessionTreeError:
            return row.meta.session()

    def header(self, session_id: str) -> dict[str, Any]:
        with self.read(session_id) as view:
            return dict(view.index.header)

    # --- port: writes --------------------------------------------------------------------
    def write(self, session_id: str, work: Callable[[FileWrite], T], *, before_commit: BeforeCommit | None) -> T:
        """Lock the file, read the row once (under the lock), run ``work``, commit.

        The file to lock comes from where this process last found it; the
        row read under the lock confirms it, or names the file to start again
        on. Unknown: the row is read first (``SessionNotFound`` before any
        file is touched). A database conflict, or a connection lost before
        the COMMIT, runs it all again (``db_errors.retrying``)."""
        return db_errors.retrying(lambda: self._write_once(session_id, work, before_commit), what="File write")

    def _write_once(self, session_id: str, work: Callable[[FileWrite], T], before_commit: BeforeCommit | None) -> T:
        path = _known_path(session_id)
        confirmed = path is None
        if path is None:
            path = self._path(_select_row(session_id))
        while True:
            try:
                with self._open(path, session_id, exclusive=True) as (fd, index):
                    row = _select_row(session_id)  # under the lock: what no writer changes meanwhile
                    actual = self._path(row)
                    if actual != path:  # the session's file is elsewhere now (re-created)
                        path, confirmed = actual, True
                        continue
                    _remember_path(session_id, path)
                    txn = FileWrite(row, index, fd)
                    result = work(txn)
                    if txn.row_changed or txn.pending or before_commit is not None or _drifted(txn):
                        self._commit(path, fd, txn, before_commit)
                    return result
            except SessionNotFound:
                if confirmed:
                    raise
                # The remembered file is gone: ask the row where it is (or whether the session is).
                _forget_path(session_id)
                path, confirmed = self._path(_select_row(session_id)), True

    def _commit(self, path: Path, fd: int, txn: FileWrite, before_commit: BeforeCommit | None) -> None:
        """The row update, ``before_commit``'s writes and the lines, together.

        The lines are written last inside the database transaction: a failed
        write rolls the row back, and a failed commit cuts the lines off again
        (we still hold the lock, so they are the file's last bytes). A failed
        COMMIT is settled by the write's intent (``_settle_intent``): a lost
        answer of a COMMIT that happened is the write done; one that did not
        happen, a lost connection before the commit (run again by
        ``db_errors.retrying``)."""
        index = txn.index
        start = os.fstat(fd).st_size
        grown_meanwhile = start != index.size  # a writer ignoring our lock (Pi) appended since the refresh
        end: int | None = None
        intent: Path | None = None
        committing = False
        try:
            with db_errors.atomic_unit():
                if txn.row_changed or txn.pending or _drifted(txn):
                    with connection.cursor() as cursor:
                        cursor.execute(_UPDATE_ROW, txn.row_params())
                unseen = txn.unseen_entries()
                if unseen:  # lines a foreign writer appended: indexed by the unit that first sees them
                    search_index.add_entries(txn.state.session_id, unseen)
                if before_commit is not None:
                    before_commit(txn)
                if txn.pending:
                    intent = _write_intent(path, start, txn, fsync=self.fsync)
                    end = start  # from here on, bytes may be in the file
                    end = append_lines(fd, [line for _, line in txn.pending], fsync=self.fsync)
                committing = True
        except BaseException as exc:
            if end is not None and committing:
                # The COMMIT itself failed: it may have happened all the same
                # (a connection lost while the server committed). The row
                # says which, once the server has ended the transaction.
                _forget(path)
                try:
                    committed = _settle_intent(path, fd, txn.row.session_id)
                except Exception:
                    committed = None
                    logger.warning("%s: whether a write committed is unknown; the next lock settles it", path.name)
                if isinstance(exc, CommitOutcomeUnknown) and committed is not None:
                    if committed:
                        return  # it did: the write stands (its lines stay), as if the answer had come
                    # It did not, and its lines are cut: a lost connection before the commit, which may run again.
                    raise db_errors.not_committed(exc) from exc
            elif end is not None:
                self._cut_back(path, fd, start)
            if intent is not None and not committing:
                _remove_intent(intent)
            raise
        if intent is not None:
            _remove_intent(intent)
        if not txn.pending:
            return
        st = os.fstat(fd)
        if grown_meanwhile or st.st_size != end:
            # Foreign lines sit before or after ours: forget this index so the
            # next read loads the file whole instead of skipping past them.
            _forget(path)
            return
        lines = [line for _, line in txn.pending]
        spans: list[int] = []
        offset = end - sum(len(line) for line in lines)  # after the newline append_lines may have put first
        for line in lines:
            spans += (offset, len(line) - 1)
            offset += len(line)
        index.extend([entry for entry, _ in txn.pending], spans)
        index.offset = end
        index.size, index.mtime_ns = st.st_size, st.st_mtime_ns
        if file_sidecar.enabled() and file_sidecar.due(index):
            file_sidecar.save(path, fd, index)

    @staticmethod
    def _cut_back(path: Path, fd: int, size: int) -> None:
        """Undo this write's lines: truncate to ``size`` (we hold the lock)."""
        _forget(path)
        file_sidecar.delete(path)
        try:
            os.ftruncate(fd, size)
        except OSError:  # pragma: no cover - the original error matters more
            logger.exception("Could not cut %s back to %d bytes after a failed write", path.name, size)

    def create(
        self,
        row_fields: dict[str, Any],
        header: dict[str, Any],
        entries: list[Entry],
        *,
        before_commit: Callable[[SessionTreeSession], None] | None,
    ) -> SessionTreeSession:
        return db_errors.retrying(
            lambda: self._create_once(row_fields, header, entries, before_commit), what="Session creation"
        )

    def _create_once(
        self,
        row_fields: dict[str, Any],
        header: dict[str, Any],
        entries: list[Entry],
        before_commit: Callable[[SessionTreeSession], None] | None,
    ) -> SessionTreeSession:
        session_id = row_fields["session_id"]
        path = self.path_for(session_id)
        data = serialize_file([header, *entries])
        stats = tree_stats(entries)
        created = False
        try:
            with db_errors.atomic_unit():
                row = meta.create_row(
                    provider=KIND,
                    session_file=str(path),
                    header=header,
                    stats=stats,
                    leaf_entry_id=entries[-1]["id"] if entries else None,
                    **row_fields,
                )
                session = meta.to_session_dict(row)
                if before_commit is not None:
                    before_commit(session)
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW, 0o644)
                except FileExistsError:
                    raise SessionAlreadyExists(
                        f"Session {session_id} already has a file {path.name} (register it with sync_sessions)"
                    ) from None
                except OSError as exc:
                    raise _storage_error(path, exc) from None
                created = True
                try:
                    append_lines(fd, [data], fsync=self.fsync)
                finally:
                    os.close(fd)
        except BaseException:
            if created:
                path.unlink(missing_ok=True)
            raise
        _remember_path(session_id, path)
        return session

    def register_existing_file(
        self,
        session_id: str,
        *,
        path: str | os.PathLike[str] | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
        **fields: Any,
    ) -> SessionTreeSession:
        """Create the meta row for a Pi file that is already there (in the
        root as ``<id>.jsonl``, or at ``path``): the leaf is the last entry, as
        Pi resumes a session; the header gives cwd and parent."""
        file_path = Path(path) if path is not None else self.path_for(session_id)
        meta.validate_session_id(session_id, new=True)
        with self._open(file_path, session_id, exclusive=True) as (fd, index):
            header = index.header
            stats = index.stats
            with transaction.atomic():
                row = meta.create_row(
                    provider=KIND,
                    session_id=session_id,
                    cwd=fields.pop("cwd", header.get("cwd")),
                    agent_id=fields.pop("agent_id", None),
                    user_id=fields.pop("user_id", None),
                    title=fields.pop("title", None),
                    parent_session_id=header.get("parentSession"),
                    metadata=fields.pop("metadata", None),
                    session_file=str(file_path),
                    header=header,
                    stats=stats,
                    leaf_entry_id=index.last_id,
                    first_message_preview=first_message_preview(index.iter_all(fd)),
                )
                search_index.add_entries(session_id, index.iter_all(fd))
                session = meta.to_session_dict(row)
                if before_commit is not None:
                    before_commit(session)
        _remember_path(session_id, file_path)
        return session

    def destroy(self, session_id: str, *, before_commit: Callable[[], None] | None) -> None:
        """Delete the row and the file, both or neither. The file may be
        corrupt (it is never parsed here) but must be a plain file."""
        db_errors.retrying(lambda: self._destroy_once(session_id, before_commit), what="Session deletion")

    def _destroy_once(self, session_id: str, before_commit: Callable[[], None] | None) -> None:
        row = _select_row(session_id)
        path = self._path(row)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise CorruptSessionTree(
                f"{path.name} of session {session_id} is not a regular file; nothing was deleted "
                "(move it away, then delete the session again)"
            )
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW) if st is not None else None
        try:
            if fd is not None:
                # Wait for a writer that is mid-append.
                fcntl.flock(fd, fcntl.LOCK_EX)
            parked = path.with_name(path.name + ".deleting")
            if fd is not None:
                os.replace(path, parked)
            try:
                with db_errors.atomic_unit():
                    meta.delete_row(meta.get_row(session_id, provider=KIND))
                    if before_commit is not None:
                        before_commit()
            except BaseException:
                if fd is not None:
                    os.replace(parked, path)
                raise
            if fd is not None:
                parked.unlink(missing_ok=True)
            # The copies this storage wrote of the file go with it (a hard delete keeps nothing).
            for backup in _backups_of(path):
                backup.unlink(missing_ok=True)
            file_sidecar.delete(path)
        finally:
            if fd is not None:
                os.close(fd)
        _forget(path)
        _forget_path(session_id)

    def stored_files(self, session_id: str) -> list[str]:
        """The files that hold the session: its own file (when it exists) and the backups this storage wrote of it."""
        path = self._path(_select_row(session_id))
        return [str(p) for p in [path, *_backups_of(path)] if p.is_file()]

    # --- port: maintenance -------------------------------------------------------------
    def scan(self, session_id: str) -> StoredScan:
        """The file's bytes under a shared lock, scanned as Pi reads them (a
        torn last line and malformed lines are reported, not skipped), at v3."""
        row = _select_row(session_id)
        path = self._path(row)
        recorded = row.meta
        in_flight_id = row.in_flight_entry.get("id") if row.in_flight_entry is not None else None
        counts = MetaCounts(
            entry_count=recorded.entry_count,
            branch_count=recorded.branch_count,
            compaction_count=recorded.compaction_count,
            leaf_entry_id=None if recorded.leaf_entry_id == in_flight_id else recorded.leaf_entry_id,
        )
        found = StoredScan(session_id=session_id, provider=KIND, counts=counts, entries=[], location=str(path))
        try:
            data = _read_locked(path)
        except FileNotFoundError:
            found.missing = f"its file {path} does not exist"
            return found
        scanned = scan_session_bytes(data)
        found.scanned = scanned
        if scanned.header is not None:
            entries = scanned.entries
            if (scanned.header.get("version") or 1) < 3:
                objs = [dict(scanned.header), *entries]
                migrate_to_current_version(objs)
                entries = objs[1:]
            found.entries = entries
        return found

    def cut_torn_tail(
        self, session_id: str, *, before_commit: Callable[[TornTailCut], None] | None
    ) -> TornTailCut | None:
        """Cut the bytes after the last newline under the file's exclusive
        lock (writers wait), once the whole file is safe in a backup beside it;
        ``before_commit``'s writes and the cut are one unit (a failed cut
        rolls them back)."""
        path = self._path(_select_row(session_id))
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise SessionNotFound(f"Session {session_id} has no file {path.name}") from None
        except OSError as exc:
            raise _storage_error(path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = os.pread(fd, os.fstat(fd).st_size, 0)
            complete = whole_lines_end(data)
            if not data[complete:].strip():
                return None  # finished meanwhile by its writer: nothing torn any more
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            backup = path.with_name(f"{path.name}.torn-{stamp}.bak")
            backup_fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(backup_fd, view) :]
                os.fsync(backup_fd)
            finally:
                os.close(backup_fd)
            cut = TornTailCut(session_id, len(data) - complete, str(backup), backup.name)
            with transaction.atomic():
                if before_commit is not None:
                    before_commit(cut)
                os.ftruncate(fd, complete)  # last: a failure here rolls the database writes back
                os.fsync(fd)
        finally:
            os.close(fd)
            _forget(path)  # the parsed copy of the file is stale now
            file_sidecar.delete(path)
        return cut

    # --- port: erase --------------------------------------------------------------------
    def erase(
        self, session_id: str, erasure: EntryErasure, *, before_commit: Callable[[ErasureDone], None] | None
    ) -> ErasureDone:
        """Rewrite the selected entries' lines under the file's exclusive lock:
        the file is written anew beside itself (``<name>.erasing``, fsynced)
        and renamed over itself last inside the database transaction that
        updates the row and runs ``before_commit``; the backups this storage
        wrote of the file (``.pre-v3.bak``, ``.torn-*.bak``) likewise. Lines
        that are no entry pass through ``erasure.erase_line``. Other
        processes notice the new inode and read the file again."""
        path = self._path(_select_row(session_id))
        while True:
            with self._open(path, session_id, exclusive=True) as (fd, index):
                row = _select_row(session_id)  # under the lock
                actual = self._path(row)
                if actual != path:
                    path = actual
                    continue
                return self._erase_locked(path, fd, FileWrite(row, index, fd), erasure, before_commit)

    def _erase_locked(
        self,
        path: Path,
        fd: int,
        txn: FileWrite,
        erasure: EntryErasure,
        before_commit: Callable[[ErasureDone], None] | None,
    ) -> ErasureDone:
        index = txn.index
        session_id = txn.state.session_id
        replacements = dict(erasure.select(txn))
        in_flight = txn.in_flight_entry
        if in_flight is not None and in_flight["id"] in replacements:
            raise ImmutableEntry(
                f"Entry {in_flight['id']} of session {session_id} is in flight: complete or abort it first"
            )
        for entry_id in replacements:
            if entry_id not in index:
                raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        done = ErasureDone(session_id=session_id)
        temps: list[tuple[Path, Path]] = []  # (written, to be renamed over)
        try:
            written = self._rewrite_file(path, fd, replacements, erasure, done)
            if written is not None:
                temps.append((written, path))
            for backup in _backups_of(path):
                cleaned = _rewrite_backup(backup, erasure)
                if cleaned is not None:
                    temps.append((cleaned, backup))
                    done.backups.append(str(backup))
            if not temps:
                return done
            if done.erased:
                now = {erased.entry_id: erased.entry for erased in done.erased}
                txn.state.first_message_preview = first_message_preview(now.get(e["id"], e) for e in txn.iter_stored())
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(_UPDATE_ROW, txn.row_params())
                if before_commit is not None:
                    before_commit(done)
                # Last: a failed rename rolls the database writes back.
                while temps:
                    temp, target = temps[0]
                    os.replace(temp, target)
                    temps.pop(0)
                _fsync_folder(path.parent)
        finally:
            for temp, _target in temps:
                temp.unlink(missing_ok=True)
            _forget(path)  # the parsed copy of the file is stale now
            file_sidecar.delete(path)  # and so is its persisted index (another inode now)
        return done

    def _rewrite_file(
        self, path: Path, fd: int, replacements: dict[str, Entry], erasure: EntryErasure, done: ErasureDone
    ) -> Path | None:
        """The session file written anew beside itself with the selected
        entries' lines replaced (``done`` says which, with the SHA-256 of
        each old line) and other lines that are no entry cleaned; ``None``
        (nothing written) when no byte changes."""
        st = os.fstat(fd)
        temp = path.with_name(path.name + ".erasing")
        out = _create_replacement(temp, st.st_mode)
        remaining = dict(replacements)
        changed = False
        header_seen = False
        complete = 0
        size = 0
        try:
            for line in _lines(fd, st.st_size):
                body = line.rstrip(b"\r\n")
                value = decode_line(body)
                new: bytes | None = None
                if not header_seen and isinstance(value, dict) and is_session_header(value):
                    header_seen = True
                elif header_seen and type(value) is dict and value.get("type") != "session":
                    entry_id = value.get("id")
                    replacement = remaining.pop(entry_id, None) if isinstance(entry_id, str) else None
                    if replacement is not None:
                        new = serialize_line(replacement)
                        done.erased.append(ErasedEntry(value["id"], hashlib.sha256(body).hexdigest(), replacement))
                elif value is not BLANK:
                    new = erasure.erase_line(line)
                    if new is not None:
                        done.lines_cleaned += 1
                if new is not None and new != line:
                    changed = True
                    line = new if line.endswith(b"\n") or not new.endswith(b"\n") else new[:-1]
                _write_all(out, line)
                size += len(line)
                if line.endswith(b"\n") or (value is not BLANK and value is not MALFORMED):
                    complete = size  # a last line without its newline counts when it parses (Pi reads it)
            if remaining:
                raise CorruptSessionTree(
                    f"{path.name}: entries {', '.join(sorted(remaining))} of its index were not found in the file"
                )
            if not changed:
                return None
            os.fsync(out)
            written = os.fstat(out)
        except BaseException:
            os.close(out)
            temp.unlink(missing_ok=True)
            raise
        os.close(out)
        done.file = RewrittenFile(str(path), written.st_size, written.st_mtime_ns, written.st_ino, complete)
        return temp

    def recount(self, session_id: str) -> MetaRecount:
        with self.read(session_id) as view:
            return view.recount()

    def recompute_meta(self, session_id: str, *, before_commit: Callable[[MetaRecount], None] | None) -> MetaRecount:
        """The row rewritten as the file says (a committed write stores the
        file's counts and leaf anyway: this one commits even when nothing
        else changes); a missing preview is taken from the file's entries."""
        recounts: list[MetaRecount] = []

        def work(txn: FileWrite) -> None:
            txn.row_changed = True
            if txn.state.first_message_preview is None:
                txn.state.first_message_preview = first_message_preview(txn.iter_stored())

        def commit(txn: StoredWrite) -> None:
            assert isinstance(txn, FileWrite)
            recounts[:] = [txn.recount()]
            if before_commit is not None:
                before_commit(recounts[0])

        self.write(session_id, work, before_commit=commit)
        return recounts[0]


def _read_locked(path: Path) -> bytes:
    """A file's bytes under a shared lock (no writer mid-line meanwhile);
    ``FileNotFoundError`` when it is not there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StorageUnavailable(f"{path.name}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return os.pread(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def _lines(fd: int, size: int, chunk: int = 8 * 1024 * 1024) -> Iterator[bytes]:
    """The file's lines, each with its newline (the last one may lack it)."""
    offset = 0
    rest = b""
    while offset < size:
        data = os.pread(fd, min(chunk, size - offset), offset)
        if not data:
            break
        offset += len(data)
        lines = (rest + data).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line + b"\n"
    if rest:
        yield rest


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _create_replacement(temp: Path, mode: int) -> int:
    """A new file beside the one it replaces (a leftover of a crash is overwritten)."""
    try:
        return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, stat.S_IMODE(mode))
    except OSError as exc:
        raise _storage_error(temp, exc) from None


def _fsync_folder(folder: Path) -> None:
    """Make renames in ``folder`` durable (an erased file must not come back after a crash)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - a folder we just wrote into
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on folders
        pass
    finally:
        os.close(fd)


def _backups_of(path: Path) -> list[Path]:
    """The copies this storage wrote of a session file: the original of a
    v1/v2 migration (``<name>.pre-v3.bak``) and repairs' copies before a
    torn line was cut (``<name>.torn-<time>.bak``)."""
    found = [path.with_name(path.name + ".pre-v3.bak")]
    found += sorted(path.parent.glob(glob.escape(path.name) + ".torn-*.bak"))
    return [backup for backup in found if backup.is_file() and not backup.is_symlink()]


def _rewrite_backup(backup: Path, erasure: EntryErasure) -> Path | None:
    """A backup written anew beside itself without the erased entries'
    lines (``None``: it holds none of them)."""
    try:
        fd = os.open(backup, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise _storage_error(backup, exc) from None
    try:
        st = os.fstat(fd)
        lines = list(_lines(fd, st.st_size))
    finally:
        os.close(fd)
    changed = False
    for number, line in enumerate(lines):
        new = erasure.erase_line(line)
        if new is not None and new != line:
            lines[number] = new
            changed = True
    if not changed:
        return None
    temp = backup.with_name(backup.name + ".erasing")
    out = _create_replacement(temp, st.st_mode)
    try:
        _write_all(out, b"".join(lines))
        os.fsync(out)
    except BaseException:
        os.close(out)
        temp.unlink(missing_ok=True)
        raise
    os.close(out)
    return temp


# --- a writer's intent: lines that are not the file's until their row commits -----------

_INTENT_SUFFIX = ".writing"
_SELECT_COUNT_LOCKED = (
    f"SELECT {_q('entry_count')} FROM {meta.TABLE} WHERE {_q('session_id')} = %s AND {_q('provider')} = %s"
)


def _intent_path(path: Path) -> Path:
    return path.with_name(path.name + _INTENT_SUFFIX)


def _write_intent(path: Path, start: int, txn: FileWrite, *, fsync: bool) -> Path:
    """Say, before the first byte, where this write's lines start, which
    entries they are and the row's entry count once they are committed."""
    intent = _intent_path(path)
    record = {"start": start, "entry_count": txn.state.entry_count, "ids": [e.get("id") for e, _ in txn.pending]}
    fd = os.open(intent, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, orjson.dumps(record))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return intent


def _remove_intent(intent: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(intent)


def _settle_intent(path: Path, fd: int, session_id: str) -> bool | None:
    """Under the exclusive lock: keep a dead writer's lines if its transaction
    committed, cut them off if not, then drop its intent. Returns whether it
    committed (``None``: there was no intent to settle).

    The row is read ``FOR UPDATE``: on a database server the dead writer's
    transaction may still hold the row (its COMMIT in flight); the read waits
    until it has ended one way or the other."""
    intent = _intent_path(path)
    try:
        record = orjson.loads(intent.read_bytes())
        start, expected, ids = int(record["start"]), int(record["entry_count"]), set(record["ids"])
    except FileNotFoundError:
        return None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        # Torn: the writer died writing its intent, before any of its lines.
        _remove_intent(intent)
        return None
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _SELECT_COUNT_LOCKED + (" FOR UPDATE" if connection.features.has_select_for_update else ""),
            [session_id, KIND],
        )
        found = cursor.fetchone()
    committed = found is not None and int(found[0]) >= expected
    size = os.fstat(fd).st_size
    if not committed and size > start:
        tail = os.pread(fd, size - start, start)
        if _only_these_entries(tail, ids):
            _forget(path)
            file_sidecar.delete(path)
            os.ftruncate(fd, start)
            logger.warning(
                "Cut %d bytes a writer left in %s without committing them (entries %s)",
                size - start,
                path.name,
                ", ".join(sorted(str(i) for i in ids)),
            )
        else:  # someone else's lines follow: the file stays as it is (Pi's rule then applies)
            logger.warning("Left %s as it is: lines other than a dead writer's follow its own", path.name)
    _remove_intent(intent)
    return committed


def _only_these_entries(tail: bytes, ids: Collection[Any]) -> bool:
    """Whether ``tail`` holds nothing but lines of the entries ``ids`` (the
    last one possibly torn), and blank lines."""
    lines = tail.split(b"\n")
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            if number == len(lines) - 1:
                continue  # the torn last line of the dead write
            return False
        if not isinstance(entry, dict) or entry.get("id") not in ids:
            return False
    return True


def _drifted(txn: FileWrite) -> bool:
    """The row has not seen what the file holds (a crash, a foreign writer)."""
    row, state = txn.row.meta, txn.state
    return (row.entry_count, row.leaf_entry_id, row.branch_count) != (
        state.entry_count,
        state.leaf_entry_id,
        state.branch_count,
    )


def _storage_error(path: Path, exc: OSError) -> Exception:
    """A typed error for what the operating system refused."""
    if exc.errno == errno.ELOOP:
        return CorruptSessionTree(f"{path.name} is a symbolic link; session files are never followed through links")
    if exc.errno in (errno.EISDIR, errno.ENOTDIR):
        return CorruptSessionTree(f"{path.name} is not a regular file")
    return StorageUnavailable(f"{path.name}: {exc.strerror or exc}")


class FileSessionTreeProvider(TreeProvider):
    """The contract over ``FileStorage``."""

    kind = KIND

    def __init__(self, root: str | os.PathLike[str] | None = None, *, fsync: bool | None = None) -> None:
        self.storage: FileStorage = FileStorage(root, fsync=fsync)

    @property
    def root(self) -> Path:
        return self.storage.root

    @property
    def fsync(self) -> bool:
        return self.storage.fsync

    def path_for(self, session_id: str) -> Path:
        return self.storage.path_for(session_id)

    def stored_files(self, session_id: str) -> list[str]:
        """Every file under this storage that holds the session (its file, its backups)."""
        return self.storage.stored_files(session_id)

    def forget_files(self) -> None:
        """Drop this process's parsed copies of session files (``RegistersFiles``)."""
        clear_index_cache()

    def register_existing_file(
        self,
        session_id: str,
        *,
        path: str | os.PathLike[str] | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
        **fields: Any,
    ) -> SessionTreeSession:
        """Adopt a Pi file where it lies (``RegistersFiles``)."""
        return self.storage.register_existing_file(session_id, path=path, before_commit=before_commit, **fields)

    def parent_reference(self, source: SessionTreeSession) -> str:
        """Pi's ``parentSession`` is the parent's file path (its session list
        and ``/resume`` follow it); lineage resolves both forms."""
        return source.get("session_file") or source["session_id"]
