"""The session resource: list (filters, cursor pagination), create, retrieve,
partial update, archive/restore, soft and hard delete, on every provider."""

from __future__ import annotations

import datetime as dt
from urllib.parse import parse_qs, urlsplit

import pytest

from sessiontree.models import Agent, AgentSession
from sessiontree.providers.factory import get_provider

from .conftest import Api, assert_audited, token_client


def session_ids(page: dict) -> list[str]:
    return [session["session_id"] for session in page["results"]]


def test_create_uses_the_explicit_provider_and_makes_the_caller_the_owner(api, kind, users):
    created = api.create_session(kind, title="first", cwd="/srv/project", metadata={"team": "billing"})
    assert created["provider"] == kind
    assert created["user_id"] == "alice"
    assert (created["title"], created["cwd"], created["metadata"]) == ("first", "/srv/project", {"team": "billing"})
    assert created["leaf_entry_id"] is None and created["entry_count"] == 0 and created["status"] == "active"
    assert "session_file" not in created  # a server path is not the client's business
    assert AgentSession.objects.get(session_id=created["session_id"]).provider == kind
    assert_audited(created["session_id"], "create_session", users.alice)


def test_create_takes_the_provider_from_the_agent_else_the_default(api, kind, settings, users):
    agent = Agent.objects.create(name="coder", session_provider=kind)
    from_agent = api.post("/api/sessions/", {"agent": agent.pk}, expected=201)
    assert (from_agent["provider"], from_agent["agent_id"]) == (kind, agent.pk)
    settings.SESSIONTREE_DEFAULT_PROVIDER = kind
    assert api.post("/api/sessions/", {}, expected=201)["provider"] == kind
    other = "mysql" if kind == "file" else "file"
    assert api.post("/api/sessions/", {"agent": agent.pk, "provider": other}, expected=201)["provider"] == other


def test_create_with_a_chosen_id_and_refusals(api, kind, users):
    api.create_session(kind, session_id="my-session.1")
    assert api.get("/api/sessions/my-session.1/")["session_id"] == "my-session.1"
    error = api.post("/api/sessions/", {"provider": kind, "session_id": "my-session.1"}, expected=409)["error"]
    assert error["code"] == "session_id_unavailable"
    error = api.post("/api/sessions/", {"session_id": "../etc"}, expected=400)["error"]
    assert error["code"] == "invalid_input" and "session_id" in error["details"]["fields"]
    # An agent that does not exist is a missing resource (a well-formed id: the schema's), not bad input.
    error = api.post("/api/sessions/", {"agent": 987654}, expected=404)["error"]
    assert error["code"] == "agent_not_found" and "987654" in error["message"]
    error = api.post("/api/sessions/", {"provider": "postgres"}, expected=400)["error"]
    assert "provider" in error["details"]["fields"]


def test_retrieve_has_counts_lineage_and_children(api, kind, users):
    session = api.create_session(kind, title="source")
    sid = session["session_id"]
    first = api.say(sid, "hello")
    api.say(sid, "hi", role="assistant")
    api.say(sid, "again")
    fork = api.post(f"/api/sessions/{sid}/fork/", {"entry_id": first["id"], "position": "at"}, expected=201)
    detail = api.get(f"/api/sessions/{sid}/")
    assert detail["entry_count"] == 3 and detail["branch_count"] == 1
    assert detail["root_entry_id"] == first["id"]
    assert detail["children"] == [fork["session_id"]]
    assert detail["parent_session_id"] is None and detail["in_flight_entry_id"] is None
    child = api.get(f"/api/sessions/{fork['session_id']}/")
    assert child["parent_session_id"] == sid and child["children"] == [] and child["entry_count"] == 1


def test_partial_update_changes_title_and_metadata_only(api, kind, users):
    sid = api.create_session(kind, title="old")["session_id"]
    updated = api.patch(f"/api/sessions/{sid}/", {"title": "new", "metadata": {"a": [1, 2]}})
    assert (updated["title"], updated["metadata"]) == ("new", {"a": [1, 2]})
    assert_audited(sid, "update_session", users.alice)
    assert api.patch(f"/api/sessions/{sid}/", {})["title"] == "new"
    error = api.patch(f"/api/sessions/{sid}/", {"status": "archived"}, expected=400)["error"]
    assert error["details"]["fields"] == {"status": ["Unknown field."]}
    api.patch(f"/api/sessions/{sid}/", {"metadata": [1]}, expected=400)
    api.patch(f"/api/sessions/{sid}/", {"title": 5}, expected=400)
    api.call("put", f"/api/sessions/{sid}/", 405, {"title": "x"})
    assert api.get(f"/api/sessions/{sid}/")["title"] == "new"


