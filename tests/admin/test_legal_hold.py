"""Legal holds in the admin: the banner, placing and releasing, the list filter, the refusal."""

from __future__ import annotations

from django.urls import reverse

from sessiontree import services
from sessiontree.models import AgentSession, AuditRecord, LegalHold

from .conftest import login, staff


def test_place_and_release_a_hold_from_the_tree_page(branched):
    officer = staff("officer", "view_agentsession", "place_hold")
    client = login(officer)
    tree = reverse("admin:sessiontree_agentsession_tree", args=[branched.pk])
    page = client.get(tree).content.decode()
    assert 'id="place-hold-form"' in page and "legal-hold-banner" not in page
    hold = reverse("admin:sessiontree_agentsession_hold", args=[branched.pk])
    assert client.post(hold, {"reason": "Case 42"}).status_code == 302
    page = client.get(tree).content.decode()
    assert 'id="legal-hold-banner"' in page and "Case 42" in page and "officer" in page
    held = login(officer).get(reverse("admin:sessiontree_agentsession_changelist") + "?on_hold=yes")
    assert [row.pk for row in held.context["cl"].result_list] == [branched.pk]
    client.post(hold, {"release": "yes"})
    assert not LegalHold.objects.exists()
    ops = list(
        AuditRecord.objects.filter(session_id=branched.session_id, channel="admin").values_list("operation", flat=True)
    )
    assert "place_hold" in ops and "release_hold" in ops


def test_placing_a_hold_needs_its_permission(branched):
    moderator = staff("mod", "view_agentsession", "moderate_session", "hard_delete_session")
    client = login(moderator)
    page = client.get(reverse("admin:sessiontree_agentsession_tree", args=[branched.pk])).content.decode()
    assert "place-hold-form" not in page
    assert (
        client.post(reverse("admin:sessiontree_agentsession_hold", args=[branched.pk]), {"reason": "x"}).status_code
        == 403
    )
    assert not LegalHold.objects.exists()


def test_an_empty_reason_is_refused_with_a_message(branched):
    officer = staff("officer", "view_agentsession", "place_hold")
    client = login(officer)
    response = client.post(
        reverse("admin:sessiontree_agentsession_hold", args=[branched.pk]), {"reason": " "}, follow=True
    )
    assert "Legal hold refused: bad_input" in response.content.decode()
    assert not LegalHold.objects.exists()


def test_the_bulk_hard_delete_refuses_a_held_session(branched, compacted):
    services.protection.place_hold(session_id=branched.session_id, reason="Case 7", actor="dpo", channel="internal")
    janitor = staff("janitor", "view_agentsession", "moderate_session", "hard_delete_session", "delete_agentsession")
    client = login(janitor)
    changelist = reverse("admin:sessiontree_agentsession_changelist")
    client.post(
        changelist, {"action": "delete_selected", "_selected_action": [branched.pk, compacted.pk], "post": "yes"}
    )
    assert AgentSession.objects.filter(pk=branched.pk).exists()
    assert not AgentSession.objects.filter(pk=compacted.pk).exists()
