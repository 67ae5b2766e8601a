"""The file provider on damaged or hostile input: every case ends in the
documented typed error (docs/architecture.md, "Bad input"), and no byte that
was already stored is lost or rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiontree.core.errors import (
    CorruptSessionTree,
    InvalidSessionId,
    SessionAlreadyExists,
    SessionNotFound,
)
from sessiontree.core.pi_session_file import new_session_header, serialize_line
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache


@pytest.fixture
def provider(db, tmp_path):
    clear_index_cache()
    return FileSessionTreeProvider(root=tmp_path / "sessions")


def user(text):
    return {"role": "user", "content": text}


def entry(entry_id, parent_id, text="x"):
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": "2026-04-19T00:00:00.000Z",
        "message": user(text),
    }


def write_file(provider, session_id, lines: list[bytes]) -> Path:
    path = provider.root / f"{session_id}.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def header_line(session_id):
    return serialize_line(new_session_header(session_id, cwd="/w"))


def every_read(provider, session_id):
    """Each read of the contract, called on ``session_id``."""
    return {
        "list_entries": lambda: provider.list_entries(session_id),
        "get_active_path": lambda: provider.get_active_path(session_id),
        "build_context": lambda: provider.build_context(session_id),
        "get_snapshot": lambda: provider.get_snapshot(session_id),
    }


def test_malformed_lines_anywhere_are_skipped_and_kept_on_disk(provider):
    a, b = entry("a0000001", None, "a"), entry("b0000001", "a0000001", "b")
    path = write_file(
        provider,
        "s1",
        [header_line("s1"), b"{not json\n", serialize_line(a), b"\n", b"[1, 2]\n", b"42\n", serialize_line(b)],
    )
    before = path.read_bytes()
    session = provider.register_existing_file("s1")
    assert session["leaf_entry_id"] == "b0000001"
    assert provider.list_entries("s1") == [a, b]
    c = provider.append_message("s1", user("c"))
    assert c["parentId"] == "b0000001"
    assert path.read_bytes() == before + serialize_line(c)  # the junk lines stay, untouched
    clear_index_cache()
    assert provider.list_entries("s1") == [a, b, c]


@pytest.mark.parametrize(
    "content",
    [b"", b"\n\n", b"garbage\n", serialize_line(entry("a0000001", None))],
    ids=["empty", "blank-lines", "garbage", "entry-but-no-header"],
)
def test_a_file_that_is_not_a_session_is_refused_and_left_alone(provider, content):
    path = write_file(provider, "bad", [content])
    with pytest.raises(CorruptSessionTree, match=r"bad\.jsonl is not a Pi session file"):
        provider.register_existing_file("bad")
    assert provider.get_session("bad") is None
    assert path.read_bytes() == content


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage\n", serialize_line(entry("a0000001", None))],
    ids=["emptied", "garbage", "header-lost"],
)
def test_a_session_file_damaged_behind_the_meta_row_refuses_reads_and_writes(provider, content):
    session = provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    assert provider.list_entries("s1")  # cached now: the damage must still be seen
    path = Path(session["session_file"])
    path.write_bytes(content)
    for name, read in every_read(provider, "s1").items():
        with pytest.raises(CorruptSessionTree, match="not a Pi session file"):
            read()
        assert path.read_bytes() == content, name
    for write in [
        lambda: provider.append_message("s1", user("b")),
        lambda: provider.begin_in_flight_entry("s1", {"type": "message", "message": user("b")}),
        lambda: provider.reset_leaf("s1"),
    ]:
        with pytest.raises(CorruptSessionTree):
            write()
        assert path.read_bytes() == content  # never a headerless entry appended
    assert provider.get_session("s1")["status"] == "active"


def test_duplicate_ids_refuse_every_read_and_write_and_nothing_is_rewritten(provider):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    path = Path(session["session_file"])
    with open(path, "ab") as f:
        f.write(serialize_line({**a, "message": user("evil twin")}))
    damaged = path.read_bytes()
    clear_index_cache()
    for read in every_read(provider, "s1").values():
        with pytest.raises(CorruptSessionTree, match=a["id"]):
            read()
    with pytest.raises(CorruptSessionTree, match=a["id"]):
        provider.append_message("s1", user("b"))
    assert path.read_bytes() == damaged
    assert provider.get_session("s1")["leaf_entry_id"] == a["id"]


def test_an_entry_line_without_a_string_id_is_corrupt_and_left_alone(provider):
    lines = [header_line("s1"), serialize_line(entry("a0000001", None)), b'{"type":"message","id":7}\n']
    path = write_file(provider, "s1", lines)
    with pytest.raises(CorruptSessionTree, match="without a string id"):
        provider.register_existing_file("s1")
    assert path.read_bytes() == b"".join(lines)


def test_a_duplicate_in_an_appended_tail_is_reported_by_its_own_id_every_time(provider):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    assert provider.list_entries("s1") == [a]  # cached: the next read is a tail read
    fresh = entry("c0000001", a["id"])
    with open(session["session_file"], "ab") as f:
        f.write(serialize_line(fresh) + serialize_line({**a, "message": user("twin")}))
    for _ in range(3):  # a failed tail read must not leave half of the tail in the cache
        with pytest.raises(CorruptSessionTree, match=f"Duplicate entry id {a['id']}"):
            provider.list_entries("s1")


def test_a_cycle_in_the_file_is_corrupt_for_path_reads_and_never_hangs(provider):
    # a ← b ← a: each names the other as its parent; c hangs off the cycle.
    lines = [
        header_line("s1"),
        serialize_line(entry("a0000001", "b0000001")),
        serialize_line(entry("b0000001", "a0000001")),
        serialize_line(entry("c0000001", "b0000001")),
        serialize_line(entry("d0000001", None)),
    ]
    path = write_file(provider, "s1", lines)
    provider.register_existing_file("s1")
    provider.switch_leaf("s1", "c0000001")
    with pytest.raises(CorruptSessionTree, match="Cycle detected"):
        provider.get_active_path("s1")
    with pytest.raises(CorruptSessionTree, match="Cycle detected"):
        provider.build_context("s1")
    with pytest.raises(CorruptSessionTree, match="Cycle detected"):
        provider.get_snapshot("s1")
    with pytest.raises(CorruptSessionTree, match="Cycle detected"):
        provider.create_branched_session("s1", "c0000001")
    # still inspectable: the entries are listed and a leaf off the cycle works
    assert [e["id"] for e in provider.list_entries("s1")] == ["a0000001", "b0000001", "c0000001", "d0000001"]
    assert [e["id"] for e in provider.get_active_path("s1", "d0000001")] == ["d0000001"]
    provider.switch_leaf("s1", "d0000001")
    assert provider.get_snapshot("s1")["active_path"] == ["d0000001"]
    assert path.read_bytes() == b"".join(lines)


def test_a_self_parent_is_a_cycle(provider):
    write_file(provider, "s1", [header_line("s1"), serialize_line(entry("a0000001", "a0000001"))])
    provider.register_existing_file("s1")
    with pytest.raises(CorruptSessionTree, match="Cycle detected at entry a0000001"):
        provider.build_context("s1")


def test_a_missing_parent_acts_as_a_root_as_in_pi(provider):
    orphan, child = entry("b0000001", "gone0001", "orphan"), entry("c0000001", "b0000001", "child")
    write_file(provider, "s1", [header_line("s1"), serialize_line(orphan), serialize_line(child)])
    provider.register_existing_file("s1")
    assert provider.get_active_path("s1") == [orphan, child]
    assert [m["content"] for m in provider.build_context("s1")["messages"]] == ["orphan", "child"]
    assert provider.get_snapshot("s1")["children_by_parent_id"] == {"gone0001": ["b0000001"], "b0000001": ["c0000001"]}


@pytest.mark.parametrize("bad_id", ["../../etc/passwd", "../s1", "/etc/passwd", "a/../../b", ".", "s1.jsonl/.."])
def test_traversing_session_ids_never_reach_the_disk(provider, tmp_path, bad_id):
    provider.create_session(session_id="s1")
    provider.list_entries("s1")  # s1 read once (its index written beside it): the branch below reads it
    before = sorted(p.name for p in tmp_path.rglob("*"))
    calls = [
        lambda: provider.create_session(session_id=bad_id),
        lambda: provider.register_existing_file(bad_id),
        lambda: provider.get_session(bad_id),
        lambda: provider.get_header(bad_id),
        lambda: provider.list_entries(bad_id),
        lambda: provider.append_message(bad_id, user("x")),
        lambda: provider.get_active_path(bad_id),
        lambda: provider.delete_session(bad_id, hard=True),
        lambda: provider.create_branched_session("s1", None, new_session_id=bad_id),
    ]
    for call in calls:
        with pytest.raises(InvalidSessionId):
            call()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_file_deleted_behind_the_meta_row(provider):
    session = provider.create_session(session_id="s1", title="kept")
    provider.append_message("s1", user("a"))
    path = Path(session["session_file"])
    path.unlink()
    # The meta row is still there and says so; entry reads and writes name the missing file.
    assert provider.get_session("s1")["title"] == "kept"
    for read in every_read(provider, "s1").values():
        with pytest.raises(SessionNotFound, match=r"s1\.jsonl"):
            read()
    for write in [
        lambda: provider.append_message("s1", user("b")),
        lambda: provider.switch_leaf("s1", "x"),
        lambda: provider.reset_leaf("s1"),
        lambda: provider.create_branched_session("s1", None),
    ]:
        with pytest.raises(SessionNotFound, match=r"s1\.jsonl"):
            write()
    assert not path.exists()  # never re-created as a headerless file
    with pytest.raises(SessionAlreadyExists):
        provider.create_session(session_id="s1")
    provider.delete_session("s1", hard=True)  # the way out: drop the meta row
    assert provider.get_session("s1") is None
    provider.create_session(session_id="s1")
    assert provider.list_entries("s1") == []