def test_archive_restore_and_closed_sessions_refuse_writes(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    assert api.post(f"/api/sessions/{sid}/archive/")["status"] == "archived"
    assert_audited(sid, "archive_session", users.alice)
    error = api.append(sid, message={"role": "user", "content": "x"}, expected=409)["error"]
    assert error["code"] == "session_closed"
    assert api.get(f"/api/sessions/{sid}/context/")["messages"]  # still readable
    assert api.post(f"/api/sessions/{sid}/restore/")["status"] == "active"
    assert_audited(sid, "restore_session", users.alice)
    api.say(sid, "back")


def test_soft_delete_hides_from_the_default_list_and_can_be_restored(api, kind, users):
    keep = api.create_session(kind)["session_id"]
    gone = api.create_session(kind)["session_id"]
    api.delete(f"/api/sessions/{gone}/")
    assert_audited(gone, "delete_session", users.alice)
    assert session_ids(api.get("/api/sessions/")) == [keep]
    assert session_ids(api.get("/api/sessions/?status=deleted")) == [gone]
    assert api.get(f"/api/sessions/{gone}/")["status"] == "deleted"
    api.post(f"/api/sessions/{gone}/restore/")
    assert set(session_ids(api.get("/api/sessions/"))) == {keep, gone}


def test_hard_delete_needs_its_permission_even_for_the_owner(api, api_for, kind, users):
    sid = api.create_session(kind, user_id="alice")["session_id"]
    api.say(sid, "hello")
    error = api.call("delete", f"/api/sessions/{sid}/?hard=true", 403)["error"]
    assert error["code"] == "permission_denied"
    assert AgentSession.objects.filter(session_id=sid).exists()
    api.call("delete", f"/api/sessions/{sid}/?hard=maybe", 400)
    api_for(users.janitor).delete(f"/api/sessions/{sid}/?hard=true")
    assert not AgentSession.objects.filter(session_id=sid).exists()
    assert_audited(sid, "hard_delete_session", users.janitor)
    api.get(f"/api/sessions/{sid}/", expected=404)


def test_list_filters(api, api_for, kind, users):
    agent = Agent.objects.create(name="coder")
    a = api.create_session(kind, title="Fix the billing bug", agent=agent.pk)["session_id"]
    b = api.create_session(kind, title="Write docs")["session_id"]
    other = "mysql" if kind == "file" else "file"
    c = api.create_session(other, title="billing report")["session_id"]
    api.post(f"/api/sessions/{b}/archive/")
    assert set(session_ids(api.get(f"/api/sessions/?agent={agent.pk}"))) == {a}
    assert set(session_ids(api.get(f"/api/sessions/?provider={kind}"))) == {a, b}
    assert set(session_ids(api.get("/api/sessions/?status=archived"))) == {b}
    assert set(session_ids(api.get("/api/sessions/?search=BILLING"))) == {a, c}
    assert set(session_ids(api.get("/api/sessions/?user_id=alice"))) == {a, b, c}
    assert session_ids(api.get("/api/sessions/?user_id=bob")) == []
    AgentSession.objects.filter(session_id=a).update(created_at=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    AgentSession.objects.filter(session_id=c).update(updated_at=dt.datetime(2024, 6, 1, tzinfo=dt.UTC))
    assert set(session_ids(api.get("/api/sessions/?created_before=2025-01-01T00:00:00Z"))) == {a}
    assert set(session_ids(api.get("/api/sessions/?created_after=2025-01-01T00:00:00Z"))) == {b, c}
    assert set(session_ids(api.get("/api/sessions/?updated_before=2025-01-01T00:00:00Z"))) == {c}
    assert c not in session_ids(api.get("/api/sessions/?updated_after=2025-01-01T00:00:00Z"))
    for bad in ("agent=x", "agent=99999999999999999999999", "status=gone", "provider=s3", "created_after=yesterday"):
        error = api.get(f"/api/sessions/?{bad}", expected=400)["error"]
        assert error["code"] == "invalid_input" and bad.split("=")[0] in error["details"]["fields"]


def test_list_is_cursor_paginated_newest_first_and_stable_under_creation(api, kind, users):
    created = [api.create_session(kind, title=f"s{i}")["session_id"] for i in range(5)]
    first = api.get("/api/sessions/?page_size=2")
    assert session_ids(first) == created[::-1][:2]
    assert first["previous"] is None
    api.create_session(kind, title="newer")  # must not shift the next page
    second = api.get(first["next"])
    assert session_ids(second) == created[::-1][2:4]
    third = api.get(second["next"])
    assert session_ids(third) == created[::-1][4:] and third["next"] is None
    assert session_ids(api.get(second["previous"])) == created[::-1][:2]
    cursor = parse_qs(urlsplit(first["next"]).query)["cursor"][0]
    assert api.get(f"/api/sessions/?cursor={cursor}x", expected=400)["error"]["code"] == "invalid_input"
    assert api.get("/api/sessions/?cursor=%%%", expected=400)["error"]["details"]["fields"].keys() == {"cursor"}


@pytest.mark.parametrize("position", ["not-a-date", "2026-13-01T00:00:00"])
def test_a_forged_cursor_position_is_bad_input(api, users, position):
    import base64

    cursor = base64.b64encode(f"p={position}".encode()).decode()
    assert api.get(f"/api/sessions/?cursor={cursor}", expected=400)["error"]["code"] == "invalid_input"


def test_the_provider_of_a_created_session_serves_it(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    entry = api.say(sid, "stored where the provider says")
    assert get_provider(kind).get_entry(sid, entry["id"])["message"]["content"][0]["text"].startswith("stored")


def test_creating_for_another_user_needs_moderation(api, api_for, kind, users):
    error = api.post("/api/sessions/", {"provider": kind, "user_id": "bob"}, expected=403)["error"]
    assert error["code"] == "permission_denied"
    created = api_for(users.moderator).post("/api/sessions/", {"provider": kind, "user_id": "bob"}, expected=201)
    assert created["user_id"] == "bob"
    assert created["session_id"] in session_ids(token_api(users.bob).get("/api/sessions/"))


def token_api(user) -> Api:
    return Api(token_client(user))
