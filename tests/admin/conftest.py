"""Sessions and users for the admin tests, on every provider."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from sessiontree.management.commands.load_demo import DemoSession, build_coding_1, build_coding_2, build_roleplay
from sessiontree.models import Agent, AgentSession
from sessiontree.providers.factory import get_provider
from sessiontree.services.audit import Actor

PROVIDERS = ["file", "mysql"]
BUILDER = Actor("test-builder")


def build(builder, session_id: str, kind: str, title: str | None = "Branched") -> AgentSession:
    agent, _ = Agent.objects.get_or_create(name=f"agent-{kind}")
    builder(DemoSession(session_id, title or "", agent.name, "alice", builder), kind, agent, BUILDER)
    if title is None:
        AgentSession.objects.filter(session_id=session_id).update(title=None)
    return AgentSession.objects.get(session_id=session_id)


@pytest.fixture(params=PROVIDERS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def branched(db, kind) -> AgentSession:
    """Three branches off one answer, two labels, a branch summary (the demo's coding session)."""
    return build(build_coding_1, f"branched-{kind}", kind)


@pytest.fixture
def compacted(db, kind) -> AgentSession:
    """A compaction on the active path and a side branch off the compacted part."""
    return build(build_coding_2, f"compacted-{kind}", kind)


@pytest.fixture
def roleplay(db, kind) -> AgentSession:
    return build(build_roleplay, f"roleplay-{kind}", kind)


def provider_of(row: AgentSession):
    return get_provider(row.provider)


def login(user: User) -> Client:
    """A test client signed in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)  # fresh: no permission cache


@pytest.fixture
def viewer(db) -> User:
    return staff("viewer", "view_agentsession")


@pytest.fixture
def moderator(db) -> User:
    return staff("moderator", "view_agentsession", "moderate_session")


@pytest.fixture
def viewer_client(viewer) -> Client:
    client = Client()
    client.force_login(viewer)
    return client


@pytest.fixture
def moderator_client(moderator) -> Client:
    client = Client()
    client.force_login(moderator)
    return client


def tree_url(row: AgentSession, name: str = "tree", *args: str) -> str:
    return reverse(f"admin:sessiontree_agentsession_{name}", args=[row.pk, *args])


def action_url(row: AgentSession, action: str) -> str:
    return tree_url(row, "tree_action", action)


def labelled(row: AgentSession, label: str) -> str:
    labels = provider_of(row).get_snapshot(row.session_id)["labels_by_entry_id"]
    return next(entry_id for entry_id, info in labels.items() if info["label"] == label)


def leaf_of(row: AgentSession) -> str | None:
    return provider_of(row).get_session(row.session_id)["leaf_entry_id"]
