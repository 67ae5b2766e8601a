"""``sync_sessions --mode import``: Pi files copied into the database,
incrementally, safely repeated (call_command, captured output, exit codes)."""

from __future__ import annotations

import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command

from sessiontree.core.pi_session_file import parse_session_entries
from sessiontree.models import AgentSession, AuditRecord, SyncedFile
from sessiontree.providers.factory import get_provider
from sessiontree.sync.pi_files import folder_lock

from . import pi_folder as pi

PROJECT_DIR = Path(__file__).resolve().parents[2]


def sync(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("sync_sessions", *[str(a) for a in args], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def sync_json(*args: str) -> dict:
    out, _ = sync(*args, "--json")
    return orjson.loads(out)


def sync_error(*args: str) -> tuple[CommandError, str]:
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("sync_sessions", *[str(a) for a in args], stdout=out, stderr=err)
    message = str(caught.value)
    assert message and "\n" not in message
    return caught.value, err.getvalue()


def stored(session_id: str) -> list[dict]:
    return get_provider("mysql").list_entries(session_id)


def file_entries(path: Path) -> list[dict]:
    return [obj for obj in parse_session_entries(path.read_bytes()) if obj.get("type") != "session"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "pi-sessions"


def test_first_import_copies_every_entry_and_the_meta(db, folder):
    source = pi.write(pi.pi_path(folder, "sess-one"), [pi.header("sess-one"), *pi.branched_entries()])
    before = source.read_bytes()
    out, err = sync(folder)
    assert out.strip().splitlines()[-1] == (
        "import: 1 file: 1 created, 0 updated, 0 unchanged, 0 skipped, 0 failed; 11 entries imported"
    )
    assert err == ""
    assert source.read_bytes() == before  # the source is never touched

    assert stored("sess-one") == file_entries(source)  # JSON-equal, unknown types and fields kept
    row = AgentSession.objects.get(session_id="sess-one")
    assert row.provider == "mysql"
    assert row.leaf_entry_id == "s0000002"  # the last entry (Pi's rule), not the end of the first branch
    assert (row.entry_count, row.branch_count) == (11, 2)
    assert row.title == "Second try"  # the latest session_info
    assert row.cwd == "/home/me/project"
    assert row.created_at.isoformat() == "2026-01-02T03:04:05.678000+00:00"
    assert row.updated_at.isoformat().startswith("2026-01-02T03:00:10")  # the last entry's time
    header = get_provider("mysql").get_header("sess-one")
    assert header == pi.header("sess-one")
    records = AuditRecord.objects.filter(session_id="sess-one")
    assert [(r.operation, r.channel, r.actor) for r in records] == [("import_session", "sync", "sync")]


def test_a_repeated_import_writes_nothing(db, folder):
    pi.write(folder / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()])
    sync(folder)
    audits, marks = AuditRecord.objects.count(), list(SyncedFile.objects.values())
    report = sync_json(folder)
    assert report["summary"]["unchanged"] == 1 and report["summary"]["created"] == 0
    assert report["summary"]["entries"] == 0
    assert AuditRecord.objects.count() == audits
    assert list(SyncedFile.objects.values()) == marks
    out, _ = sync(folder, "--checksum")  # re-read and re-hashed: still nothing to do
    assert "0 created, 0 updated, 1 unchanged" in out
    assert AuditRecord.objects.count() == audits


def test_an_appended_tail_is_imported_alone_with_its_branch(db, folder):
    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:5]])
    sync(folder)
    assert [e["id"] for e in stored("sess-a")] == [e["id"] for e in entries[:5]]
    # Pi goes on: a session name, then branch() back to an earlier entry and appends there.
    time.sleep(0.01)
    pi.append(path, entries[5:])
    report = sync_json(folder)
    assert report["summary"]["updated"] == 1 and report["summary"]["entries"] == 6
    assert stored("sess-a") == file_entries(path)  # every entry keeps its own parentId
    row = AgentSession.objects.get(session_id="sess-a")
    assert row.leaf_entry_id == "s0000002" and row.branch_count == 2 and row.title == "Second try"
    ops = list(AuditRecord.objects.filter(session_id="sess-a").order_by("id").values_list("operation", flat=True))
    assert ops == ["import_session", "import_entries", "update_session"]
    assert get_provider("mysql").get_active_path("sess-a")[-5]["id"] == "u0000002"


