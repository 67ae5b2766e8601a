"""Pi's JSONL codec: tolerant reading, v1→v3 migration, append-only writing."""

from __future__ import annotations

import copy
import itertools
import os
import re

import orjson
import pytest

from sessiontree.core.pi_session_file import (
    append_lines,
    load_entries_from_file,
    migrate_to_current_version,
    new_session_header,
    now_iso,
    parse_session_entries,
    serialize_file,
    serialize_line,
)
from tests.pi_fixtures import split_header

HEX8 = re.compile(r"^[0-9a-f]{8}$")
HEADER = {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2026-04-19T00:00:00.000Z", "cwd": "/w"}


def msg(entry_id: str, parent_id: str | None, text: str) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": "2026-04-19T00:00:01.000Z",
        "message": {"role": "user", "content": text},
    }


def jsonl(*objects) -> str:
    return "".join(orjson.dumps(o).decode() + "\n" for o in objects)


# --- parse_session_entries -------------------------------------------------


def test_parse_skips_blank_malformed_and_non_object_lines():
    text = (
        jsonl(HEADER)
        + "\n   \n"
        + "{not json\n"
        + "[1, 2]\n"
        + "42\n"
        + '"a string"\n'
        + "null\n"
        + jsonl(msg("a", None, "one"))
        + '{"type":"message","id":"torn'  # torn last line, no newline
    )
    parsed = parse_session_entries(text)
    assert parsed == [HEADER, msg("a", None, "one")]


def test_parse_accepts_bytes_and_crlf():
    text = jsonl(HEADER, msg("a", None, "one")).replace("\n", "\r\n").encode()
    assert parse_session_entries(text) == [HEADER, msg("a", None, "one")]


def test_parse_keeps_unicode_and_unknown_fields():
    entry = {**msg("a", None, "héllo 世界 🌍"), "futureField": {"nested": [1, 2.5, None, True]}}
    assert parse_session_entries(jsonl(HEADER, entry)) == [HEADER, entry]


def test_parse_of_nothing_is_empty():
    assert parse_session_entries("") == []
    assert parse_session_entries("\n\n") == []


# --- load_entries_from_file ------------------------------------------------


