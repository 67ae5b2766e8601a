"""``sync_sessions --mode index``: Pi files registered in place as file sessions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessiontree.models import AgentSession, AuditRecord, SyncedFile
from sessiontree.providers.factory import get_provider

from . import pi_folder as pi
from .test_sync_import import file_entries, sync, sync_error, sync_json


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def test_index_registers_files_in_place_without_copying(db, folder):
    path = pi.write(pi.pi_path(folder, "sess-one"), [pi.header("sess-one"), *pi.branched_entries()])
    before = path.read_bytes()
    out, _ = sync(folder, "--mode", "index")
    assert out.strip().splitlines()[-1] == (
        "index: 1 file: 1 created, 0 updated, 0 unchanged, 0 skipped, 0 failed; 11 entries indexed"
    )
    assert path.read_bytes() == before
    row = AgentSession.objects.get(session_id="sess-one")
    assert row.provider == "file" and Path(row.session_file) == path
    assert row.leaf_entry_id == "s0000002"  # the last entry, Pi's rule
    assert (row.entry_count, row.branch_count, row.compaction_count) == (11, 2, 0)
    assert row.title == "Second try"
    assert row.cwd == "/home/me/project"
    assert row.created_at.isoformat() == "2026-01-02T03:04:05.678000+00:00"
    assert row.updated_at.isoformat() == "2026-01-02T03:00:10+00:00"
    provider = get_provider("file")
    assert provider.list_entries("sess-one") == file_entries(path)
    assert [(r.operation, r.channel) for r in AuditRecord.objects.all()] == [("register_file", "sync")]
    assert not (get_provider("file").root / "sess-one.jsonl").exists()  # nothing copied into the root


def test_reindex_is_a_no_op_then_refreshes_a_file_that_grew(db, folder):
    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:5]])
    sync(folder, "--mode", "index")
    audits = AuditRecord.objects.count()
    assert sync_json(folder, "--mode", "index")["summary"]["unchanged"] == 1
    assert AuditRecord.objects.count() == audits
    # Pi appends to its own file: a new name, a branch, more entries.
    pi.append(path, entries[5:])
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10_000_000))
    report = sync_json(folder, "--mode", "index")
    assert report["summary"]["updated"] == 1 and report["summary"]["entries"] == 6
    row = AgentSession.objects.get(session_id="sess-a")
    assert (row.entry_count, row.branch_count, row.leaf_entry_id) == (11, 2, "s0000002")
    assert row.title == "Second try"
    assert row.updated_at.isoformat() == "2026-01-02T03:00:10+00:00"
    (record,) = AuditRecord.objects.filter(operation="refresh_session")
    assert record.detail["entry_count"] == {"from": 5, "to": 11} and record.leaf_after == "s0000002"
    assert sync_json(folder, "--mode", "index")["summary"]["unchanged"] == 1


def test_an_empty_session_info_name_clears_the_title(db, folder):
    entries = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *entries[:6]])
    sync(folder, "--mode", "index")
    assert AgentSession.objects.get(session_id="sess-a").title == "First try"
    pi.append(
        path, [{"type": "session_info", "id": "s0000009", "parentId": "s0000001", "timestamp": pi.ts(20), "name": ""}]
    )
    sync(folder, "--mode", "index")
    assert AgentSession.objects.get(session_id="sess-a").title is None


def test_index_skips_v1_files_unless_told_to_migrate_them(db, folder):
    v1 = pi.write(folder / "v1.jsonl", pi.v1_objs("sess-v1"))
    before = v1.read_bytes()
    report = sync_json(folder, "--mode", "index")
    (result,) = report["files"]
    assert result["action"] == "skipped" and result["reason"].startswith("needs migration: a v1 file")
    assert v1.read_bytes() == before and not AgentSession.objects.exists()

    report = sync_json(folder, "--mode", "index", "--migrate")
    assert report["summary"]["created"] == 1
    assert b'"version":3' in v1.read_bytes().split(b"\n", 1)[0]  # migrated in place, as Pi does
    row = AgentSession.objects.get(session_id="sess-v1")
    assert row.entry_count == 5 and row.compaction_count == 1
    assert sync_json(folder, "--mode", "index")["summary"]["unchanged"] == 1


def test_index_leaves_sessions_it_does_not_own(db, folder):
    pi.write(folder / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()[:2]])
    sync(folder)  # imported into mysql first
    report = sync_json(folder, "--mode", "index")
    assert report["summary"]["skipped_reasons"] == {"already registered": 1}
    assert AgentSession.objects.get(session_id="sess-a").provider == "mysql"


def test_index_dry_run_changes_nothing(db, folder):
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()])
    out, _ = sync(folder, "--mode", "index", "--dry-run")
    assert "1 would be created" in out and "11 entries would be indexed" in out
    assert not AgentSession.objects.exists() and not SyncedFile.objects.exists()
    sync(folder, "--mode", "index")
    pi.append(path, [pi.user("u0000009", "s0000002", "more", 30)])
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10_000_000))
    report = sync_json(folder, "--mode", "index", "--dry-run")
    assert report["summary"]["updated"] == 1
    assert AgentSession.objects.get(session_id="sess-a").entry_count == 11


def test_index_reports_a_corrupt_file_and_goes_on(db, folder):
    dup = pi.branched_entries()[:3]
    dup[2] = {**dup[2], "id": "u0000001"}
    pi.write(folder / "dup.jsonl", [pi.header("sess-dup"), *dup])
    pi.write(folder / "ok.jsonl", [pi.header("sess-ok"), *pi.branched_entries()])
    error, err = sync_error(folder, "--mode", "index")
    assert error.returncode == 5 and "Duplicate entry id u0000001" in err
    assert AgentSession.objects.filter(session_id="sess-ok").exists()
    assert not AgentSession.objects.filter(session_id="sess-dup").exists()


def test_malformed_lines_are_counted_when_indexing(db, folder):
    entries = pi.branched_entries()
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(pi.lines([pi.header("sess-a"), *entries[:3]]) + b"oops\n" + pi.lines(entries[3:5]))
    report = sync_json(folder, "--mode", "index")
    assert report["summary"]["malformed_lines"] == 1 and report["summary"]["created"] == 1
    assert AgentSession.objects.get(session_id="sess-a").entry_count == 5


def test_lines_before_the_header_are_skipped_as_pi_skips_them(db, folder):
    """Regression: index skipped a file whose header follows a garbage line."""
    entries = pi.branched_entries()
    folder.mkdir()
    path = folder / "a.jsonl"
    path.write_bytes(b"garbage\n" + pi.lines([pi.header("sess-a"), *entries]))
    report = sync_json(folder, "--mode", "index")
    assert report["summary"]["created"] == 1 and report["files"][0]["malformed_lines"] == 1
    assert get_provider("file").list_entries("sess-a") == entries
    assert AgentSession.objects.get(session_id="sess-a").title == "Second try"
    with path.open("ab") as file:
        file.write(b"not json either\n" + pi.lines([pi.user("u9000001", entries[-1]["id"], "more", 99)]))
    report = sync_json(folder, "--mode", "index")
    assert report["summary"]["updated"] == 1 and report["summary"]["entries"] == 1
    assert SyncedFile.objects.get(mode="index", session_id="sess-a").malformed_lines == 2
