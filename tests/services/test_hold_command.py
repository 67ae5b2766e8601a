"""``legal_hold``: place, release and list holds from the command line."""

from __future__ import annotations

from io import StringIO

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessiontree.core.errors import SessionOnHold
from sessiontree.models import AuditRecord, LegalHold
from sessiontree.services import sessions


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("legal_hold", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def refused(*args) -> CommandError:
    with pytest.raises(CommandError) as caught:
        run(*args)
    return caught.value


def test_place_list_release(provider):
    provider.create_session(session_id="s1")
    provider.create_session(session_id="s2")
    out, _ = run("s1", "--dry-run", "--reason", "case 17")
    assert out.strip() == "would place a hold on s1" and not LegalHold.objects.exists()

    out, _ = run("s1", "--reason", "case 17")
    assert out.strip() == "placed a hold on s1"
    record = AuditRecord.objects.get(operation="place_hold", session_id="s1")
    assert record.channel == "cli" and record.actor.startswith("cli:") and record.detail["reason"] == "case 17"
    with pytest.raises(SessionOnHold):
        sessions.delete_session(session_id="s1", hard=True, actor="t", channel="internal")

    listed = orjson.loads(run("--list", "--json")[0])
    assert [(h["session_id"], h["reason"]) for h in listed] == [("s1", "case 17")]
    assert run("--list")[0].strip().splitlines()[-1] == "1 session(s) on hold"

    held = orjson.loads(run("s2", "--reason", "case 18", "--json")[0])
    assert held["session_id"] == "s2" and held["legal_hold"]["reason"] == "case 18"

    out, _ = run("s1", "--release", "--dry-run")
    assert out.startswith("would release the hold on s1") and LegalHold.objects.filter(session_id="s1").exists()
    out, _ = run("s1", "--release")
    assert out.strip() == "released the hold on s1"
    assert AuditRecord.objects.filter(operation="release_hold", session_id="s1").count() == 1
    sessions.delete_session(session_id="s1", hard=True, actor="t", channel="internal")
    assert provider.get_session("s1") is None


def test_refusals_are_one_line_with_the_category_exit_code(provider):
    provider.create_session(session_id="s1")
    run("s1", "--reason", "case 17")
    taken = refused("s1", "--reason", "again")
    assert taken.returncode == 4 and str(taken).startswith("hold_exists:")
    assert refused("s1", "--reason", "again", "--dry-run").returncode == 4
    assert refused("nope", "--reason", "x").returncode == 3
    assert refused("nope", "--reason", "x", "--dry-run").returncode == 3
    run("s1", "--release")
    gone = refused("s1", "--release")
    assert gone.returncode == 4 and str(gone).startswith("not_on_hold:")
    assert refused("s1", "--release", "--dry-run").returncode == 4
    blank = refused("s1", "--reason", "  ")
    assert blank.returncode == 2 and "reason" in str(blank)
    assert refused("--reason", "x").returncode == 2  # no session
    assert refused("s1", "--list").returncode == 2
    with pytest.raises(CommandError):
        run("s1")  # one of --reason, --release, --list
    assert not LegalHold.objects.exists()