def test_a_rewritten_file_is_reported_then_reimported_on_request(db, folder):
    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:5]])
    sync(folder)
    changed = [dict(e) for e in entries[:5]]
    changed[1]["message"] = {**changed[1]["message"], "content": [{"type": "text", "text": "edited!"}]}
    pi.write(path, [pi.header("sess-a"), *changed, *entries[5:7]])
    report = sync_json(folder)
    assert report["summary"]["skipped"] == 1 and report["summary"]["failed"] == 0
    (result,) = report["files"]
    assert result["reason"].startswith("rewritten: the part imported has changed; use --on-rewrite reimport")
    assert report["summary"]["skipped_reasons"] == {"rewritten": 1}
    assert stored("sess-a") == entries[:5]  # never mixed

    out, _ = sync(folder, "--on-rewrite", "reimport", "--verbosity", "2")
    assert "updated a.jsonl: 7 entries (rewritten: the part imported has changed; re-imported)" in out
    assert stored("sess-a") == file_entries(path)
    assert sync_json(folder)["summary"]["unchanged"] == 1


def test_reimport_refuses_to_drop_entries_added_in_the_database(db, folder):
    from sessiontree import services

    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()[:3]])
    sync(folder)
    services.entries.append_message(
        session_id="sess-a", message={"role": "user", "content": "from the API"}, actor="api-user", channel="api"
    )
    pi.write(path, [pi.header("sess-a"), *pi.branched_entries()[1:4]])
    error, err = sync_error(folder, "--on-rewrite", "reimport")
    assert error.returncode == 4
    assert "written to in the database since; not replaced" in err
    assert len(stored("sess-a")) == 4


def test_a_tail_is_not_mixed_into_a_session_written_in_the_database(db, folder):
    from sessiontree import services

    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:3]])
    sync(folder)
    services.entries.append_message(
        session_id="sess-a", message={"role": "user", "content": "from the API"}, actor="api-user", channel="api"
    )
    pi.append(path, entries[3:5])
    error, err = sync_error(folder)
    assert error.returncode == 4 and "leaf_conflict" in err
    assert len(stored("sess-a")) == 4


def test_malformed_and_torn_lines_are_counted_never_fatal(db, folder):
    entries = pi.branched_entries()
    good = pi.write(folder / "good.jsonl", [pi.header("sess-good"), *entries[:2]])
    body = pi.lines([pi.header("sess-bad"), entries[0]]) + b"{not json\n" + b"[1, 2]\n" + pi.lines([entries[1]])
    torn_line = orjson.dumps(entries[2])
    bad = folder / "bad.jsonl"
    bad.write_bytes(body + torn_line[:20])
    report = sync_json(folder)
    assert report["summary"]["created"] == 2 and report["summary"]["failed"] == 0
    assert report["summary"]["malformed_lines"] == 2
    by_path = {f["path"]: f for f in report["files"]}
    assert by_path["bad.jsonl"]["malformed_lines"] == 2 and by_path["bad.jsonl"]["torn_bytes"] == 20
    assert [e["id"] for e in stored("sess-bad")] == ["m0000001", "u0000001"]
    assert stored("sess-good") == file_entries(good)
    out, _ = sync(folder)
    assert "unchanged" in out
    # The writer finishes its line: the next run imports it.
    bad.write_bytes(body + torn_line + b"\n")
    report = sync_json(folder)
    assert report["summary"]["updated"] == 1 and report["summary"]["entries"] == 1
    assert [e["id"] for e in stored("sess-bad")] == ["m0000001", "u0000001", "a0000001"]


