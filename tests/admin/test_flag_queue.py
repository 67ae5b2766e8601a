"""The admin's moderation queue: every flag across sessions, its filters, its
bulk actions through the operations layer, and who may do what."""

from __future__ import annotations

from django.urls import reverse

from sessiontree import services
from sessiontree.models import AgentSession, AuditRecord, ModerationFlag

from .conftest import login, provider_of, staff

QUEUE = "admin:sessiontree_moderationflag_changelist"


def first_user_message(row: AgentSession) -> dict:
    path = provider_of(row).get_active_path(row.session_id)
    return next(e for e in path if e["type"] == "message" and e["message"]["role"] == "user")


def flag(row: AgentSession, category: str = "pii", **kwargs) -> dict:
    entry = first_user_message(row)
    return services.moderation.flag_entry(
        session_id=row.session_id,
        entry_id=entry["id"],
        category=category,
        actor="reporter",
        channel="internal",
        **kwargs,
    )


def test_the_queue_lists_open_flags_oldest_first_with_links_into_the_tree(branched, compacted):
    first = flag(branched, "pii")
    second = flag(compacted, "spam")
    done = flag(branched, "hate")
    services.moderation.resolve_flag(flag_id=done["id"], status="dismissed", actor="x", channel="internal")
    resolver = staff("resolver", "resolve_flag")
    page = login(resolver).get(reverse(QUEUE))
    assert page.status_code == 200
    rows = page.context["cl"].result_list
    assert [row.pk for row in rows] == [first["id"], second["id"]]  # open only, oldest first
    html = page.content.decode()
    tree = reverse("admin:sessiontree_agentsession_tree", args=[branched.pk])
    assert f"{tree}?focus={first['entry_id']}" in html
    every = login(resolver).get(reverse(QUEUE) + "?status=all").context["cl"].result_list
    assert len(every) == 3
    spam = login(resolver).get(reverse(QUEUE) + f"?category=spam&provider={compacted.provider}").context["cl"]
    assert [row.pk for row in spam.result_list] == [second["id"]]


def test_bulk_dismiss_hide_and_archive_go_through_the_operations_layer(branched, compacted):
    a = flag(branched)
    b = flag(compacted)
    moderator = staff("lead", "resolve_flag", "moderate_session", "view_agentsession")
    client = login(moderator)
    response = client.post(reverse(QUEUE), {"action": "hide_entries", "_selected_action": [a["id"]]})
    assert response.status_code == 302
    context = provider_of(branched).build_context(branched.session_id)
    sent = dict(zip(context["source_entry_ids"], context["messages"], strict=True))
    assert sent[a["entry_id"]]["content"] == "[removed by a moderator]"
    assert ModerationFlag.objects.get(pk=a["id"]).status == "actioned"
    client.post(reverse(QUEUE), {"action": "archive_sessions", "_selected_action": [b["id"]]})
    assert AgentSession.objects.get(pk=compacted.pk).status == "archived"
    c = flag(branched, "other")
    client.post(reverse(QUEUE), {"action": "dismiss_flags", "_selected_action": [c["id"]]})
    assert ModerationFlag.objects.get(pk=c["id"]).status == "dismissed"
    channels = set(AuditRecord.objects.filter(actor="lead").values_list("channel", flat=True))
    operations = set(AuditRecord.objects.filter(actor="lead").values_list("operation", flat=True))
    assert channels == {"admin"}
    assert {"hide_entry", "resolve_flag", "archive_session"} <= operations


def test_who_sees_and_acts_on_the_queue(branched):
    a = flag(branched)
    nobody = staff("nobody", "view_agentsession")
    assert login(nobody).get(reverse(QUEUE)).status_code == 403
    resolver = staff("resolver", "resolve_flag")
    client = login(resolver)
    page = client.get(reverse(QUEUE))
    assert page.status_code == 200
    actions = [name for name, _label in page.context["action_form"].fields["action"].choices]
    assert "dismiss_flags" in actions and "hide_entries" not in actions  # hiding needs moderate_session too
    client.post(reverse(QUEUE), {"action": "hide_entries", "_selected_action": [a["id"]]})
    assert ModerationFlag.objects.get(pk=a["id"]).status == "open"
    assert login(resolver).get(reverse("admin:sessiontree_moderationflag_add")).status_code == 403
