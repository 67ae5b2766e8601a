"""Opening files that are not clean sessions, in Pi and in our file provider
(docs/pi-compatibility.md, "Opening files")."""

from __future__ import annotations

import shutil

import pytest

from sessiontree.core.errors import CorruptSessionTree
from sessiontree.core.pi_session_file import load_entries_from_file, split_header
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache

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
