"""A first run without surprises (issue 25): `make run` needs no compiler for
SQLite, takes PORT=… and moves off a busy default port before it prints the
login, and a command without the production settings says what is missing on
one line instead of a traceback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def requirement_names(path: Path) -> tuple[set[str], list[str]]:
    names: set[str] = set()
    includes: list[str] = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            includes.append(line[3:].strip())
        elif line:
            names.add(line.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower())
    return names, includes


def test_the_sqlite_run_installs_nothing_that_compiles_and_everything_else_installs_all():
    run, run_includes = requirement_names(ROOT / "requirements-run.txt")
    mysql, _ = requirement_names(ROOT / "requirements-mysql.txt")
    everything, includes = requirement_names(ROOT / "requirements.txt")

    assert "mysqlclient" not in run and not run_includes  # the one package that needs a compiler
    assert mysql == {"mysqlclient"}
    assert includes == ["requirements-run.txt", "requirements-mysql.txt"]  # CI and `make test` get all of it
    assert {"django", "markdown-it-py"} <= run and "pytest" in everything


def test_the_readme_says_what_a_first_run_needs_in_its_first_lines():
    head = "\n".join((ROOT / "README.md").read_text().splitlines()[:30])

    assert "make run" in head and "Python 3.11" in head
    assert "no compiler" in head and "libmariadb-dev" in head


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_chooses_the_port_before_it_prints_the_login():
    plan = subprocess.run(
        ["make", "-n", "run", "PORT=8123"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout

    assert "config.devserver --host 127.0.0.1 --port 8123 --explicit" in plan
    assert plan.index("config.devserver") < plan.index("ensure_admin") < plan.index("runserver")
    assert '--url "http://127.0.0.1:$port/admin/"' in plan and 'runserver "127.0.0.1:$port"' in plan
    assert "requirements-run.txt" in plan or "requirements.txt" not in plan  # never the full set for a run
    default = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    assert "--port 8000" in default.stdout and "--explicit" not in default.stdout


@pytest.fixture
def busy_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        yield server.getsockname()[1]


def test_a_busy_port_asked_for_is_an_error_in_one_line(busy_port):
    from config import devserver

    with pytest.raises(SystemExit) as stopped:
        devserver.choose("127.0.0.1", busy_port, explicit=True)

    message = str(stopped.value.code)
    assert f"port {busy_port} on 127.0.0.1 is in use" in message and "\n" not in message
    assert f"make run PORT={busy_port + 1}" in message


def test_a_busy_default_port_moves_to_the_next_free_one(busy_port, capsys):
    from config import devserver

    chosen = devserver.choose("127.0.0.1", busy_port, explicit=False)

    assert chosen > busy_port and devserver.is_free("127.0.0.1", chosen)
    assert f"port {busy_port} is in use; serving on {chosen} instead" in capsys.readouterr().err


def test_a_free_port_is_kept_and_a_bad_one_refused(busy_port, capsys):
    from config import devserver

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert devserver.choose("127.0.0.1", free, explicit=True) == free
    with pytest.raises(SystemExit, match="not a TCP port"):
        devserver.main(["--port", "70000"])


def test_missing_production_settings_are_one_line_not_a_traceback(tmp_path):
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "SESSIONTREE_")) and key not in ("DATABASE_URL",)
    }
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env["SESSIONTREE_VAR_DIR"] = str(tmp_path)

    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("manage.py: improperly_configured: DEBUG is off")
    assert "DJANGO_SECRET_KEY is not set" in lines[0] and "DJANGO_DEBUG=1" in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""
