"""``POST /api/users/{username}/erase/``: superusers only, on both providers."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from sessiontree.models import AgentSession, AuditRecord
from sessiontree.services import protection

from .conftest import Api, grant, token_client
from .test_errors import error_of


@pytest.fixture
def dpo() -> Api:
    return Api(token_client(User.objects.create_superuser("dpo", password="pw")))


def test_who_may_erase_a_user(api: Api, users: Any, kind: str, dpo: Api) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "alice's words")
    url = "/api/users/alice/erase/"
    error_of(APIClient().post(url, {}, format="json"), 401)
    held_everything = grant(
        User.objects.create_user("officer", is_staff=True),
        "view_agentsession",
        "moderate_session",
        "hard_delete_session",
        "place_hold",
        "erase_entry",
    )
    for who in (users.alice, users.bob, users.viewer, users.moderator, users.janitor, held_everything):
        error_of(token_client(who).post(url, {}, format="json"), 403)
        error_of(token_client(who).post(url, {"dry_run": True}, format="json"), 403)
    assert AgentSession.objects.filter(session_id=sid).exists()
    assert not AuditRecord.objects.filter(operation="erase_user_data").exists()
    dry = dpo.post(url, {"dry_run": True})
    assert dry["dry_run"] is True and [s["session_id"] for s in dry["sessions"]] == [sid]
    assert AgentSession.objects.filter(session_id=sid).exists()
    done = dpo.post(url, {})
    assert done == {**dry, "dry_run": False}
    assert not AgentSession.objects.filter(session_id=sid).exists()
    record = AuditRecord.objects.get(operation="erase_user_data")
    assert record.channel == "api" and record.actor == "dpo" and record.detail["user_id"] == "alice"


def test_refusals(api: Api, users: Any, kind: str, dpo: Api) -> None:
    sid = api.create_session(kind)["session_id"]
    error_of(dpo.client.post("/api/users/nobody-at-all/erase/", {}, format="json"), 404, "user_not_found")
    # Schemathesis sent a name of one control character (\x1f), which the path allows: it names nobody.
    error_of(dpo.client.post("/api/users/%1F/erase/", {}, format="json"), 404, "user_not_found")
    error_of(dpo.client.post("/api/users/%20%09/erase/", {}, format="json"), 404, "user_not_found")
    error_of(dpo.client.post("/api/users/alice/erase/", {"dry_run": "maybe"}, format="json"), 400, "invalid_input")
    error_of(dpo.client.post("/api/users/alice/erase/", {"force": True}, format="json"), 400, "invalid_input")
    protection.place_hold(session_id=sid, reason="case 77", actor="legal", channel="internal")
    error = error_of(dpo.client.post("/api/users/alice/erase/", {}, format="json"), 409, "session_on_hold")
    assert "case 77" in error["message"]
    assert AgentSession.objects.filter(session_id=sid).exists()


def test_a_retry_with_the_same_key_answers_the_same_report(api: Api, users: Any, kind: str, dpo: Api) -> None:
    api.say(api.create_session(kind)["session_id"], "hello")
    first = dpo.client.post("/api/users/alice/erase/", {}, format="json", HTTP_IDEMPOTENCY_KEY="erase-alice-1")
    again = dpo.client.post("/api/users/alice/erase/", {}, format="json", HTTP_IDEMPOTENCY_KEY="erase-alice-1")
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again["Idempotency-Replayed"] == "true"
    assert AuditRecord.objects.filter(operation="erase_user_data").count() == 1


def test_retention_over_http_needs_the_hard_delete_permission(api: Api, users: Any, kind: str, settings) -> None:
    from datetime import timedelta

    from django.utils import timezone

    settings.SESSIONTREE_RETENTION_DAYS = 30
    old = api.create_session(kind)["session_id"]
    api.say(old, "old words")
    AgentSession.objects.filter(session_id=old).update(updated_at=timezone.now() - timedelta(days=31))
    error_of(APIClient().post("/api/retention/", {}, format="json"), 401)
    for who in (users.alice, users.viewer, users.moderator):
        error_of(token_client(who).post("/api/retention/", {"dry_run": True}, format="json"), 403)
    janitor = Api(token_client(users.janitor))
    error_of(janitor.client.post("/api/retention/", {"dry_run": 1}, format="json"), 400, "invalid_input")
    dry = janitor.post("/api/retention/", {"dry_run": True})
    assert dry["deleted"] == [old] and AgentSession.objects.filter(session_id=old).exists()
    done = janitor.client.post("/api/retention/", {}, format="json", HTTP_IDEMPOTENCY_KEY="retention-1")
    assert done.status_code == 200 and done.json()["deleted"] == [old]
    assert not AgentSession.objects.filter(session_id=old).exists()
    again = janitor.client.post("/api/retention/", {}, format="json", HTTP_IDEMPOTENCY_KEY="retention-1")
    assert again.json() == done.json() and again["Idempotency-Replayed"] == "true"
    record = AuditRecord.objects.get(operation="hard_delete_session", session_id=old)
    assert record.channel == "api" and record.actor == "janitor"
