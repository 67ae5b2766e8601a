"""Erasing from the admin, on both providers: the Erase button of the entry
panel, its page (every place listed first, a reason required, the
``erase_entry`` permission), what the console says afterwards, and the
moderation queue's bulk erase."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.messages import get_messages
from django.urls import reverse

from sessiontree import services
from sessiontree.admin.plugins import CONTENT_SECURITY_POLICY
from sessiontree.core.redaction import ERASED
from sessiontree.models import AgentSession, AuditRecord, ModerationFlag
from sessiontree.providers.factory import get_provider

from .conftest import login, staff, tree_url

CARD = "4111 1111 1111 1111"
WHO = {"actor": "builder", "channel": "internal"}
QUEUE = "admin:sessiontree_moderationflag_changelist"


class Quoting:
    name = "quoting"

    def summarize(self, request):
        return f"The user said: {request.conversation_text()}"


@pytest.fixture
def carded(db, kind):
    """A card number in a user message, a fork holding a copy, a compaction quoting it."""
    provider = get_provider(kind)
    provider.create_session(session_id=f"card-{kind}")
    sid = f"card-{kind}"
    secret = services.entries.append_message(
        session_id=sid, message={"role": "user", "content": f"my card is {CARD}"}, provider=provider, **WHO
    )
    for n in range(3):
        services.entries.append_message(
            session_id=sid,
            message={"role": "assistant", "content": [{"type": "text", "text": f"answer {n} " + "z " * 200}]},
            provider=provider,
            **WHO,
        )
    fork = services.tree.fork_session(session_id=sid, entry_id=secret["id"], position="at", provider=provider, **WHO)
    from sessiontree.core.compaction import CompactionSettings

    compaction = services.tree.compact_session(
        session_id=sid,
        provider=provider,
        summarizer=Quoting(),
        settings=CompactionSettings(keep_recent_tokens=50),
        **WHO,
    )
    assert CARD in compaction["summary"]
    return AgentSession.objects.get(session_id=sid), secret, fork, compaction


def erase_url(row, entry_id):
    return tree_url(row, "tree_erase", entry_id)


def said(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_the_entry_panel_offers_erase_to_those_who_may(carded):
    row, secret, _fork, _compaction = carded
    panel = tree_url(row, "tree_entry", secret["id"])
    eraser = login(staff("eraser", "view_agentsession", "erase_entry"))
    html = eraser.get(panel).content.decode()
    assert 'id="erase-entry"' in html and erase_url(row, secret["id"]) in html
    moderator = login(staff("moderator", "view_agentsession", "moderate_session", "resolve_flag", "flag_entry"))
    assert 'id="erase-entry"' not in moderator.get(panel).content.decode()


def test_the_erase_page_lists_every_place_then_erases_with_a_reason(carded):
    row, secret, fork, compaction = carded
    client = login(staff("eraser", "view_agentsession", "erase_entry"))
    page = client.get(erase_url(row, secret["id"]))
    assert page.status_code == 200
    assert page["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    places = [(p["session_id"], p["entry_id"], p["kind"]) for p in page.context["places"]]
    assert places == [
        (row.session_id, secret["id"], "entry"),
        (row.session_id, compaction["id"], "summary"),
        (fork["session_id"], secret["id"], "copy"),
    ]
    html = page.content.decode()
    assert 'id="erase-places"' in html and 'id="confirm-erase"' in html
    only = client.get(erase_url(row, secret["id"]) + "?scope=entry")
    assert [p["kind"] for p in only.context["places"]] == ["entry"]
    # No reason: the page again, with the error; nothing erased.
    refused = client.post(erase_url(row, secret["id"]), {"reason": "  ", "scope": "all"})
    assert refused.status_code == 200 and refused.context["form"].errors["reason"]
    provider = get_provider(row.provider)
    assert CARD in provider.get_entry(row.session_id, secret["id"])["message"]["content"]
    done = client.post(erase_url(row, secret["id"]), {"reason": "customer request #12", "scope": "all"})
    assert done.status_code == 302 and done["Location"] == tree_url(row) + f"?focus={secret['id']}"
    lines = said(done)
    assert lines[0] == f"Erased {row.session_id}/{secret['id']}."
    assert lines[1] == f"Copies erased (1): {fork['session_id']}/{secret['id']}."
    assert lines[2] == f"Summaries erased (1): {row.session_id}/{compaction['id']}."
    assert provider.get_entry(row.session_id, secret["id"])["message"]["content"] == ERASED
    assert provider.get_entry(row.session_id, compaction["id"])["summary"] == ERASED
    assert provider.get_entry(fork["session_id"], secret["id"])["message"]["content"] == ERASED
    records = AuditRecord.objects.filter(operation="erase_entry")
    assert {(r.channel, r.actor) for r in records} == {("admin", "eraser")} and records.count() == 2
    log = LogEntry.objects.get(object_id=str(row.pk))
    assert "customer request #12" in log.change_message and CARD not in log.change_message


def test_the_erase_page_needs_the_erase_permission(carded):
    row, secret, _fork, _compaction = carded
    for user in (
        staff("viewer", "view_agentsession"),
        staff("moderator", "view_agentsession", "moderate_session", "hard_delete_session", "resolve_flag"),
    ):
        client = login(user)
        assert client.get(erase_url(row, secret["id"])).status_code == 403
        assert client.post(erase_url(row, secret["id"]), {"reason": "x", "scope": "all"}).status_code == 403
    blind = login(staff("blind", "erase_entry"))  # may erase, may not see sessions
    assert blind.get(erase_url(row, secret["id"])).status_code == 403
    assert not AuditRecord.objects.filter(operation="erase_entry").exists()
    assert login(staff("eraser", "view_agentsession", "erase_entry")).get(erase_url(row, "nothere")).status_code == 404


def test_a_held_session_is_refused_on_the_page(carded):
    row, secret, _fork, _compaction = carded
    services.protection.place_hold(session_id=row.session_id, reason="court", **WHO)
    client = login(staff("eraser", "view_agentsession", "erase_entry"))
    page = client.get(erase_url(row, secret["id"]))
    assert page.status_code == 200 and page.context["error"].startswith("session_on_hold:")
    assert 'id="confirm-erase"' not in page.content.decode()
    refused = client.post(erase_url(row, secret["id"]), {"reason": "x", "scope": "all"})
    assert refused.status_code == 200 and refused.context["error"].startswith("session_on_hold:")
    assert not AuditRecord.objects.filter(operation="erase_entry").exists()


def test_the_queue_erases_flagged_entries_after_a_confirmation(carded):
    row, secret, fork, _compaction = carded
    flag = services.moderation.flag_entry(
        session_id=row.session_id, entry_id=secret["id"], category="pii", note="card!", **WHO
    )
    other = services.moderation.flag_entry(session_id=row.session_id, entry_id=secret["id"], category="illegal", **WHO)
    lead = login(staff("lead", "resolve_flag", "erase_entry"))
    selected = {"action": "erase_entries", "_selected_action": [flag["id"], other["id"]]}
    confirm = lead.post(reverse(QUEUE), selected)
    assert confirm.status_code == 200
    (preview,) = confirm.context["previews"]
    assert [p["kind"] for p in preview["places"]] == ["entry", "summary", "copy"]
    provider = get_provider(row.provider)
    assert CARD in provider.get_entry(row.session_id, secret["id"])["message"]["content"]
    again = lead.post(reverse(QUEUE), {**selected, "post": "yes", "reason": "", "scope": "all"})
    assert again.status_code == 200 and again.context["form"].errors["reason"]
    done = lead.post(reverse(QUEUE), {**selected, "post": "yes", "reason": "PII policy", "scope": "all"})
    assert done.status_code == 302
    assert provider.get_entry(fork["session_id"], secret["id"])["message"]["content"] == ERASED
    flags = ModerationFlag.objects.filter(pk__in=[flag["id"], other["id"]])
    assert {(f.status, f.resolution_note) for f in flags} == {("actioned", "erased")}
    assert ModerationFlag.objects.get(pk=flag["id"]).note == ERASED  # a note on the erased entry goes too
    assert AuditRecord.objects.filter(operation="erase_entry", channel="admin", actor="lead").count() == 2
    assert any(line.startswith("Summaries erased (1)") for line in said(done))


def test_the_queues_erase_is_offered_only_with_the_erase_permission(carded):
    row, secret, _fork, _compaction = carded
    flag = services.moderation.flag_entry(session_id=row.session_id, entry_id=secret["id"], category="pii", **WHO)
    resolver = login(staff("resolver", "resolve_flag", "moderate_session"))
    page = resolver.get(reverse(QUEUE))
    assert "erase_entries" not in dict(page.context["action_form"].fields["action"].choices)
    resolver.post(
        reverse(QUEUE), {"action": "erase_entries", "_selected_action": [flag["id"]], "post": "yes", "reason": "x"}
    )
    assert CARD in get_provider(row.provider).get_entry(row.session_id, secret["id"])["message"]["content"]
    eraser = login(staff("eraser", "resolve_flag", "erase_entry"))
    assert "erase_entries" in dict(eraser.get(reverse(QUEUE)).context["action_form"].fields["action"].choices)
