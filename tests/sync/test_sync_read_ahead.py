"""``sync_sessions --mode import`` with its read-ahead thread: the next new
file is read, parsed, checked and encoded while the current one is written.
The results, failures included, are those of an import without it."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command

from sessiontree.core.pi_session_file import parse_session_entries
from sessiontree.models import AgentSession, AuditRecord, SyncedFile
from sessiontree.providers.factory import get_provider
from sessiontree.sync import pi_files, read_ahead
from sessiontree.sync.folder import ReadAhead

from . import pi_folder as pi


def sync_json(*args: str, fails: bool = False) -> dict:
    out = StringIO()
    command = ("sync_sessions", *[str(a) for a in args], "--json")
    if fails:
        with pytest.raises(CommandError):
            call_command(*command, stdout=out, stderr=StringIO())
    else:
        call_command(*command, stdout=out, stderr=StringIO())
    return orjson.loads(out.getvalue())


def stored(session_id: str) -> list[dict]:
    return get_provider("mysql").list_entries(session_id)


def file_entries(path: Path) -> list[dict]:
    return [obj for obj in parse_session_entries(path.read_bytes()) if obj.get("type") != "session"]


def varied_entries(tag: str) -> list[dict]:
    """``pi.branched_entries`` with text the SQL escaping must get right."""
    entries = pi.branched_entries()
    entries[1] = pi.user("u0000001", "m0000001", f"{tag}: quotes ' \" back\\slash \\' NUL\x00 ctrl\x1a\r\n é 漢 😀", 1)
    return entries


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "pi-sessions"


@pytest.fixture
def taken(monkeypatch) -> list[bool]:
    """Whether each file the import took was read ahead (in order)."""
    seen: list[bool] = []
    real = ReadAhead.take

    def spy(self, probe, st):
        read = real(self, probe, st)
        seen.append(read is not None)
        return read

    monkeypatch.setattr(ReadAhead, "take", spy)
    return seen


def test_new_files_are_read_ahead_and_stored_as_without_it(db, folder, taken, monkeypatch):
    from django.db import connection

    from sessiontree.providers import entry_rows

    encoded: list[int] = []
    real_statements = entry_rows.encoded_insert_statements

    def spy(session_pk, **kwargs):
        encoded.append(len(kwargs["payloads"]))
        return real_statements(session_pk, **kwargs)

    monkeypatch.setattr(entry_rows, "encoded_insert_statements", spy)
    paths = [pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *varied_entries(n)]) for n in "abcd"]
    report = sync_json(folder)
    assert report["summary"]["created"] == 4 and report["summary"]["entries"] == 44
    assert taken == [True, True, True, True]
    # On MySQL/MariaDB the rows were encoded in the thread (with its own connection's escaping).
    assert encoded == ([11, 11, 11, 11] if connection.vendor == "mysql" else [])
    for n, path in zip("abcd", paths, strict=True):
        assert stored(f"sess-{n}") == file_entries(path)
        row = AgentSession.objects.get(session_id=f"sess-{n}")
        assert (row.entry_count, row.branch_count, row.leaf_entry_id, row.title) == (11, 2, "s0000002", "Second try")
        assert get_provider("mysql").get_active_path(f"sess-{n}")[-5]["id"] == "u0000002"
    assert sync_json(folder)["summary"]["unchanged"] == 4  # and nothing is read again


def test_only_files_that_look_new_are_read_ahead(db, folder, taken):
    for n in "ab":
        pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()])
    sync_json(folder)
    assert taken == [True, True]
    for n in "cde":
        pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()])
    pi.append(folder / "a.jsonl", [pi.user("u0000009", "s0000002", "more", 11)])
    taken.clear()
    report = sync_json(folder)
    assert (report["summary"]["created"], report["summary"]["updated"], report["summary"]["unchanged"]) == (3, 1, 1)
    assert taken == [True, True, True]  # c, d, e; a's tail is read by the import itself
    assert len(stored("sess-a")) == 12


def test_a_file_changed_after_it_was_read_ahead_is_read_again(db, folder, monkeypatch):
    paths = [pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()]) for n in "abc"]
    real = ReadAhead.take
    answers: list[bool] = []

    def changed(self, probe, st):
        # As if b were appended to between the read-ahead and its import.
        moved = dataclasses.replace(st, mtime_ns=st.mtime_ns + 1) if probe.path.name == "b.jsonl" else st
        read = real(self, probe, moved)
        answers.append(read is not None)
        return read

    monkeypatch.setattr(ReadAhead, "take", changed)
    report = sync_json(folder)
    assert report["summary"]["created"] == 3
    assert answers == [True, False, True]
    for n, path in zip("abc", paths, strict=True):
        assert stored(f"sess-{n}") == file_entries(path)


def test_a_first_batch_refused_by_the_checks_fails_its_file_only(db, folder, taken):
    dup = pi.branched_entries()
    dup[3] = {**dup[3], "id": "u0000001"}
    pi.write(folder / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()])
    pi.write(folder / "b.jsonl", [pi.header("sess-b"), *dup])
    pi.write(folder / "c.jsonl", [pi.header("sess-c"), *pi.branched_entries()])
    report = sync_json(folder, fails=True)
    by_path = {f["path"]: f for f in report["files"]}
    assert by_path["b.jsonl"]["action"] == "failed"
    assert by_path["b.jsonl"]["code"] == "invalid_tree"
    assert by_path["b.jsonl"]["reason"] == "Duplicate entry id u0000001"
    assert not AgentSession.objects.filter(session_id="sess-b").exists()
    assert not SyncedFile.objects.filter(session_id="sess-b").exists()
    assert not AuditRecord.objects.filter(session_id="sess-b").exists()
    assert len(stored("sess-a")) == 11 and len(stored("sess-c")) == 11
    assert taken == [True, True, True]


def test_a_read_failure_in_the_thread_mid_file_is_that_files_failure(db, folder, monkeypatch, taken):
    """The thread fails reading b's second batch: b is reported failed with the
    error, its first batch stays (committed, as without the thread), nothing of
    the failed batch is stored, and a re-run goes on from there."""
    monkeypatch.setattr(pi_files, "BATCH_ENTRIES", 4)
    monkeypatch.setattr(pi_files, "CHUNK_BYTES", 300)  # about one line a chunk
    real = pi_files.iter_batches
    threads: list[str] = []

    def failing(fd, **kwargs):
        start = kwargs["reader"].offset
        for number, batch in enumerate(real(fd, **kwargs)):
            if number == 1 and start == 0 and "sess-b" in str(batch.entries[0]):
                threads.append(threading.current_thread().name)
                raise OSError("disk went away")
            yield batch

    entries = pi.branched_entries()
    for n in "abc":
        body = [{**e, "message": {**e["message"], "sid": f"sess-{n}"}} if "message" in e else e for e in entries]
        pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *body])
    monkeypatch.setattr(pi_files, "iter_batches", failing)
    report = sync_json(folder, fails=True)
    assert threads == ["sync-read-ahead"]
    by_path = {f["path"]: f for f in report["files"]}
    assert by_path["b.jsonl"]["action"] == "failed"
    assert by_path["b.jsonl"]["reason"] == "disk went away"
    assert by_path["b.jsonl"]["code"] == "storage_unavailable"
    assert by_path["a.jsonl"]["action"] == by_path["c.jsonl"]["action"] == "created"
    assert taken == [True, True, True]
    partial = stored("sess-b")
    assert [e["id"] for e in partial] == [e["id"] for e in entries[:4]]  # the first batch only
    mark = SyncedFile.objects.get(mode="import", session_id="sess-b")
    assert (mark.entry_count, mark.size) == (4, -1)  # not fully read: a re-run goes on

    monkeypatch.setattr(pi_files, "iter_batches", real)
    report = sync_json(folder)
    assert report["summary"]["updated"] == 1 and report["summary"]["entries"] == 7
    assert [e["id"] for e in stored("sess-b")] == [e["id"] for e in entries]


def test_at_most_one_batch_waits_however_slow_the_writes(db, folder, monkeypatch):
    """The read-ahead never runs more than one batch ahead of the import."""
    import time

    monkeypatch.setattr(pi_files, "BATCH_ENTRIES", 3)
    monkeypatch.setattr(pi_files, "CHUNK_BYTES", 300)
    for n in "abcd":
        pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()])
    waiting: list[int] = []
    real_put = ReadAhead._put

    def counting(self, item):
        ok = real_put(self, item)
        waiting.append(sum(1 for i in list(self._items) if isinstance(i, tuple) and i[1] == "batch"))
        return ok

    from sessiontree.services import entries as entry_ops

    real_import = entry_ops.import_entries

    def slow(**kwargs):
        time.sleep(0.02)  # the thread has all the time it wants to run ahead
        return real_import(**kwargs)

    monkeypatch.setattr(ReadAhead, "_put", counting)
    monkeypatch.setattr(entry_ops, "import_entries", slow)
    report = sync_json(folder)
    assert report["summary"]["created"] == 4 and report["summary"]["entries"] == 44
    assert waiting and max(waiting) == 1
    for n in "abcd":
        assert len(stored(f"sess-{n}")) == 11


def test_a_dry_run_reads_nothing_ahead(db, folder, taken):
    for n in "abc":
        pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()])
    assert sync_json(folder, "--dry-run")["summary"]["created"] == 3
    assert taken == []
    assert not AgentSession.objects.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the nice value is per thread on Linux only")
def test_the_read_ahead_thread_runs_nicer_than_the_import():
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def probe() -> None:
        read_ahead._yield_cpu()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    assert seen == [min(19, main + read_ahead.READ_AHEAD_NICENESS)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main  # the importing thread keeps its own


def test_the_switch_interval_is_short_while_reading_ahead_and_restored_after(db, folder, monkeypatch):
    from sessiontree.services import sessions as session_ops

    for n in "abc":
        pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()])
    before = sys.getswitchinterval()
    during: list[float] = []
    real = session_ops.import_session

    def spy(**kwargs):
        during.append(sys.getswitchinterval())
        return real(**kwargs)

    monkeypatch.setattr(session_ops, "import_session", spy)
    assert sync_json(folder)["summary"]["created"] == 3
    assert during == [min(before, read_ahead.READ_AHEAD_SWITCH_SECONDS)] * 3
    assert sys.getswitchinterval() == before
    # Also when the import fails on the way.
    for n in "def":
        pi.write(folder / f"{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()])

    def broken(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(session_ops, "import_session", broken)
    with pytest.raises(KeyboardInterrupt):
        sync_json(folder)
    assert sys.getswitchinterval() == before
