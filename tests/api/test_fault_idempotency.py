"""Retries under kill -9 (issue 20, "no retry is safe"): a client that
never learns whether its append happened retries it with the same
``Idempotency-Key`` until it gets an answer, while the production server's
workers are killed at random moments. Afterwards every acknowledged append
is stored exactly once, in the order it was made, and nothing else is.

The server is README's gunicorn command with three sync workers, on this
leg's database (a database of its own on the MySQL/MariaDB server on the
MySQL leg, a SQLite file otherwise); gunicorn's master starts a new worker
for every one killed. Each provider kind gets three sessions with one
writer each; a fourth thread SIGKILLs a busy worker every few tenths of a
second.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.conftest import is_mysql
from tests.contract.conftest import PROVIDER_KINDS
from tests.test_boot import HOST, free_port, production_environment
from tests.test_settings import PROJECT_DIR, run_python

from .test_http_server import MAKE_USER

WORKERS = 3
SESSIONS_PER_KIND = 3
# Each writer makes at least this many appends, and goes on until the killer
# has killed MIN_KILLS workers (at most MAX_APPENDS).
APPENDS_PER_SESSION = int(os.environ.get("FAULT_APPENDS_PER_SESSION", "60"))
MIN_KILLS = 8
MAX_KILLS = 60
MAX_APPENDS = 2000
# Seconds a client waits for an answer before it gives up on the attempt
# and retries (a killed worker's connection is usually reset at once).
ATTEMPT_TIMEOUT = 10.0
# The share of attempts whose client gives up after a few milliseconds.
IMPATIENT = 0.15

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@dataclass
class Outcome:
    attempts: int = 0
    failed_attempts: int = 0  # no answer, or a 5xx: the client could not know
    replayed: int = 0  # answers that said Idempotency-Replayed: true
    appends: int = 0  # how many appends the writer made (each one until it was answered)
    error: str | None = None  # an answer no retry explains (a 4xx)
    acknowledged: list[tuple[str, str]] = field(default_factory=list)  # (entry id, text)


class Gunicorn:
    def __init__(self, environment: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(WORKERS),
                # Workers forked from a loaded master replace a killed one at
                # once (booting each would take a second or more here).
                "--preload",
                "--no-control-socket",
            ],
            cwd=PROJECT_DIR,
            env=environment,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )

    def last_words(self) -> str:
        alive = "running" if self.process.poll() is None else f"exited with {self.process.returncode}"
        return f"gunicorn {alive}; its log ends:\n" + self.log.read_text(errors="replace")[-3000:]

    def workers(self) -> list[int]:
        """The master's children: its workers, as /proc says now."""
        try:
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        except OSError:
            return []
        return [int(pid) for pid in children.split()]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def request(
    port: int, token: str, method: str, path: str, body: Any = None, *, timeout: float = ATTEMPT_TIMEOUT, **headers: str
) -> tuple[int, dict, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    sent = {
        "Host": HOST,
        "X-Forwarded-Proto": "https",
        "Authorization": f"Token {token}",
        "Accept": "application/json",
        **headers,
    }
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        payload = response.read()
        answered = {name.lower(): value for name, value in response.getheaders()}
    finally:
        connection.close()
    parsed = json.loads(payload) if answered.get("content-type", "").startswith("application/json") else payload
    return response.status, answered, parsed


def server_database(tmp_path: Path) -> tuple[dict[str, str], str | None]:
    """Environment naming this leg's database for the server, and the MySQL
    database to drop afterwards (``None`` on SQLite)."""
    if not is_mysql():
        return {}, None
    import MySQLdb

    db = settings.DATABASES["default"]
    name = f"fault_{uuid.uuid4().hex[:12]}"
    connection = MySQLdb.connect(
        host=db["HOST"] or "127.0.0.1", port=int(db["PORT"] or 3306), user=db["USER"], passwd=db["PASSWORD"]
    )
    try:
        connection.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        connection.close()
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    url = f"mysql://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{name}"
    return {"DATABASE_URL": url}, name


def drop_mysql_database(name: str) -> None:
    import MySQLdb

    db = settings.DATABASES["default"]
    connection = MySQLdb.connect(
        host=db["HOST"] or "127.0.0.1", port=int(db["PORT"] or 3306), user=db["USER"], passwd=db["PASSWORD"]
    )
    try:
        connection.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        connection.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, django_db_blocker: Any) -> Iterator[tuple[Gunicorn, str]]:
    tmp_path = tmp_path_factory.mktemp("fault")
    environment = production_environment(tmp_path)
    environment["SESSIONTREE_FILE_ROOT"] = str(tmp_path / "sessions")
    with django_db_blocker.unblock():
        database, dropped = server_database(tmp_path)
    environment.update(database)
    try:
        migrated = run_python("manage.py", "migrate", "--noinput", env=environment)
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        made = run_python("-c", MAKE_USER, env=environment)
        assert made.returncode == 0, made.stderr[-3000:]
        token = made.stdout.strip().splitlines()[-1]
        server = Gunicorn(environment, tmp_path / "gunicorn.log")
        try:
            deadline = time.monotonic() + 60
            while True:
                assert server.process.poll() is None, "gunicorn exited"
                try:
                    request(server.port, token, "GET", "/api/sessions/")
                    break
                except OSError:
                    assert time.monotonic() < deadline, "gunicorn did not answer within 60 s"
                    time.sleep(0.2)
            yield server, token
        finally:
            server.stop()
    finally:
        if dropped is not None:
            with django_db_blocker.unblock():
                drop_mysql_database(dropped)


