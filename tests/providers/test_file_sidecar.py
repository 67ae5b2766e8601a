"""The ``file`` storage's persisted index (``file_sidecar``, issue 23): a new
process opens a session from it without decoding the file's lines, gets the
very index a full pass builds, and never trusts one that no longer describes
the file."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.core.path_facts import facts_in_order
from sessiontree.core.pi_session_file import new_session_header, serialize_file, serialize_line
from sessiontree.providers import file_provider, file_sidecar
from sessiontree.providers.file_provider import FileIndex, FileSessionTreeProvider, FileStorage, clear_index_cache
from tests.contract.erasing import EraseIds
from tests.core.test_context_fast_paths import session_trees

SECRET = "sidecar-secret-text"


@pytest.fixture
def provider(db, tmp_path):
    clear_index_cache()
    yield FileSessionTreeProvider(root=tmp_path / "sessions")
    clear_index_cache()


@pytest.fixture
def decoded(monkeypatch):
    """How many entries the storage decodes from whole passes and tail reads
    (``read_chunks``), and how many lines it reads back by offset."""
    counts = {"scanned": 0, "read_back": 0, "loads": 0}
    real_chunks = file_provider.read_chunks
    real_line = file_provider._decode_entry_line
    real_load = FileStorage._load

    def read_chunks(*args, **kwargs):
        for entries, data in real_chunks(*args, **kwargs):
            counts["scanned"] += len(entries)
            yield entries, data

    def decode_entry_line(line):
        counts["read_back"] += 1
        return real_line(line)

    def load(self, *args, **kwargs):
        counts["loads"] += 1
        return real_load(self, *args, **kwargs)

    monkeypatch.setattr(file_provider, "read_chunks", read_chunks)
    monkeypatch.setattr(file_provider, "_decode_entry_line", decode_entry_line)
    monkeypatch.setattr(FileStorage, "_load", load)
    return counts


def conversation(provider, session_id: str, turns: int) -> list[dict]:
    provider.create_session(session_id=session_id, cwd="/w")
    written = []
    for i in range(turns):
        written.append(provider.append_message(session_id, {"role": "user", "content": f"{SECRET} {i}"}))
        written.append(
            provider.append_message(
                session_id,
                {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}], "model": "m"},
            )
        )
        if i % 7 == 3:
            written.append(
                provider.append_entry(session_id, {"type": "custom", "customType": "note", "data": {"i": i}})
            )
        if i % 9 == 5:
            written.append(
                provider.append_message(
                    session_id,
                    {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "bash", "content": "ok"},
                )
            )
    return written


def index_of(provider, session_id: str) -> FileIndex:
    with provider.storage.read(session_id) as view:
        return view.index


def content(index: FileIndex) -> dict:
    """Everything the index holds but its in-process token and sidecar bookkeeping."""
    return {name: getattr(index, name) for name in FileIndex.__slots__ if name not in ("token", "sidecar_entries")}


def cold(provider, session_id: str, settings) -> dict:
    """The index a full pass builds (no sidecar read or written)."""
    clear_index_cache()
    settings.SESSIONTREE_FILE_INDEX_SIDECAR = False
    try:
        return content(index_of(provider, session_id))
    finally:
        settings.SESSIONTREE_FILE_INDEX_SIDECAR = True
        clear_index_cache()


def sidecar_path(provider, session_id: str) -> Path:
    return file_sidecar.path_of(Path(provider.get_session(session_id)["session_file"]))


def saved(provider, session_id: str) -> Path:
    """Make sure the session's sidecar holds all its entries (a full pass writes it)."""
    session_file = Path(provider.get_session(session_id)["session_file"])
    clear_index_cache()
    file_sidecar.delete(session_file)
    index_of(provider, session_id)
    clear_index_cache()
    return file_sidecar.path_of(session_file)


# --- used ---------------------------------------------------------------------------------


