"""The one reader of Pi session files: bytes in, what Pi 1.6.0 sees out.

Every reader of a JSONL session file goes through here: the ``file``
storage's full load and its tail refresh, the folder sync (from a byte
offset, in bounded batches, and its header probe), ``verify_sessions`` and
``load_entries_from_file``. The rules are Pi 1.6.0's
(``loadEntriesFromFile`` and ``parseSessionEntryLine`` in
``dist/core/session-manager.js``):

- A line is what lies between two newlines; blank lines are skipped.
- A line that is not JSON is skipped (malformed). Pi decodes the file as
  UTF-8 with replacement characters, so a line holding invalid UTF-8 is
  read with U+FFFD in place of the bad bytes, as Pi reads it.
- The first line that parses to a value JavaScript counts as true must be
  the session header (``type`` ``"session"`` and a string ``id``). Lines
  before it that do not parse, or parse to ``null``, ``false``, ``0`` or
  ``""``, are skipped like malformed lines. Anything else first (an entry,
  ``[]``, ``42``) and the file is not a session: nothing more is read.
- After the header, every JSON object is an entry except further
  ``session`` lines (stray headers: Pi's index skips them too). A value
  that is not an object is skipped as malformed; Pi would keep it as an
  entry without an id, we never hand one on.
- Only whole lines are read. A last line without its newline is read when
  it parses (a file whose final newline went missing: Pi reads it too);
  otherwise it is a torn line, left for its writer to finish.

``SessionReader`` is fed a file's bytes in order (all at once, or in
chunks from any line boundary: ``read_chunks``) and keeps the byte offset it
has consumed, so a caller can read a file's tail later or hash exactly what
was read.
"""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .types import Entry

# Why a file is not a session (``SessionReader.reason``).
EMPTY: Final = "empty file"
FIRST_NOT_HEADER: Final = "its first JSON line is not a session header"
HEADER_UNREADABLE: Final = "its header line holds JSON that cannot be kept (a lone surrogate or an infinite number)"
NO_HEADER: Final = "no line of it is a session header"


class _Skipped:
    """A line's decoded value when it has none we keep (see ``decode_line``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


BLANK: Final = _Skipped("BLANK")
MALFORMED: Final = _Skipped("MALFORMED")
# JSON that JavaScript parses but a Python entry cannot hold losslessly (a
# lone surrogate, a number beyond the double range): skipped as malformed
# after the header; before it, it decides that the file is not a session.
UNKEEPABLE: Final = _Skipped("UNKEEPABLE")


def is_session_header(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str)


_promote_requested = False  # a nested pause asked for promotion (see gc_paused)


@contextmanager
def gc_paused(*, promote: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects.

    Decoding a large session allocates hundreds of thousands of dicts, none
    of them cyclic garbage; every collection then walks them all again for
    nothing (measured: 3x the load time at 100,000 entries). Nested pauses
    resume the collector only when the outermost one ends.

    ``promote``: what is built while paused is kept (a decoded session that
    is cached), so on resuming it is moved straight to the oldest
    generation instead of being walked by the young collections on its way
    there (measured: 80 ms for 40,000 entries). The young generations are
    collected first, so that only what was built while paused skips them.
    A nested pause that asks for it makes the outermost one promote when it
    ends (the file storage loads under the provider's own pause: without
    that, the first collection after it walked the whole new index, 200 ms
    at 100,000 entries). Nothing is promoted when objects were frozen with
    ``gc.freeze()`` (they must stay frozen).
    """
    global _promote_requested
    was_enabled = gc.isenabled()
    if not was_enabled:
        if promote:
            _promote_requested = True
        yield
        return
    _promote_requested = promote and gc.get_freeze_count() == 0
    if _promote_requested:
        gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if _promote_requested and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        _promote_requested = False
        gc.enable()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse refuses NaN and Infinity


