"""The published Pi opens what sync_sessions and export_session write: Pi files
imported into the database and exported again read, in Pi, as the same
entries with the same context at every leaf as our session."""

from __future__ import annotations

from io import StringIO

import orjson
import pytest
from django.core.management import CommandError, call_command

from sessiontree.providers.factory import get_provider
from sessiontree.services import sessions as session_ops
from sessiontree.services.audit import SYNC_ACTOR
from tests.sync import pi_folder as pi_files

from .views import context_view

pytestmark = pytest.mark.django_db


def ours(session_id: str, leaf: str, kind: str = "mysql") -> dict:
    view = context_view(get_provider(kind).build_context(session_id, leaf))
    # Pi leaves out a model it does not know (undefined fields vanish in JSON).
    if view["model"] is not None:
        view["model"] = {key: value for key, value in view["model"].items() if value is not None}
    return view


def test_pi_reads_a_branched_session_after_import_and_export(pi, tmp_path):
    source = pi_files.write(
        pi_files.pi_path(tmp_path / "source", "sess-pi"), [pi_files.header("sess-pi"), *pi_files.branched_entries()]
    )
    call_command("sync_sessions", str(source.parent.parent), stdout=StringIO())
    target = tmp_path / "target"
    call_command("sync_sessions", str(target), "--mode", "export", stdout=StringIO())
    (path,) = target.rglob("*.jsonl")
    stored = get_provider("mysql").list_entries("sess-pi")
    answer = pi.read(path)
    assert answer["header"]["id"] == "sess-pi"
    assert answer["entries"] == stored
    assert answer["name"] == "Second try"
    for leaf, context in zip(answer["leaves"][1:], answer["contexts"][1:], strict=True):
        assert context == ours("sess-pi", leaf), f"context at {leaf}"

    # The active path alone: Pi resumes at its last entry with the session's context.
    active = tmp_path / "active.jsonl"
    call_command("export_session", "sess-pi", "--active-path", "-o", str(active), stdout=StringIO())
    leaf = get_provider("mysql").get_session("sess-pi")["leaf_entry_id"]
    answer = pi.read(active, leaves=[leaf])
    assert answer["leaf"] == leaf  # Pi's default leaf: the last entry of the file
    assert answer["contexts"][0] == ours("sess-pi", leaf)


def test_pi_reads_a_v1_session_after_import_and_export(pi, tmp_path):
    # (The real v1 fixtures are 1,000-entry chains: the Pi server's tree
    # answer nests deeper than JSON decoders take, so a small v1 file here.)
    source = pi_files.write(tmp_path / "source" / "v1.jsonl", pi_files.v1_objs("sess-v1"))
    call_command("sync_sessions", str(source.parent), stdout=StringIO())
    target = tmp_path / "target"
    call_command("sync_sessions", str(target), "--mode", "export", "--layout", "flat", stdout=StringIO())
    stored = get_provider("mysql").list_entries("sess-v1")
    answer = pi.read(target / "sess-v1.jsonl")
    assert answer["header"]["version"] == 3 and answer["entries"] == stored
    assert answer["header"]["provider"] == "openai"  # unknown header fields kept
    for leaf, context in zip(answer["leaves"][1:], answer["contexts"][1:], strict=True):
        assert context == ours("sess-v1", leaf), f"context at {leaf}"


def test_a_file_whose_first_line_is_garbage_is_imported_and_indexed_as_pi_opens_it(pi, tmp_path):
    """Regression: Pi 1.6.0 skips lines before the header that do not parse;
    ``sync_sessions`` skipped such a file as "not a Pi session file" in both
    modes, and ``verify_sessions`` called it not a session."""
    entries = pi_files.branched_entries()
    source = pi_files.pi_path(tmp_path / "source", "sess-g")
    source.parent.mkdir(parents=True)
    source.write_bytes(b"}{ not JSON, a line Pi skips\n" + pi_files.lines([pi_files.header("sess-g"), *entries]))
    answer = pi.read(source)
    assert answer["header"]["id"] == "sess-g" and answer["entries"] == entries

    out = StringIO()
    call_command("sync_sessions", str(tmp_path / "source"), "--json", stdout=out)
    summary = orjson.loads(out.getvalue())["summary"]
    assert (summary["created"], summary["skipped"], summary["malformed_lines"]) == (1, 0, 1)
    assert get_provider("mysql").list_entries("sess-g") == answer["entries"]
    for leaf, context in zip(answer["leaves"][1:], answer["contexts"][1:], strict=True):
        assert context == ours("sess-g", leaf), f"context at {leaf}"

    session_ops.delete_session(session_id="sess-g", actor=SYNC_ACTOR, channel="sync", hard=True)
    out = StringIO()
    call_command("sync_sessions", str(tmp_path / "source"), "--mode", "index", "--json", stdout=out)
    summary = orjson.loads(out.getvalue())["summary"]
    assert (summary["created"], summary["skipped"], summary["malformed_lines"]) == (1, 0, 1)
    session = get_provider("file").get_session("sess-g")
    assert session["session_file"] == str(source)  # registered in place
    assert get_provider("file").list_entries("sess-g") == answer["entries"]
    assert session["leaf_entry_id"] == answer["leaf"]
    for leaf, context in zip(answer["leaves"][1:], answer["contexts"][1:], strict=True):
        assert context == ours("sess-g", leaf, "file"), f"context at {leaf}"

    out = StringIO()
    with pytest.raises(CommandError):  # a malformed line is a problem, not "not a session"
        call_command("verify_sessions", "--session", "sess-g", stdout=out)
    assert out.getvalue().splitlines()[0] == "sess-g: malformed_line: line 1 is not a JSON object (skipped on load)"
    assert "not_a_session" not in out.getvalue()
