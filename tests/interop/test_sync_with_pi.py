"""The published Pi opens what sync_sessions and export_session write: Pi files
imported into the database and exported again read, in Pi, as the same
entries with the same context at every leaf as our session."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from sessiontree.providers.factory import get_provider
from tests.sync import pi_folder as pi_files

from .views import context_view

pytestmark = pytest.mark.django_db


def ours(session_id: str, leaf: str) -> dict:
    view = context_view(get_provider("mysql").build_context(session_id, leaf))
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
