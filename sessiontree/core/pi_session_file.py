"""Pi's JSONL session file: loading, v1→v3 migration, line writer.

The header line comes first, every other line is one entry. Reading is
``session_reader``'s (Pi's rules: blank, malformed and torn lines skipped);
writing appends exactly one complete line per entry and never rewrites what
is there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import orjson

from .errors import InvalidEntry
from .ids import new_entry_id
from .session_reader import SessionReader, read_chunks, read_session_bytes
from .session_reader import gc_paused as gc_paused
from .session_reader import whole_lines_end as whole_lines_end
from .types import CURRENT_SESSION_VERSION

FileEntry = dict[str, Any]


def now_iso() -> str:
    """Current UTC time as Pi writes it: ``2026-04-19T00:00:00.000Z``."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def parse_session_entries(text: str | bytes) -> list[FileEntry]:
    """Every JSON object line of a session file's text, header lines
    included, in order; like Pi's ``parseSessionEntries`` it looks for no
    header (blank, malformed and non-object lines are skipped)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return read_session_bytes(data, after_header=True, keep_headers=True).entries


def load_entries_from_file(path: str | os.PathLike[str]) -> list[FileEntry]:
    """File entries, the header first, as Pi's ``loadEntriesFromFile`` reads
    them; ``[]`` when the file is missing, empty, or not a session (the
    first line that parses is not a session header)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    reader = SessionReader()
    file_entries: list[FileEntry] = []
    try:
        for entries, _ in read_chunks(fd, reader, size=os.fstat(fd).st_size):
            file_entries += entries
    finally:
        os.close(fd)
    if reader.header is None:
        return []
    return [reader.header, *file_entries]


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
