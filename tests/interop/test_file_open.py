"""Opening files that are not clean sessions, in Pi and in our file provider
(docs/pi-compatibility.md, "Opening files")."""

from __future__ import annotations

import shutil

import orjson
import pytest

from sessiontree.core.errors import CorruptSessionTree
from sessiontree.core.pi_session_file import load_entries_from_file
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from tests.pi_fixtures import split_header

from .messages import assistant, user

pytestmark = pytest.mark.django_db


def pi_session(pi, tmp_path):
    ops = [{"op": "message", "message": user("one")}, {"op": "message", "message": assistant("two", tokens=10)}]
    return tmp_path.joinpath(pi.write(tmp_path / "written", ops)["file"])


def test_a_non_empty_file_that_is_not_a_session_is_refused_and_left_alone(pi, tmp_path):
    # Pi 0.80.3 (#6002): refuse, never overwrite. We do the same.
    junk = b'{"hello": "world"}\nnot json\n'
    path = tmp_path / "notes.jsonl"
    path.write_bytes(junk)
    answer = pi.open(path)
    assert not answer["accepted"] and "not a valid" in answer["error"]
    assert path.read_bytes() == junk
    assert load_entries_from_file(path) == []
    provider = FileSessionTreeProvider()
    shutil.copyfile(path, provider.root / "notes.jsonl")
    with pytest.raises(CorruptSessionTree, match="not a Pi session file"):
        provider.register_existing_file("notes")
    assert (provider.root / "notes.jsonl").read_bytes() == junk


def test_a_file_without_its_final_newline_loses_no_entry(pi, tmp_path):
    # Pi 0.84.4 (#8345) reads the last line and repairs the newline on open;
    # we read the last line too, and our next append starts a new line.
    written = pi_session(pi, tmp_path)
    data = written.read_bytes()
    assert data.endswith(b"\n")
    header, entries = split_header(load_entries_from_file(written))

    provider = FileSessionTreeProvider()
    ours = provider.root / f"{header['id']}.jsonl"
    ours.write_bytes(data[:-1])
    clear_index_cache()
    session = provider.register_existing_file(header["id"])
    assert provider.list_entries(header["id"]) == entries
    assert session["leaf_entry_id"] == entries[-1]["id"]
    appended = provider.append_message(header["id"], user("three"))
    assert appended["parentId"] == entries[-1]["id"]
    assert ours.read_bytes().startswith(data)  # the newline came back, nothing else changed
    assert [e["id"] for e in pi.read(ours, leaves=[])["entries"]] == [*(e["id"] for e in entries), appended["id"]]

    pis = tmp_path / "pis.jsonl"
    pis.write_bytes(data[:-1])
    assert pi.open(pis)["accepted"]
    assert pis.read_bytes() == data  # Pi repaired it on open


# What makes a file a session: Pi 1.6.0 skips lines before the header that do
# not parse (or parse to a value JavaScript counts as false); the first value
# that is left must be the header. The kernel's reader decides the same
# (tests/core/test_session_reader.py has the reasons).
HEADER = {"type": "session", "version": 3, "id": "sess-first", "timestamp": "2026-01-02T03:04:05.678Z", "cwd": "/w"}
ENTRY = {
    "type": "message",
    "id": "u0000001",
    "parentId": None,
    "timestamp": "2026-01-02T03:04:06.000Z",
    "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1767322800000},
}
FIRST_LINES = {
    "garbage": b"this is not JSON",
    "torn": b'{"type":"message","id":"x',
    "null": b"null",
    "false": b"false",
    "zero": b"0",
    "minus-zero": b"-0",
    "empty-string": b'""',
    "blank": b" \t",
    "bom-header": b"\xef\xbb\xbf" + orjson.dumps(HEADER),
    "invalid-utf8": b"\xff\xfe garbage",
    "number": b"42",
    "true": b"true",
    "string": b'"text"',
    "empty-array": b"[]",
    "empty-object": b"{}",
    "entry": orjson.dumps(ENTRY),
    "header-without-string-id": orjson.dumps({**HEADER, "id": 7}),
}


@pytest.mark.parametrize("first", FIRST_LINES.values(), ids=FIRST_LINES.keys())
def test_pi_and_we_agree_on_what_makes_a_file_a_session(pi, tmp_path, first):
    path = tmp_path / "s.jsonl"
    data = first + b"\n" + orjson.dumps(HEADER) + b"\n" + orjson.dumps(ENTRY) + b"\n"
    path.write_bytes(data)
    answer = pi.open(path)
    ours = load_entries_from_file(path)
    assert answer["accepted"] == bool(ours), answer
    assert path.read_bytes() == data  # neither side touched it
    provider = FileSessionTreeProvider()
    shutil.copyfile(path, provider.root / "sess-first.jsonl")
    if answer["accepted"]:
        assert ours == [HEADER, ENTRY]
        assert pi.read(path, leaves=[])["entries"] == [ENTRY]
        provider.register_existing_file("sess-first")
        assert provider.list_entries("sess-first") == [ENTRY]
    else:
        with pytest.raises(CorruptSessionTree, match="not a Pi session file"):
            provider.register_existing_file("sess-first")


def test_a_header_pi_parses_but_we_cannot_hold_is_refused_with_a_reason(pi, tmp_path):
    # Known difference: JSON.parse keeps a lone surrogate, which no Python
    # entry could write back; the file is refused (typed), never half-read.
    path = tmp_path / "s.jsonl"
    path.write_bytes(orjson.dumps(HEADER)[:-1] + b',"note":"\\ud800"}\n' + orjson.dumps(ENTRY) + b"\n")
    assert pi.open(path)["accepted"]
    assert load_entries_from_file(path) == []
    provider = FileSessionTreeProvider()
    shutil.copyfile(path, provider.root / "sess-first.jsonl")
    with pytest.raises(CorruptSessionTree, match="lone surrogate"):
        provider.register_existing_file("sess-first")


def test_invalid_utf8_in_an_entry_reads_as_pi_reads_it(pi, tmp_path):
    # Pi decodes the file with replacement characters; so does our reader.
    line = orjson.dumps({**ENTRY, "message": {**ENTRY["message"], "content": "caf\u00e9"}}).replace(
        b"\xc3\xa9", b"\xe9"
    )
    path = tmp_path / "s.jsonl"
    path.write_bytes(orjson.dumps(HEADER) + b"\n" + line + b"\n")
    pis = pi.read(path, leaves=[])["entries"]
    assert pis[0]["message"]["content"] == "caf\ufffd"
    assert load_entries_from_file(path)[1:] == pis
