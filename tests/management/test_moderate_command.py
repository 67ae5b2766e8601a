"""``manage.py moderate``: flag, list, resolve, hide and unhide from the
command line, as an operator runs it (call_command, output, exit codes,
dry runs that change nothing), on both providers."""

from __future__ import annotations

from io import StringIO

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessiontree import services
from sessiontree.models import AuditRecord, ModerationFlag
from sessiontree.providers.factory import get_provider_for_session
from tests.contract.conftest import PROVIDER_KINDS

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("moderate", *[str(a) for a in args], stdout=out, stderr=StringIO())
    return out.getvalue()


def fails(*args) -> CommandError:
    with pytest.raises(CommandError) as caught:
        call_command("moderate", *[str(a) for a in args], stdout=StringIO(), stderr=StringIO())
    return caught.value


@pytest.fixture(params=PROVIDER_KINDS)
def chat(request):
    """A session with a user message holding a card number, an answer and a label."""
    services.sessions.create_session(actor="t", channel="internal", kind=request.param, session_id="chat")
    said = services.entries.append_message(
        session_id="chat",
        message={"role": "user", "content": "my card is 4111 1111 1111 1111", "timestamp": 1},
        actor="t",
        channel="internal",
    )
    answer = services.entries.append_message(
        session_id="chat",
        message={"role": "assistant", "content": [{"type": "text", "text": "noted"}], "timestamp": 2},
        actor="t",
        channel="internal",
    )
    return said["id"], answer["id"]


def context_text() -> str:
    return str(get_provider_for_session("chat").build_context("chat")["messages"])


def leaf() -> str:
    return get_provider_for_session("chat").get_session("chat")["leaf_entry_id"]


def test_flag_list_and_resolve(chat):
    said, _ = chat
    before = leaf()
    assert run("flag", "chat", said, "--category", "pii", "--dry-run").startswith(f"would flag {said} of chat as pii")
    assert not ModerationFlag.objects.exists()

    line = run("flag", "chat", said, "--category", "pii", "--note", "card number")
    flag = ModerationFlag.objects.get()
    assert line.strip() == f"flag {flag.pk}: {said} of chat flagged as pii (open)"
    assert (flag.note, flag.source, flag.opened_by.startswith("cli:")) == ("card number", "operator", True)
    assert leaf() == before  # beside the tree
    record = AuditRecord.objects.get(operation="flag_entry")
    assert record.channel == "cli" and record.actor.startswith("cli:")

    listed = run("flags").splitlines()
    assert listed[0].split("\t")[:5] == [str(flag.pk), "open", "pii", "chat", said] and listed[-1] == "1 flag"
    body = orjson.loads(run("flags", "--json", "--category", "pii"))
    assert [f["id"] for f in body["results"]] == [flag.pk]
    assert run("flags", "--category", "spam").splitlines() == ["0 flags"]

    assert "would resolve" in run("resolve", flag.pk, "--status", "dismissed", "--dry-run")
    assert ModerationFlag.objects.get().status == "open"
    resolved = orjson.loads(run("resolve", flag.pk, "--status", "dismissed", "--json"))
    assert (resolved["status"], resolved["resolved_by"].startswith("cli:")) == ("dismissed", True)
    assert run("flags").splitlines() == ["0 flags"]
    assert run("flags", "--status", "all").splitlines()[-1] == "1 flag"
    again = fails("resolve", flag.pk, "--status", "actioned")
    assert again.returncode == 4 and str(again).startswith("flag_already_resolved:")
    assert fails("resolve", flag.pk, "--status", "actioned", "--dry-run").returncode == 4


def test_hide_and_unhide_with_dry_runs(chat):
    said, _ = chat
    before = leaf()
    assert "would hide" in run("hide", "chat", said, "--dry-run")
    assert leaf() == before and "4111" in context_text()

    entry = orjson.loads(run("hide", "chat", said, "--notice", "[card removed]", "--expected-leaf", before, "--json"))
    assert entry["type"] == "context_edit" and entry["targetId"] == said
    assert "4111" not in context_text() and "[card removed]" in context_text()
    assert AuditRecord.objects.filter(operation="hide_entry", channel="cli").count() == 1

    assert "now hidden" in run("unhide", "chat", said, "--dry-run")
    line = run("unhide", "chat", said)
    assert line.startswith(f"{said} of chat is shown to the model again")
    assert "4111" in context_text()
    not_hidden = fails("unhide", "chat", said)
    assert not_hidden.returncode == 4 and str(not_hidden).startswith("not_hidden:")
    assert fails("unhide", "chat", said, "--dry-run").returncode == 4


def test_refusals_are_one_line_with_their_exit_codes(chat):
    said, answer = chat
    stale = fails("hide", "chat", said, "--expected-leaf", said)
    assert stale.returncode == 4 and str(stale).startswith("leaf_conflict:")
    assert fails("hide", "chat", said, "--expected-leaf", said, "--dry-run").returncode == 4
    assert fails("flag", "chat", said, "--category", "nonsense").returncode == 2
    assert fails("flag", "chat", said, "--category", "nonsense", "--dry-run").returncode == 2
    assert fails("flag", "chat", "nothere", "--category", "pii").returncode == 3
    assert fails("flag", "nosuch", said, "--category", "pii", "--dry-run").returncode == 3
    assert fails("resolve", 999999, "--status", "dismissed").returncode == 3
    assert fails("flags", "--limit", "0").returncode == 2
    assert fails("hide", "chat", "nothere").returncode == 3
    label = services.tree.set_label(session_id="chat", target_id=answer, label="x", actor="t", channel="internal")
    not_a_message = fails("hide", "chat", label["id"], "--dry-run")
    assert not_a_message.returncode == 4 and str(not_a_message).startswith("not_a_message:")
    assert not ModerationFlag.objects.exists()
    assert not AuditRecord.objects.filter(operation__in=["flag_entry", "hide_entry", "unhide_entry"]).exists()
