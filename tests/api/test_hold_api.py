"""Legal holds over HTTP on both providers."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from .conftest import Api, grant, token_client
from .test_errors import error_of


def officer() -> User:
    return grant(User.objects.create_user("officer", is_staff=True), "view_agentsession", "place_hold")


def test_a_hold_is_placed_shown_refuses_hard_deletes_and_is_released(api: Api, users: Any, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "keep me")
    legal = Api(token_client(officer()))
    held = legal.post(f"/api/sessions/{sid}/hold/", {"reason": "Case 42"})
    assert held["legal_hold"]["reason"] == "Case 42" and held["legal_hold"]["placed_by"] == "officer"
    error_of(legal.client.post(f"/api/sessions/{sid}/hold/", {"reason": "again"}, format="json"), 409, "hold_exists")
    janitor = token_client(users.janitor)
    error_of(janitor.delete(f"/api/sessions/{sid}/?hard=true"), 409, "session_on_hold")
    api.say(sid, "appends go on")
    released = legal.call("delete", f"/api/sessions/{sid}/hold/", 200)
    assert released["legal_hold"] is None
    error_of(legal.client.delete(f"/api/sessions/{sid}/hold/"), 409, "not_on_hold")
    assert janitor.delete(f"/api/sessions/{sid}/?hard=true").status_code == 204


def test_holds_need_their_permission_and_a_reason(api: Api, users: Any, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    error_of(api.client.post(f"/api/sessions/{sid}/hold/", {"reason": "mine"}, format="json"), 403)
    error_of(token_client(users.janitor).post(f"/api/sessions/{sid}/hold/", {"reason": "x"}, format="json"), 403)
    legal = token_client(officer())
    error_of(legal.post(f"/api/sessions/{sid}/hold/", {}, format="json"), 400, "invalid_input")
    error_of(legal.post(f"/api/sessions/{sid}/hold/", {"reason": "  "}, format="json"), 400, "invalid_input")
    error_of(legal.post("/api/sessions/nope/hold/", {"reason": "x"}, format="json"), 404)
