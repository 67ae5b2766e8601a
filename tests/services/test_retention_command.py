"""``apply_retention`` as cron runs it."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import orjson
import pytest
from django.core.management import call_command
from django.utils import timezone

from sessiontree.models import AgentSession
from sessiontree.services import entries


def old_session(provider, session_id, days):
    provider.create_session(session_id=session_id)
    entries.append_message(
        session_id=session_id,
        message={"role": "user", "content": "x"},
        provider=provider,
        actor="t",
        channel="internal",
    )
    AgentSession.objects.filter(session_id=session_id).update(updated_at=timezone.now() - timedelta(days=days))


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("apply_retention", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_dry_run_then_run_with_one_summary_line(provider, settings):
    settings.SESSIONTREE_RETENTION_DAYS = 10
    old_session(provider, "gone-1", 20)
    old_session(provider, "kept-1", 2)
    out, _ = run("--dry-run")
    assert out.strip().splitlines() == [
        "retention: would delete 1 of 1 expired session(s); skipped: 0 legal hold, 0 open flags, 0 fork inside its period"
    ]
    assert provider.get_session("gone-1") is not None
    out, _ = run("--json")
    report = orjson.loads(out)
    assert report["deleted"] == ["gone-1"] and report["counts"]["deleted"] == 1 and not report["dry_run"]
    assert provider.get_session("gone-1") is None and provider.get_session("kept-1") is not None
    out, _ = run("-v", "2")
    assert out.strip().endswith(
        "retention: deleted 0 of 0 expired session(s); skipped: 0 legal hold, 0 open flags, 0 fork inside its period"
    )


def test_a_bad_batch_size_is_a_one_line_error(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as caught:
        run("--batch-size", "0")
    assert caught.value.returncode == 2 and "bad_input" in str(caught.value)
