"""The API behind the real production server (README's gunicorn command).

What only a real HTTP server shows: a request body sent with
``Transfer-Encoding: chunked`` (gunicorn passes it without a
``CONTENT_LENGTH``), and requests gunicorn itself refuses before the
application runs (414, 431), which must answer in the API's JSON error shape.

One gunicorn (one sync worker) serves a fresh SQLite database for the whole
module; sessions on both providers are made through it.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contract.conftest import PROVIDER_KINDS
from tests.test_boot import HOST, free_port, production_environment
from tests.test_settings import PROJECT_DIR, run_python

MAKE_USER = """
import django
django.setup()
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
user = User.objects.create_user("alice", password="pw")
print(Token.objects.create(user=user).key)
"""


class Server:
    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        chunked: bool = False,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {
            "Host": HOST,
            "X-Forwarded-Proto": "https",
            "Authorization": f"Token {self.token}",
            "Accept": "application/json",
            **(headers or {}),
        }
        data: Any = None
        if body is not None:
            raw = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
            # An iterable body: http.client sends it chunked, with no Content-Length.
            data = iter([raw[: len(raw) // 2], raw[len(raw) // 2 :]]) if chunked else raw
        try:
            connection.request(method, path, body=data, headers=sent, encode_chunked=chunked)
            response = connection.getresponse()
            payload = response.read()
            answered = {name.lower(): value for name, value in response.getheaders()}
        finally:
            connection.close()
        parsed = json.loads(payload) if answered.get("content-type", "").startswith("application/json") else payload
        return response.status, answered, parsed


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp_path = tmp_path_factory.mktemp("gunicorn")
    env = production_environment(tmp_path)
    env["SESSIONTREE_FILE_ROOT"] = str(tmp_path / "sessions")
    migrated = run_python("manage.py", "migrate", "--noinput", env=env)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    made = run_python("-c", MAKE_USER, env=env)
    assert made.returncode == 0, made.stderr[-3000:]
    token = made.stdout.strip().splitlines()[-1]
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=PROJECT_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = Server(port, token)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited: {process.stdout.read() if process.stdout else ''}")
            try:
                served.request("GET", "/api/sessions/")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("gunicorn did not answer within 60 s")
                time.sleep(0.2)
        yield served
    finally:
        process.terminate()
        process.wait(timeout=30)


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_a_chunked_create_keeps_its_id_and_title(server: Server, kind: str, tmp_path: Path) -> None:
    sid = f"chunked-create-{kind}"
    status, _, body = server.request(
        "POST", "/api/sessions/", {"session_id": sid, "title": "Sent in chunks", "provider": kind}, chunked=True
    )
    assert status == 201, body
    assert (body["session_id"], body["title"], body["provider"]) == (sid, "Sent in chunks", kind)


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_a_chunked_conditional_write_is_refused_on_a_stale_leaf(server: Server, kind: str) -> None:
    sid = f"chunked-leaf-{kind}"
    assert server.request("POST", "/api/sessions/", {"session_id": sid, "provider": kind})[0] == 201
    status, _, first = server.request("POST", f"/api/sessions/{sid}/entries/", {"message": user_message("one")})
    assert status == 201, first
    status, _, second = server.request(
        "POST", f"/api/sessions/{sid}/entries/", {"message": user_message("two")}, chunked=True
    )
    assert status == 201, second
    assert second["parentId"] == first["id"]  # the chunked body was read: it is the message sent
    # A stale expected leaf, chunked: refused, and the leaf stays (it used to move, 200).
    status, _, refused = server.request(
        "POST", f"/api/sessions/{sid}/reset-leaf/", {"expected_leaf_id": first["id"]}, chunked=True
    )
    assert status == 409, refused
    assert refused["error"]["code"] == "leaf_conflict"
    _, _, session = server.request("GET", f"/api/sessions/{sid}/")
    assert session["leaf_entry_id"] == second["id"]


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_a_chunked_patch_changes_the_session(server: Server, kind: str) -> None:
    sid = f"chunked-patch-{kind}"
    assert server.request("POST", "/api/sessions/", {"session_id": sid, "provider": kind})[0] == 201
    status, _, body = server.request("PATCH", f"/api/sessions/{sid}/", {"title": "renamed"}, chunked=True)
    assert status == 200 and body["title"] == "renamed", body


def test_a_chunked_body_over_the_limit_is_a_json_413(server: Server) -> None:
    big = {"title": "x" * (8 * 1024 * 1024)}  # over DATA_UPLOAD_MAX_MEMORY_SIZE (7 MiB)
    status, headers, body = server.request("POST", "/api/sessions/", big, chunked=True)
    assert status == 413 and headers["content-type"] == "application/json", body
    assert body["error"]["code"] == "request_too_large"


def test_a_request_line_gunicorn_refuses_is_a_json_414(server: Server) -> None:
    status, headers, body = server.request("GET", "/api/sessions/?search=" + "a" * 9000)
    assert status == 414, body
    assert headers["content-type"] == "application/json"
    assert body["error"]["code"] == "uri_too_long"


def test_headers_gunicorn_refuses_are_a_json_431(server: Server) -> None:
    status, headers, body = server.request("GET", "/api/sessions/", headers={"X-Big": "b" * 9000})
    assert status == 431, body
    assert headers["content-type"] == "application/json"
    assert body["error"]["code"] == "request_header_fields_too_large"
