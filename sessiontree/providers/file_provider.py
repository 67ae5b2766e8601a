"""The ``file`` provider: one Pi JSONL file per session, meta in the database.

``<root>/<session_id>.jsonl`` holds the header line and one line per entry,
exactly as Pi writes them; the leaf, status and title live in the session's
``AgentSession`` row. Appends to one session are serialized with an exclusive
``flock`` on its file; each append writes one complete line and never
rewrites the file (the one exception: migrating a v1/v2 file to v3 once, as
Pi does, by writing a new file and renaming it over the old one).

Each process caches the parsed index of every file it has read, keyed by
(inode, size, mtime); when the file grew, only the appended tail is read.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from sessiontree.core.context_builder import UNSET, _Unset, build_context_from_path, walk_to_root
from sessiontree.core.entries import apply_in_flight_patch, check_copied_entries, prepare_new_entry
from sessiontree.core.errors import (
    CorruptSessionTree,
    EntryNotFound,
    ImmutableEntry,
    InvalidSessionId,
    LeafConflict,
    SessionAlreadyExists,
    SessionClosed,
    SessionNotFound,
)
from sessiontree.core.fork import build_branched_entries
from sessiontree.core.path import resolve_latest_labels
from sessiontree.core.pi_session_file import (
    append_lines,
    encode_entry_line,
    is_session_header,
    migrate_to_current_version,
    new_session_header,
    parse_lines,
    serialize_file,
    whole_lines_end,
    write_new_session_file,
)
from sessiontree.core.snapshot import build_snapshot
from sessiontree.core.types import Entry, SessionContext, SessionSnapshot, SessionTreeSession
from sessiontree.models import AgentSession

from . import meta
from .appends import TypedAppends

KIND = "file"


@dataclass
class FileIndex:
    """What a process knows of one session file."""

    inode: int
    size: int
    mtime_ns: int
    offset: int  # bytes consumed: everything up to the last complete line
    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    by_id: dict[str, Entry] = field(default_factory=dict)

    def extend(self, entries: list[Entry]) -> None:
        """Add entries read or written after the ones known, all or none: a
        refused tail leaves the index as it was, so the same error (naming the
        same entry) comes back on the next read."""
        seen: set[str] = set()
        for entry in entries:
            entry_id = entry.get("id")
            if not isinstance(entry_id, str):
                raise CorruptSessionTree(f"Entry without a string id in session {self.header.get('id')}")
            if entry_id in self.by_id or entry_id in seen:
                raise CorruptSessionTree(f"Duplicate entry id {entry_id} in session {self.header.get('id')}")
            seen.add(entry_id)
        for entry in entries:
            self.entries.append(entry)
            self.by_id[entry["id"]] = entry


def _find(by_id: dict[str, Entry], entry_id: Any) -> Entry | None:
    """The entry ``entry_id`` names, or ``None``; a non-string id (a list from
    a JSON body, say) names nothing, as in the mysql provider."""
    return by_id.get(entry_id) if isinstance(entry_id, str) else None


class _FileReplaced(Exception):
    """Another process renamed a migrated file over the one we opened."""


_cache: dict[str, FileIndex] = {}
_cache_lock = threading.Lock()


def clear_index_cache() -> None:
    with _cache_lock:
        _cache.clear()


class FileSessionTreeProvider(meta.SessionMetaMethods, TypedAppends):
    kind = KIND

    def __init__(self, root: str | os.PathLike[str] | None = None, *, fsync: bool | None = None) -> None:
        self._root = Path(root) if root is not None else None
        self._fsync = fsync

    # --- configuration ------------------------------------------------------
    @property
    def root(self) -> Path:
        root = self._root if self._root is not None else Path(settings.SESSIONTREE_FILE_ROOT)
        root.mkdir(parents=True, exist_ok=True)
        return root

    @property
    def fsync(self) -> bool:
        if self._fsync is not None:
            return self._fsync
        return getattr(settings, "SESSIONTREE_FSYNC", "never") == "always"

    def path_for(self, session_id: str) -> Path:
        """The session's file; never outside the root, whatever the id says."""
        meta.validate_session_id(session_id)
        root = self.root.resolve()
        path = (root / f"{session_id}.jsonl").resolve()
        if path.parent != root:
            raise InvalidSessionId(f"Invalid session id {session_id!r}")
        return path

    # --- index ----------------------------------------------------------------
    def _refresh(self, path: Path, fd: int) -> FileIndex:
        """The up-to-date index of the file open as ``fd`` (cached, tail-read)."""
        st = os.fstat(fd)
        key = str(path)
        with _cache_lock:
            cached = _cache.get(key)
        if cached is not None and cached.inode == st.st_ino and st.st_size >= cached.size:
            if st.st_size == cached.size and st.st_mtime_ns == cached.mtime_ns:
                return cached
            tail = os.pread(fd, st.st_size - cached.offset, cached.offset)
            complete = whole_lines_end(tail)
            cached.extend([obj for obj in parse_lines(tail[:complete]) if obj.get("type") != "session"])
            cached.offset += complete
            cached.size, cached.mtime_ns = st.st_size, st.st_mtime_ns
            return cached
        index = self._load(path, fd, st)
        with _cache_lock:
            _cache[key] = index
        return index

    def _load(self, path: Path, fd: int, st: os.stat_result) -> FileIndex:
        data = os.pread(fd, st.st_size, 0)
        complete = whole_lines_end(data)
        objs = parse_lines(data[:complete])
        if not objs or not is_session_header(objs[0]):
            raise CorruptSessionTree(f"{path.name} is not a Pi session file (its first line is not a session header)")
        if migrate_to_current_version(objs):
            # One-time rewrite, as Pi does: ids invented by the v1 migration
            # must be the same in every process from now on. Under the
            # exclusive lock, re-read: another process may have migrated first.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.stat(path).st_ino != st.st_ino:
                raise _FileReplaced
            data = os.pread(fd, os.fstat(fd).st_size, 0)
            complete = whole_lines_end(data)
            objs = parse_lines(data[:complete])
            migrate_to_current_version(objs)
            tmp = path.with_suffix(".jsonl.migrating")
            tmp.write_bytes(serialize_file(objs))
            os.replace(tmp, path)
            st = os.stat(path)
            complete = st.st_size
        index = FileIndex(inode=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns, offset=complete, header=objs[0])
        index.extend([obj for obj in objs[1:] if obj.get("type") != "session"])
        return index

    @contextmanager
    def _open(self, session_id: str, *, exclusive: bool) -> Iterator[tuple[int, FileIndex]]:
        path = self.path_for(session_id)
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND if exclusive else os.O_RDONLY)
            except FileNotFoundError:
                raise SessionNotFound(f"Session {session_id} has no file {path.name}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                # A migration may have renamed a new file over the one we
                # opened while we waited for the lock: start again on it.
                if os.fstat(fd).st_ino != os.stat(path).st_ino:
                    continue
                try:
                    index = self._refresh(path, fd)
                except _FileReplaced:
                    continue
                if index.inode != os.fstat(fd).st_ino:
                    continue
                yield fd, index
                return
            finally:
                os.close(fd)

    @staticmethod
    def _view(row: AgentSession, index: FileIndex) -> tuple[list[Entry], dict[str, Entry]]:
        """Entries and index as callers see them: the file plus the in-flight entry."""
        in_flight = row.in_flight_entry
        if not in_flight:
            return index.entries, index.by_id
        return [*index.entries, in_flight], {**index.by_id, in_flight["id"]: in_flight}

    def _write(self, fd: int, index: FileIndex, entry: Entry) -> Entry:
        """Append one entry's line; returns the entry as stored (see ``encode_entry_line``)."""
        line, stored = encode_entry_line(entry)  # InvalidEntry before a byte is written
        grown_meanwhile = os.fstat(fd).st_size != index.size
        size = append_lines(fd, [line], fsync=self.fsync)
        st = os.fstat(fd)
        if grown_meanwhile or st.st_size != size:
            # A writer that ignores our lock (Pi itself, say) appended since
            # the refresh: forget this index so the next read loads the file
            # whole, foreign lines included, instead of skipping past them.
            with _cache_lock:
                for key, cached in list(_cache.items()):
                    if cached is index:
                        del _cache[key]
            return stored
        index.extend([stored])
        index.offset = size
        index.size, index.mtime_ns = st.st_size, st.st_mtime_ns
        return stored

    @staticmethod
    def _check_writable(row: AgentSession) -> None:
        if row.status == AgentSession.Status.DELETED:
            raise SessionClosed(f"Session {row.session_id} is deleted; restore it before writing")

    @staticmethod
    def _check_no_in_flight(row: AgentSession) -> None:
        if row.in_flight_entry:
            raise LeafConflict(
                f"Entry {row.in_flight_entry['id']} of session {row.session_id} is still in flight; complete it first"
            )

    @staticmethod
    def _check_expected_leaf(row: AgentSession, expected_leaf_id: str | None | _Unset) -> None:
        if not isinstance(expected_leaf_id, _Unset) and expected_leaf_id != row.leaf_entry_id:
            raise LeafConflict(
                f"Leaf of session {row.session_id} is {row.leaf_entry_id!r}, not the expected {expected_leaf_id!r}"
            )

    # --- sessions ---------------------------------------------------------------
    def create_session(
        self,
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        agent_id: int | None = None,
        user_id: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        entries: list[Entry] | None = None,
        header_extra: dict[str, Any] | None = None,
    ) -> SessionTreeSession:
        """Create the meta row and the file (header, plus ``entries`` if given:
        already-built entries copied verbatim, e.g. by a fork or an import)."""
        copied = check_copied_entries(entries or [])
        if session_id is not None:
            path = self.path_for(session_id)
            if path.exists():
                raise SessionAlreadyExists(f"Session {session_id} already has a file {path.name}")
        with transaction.atomic():
            row = meta.create_row(
                provider=KIND,
                session_id=session_id,
                cwd=cwd,
                agent_id=agent_id,
                user_id=user_id,
                title=title,
                parent_session_id=parent_session_id,
                metadata=metadata,
            )
            path = self.path_for(row.session_id)
            header = new_session_header(
                row.session_id, cwd=cwd or "", parent_session=parent_session_id, extra=header_extra
            )
            try:
                write_new_session_file(path, [header, *copied], fsync=self.fsync)
            except FileExistsError:
                raise SessionAlreadyExists(f"Session {row.session_id} already has a file {path.name}") from None
            row.session_file = str(path)
            row.save(update_fields=["session_file"])
            if copied:
                roots = [e["id"] for e in copied if e.get("parentId") is None]
                meta.set_leaf(row, copied[-1]["id"], appended=len(copied), root_entry_id=roots[0] if roots else None)
        return meta.to_session_dict(row)

    def register_existing_file(self, session_id: str, **fields: Any) -> SessionTreeSession:
        """Create the meta row for a Pi file already in the root (sync command):
        the leaf is the last entry, as Pi resumes a session."""
        with self._open(session_id, exclusive=True) as (_fd, index):
            header = index.header
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
                    session_file=str(self.path_for(session_id)),
                )
                roots = [e["id"] for e in index.entries if e.get("parentId") is None]
                leaf = index.entries[-1]["id"] if index.entries else None
                meta.set_leaf(row, leaf, appended=len(index.entries), root_entry_id=roots[0] if roots else None)
        return meta.to_session_dict(row)

    def delete_session(self, session_id: str, *, hard: bool = False) -> None:
        row = self._row(session_id)
        if not hard:
            meta.update_row_fields(row, {"status": AgentSession.Status.DELETED})
            return
        path = self.path_for(session_id)
        try:
            fd: int | None = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            fd = None
        try:
            if fd is not None:
                # Wait for a writer that is mid-append; the file may even be
                # corrupt, so it is locked but never parsed here.
                fcntl.flock(fd, fcntl.LOCK_EX)
            meta.delete_row(row)
            path.unlink(missing_ok=True)
        finally:
            if fd is not None:
                os.close(fd)
        with _cache_lock:
            _cache.pop(str(path), None)

    def get_header(self, session_id: str) -> dict[str, Any]:
        self._row(session_id)
        with self._open(session_id, exclusive=False) as (_fd, index):
            return dict(index.header)

    # --- entries ----------------------------------------------------------------
    def list_entries(self, session_id: str) -> list[Entry]:
        row = self._row(session_id)
        with self._open(session_id, exclusive=False) as (_fd, index):
            entries, _ = self._view(row, index)
            return list(entries)

    def get_entry(self, session_id: str, entry_id: str) -> Entry:
        row = self._row(session_id)
        with self._open(session_id, exclusive=False) as (_fd, index):
            _, by_id = self._view(row, index)
        found = _find(by_id, entry_id)
        if found is None:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        return found

    def append_entry(self, session_id: str, entry: Entry, *, expected_leaf_id: str | None | _Unset = UNSET) -> Entry:
        self._row(session_id)  # SessionNotFound before touching any file
        with self._open(session_id, exclusive=True) as (fd, index):
            row = self._row(session_id)  # re-read under the lock: the leaf may have moved
            self._check_writable(row)
            self._check_no_in_flight(row)
            self._check_expected_leaf(row, expected_leaf_id)
            new = self._write(fd, index, prepare_new_entry(entry, leaf_id=row.leaf_entry_id, by_id=index.by_id))
            meta.set_leaf(row, new["id"], appended=1, root_entry_id=new["id"] if new["parentId"] is None else None)
        return new

    def begin_in_flight_entry(self, session_id: str, entry: Entry) -> Entry:
        """Start a streaming entry: it becomes the leaf and is visible to reads,
        but reaches the file only when completed."""
        self._row(session_id)
        with self._open(session_id, exclusive=True) as (_fd, index):
            row = self._row(session_id)
            self._check_writable(row)
            self._check_no_in_flight(row)
            new = prepare_new_entry(entry, leaf_id=row.leaf_entry_id, by_id=index.by_id)
            _, new = encode_entry_line(new)  # refused now if it could never be written
            row.in_flight_entry = new
            row.leaf_entry_id = new["id"]
            row.save(update_fields=["in_flight_entry", "leaf_entry_id", "updated_at"])
        return new

    def update_in_flight_entry(
        self, session_id: str, entry_id: str, patch: dict[str, Any], *, complete: bool = False
    ) -> Entry:
        self._row(session_id)
        with self._open(session_id, exclusive=True) as (fd, index):
            row = self._row(session_id)
            self._check_writable(row)
            in_flight = row.in_flight_entry
            if not in_flight or in_flight["id"] != entry_id:
                if _find(index.by_id, entry_id) is not None:
                    raise ImmutableEntry(f"Entry {entry_id} of session {session_id} is completed and cannot change")
                raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
            _, updated = encode_entry_line(apply_in_flight_patch(in_flight, patch, index.by_id))
            if complete:
                self._write(fd, index, updated)
                row.in_flight_entry = None
                row.save(update_fields=["in_flight_entry", "updated_at"])
                meta.set_leaf(
                    row,
                    row.leaf_entry_id,
                    appended=1,
                    root_entry_id=updated["id"] if updated["parentId"] is None else None,
                )
            else:
                row.in_flight_entry = updated
                row.save(update_fields=["in_flight_entry", "updated_at"])
        return updated

    # --- leaf and branches ------------------------------------------------------
    def switch_leaf(self, session_id: str, entry_id: str) -> SessionTreeSession:
        self._row(session_id)
        with self._open(session_id, exclusive=True) as (_fd, index):
            row = self._row(session_id)
            self._check_writable(row)
            self._check_no_in_flight(row)
            if _find(index.by_id, entry_id) is None:
                raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
            meta.set_leaf(row, entry_id)
        return meta.to_session_dict(row)

    def reset_leaf(self, session_id: str) -> SessionTreeSession:
        self._row(session_id)
        with self._open(session_id, exclusive=True) as (_fd, _index):
            row = self._row(session_id)
            self._check_writable(row)
            self._check_no_in_flight(row)
            meta.set_leaf(row, None)
        return meta.to_session_dict(row)

    def create_branched_session(
        self, session_id: str, leaf_entry_id: str | None, *, new_session_id: str | None = None, **fields: Any
    ) -> SessionTreeSession:
        """A new session holding the root→``leaf_entry_id`` path (labels
        re-created), whose parent is this one. ``None`` → an empty child."""
        source = self._row(session_id)
        with self._open(session_id, exclusive=False) as (_fd, index):
            entries, by_id = self._view(source, index)
            path: list[Entry] = []
            if leaf_entry_id is not None:
                leaf = _find(by_id, leaf_entry_id)
                if leaf is None:
                    raise EntryNotFound(f"Entry {leaf_entry_id} not found in session {session_id}")
                path = walk_to_root(leaf, by_id)
            copied = build_branched_entries(path, resolve_latest_labels(entries))
        return self.create_session(session_id=new_session_id, entries=copied, **meta.fork_fields(source, fields))

    # --- reads ------------------------------------------------------------------
    def get_active_path(self, session_id: str, leaf_entry_id: str | None | _Unset = UNSET) -> list[Entry]:
        row = self._row(session_id)
        leaf_id = row.leaf_entry_id if isinstance(leaf_entry_id, _Unset) else leaf_entry_id
        if leaf_id is None:
            return []
        with self._open(session_id, exclusive=False) as (_fd, index):
            _, by_id = self._view(row, index)
            leaf = _find(by_id, leaf_id)
            if leaf is None:
                raise EntryNotFound(f"Entry {leaf_id} not found in session {session_id}")
            return walk_to_root(leaf, by_id)

    def build_context(self, session_id: str, leaf_entry_id: str | None | _Unset = UNSET) -> SessionContext:
        return build_context_from_path(self.get_active_path(session_id, leaf_entry_id))

    def get_snapshot(self, session_id: str) -> SessionSnapshot:
        row = self._row(session_id)
        with self._open(session_id, exclusive=False) as (_fd, index):
            entries, _ = self._view(row, index)
            return build_snapshot(meta.to_session_dict(row), list(entries))
