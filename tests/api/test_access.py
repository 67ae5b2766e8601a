"""Who may do what: anonymous callers, owners, other users, view-only staff,
moderators; token and session authentication."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from sessiontree.models import AgentSession, AuditRecord

from .conftest import Api, assistant_message, grant, token_client, user_message


def reads(sid: str, entry_id: str) -> list[tuple[str, str]]:
    base = f"/api/sessions/{sid}"
    return [
        ("get", f"{base}/"),
        ("get", f"{base}/entries/"),
        ("get", f"{base}/entries/{entry_id}/"),
        ("get", f"{base}/path/"),
        ("get", f"{base}/context/"),
        ("get", f"{base}/tree/"),
        ("get", f"{base}/snapshot/"),
        ("get", f"{base}/export/"),
    ]


def writes(sid: str, entry_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Every write, each with a body it would accept, in an order that works from
    a session whose leaf is ``entry_id`` (a user message with a parent)."""
    base = f"/api/sessions/{sid}"
    return [
        ("patch", f"{base}/", {"title": "changed"}),
        ("post", f"{base}/entries/", {"message": user_message("more")}),
        ("post", f"{base}/labels/", {"target_id": entry_id, "label": "mark"}),
        ("post", f"{base}/navigate/", {"target_id": entry_id}),
        ("post", f"{base}/switch-leaf/", {"entry_id": entry_id}),
        ("post", f"{base}/reset-leaf/", {}),
        ("post", f"{base}/fork/", {"entry_id": entry_id}),
        ("post", f"{base}/compact/", {}),
        ("post", f"{base}/in-flight/", {"entry": {"type": "message", "message": assistant_message("")}}),
        ("patch", f"{base}/entries/{entry_id}/", {"complete": True}),
        ("post", f"{base}/archive/", {}),
        ("post", f"{base}/restore/", {}),
        ("delete", f"{base}/", {}),
    ]


def alice_session(api: Api, kind: str) -> tuple[str, str]:
    sid = api.create_session(kind, title="alice's")["session_id"]
    api.say(sid, "hello")
    api.say(sid, "hi", role="assistant")
    return sid, api.say(sid, "how are you")["id"]


