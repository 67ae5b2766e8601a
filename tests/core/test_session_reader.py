"""The one reader of session files (sessiontree.core.session_reader): Pi
1.6.0's rules, fed at once or in pieces, and the skim that must agree with it.
tests/interop/test_file_open.py asks Pi itself about the same first lines."""

from __future__ import annotations

import gc

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.core.session_reader import (
    EMPTY,
    FIRST_NOT_HEADER,
    HEADER_UNREADABLE,
    NO_HEADER,
    SessionReader,
    gc_paused,
    read_chunks,
    read_session_bytes,
    skim_session_bytes,
    whole_lines_end,
)
from tests.sync import pi_folder as pi

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEADER = pi.header("sess-r")
ENTRIES = pi.branched_entries()[:3]
BODY = pi.lines([HEADER, *ENTRIES])


# --- what makes a file a session ------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [b"garbage", b"{torn", b"null", b"false", b"0", b'""', b"-0", b"   ", b"\xef\xbb\xbf" + orjson.dumps(HEADER)],
    ids=["garbage", "torn", "null", "false", "zero", "empty-string", "minus-zero", "blank", "bom-header"],
)
def test_lines_pi_skips_before_the_header(first):
    # Pi's parseSessionEntryLine yields nothing for them (JSON.parse fails, or
    # the value is false in JavaScript): the header after them counts.
    read = read_session_bytes(first + b"\n" + BODY)
    assert read.header == HEADER
    assert read.entries == ENTRIES
    assert read.malformed_lines == ([] if first.strip() == b"" else [1])


@pytest.mark.parametrize(
    "first",
    [b"42", b"[]", b"{}", b'"text"', b"true", orjson.dumps(ENTRIES[0]), orjson.dumps({**HEADER, "id": 7})],
    ids=["number", "empty-array", "empty-object", "string", "true", "entry", "header-without-string-id"],
)
def test_a_first_value_that_is_not_a_header_is_not_a_session(first):
    read = read_session_bytes(first + b"\n" + BODY)
    assert read.header is None and read.entries == []
    assert read.reason == FIRST_NOT_HEADER


def test_a_header_line_javascript_parses_but_python_cannot_hold_is_not_read():
    # A lone surrogate: JSON.parse takes it, an entry could never be written back.
    read = read_session_bytes(orjson.dumps(HEADER)[:-1] + b',"x":"\\ud800"}\n' + pi.lines(ENTRIES))
    assert read.header is None and read.reason == HEADER_UNREADABLE
    # After the header such a line is one more malformed line.
    read = read_session_bytes(BODY + b'{"type":"custom","id":"c1","v":1e400}\n')
    assert read.header == HEADER and read.entries == ENTRIES and read.malformed_lines == [5]


def test_empty_and_headerless_files_say_why():
    assert read_session_bytes(b"").reason == EMPTY
    assert read_session_bytes(b"\n \n\t\n").reason == EMPTY
    assert read_session_bytes(b"garbage\n{torn").reason == NO_HEADER
    assert read_session_bytes(BODY).reason is None


def test_after_the_header_non_objects_are_malformed_and_stray_headers_skipped():
    data = BODY + b"42\nnull\n[1]\nnot json\n" + orjson.dumps({**HEADER, "id": "other"}) + b"\n" + pi.lines(ENTRIES)
    read = read_session_bytes(data)
    assert read.entries == ENTRIES * 2
    assert read.malformed_lines == [5, 6, 7, 8]
    assert read.stray_header_lines == [9]
    assert read.skipped_lines == 5


def test_invalid_utf8_is_read_with_replacement_characters_as_pi_does():
    entry = {**ENTRIES[0], "message": {"role": "user", "content": "caf\xe9"}}
    line = orjson.dumps(entry).replace("é".encode(), b"\xe9")  # Latin-1 bytes in a UTF-8 file
    read = read_session_bytes(pi.lines([HEADER]) + line + b"\n")
    assert read.entries[0]["message"]["content"] == "caf\ufffd"
    assert read.malformed_lines == []


