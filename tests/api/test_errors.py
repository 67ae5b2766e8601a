"""Every error answer has the one shape and the status of its category, and
no input (malformed, hostile or merely wrong) produces a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import RequestDataTooBig
from django.db import DataError, InterfaceError, OperationalError
from rest_framework.test import APIClient

from sessiontree.api import views
from sessiontree.api.errors import exception_handler
from sessiontree.core.errors import StorageUnavailable
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider

from .conftest import user_message


def error_of(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


def raw_post(client: APIClient, url: str, body: bytes, content_type: str = "application/json") -> Any:
    return client.generic("POST", url, body, content_type=content_type)


@pytest.fixture
def session_id(api, kind) -> str:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    return str(sid)


HOSTILE_BODIES = [
    (b"{", "parse_error"),
    (b"", "invalid_input"),  # no body: no fields
    (b"not json", "parse_error"),
    (b'{"message": NaN}', "parse_error"),
    (b'{"message": {"role": "user", "content": "\\ud800"}}', "parse_error"),  # a lone surrogate
    (b'{"message": {"role": "user", "content": "\xff\xfe"}}', "parse_error"),  # not UTF-8
    (b"[" * 100_000 + b"]" * 100_000, "parse_error"),  # the json module's RecursionError
    (b'{"entry": ' + b'{"a": ' * 70 + b"1" + b"}" * 70 + b"}", "parse_error"),
    (b"[]", "invalid_input"),
    (b"42", "invalid_input"),
    (b'"a string"', "invalid_input"),
    (b"null", "invalid_input"),
    (b'{"message": 1}', "invalid_input"),
    (b'{"entry": {"type": "custom", "customType": "x"}, "expected_leaf_id": {"a": 1}}', "invalid_input"),
    (b'{"message": {"role": "user"}, "unexpected": true}', "invalid_input"),
    (b'{"entry": {"type": 1}}', "invalid_entry"),
    (b'{"entry": {"type": "custom", "customType": "x", "id": ["no"]}}', "invalid_entry"),
    (b'{"entry": {"type": "label", "targetId": {"x": 1}}}', "invalid_entry"),
    (b'{"entry": {"type": "message", "message": {"role": "user"}, "parentId": 5}}', "invalid_entry"),
]


@pytest.mark.parametrize(("body", "code"), HOSTILE_BODIES, ids=range(len(HOSTILE_BODIES)))
def test_hostile_append_bodies_are_400_and_store_nothing(api, session_id, body, code):
    before = AgentSession.objects.get(session_id=session_id).entry_count
    error_of(raw_post(api.client, f"/api/sessions/{session_id}/entries/", body), 400, code)
    assert AgentSession.objects.get(session_id=session_id).entry_count == before


def test_huge_integers(api, session_id):
    # 2**64 parses as a number (a float, as in Pi's JavaScript): stored, not an error.
    body = b'{"entry": {"type": "custom", "customType": "n", "data": 18446744073709551616}}'
    response = raw_post(api.client, f"/api/sessions/{session_id}/entries/", body)
    assert response.status_code == 201 and response.json()["data"] == 2**64
    error_of(raw_post(api.client, "/api/sessions/", b'{"agent": 18446744073709551616}'), 400, "invalid_input")
    error_of(raw_post(api.client, "/api/sessions/", b'{"agent": ' + b"9" * 5000 + b"}"), 400)
    error_of(api.client.get("/api/sessions/?agent=" + "9" * 30), 400, "invalid_input")
    error_of(api.client.get(f"/api/sessions/{session_id}/entries/?page_size=" + "9" * 5000), 400, "invalid_input")


WRONG_TYPES = [
    ("post", "/api/sessions/", {"title": 1}),
    ("post", "/api/sessions/", {"metadata": "x"}),
    ("post", "/api/sessions/", {"metadata": {"deep": json.loads("[" * 40 + "]" * 40)}}),
    ("post", "/api/sessions/", {"cwd": ["a"]}),
    ("post", "/api/sessions/", {"agent": "1"}),
    ("post", "/api/sessions/", {"agent": True}),
    ("post", "/api/sessions/", {"provider": 1}),
    ("post", "/api/sessions/", {"session_id": 12345}),
    ("post", "/api/sessions/", {"title": "x" * 256}),
    ("post", "/api/sessions/", {"user_id": "\x00"}),
    ("patch", "/api/sessions/{sid}/", {"title": {"a": 1}}),
    ("patch", "/api/sessions/{sid}/", {"metadata": None}),
    ("post", "/api/sessions/{sid}/switch-leaf/", {"entry_id": 1}),
    ("post", "/api/sessions/{sid}/switch-leaf/", {"entry_id": ""}),
    ("post", "/api/sessions/{sid}/switch-leaf/", {"entry_id": "x" * 65}),
    ("post", "/api/sessions/{sid}/reset-leaf/", {"expected_leaf_id": []}),
    ("post", "/api/sessions/{sid}/navigate/", {"target_id": None}),
    ("post", "/api/sessions/{sid}/navigate/", {"target_id": "a", "summarize": 1}),
    ("post", "/api/sessions/{sid}/navigate/", {"target_id": "a", "custom_instructions": {}}),
    ("post", "/api/sessions/{sid}/fork/", {"entry_id": "a", "position": 0}),
    ("post", "/api/sessions/{sid}/fork/", {"entry_id": "a", "new_session_id": "a/b"}),
    ("post", "/api/sessions/{sid}/compact/", {"custom_instructions": ["x"]}),
    ("post", "/api/sessions/{sid}/labels/", {"target_id": "a", "label": 3}),
    ("post", "/api/sessions/{sid}/in-flight/", {"entry": "x"}),
    ("patch", "/api/sessions/{sid}/entries/abc/", {"patch": "x"}),
    ("patch", "/api/sessions/{sid}/entries/abc/", {"complete": "true"}),
]


@pytest.mark.parametrize(("method", "url", "body"), WRONG_TYPES, ids=range(len(WRONG_TYPES)))
def test_wrong_types_everywhere_are_400(api, session_id, method, url, body):
    response = getattr(api.client, method)(url.format(sid=session_id), body, format="json")
    error = error_of(response, 400)
    assert error["code"] in {"invalid_input", "invalid_session_id"}


@pytest.mark.parametrize(
    "url",
    [
        "/api/sessions/{sid}/context/?leaf=%00",
        "/api/sessions/{sid}/tree/?root=%00",
        "/api/sessions/{sid}/tree/?depth=1.5",
        "/api/sessions/{sid}/export/?entry=%00",
        "/api/sessions/?created_after=0001-01-01T00:00:00%2B05:00",
        "/api/sessions/?created_before=10000-01-01",
        "/api/sessions/?search=%00",
        "/api/sessions/?page_size=-3",
        "/api/sessions/{sid}/entries/?type=" + ",".join(f"t{i}" for i in range(5000)),
    ],
)
def test_bad_query_parameters_are_400(api, session_id, url):
    error_of(api.client.get(url.format(sid=session_id)), 400, "invalid_input")


def test_invalid_and_unknown_ids(api, session_id):
    error_of(api.client.get("/api/sessions/..hidden/"), 400, "invalid_session_id")
    error_of(api.client.get("/api/sessions/" + "a" * 65 + "/"), 400, "invalid_session_id")
    error_of(api.client.get("/api/sessions/no-such-session/"), 404, "session_not_found")
    error_of(api.client.get("/api/sessions/no-such-session/entries/"), 404, "session_not_found")
    error_of(api.client.get(f"/api/sessions/{session_id}/entries/nothere1/"), 404, "entry_not_found")
    error_of(api.client.get(f"/api/sessions/{session_id}/entries/{'%ED%A0%80' * 3}/"), 404, "entry_not_found")
    error_of(api.client.get(f"/api/sessions/{session_id}/entries/{'z' * 500}/"), 404, "entry_not_found")
    error_of(api.client.get("/api/sessions/%ED%A0%80/"), 400, "invalid_session_id")
    # An empty query value is no value (as in a form): the session's leaf.
    assert api.get(f"/api/sessions/{session_id}/path/?leaf=") == api.get(f"/api/sessions/{session_id}/path/")


def test_unknown_path_method_media_type_and_accept(api, session_id):
    error_of(api.client.get("/api/nothing-here/"), 404, "not_found")
    error_of(api.client.get(f"/api/sessions/{session_id}/entries/a/b/c/"), 404, "not_found")
    error_of(api.client.put(f"/api/sessions/{session_id}/", {}, format="json"), 405, "method_not_allowed")
    error_of(api.client.put(f"/api/sessions/{session_id}/entries/abc/", {}, format="json"), 405, "method_not_allowed")
    error_of(api.client.get(f"/api/sessions/{session_id}/archive/"), 405, "method_not_allowed")
    error_of(raw_post(api.client, "/api/sessions/", b"title=x", "text/plain"), 415, "unsupported_media_type")
    error_of(
        raw_post(api.client, "/api/sessions/", b"title=x", "application/x-www-form-urlencoded"),
        415,
        "unsupported_media_type",
    )
    error_of(api.client.get("/api/sessions/", HTTP_ACCEPT="text/html"), 406, "not_acceptable")
    error_of(api.client.get("/api/sessions/?format=xml"), 404, "not_found")


def test_a_path_without_its_final_slash_is_a_404_naming_the_right_one_never_a_redirect(api, session_id, client):
    """A 301 to the slashed path would turn a POST into a GET in most clients
    (a create silently becoming a list): under /api/ it is a JSON 404 instead."""
    from sessiontree.models import AgentSession

    before = AgentSession.objects.count()
    error = error_of(api.client.post("/api/sessions", {"title": "lost"}, format="json"), 404, "not_found")
    assert error["details"] == {"did_you_mean": "/api/sessions/"}
    assert "/api/sessions/" in error["message"]
    assert AgentSession.objects.count() == before
    entries = f"/api/sessions/{session_id}/entries"
    error = error_of(api.client.get(entries, {"type": "message"}), 404, "not_found")
    assert error["details"] == {"did_you_mean": entries + "/"}
    # No slashed twin: a plain 404, no suggestion.
    assert error_of(api.client.get("/api/nothing-here"), 404, "not_found")["details"] == {}
    # Outside the API Django's redirect stays (the admin is for browsers).
    response = client.get("/admin")
    assert response.status_code == 301 and response["Location"] == "/admin/"


def test_conflicts_are_409(api, session_id):
    leaf = api.get(f"/api/sessions/{session_id}/")["leaf_entry_id"]
    url = f"/api/sessions/{session_id}/entries/"
    response = api.client.post(url, {"message": user_message("x"), "expected_leaf_id": "stale123"}, format="json")
    error_of(response, 409, "leaf_conflict")
    error_of(api.client.patch(f"{url}{leaf}/", {"complete": True}, format="json"), 409, "immutable_entry")
    api.post(f"/api/sessions/{session_id}/archive/")
    error_of(api.client.post(url, {"message": user_message("x")}, format="json"), 409, "session_closed")
    error_of(
        api.client.post("/api/sessions/", {"session_id": session_id}, format="json"), 409, "session_id_unavailable"
    )


def test_bodies_beyond_the_upload_limit_are_413(api, session_id, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = json.dumps({"message": user_message("x" * 2000)}).encode()
    error = error_of(raw_post(api.client, f"/api/sessions/{session_id}/entries/", body), 413, "request_too_large")
    assert "1,000" in error["message"]
    # A body whose length is not announced is cut at the limit all the same.
    response = api.client.generic(
        "POST", f"/api/sessions/{session_id}/entries/", body, content_type="application/json", CONTENT_LENGTH=""
    )
    assert response.status_code in (400, 413)
    assert AgentSession.objects.get(session_id=session_id).entry_count == 1


def test_a_form_body_over_the_limit_with_session_auth_is_not_a_500(kind, users, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    browser = APIClient(enforce_csrf_checks=True)
    assert browser.login(username="alice", password="pw")
    browser.get("/admin/login/")  # the CSRF cookie: the check then reads the form body
    response = browser.generic(
        "POST", "/api/sessions/", b"title=" + b"x" * 5000, content_type="application/x-www-form-urlencoded"
    )
    error_of(response, 415, "unsupported_media_type")  # JSON only, refused before the body is read


def test_djangos_request_data_too_big_is_413():
    response = exception_handler(RequestDataTooBig("too big"), {})
    assert response is not None and response.status_code == 413
    assert response.data["error"]["code"] == "request_too_large"


def test_a_value_the_database_refuses_is_400_without_its_internals():
    response = exception_handler(DataError("(1406, \"Data too long for column 'title' at row 1\")"), {})
    assert response is not None and response.status_code == 400
    assert response.data["error"]["code"] == "invalid_input"
    assert "column" not in response.data["error"]["message"]


def test_the_largest_entry_fits_in_a_request_and_a_larger_one_is_413(api, session_id, settings):
    max_entry = settings.SESSIONTREE_MAX_ENTRY_BYTES
    assert max_entry + 64 * 1024 <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    url = f"/api/sessions/{session_id}/entries/"
    fits = {"entry": {"type": "custom", "customType": "blob", "data": "x" * (max_entry - 1000)}}
    assert api.client.post(url, fits, format="json").status_code == 201
    too_big = {"entry": {"type": "custom", "customType": "blob", "data": "x" * (max_entry + 10)}}
    error_of(api.client.post(url, too_big, format="json"), 413, "entry_too_large")
    deep = {"entry": {"type": "custom", "customType": "deep", "data": json.loads("[" * 40 + "]" * 40)}}
    error_of(api.client.post(url, deep, format="json"), 413, "entry_too_large")


@pytest.mark.parametrize("failure", [OperationalError("server has gone away"), InterfaceError("connection closed")])
def test_database_unavailable_is_503(api, session_id, monkeypatch, failure):
    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise failure

    monkeypatch.setattr(views, "visible_sessions", unavailable)
    error_of(api.client.get(f"/api/sessions/{session_id}/"), 503, "storage_unavailable")
    error_of(api.client.get("/api/sessions/"), 503, "storage_unavailable")


def test_storage_unavailable_is_503(api, session_id, monkeypatch):
    provider_class = type(get_provider(AgentSession.objects.get(session_id=session_id).provider))

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable("disk full")

    monkeypatch.setattr(provider_class, "build_context", unavailable)
    error_of(api.client.get(f"/api/sessions/{session_id}/context/"), 503, "storage_unavailable")


def test_an_unexpected_bug_is_a_json_500_under_api(api, session_id, monkeypatch):
    def bug(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(views, "nested_tree", bug)
    client = APIClient(raise_request_exception=False)
    client.credentials(**api.client._credentials)
    error_of(client.get(f"/api/sessions/{session_id}/tree/"), 500, "internal_error")


def test_corrupt_stored_data_is_a_500_with_its_code(api, users, tmp_path):
    sid = api.create_session("file")["session_id"]
    first = api.say(sid, "hello")
    provider = get_provider("file")
    path = provider.path_for(sid)  # type: ignore[attr-defined]
    with open(path, "a", encoding="utf-8") as handle:  # a duplicate id: damage for an operator
        handle.write(json.dumps({**first, "parentId": None}) + "\n")
    error_of(api.client.get(f"/api/sessions/{sid}/context/"), 500, "corrupt_session_tree")


def test_options_and_head_on_every_endpoint_are_not_errors(api, session_id):
    entry_id = api.get(f"/api/sessions/{session_id}/")["leaf_entry_id"]
    base = f"/api/sessions/{session_id}"
    urls = ["/api/sessions/", f"{base}/", f"{base}/entries/", f"{base}/entries/{entry_id}/", f"{base}/in-flight/"]
    urls += [f"{base}/{name}/" for name in ("archive", "restore", "switch-leaf", "reset-leaf", "navigate", "fork")]
    urls += [f"{base}/{name}/" for name in ("compact", "labels", "path", "context", "tree", "snapshot", "export")]
    for url in urls:
        options = api.client.options(url)
        assert options.status_code == 200, (url, options.content[:300])
        assert "GET" in options["Allow"] or "POST" in options["Allow"]
        head = api.client.head(url)
        assert head.status_code in (200, 405), (url, head.status_code)
    assert APIClient().options("/api/sessions/").status_code == 401
    assert api.client.options("/api/sessions/no-such/").status_code == 404
