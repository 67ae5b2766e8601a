"""Pi's JSONL session file: tolerant parsing, v1→v3 migration, line writer.

Line 1 is the session header, every other line one entry. Reading skips blank
and malformed lines (a torn last line included); writing appends exactly one
complete line per entry and never rewrites what is there.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .errors import InvalidEntry
from .ids import new_entry_id
from .types import CURRENT_SESSION_VERSION, Entry

FileEntry = dict[str, Any]


def now_iso() -> str:
    """Current UTC time as Pi writes it: ``2026-04-19T00:00:00.000Z``."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def is_session_header(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str)


@contextmanager
def gc_paused(*, promote: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects.

    Decoding a large session allocates hundreds of thousands of dicts, none
    of them cyclic garbage; every collection then walks them all again for
    nothing (measured: 3x the load time at 100,000 entries). Nested pauses
    leave the decision to the outermost one.

    ``promote``: what is built while paused is kept (a decoded session that
    is returned), so on resuming it is moved straight to the oldest
    generation instead of being walked by the young collections on its way
    there (measured: 80 ms for the 40,000 entries of a path, see
    ``bench/bench_vs_pi.py``). The young generations are collected first, so
    that only what was built while paused skips them; nothing is promoted
    when objects were frozen with ``gc.freeze()`` (they must stay frozen).
    """
    was_enabled = gc.isenabled()
    if not was_enabled:
        yield
        return
    promoting = promote and gc.get_freeze_count() == 0
    if promoting:
        gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if promoting and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def parse_lines(data: bytes | str) -> list[FileEntry]:
    """Decode every JSON object line; skip blank, malformed and non-object lines."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    parsed: list[FileEntry] = []
    with gc_paused():
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                parsed.append(obj)
    return parsed


def whole_lines_end(data: bytes) -> int:
    """How many bytes of ``data`` hold whole entries: up to its last newline,
    or all of it when the last line, though unterminated, is a whole JSON
    object (a file whose final newline went missing: Pi reads that entry
    too, #8345). A line torn mid-write never parses, so it stays out."""
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    if tail.strip():
        try:
            if isinstance(orjson.loads(tail), dict):
                return len(data)
        except orjson.JSONDecodeError:
            pass
    return end


def parse_session_entries(text: str | bytes) -> list[FileEntry]:
    """All file entries (header included) of a session file's text."""
    return parse_lines(text)


def load_entries_from_file(path: str | os.PathLike[str]) -> list[FileEntry]:
    """File entries with the header first; ``[]`` when the file is missing,
    empty, or its first valid line is not a session header."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    entries = parse_lines(data)
    if not entries or not is_session_header(entries[0]):
        return []
    return entries


def _migrate_v1_to_v2(file_entries: list[FileEntry]) -> None:
    ids: set[str] = set()
    previous_id: str | None = None
    for entry in file_entries:
        if entry.get("type") == "session":
            entry["version"] = 2
            continue
        entry_id = new_entry_id(ids)
        ids.add(entry_id)
        entry["id"] = entry_id
        entry["parentId"] = previous_id
        previous_id = entry_id
    # Indexes count lines of the file, header included, as Pi's did. Resolve
    # them once every entry has its id (a compaction may point forward only in
    # damaged files, but resolving afterwards costs nothing).
    for entry in file_entries:
        if entry.get("type") != "compaction" or "firstKeptEntryIndex" not in entry:
            continue
        index = entry.pop("firstKeptEntryIndex")
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(file_entries):
            target = file_entries[index]
            if target.get("type") != "session":
                entry["firstKeptEntryId"] = target["id"]


def _migrate_v2_to_v3(file_entries: list[FileEntry]) -> None:
    for entry in file_entries:
        if entry.get("type") == "session":
            entry["version"] = 3
            continue
        if entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"


def migrate_to_current_version(file_entries: list[FileEntry]) -> bool:
    """Bring entries (header included) to version 3 in place; ``True`` if anything changed."""
    header = next((e for e in file_entries if e.get("type") == "session"), None)
    version = header.get("version", 1) if header else 1
    if not isinstance(version, int) or version >= CURRENT_SESSION_VERSION:
        return False
    if version < 2:
        _migrate_v1_to_v2(file_entries)
    if version < 3:
        _migrate_v2_to_v3(file_entries)
    return True


def split_header(file_entries: Sequence[FileEntry]) -> tuple[FileEntry | None, list[Entry]]:
    """(header, entries) of a loaded file; entries exclude every header line."""
    header = file_entries[0] if file_entries and is_session_header(file_entries[0]) else None
    return header, [e for e in file_entries if e.get("type") != "session"]


def new_session_header(
    session_id: str,
    *,
    cwd: str = "",
    parent_session: str | None = None,
    timestamp: str | None = None,
    extra: dict[str, Any] | None = None,
) -> FileEntry:
    header: FileEntry = {
        "type": "session",
        "version": CURRENT_SESSION_VERSION,
        "id": session_id,
        "timestamp": timestamp or now_iso(),
        "cwd": cwd,
    }
    if parent_session:
        header["parentSession"] = parent_session
    if extra:
        for key, value in extra.items():
            header.setdefault(key, value)
    return header


def serialize_line(obj: FileEntry) -> bytes:
    """One JSONL line (with its ``\\n``), compact as Pi writes it; key order kept."""
    return orjson.dumps(obj) + b"\n"


def encode_entry_line(entry: FileEntry) -> tuple[bytes, FileEntry]:
    """The line an entry is written as, and the entry as read back from it.

    JSON cannot hold everything a dict can: a value that cannot be written
    (a set, an integer beyond 64 bits, a lone surrogate, a non-string key)
    raises ``InvalidEntry`` naming the entry and the field; NaN and infinities
    are written as ``null`` (as Pi's ``JSON.stringify`` does), which is why the
    entry read back is returned: it is what every later read will see.
    """
    try:
        line = serialize_line(entry)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise _not_json(entry, exc) from None
    return line, orjson.loads(line)


def _not_json(entry: FileEntry, exc: Exception) -> InvalidEntry:
    if not isinstance(entry, dict):
        return InvalidEntry(f"An entry must be a JSON object, not {type(entry).__name__}")
    field = next((key for key, value in entry.items() if not isinstance(key, str) or not _encodable(value)), None)
    where = f"field {field!r}" if field is not None else "a field"
    if "surrogates" in str(exc):
        return InvalidEntry(f"Entry {entry.get('id')}: {where} is not valid Unicode text (a lone surrogate)")
    return InvalidEntry(f"Entry {entry.get('id')}: {where} cannot be stored as JSON ({exc})")


def _encodable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return True


def serialize_file(file_entries: Iterable[FileEntry]) -> bytes:
    """The whole file's bytes; ``InvalidEntry`` (naming the entry) if one cannot be written."""
    lines = []
    for entry in file_entries:
        try:
            lines.append(serialize_line(entry))
        except (TypeError, orjson.JSONEncodeError) as exc:
            raise _not_json(entry, exc) from None
    return b"".join(lines)


def append_lines(fd: int, lines: Iterable[bytes], *, fsync: bool = False) -> int:
    """Append complete lines to an open descriptor, opened ``O_RDWR | O_APPEND``
    (readable too: the last byte is checked).

    If the file does not end in a newline — a writer died mid-line — start a
    new line first, so the torn fragment stays one malformed (skipped) line
    and never swallows the entry written now. Returns the new file size.
    """
    size = os.fstat(fd).st_size
    payload = b"".join(lines)
    if size > 0:
        last = os.pread(fd, 1, size - 1)
        if last != b"\n":
            payload = b"\n" + payload
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    if fsync:
        os.fsync(fd)
    return size + len(payload)


def write_new_session_file(
    path: str | os.PathLike[str], file_entries: Sequence[FileEntry], *, fsync: bool = False
) -> None:
    """Create a session file that must not exist yet (``O_EXCL``). Everything
    is encoded first: an entry that cannot be written leaves no file behind."""
    data = serialize_file(file_entries)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
    try:
        append_lines(fd, [data], fsync=fsync)
    finally:
        os.close(fd)