def test_load_returns_header_first_then_entries(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(jsonl(HEADER, msg("a", None, "1"), msg("b", "a", "2")), encoding="utf-8")
    loaded = load_entries_from_file(path)
    assert loaded[0] == HEADER
    assert [e["id"] for e in loaded[1:]] == ["a", "b"]


def test_load_missing_file_is_empty(tmp_path):
    assert load_entries_from_file(tmp_path / "absent.jsonl") == []


def test_load_empty_file_is_empty(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert load_entries_from_file(path) == []


def test_load_file_whose_first_line_is_not_a_header_is_not_a_session(tmp_path):
    path = tmp_path / "noheader.jsonl"
    path.write_text(jsonl(msg("a", None, "1"), HEADER), encoding="utf-8")
    assert load_entries_from_file(path) == []


def test_load_header_without_string_id_is_not_a_session(tmp_path):
    path = tmp_path / "badheader.jsonl"
    path.write_text(jsonl({**HEADER, "id": 5}, msg("a", None, "1")), encoding="utf-8")
    assert load_entries_from_file(path) == []


def test_load_skips_malformed_lines_and_torn_tail(tmp_path):
    path = tmp_path / "torn.jsonl"
    path.write_text(jsonl(HEADER, msg("a", None, "1")) + "garbage\n" + jsonl(msg("b", "a", "2")) + '{"type":', "utf-8")
    assert [e.get("id") for e in load_entries_from_file(path)] == ["sess-1", "a", "b"]


# --- migrate_to_current_version ---------------------------------------------

V1_HEADER = {"type": "session", "id": "old-1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w", "provider": "p"}


def v1_message(text: str) -> dict:
    return {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": {"role": "user", "content": text}}


def test_v1_gets_unique_ids_and_a_linear_chain():
    file_entries = [V1_HEADER.copy()] + [v1_message(str(i)) for i in range(50)]
    assert migrate_to_current_version(file_entries) is True
    header, entries = split_header(file_entries)
    assert header is not None and header["version"] == 3
    assert header["provider"] == "p"  # extra header fields survive
    entry_ids = [e["id"] for e in entries]
    assert all(HEX8.match(i) for i in entry_ids)
    assert len(set(entry_ids)) == 50
    assert entries[0]["parentId"] is None
    for previous, current in itertools.pairwise(entries):
        assert current["parentId"] == previous["id"]
    assert [e["message"]["content"] for e in entries] == [str(i) for i in range(50)]


def test_v1_first_kept_entry_index_counts_the_header_line():
    file_entries = [
        V1_HEADER.copy(),  # line 0
        v1_message("old"),  # line 1
        v1_message("kept"),  # line 2
        {
            "type": "compaction",
            "timestamp": "2025-01-01T00:00:02.000Z",
            "summary": "sum",
            "firstKeptEntryIndex": 2,
            "tokensBefore": 10,
        },
        v1_message("after"),
    ]
    migrate_to_current_version(file_entries)
    compaction = file_entries[3]
    assert "firstKeptEntryIndex" not in compaction
    assert compaction["firstKeptEntryId"] == file_entries[2]["id"]
    assert file_entries[2]["message"]["content"] == "kept"


@pytest.mark.parametrize("index", [0, 99, -1, "2", None, True])
def test_v1_first_kept_entry_index_that_names_no_entry_is_dropped(index):
    file_entries = [
        V1_HEADER.copy(),
        v1_message("a"),
        {"type": "compaction", "timestamp": "t", "summary": "s", "firstKeptEntryIndex": index, "tokensBefore": 1},
    ]
    migrate_to_current_version(file_entries)
    assert "firstKeptEntryIndex" not in file_entries[2]
    assert "firstKeptEntryId" not in file_entries[2]


def test_v2_hook_message_becomes_custom():
    file_entries = [
        {**V1_HEADER, "version": 2},
        {
            "type": "message",
            "id": "aaaa0001",
            "parentId": None,
            "timestamp": "t",
            "message": {"role": "hookMessage", "customType": "h", "content": "x"},
        },
        msg("aaaa0002", "aaaa0001", "user text"),
    ]
    assert migrate_to_current_version(file_entries) is True
    assert file_entries[0]["version"] == 3
    assert file_entries[1]["message"]["role"] == "custom"
    assert file_entries[1]["message"]["customType"] == "h"
    assert file_entries[2]["message"]["role"] == "user"
    # v2 already has ids: they are kept.
    assert [e["id"] for e in file_entries[1:]] == ["aaaa0001", "aaaa0002"]
    assert file_entries[2]["parentId"] == "aaaa0001"


def test_v1_hook_message_is_migrated_through_v2_to_custom():
    file_entries = [V1_HEADER.copy(), {"type": "message", "timestamp": "t", "message": {"role": "hookMessage"}}]
    migrate_to_current_version(file_entries)
    assert file_entries[1]["message"]["role"] == "custom"
    assert file_entries[0]["version"] == 3


def test_v3_is_untouched():
    file_entries = [HEADER.copy(), msg("a", None, "1"), {**msg("b", "a", "2"), "message": {"role": "hookMessage"}}]
    before = copy.deepcopy(file_entries)
    assert migrate_to_current_version(file_entries) is False
    assert file_entries == before


def test_migration_is_idempotent():
    file_entries = [V1_HEADER.copy(), v1_message("a"), v1_message("b")]
    assert migrate_to_current_version(file_entries) is True
    after_first = copy.deepcopy(file_entries)
    assert migrate_to_current_version(file_entries) is False
    assert file_entries == after_first


# --- writing ---------------------------------------------------------------


def test_serialize_line_is_one_compact_line_with_key_order_kept():
    entry = {"type": "message", "id": "a", "parentId": None, "z": 1, "b": {"y": 2, "x": "é\n"}}
    line = serialize_line(entry)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1  # newlines inside strings are escaped
    assert line == b'{"type":"message","id":"a","parentId":null,"z":1,"b":{"y":2,"x":"\xc3\xa9\\n"}}\n'
    assert orjson.loads(line) == entry


def test_serialize_file_writes_one_line_per_entry():
    entries = [HEADER, msg("a", None, "multi\nline"), msg("b", "a", "\u2028")]
    data = serialize_file(entries)
    assert data.count(b"\n") == 3
    assert parse_session_entries(data) == entries


def open_append(path) -> int:
    # Read-write: append_lines reads the last byte to detect a torn line.
    return os.open(path, os.O_RDWR | os.O_APPEND)


def test_append_lines_appends_complete_lines(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(serialize_line(HEADER))
    fd = open_append(path)
    try:
        size = append_lines(fd, [serialize_line(msg("a", None, "1"))])
        size = append_lines(fd, [serialize_line(msg("b", "a", "2")), serialize_line(msg("c", "b", "3"))], fsync=True)
    finally:
        os.close(fd)
    assert size == path.stat().st_size
    assert path.read_bytes() == serialize_file([HEADER, msg("a", None, "1"), msg("b", "a", "2"), msg("c", "b", "3")])


def test_append_after_a_torn_line_starts_a_new_line(tmp_path):
    path = tmp_path / "torn.jsonl"
    torn = b'{"type":"message","id":"torn0001","parentId":"a","mess'
    path.write_bytes(serialize_file([HEADER, msg("a", None, "1")]) + torn)
    fd = open_append(path)
    try:
        size = append_lines(fd, [serialize_line(msg("b", "a", "2"))])
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert size == len(data)
    assert data == serialize_file([HEADER, msg("a", None, "1")]) + torn + b"\n" + serialize_line(msg("b", "a", "2"))
    # The torn fragment stays one skipped line; everything before and after survives.
    assert load_entries_from_file(path) == [HEADER, msg("a", None, "1"), msg("b", "a", "2")]


def test_append_to_an_empty_file_adds_no_leading_newline(tmp_path):
    path = tmp_path / "new.jsonl"
    path.write_bytes(b"")
    fd = open_append(path)
    try:
        append_lines(fd, [serialize_line(HEADER)])
    finally:
        os.close(fd)
    assert path.read_bytes() == serialize_line(HEADER)


# --- header and timestamps -------------------------------------------------


def test_new_session_header():
    header = new_session_header("s1", cwd="/w", parent_session="/p/s0.jsonl", timestamp="T", extra={"x": 1, "id": "no"})
    assert header == {
        "type": "session",
        "version": 3,
        "id": "s1",
        "timestamp": "T",
        "cwd": "/w",
        "parentSession": "/p/s0.jsonl",
        "x": 1,
    }
    assert list(header)[:5] == ["type", "version", "id", "timestamp", "cwd"]
    assert "parentSession" not in new_session_header("s2")


def test_now_iso_has_milliseconds_and_z():
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", now_iso())
