"""Reading Pi session files for the folder sync: finding them, their header,
their entries read in bounded batches from a byte offset, a SHA-256 of what
was read, and the folder lock.

Every read goes through the kernel's one reader (``core/session_reader.py``,
Pi 1.6.0's rules): only whole lines are read, so a torn last line is left for
the next run, when the writer may have finished it; malformed lines are
counted and skipped, as Pi's loader skips them.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sessiontree.core.errors import CorruptSessionTree, LeafConflict, StorageUnavailable
from sessiontree.core.pi_session_file import migrate_to_current_version
from sessiontree.core.session_reader import EMPTY, SessionReader, read_chunks, skim_session_bytes
from sessiontree.core.types import CURRENT_SESSION_VERSION, Entry
from sessiontree.core.verify import scan_session_bytes

CHUNK_BYTES = 8 * 1024 * 1024  # read at a time (the reader's own default)
# A batch is one transaction: what a huge file costs in memory at a time.
BATCH_ENTRIES = 50_000
BATCH_BYTES = 64 * 1024 * 1024
HEADER_PROBE_BYTES = 64 * 1024  # a header line is far shorter; a longer first line reads more
TITLE_MAX_LENGTH = 255


class SyncBusy(LeafConflict):
    """Another sync of the same folder holds its lock."""

    code = "sync_busy"


# --- finding files ---------------------------------------------------------------------


def iter_session_files(root: Path) -> Iterator[Path]:
    """Every ``*.jsonl`` regular file under ``root`` (or ``root`` itself when
    it is a file), in a stable order, Pi's ``--<cwd>--/<time>_<id>.jsonl``
    layout included. Symbolic links are never followed."""
    if root.is_file():
        yield root
        return
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".jsonl"):
                continue
            path = Path(folder) / name
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:  # gone meanwhile
                continue
            if stat.S_ISREG(mode):
                yield path


def path_key(path: Path) -> str:
    return hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStat:
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass
class HeaderProbe:
    header: dict[str, Any] | None
    reason: str | None  # why the file is not a session (header is None)
    stat: FileStat


def read_header(path: Path) -> HeaderProbe:
    """The file's session header, or why it has none, read as Pi reads it
    (lines before the header that do not parse are skipped; the first one
    that does decides). Reads no further than the header's line."""
    fd = open_file(path)
    try:
        st = FileStat.of(os.fstat(fd))
        reader = SessionReader()
        chunk = HEADER_PROBE_BYTES
        while not reader.decided and reader.offset < st.size:
            at = reader.offset
            data = os.pread(fd, min(chunk, st.size - at), at)
            at_end = not data or at + len(data) >= st.size
            reader.feed(data, end=at_end, until_header=True)
            if at_end:
                break
            if reader.offset == at:
                chunk *= 4  # a first line longer than the bytes read: read more
    finally:
        os.close(fd)
    if reader.header is not None:
        return HeaderProbe(reader.header, None, st)
    reason = reader.reason
    return HeaderProbe(None, reason if reason == EMPTY else f"not a Pi session file ({reason})", st)