def writer(port: int, token: str, session_id: str, outcome: Outcome, stop: threading.Event, kills: list[int]) -> None:
    rng = random.Random(session_id)
    for number in range(MAX_APPENDS):
        if number >= APPENDS_PER_SESSION and len(kills) >= MIN_KILLS:
            break
        text = f"{session_id} message {number}"
        key = f"{session_id}-{number}-{uuid.uuid4().hex}"
        body = {"message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": number}}
        while True:
            if stop.is_set():
                return
            outcome.attempts += 1
            # Now and then the client gives up before the answer can come (the
            # server goes on and, mostly, stores the entry): a client timeout.
            impatient = rng.random() < IMPATIENT
            try:
                status, headers, answer = request(
                    port,
                    token,
                    "POST",
                    f"/api/sessions/{session_id}/entries/",
                    body,
                    timeout=rng.uniform(0.001, 0.02) if impatient else ATTEMPT_TIMEOUT,
                    **{"Idempotency-Key": key},
                )
            except (OSError, http.client.HTTPException):
                outcome.failed_attempts += 1  # reset by the kill, or no answer in time
                time.sleep(0.05)
                continue
            if status >= 500:
                outcome.failed_attempts += 1
                time.sleep(0.05)
                continue
            if status != 201:
                outcome.error = f"append {number} answered {status}: {answer!r}"
                return
            if headers.get("idempotency-replayed") == "true":
                outcome.replayed += 1
            outcome.acknowledged.append((answer["id"], text))
            outcome.appends = number + 1
            break


def killer(server: Gunicorn, stop: threading.Event, kills: list[int]) -> None:
    """SIGKILL a worker every few tenths of a second (at most MAX_KILLS)."""
    rng = random.Random(20)
    while len(kills) < MAX_KILLS and not stop.wait(rng.uniform(0.1, 0.3)):
        workers = server.workers()
        if len(workers) < WORKERS:
            continue  # the master has not replaced the last one yet
        victim = rng.choice(workers)
        try:
            os.kill(victim, signal.SIGKILL)
            kills.append(victim)
        except ProcessLookupError:
            pass


def all_entries(port: int, token: str, session_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    path = f"/api/sessions/{session_id}/entries/?page_size=500"
    while path:
        status, _, page = request(port, token, "GET", path)
        assert status == 200, page
        found += page["results"]
        following = page.get("next")
        path = following.split("testserver", 1)[-1].split(HOST, 1)[-1] if following else ""
    return found


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_retried_appends_under_worker_kills_are_stored_once(served: tuple[Gunicorn, str], kind: str) -> None:
    server, token = served
    sessions = []
    for _ in range(SESSIONS_PER_KIND):
        status, _, created = request(server.port, token, "POST", "/api/sessions/", {"provider": kind})
        assert status == 201, created
        sessions.append(created["session_id"])
    outcomes = {session_id: Outcome() for session_id in sessions}
    stop = threading.Event()
    kills: list[int] = []
    threads = [
        threading.Thread(target=writer, args=(server.port, token, s, outcomes[s], stop, kills), daemon=True)
        for s in sessions
    ]
    murder = threading.Thread(target=killer, args=(server, stop, kills), daemon=True)
    for thread in threads:
        thread.start()
    murder.start()
    deadline = time.monotonic() + 300
    for thread in threads:
        thread.join(timeout=max(1.0, deadline - time.monotonic()))
    stop.set()
    murder.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads), (
        f"the writers did not finish in 300 s; {server.last_words()}"
    )

    assert [o.error for o in outcomes.values() if o.error] == [], server.last_words()
    # The faults happened: workers died under the writers, and some appends
    # had to be retried without knowing whether they had been stored.
    print(
        f"{kind}: {len(kills)} workers killed; per session (attempts, without an answer, replayed):",
        [(o.attempts, o.failed_attempts, o.replayed) for o in outcomes.values()],
    )
    assert len(kills) >= MIN_KILLS, kills
    assert sum(o.failed_attempts for o in outcomes.values()) >= 1
    # Some retries came after a write that had happened: they were answered
    # from the key, not written again.
    assert sum(o.replayed for o in outcomes.values()) >= 1

    for session_id, outcome in outcomes.items():
        stored = all_entries(server.port, token, session_id)
        texts = [entry["message"]["content"][0]["text"] for entry in stored]
        expected = [f"{session_id} message {n}" for n in range(outcome.appends)]
        assert outcome.appends >= APPENDS_PER_SESSION
        # Nothing acknowledged lost, nothing stored twice, nothing stored that
        # was not asked for, in the order it was made …
        assert texts == expected, session_id
        # … as the entries the clients were told about, …
        assert [(entry["id"], text) for entry, text in zip(stored, texts, strict=True)] == outcome.acknowledged
        # … on one chain.
        assert stored[0]["parentId"] is None
        for parent, child in itertools.pairwise(stored):
            assert child["parentId"] == parent["id"]
        status, _, session = request(server.port, token, "GET", f"/api/sessions/{session_id}/")
        assert status == 200 and session["leaf_entry_id"] == stored[-1]["id"]
        assert session["entry_count"] == outcome.appends
