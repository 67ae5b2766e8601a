"""search_sessions, build_search_index, moderate_sessions and export_session
--manifest as an operator runs them (call_command, output, exit codes), on
both providers."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from sessiontree.models import AuditRecord, ClassifierCursor, ModerationFlag, SearchEntry
from sessiontree.services import entries
from tests.contract.conftest import PROVIDER_KINDS, make_provider
from tests.fake_openai import serve_fake_openai

# InnoDB's full-text index sees committed rows only: these tests commit.
pytestmark = pytest.mark.django_db(transaction=True)
CARD = "4111 1111 1111 1111"


def run(name, *args):
    out, err = StringIO(), StringIO()
    call_command(name, *[str(a) for a in args], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def fails(name, *args):
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(name, *[str(a) for a in args], stdout=out, stderr=err)
    return caught.value, out.getvalue() + err.getvalue()


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, tmp_path):
    return make_provider(request.param, tmp_path)


def say(provider, session_id, text):
    return entries.append_message(
        session_id=session_id,
        message={"role": "user", "content": text, "timestamp": 1},
        provider=provider,
        actor="t",
        channel="internal",
    )


def test_search_sessions_lines_json_and_refusals(provider):
    provider.create_session(session_id="s1", user_id="alice")
    hit = say(provider, "s1", "the <b>okapi</b> said & left")
    out, _ = run("search_sessions", "okapi")
    assert out.splitlines() == [
        f"s1 {hit['id']} message (user): the <b>**okapi**</b> said & left",
        "1 entry found, newest first",
    ]
    body = orjson.loads(run("search_sessions", "okapi", "--json", "--user", "alice")[0])
    assert body["results"][0]["snippet"] == "the &lt;b&gt;<mark>okapi</mark>&lt;/b&gt; said &amp; left"
    assert run("search_sessions", "okapi", "--user", "bob")[0].splitlines() == ["0 entries found, newest first"]
    for args in (["okapi", "--limit", "0"], ["okapi", "--agent", "nobody"], ["okapi", "--session", "../x"]):
        error, _ = fails("search_sessions", *args)
        assert error.returncode == 2, args


def test_build_search_index_builds_once_and_reports(provider):
    provider.create_session(session_id="s1")
    a = say(provider, "s1", "gnu one")
    b = say(provider, "s1", "gnu two")
    SearchEntry.objects.all().delete()  # as stored before the index existed
    SearchEntry.objects.create(session_id="gone", entry_id="x", entry_type="message", text="orphan gnu")
    out, _ = run("build_search_index", "--dry-run")
    assert out.strip() == (
        "search index: 1 session(s) checked, 1 would be changed; entries would be added 2, would be updated 0, "
        "would be removed 0; rows of 1 deleted session(s) would be removed"
    )
    assert SearchEntry.objects.count() == 1
    report = orjson.loads(run("build_search_index", "--json", "--optimize")[0])
    assert (report["added"], report["orphans_removed"], report["dry_run"]) == (2, 1, False)
    assert report["optimized"] in ("FTS5 optimize", "OPTIMIZE TABLE")
    assert set(SearchEntry.objects.values_list("entry_id", flat=True)) == {a["id"], b["id"]}
    out, _ = run("build_search_index")
    assert out.strip() == ("search index: 1 session(s) checked, 0 changed; entries added 0, updated 0, removed 0")
    assert orjson.loads(run("search_sessions", "gnu", "--json")[0])["results"][0]["entry_id"] == b["id"]


def test_build_search_index_goes_on_past_a_session_it_cannot_read(tmp_path):
    file = make_provider("file", tmp_path)
    file.create_session(session_id="broken")
    say(file, "broken", "x")
    Path(file.get_session("broken")["session_file"]).unlink()
    file.create_session(session_id="fine")
    say(file, "fine", "y")
    error, output = fails("build_search_index")
    assert error.returncode == 3 and "broken: session_not_found" in output
    assert "2 session(s)" not in output and "1 session(s) checked" in output
    error, _ = fails("build_search_index", "nope")
    assert error.returncode == 3
    error, _ = fails("build_search_index", "--provider", "tape")
    assert error.returncode == 2


def test_moderate_sessions_opens_flags_once(provider):
    provider.create_session(session_id="s1")
    card = say(provider, "s1", f"card {CARD}")
    out, _ = run("moderate_sessions", "--dry-run", "--classifier", "pii")
    assert out.strip() == "pii: 1 entries scanned, 1 with findings, 1 flag(s) would open, 0 already open"
    assert not ModerationFlag.objects.exists()
    out, _ = run("moderate_sessions", "--classifier", "pii")
    assert out.strip() == "pii: 1 entries scanned, 1 with findings, 1 flag(s) opened, 0 already open"
    assert ModerationFlag.objects.get().entry_id == card["id"]
    report = orjson.loads(run("moderate_sessions", "--classifier", "pii", "--json")[0])
    assert report["classifiers"][0]["scanned"] == 0
    error, _ = fails("moderate_sessions", "--classifier", "nonsense")
    assert error.returncode == 2
    error, _ = fails("moderate_sessions", "--limit", "0")
    assert error.returncode == 2


def test_moderate_sessions_exit_codes_for_a_failing_back_end_and_a_busy_cursor(provider, settings):
    provider.create_session(session_id="s1")
    say(provider, "s1", "words")
    settings.SESSIONTREE_MODERATION_OPENAI_RETRIES = 0
    with serve_fake_openai(lambda body: (500, b"{}", 0.0)) as fake:
        settings.SESSIONTREE_MODERATION_OPENAI_BASE_URL = fake.url
        error, output = fails("moderate_sessions", "--classifier", "openai_moderation")
    assert error.returncode == 7 and "classifier_failed" in output and "HTTP 500" in output
    ClassifierCursor.objects.filter(classifier="openai_moderation").update(
        lease_owner="other", lease_until=timezone.now() + timedelta(minutes=5)
    )
    error, _ = fails("moderate_sessions", "--classifier", "openai_moderation")
    assert error.returncode == 4


def test_export_session_writes_a_manifest_and_is_audited(provider, tmp_path):
    provider.create_session(session_id="s1")
    say(provider, "s1", "hello")
    target, manifest_path = tmp_path / "out" / "s1.jsonl", tmp_path / "out" / "s1.manifest.json"
    run("export_session", "s1", "-o", target, "--dry-run", "--manifest", manifest_path)
    assert not target.exists() and not manifest_path.exists()
    assert not AuditRecord.objects.filter(operation="export_session").exists()
    out, _ = run("export_session", "s1", "-o", target, "--manifest", manifest_path)
    data = target.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert out.strip() == f"Created {target}: 1 entries of session s1 (full), sha256 {digest}; manifest {manifest_path}"
    manifest = json.loads(manifest_path.read_text())
    assert (manifest["sha256"], manifest["entry_count"], manifest["bytes"]) == (digest, 1, len(data))
    assert manifest["exporter"].startswith("cli:") and manifest["channel"] == "cli"
    record = AuditRecord.objects.get(operation="export_session")
    assert record.channel == "cli" and record.detail["sha256"] == digest
    # To stdout, with a manifest beside it: audited too.
    out, _ = run("export_session", "s1", "--manifest", manifest_path)
    assert hashlib.sha256(out.encode()).hexdigest() == json.loads(manifest_path.read_text())["sha256"]
    assert AuditRecord.objects.filter(operation="export_session").count() == 2


class Terminal(StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("name", ["build_search_index", "moderate_sessions"])
def test_a_progress_bar_on_a_terminal_only(provider, name):
    """A long run shows a tqdm bar on a terminal's stderr, none with --json
    or when stderr is a file or a pipe (cron)."""
    for n in range(3):
        provider.create_session(session_id=f"bar-{n}")
        say(provider, f"bar-{n}", f"a message number {n}")

    def stderr_of(*args: str, tty: bool) -> str:
        err = Terminal() if tty else StringIO()
        call_command(name, *args, stdout=StringIO(), stderr=err)
        return err.getvalue()

    shown = stderr_of("--dry-run", tty=True)
    assert "100%" in shown and "3/3" in shown, shown
    assert "100%" not in stderr_of("--dry-run", "--json", tty=True)
    assert "100%" not in stderr_of("--dry-run", tty=False)
