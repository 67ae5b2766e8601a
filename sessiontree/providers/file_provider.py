"""The ``file`` storage: one Pi JSONL file per session, meta in the database.

``<root>/<session_id>.jsonl`` (or, for a Pi file indexed where it lies, the
row's ``session_file``) holds the header line and one line per entry, exactly
as Pi writes them; status, title and lineage live in the session's
``AgentSession`` row. Writes to one session are serialized with an exclusive
``flock`` on its file; each write appends complete lines and never rewrites
the file (the one exception: migrating a v1/v2 file to v3 once, as Pi does).

**The file is the truth.** The row also records the leaf and how many entries
the file held when the row was last written (``entry_count``). A file that
holds more (a writer killed between its line and its row update, or Pi
appending to the file itself) has its last entry as the leaf, as Pi decides
on load, and its counts follow; the next write stores that in the row.

A write's lines and its row update (plus the operations layer's audit record)
are made durable together: the lines are written last inside the database
transaction, and cut off again if the commit fails.

Each process caches the parsed index of every file it has read, keyed by
(inode, size, mtime); when the file grew, only the appended tail is read.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from sessiontree.core.errors import (
    CorruptSessionTree,
    EntryNotFound,
    InvalidSessionId,
    SessionAlreadyExists,
    SessionNotFound,
    SessionTreeError,
    StorageUnavailable,
)
from sessiontree.core.ids import new_entry_id
from sessiontree.core.path import EntryParents, TreeStats, tree_stats
from sessiontree.core.pi_session_file import append_lines, migrate_to_current_version, serialize_file, serialize_line
from sessiontree.core.session_reader import SessionReader, gc_paused, read_chunks, read_session_bytes
from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.models import AgentSession

from . import meta
from .port import BeforeCommit, SessionState
from .template import TreeProvider

KIND = "file"
T = TypeVar("T")
logger = logging.getLogger(__name__)


# --- the per-process index of a file -------------------------------------------------


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
    # For the tree stats, kept as entries arrive: ids that have a child.
    with_children: set[str] = field(default_factory=set)
    compactions: int = 0
    first_root: str | None = None

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
            entry_id = entry["id"]
            parent_id = entry.get("parentId")
            if parent_id is not None and parent_id in self.by_id:
                self.with_children.add(parent_id)
            elif self.first_root is None:
                self.first_root = entry_id
            if entry.get("type") == "compaction":
                self.compactions += 1
            self.entries.append(entry)
            self.by_id[entry_id] = entry

    @property
    def stats(self) -> TreeStats:
        count = len(self.entries)
        return TreeStats(count, count - len(self.with_children), self.compactions, self.first_root)


class _FileReplaced(Exception):
    """Another process renamed a migrated file over the one we opened."""


_cache: dict[str, FileIndex] = {}
_cache_lock = threading.Lock()


def clear_index_cache() -> None:
    with _cache_lock:
        _cache.clear()


def _forget(path: Path) -> None:
    with _cache_lock:
        _cache.pop(str(path), None)


class _Overlay(Mapping[str, Entry]):
    """``base`` (the file's index) with a few entries on top (in flight, not yet written)."""

    __slots__ = ("_base", "_top")

    def __init__(self, top: Mapping[str, Entry], base: Mapping[str, Entry]) -> None:
        self._top = top
        self._base = base

    def __getitem__(self, key: str) -> Entry:
        try:
            return self._top[key]
        except KeyError:
            return self._base[key]

    def __contains__(self, key: object) -> bool:
        return key in self._top or key in self._base

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (key for key in self._top if key not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for key in self._top if key not in self._base)


# --- the session's meta row, read without the ORM (the hot path) ----------------------

_q = connection.ops.quote_name
_ROW_COLUMNS = (
    "id",
    "provider",
    "status",
    "leaf_entry_id",
    "root_entry_id",
    "entry_count",
    "branch_count",
    "compaction_count",
    "in_flight_entry",
    "session_file",
)
_TABLE = _q(AgentSession._meta.db_table)
_SELECT_ROW = f"SELECT {', '.join(_q(c) for c in _ROW_COLUMNS)} FROM {_TABLE} WHERE {_q('session_id')} = %s"
_UPDATE_ROW = (
    f"UPDATE {_TABLE} SET {_q('leaf_entry_id')} = %s, {_q('root_entry_id')} = %s, {_q('entry_count')} = %s, "
    f"{_q('branch_count')} = %s, {_q('compaction_count')} = %s, {_q('in_flight_entry')} = %s, "
    f"{_q('updated_at')} = %s WHERE {_q('id')} = %s"
)


@dataclass
class _Row:
    pk: int
    session_id: str
    status: str
    leaf_entry_id: str | None
    root_entry_id: str | None
    entry_count: int
    branch_count: int
    compaction_count: int
    in_flight_entry: Entry | None
    session_file: str


def _select_row(session_id: str) -> _Row:
    meta.validate_session_id(session_id)
    with connection.cursor() as cursor:
        cursor.execute(_SELECT_ROW, [session_id])
        found = cursor.fetchone()
    if found is None:
        raise SessionNotFound(f"Session {session_id} not found")
    pk, provider, status, leaf, root, count, branches, compactions, in_flight, session_file = found
    if provider != KIND:
        raise SessionNotFound(f"Session {session_id} not found in the {KIND} provider (it is a {provider} session)")
    if isinstance(in_flight, str | bytes):
        in_flight = orjson.loads(in_flight)
    return _Row(pk, session_id, status, leaf, root, count, branches, compactions, in_flight or None, session_file)


def _state(row: _Row, index: FileIndex) -> SessionState:
    """The session as the file says: the row's leaf while the file holds what
    the row has seen, else the file's last entry (Pi's rule)."""
    stats = index.stats
    in_flight = row.in_flight_entry
    if in_flight is not None:
        leaf: str | None = in_flight["id"]
    elif stats.entry_count != row.entry_count or (
        row.leaf_entry_id is not None and row.leaf_entry_id not in index.by_id
    ):
        leaf = index.entries[-1]["id"] if index.entries else None
    else:
        leaf = row.leaf_entry_id
    return SessionState(
        pk=row.pk,
        session_id=row.session_id,
        provider=KIND,
        status=row.status,
        leaf_entry_id=leaf,
        root_entry_id=stats.root_entry_id,
        entry_count=stats.entry_count,
        branch_count=stats.branch_count,
        compaction_count=stats.compaction_count,
        in_flight_entry_id=in_flight["id"] if in_flight is not None else None,
    )


def _session_dict(state: SessionState) -> SessionTreeSession:
    """The contract's session dict: the row as stored, the tree as the file says."""
    session = meta.to_session_dict(meta.get_row(state.session_id, provider=KIND))
    session["leaf_entry_id"] = state.leaf_entry_id
    session["root_entry_id"] = state.root_entry_id
    session["entry_count"] = state.entry_count
    session["branch_count"] = state.branch_count
    session["compaction_count"] = state.compaction_count
    return session


# --- reads and writes -----------------------------------------------------------------


class FileView:
    """One session's file and row, read under a shared lock."""

    def __init__(self, row: _Row, index: FileIndex) -> None:
        self.row = row
        self.index = index
        self.in_flight_entry: Entry | None = row.in_flight_entry
        self.state = _state(row, index)

    def _by_id(self) -> Mapping[str, Entry]:
        if self.in_flight_entry is None:
            return self.index.by_id
        return _Overlay({self.in_flight_entry["id"]: self.in_flight_entry}, self.index.by_id)

    def session(self) -> SessionTreeSession:
        return _session_dict(self.state)

    def parents(self) -> Mapping[str, Any]:
        return EntryParents(self._by_id())

    def entries(self, ids: Sequence[str]) -> list[Entry]:
        by_id = self._by_id()
        return [by_id[entry_id] for entry_id in ids]

    def all_entries(self, types: Collection[str] | None = None) -> list[Entry]:
        entries = self.index.entries
        if self.in_flight_entry is not None:
            entries = [*entries, self.in_flight_entry]
        if types is None:
            return list(entries)
        return [entry for entry in entries if entry.get("type") in types]

    def get(self, entry_id: str) -> Entry | None:
        return self._by_id().get(entry_id)

    def known_ids(self, named: Collection[str]) -> Mapping[str, Any]:
        return self._by_id()


class FileWrite(FileView):
    """One session locked for writing: lines to append, the row to update."""

    def __init__(self, row: _Row, index: FileIndex) -> None:
        super().__init__(row, index)
        self.pending: list[tuple[Entry, bytes]] = []
        self.pending_by_id: dict[str, Entry] = {}
        self.pending_with_children: set[str] = set()
        self.row_changed = False

    def _by_id(self) -> Mapping[str, Entry]:
        top = dict(self.pending_by_id)
        if self.in_flight_entry is not None:
            top[self.in_flight_entry["id"]] = self.in_flight_entry
        return _Overlay(top, self.index.by_id) if top else self.index.by_id

    def new_entry_id(self) -> str:
        return new_entry_id(self._by_id())

    def _count_child_of(self, parent_id: str | None, entry: Entry) -> None:
        state = self.state
        if parent_id is None:
            state.branch_count += 1
            if state.root_entry_id is None:
                state.root_entry_id = entry["id"]
        elif parent_id in self.index.with_children or parent_id in self.pending_with_children:
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

    def set_leaf(self, entry_id: str | None) -> None:
        if entry_id is not None and entry_id not in self._by_id():
            raise EntryNotFound(f"Entry {entry_id} not found in session {self.state.session_id}")
        self.state.leaf_entry_id = entry_id
        self.row_changed = True

    def row_params(self) -> list[Any]:
        state = self.state
        in_flight = orjson.dumps(self.in_flight_entry).decode() if self.in_flight_entry is not None else None
        return [
            state.leaf_entry_id,
            state.root_entry_id,
            state.entry_count,
            state.branch_count,
            state.compaction_count,
            in_flight,
            connection.ops.adapt_datetimefield_value(timezone.now()),
            state.pk,
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
        return Path(row.session_file) if row.session_file else self.path_for(row.session_id)

    # --- index ------------------------------------------------------------------------
    def _refresh(self, path: Path, fd: int) -> FileIndex:
        """The up-to-date index of the file open as ``fd`` (cached, tail-read)."""
        st = os.fstat(fd)
        key = str(path)
        with _cache_lock:
            cached = _cache.get(key)
        if cached is not None and cached.inode == st.st_ino and st.st_size >= cached.size:
            if st.st_size == cached.size and st.st_mtime_ns == cached.mtime_ns:
                return cached
            reader = SessionReader(offset=cached.offset, after_header=True)
            tail: list[Entry] = []
            for chunk_entries, _ in read_chunks(fd, reader, size=st.st_size):
                tail += chunk_entries
            cached.extend(tail)
            cached.offset = reader.offset
            cached.size, cached.mtime_ns = st.st_size, st.st_mtime_ns
            return cached
        index = self._load(path, fd, st)
        with _cache_lock:
            _cache[key] = index
        return index

    def _load(self, path: Path, fd: int, st: os.stat_result) -> FileIndex:
        reader = SessionReader()
        entries: list[Entry] = []
        # The index is cached and long-lived: what is decoded goes straight to
        # the oldest collector generation instead of being walked on the way.
        with gc_paused(promote=True):
            for chunk_entries, _ in read_chunks(fd, reader, size=st.st_size):
                entries += chunk_entries
        header, complete = reader.header, reader.offset
        if header is None:
            raise CorruptSessionTree(f"{path.name} is not a Pi session file ({reader.reason})")
        if migrate_to_current_version([header, *entries]):
            header, entries = self._migrate(path, fd, st)
            st = os.stat(path)
            complete = st.st_size
        index = FileIndex(inode=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns, offset=complete, header=header)
        index.extend(entries)
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

    # --- port: reads ---------------------------------------------------------------------
    @contextmanager
    def read(self, session_id: str) -> Iterator[FileView]:
        row = _select_row(session_id)
        with self._open(self._path(row), session_id, exclusive=False) as (_fd, index):
            yield FileView(row, index)

    def session(self, session_id: str) -> SessionTreeSession:
        """The session's meta with the leaf and counts as its file says; as
        stored in the row when the file cannot be read (it may be damaged:
        the meta stays inspectable, reads of entries say what is wrong)."""
        row = meta.get_row(session_id, provider=KIND)  # SessionNotFound: no such session
        try:
            with self.read(session_id) as view:
                return view.session()
        except SessionTreeError:
            return meta.to_session_dict(row)

    def header(self, session_id: str) -> dict[str, Any]:
        with self.read(session_id) as view:
            return dict(view.index.header)

    # --- port: writes --------------------------------------------------------------------
    def write(self, session_id: str, work: Callable[[FileWrite], T], *, before_commit: BeforeCommit | None) -> T:
        path = self._path(_select_row(session_id))  # SessionNotFound before touching any file
        with self._open(path, session_id, exclusive=True) as (fd, index):
            txn = FileWrite(_select_row(session_id), index)  # re-read under the lock
            result = work(txn)
            if txn.row_changed or txn.pending or before_commit is not None or _drifted(txn):
                self._commit(path, fd, txn, before_commit)
            return result

    def _commit(self, path: Path, fd: int, txn: FileWrite, before_commit: BeforeCommit | None) -> None:
        """The row update, ``before_commit``'s writes and the lines, together.

        The lines are written last inside the database transaction: a failed
        write rolls the row back, and a failed commit cuts the lines off again
        (we still hold the lock, so they are the file's last bytes)."""
        index = txn.index
        start = os.fstat(fd).st_size
        grown_meanwhile = start != index.size  # a writer ignoring our lock (Pi) appended since the refresh
        end: int | None = None
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(_UPDATE_ROW, txn.row_params())
                if before_commit is not None:
                    before_commit(txn)
                if txn.pending:
                    end = start  # from here on, bytes may be in the file
                    end = append_lines(fd, [line for _, line in txn.pending], fsync=self.fsync)
        except BaseException:
            if end is not None:
                self._cut_back(path, fd, start)
            raise
        if not txn.pending:
            return
        st = os.fstat(fd)
        if grown_meanwhile or st.st_size != end:
            # Foreign lines sit before or after ours: forget this index so the
            # next read loads the file whole instead of skipping past them.
            _forget(path)
            return
        index.extend([entry for entry, _ in txn.pending])
        index.offset = end
        index.size, index.mtime_ns = st.st_size, st.st_mtime_ns

    @staticmethod
    def _cut_back(path: Path, fd: int, size: int) -> None:
        """Undo this write's lines: truncate to ``size`` (we hold the lock)."""
        _forget(path)
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
        session_id = row_fields["session_id"]
        path = self.path_for(session_id)
        data = serialize_file([header, *entries])
        stats = tree_stats(entries)
        created = False
        try:
            with transaction.atomic():
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
        with self._open(file_path, session_id, exclusive=True) as (_fd, index):
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
                    leaf_entry_id=index.entries[-1]["id"] if index.entries else None,
                )
                session = meta.to_session_dict(row)
                if before_commit is not None:
                    before_commit(session)
        return session

    def destroy(self, session_id: str, *, before_commit: Callable[[], None] | None) -> None:
        """Delete the row and the file, both or neither. The file may be
        corrupt (it is never parsed here) but must be a plain file."""
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
                with transaction.atomic():
                    meta.delete_row(meta.get_row(session_id, provider=KIND))
                    if before_commit is not None:
                        before_commit()
            except BaseException:
                if fd is not None:
                    os.replace(parked, path)
                raise
            if fd is not None:
                parked.unlink(missing_ok=True)
        finally:
            if fd is not None:
                os.close(fd)
        _forget(path)


def _drifted(txn: FileWrite) -> bool:
    """The row has not seen what the file holds (a crash, a foreign writer)."""
    row, state = txn.row, txn.state
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

    def register_existing_file(self, session_id: str, **fields: Any) -> SessionTreeSession:
        return self.storage.register_existing_file(session_id, **fields)

    def parent_reference(self, source: SessionTreeSession) -> str:
        """Pi's ``parentSession`` is the parent's file path (its session list
        and ``/resume`` follow it); lineage resolves both forms."""
        return source.get("session_file") or source["session_id"]
