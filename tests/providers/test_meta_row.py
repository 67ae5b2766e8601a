"""The meta row read by one prebuilt statement (``meta.MetaRow``) gives the
session dict the ORM gives, field for field, on either database."""

from __future__ import annotations

import pytest

from sessiontree.core.errors import SessionNotFound
from sessiontree.models import Agent, AgentSession
from sessiontree.providers import meta
from tests.contract.conftest import PROVIDER_KINDS, make_provider


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


def test_the_raw_row_and_the_orm_row_make_the_same_session(provider):
    agent = Agent.objects.create(name="a")
    metadata = {"big": 2**70, "text": "Grüße ✓", "nested": {"list": [1, 2.5, None, True]}}
    provider.create_session(
        session_id="s1", cwd="/work", agent_id=agent.pk, user_id="alice", title="T", metadata=metadata
    )
    provider.append_message("s1", {"role": "user", "content": "hello"})
    raw = meta.read_row("s1", provider=provider.kind).session()
    orm = meta.to_session_dict(AgentSession.objects.get(session_id="s1"))
    assert raw == orm
    assert raw["metadata"]["big"] == 2**70
    assert raw["created_at"].endswith("Z") and raw["updated_at"] >= raw["created_at"]


def test_an_empty_row_reads_as_the_orm_does(provider):
    provider.create_session(session_id="s1")
    assert meta.read_row("s1").session() == meta.to_session_dict(AgentSession.objects.get(session_id="s1"))


def test_unknown_and_foreign_sessions(provider):
    provider.create_session(session_id="s1")
    with pytest.raises(SessionNotFound, match="Session nope not found"):
        meta.read_row("nope")
    other = "mysql" if provider.kind == "file" else "file"
    with pytest.raises(SessionNotFound, match=f"not found in the {other} provider"):
        meta.read_row("s1", provider=other)
    assert meta.provider_kind_of("s1") == provider.kind