def test_empty_headerless_and_corrupt_files(db, folder):
    folder.mkdir()
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "blank.jsonl").write_bytes(b"\n\n")
    (folder / "headerless.jsonl").write_bytes(pi.lines(pi.branched_entries()[:2]))
    (folder / "notes.txt").write_text("not a session")
    dup = pi.branched_entries()[:2]
    dup[1] = {**dup[1], "id": "m0000001"}
    pi.write(folder / "dup.jsonl", [pi.header("sess-dup"), *dup])
    pi.write(folder / "ok.jsonl", [pi.header("sess-ok"), *pi.branched_entries()[:2]])
    error, err = sync_error(folder)
    assert error.returncode == 2
    assert "1 file(s) failed; first: dup.jsonl: Duplicate entry id m0000001" in str(error)
    assert err.strip() == "failed dup.jsonl: invalid_tree: Duplicate entry id m0000001"
    report_out = StringIO()
    with pytest.raises(CommandError):
        call_command("sync_sessions", str(folder), "--json", stdout=report_out, stderr=StringIO())
    report = orjson.loads(report_out.getvalue())
    assert report["summary"]["skipped_reasons"] == {"empty file": 2, "not a Pi session file": 1}
    assert report["summary"]["unchanged"] == 1 and report["summary"]["failed"] == 1
    assert not AgentSession.objects.filter(session_id="sess-dup").exists()
    assert AgentSession.objects.filter(session_id="sess-ok").exists()


def test_v1_and_v2_files_are_migrated_in_memory_only(db, folder):
    v1 = pi.write(folder / "v1.jsonl", pi.v1_objs("sess-v1"))
    v2 = pi.write(folder / "v2.jsonl", pi.v2_objs("sess-v2"))
    before = (v1.read_bytes(), v2.read_bytes())
    report = sync_json(folder)
    assert report["summary"]["created"] == 2
    assert (v1.read_bytes(), v2.read_bytes()) == before

    entries = stored("sess-v1")
    assert [e["parentId"] for e in entries] == [None, *[e["id"] for e in entries[:-1]]]
    compaction = entries[3]
    assert compaction["type"] == "compaction" and compaction["firstKeptEntryId"] == entries[2]["id"]
    assert "firstKeptEntryIndex" not in compaction
    header = get_provider("mysql").get_header("sess-v1")
    assert header["version"] == 3 and header["provider"] == "openai" and header["timestamp"] == pi.T0
    assert stored("sess-v2")[1]["message"]["role"] == "custom"
    assert sync_json(folder)["summary"]["unchanged"] == 2
    # A v1 file that grows cannot be matched by ids: reported as rewritten.
    pi.append(v1, [pi.v1_objs("x")[1]])
    report = sync_json(folder)
    assert report["summary"]["skipped_reasons"] == {"rewritten": 1}


def test_pi_directory_layout_and_lineage_by_path(db, tmp_path):
    sessions = tmp_path / ".pi" / "agent" / "sessions"
    parent_path = pi.pi_path(sessions, "sess-parent")
    child_path = pi.pi_path(sessions, "sess-child", cwd="/home/me/other")
    # The child sorts first and names its parent by Pi's file path.
    child_path = child_path.with_name("0000_" + child_path.name.split("_", 1)[1])
    pi.write(
        child_path,
        [pi.header("sess-child", cwd="/home/me/other", parentSession=str(parent_path)), *pi.branched_entries()[:2]],
    )
    pi.write(parent_path, [pi.header("sess-parent"), *pi.branched_entries()[:4]])
    report = sync_json(sessions)
    assert report["summary"]["created"] == 2
    assert {f["path"] for f in report["files"]} == {
        f"--home-me-project--/{parent_path.name}",
        f"--home-me-other--/{child_path.name}",
    }
    child = AgentSession.objects.get(session_id="sess-child")
    assert child.parent is not None and child.parent.session_id == "sess-parent"
    assert child.parent_session_id == str(parent_path)


def test_a_dry_run_changes_nothing(db, folder):
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()[:4]])
    out, _ = sync(folder, "--dry-run")
    assert out.strip().splitlines()[-1] == (
        "import (dry run): 1 file: 1 would be created, 0 would be updated, 0 unchanged, 0 skipped, 0 failed; "
        "4 entries would be imported"
    )
    assert not AgentSession.objects.exists() and not SyncedFile.objects.exists()
    assert not AuditRecord.objects.exists()
    sync(folder)
    pi.append(path, pi.branched_entries()[4:])
    marks = list(SyncedFile.objects.values())
    report = sync_json(folder, "--dry-run")
    assert report["dry_run"] and report["summary"]["updated"] == 1 and report["summary"]["entries"] == 7
    assert len(stored("sess-a")) == 4 and list(SyncedFile.objects.values()) == marks