def decode_line(line: bytes) -> Any:
    """One line's JSON value as Pi's parser reads it, or ``BLANK``,
    ``MALFORMED`` or ``UNKEEPABLE``."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return _decode_slowly(line)


def _decode_slowly(line: bytes) -> Any:
    """What orjson refused: blank, invalid UTF-8 (read as Pi reads it, with
    replacement characters), JSON that JavaScript parses and we cannot
    hold, or malformed. Only lines that are not plain JSON come here."""
    if not line.strip():
        return BLANK
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = line.decode("utf-8", "replace")
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return MALFORMED
    return UNKEEPABLE


def _js_truthy(value: Any) -> bool:
    # Objects and arrays are always true in JavaScript, even empty ones.
    return isinstance(value, dict | list) or bool(value)


def whole_lines_end(data: bytes) -> int:
    """How many bytes of ``data`` (up to a file's end) the reader reads:
    up to its last newline, or all of it when the last line, though
    unterminated, parses (Pi reads that line too, #8345). A line torn
    mid-write never parses, so it stays out."""
    end = data.rfind(b"\n") + 1
    rest = data[end:]
    if rest.strip() and decode_line(rest) is not MALFORMED:
        return len(data)
    return end


class SessionReader:
    """Reads a session file's bytes in order, as Pi 1.6.0 does (see the module).

    ``offset`` is where the bytes fed next start in the file, ``line`` their
    first line's number; ``after_header``: the header was read before (a
    tail read). ``keep_headers`` hands ``session`` lines on as entries
    instead of skipping them (``parse_session_entries``, which like Pi's
    ``parseSessionEntries`` looks for no header).

    What was read accumulates: ``header``, ``offset`` (the end of the last
    whole line read), ``malformed_lines`` and ``stray_header_lines``
    (1-based line numbers), ``torn_bytes`` (after the last whole line, once
    the file's end was fed) and ``not_a_session``.

    ``spans``: when given a list, each entry handed on adds its line's
    offset in the file and length (without the newline) to it, two ints an
    entry, in the same order: what a caller needs to read the entry again
    by itself.
    """

    __slots__ = (
        "_after_header",
        "header",
        "keep_headers",
        "line",
        "malformed_lines",
        "not_a_session",
        "offset",
        "spans",
        "stray_header_lines",
        "torn_bytes",
        "unreadable_header",
    )

    def __init__(
        self,
        *,
        offset: int = 0,
        line: int = 1,
        after_header: bool = False,
        keep_headers: bool = False,
        spans: list[int] | None = None,
    ) -> None:
        self.spans = spans
        self.header: dict[str, Any] | None = None
        self.offset = offset
        self.line = line
        self.keep_headers = keep_headers
        self.malformed_lines: list[int] = []
        self.stray_header_lines: list[int] = []
        self.torn_bytes = 0
        self.not_a_session = False
        self.unreadable_header = False
        self._after_header = after_header

    @property
    def decided(self) -> bool:
        """The header was read, or the file turned out not to be a session."""
        return self._after_header or self.not_a_session

    @property
    def skipped_lines(self) -> int:
        """Lines holding something that is neither the header nor an entry."""
        return len(self.malformed_lines) + len(self.stray_header_lines)

    @property
    def reason(self) -> str | None:
        """Why the bytes fed so far (to the file's end) are not a session; ``None`` if they are."""
        if self._after_header:
            return None
        if self.unreadable_header:
            return HEADER_UNREADABLE
        if self.not_a_session:
            return FIRST_NOT_HEADER
        return NO_HEADER if self.malformed_lines or self.torn_bytes else EMPTY

    def feed(self, data: bytes, *, end: bool = False, until_header: bool = False) -> list[Entry]:
        """The entries of the whole lines ``data`` starts with (the file's
        bytes from ``offset``); ``offset`` moves past them. ``end``: ``data``
        runs to the file's end (its last line may lack its newline).
        ``until_header``: stop after the header line (a probe)."""
        entries: list[Entry] = []
        if self.not_a_session:
            return entries
        if end:
            complete = whole_lines_end(data)
            self.torn_bytes = len(data) - complete if data[complete:].strip() else 0
        else:
            complete = data.rfind(b"\n") + 1
        if not complete:
            return entries
        lines = data.split(b"\n")
        if complete < len(data) or data.endswith(b"\n"):
            lines.pop()  # what follows the last whole line
        first = self.line
        start = 0
        if not self._after_header:
            start = self._read_header(lines, first)
            if until_header or not self._after_header:
                self.line += start
                self.offset += min(complete, sum(len(line) + 1 for line in lines[:start]))
                return entries
        if self.spans is not None:
            self._feed_with_spans(lines, start, first, entries, self.spans)
        else:
            malformed = self.malformed_lines.append
            append = entries.append
            loads = orjson.loads
            with gc_paused():
                for number, line in enumerate(lines[start:] if start else lines, first + start):
                    try:
                        value = loads(line)
                    except orjson.JSONDecodeError:
                        value = _decode_slowly(line)
                        if value is BLANK:
                            continue
                    if type(value) is dict:
                        if value.get("type") != "session" or self.keep_headers:
                            append(value)
                        else:
                            self.stray_header_lines.append(number)
                    else:
                        malformed(number)
        self.line += len(lines)
        self.offset += complete
        return entries

    def _feed_with_spans(
        self, lines: list[bytes], start: int, first: int, entries: list[Entry], spans: list[int]
    ) -> None:
        """``feed``'s loop, noting where each entry's line lies in the file."""
        position = self.offset + sum(len(line) + 1 for line in lines[:start]) if start else self.offset
        malformed = self.malformed_lines.append
        append = entries.append
        span = spans.extend
        loads = orjson.loads
        with gc_paused():
            for number, line in enumerate(lines[start:] if start else lines, first + start):
                length = len(line)
                try:
                    value = loads(line)
                except orjson.JSONDecodeError:
                    value = _decode_slowly(line)
                    if value is BLANK:
                        position += length + 1
                        continue
                if type(value) is dict:
                    if value.get("type") != "session" or self.keep_headers:
                        append(value)
                        span((position, length))
                    else:
                        self.stray_header_lines.append(number)
                else:
                    malformed(number)
                position += length + 1

    def _read_header(self, lines: list[bytes], first: int) -> int:
        """Read lines up to the one that decides: the header, or the first
        value that is not one. Returns how many lines that took."""
        for index, line in enumerate(lines):
            value = decode_line(line)
            if value is BLANK:
                continue
            if value is MALFORMED or (value is not UNKEEPABLE and not _js_truthy(value)):
                self.malformed_lines.append(first + index)  # Pi skips it and reads on
                continue
            if value is not UNKEEPABLE and is_session_header(value):
                self.header = value
                self._after_header = True
            else:
                self.not_a_session = True
                self.unreadable_header = value is UNKEEPABLE
            return index + 1
        return len(lines)


CHUNK_BYTES = 8 * 1024 * 1024


def read_chunks(
    fd: int, reader: SessionReader, *, size: int, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[tuple[list[Entry], memoryview]]:
    """Feed ``reader`` an open file's bytes from ``reader.offset`` up to
    ``size`` (its end), ``chunk_bytes`` at a time, so that a large file never
    sits in memory whole beside what it decodes to. Yields each chunk's
    entries and the bytes they were read from (whole lines: what a caller
    hashes); a line cut by a chunk's end is read with the next chunk.
    Stops early when the file turns out not to be a session."""
    pending = b""
    read_to = reader.offset
    while True:
        chunk = os.pread(fd, min(chunk_bytes, size - read_to), read_to) if read_to < size else b""
        read_to += len(chunk)
        at_end = not chunk or read_to >= size
        data = pending + chunk if pending else chunk
        before = reader.offset
        entries = reader.feed(data, end=at_end)
        used = reader.offset - before
        yield entries, memoryview(data)[:used]
        if at_end or reader.not_a_session:
            return
        pending = data[used:]


@dataclass
class SessionRead:
    """What reading a file's bytes at once found (``read_session_bytes``)."""

    header: dict[str, Any] | None
    entries: list[Entry]
    end: int  # the offset after the last whole line read
    malformed_lines: list[int] = field(default_factory=list)
    stray_header_lines: list[int] = field(default_factory=list)
    torn_bytes: int = 0
    reason: str | None = None  # why it is not a session

    @property
    def skipped_lines(self) -> int:
        return len(self.malformed_lines) + len(self.stray_header_lines)


def read_session_bytes(
    data: bytes, *, offset: int = 0, after_header: bool = False, keep_headers: bool = False
) -> SessionRead:
    """Read ``data``, a file's bytes from ``offset`` to its end, at once."""
    reader = SessionReader(offset=offset, after_header=after_header, keep_headers=keep_headers)
    entries = reader.feed(data, end=True)
    return SessionRead(
        header=reader.header,
        entries=entries if not reader.not_a_session else [],
        end=reader.offset,
        malformed_lines=reader.malformed_lines,
        stray_header_lines=reader.stray_header_lines,
        torn_bytes=reader.torn_bytes,
        reason=reader.reason,
    )


# --- the skim: counts and a few entries without decoding every line -------------------

# A newline followed by whitespace: a blank line may follow (rare in Pi's files).
_MAYBE_BLANK = re.compile(rb"\n[ \t\r\n\x0b\x0c]")
_SESSION_INFO = b'"session_info"'


@dataclass
class Skim:
    """What ``skim_session_bytes`` found: what ``SessionReader`` would say
    of the same bytes about the ``session_info`` entries, the last entry
    and how many lines hold something."""

    session_infos: list[Entry]
    last_entry: Entry | None
    lines: int  # lines that are not blank (the header's, when read from the start, included)
    end: int  # the offset after the last whole line
    torn_bytes: int


def skim_session_bytes(data: bytes, *, offset: int = 0) -> Skim:
    """Skim ``data`` (a session's bytes from ``offset``, a line boundary, to
    its end) for the callers that need only the session names, the last
    entry and a line count, at a fraction of a full read's cost: a byte
    search finds the lines that mention ``"session_info"`` and only those
    and the last lines are decoded, by the reader's own rules. Pi and we
    write that type unescaped; an escaped one (``"session\\u005finfo"``)
    is not seen here."""
    complete = whole_lines_end(data)
    torn = len(data) - complete if data[complete:].strip() else 0
    body = data[:complete] if complete < len(data) else data
    infos: list[Entry] = []
    position = body.find(_SESSION_INFO)
    while position >= 0:
        line_start = body.rfind(b"\n", 0, position) + 1
        line_end = body.find(b"\n", position)
        line_end = len(body) if line_end < 0 else line_end
        value = decode_line(body[line_start:line_end])
        if type(value) is dict and value.get("type") == "session_info":
            infos.append(value)
        position = body.find(_SESSION_INFO, line_end)
    return Skim(
        session_infos=infos,
        last_entry=_last_entry(body),
        lines=_count_lines(body),
        end=offset + complete,
        torn_bytes=torn,
    )


def _last_entry(body: bytes) -> Entry | None:
    end = len(body)
    while end > 0:
        line_start = body.rfind(b"\n", 0, end - 1) + 1
        value = decode_line(body[line_start:end])
        end = line_start
        if type(value) is dict and value.get("type") != "session":
            return value
    return None


def _count_lines(body: bytes) -> int:
    """Lines that are not blank, as the reader tells them apart."""
    if _MAYBE_BLANK.search(body) is None and not body[:1].isspace():
        return body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
    return sum(1 for line in body.split(b"\n") if line.strip())
