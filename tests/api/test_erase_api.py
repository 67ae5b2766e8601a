"""``POST /api/sessions/{id}/entries/{entry_id}/erase/`` on both providers:
the result, dry runs, errors, idempotency keys, and who may erase."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from sessiontree.core.redaction import ERASED
from sessiontree.models import AuditRecord

from .conftest import Api, assert_audited, grant, token_client
from .test_errors import error_of

CARD = "4111 1111 1111 1111"


@pytest.fixture
def chat(api: Api, kind: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    sid = api.create_session(kind)["session_id"]
    secret = api.say(sid, f"my card is {CARD}")
    answer = api.say(sid, "noted", role="assistant")
    return sid, secret, answer


def url(sid: str, entry_id: str) -> str:
    return f"/api/sessions/{sid}/entries/{entry_id}/erase/"


@pytest.fixture
def eraser(users: Any) -> User:
    """Staff who see every session and may erase, without moderate_session."""
    return grant(User.objects.create_user("eraser", is_staff=True), "view_agentsession", "erase_entry")


def test_an_erase_answers_every_place_it_changed(users: Any, eraser: User, chat: Any) -> None:
    sid, secret, answer = chat
    alice = Api(token_client(users.alice))
    fork = alice.post(f"/api/sessions/{sid}/fork/", {"entry_id": answer["id"], "position": "at"}, expected=201)
    client = Api(token_client(eraser))
    dry = client.post(url(sid, secret["id"]), {"reason": "PII: a card", "dry_run": True})
    assert dry == {
        "changed": [
            {"session_id": sid, "entry_id": secret["id"], "kind": "entry"},
            {"session_id": fork["session_id"], "entry_id": secret["id"], "kind": "copy"},
        ],
        "outside": [],
    }
    assert CARD in str(alice.get(f"/api/sessions/{sid}/entries/{secret['id']}/"))
    done = client.post(url(sid, secret["id"]), {"reason": "PII: a card"})
    assert done == dry
    entry = alice.get(f"/api/sessions/{sid}/entries/{secret['id']}/")
    assert entry["message"]["content"] == [{"type": "text", "text": ERASED}]
    assert entry["id"] == secret["id"] and entry["parentId"] is None
    context = alice.get(f"/api/sessions/{sid}/context/")
    assert [m["role"] for m in context["messages"]] == ["user", "assistant"]
    record = assert_audited(sid, "erase_entry", eraser)
    assert record.detail["reason"] == "PII: a card"
    only_here = client.post(url(fork["session_id"], answer["id"]), {"reason": "test", "scope": "entry"})
    assert only_here["changed"] == [{"session_id": fork["session_id"], "entry_id": answer["id"], "kind": "entry"}]


def test_bad_requests_are_refused_and_erase_nothing(eraser: User, chat: Any) -> None:
    sid, secret, _answer = chat
    client = token_client(eraser)
    for body, code in [
        ({}, "invalid_input"),
        ({"reason": ""}, "invalid_input"),
        ({"reason": "   "}, "invalid_input"),
        ({"reason": "x" * 201}, "invalid_input"),
        ({"reason": "ok", "scope": "everywhere"}, "invalid_input"),
        ({"reason": "ok", "dry_run": "perhaps"}, "invalid_input"),
        ({"reason": "ok", "dry_run": "true"}, "invalid_input"),  # a JSON boolean, not a string that reads like one
        ({"reason": "ok", "dry_run": 1}, "invalid_input"),
        ({"reason": "ok", "extra": 1}, "invalid_input"),
    ]:
        error_of(client.post(url(sid, secret["id"]), body, format="json"), 400, code)
    error_of(client.post(url(sid, "nothere"), {"reason": "ok"}, format="json"), 404, "entry_not_found")
    error_of(client.post(url("nosession", secret["id"]), {"reason": "ok"}, format="json"), 404, "session_not_found")
    assert not AuditRecord.objects.filter(operation="erase_entry").exists()
    assert CARD in str(Api(client).get(f"/api/sessions/{sid}/entries/{secret['id']}/"))


def test_a_held_session_is_a_conflict(users: Any, eraser: User, chat: Any) -> None:
    sid, secret, _answer = chat
    holder = grant(User.objects.create_user("holder", is_staff=True), "view_agentsession", "place_hold")
    Api(token_client(holder)).post(f"/api/sessions/{sid}/hold/", {"reason": "litigation"})
    error_of(
        token_client(eraser).post(url(sid, secret["id"]), {"reason": "pii"}, format="json"), 409, "session_on_hold"
    )


def test_if_match_and_idempotency_keys(eraser: User, chat: Any) -> None:
    sid, secret, _answer = chat
    client = token_client(eraser)
    error_of(
        client.post(url(sid, secret["id"]), {"reason": "pii"}, format="json", HTTP_IF_MATCH='"1-nope"'),
        412,
        "precondition_failed",
    )
    tag = client.get(f"/api/sessions/{sid}/")["ETag"]
    first = client.post(
        url(sid, secret["id"]), {"reason": "pii"}, format="json", HTTP_IF_MATCH=tag, HTTP_IDEMPOTENCY_KEY="e-1"
    )
    assert first.status_code == 200 and "Idempotency-Replayed" not in first
    again = client.post(url(sid, secret["id"]), {"reason": "pii"}, format="json", HTTP_IDEMPOTENCY_KEY="e-1")
    assert again.status_code == 200 and again["Idempotency-Replayed"] == "true" and again.json() == first.json()
    reused = client.post(url(sid, secret["id"]), {"reason": "other"}, format="json", HTTP_IDEMPOTENCY_KEY="e-1")
    error_of(reused, 422, "idempotency_key_reused")
    assert AuditRecord.objects.filter(operation="erase_entry").count() == 1


def test_the_erase_permission_matrix(users: Any, eraser: User, chat: Any) -> None:
    sid, secret, _answer = chat
    body = {"reason": "pii", "dry_run": True}
    moderator = grant(
        User.objects.create_user("mod", is_staff=True),
        "view_agentsession",
        "moderate_session",
        "flag_entry",
        "resolve_flag",
        "hard_delete_session",
        "place_hold",
    )
    blind_eraser = grant(User.objects.create_user("blind", is_staff=False), "erase_entry")  # sees no one's sessions
    superuser = User.objects.create_superuser("root", password="pw")

    def status_of(user: User | None) -> int:
        return token_client(user).post(url(sid, secret["id"]), body, format="json").status_code

    assert status_of(None) == 401  # anonymous
    assert status_of(users.alice) == 403  # the owner: erasing reaches every copy, it is not theirs alone
    assert status_of(users.bob) == 404  # cannot see it: as if it did not exist
    assert status_of(moderator) == 403  # every moderation permission but erase_entry
    assert status_of(blind_eraser) == 404  # may erase, but not see this session
    assert status_of(eraser) == 200
    assert status_of(superuser) == 200
    owner_eraser = grant(users.alice, "erase_entry")
    assert status_of(owner_eraser) == 200
    assert not AuditRecord.objects.filter(operation="erase_entry").exists()  # dry runs only