def open_file(path: Path, flags: int = os.O_RDONLY) -> int:
    try:
        return os.open(path, flags | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StorageUnavailable(f"{path} is a symbolic link (never followed)") from None
        raise StorageUnavailable(f"{path}: {exc.strerror or exc}") from None


def header_version(header: dict[str, Any]) -> int:
    version = header.get("version", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


# --- reading entries ---------------------------------------------------------------------


@dataclass
class Batch:
    """Entries of consecutive complete lines, and where reading stands after them."""

    entries: list[Entry]
    end_offset: int  # bytes read from the file's start, up to the last complete line
    prefix_sha256: str  # SHA-256 of bytes [0, end_offset)
    malformed_lines: int = 0  # lines skipped (malformed, stray headers)
    session_infos: list[Entry] = field(default_factory=list)


def reader_at(start: int) -> SessionReader:
    """A reader for a file's bytes from ``start`` (0, or the end of a line after the header)."""
    return SessionReader(offset=start, after_header=start > 0)


def hash_prefix(fd: int, length: int) -> Any:
    """A SHA-256 object fed the file's first ``length`` bytes."""
    hasher = hashlib.sha256()
    offset = 0
    while offset < length:
        chunk = os.pread(fd, min(CHUNK_BYTES, length - offset), offset)
        if not chunk:
            break
        hasher.update(chunk)
        offset += len(chunk)
    return hasher


def iter_batches(
    fd: int,
    *,
    reader: SessionReader,
    hasher: Any,
    batch_entries: int | None = None,
    batch_bytes: int | None = None,
) -> Iterator[Batch]:
    """Entries of the whole lines from ``reader.offset`` on, in batches of
    at most about ``batch_entries`` entries / ``batch_bytes`` bytes.
    ``hasher`` must hold the SHA-256 of the bytes before that offset; it is
    fed what is read. Afterwards ``reader`` knows the rest (torn bytes,
    skipped lines). ``CorruptSessionTree`` if the file, read from its
    start, turns out not to be a session."""
    batch_entries = batch_entries if batch_entries is not None else BATCH_ENTRIES
    batch_bytes = batch_bytes if batch_bytes is not None else BATCH_BYTES
    batch = Batch([], reader.offset, hasher.hexdigest())
    batch_start, skipped = reader.offset, reader.skipped_lines
    for entries, read in read_chunks(fd, reader, size=os.fstat(fd).st_size, chunk_bytes=CHUNK_BYTES):
        hasher.update(read)
        batch.entries += entries
        batch.end_offset = reader.offset
        batch.malformed_lines = reader.skipped_lines - skipped
        if len(batch.entries) >= batch_entries or batch.end_offset - batch_start >= batch_bytes:
            yield _closed(batch, hasher)
            batch = Batch([], reader.offset, "")
            batch_start, skipped = reader.offset, reader.skipped_lines
    if reader.not_a_session or not reader.decided:
        raise CorruptSessionTree(f"the file is not a Pi session file ({reader.reason})")
    if batch.entries or batch.end_offset != batch_start or batch.malformed_lines:
        yield _closed(batch, hasher)


def _closed(batch: Batch, hasher: Any) -> Batch:
    batch.prefix_sha256 = hasher.hexdigest()
    batch.session_infos = [entry for entry in batch.entries if entry.get("type") == "session_info"]
    return batch


def file_batches(
    fd: int, probe_header: dict[str, Any], reader: SessionReader
) -> tuple[dict[str, Any], Iterable[Batch], int]:
    """The header (as probed), version and entry batches of a whole file; a
    v1/v2 file is read whole and migrated to v3 in memory (its ids are made
    up here)."""
    header = dict(probe_header)
    version = header_version(header)
    batches: Iterable[Batch] = iter_batches(fd, reader=reader, hasher=hashlib.sha256())
    if version < CURRENT_SESSION_VERSION:
        whole = list(batches)
        last = whole[-1]
        objs = [header, *(entry for batch in whole for entry in batch.entries)]
        migrate_to_current_version(objs)
        entries = objs[1:]
        merged = Batch(
            entries,
            last.end_offset,
            last.prefix_sha256,
            malformed_lines=sum(batch.malformed_lines for batch in whole),
            session_infos=[entry for entry in entries if entry.get("type") == "session_info"],
        )
        return objs[0], [merged], version
    return header, batches, version


# --- what the meta row takes from a file ---------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """A Pi ISO-8601 timestamp (``…Z``) as an aware datetime; ``None`` if unusable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def title_of(session_infos: list[Entry]) -> tuple[bool, str | None]:
    """(whether any ``session_info`` names the session, the latest name):
    an empty name clears the title."""
    if not session_infos:
        return False, None
    name = session_infos[-1].get("name")
    if not isinstance(name, str) or not name.strip():
        return True, None
    return True, name.strip()[:TITLE_MAX_LENGTH]


@dataclass
class QuickScan:
    """What ``index`` needs of a file without a full parse: the latest
    session name in the bytes read and the last entry's timestamp."""

    named: bool
    title: str | None
    last_timestamp: datetime | None
    complete_bytes: int
    torn_bytes: int
    lines: int  # lines holding anything (the header included)


def quick_scan(fd: int, *, start: int = 0) -> QuickScan:
    """Skim the bytes from ``start`` (``skim_session_bytes``: the reader's
    rules, but only the lines that name a session and the last entry are
    decoded)."""
    size = os.fstat(fd).st_size
    skim = skim_session_bytes(os.pread(fd, size - start, start) if size > start else b"", offset=start)
    named, title = title_of(skim.session_infos)
    last = skim.last_entry
    return QuickScan(
        named=named,
        title=title,
        last_timestamp=parse_time(last.get("timestamp")) if last is not None else None,
        complete_bytes=skim.end,
        torn_bytes=skim.torn_bytes,
        lines=skim.lines,
    )


# --- the folder lock -------------------------------------------------------------------------


def lock_path_for(folder: Path) -> Path:
    """The lock file of a folder's sync: in the system's temporary folder
    (never inside the synced folder, which may be read-only), named after
    the folder's resolved path."""
    digest = hashlib.sha256(str(folder).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / f"sessiontree-sync-{digest}.lock"


@contextmanager
def folder_lock(folder: Path) -> Iterator[Path]:
    """Hold the folder's sync lock, or raise ``SyncBusy`` at once naming the
    process that holds it. Released when the process ends, however it ends."""
    lock_path = lock_path_for(folder)
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise StorageUnavailable(f"Cannot open the sync lock {lock_path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise SyncBusy(
                f"Another sync of {folder} is running (pid {holder}); try again when it has finished"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield lock_path
    finally:
        os.close(fd)


# --- writing Pi files ---------------------------------------------------------------------


def check_replaceable(existing: bytes, session_id: str, ids: set[str]) -> None:
    """Refuse to replace a file holding anything the export would lose."""
    scanned = scan_session_bytes(existing)
    if scanned.header is None:
        if existing.strip():
            raise LeafConflict("the file there is not a Pi session file; not replaced")
        return
    if scanned.header.get("id") != session_id:
        raise LeafConflict(f"the file there holds session {scanned.header.get('id')}; not replaced")
    lacking = [entry.get("id") for entry in scanned.entries if entry.get("id") not in ids]
    if lacking:
        example = next((str(i) for i in lacking if isinstance(i, str)), "an entry without an id")
        raise LeafConflict(
            f"the file there holds {len(lacking)} entries the database lacks (e.g. {example}); not replaced"
        )


def write_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``target``, flush it to disk
    and rename it over ``target``: readers see the old file or the new one,
    never a part."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