def test_a_second_sync_of_the_same_folder_exits_at_once(db, folder):
    pi.write(folder / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from sessiontree.sync.pi_files import folder_lock\n"
            "with folder_lock(Path(sys.argv[1]).resolve()):\n    print('held', flush=True); time.sleep(60)",
            str(folder),
        ],
        cwd=PROJECT_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        error, _ = sync_error(folder)
        assert error.returncode == 4
        assert str(error).startswith(f"sync_busy: Another sync of {folder.resolve()} is running (pid {holder.pid})")
        assert not AgentSession.objects.exists()
    finally:
        holder.kill()
        holder.wait()
    sync(folder)  # released with its process
    assert AgentSession.objects.filter(session_id="sess-a").exists()


def test_the_lock_is_taken_in_process_too(db, folder):
    pi.write(folder / "a.jsonl", [pi.header("sess-a")])
    with folder_lock(folder.resolve()):
        error, _ = sync_error(folder, "--mode", "export")
    assert error.returncode == 4


def test_bad_options_are_one_line_errors(db, folder):
    folder.mkdir()
    error, _ = sync_error(folder, "--mode", "index", "--provider", "mysql")
    assert error.returncode == 2 and "--provider must be file" in str(error)
    error, _ = sync_error(folder, "--workers", "0")
    assert error.returncode == 2
    error, _ = sync_error(folder / "missing")
    assert error.returncode == 2 and "does not exist" in str(error)


@pytest.mark.django_db(transaction=True)
def test_workers_import_in_parallel(folder):
    for n in range(6):
        pi.write(folder / f"s{n}.jsonl", [pi.header(f"sess-{n}"), *pi.branched_entries()])
    report = sync_json(folder, "--workers", "3")
    assert report["summary"]["created"] == 6 and report["summary"]["failed"] == 0
    for n in range(6):
        assert stored(f"sess-{n}") == file_entries(folder / f"s{n}.jsonl")
    assert sync_json(folder, "--workers", "3")["summary"]["unchanged"] == 6


def test_a_closed_session_gets_no_tail(db, folder):
    from sessiontree import services

    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:3]])
    sync(folder)
    services.sessions.archive_session(session_id="sess-a", actor="admin", channel="admin")
    pi.append(path, entries[3:5])
    report = sync_json(folder)
    assert report["summary"]["skipped_reasons"] == {"closed": 1}
    assert len(stored("sess-a")) == 3
    services.sessions.restore_session(session_id="sess-a", actor="admin", channel="admin")
    assert sync_json(folder)["summary"]["updated"] == 1
    assert len(stored("sess-a")) == 5


def test_a_last_line_without_its_newline_is_an_entry_as_in_pi(db, folder):
    entries = pi.branched_entries()
    path = folder / "a.jsonl"
    folder.mkdir()
    path.write_bytes(pi.lines([pi.header("sess-a"), *entries[:3]]).rstrip(b"\n"))  # Pi 1.6 reads it (#8345)
    report = sync_json(folder)
    assert report["files"][0].get("torn_bytes") is None
    assert len(stored("sess-a")) == 3
    # The next writer starts a new line: the tail is read from where the import stopped.
    with path.open("ab") as f:
        f.write(b"\n" + pi.lines(entries[3:5]))
    assert sync_json(folder)["summary"]["entries"] == 2
    assert stored("sess-a") == entries[:5]