def test_a_new_process_opens_from_the_sidecar_without_decoding_a_line(provider, decoded, settings):
    written = conversation(provider, "s1", 40)
    path = saved(provider, "s1")
    assert path.is_file() and path.parent.name == file_sidecar.FOLDER
    expected = cold(provider, "s1", settings)
    decoded.update(scanned=0, read_back=0, loads=0)
    context = provider.build_context("s1")
    assert decoded["scanned"] == 0 and decoded["loads"] == 0
    assert 0 < decoded["read_back"] <= len(written)  # the context's own lines (its path's), read by offset
    assert context["messages"][-1] == written[-1]["message"]
    assert content(index_of(provider, "s1")) == expected
    clear_index_cache()
    assert provider.list_entries("s1") == written


def test_the_first_append_in_a_new_process_decodes_no_line_of_the_file(provider, decoded):
    conversation(provider, "s1", 40)
    saved(provider, "s1")
    decoded.update(scanned=0, read_back=0, loads=0)
    provider.append_message("s1", {"role": "user", "content": "one more"})
    assert decoded == {"scanned": 0, "read_back": 0, "loads": 0}


def test_the_context_and_every_read_are_the_same_with_and_without_it(provider, settings):
    conversation(provider, "s1", 30)
    saved(provider, "s1")
    with_sidecar = (provider.build_context("s1"), provider.get_snapshot("s1"), provider.list_entries("s1"))
    settings.SESSIONTREE_FILE_INDEX_SIDECAR = False
    clear_index_cache()
    assert (provider.build_context("s1"), provider.get_snapshot("s1"), provider.list_entries("s1")) == with_sidecar


def test_appends_rewrite_it_only_once_enough_is_missing(provider, monkeypatch):
    monkeypatch.setattr(file_sidecar, "MIN_UNSAVED", 4)
    count = len(conversation(provider, "s1", 4))
    path = saved(provider, "s1")
    before = path.read_bytes()
    provider.append_message("s1", {"role": "user", "content": "one"})
    assert path.read_bytes() == before  # one append does not rewrite it
    for i in range(4):
        provider.append_message("s1", {"role": "user", "content": f"more {i}"})
    assert path.read_bytes() != before
    clear_index_cache()
    assert index_of(provider, "s1").sidecar_entries >= count + 4  # what the last rewrite held


def test_it_is_off_with_the_setting(provider, settings, decoded):
    settings.SESSIONTREE_FILE_INDEX_SIDECAR = False
    conversation(provider, "s1", 5)
    clear_index_cache()
    provider.build_context("s1")
    assert not sidecar_path(provider, "s1").exists()
    settings.SESSIONTREE_FILE_INDEX_SIDECAR = True
    conversation(provider, "s2", 5)
    path = saved(provider, "s2")
    settings.SESSIONTREE_FILE_INDEX_SIDECAR = False
    decoded.update(loads=0)
    provider.build_context("s2")  # not read either
    assert decoded["loads"] == 1 and path.is_file()


def test_it_holds_no_payload_text(provider):
    conversation(provider, "s1", 20)
    data = saved(provider, "s1").read_bytes()
    assert SECRET.encode() not in data and b"answer" not in data


# --- never stale -----------------------------------------------------------------------------


def test_lines_appended_behind_its_back_are_read_from_the_file(provider, settings, decoded):
    written = conversation(provider, "s1", 10)
    saved(provider, "s1")
    session_file = Path(provider.get_session("s1")["session_file"])
    foreign = {"type": "message", "id": "f0000001", "parentId": written[-1]["id"], "timestamp": "t"}
    foreign["message"] = {"role": "user", "content": "Pi wrote this"}
    with open(session_file, "ab") as out:  # as Pi appends, sidecar untouched
        out.write(serialize_line(foreign))
    decoded.update(scanned=0, loads=0)
    assert provider.list_entries("s1")[-1] == foreign
    assert decoded["loads"] == 0 and decoded["scanned"] == 1  # the tail alone
    assert content(index_of(provider, "s1")) == cold(provider, "s1", settings)


