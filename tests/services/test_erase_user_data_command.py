"""``erase_user_data``: a person's data erased from the command line."""

from __future__ import annotations

from io import StringIO

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessiontree.models import AgentSession, AuditRecord
from sessiontree.services import entries, protection


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("erase_user_data", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def refused(*args) -> CommandError:
    with pytest.raises(CommandError) as caught:
        run(*args)
    return caught.value


def make(provider, session_id, owner):
    provider.create_session(session_id=session_id, user_id=owner)
    entries.append_message(
        session_id=session_id,
        message={"role": "user", "content": "hello", "timestamp": 1},
        provider=provider,
        actor=owner,
        channel="api",
    )


def test_dry_run_json_then_run_with_a_summary_line(provider):
    make(provider, "d1", "dave")
    make(provider, "d2", "dave")
    make(provider, "e1", "erin")
    dry = orjson.loads(run("dave", "--dry-run", "--json")[0])
    assert dry["dry_run"] is True and [s["session_id"] for s in dry["sessions"]] == ["d1", "d2"]
    assert AgentSession.objects.filter(user_id="dave").count() == 2
    out, _ = run("dave", "--dry-run")
    assert "would delete session d1" in out and out.strip().splitlines()[-1].startswith("user dave: would erase 2")
    out, _ = run("dave")
    lines = out.strip().splitlines()
    assert "deleted session d1" in lines and "deleted session d2" in lines
    assert lines[-1].startswith("user dave: erased 2 session(s) (2 entries)")
    assert not AgentSession.objects.filter(user_id="dave").exists()
    assert AgentSession.objects.filter(session_id="e1").exists()
    summary = AuditRecord.objects.get(operation="erase_user_data")
    assert summary.channel == "cli" and summary.actor.startswith("cli:")


def test_refusals_are_one_line_with_the_category_exit_code(provider):
    make(provider, "d1", "dave")
    protection.place_hold(session_id="d1", reason="case 9", actor="dpo", channel="internal")
    error = refused("dave")
    assert error.returncode == 4 and str(error).startswith("session_on_hold:") and "case 9" in str(error)
    assert "\n" not in str(error)
    assert AgentSession.objects.filter(session_id="d1").exists()
    error = refused("nobody")
    assert error.returncode == 3 and str(error).startswith("user_not_found:")
