"""``sync_sessions --mode export``: database sessions written as Pi files, and
round trips folder → database → folder that give back the source."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sessiontree import services
from sessiontree.core.context_builder import build_session_context
from sessiontree.core.pi_session_file import load_entries_from_file, migrate_to_current_version, parse_session_entries
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider
from tests.pi_fixtures import fixture_path

from . import pi_folder as pi
from .test_sync_import import file_entries, stored, sync, sync_error, sync_json


def exported(folder: Path) -> dict[str, Path]:
    return {path.name.rsplit("_", 1)[-1].removesuffix(".jsonl"): path for path in folder.rglob("*.jsonl")}


def test_import_then_export_gives_back_the_source(db, tmp_path):
    source = tmp_path / "source"
    one = pi.write(pi.pi_path(source, "sess-one"), [pi.header("sess-one"), *pi.branched_entries()])
    v1 = pi.write(source / "v1.jsonl", pi.v1_objs("sess-v1"))
    sync(source)
    target = tmp_path / "target"
    out, _ = sync(target, "--mode", "export")
    assert out.strip().splitlines()[-1].startswith("export: 2 sessions: 2 created, 0 updated, 0 unchanged")
    files = exported(target)
    # Pi's layout: the project folder from the cwd, the file named after creation time and id.
    assert files["sess-one"] == pi.pi_path(target, "sess-one")
    assert files["sess-one"].read_bytes() == one.read_bytes()  # byte for byte, unknown fields and types kept
    v1_back = parse_session_entries(files["sess-v1"].read_bytes())
    v1_source = parse_session_entries(v1.read_bytes())
    migrate_to_current_version(v1_source)
    assert v1_back[0] == v1_source[0]  # the header, extra fields kept, version 3
    assert [{k: v for k, v in e.items() if k not in ("id", "parentId", "firstKeptEntryId")} for e in v1_back[1:]] == [
        {k: v for k, v in e.items() if k not in ("id", "parentId", "firstKeptEntryId")} for e in v1_source[1:]
    ]
    assert v1_back[1:] == stored("sess-v1")
    # Pi's loader (the same tolerant parse) gives the same context as the database.
    for session_id, path in files.items():
        loaded = load_entries_from_file(path)
        assert build_session_context(loaded[1:]) == get_provider("mysql").build_context(session_id)

    again = sync_json(target, "--mode", "export")
    assert again["summary"]["unchanged"] == 2 and again["summary"]["entries"] == 0


def test_export_replaces_atomically_and_refuses_to_lose_entries(db, tmp_path):
    source = tmp_path / "source"
    pi.write(source / "a.jsonl", [pi.header("sess-a"), *pi.branched_entries()[:4]])
    sync(source)
    target = tmp_path / "target"
    sync(target, "--mode", "export", "--layout", "flat")
    path = target / "sess-a.jsonl"
    services.entries.append_message(
        session_id="sess-a", message={"role": "user", "content": "more"}, actor="someone", channel="api"
    )
    report = sync_json(target, "--mode", "export", "--layout", "flat")
    assert report["summary"]["updated"] == 1
    assert file_entries(path) == stored("sess-a")
    assert [p.name for p in target.iterdir()] == ["sess-a.jsonl"]  # no temporary file left

    # Pi wrote to the exported file meanwhile: the database lacks that entry.
    pi.append(path, [pi.user("zz000001", stored("sess-a")[-1]["id"], "written by Pi", 40)])
    services.entries.append_message(
        session_id="sess-a", message={"role": "user", "content": "and more"}, actor="someone", channel="api"
    )
    before = path.read_bytes()
    error, err = sync_error(target, "--mode", "export", "--layout", "flat")
    assert error.returncode == 4
    assert "holds 1 entries the database lacks (e.g. zz000001); not replaced" in err
    assert path.read_bytes() == before

    # Another session's file at the target name is never replaced either.
    path.write_bytes(pi.lines([pi.header("someone-else")]))
    error, err = sync_error(target, "--mode", "export", "--layout", "flat")
    assert "holds session someone-else; not replaced" in err


def test_export_dry_run_writes_nothing(db, tmp_path):
    services.sessions.create_session(actor="x", channel="cli", kind="mysql", session_id="sess-db", cwd="/w")
    target = tmp_path / "target"
    out, _ = sync(target, "--mode", "export", "--dry-run")
    assert "1 would be created" in out
    assert not target.exists()


def test_export_skips_a_file_session_stored_in_the_folder(db, tmp_path):
    folder = tmp_path / "pi"
    pi.write(pi.pi_path(folder, "sess-a"), [pi.header("sess-a"), *pi.branched_entries()[:3]])
    sync(folder, "--mode", "index")
    assert AgentSession.objects.get(session_id="sess-a").provider == "file"
    report = sync_json(folder, "--mode", "export", "--provider", "file")
    assert report["summary"]["skipped_reasons"] == {"is the session's own file": 1}


@pytest.mark.parametrize("name", ["large-session.jsonl", "before-compaction.jsonl"])
def test_real_pi_fixtures_import_and_export_cleanly(db, tmp_path, name):
    source = tmp_path / "source"
    source.mkdir()
    (source / name).write_bytes(fixture_path(name).read_bytes())
    report = sync_json(source)
    assert report["summary"]["created"] == 1 and report["summary"]["failed"] == 0
    assert report["summary"]["malformed_lines"] == 0
    session_id = report["files"][0]["session_id"]
    objs = parse_session_entries(fixture_path(name).read_bytes())
    assert len(stored(session_id)) == len(objs) - 1
    assert sync_json(source)["summary"]["unchanged"] == 1

    target = tmp_path / "target"
    sync(target, "--mode", "export")
    (path,) = target.rglob("*.jsonl")
    back = parse_session_entries(path.read_bytes())
    assert back[1:] == stored(session_id)
    header = dict(objs[0])
    assert back[0] == {"type": "session", "version": 3, **header}
    context = build_session_context(back[1:])
    assert context == get_provider("mysql").build_context(session_id)
    # Every entry the source holds is in the export, unknown fields included.
    assert [
        orjson.loads(orjson.dumps({k: v for k, v in e.items() if k not in ("id", "parentId", "firstKeptEntryId")}))
        for e in back[1:]
    ] == [{k: v for k, v in e.items() if k not in ("firstKeptEntryIndex",)} for e in objs[1:]]