@pytest.mark.parametrize(
    "damage",
    [
        "truncated_file",
        "rewritten_same_size",
        "replaced_same_size",
        "torn_sidecar",
        "flipped_byte",
        "garbage",
        "other_format",
        "empty_sidecar",
    ],
)
def test_a_sidecar_that_does_not_describe_the_file_is_never_used(provider, settings, decoded, damage):
    written = conversation(provider, "s1", 12)
    path = saved(provider, "s1")
    session_file = Path(provider.get_session("s1")["session_file"])
    data = session_file.read_bytes()
    st = session_file.stat()
    if damage == "truncated_file":  # the last entry cut off (same inode)
        os.truncate(session_file, len(data) - len(serialize_line(written[-1])))
    elif damage in ("rewritten_same_size", "replaced_same_size"):
        # The last entry's text changed, same length, same mtime: only the bytes tell.
        last = serialize_line(written[-1])
        changed = data[: -len(last)] + last.replace(b"answer", b"ANSWER")
        assert len(changed) == len(data) and changed != data
        if damage == "rewritten_same_size":
            with open(session_file, "r+b") as out:
                out.write(changed)
        else:
            temp = session_file.with_name("replacement")
            temp.write_bytes(changed)
            os.replace(temp, session_file)
        os.utime(session_file, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif damage == "torn_sidecar":  # a crash mid-write (were it not renamed into place)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "flipped_byte":
        raw = bytearray(path.read_bytes())
        raw[-10] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif damage == "garbage":
        path.write_bytes(os.urandom(5000))
    elif damage == "empty_sidecar":
        path.write_bytes(b"")
    else:
        raw = path.read_bytes()
        path.write_bytes(raw.replace(b'"format":"', b'"format":"0', 1))
    clear_index_cache()  # a new process
    decoded.update(loads=0)
    entries = provider.list_entries("s1")
    assert decoded["loads"] == 1  # read whole again
    assert entries == [orjson.loads(line) for line in session_file.read_bytes().splitlines()[1:]]
    assert content(index_of(provider, "s1")) == cold(provider, "s1", settings)
    # ...and written anew: the next process uses it.
    decoded.update(loads=0)
    clear_index_cache()
    assert provider.list_entries("s1") == entries
    assert decoded["loads"] == 0


def test_a_stray_temporary_file_of_a_crashed_writer_is_ignored(provider, decoded):
    conversation(provider, "s1", 5)
    path = saved(provider, "s1")
    stray = path.parent / (path.name + ".123-456.tmp")
    stray.write_bytes(b"half a sidecar")
    decoded.update(loads=0)
    provider.build_context("s1")
    assert decoded["loads"] == 0
    file_sidecar.delete(Path(provider.get_session("s1")["session_file"]))
    assert not stray.exists() and not path.exists()


def test_erase_drops_it_and_the_next_one_holds_no_erased_text(provider, decoded):
    written = conversation(provider, "s1", 6)
    path = saved(provider, "s1")
    index_of(provider, "s1")
    provider.erase_entries("s1", EraseIds(written[0]["id"]))
    assert not path.exists()
    clear_index_cache()
    decoded.update(loads=0)
    assert provider.list_entries("s1")[0] != written[0]
    assert decoded["loads"] == 1 and path.is_file()  # the erased file's own index
    assert SECRET.encode() not in path.read_bytes()


def test_destroy_and_cutting_a_torn_tail_drop_it(provider):
    conversation(provider, "s1", 3)
    path = saved(provider, "s1")
    session_file = Path(provider.get_session("s1")["session_file"])
    with open(session_file, "ab") as out:
        out.write(b'{"type":"message","id":"torn')
    provider.cut_torn_tail("s1")
    assert not path.exists()
    path = saved(provider, "s1")
    provider.delete_session("s1", hard=True)
    assert not path.exists() and not session_file.exists()


def test_an_index_of_a_file_replaced_meanwhile_is_not_written(provider, tmp_path):
    conversation(provider, "s1", 3)
    clear_index_cache()
    session_file = Path(provider.get_session("s1")["session_file"])
    index = index_of(provider, "s1")
    file_sidecar.delete(session_file)
    temp = session_file.with_name("copy")
    temp.write_bytes(session_file.read_bytes())
    fd = os.open(session_file, os.O_RDONLY)
    try:
        os.replace(temp, session_file)
        assert file_sidecar.save(session_file, fd, index) is False
    finally:
        os.close(fd)
    assert not file_sidecar.path_of(session_file).exists()


# --- the same index, whatever the tree (Hypothesis) ------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=session_trees(max_entries=40), split=st.integers(0, 40))
def test_the_index_from_the_sidecar_is_the_one_a_full_pass_builds(tmp_path_factory, entries, split):
    """Any tree (the context fast paths' generator: compactions, settings,
    branches, unknown parents), saved after ``split`` entries, the rest
    appended behind the sidecar's back: the index read back is the full pass's."""
    folder = tmp_path_factory.mktemp("sidecar")
    storage = FileStorage(folder)
    path = folder / "s.jsonl"
    header = new_session_header("s")
    split = min(split, len(entries))
    path.write_bytes(serialize_file([header, *entries[:split]]))

    def open_index(*, sidecar: bool) -> dict:
        clear_index_cache()
        with settings_override(sidecar):
            fd = os.open(path, os.O_RDONLY)
            try:
                return content(storage._refresh(path, fd))
            finally:
                os.close(fd)

    open_index(sidecar=True)  # writes it
    with open(path, "ab") as out:
        out.write(b"".join(serialize_line(entry) for entry in entries[split:]))
    assert file_sidecar.path_of(path).is_file()
    assert open_index(sidecar=True) == open_index(sidecar=False)


# Parents the index must take as Pi does: a later entry, none known, a number, itself.
ODD_PARENTS = st.sampled_from(["later", "unknown", "number", "itself"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=session_trees(max_entries=40), odd=st.lists(st.tuples(st.integers(0, 39), ODD_PARENTS), max_size=4))
def test_the_index_s_path_facts_are_the_ones_computed_in_order(tmp_path_factory, entries, odd):
    """The path facts the index keeps as columns by position are, entry for
    entry, ``path_facts.facts_in_order``'s (the rule every storage follows),
    for any tree and odd parents, from a full pass and from the sidecar."""
    for at, kind in odd:
        if at < len(entries):
            entry = entries[at]
            later = entries[at + 1]["id"] if at + 1 < len(entries) else "nobody"
            entry["parentId"] = {"later": later, "unknown": "nobody", "number": 7, "itself": entry["id"]}[kind]
    folder = tmp_path_factory.mktemp("facts")
    storage = FileStorage(folder)
    path = folder / "s.jsonl"
    path.write_bytes(serialize_file([new_session_header("s"), *entries]))
    expected = dict(zip((e["id"] for e in entries), facts_in_order(entries), strict=True))
    for sidecar in (False, True, True):  # a full pass (the sidecar written on the first True), then read back
        clear_index_cache()
        with settings_override(sidecar):
            fd = os.open(path, os.O_RDONLY)
            try:
                index = storage._refresh(path, fd)
            finally:
                os.close(fd)
        assert {entry_id: index.facts_of(entry_id) for entry_id in expected} == expected
        assert index.facts_of("nobody") is None
    assert file_sidecar.path_of(path).is_file()


def test_parents_read_back_are_the_ids_own_strings(provider, settings):
    """A parent read back from the sidecar is the very string object of the
    id it names (one copy of each id in memory, as after a full pass), and
    a parent the file does not hold comes back as it was."""
    conversation(provider, "shared", 20)
    session_file = Path(provider.get_session("shared")["session_file"])
    with open(session_file, "ab") as out:
        out.write(serialize_line({"type": "custom", "id": "waits", "parentId": "later", "customType": "n"}))
    saved(provider, "shared")
    clear_index_cache()
    index = index_of(provider, "shared")
    assert index.sidecar_entries == len(index)  # read back, not passed over
    named = [(at, parent) for at, parent in enumerate(index.parents) if parent in index.position]
    assert len(named) == len(index) - 2  # all but the root and the entry waiting for "later"
    assert all(parent is index.ids[index.position[parent]] for _, parent in named)
    assert index.parents[index.position["waits"]] == "later"
    assert index.parents[0] is None


class settings_override:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __enter__(self) -> None:
        from django.conf import settings as django_settings

        self.before = getattr(django_settings, "SESSIONTREE_FILE_INDEX_SIDECAR", True)
        django_settings.SESSIONTREE_FILE_INDEX_SIDECAR = self.on

    def __exit__(self, *exc: object) -> None:
        from django.conf import settings as django_settings

        django_settings.SESSIONTREE_FILE_INDEX_SIDECAR = self.before


def test_the_context_reads_its_path_s_lines_together(provider, monkeypatch, settings):
    """The segment's ids come from the skeleton and its entries are read in
    one call (lines close together in one ``pread``), not one by one."""
    settings.SESSIONTREE_FILE_CACHE_BYTES = 0  # nothing decoded kept: every entry read back
    written = conversation(provider, "s1", 30)
    expected = provider.build_context("s1")
    clear_index_cache()
    calls: list[int] = []
    real_read = FileIndex.read

    def read(self, fd, positions):
        calls.append(len(positions))
        return real_read(self, fd, positions)

    monkeypatch.setattr(FileIndex, "read", read)
    assert provider.build_context("s1") == expected
    assert len(calls) <= 3 and max(calls) == len(written)  # the whole path (no compaction here) at once


@pytest.mark.parametrize("odd_id", ["a\x00b", "ü€😀", "x" * 300])
def test_any_id_round_trips(tmp_path, monkeypatch, odd_id):
    """Ids are written as one string with a separator unless one holds it."""
    storage = FileStorage(tmp_path)
    path = tmp_path / "s.jsonl"
    entries = [
        {"type": "message", "id": odd_id, "parentId": None, "message": {"role": "user", "content": "a"}},
        {"type": "label", "id": "b", "parentId": odd_id, "targetId": odd_id, "label": "l"},
    ]
    path.write_bytes(serialize_file([new_session_header("s"), *entries]))
    fd = os.open(path, os.O_RDONLY)
    try:
        clear_index_cache()
        first = content(storage._refresh(path, fd))
        clear_index_cache()
        monkeypatch.setattr(FileStorage, "_load", None)  # from the sidecar or not at all
        again = storage._refresh(path, fd)
        assert content(again) == first and again.ids[0] == odd_id
    finally:
        os.close(fd)
        clear_index_cache()


def _race(path: str, rounds: int) -> int:
    """A process opening the file from its sidecar and writing the sidecar
    again, over and over: 0 when every index it got was the full pass's."""
    session_file = Path(path)
    storage = FileStorage(session_file.parent)
    fd = os.open(session_file, os.O_RDONLY)
    try:
        with settings_override(False):
            clear_index_cache()
            expected = content(storage._refresh(session_file, fd))
        for _ in range(rounds):
            clear_index_cache()
            index = storage._refresh(session_file, fd)
            if content(index) != expected:
                return 1
            index.sidecar_entries = 0
            file_sidecar.save(session_file, fd, index)
    finally:
        os.close(fd)
    return 0


def test_processes_reading_and_writing_it_at_once_always_get_the_right_index(tmp_path):
    import multiprocessing

    entries = [
        {"type": "message", "id": f"e{i:07d}", "parentId": f"e{i - 1:07d}" if i else None, "message": {"role": "user"}}
        for i in range(3000)
    ]
    path = tmp_path / "s.jsonl"
    path.write_bytes(serialize_file([new_session_header("s"), *entries]))
    with multiprocessing.get_context("fork").Pool(3) as pool:
        assert pool.starmap(_race, [(str(path), 15)] * 3) == [0, 0, 0]
    assert file_sidecar.path_of(path).is_file()
    assert not list(file_sidecar.path_of(path).parent.glob("*.tmp"))


def test_failing_to_write_it_never_fails_a_read(provider, monkeypatch):
    written = conversation(provider, "s1", 3)
    session_file = Path(provider.get_session("s1")["session_file"])
    file_sidecar.delete(session_file)
    clear_index_cache()

    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(file_sidecar.os, "replace", refuse)
    assert provider.list_entries("s1") == written
    assert not file_sidecar.path_of(session_file).exists()
    assert not list(file_sidecar.path_of(session_file).parent.glob("*.tmp"))