def test_a_large_file_is_imported_in_batches_and_resumed(db, folder, monkeypatch):
    from sessiontree.sync import pi_files

    monkeypatch.setattr(pi_files, "CHUNK_BYTES", 300)  # about one line a chunk
    monkeypatch.setattr(pi_files, "BATCH_ENTRIES", 4)
    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries])
    report = sync_json(folder)
    assert report["summary"]["created"] == 1 and report["summary"]["entries"] == 11
    assert stored("sess-a") == entries
    ops = list(AuditRecord.objects.filter(session_id="sess-a").order_by("id").values_list("operation", flat=True))
    assert ops[0] == "import_session" and set(ops[1:]) <= {"import_entries", "update_session"}
    assert ops.count("import_entries") >= 2  # more than one batch after the first
    mark = SyncedFile.objects.get(mode="import")
    assert (mark.offset, mark.entry_count, mark.size) == (path.stat().st_size, 11, path.stat().st_size)

    # A run that stopped after its first batches: the next run goes on from the last one recorded.
    AgentSession.objects.all().delete()
    SyncedFile.objects.all().delete()
    from sessiontree.services import entries as entry_ops

    calls = {"n": 0}
    real = entry_ops.import_entries

    def failing(**kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk went away")
        return real(**kwargs)

    monkeypatch.setattr(entry_ops, "import_entries", failing)
    error, err = sync_error(folder)
    assert error.returncode == 6 and "disk went away" in err
    partial = stored("sess-a")
    assert 0 < len(partial) < 11 and partial == entries[: len(partial)]
    monkeypatch.setattr(entry_ops, "import_entries", real)
    report = sync_json(folder)
    assert report["summary"]["updated"] == 1 and report["summary"]["entries"] == 11 - len(partial)
    assert stored("sess-a") == entries


def test_import_into_the_file_provider_copies_into_its_root(db, folder):
    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:5]])
    sync(folder, "--provider", "file")
    provider = get_provider("file")
    copy = provider.path_for("sess-a")
    assert copy.exists() and copy != path
    pi.append(path, entries[5:])
    assert sync_json(folder)["summary"]["updated"] == 1  # the tail goes where the session is
    assert provider.list_entries("sess-a") == entries
    assert copy.read_bytes() == path.read_bytes()  # Pi's bytes, branch included
    row = AgentSession.objects.get(session_id="sess-a")
    assert (row.provider, row.entry_count, row.branch_count, row.leaf_entry_id) == ("file", 11, 2, "s0000002")


def test_reimport_asks_the_storage_what_the_session_holds(db, folder):
    """Regression: sync decided on the meta row's ``entry_count``. A file
    session whose file Pi appended to (no row update) looked untouched, and
    ``--on-rewrite reimport`` replaced it, losing Pi's entry; the storage
    (the file) says what it holds."""
    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:3]])
    sync(folder, "--provider", "file")
    provider = get_provider("file")
    with provider.path_for("sess-a").open("ab") as stored_file:  # Pi, resuming the session, appends
        stored_file.write(pi.lines([pi.user("p0000001", entries[2]["id"], "typed in Pi", 9)]))
    assert AgentSession.objects.get(session_id="sess-a").entry_count == 3  # the row has not seen it
    pi.write(path, [pi.header("sess-a"), *entries[1:4]])
    error, err = sync_error(folder, "--on-rewrite", "reimport")
    assert error.returncode == 4
    assert "session sess-a holds 4 entries, 3 after its import" in err
    assert [e["id"] for e in provider.list_entries("sess-a")][-1] == "p0000001"


def test_lines_before_the_header_are_skipped_as_pi_skips_them(db, folder):
    """Regression: a file whose first line is garbage (or JSON ``null``) and
    whose header follows opens in Pi 1.6.0; the import skipped it as "not a
    Pi session file"."""
    entries = pi.branched_entries()
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(b"garbage\nnull\n" + pi.lines([pi.header("sess-a"), *entries]))
    (folder / "b.jsonl").write_bytes(b"garbage\n42\n" + pi.lines([pi.header("sess-b"), *entries]))  # Pi refuses it
    report = sync_json(folder)
    by_path = {f["path"]: f for f in report["files"]}
    assert by_path["a.jsonl"]["action"] == "created" and by_path["a.jsonl"]["malformed_lines"] == 2
    assert stored("sess-a") == entries
    assert by_path["b.jsonl"]["action"] == "skipped"
    assert by_path["b.jsonl"]["reason"] == "not a Pi session file (its first JSON line is not a session header)"
    # It grows: the tail is imported on top, the skipped lines are not counted twice.
    with (folder / "a.jsonl").open("ab") as file:
        file.write(pi.lines([pi.user("u9000001", entries[-1]["id"], "more", 99)]))
    report = sync_json(folder)
    assert report["summary"]["updated"] == 1 and report["summary"]["entries"] == 1
    assert SyncedFile.objects.get(mode="import", session_id="sess-a").malformed_lines == 2
