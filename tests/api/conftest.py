"""Fixtures of the REST API tests: users of every kind with tokens, an API
client per user, and sessions on each provider (``file`` and ``mysql``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from sessiontree.models import AuditRecord
from sessiontree.providers.file_provider import clear_index_cache
from tests.contract.conftest import PROVIDER_KINDS


def grant(user: User, *codenames: str) -> User:
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="sessiontree", codename__in=codenames))
    return User.objects.get(pk=user.pk)  # a fresh object: permissions are cached per instance


def token_client(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


class Users:
    """alice and bob: plain users (each owns the sessions whose user_id is
    their name); viewer: staff with the view permission only; moderator:
    staff who may view and moderate; janitor: moderator who may also hard delete."""

    def __init__(self) -> None:
        self.alice = User.objects.create_user("alice", password="pw")
        self.bob = User.objects.create_user("bob", password="pw")
        self.viewer = grant(User.objects.create_user("viewer", password="pw", is_staff=True), "view_agentsession")
        self.moderator = grant(
            User.objects.create_user("moderator", password="pw", is_staff=True), "view_agentsession", "moderate_session"
        )
        self.janitor = grant(
            User.objects.create_user("janitor", password="pw", is_staff=True),
            "view_agentsession",
            "moderate_session",
            "hard_delete_session",
        )


@pytest.fixture
def users(db) -> Users:
    return Users()


@pytest.fixture
def alice(users: Users) -> APIClient:
    return token_client(users.alice)


@pytest.fixture
def bob(users: Users) -> APIClient:
    return token_client(users.bob)


@pytest.fixture(params=PROVIDER_KINDS)
def kind(request, db) -> str:
    clear_index_cache()
    return str(request.param)


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def assistant_message(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "anthropic",
        "model": "claude-test",
        "api": "anthropic-messages",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
        "stopReason": "stop",
        "timestamp": 2,
    }


class Api:
    """Shortcuts over one client: each call asserts the status it expects and returns the JSON."""

    def __init__(self, client: APIClient) -> None:
        self.client = client

    def call(self, method: str, url: str, expected: int, body: Any = None, **extra: Any) -> Any:
        kwargs: dict[str, Any] = dict(extra)
        if body is not None:
            kwargs["data"] = body
            kwargs["format"] = "json"
        response = getattr(self.client, method)(url, **kwargs)
        assert response.status_code == expected, (method, url, response.status_code, response.content[:2000])
        if response.get("Content-Type", "").startswith("application/json") and response.content:
            return response.json()
        return response

    def get(self, url: str, expected: int = 200, **extra: Any) -> Any:
        return self.call("get", url, expected, **extra)

    def post(self, url: str, body: Any = None, expected: int = 200, **extra: Any) -> Any:
        return self.call("post", url, expected, body if body is not None else {}, **extra)

    def patch(self, url: str, body: Any, expected: int = 200) -> Any:
        return self.call("patch", url, expected, body)

    def delete(self, url: str, expected: int = 204) -> Any:
        return self.call("delete", url, expected)

    # --- domain shortcuts ---
    def create_session(self, kind: str, **fields: Any) -> dict[str, Any]:
        return self.post("/api/sessions/", {"provider": kind, **fields}, expected=201)  # type: ignore[no-any-return]

    def append(self, session_id: str, expected: int = 201, **body: Any) -> Any:
        return self.post(f"/api/sessions/{session_id}/entries/", body, expected=expected)

    def say(self, session_id: str, text: str, role: str = "user") -> dict[str, Any]:
        message = user_message(text) if role == "user" else assistant_message(text)
        return self.append(session_id, message=message)  # type: ignore[no-any-return]


@pytest.fixture
def api(alice: APIClient) -> Api:
    return Api(alice)


@pytest.fixture
def api_for(users: Users) -> Callable[[User | None], Api]:
    return lambda user: Api(token_client(user))


def audit_records(session_id: str, operation: str | None = None) -> list[AuditRecord]:
    records = AuditRecord.objects.filter(session_id=session_id)
    if operation is not None:
        records = records.filter(operation=operation)
    return list(records.order_by("id"))


def assert_audited(session_id: str, operation: str, user: User) -> AuditRecord:
    """The last record of ``operation`` on ``session_id`` came from the API, by ``user``."""
    records = audit_records(session_id, operation)
    assert records, f"no {operation} audit record for {session_id}"
    last = records[-1]
    assert (last.channel, last.actor, last.user_id) == ("api", user.get_username(), user.pk)
    return last
