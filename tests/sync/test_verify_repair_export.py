"""verify_sessions, repair_session and export_session (call_command, exit codes)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command

from sessiontree import services
from sessiontree.core.context_builder import build_session_context
from sessiontree.core.pi_session_file import parse_session_entries
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider
from tests.contract.conftest import PROVIDER_KINDS

from . import pi_folder as pi


def run(command: str, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(command, *[str(a) for a in args], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def fails(command: str, *args: str) -> tuple[CommandError, str]:
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(command, *[str(a) for a in args], stdout=out, stderr=StringIO())
    assert "\n" not in str(caught.value)
    return caught.value, out.getvalue()


def make_session(kind: str, session_id: str = "sess-v") -> str:
    services.sessions.create_session(
        actor="t", channel="internal", kind=kind, session_id=session_id, cwd="/w", entries=pi.branched_entries()
    )
    return session_id


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_verify_a_healthy_session(db, kind):
    make_session(kind)
    out, _ = run("verify_sessions")
    assert out == "verified 1 session(s): 0 problem(s)\n"
    report = orjson.loads(run("verify_sessions", "--session", "sess-v", "--json")[0])
    assert report["problems"] == 0 and report["reports"][0]["provider"] == kind


def test_verify_reports_each_problem_of_a_damaged_file(db, tmp_path):
    entries = pi.branched_entries()
    entries[3] = {**entries[3], "parentId": "gone0001"}  # the tool result loses its parent
    path = pi.write(tmp_path / "pi" / "d.jsonl", [pi.header("sess-d"), *entries], tail=b'{"type":"mess')
    services.sessions.register_file(session_id="sess-d", path=path, actor="t", channel="internal")
    AgentSession.objects.filter(session_id="sess-d").update(entry_count=3, leaf_entry_id="nope0001")
    error, out = fails("verify_sessions", "--provider", "file")
    assert error.returncode == 5
    lines = out.strip().splitlines()
    assert lines == [
        "sess-d: torn_last_line: the last line is torn: 13 byte(s) after the last newline",
        "sess-d: dangling_parent: entry t0000001 names parent gone0001, which is not in the session (read as a root)",
        "sess-d: orphan_tool_result: tool result t0000001 answers tool call 'call_1', which no assistant message "
        "before it made",
        "sess-d: leaf_missing: the meta row's leaf nope0001 is not in the session",
        "sess-d: meta_mismatch: the meta row says entry_count 3 (entries say 11)",
        "verified 1 session(s): 5 problem(s)",
    ]


def test_verify_reads_past_lines_before_the_header_as_pi_does(db, tmp_path):
    """Regression: verify took the first non-blank line for the header and
    called a file Pi opens (garbage, then the header) "not a session"."""
    path = tmp_path / "pi" / "g.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"garbage\n" + pi.lines([pi.header("sess-g"), *pi.branched_entries()]))
    services.sessions.register_file(session_id="sess-g", path=path, actor="t", channel="internal")
    error, out = fails("verify_sessions", "--session", "sess-g")
    assert error.returncode == 5
    assert out.strip().splitlines() == [
        "sess-g: malformed_line: line 1 is not a JSON object (skipped on load)",
        "verified 1 session(s): 1 problem(s)",
    ]


def test_verify_unknown_session_and_wrong_provider(db):
    make_session("mysql")
    error, _ = fails("verify_sessions", "--session", "nope")
    assert error.returncode == 3
    error, _ = fails("verify_sessions", "--session", "sess-v", "--provider", "file")
    assert error.returncode == 3


def test_repair_cuts_a_torn_tail_and_recomputes_the_meta_row(db, tmp_path):
    entries = pi.branched_entries()
    folder = tmp_path / "pi"
    path = pi.write(folder / "r.jsonl", [pi.header("sess-r"), *entries], tail=b'{"type":"mess')
    services.sessions.register_file(session_id="sess-r", path=path, actor="t", channel="internal")
    AgentSession.objects.filter(session_id="sess-r").update(entry_count=3, branch_count=7)
    before = path.read_bytes()

    out, _ = run("repair_session", "sess-r", "--dry-run")
    assert out.splitlines() == [
        "Plan for session sess-r:",
        f"  repair: cut the torn last line (13 byte(s)) of {path} after copying the file to a backup beside it",
        "  repair: recompute the meta row's counts, root and leaf from the entries",
        "Dry run: nothing changed (use --apply).",
    ]
    assert path.read_bytes() == before and AgentSession.objects.get(session_id="sess-r").entry_count == 3

    out, _ = run("repair_session", "sess-r", "--apply")
    assert "Applied 2 repair(s); backup " in out
    (backup,) = folder.glob("r.jsonl.torn-*.bak")
    assert backup.read_bytes() == before
    assert path.read_bytes() == before[: -len(b'{"type":"mess')]
    row = AgentSession.objects.get(session_id="sess-r")
    assert (row.entry_count, row.branch_count, row.leaf_entry_id) == (11, 2, "s0000002")
    assert run("verify_sessions")[0] == "verified 1 session(s): 0 problem(s)\n"
    ops = list(AuditRecord.objects.filter(session_id="sess-r").values_list("operation", "channel"))
    assert ops.count(("repair_session", "cli")) == 2
    out, _ = run("repair_session", "sess-r", "--apply")
    assert "nothing to repair" in out


def test_repair_reports_orphans_and_never_reattaches_them(db):
    make_session("mysql", "sess-o")
    entries = pi.branched_entries()
    services.sessions.create_session(
        actor="t",
        channel="internal",
        kind="mysql",
        session_id="sess-orphan",
        entries=[*entries[:2], {**entries[2], "parentId": "gone0001"}, *entries[3:5]],
    )
    AgentSession.objects.filter(session_id="sess-orphan").update(leaf_entry_id="gone0002")
    stored = get_provider("mysql").list_entries("sess-orphan")
    error, out = fails("repair_session", "sess-orphan", "--apply", "--json")
    assert error.returncode == 5 and "need an operator" in str(error)
    plan = orjson.loads(out)
    assert [step["action"] for step in plan["steps"]] == ["recompute_meta"] and plan["applied"]
    assert [p["code"] for p in plan["unrepaired"]] == ["dangling_parent"]
    assert get_provider("mysql").list_entries("sess-orphan") == stored  # nothing re-attached
    assert AgentSession.objects.get(session_id="sess-orphan").leaf_entry_id == stored[-1]["id"]


def test_repair_needs_a_mode(db):
    make_session("mysql")
    with pytest.raises(CommandError):
        call_command("repair_session", "sess-v", stdout=StringIO(), stderr=StringIO())


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_export_session_scopes(db, tmp_path, kind):
    make_session(kind)
    provider = get_provider(kind)
    out, _ = run("export_session", "sess-v")
    objs = parse_session_entries(out)
    assert objs[0]["type"] == "session" and objs[0]["id"] == "sess-v"
    assert objs[1:] == provider.list_entries("sess-v")
    active = parse_session_entries(run("export_session", "sess-v", "--active-path")[0])
    assert [e["id"] for e in active[1:]] == [e["id"] for e in provider.get_active_path("sess-v")]
    # Pi's loader takes the last entry as the leaf: the same context as the session's.
    assert build_session_context(active[1:]) == provider.build_context("sess-v")
    old = parse_session_entries(run("export_session", "sess-v", "--active-path", "--leaf", "a0000002")[0])
    assert build_session_context(old[1:]) == provider.build_context("sess-v", "a0000002")
    subtree = parse_session_entries(run("export_session", "sess-v", "--subtree", "u0000002")[0])
    assert [e["id"] for e in subtree[1:]] == [
        "m0000001",
        "u0000001",
        "u0000002",
        "a0000003",
        "l0000001",
        "x0000001",
        "s0000002",
    ]

    target = tmp_path / "out" / "v.jsonl"
    out, _ = run("export_session", "sess-v", "-o", target, "--dry-run")
    assert out.startswith("Would create") and not target.exists()
    out, _ = run("export_session", "sess-v", "-o", target, "--json")
    assert orjson.loads(out)["action"] == "created" and orjson.loads(out)["entries"] == 11
    assert parse_session_entries(target.read_bytes()) == objs
    out, _ = run("export_session", "sess-v", "-o", target, "--active-path")
    assert out.startswith("Replaced")  # a subset of the same session's entries: nothing lost


def test_export_session_refuses_what_would_lose_data(db, tmp_path):
    make_session("mysql")
    target = tmp_path / "v.jsonl"
    target.write_bytes(pi.lines([pi.header("sess-v"), *pi.branched_entries(), pi.user("pi000001", "s0000002", "x")]))
    error, _ = fails("export_session", "sess-v", "-o", target)
    assert error.returncode == 4 and "entries the database lacks (e.g. pi000001)" in str(error)
    error, _ = fails("export_session", "nope")
    assert error.returncode == 3
    error, _ = fails("export_session", "sess-v", "--subtree", "nope0000")
    assert error.returncode == 3
    error, _ = fails("export_session", "sess-v", "--json")
    assert error.returncode == 2
    assert Path(target).read_bytes().count(b"\n") == 13
