"""The application starts the way production starts it.

The test client imports the URLconf (and with it DRF's views) before any
middleware; gunicorn builds the WSGI handler first, which imports the
middleware first. An import cycle that only one of those orders closes once
kept the production server from booting while every other test passed, so
these start the real entry points in fresh interpreters.
"""

from __future__ import annotations

import http.client
import json
import pkgutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .test_settings import PROJECT_DIR, clean_environ, documented_production_environment, run_python

HOST = "sessions.example.com"  # README's DJANGO_ALLOWED_HOSTS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def production_environment(tmp_path: Path) -> dict[str, str]:
    variables = documented_production_environment()
    assert variables["DJANGO_ALLOWED_HOSTS"] == HOST
    variables["SQLITE_PATH"] = str(tmp_path / "db.sqlite3")
    variables["SESSIONTREE_VAR_DIR"] = str(tmp_path / "var")
    return clean_environ(**variables)


def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        # The documented proxy terminates TLS and says so in X-Forwarded-Proto.
        connection.request("GET", path, headers={"Host": HOST, "X-Forwarded-Proto": "https"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_readme_production_server_boots_and_answers(tmp_path):
    """``gunicorn config.wsgi:application`` under README's production block."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=PROJECT_DIR,
        env=production_environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                pytest.fail(
                    f"gunicorn exited with {server.returncode}:\n{server.stdout.read() if server.stdout else ''}"
                )
            try:
                status, body = get(port, "/api/sessions/")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("gunicorn did not answer within 60 s")
                time.sleep(0.2)
        # Anonymous: the API's JSON error, not a crashed worker's 500 or a reset connection.
        assert status == 401, body
        assert json.loads(body)["error"]["code"] == "not_authenticated"
        status, body = get(port, "/admin/login/")
        assert status == 200, body[:500]
    finally:
        server.terminate()
        server.wait(timeout=30)


def project_modules() -> list[str]:
    names = []
    for package in ("config", "sessiontree", "roleplay"):
        names.append(package)
        for module in pkgutil.walk_packages([str(PROJECT_DIR / package)], prefix=f"{package}."):
            if ".migrations." not in module.name and not module.name.endswith(".migrations"):
                names.append(module.name)
    return sorted(names)


# Each module imported first into a fresh, set-up Django (a forked child per
# module): a cycle shows up whichever module closes it.
IMPORT_EACH_FIRST = """
import importlib, os, sys, traceback
import django
django.setup()
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failed.append(name)
print("FAILED:" + ",".join(failed))
"""


def test_every_module_imports_first_in_a_fresh_process(tmp_path):
    modules = project_modules()
    assert {"config.wsgi", "sessiontree.api.errors", "sessiontree.api.parsers"} <= set(modules)
    env = production_environment(tmp_path)
    result = run_python("-c", IMPORT_EACH_FIRST, *modules, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "FAILED:", result.stderr[-5000:]
