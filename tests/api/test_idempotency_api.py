"""The Idempotency-Key header: a retried POST is answered once, on each provider."""

from __future__ import annotations

import pytest

from sessiontree.models import AuditRecord, IdempotencyRecord

from .conftest import Api, user_message


def post(api: Api, url: str, body: dict, key: str | None, expected: int):
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    response = api.client.post(url, body, format="json", **extra)
    assert response.status_code == expected, response.content[:2000]
    return response


def test_a_retried_create_and_append_are_stored_once(api: Api, kind):
    created = post(api, "/api/sessions/", {"provider": kind}, "create-1", 201)
    assert "Idempotency-Replayed" not in created
    again = post(api, "/api/sessions/", {"provider": kind}, "create-1", 201)
    assert again["Idempotency-Replayed"] == "true"
    assert again.json()["session_id"] == created.json()["session_id"]
    sid = created.json()["session_id"]
    assert len(api.get("/api/sessions/")["results"]) == 1

    url = f"/api/sessions/{sid}/entries/"
    first = post(api, url, {"message": user_message("hi")}, "append-1", 201)
    second = post(api, url, {"message": user_message("hi")}, "append-1", 201)
    assert second["Idempotency-Replayed"] == "true" and second.json() == first.json()
    assert len(api.get(url)["results"]) == 1
    assert AuditRecord.objects.filter(session_id=sid, operation="append_entry").count() == 1
    # Without a key, the same body is a second message (keys are opt-in).
    post(api, url, {"message": user_message("hi")}, None, 201)
    assert len(api.get(url)["results"]) == 2


def test_a_key_reused_with_another_body_is_422_and_writes_nothing(api: Api, kind):
    sid = api.create_session(kind)["session_id"]
    url = f"/api/sessions/{sid}/entries/"
    post(api, url, {"message": user_message("one")}, "k", 201)
    refused = post(api, url, {"message": user_message("two")}, "k", 422)
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert [e["message"]["content"][0]["text"] for e in api.get(url)["results"]] == ["one"]


@pytest.mark.parametrize("key", ["", "has space", "é", "x" * 256])
def test_an_invalid_key_is_400_and_writes_nothing(api: Api, key):
    response = post(api, "/api/sessions/", {"provider": "file"}, key, 400)
    assert "Idempotency-Key" in response.content.decode()
    assert len(api.get("/api/sessions/")["results"]) == 0
    assert not IdempotencyRecord.objects.exists()


def test_keys_belong_to_their_user(users, api_for, kind):
    alice, bob = api_for(users.alice), api_for(users.bob)
    a = post(alice, "/api/sessions/", {"provider": kind}, "same", 201).json()
    b = post(bob, "/api/sessions/", {"provider": kind}, "same", 201)
    assert "Idempotency-Replayed" not in b
    assert b.json()["session_id"] != a["session_id"]


def test_a_replayed_error_is_not_a_replay(api: Api, kind):
    """A write that failed took no key: the retry runs again (and may succeed)."""
    sid = api.create_session(kind)["session_id"]
    url = f"/api/sessions/{sid}/entries/"
    post(api, url, {"message": user_message("a"), "expected_leaf_id": "deadbeef"}, "k-fail", 409)
    assert not IdempotencyRecord.objects.filter(key="k-fail").exists()
    ok = post(api, url, {"message": user_message("a")}, "k-fail2", 201)
    assert "Idempotency-Replayed" not in ok


def test_moderation_writes_take_keys(users, api_for, kind):
    owner = api_for(users.alice)
    sid = owner.create_session(kind, user_id="alice")["session_id"]
    entry = owner.say(sid, "hello")["id"]
    moderator = api_for(users.moderator)
    url = f"/api/sessions/{sid}/entries/{entry}/flags/"
    body = {"category": "harassment", "note": "n"}
    first = post(moderator, url, body, "flag-1", 201)
    second = post(moderator, url, body, "flag-1", 201)
    assert second["Idempotency-Replayed"] == "true" and second.json()["id"] == first.json()["id"]
    assert len(moderator.get("/api/flags/")["results"]) == 1
