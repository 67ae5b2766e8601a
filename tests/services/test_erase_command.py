"""``erase_entry`` as an operator runs it: one line per place, a summary
line, ``--json``, ``--dry-run``, and the category's exit code on failure."""

from __future__ import annotations

from io import StringIO

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessiontree.core.redaction import ERASED
from sessiontree.models import AuditRecord
from sessiontree.services import entries, protection, tree

WHO = {"actor": "t", "channel": "internal"}
CARD = "4111 1111 1111 1111"


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("erase_entry", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def failure(*args) -> CommandError:
    with pytest.raises(CommandError) as caught:
        run(*args)
    message = str(caught.value)
    assert message and "\n" not in message
    return caught.value


@pytest.fixture
def chat(provider):
    provider.create_session(session_id="s1")
    secret = entries.append_message(
        session_id="s1", message={"role": "user", "content": f"card {CARD}"}, provider=provider, **WHO
    )
    answer = entries.append_message(
        session_id="s1",
        message={"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        provider=provider,
        **WHO,
    )
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    return provider, secret, fork


def test_a_dry_run_then_the_erase(chat):
    provider, secret, fork = chat
    out, _ = run("s1", secret["id"], "--reason", "ticket 7", "--dry-run")
    assert out.strip().splitlines() == [
        f"would erase entry s1/{secret['id']}",
        f"would erase copy {fork['session_id']}/{secret['id']}",
        "erase: would erase 2 entries in 2 sessions (1 entry, 1 copy, 0 summaries); 0 files outside the store",
    ]
    assert CARD in provider.get_entry("s1", secret["id"])["message"]["content"]
    out, _ = run("s1", secret["id"], "--reason", "ticket 7", "--json")
    assert orjson.loads(out) == {
        "changed": [
            {"session_id": "s1", "entry_id": secret["id"], "kind": "entry"},
            {"session_id": fork["session_id"], "entry_id": secret["id"], "kind": "copy"},
        ],
        "outside": [],
    }
    assert provider.get_entry(fork["session_id"], secret["id"])["message"]["content"] == ERASED
    records = AuditRecord.objects.filter(operation="erase_entry")
    assert {(r.channel, r.actor.startswith("cli:")) for r in records} == {("cli", True)}
    out, _ = run("s1", secret["id"], "--reason", "again", "--scope", "entry")
    assert out.strip() == (
        "erase: erased 0 entries in 0 sessions (0 entries, 0 copies, 0 summaries); 0 files outside the store"
    )


def test_failures_end_with_one_line_and_their_exit_code(chat):
    provider, secret, _fork = chat
    assert failure("s1", secret["id"], "--reason", " ").returncode == 2  # bad input
    assert failure("s1", "nothere", "--reason", "x").returncode == 3  # not found
    assert failure("nope", secret["id"], "--reason", "x").returncode == 3
    protection.place_hold(session_id="s1", reason="court", **WHO)
    held = failure("s1", secret["id"], "--reason", "x")
    assert held.returncode == 4 and str(held).startswith("session_on_hold:")
    with pytest.raises(CommandError):  # the reason is required
        run("s1", secret["id"])
    assert CARD in provider.get_entry("s1", secret["id"])["message"]["content"]
    assert not AuditRecord.objects.filter(operation="erase_entry").exists()