def send(client: APIClient, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    if method in ("get", "delete"):
        return getattr(client, method)(url)
    return getattr(client, method)(url, body or {}, format="json")


def unchanged(sid: str) -> tuple[Any, ...]:
    row = AgentSession.objects.get(session_id=sid)
    return row.title, row.status, row.leaf_entry_id, row.entry_count, AuditRecord.objects.filter(session_id=sid).count()


def test_anonymous_gets_401_everywhere(api, kind, users):
    sid, entry_id = alice_session(api, kind)
    anonymous = APIClient()
    calls = [("get", "/api/sessions/"), ("post", "/api/sessions/"), *reads(sid, entry_id)]
    calls += [(method, url) for method, url, _ in writes(sid, entry_id)]
    for method, url in calls:
        response = send(anonymous, method, url)
        assert response.status_code == 401, (method, url)
        assert response.json()["error"]["code"] == "not_authenticated"
        assert response["WWW-Authenticate"] == "Token"
    bad_token = APIClient()
    bad_token.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = bad_token.get("/api/sessions/")
    assert (response.status_code, response.json()["error"]["code"]) == (401, "authentication_failed")


def test_another_user_can_neither_read_nor_write_nor_learn_the_id(api, bob, kind, users):
    sid, entry_id = alice_session(api, kind)
    before = unchanged(sid)
    assert Api(bob).get("/api/sessions/")["results"] == []
    assert Api(bob).get("/api/sessions/?user_id=alice")["results"] == []
    missing = Api(bob).get("/api/sessions/no-such-session/", expected=404)["error"]
    for method, url in reads(sid, entry_id):
        response = send(bob, method, url)
        assert response.status_code == 404, (method, url)
    for method, url, body in writes(sid, entry_id):
        response = send(bob, method, url, body)
        assert response.status_code == 404, (method, url)
        error = response.json()["error"]
        assert error["code"] == missing["code"] == "session_not_found"
    assert unchanged(sid) == before


def test_view_only_staff_reads_everything_and_changes_nothing_of_others(api, api_for, kind, users):
    sid, entry_id = alice_session(api, kind)
    viewer = api_for(users.viewer)
    assert sid in [s["session_id"] for s in viewer.get("/api/sessions/")["results"]]
    for method, url in reads(sid, entry_id):
        assert send(viewer.client, method, url).status_code == 200, (method, url)
    before = unchanged(sid)
    for method, url, body in writes(sid, entry_id):
        response = send(viewer.client, method, url, body)
        assert response.status_code == 403, (method, url)
        assert response.json()["error"]["code"] == "permission_denied"
    assert viewer.call("delete", f"/api/sessions/{sid}/?hard=true", 403)
    assert unchanged(sid) == before
    # Their own sessions they change like anyone.
    own = viewer.create_session(kind)["session_id"]
    viewer.say(own, "mine")
    viewer.post(f"/api/sessions/{own}/archive/")


def test_staff_without_the_view_permission_sees_only_their_own(api, api_for, kind, users):
    sid, _ = alice_session(api, kind)
    staff = api_for(User.objects.create_user("plainstaff", password="pw", is_staff=True))
    assert staff.get("/api/sessions/")["results"] == []
    staff.get(f"/api/sessions/{sid}/", expected=404)


def test_moderator_may_do_every_write_on_another_users_session(api, api_for, kind, users):
    sid, entry_id = alice_session(api, kind)
    moderator = api_for(users.moderator)
    expected_status = {"fork": 201, "labels": 201, "entries/": 201, "in-flight": 201}
    in_flight_id = None
    for method, url, body in writes(sid, entry_id):
        if url.endswith(f"/entries/{entry_id}/") and in_flight_id:
            url = url.replace(entry_id, in_flight_id)
        status = next((code for key, code in expected_status.items() if url.endswith((f"{key}/", key))), 200)
        status = 204 if method == "delete" else status
        response = send(moderator.client, method, url, body)
        assert response.status_code == status, (method, url, response.content[:300])
        if url.endswith("in-flight/"):
            in_flight_id = response.json()["id"]
    records = AuditRecord.objects.filter(session_id=sid, channel="api", actor="moderator")
    assert {
        "update_session",
        "append_entry",
        "set_label",
        "switch_leaf",
        "navigate_tree",
        "reset_leaf",
        "fork_session",
    } <= set(records.values_list("operation", flat=True))
    assert AgentSession.objects.get(session_id=sid).status == "deleted"
    moderator.call("delete", f"/api/sessions/{sid}/?hard=true", 403)  # hard delete is a permission of its own


def test_superuser_sees_and_changes_everything(api, api_for, kind, users):
    sid, _ = alice_session(api, kind)
    root = api_for(User.objects.create_superuser("root", password="pw"))
    assert sid in [s["session_id"] for s in root.get("/api/sessions/")["results"]]
    root.post(f"/api/sessions/{sid}/archive/")
    root.delete(f"/api/sessions/{sid}/?hard=true")


def test_session_authentication_with_csrf(api, kind, users):
    sid, _ = alice_session(api, kind)
    browser = APIClient(enforce_csrf_checks=True)
    assert browser.login(username="alice", password="pw")
    assert browser.get(f"/api/sessions/{sid}/").status_code == 200
    refused = browser.post(f"/api/sessions/{sid}/archive/", {}, format="json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    browser.get("/admin/login/")  # sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    accepted = browser.post(f"/api/sessions/{sid}/archive/", {}, format="json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 200 and accepted.json()["status"] == "archived"


def test_a_session_without_an_owner_is_for_staff_only(api_for, kind, users):
    moderator = api_for(users.moderator)
    sid = moderator.create_session(kind)["session_id"]
    AgentSession.objects.filter(session_id=sid).update(user_id=None)
    api_for(users.alice).get(f"/api/sessions/{sid}/", expected=404)
    api_for(users.viewer).get(f"/api/sessions/{sid}/")
    api_for(users.viewer).post(f"/api/sessions/{sid}/archive/", expected=403)
    moderator.post(f"/api/sessions/{sid}/archive/")


@pytest.mark.parametrize("inactive", ["alice"])
def test_an_inactive_user_token_stops_working(users, inactive):
    client = token_client(users.alice)
    User.objects.filter(username=inactive).update(is_active=False)
    response = client.get("/api/sessions/")
    assert response.status_code == 401


def test_grant_helper_gives_fresh_permissions(users):
    assert not users.alice.has_perm("sessiontree.moderate_session")
    assert grant(users.alice, "moderate_session").has_perm("sessiontree.moderate_session")


@pytest.mark.parametrize(
    "header",
    ["Token", "Token a b", "Token nonsuchkey", "Token ' OR 1=1 --", "Token \u00e9\u00e9", "Token " + "k" * 5000],
)
def test_malformed_or_unknown_tokens_are_401(users, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/sessions/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_the_token_names_its_user_and_the_keyword_is_case_insensitive(users):
    from rest_framework.authtoken.models import Token

    key = Token.objects.create(user=users.bob).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"token {key}")
    session = Api(client).post("/api/sessions/", {"provider": "file"}, expected=201)
    assert session["user_id"] == "bob"


def test_the_token_user_is_loaded_as_the_orm_loads_it(users):
    """The plain-SQL token check builds the same user the ORM would: every
    field equal and of the same type (datetimes aware, booleans bool), on
    SQLite (datetimes stored as text) and on MySQL alike."""
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from sessiontree.api.authentication import TokenAuthentication

    User.objects.filter(pk=users.bob.pk).update(last_login=timezone.now())
    key = Token.objects.create(user=users.bob).key
    user, token = TokenAuthentication().authenticate_credentials(key)
    expected = User.objects.get(pk=users.bob.pk)
    assert token.key == key and token.user is user
    for field in User._meta.concrete_fields:
        got, want = getattr(user, field.attname), getattr(expected, field.attname)
        assert got == want and type(got) is type(want), field.name
    assert timezone.is_aware(user.date_joined) and timezone.is_aware(user.last_login)
    assert user.is_active is True and user._state.adding is False and user._state.db == "default"


@pytest.mark.parametrize("owner", ["alice ", "Alice", "ALICE"])
def test_a_lookalike_user_id_is_another_owner_in_the_list_and_in_each_session(alice, users, owner):
    """Ownership compares user names exactly: the list and a session's own
    URL agree, whatever collation the database has (docs/mysql-provider.md)."""
    from sessiontree import services

    other = services.sessions.create_session(actor="system", channel="internal", kind="mysql", user_id=owner)
    own = Api(alice).create_session("mysql")["session_id"]
    listed = [s["session_id"] for s in alice.get("/api/sessions/").json()["results"]]
    assert listed == [own]
    assert alice.get(f"/api/sessions/{other['session_id']}/").status_code == 404
