"""Data protection in the admin: a user's data erased (superusers only,
after a page listing what it touches) and retention run by hand."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.admin import helpers
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from sessiontree import services
from sessiontree.models import Agent, AgentSession, AuditRecord

from .conftest import staff

USERS = reverse("admin:auth_user_changelist")


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def erase_action(client: Client, user: User, **extra: str):
    return client.post(USERS, {"action": "erase_user_data", helpers.ACTION_CHECKBOX_NAME: [user.pk], **extra})


def test_the_erase_action_is_for_superusers_only(branched):
    alice = User.objects.create_user("alice")
    clerk = staff("clerk", "view_user", "change_user", "delete_user", "view_agentsession", "hard_delete_session")
    page = login(clerk).get(USERS).content.decode()
    assert "erase_user_data" not in page
    for who in (clerk, staff("officer", "view_user", "place_hold", "erase_entry")):
        erase_action(login(who), alice)
        erase_action(login(who), alice, post="yes")
        assert AgentSession.objects.filter(pk=branched.pk).exists()
    assert not AuditRecord.objects.filter(operation="erase_user_data").exists()
    root = User.objects.create_superuser("root", password="pw")
    assert "erase_user_data" in login(root).get(USERS).content.decode()


def test_the_confirmation_lists_what_will_be_touched_then_the_erase_runs(branched):
    alice = User.objects.create_user("alice")
    root = login(User.objects.create_superuser("root", password="pw"))
    confirm = erase_action(root, alice)
    page = confirm.content.decode()
    assert confirm.status_code == 200 and 'id="erase-user-form"' in page
    assert branched.session_id in page and "search_entries" in page and "audit_records" in page
    assert AgentSession.objects.filter(pk=branched.pk).exists()  # the page changed nothing
    done = erase_action(root, alice, post="yes")
    assert done.status_code == 302
    assert not AgentSession.objects.filter(pk=branched.pk).exists()
    record = AuditRecord.objects.get(operation="erase_user_data")
    assert record.channel == "admin" and record.actor == "root"


def test_a_held_session_is_named_and_nothing_is_erased(branched):
    alice = User.objects.create_user("alice")
    services.protection.place_hold(session_id=branched.session_id, reason="case 3", actor="legal", channel="internal")
    root = login(User.objects.create_superuser("root", password="pw"))
    page = erase_action(root, alice).content.decode()
    assert "session_on_hold" in page and "case 3" in page
    response = erase_action(root, alice, post="yes")
    assert response.status_code == 302 and AgentSession.objects.filter(pk=branched.pk).exists()


def test_agents_show_their_retention_and_the_retention_page_is_gated(branched, settings):
    settings.SESSIONTREE_RETENTION_DAYS = 30
    Agent.objects.filter(pk=branched.agent_id).update(retention_days=7)
    AgentSession.objects.filter(pk=branched.pk).update(updated_at=timezone.now() - timedelta(days=8))
    retention = reverse("admin:sessiontree_agent_retention")
    viewer = login(staff("viewer", "view_agent", "view_agentsession"))
    assert viewer.get(retention).status_code == 403
    assert viewer.post(retention).status_code == 403
    assert AgentSession.objects.filter(pk=branched.pk).exists()
    janitor = login(staff("janitor", "view_agent", "change_agent", "view_agentsession", "hard_delete_session"))
    agents = janitor.get(reverse("admin:sessiontree_agent_changelist")).content.decode()
    assert "7 days" in agents and 'id="retention-link"' in agents
    form = janitor.get(reverse("admin:sessiontree_agent_change", args=[branched.agent_id])).content.decode()
    assert 'name="retention_days"' in form
    page = janitor.get(retention).content.decode()
    assert branched.session_id in page and "would delete 1 of 1" in page
    assert AgentSession.objects.filter(pk=branched.pk).exists()  # the page is a dry run
    assert janitor.post(retention).status_code == 302
    assert not AgentSession.objects.filter(pk=branched.pk).exists()
    record = AuditRecord.objects.get(operation="hard_delete_session", session_id=branched.session_id)
    assert record.channel == "admin" and record.detail["reason"] == "retention"
