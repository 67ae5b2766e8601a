"""Defects a real client found, one regression test each, on both providers.

(The chunked request bodies and gunicorn's own refusals need the real server:
``test_http_server.py``.)
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.test import override_settings

from sessiontree.core.errors import StorageUnavailable
from sessiontree.providers.template import TreeProvider

from .conftest import Api, assistant_message, token_client
from .test_errors import error_of

# --- session ids: whole-string matches ------------------------------------------------------------


def test_a_session_id_ending_in_a_newline_is_refused(api: Api, kind: str) -> None:
    response = api.client.post("/api/sessions/", {"session_id": "x\n", "provider": kind}, format="json")
    error_of(response, 400, "invalid_input")
    error_of(api.client.get("/api/sessions/x%0A/"), 400, "invalid_session_id")
    error_of(api.client.get("/api/sessions/x%0A/export/", HTTP_ACCEPT="application/x-ndjson"), 400)


# --- a forged cursor -----------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_forged_sessions_cursor_out_of_time_is_a_400(api: Api, kind: str, position: str) -> None:
    api.create_session(kind)
    forged = base64.b64encode(f"r=0&p={position}".encode()).decode()
    error_of(api.client.get(f"/api/sessions/?cursor={forged}"), 400, "invalid_input")


# --- the context's model, as the schema says -------------------------------------------------------


def test_a_context_model_with_unknown_parts_matches_the_schema(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    message = {k: v for k, v in assistant_message("hi").items() if k not in ("provider", "model")}
    api.append(sid, message=message)
    context = api.get(f"/api/sessions/{sid}/context/")
    assert context["model"] == {"provider": None, "modelId": None}
    schema = api.client.get("/api/schema/?format=json").json()
    model_ref = schema["components"]["schemas"]["ModelRef"]["properties"]
    assert model_ref["provider"].get("nullable") is True and model_ref["modelId"].get("nullable") is True


# --- a taken id says nothing about who holds it ------------------------------------------------------


def test_creating_with_a_taken_id_answers_the_same_whoever_holds_it(users: Any, kind: str) -> None:
    alice, bob = Api(token_client(users.alice)), Api(token_client(users.bob))
    alice.create_session(kind, session_id="alices-session")
    bob.create_session(kind, session_id="bobs-session")
    own = alice.client.post("/api/sessions/", {"session_id": "alices-session", "provider": kind}, format="json")
    other = alice.client.post("/api/sessions/", {"session_id": "bobs-session", "provider": kind}, format="json")
    assert (own.status_code, other.status_code) == (409, 409)
    assert own.json()["error"]["code"] == other.json()["error"]["code"] == "session_id_unavailable"
    assert own.json()["error"]["message"] == other.json()["error"]["message"]
    assert "bobs-session" not in other.json()["error"]["message"]


def test_forking_into_a_taken_id_answers_the_same(users: Any, kind: str) -> None:
    alice, bob = Api(token_client(users.alice)), Api(token_client(users.bob))
    sid = alice.create_session(kind)["session_id"]
    first = alice.say(sid, "hello")
    bob.create_session(kind, session_id="bobs-session")
    response = alice.client.post(
        f"/api/sessions/{sid}/fork/",
        {"entry_id": first["id"], "position": "at", "new_session_id": "bobs-session"},
        format="json",
    )
    error_of(response, 409, "session_id_unavailable")


# --- exports carry no server path -------------------------------------------------------------------


def test_the_export_of_a_fork_names_its_parent_by_id(api: Api, kind: str, settings: Any) -> None:
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "hello")
    fork = api.post(f"/api/sessions/{sid}/fork/", {"entry_id": first["id"], "position": "at"}, expected=201)
    response = api.client.get(f"/api/sessions/{fork['session_id']}/export/", HTTP_ACCEPT="application/x-ndjson")
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    header = json.loads(text.splitlines()[0])
    assert header["parentSession"] == sid
    assert settings.SESSIONTREE_FILE_ROOT not in text and "/" not in header["parentSession"]


# --- 503 says when to come back ----------------------------------------------------------------------


def test_an_unavailable_storage_answers_503_with_retry_after(api: Api, kind: str, monkeypatch: Any) -> None:
    sid = api.create_session(kind)["session_id"]

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable("the disk is gone")

    monkeypatch.setattr(TreeProvider, "build_context", down)
    with override_settings(SESSIONTREE_RETRY_AFTER_SECONDS=7):
        response = api.client.get(f"/api/sessions/{sid}/context/")
    error_of(response, 503, "storage_unavailable")
    assert response["Retry-After"] == "7"


# --- smaller ones ------------------------------------------------------------------------------------


def test_a_bearer_token_is_accepted_as_a_token(users: Any, kind: str) -> None:
    client = token_client(users.alice)
    key = client._credentials["HTTP_AUTHORIZATION"].split()[1]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/sessions/").status_code == 200
    client.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    error_of(client.get("/api/sessions/"), 401, "authentication_failed")


def test_session_metadata_and_cwd_have_size_limits(api: Api, kind: str) -> None:
    big = {"notes": "x" * (65 * 1024)}
    error_of(api.client.post("/api/sessions/", {"provider": kind, "metadata": big}, format="json"), 413)
    error_of(api.client.post("/api/sessions/", {"provider": kind, "cwd": "/" + "d" * 5000}, format="json"), 400)
    sid = api.create_session(kind, metadata={"k": "v"}, cwd="/srv")["session_id"]
    error_of(api.client.patch(f"/api/sessions/{sid}/", {"metadata": big}, format="json"), 413)
    assert api.get(f"/api/sessions/{sid}/")["metadata"] == {"k": "v"}  # nothing changed


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"message": {"role": "user", "content": "\xff\xfe"}}', "not valid UTF-8"),
        (b'{"message": {"role": "user", "content": "\\ud800"}}', "surrogate pair"),
    ],
)
def test_a_body_that_is_not_unicode_says_why(api: Api, kind: str, body: bytes, says: str) -> None:
    sid = api.create_session(kind)["session_id"]
    response = api.client.post(f"/api/sessions/{sid}/entries/", body, content_type="application/json")
    error = error_of(response, 400, "parse_error")
    assert says in error["message"]
    if says == "not valid UTF-8":
        assert "surrogates" not in error["message"]
    api.say(sid, "still writable")
    assert [e["message"]["content"][0]["text"] for e in api.get(f"/api/sessions/{sid}/entries/")["results"]] == [
        "still writable"
    ]
