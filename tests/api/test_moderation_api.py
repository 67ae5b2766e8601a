"""Moderation over HTTP on both providers: flags, the queue, hide and unhide,
and who may do which."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from sessiontree.models import AuditRecord

from .conftest import Api, grant, token_client, user_message
from .test_errors import error_of


@pytest.fixture
def staff(users: Any) -> dict[str, User]:
    return {
        "flagger": grant(User.objects.create_user("flagger", is_staff=True), "view_agentsession", "flag_entry"),
        "resolver": grant(User.objects.create_user("resolver", is_staff=True), "view_agentsession", "resolve_flag"),
    }


@pytest.fixture
def chat(api: Api, kind: str) -> tuple[str, dict[str, Any]]:
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "my card is 4111 1111 1111 1111")
    api.say(sid, "ok", role="assistant")
    return sid, first


def test_an_owner_reports_an_entry_and_nothing_in_the_tree_moves(api: Api, chat: Any) -> None:
    sid, first = chat
    before = api.get(f"/api/sessions/{sid}/")
    context = api.get(f"/api/sessions/{sid}/context/")
    flag = api.post(f"/api/sessions/{sid}/entries/{first['id']}/flags/", {"category": "pii", "note": "card"}, 201)
    assert (flag["source"], flag["status"], flag["opened_by"]) == ("user_report", "open", "alice")
    after = api.get(f"/api/sessions/{sid}/")
    assert (after["leaf_entry_id"], after["entry_count"]) == (before["leaf_entry_id"], before["entry_count"])
    assert api.get(f"/api/sessions/{sid}/context/") == context
    # A live agent holding the old leaf still appends.
    api.append(sid, message=user_message("next"), expected_leaf_id=before["leaf_entry_id"])
    assert api.get("/api/flags/")["results"] == [flag]
    assert AuditRecord.objects.filter(operation="flag_entry", channel="api", actor="alice").count() == 1


def test_the_flag_permission_matrix(users: Any, staff: dict[str, User], chat: Any) -> None:
    sid, first = chat
    url = f"/api/sessions/{sid}/entries/{first['id']}/flags/"
    body = {"category": "pii"}

    def status_of(user: User | None, data: dict[str, Any]) -> int:
        return token_client(user).post(url, data, format="json").status_code

    assert status_of(None, body) == 401
    assert status_of(users.bob, body) == 404  # bob cannot see alice's session
    assert status_of(users.alice, {**body, "source": "operator"}) == 403  # operators need flag_entry
    assert status_of(users.viewer, body) == 201  # sees it: may report it
    assert status_of(staff["flagger"], {**body, "source": "operator"}) == 201
    flags = token_client(staff["flagger"]).get("/api/flags/").json()["results"]
    assert [f["source"] for f in flags] == ["user_report", "operator"]
    flag_id = flags[0]["id"]
    resolve = f"/api/flags/{flag_id}/resolve/"
    for user, expected in ((users.alice, 403), (staff["flagger"], 403), (users.moderator, 403)):
        assert token_client(user).post(resolve, {"status": "dismissed"}, format="json").status_code == expected
    resolver = token_client(staff["resolver"])
    assert resolver.post(resolve, {"status": "dismissed", "note": "fine"}, format="json").status_code == 200
    error_of(resolver.post(resolve, {"status": "actioned"}, format="json"), 409, "flag_already_resolved")
    error_of(resolver.post("/api/flags/999999/resolve/", {"status": "actioned"}, format="json"), 404, "flag_not_found")
    error_of(resolver.post(resolve, {"status": "maybe"}, format="json"), 400, "invalid_input")


def test_owners_see_only_their_sessions_flags(users: Any, staff: dict[str, User], kind: str) -> None:
    alice, bob = Api(token_client(users.alice)), Api(token_client(users.bob))
    a_sid = alice.create_session(kind)["session_id"]
    b_sid = bob.create_session(kind)["session_id"]
    a_entry = alice.say(a_sid, "hello")
    b_entry = bob.say(b_sid, "hi")
    alice.post(f"/api/sessions/{a_sid}/entries/{a_entry['id']}/flags/", {"category": "spam"}, 201)
    bob.post(f"/api/sessions/{b_sid}/entries/{b_entry['id']}/flags/", {"category": "hate"}, 201)
    assert [f["session_id"] for f in alice.get("/api/flags/")["results"]] == [a_sid]
    queue = Api(token_client(staff["resolver"])).get("/api/flags/?status=open")
    assert sorted(f["session_id"] for f in queue["results"]) == sorted([a_sid, b_sid])
    assert [
        f["category"] for f in Api(token_client(staff["resolver"])).get("/api/flags/?category=hate")["results"]
    ] == ["hate"]


def test_bad_flags_are_json_errors(api: Api, chat: Any) -> None:
    sid, first = chat
    url = f"/api/sessions/{sid}/entries/{first['id']}/flags/"
    error_of(api.client.post(url, {"category": "rude"}, format="json"), 400, "invalid_input")
    error_of(api.client.post(url, {"category": "pii", "extra": 1}, format="json"), 400, "invalid_input")
    error_of(api.client.post(f"/api/sessions/{sid}/entries/nothere1/flags/", {"category": "pii"}, format="json"), 404)
    assert api.get("/api/flags/")["results"] == []


def test_hide_and_unhide_over_http(api: Api, users: Any, chat: Any) -> None:
    sid, first = chat
    leaf = api.get(f"/api/sessions/{sid}/")["leaf_entry_id"]
    error_of(
        token_client(users.viewer).post(f"/api/sessions/{sid}/entries/{first['id']}/hide/", {}, format="json"), 403
    )
    edit = api.post(f"/api/sessions/{sid}/entries/{first['id']}/hide/", {"expected_leaf_id": leaf}, 201)
    assert edit["type"] == "context_edit" and edit["replacement"] == {"content": "[removed by a moderator]"}
    messages = api.get(f"/api/sessions/{sid}/context/")["messages"]
    assert messages[0]["content"] == "[removed by a moderator]"
    error_of(
        api.client.post(f"/api/sessions/{sid}/entries/{first['id']}/hide/", {"expected_leaf_id": leaf}, format="json"),
        409,
        "leaf_conflict",
    )
    api.post(f"/api/sessions/{sid}/entries/{first['id']}/unhide/", {}, 201)
    assert api.get(f"/api/sessions/{sid}/context/")["messages"][0]["content"][0]["text"].startswith("my card")
    error_of(
        api.client.post(f"/api/sessions/{sid}/entries/{first['id']}/unhide/", {}, format="json"), 409, "not_hidden"
    )
