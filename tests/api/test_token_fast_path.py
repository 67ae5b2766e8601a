"""A token-authenticated API request: the session under its URL is read with
the token (one query)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from sessiontree.api.authentication import prefetched_session
from sessiontree.api.permissions import _FIND_SQL
from sessiontree.models import AgentSession

from .conftest import Api, token_client


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
