"""A token-authenticated API request: Django's authentication and messages
middleware pass it by, and the session under its URL is read with
the token (one query). Browser requests (the session cookie) keep all of it,
CSRF included (``test_access.test_session_authentication_with_csrf``)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from sessiontree.api.authentication import prefetched_session
from sessiontree.api.middleware import is_token_api_request
from sessiontree.api.permissions import _FIND_SQL
from sessiontree.models import AgentSession

from .conftest import Api, token_client


@pytest.mark.parametrize(
    ("path", "header", "expected"),
    [
        ("/api/sessions/", "Token abc", True),
        ("/api/sessions/", "token abc", True),
        ("/api/sessions/", "Bearer abc", True),
        ("/api/sessions/", "Token", True),  # refused by the token authentication (401), never by the session
        ("/api/sessions/", "Basic YWxpY2U6cHc=", False),
        ("/api/sessions/", "Tokens abc", False),
        ("/api/sessions/", "", False),
        ("/admin/", "Token abc", False),
        ("/apis/", "Token abc", False),
    ],
)
def test_which_requests_are_token_api_requests(path, header, expected):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    assert is_token_api_request(RequestFactory().get(path, **extra)) is expected


def test_a_token_request_passes_the_auth_and_messages_middleware_by(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    client = token_client(users.alice)
    # A browser's session cookie of another user beside the token: the token decides, the session is not read.
    assert client.login(username="bob", password="pw")
    response = client.get(f"/api/sessions/{sid}/")
    assert response.status_code == 200 and response.json()["session_id"] == sid
    assert not hasattr(response.wsgi_request, "_messages")
    assert not response.wsgi_request.session.accessed
    assert response.wsgi_request.user == users.alice  # set by the token authentication
    assert "Cookie" not in response.get("Vary", "") and not response.cookies


def test_a_browser_request_keeps_the_auth_and_messages_middleware(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    browser = APIClient()
    assert browser.login(username="alice", password="pw")
    response = browser.get(f"/api/sessions/{sid}/")
    assert response.status_code == 200 and response.json()["session_id"] == sid
    assert response.wsgi_request.session.get("_auth_user_id") == str(users.alice.pk)
    assert hasattr(response.wsgi_request, "_messages")


def test_the_same_answer_with_the_token_and_with_the_session(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    browser = APIClient()
    assert browser.login(username="alice", password="pw")
    for path in (f"/api/sessions/{sid}/", f"/api/sessions/{sid}/context/", f"/api/sessions/{sid}/entries/"):
        by_token, by_session = token_client(users.alice).get(path), browser.get(path)
        assert by_token.status_code == by_session.status_code == 200
        assert by_token.content == by_session.content
        for header in ("Content-Type", "ETag", "X-Frame-Options", "X-Content-Type-Options"):
            assert by_token.get(header) == by_session.get(header)


def test_the_session_is_read_with_the_token_in_one_query(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    client = token_client(users.alice)
    with CaptureQueriesContext(connection) as captured:
        assert client.get(f"/api/sessions/{sid}/").status_code == 200
    token_queries = [q["sql"] for q in captured.captured_queries if "authtoken_token" in q["sql"]]
    assert len(token_queries) == 1 and AgentSession._meta.db_table in token_queries[0]
    # The access check's own query of the session row did not run.
    alone = _FIND_SQL.partition("%s")[0]
    assert not [q for q in captured.captured_queries if q["sql"].startswith(alone)]


def test_a_revoked_token_or_an_inactive_user_is_refused_at_once_under_a_session(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    client = token_client(users.alice)
    assert client.get(f"/api/sessions/{sid}/").status_code == 200
    User.objects.filter(pk=users.alice.pk).update(is_active=False)
    assert client.get(f"/api/sessions/{sid}/").status_code == 401
    User.objects.filter(pk=users.alice.pk).update(is_active=True)
    assert client.get(f"/api/sessions/{sid}/").status_code == 200
    Token.objects.filter(user=users.alice).delete()
    refused = client.post(f"/api/sessions/{sid}/entries/", {"message": {"role": "user", "content": "x"}}, format="json")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Token")


def test_access_is_decided_as_before_with_the_row_read_with_the_token(api, api_for, kind, users):
    sid = api.create_session(kind)["session_id"]
    missing = "0198c0de-0000-7000-8000-000000000000"
    api_for(users.bob).get(f"/api/sessions/{sid}/", expected=404)  # not bob's: as if it did not exist
    api_for(users.bob).get(f"/api/sessions/{missing}/", expected=404)
    api_for(users.viewer).get(f"/api/sessions/{sid}/")
    api_for(users.viewer).post(f"/api/sessions/{sid}/archive/", expected=403)
    api_for(users.moderator).post(f"/api/sessions/{sid}/archive/")
    bad = api.get(f"/api/sessions/{'x' * 300}/", expected=400)
    assert bad["error"]["code"] == "invalid_session_id"
    # The row moves to another owner after the request's token was read: the next request sees that.
    AgentSession.objects.filter(session_id=sid).update(user_id="bob")
    api.get(f"/api/sessions/{sid}/", expected=404)
    Api(token_client(users.bob)).get(f"/api/sessions/{sid}/")


def test_a_prefetched_row_serves_its_own_session_once():
    request = RequestFactory().get("/api/sessions/a/")
    request._sessiontree_prefetched_session = ("a", (1, "file", "alice"))
    assert prefetched_session(request, "b") == (False, None)  # another id: not used (and dropped)
    request._sessiontree_prefetched_session = ("a", (1, "file", "alice"))
    assert prefetched_session(request, "a") == (True, (1, "file", "alice"))
    assert prefetched_session(request, "a") == (False, None)


def test_pages_under_api_that_are_not_sessions_answer_a_token_request_as_before(users):
    client = token_client(users.alice)
    assert client.get("/api/docs/").status_code == 200  # the Swagger UI: a template, rendered without Django's user
    assert client.get("/api/schema/").status_code == 200
    missing = client.get("/api/no-such-thing/")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert not hasattr(missing.wsgi_request, "_messages")
    assert APIClient(HTTP_AUTHORIZATION="Token wrong").get("/api/sessions/").status_code == 401
    assert APIClient(HTTP_AUTHORIZATION="Token").get("/api/sessions/").status_code == 401