def test_the_last_line_is_read_without_its_newline_unless_torn():
    whole = read_session_bytes(BODY[:-1])
    assert whole.entries == ENTRIES and whole.end == len(BODY) - 1 and whole.torn_bytes == 0
    torn = read_session_bytes(BODY + b'{"type":"mess')
    assert torn.entries == ENTRIES and torn.end == len(BODY) and torn.torn_bytes == len(b'{"type":"mess')
    # Trailing blanks are not a torn line; a last value that parses is a (malformed) line, not torn.
    assert read_session_bytes(BODY + b"  ").torn_bytes == 0
    last = read_session_bytes(BODY + b"42")
    assert last.torn_bytes == 0 and last.malformed_lines == [5] and last.end == len(BODY) + 2
    assert whole_lines_end(BODY + b'{"type":"mess') == len(BODY)
    assert whole_lines_end(BODY[:-1]) == len(BODY) - 1


def test_a_tail_read_continues_from_an_offset():
    more = pi.lines(pi.branched_entries()[3:5])
    reader = SessionReader(offset=len(BODY), after_header=True)
    assert reader.feed(more + b'{"ty', end=True) == pi.branched_entries()[3:5]
    assert reader.offset == len(BODY) + len(more) and reader.torn_bytes == 4


def test_a_probe_stops_at_the_header():
    reader = SessionReader()
    assert reader.feed(b"junk\n" + BODY, until_header=True) == []
    assert reader.header == HEADER and reader.decided
    assert reader.offset == len(b"junk\n") + len(orjson.dumps(HEADER)) + 1
    assert reader.feed((b"junk\n" + BODY)[reader.offset :], end=True) == ENTRIES


# --- fed in pieces, it reads what it reads at once ------------------------------------

LINES = st.sampled_from(
    [
        *[orjson.dumps(entry) for entry in pi.branched_entries()],
        orjson.dumps(HEADER),
        b"",
        b"  ",
        b"\r",
        b"not json",
        b"null",
        b"42",
        b"[]",
        b"{}",
        b'{"type":"session","id":5}',
        b'{"type":"sess',
        b"\xff\xfe",
        b'{"type":"session_info","id":"i1","name":"x"}',
        b'{"type":"custom","id":"c\xe91"}',
        b' {"type":"session_info","id":"i2","name":" spaced "}',
    ]
)


@st.composite
def files(draw):
    lines = draw(st.lists(LINES, max_size=12))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), orjson.dumps(HEADER))
    data = b"\n".join(lines)
    return data + draw(st.sampled_from([b"", b"\n", b'\n{"type":"message","id":"torn']))


def whole(data: bytes) -> tuple:
    read = read_session_bytes(data)
    return (read.header, read.entries, read.malformed_lines, read.stray_header_lines, read.torn_bytes, read.end)


@PROPERTY_SETTINGS
@given(files(), st.integers(1, 40))
def test_chunks_read_as_the_whole(tmp_path_factory, data, chunk_bytes):
    """How the file storage and sync read: ``read_chunks`` from a file, a
    few bytes at a time; a line cut by a chunk's end is read with the next."""
    path = tmp_path_factory.mktemp("chunks") / "s.jsonl"
    path.write_bytes(data)
    reader = SessionReader()
    entries, read = [], b""
    with path.open("rb") as file:
        for chunk_entries, chunk in read_chunks(file.fileno(), reader, size=len(data), chunk_bytes=chunk_bytes):
            entries += chunk_entries
            read += bytes(chunk)
    got = (reader.header, entries, reader.malformed_lines, reader.stray_header_lines, reader.torn_bytes, reader.offset)
    if reader.not_a_session:
        assert read_session_bytes(data).header is None
    else:
        assert got == whole(data)
        assert read == data[: reader.offset]  # what a caller hashes: exactly the bytes read


