"""A third storage is one port implementation plus a registry line: with
``memory`` in ``SESSIONTREE_PROVIDERS`` every layer above the port takes it,
with no edit anywhere (services, selectors, the API, the admin, commands)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from sessiontree import services
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider_for_session, provider_kinds
from sessiontree.selectors.verify import verify_session

from . import memory_storage
from .conftest import register_memory_storage


@pytest.fixture
def memory(db, settings):
    register_memory_storage(settings)
    memory_storage.clear()
    return memory_storage.KIND


def test_the_registry_line_is_all_it_takes(memory):
    assert memory in provider_kinds()
    assert (memory, memory) in AgentSession._meta.get_field("provider").choices
    session = services.sessions.create_session(actor="t", channel="internal", kind=memory, session_id="m1")
    assert session["provider"] == memory
    assert get_provider_for_session("m1").kind == memory


def test_operations_resolve_it_from_the_session(memory):
    services.sessions.create_session(actor="t", channel="internal", kind=memory, session_id="m1")
    who = {"actor": "t", "channel": "internal"}
    first = services.entries.append_message(session_id="m1", message={"role": "user", "content": "hi"}, **who)
    answer = services.entries.append_message(
        session_id="m1", message={"role": "assistant", "content": [{"type": "text", "text": "yes"}]}, **who
    )
    services.tree.set_label(session_id="m1", target_id=first["id"], label="start", **who)
    result = services.tree.navigate_tree(session_id="m1", target_id=answer["id"], **who)
    assert result["leaf_entry_id"] == answer["id"]
    fork = services.tree.fork_session(session_id="m1", entry_id=answer["id"], position="at", **who)
    assert fork["provider"] == memory and fork["entry_count"] == 3  # the path and its label
    operations = list(AuditRecord.objects.filter(session_id="m1").values_list("operation", flat=True))
    assert {"append_entry", "set_label", "navigate_tree", "fork_session"} <= set(operations)
    assert verify_session("m1").problems == []
    assert services.sessions.refresh_session(session_id="m1", **who) == {}


def test_the_api_and_the_admin_take_it(memory):
    admin = User.objects.create_superuser("root", password="pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin).key}")
    created = client.post("/api/sessions/", {"provider": memory, "session_id": "m2"}, format="json")
    assert created.status_code == 201, created.content
    appended = client.post(
        "/api/sessions/m2/entries/", {"message": {"role": "user", "content": "from the API"}}, format="json"
    )
    assert appended.status_code == 201, appended.content
    assert client.get(f"/api/sessions/?provider={memory}").json()["results"][0]["session_id"] == "m2"
    browser = APIClient()
    browser.force_login(admin)
    listed = browser.get(reverse("admin:sessiontree_agentsession_changelist"))
    assert "from the API" in listed.content.decode()  # the untitled session's first message


def test_commands_offer_it(memory):
    services.sessions.create_session(actor="t", channel="internal", kind=memory, session_id="m3")
    out = StringIO()
    call_command("verify_sessions", "--provider", memory, stdout=out)
    assert "verified 1 session(s): 0 problem(s)" in out.getvalue()