@PROPERTY_SETTINGS
@given(files())
def test_the_skim_agrees_with_the_reader(data):
    read = read_session_bytes(data)
    if read.header is None:
        return  # the skim is for sessions (sync probes the header first)
    skim = skim_session_bytes(data)
    assert skim.session_infos == [e for e in read.entries if e.get("type") == "session_info"]
    assert skim.last_entry == (read.entries[-1] if read.entries else None)
    assert skim.lines == 1 + len(read.entries) + read.skipped_lines
    assert (skim.end, skim.torn_bytes) == (read.end, read.torn_bytes)
    # From an offset after the header (a grown file), too.
    first = orjson.dumps(HEADER) + b"\n"
    if data.startswith(first):
        tail = SessionReader(offset=len(first), after_header=True)
        tail_entries = tail.feed(data[len(first) :], end=True)
        skim = skim_session_bytes(data[len(first) :], offset=len(first))
        assert skim.lines == len(tail_entries) + tail.skipped_lines
        assert (skim.end, skim.torn_bytes) == (tail.offset, tail.torn_bytes)


# --- gc_paused(promote=True) ---------------------------------------------------


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def in_generation(obj, generation):
    return any(o is obj for o in gc.get_objects(generation=generation))


def test_promote_moves_what_was_built_to_the_oldest_generation(collector_on):
    with gc_paused(promote=True):
        assert not gc.isenabled()
        built = [{"n": [i]} for i in range(1000)]
    assert gc.isenabled()
    assert in_generation(built, 2) and in_generation(built[0], 2)
    with gc_paused():
        young = [{"n": [i]} for i in range(10)]
    assert in_generation(young, 0)


def test_promote_leaves_frozen_objects_frozen(collector_on):
    frozen = [[]]
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        assert count > 0
        with gc_paused(promote=True):
            built = [[] for _ in range(10)]
        # Nothing was frozen or unfrozen: promoting would have added the ten
        # lists (or emptied the permanent generation, thousands of objects).
        # A frozen object that some thread frees meanwhile leaves it, so the
        # count may drop by a few (seen once in a full run: by one).
        assert count - 5 <= gc.get_freeze_count() <= count
        assert in_generation(built, 0)
    finally:
        gc.unfreeze()
    assert in_generation(frozen, 2)


def test_a_nested_pause_that_promotes_makes_the_outermost_one_promote(collector_on):
    with gc_paused():
        with gc_paused(promote=True):
            built = [[] for _ in range(10)]
        assert not gc.isenabled()  # resumed only when the outermost pause ends
        assert in_generation(built, 0)
    assert gc.isenabled()
    assert in_generation(built, 2)
    with gc_paused(), gc_paused():
        young = [[] for _ in range(10)]
    assert in_generation(young, 0)  # nobody asked: nothing promoted


def test_spans_name_each_entry_line_read_in_chunks_from_any_boundary(tmp_path):
    """``spans``: the offset and length of each entry's line, whatever the
    chunking, with blank, malformed, stray-header, CRLF and multi-byte lines
    around; each span's bytes decode to the entry handed on."""
    import os

    header = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":""}\n'
    lines = [
        b"\n",
        b'{"type":"message","id":"a","parentId":null,"text":"\xc3\xa9\xe2\x9c\x93"}\n',
        b"garbage\n",
        b'{"type":"session","version":3,"id":"stray","timestamp":"t","cwd":""}\n',
        b'{"type":"label","id":"b","parentId":"a"}\r\n',
        b"  \n",
        b'{"type":"message","id":"c","parentId":"b"}',  # the last line, without its newline
    ]
    data = b"junk before\n" + header + b"".join(lines)
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    for chunk_bytes in (7, 64, 1 << 20):
        spans: list[int] = []
        reader = SessionReader(spans=spans)
        entries = []
        fd = os.open(path, os.O_RDONLY)
        try:
            for chunk_entries, _ in read_chunks(fd, reader, size=len(data), chunk_bytes=chunk_bytes):
                entries += chunk_entries
        finally:
            os.close(fd)
        assert [e["id"] for e in entries] == ["a", "b", "c"]
        assert len(spans) == 2 * len(entries)
        for entry, offset, length in zip(entries, spans[0::2], spans[1::2], strict=True):
            assert orjson.loads(data[offset : offset + length]) == entry
        assert data[spans[2] : spans[2] + spans[3]].endswith(b"\r")  # the CRLF line, its \r kept
