"""Production-safe settings: DEBUG off by default, refusal without secrets, a clean
``check --deploy``, and each log line printed once.

Most of these run ``config.settings`` (not the test suite's settings) in a child
process with a controlled environment, as a server or a command would start.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

PROJECT_DIR = Path(__file__).resolve().parents[1]
README = PROJECT_DIR / "README.md"
NO_ISSUES = "System check identified no issues (0 silenced)."


def clean_environ(**variables: str) -> dict[str, str]:
    """This process's environment without any setting the tests care about, plus ``variables``.

    The suite's own settings put a test key and hosts into ``os.environ``; a
    developer's shell may hold ``DJANGO_DEBUG`` or ``LOG_LEVEL``. None of that
    may leak into a child meant to start like a fresh server.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("DJANGO_") and name not in {"LOG_LEVEL", "DATABASE_URL", "SQLITE_PATH"}
    }
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env.update(variables)
    return env


def run_python(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120
    )


def documented_production_environment() -> dict[str, str]:
    """The ``export NAME=value`` lines of README.md's "Production" block, secret key filled in."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Production\n", 1)
    assert len(section) == 2, "README.md has no '## Production' section"
    block = re.search(r"```sh\n(.*?)```", section[1], re.DOTALL)
    assert block, "README.md's Production section has no sh block"
    variables = {}
    for line in block.group(1).splitlines():
        match = re.fullmatch(r"export (\w+)=(.*)", line.strip())
        if match:
            variables[match.group(1)] = match.group(2).strip("'\"")
    assert "DJANGO_SECRET_KEY" in variables, "the documented block must set DJANGO_SECRET_KEY"
    assert "DJANGO_ALLOWED_HOSTS" in variables, "the documented block must set DJANGO_ALLOWED_HOSTS"
    # The README holds a placeholder; an operator puts a generated key there.
    variables["DJANGO_SECRET_KEY"] = get_random_secret_key()
    return variables


def settings_namespace(monkeypatch: pytest.MonkeyPatch, **variables: str) -> dict[str, object]:
    """Execute config/settings.py afresh under ``clean_environ(**variables)`` and return its names."""
    environ = clean_environ(**variables)
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(PROJECT_DIR / "config" / "settings.py"))


# --- DEBUG and the variables production must set ---


def test_debug_is_off_unless_asked_for(monkeypatch):
    namespace = settings_namespace(monkeypatch, DJANGO_SECRET_KEY="k" * 50, DJANGO_ALLOWED_HOSTS="a.example")
    assert namespace["DEBUG"] is False
    assert namespace["SESSION_COOKIE_SECURE"] is True
    assert namespace["CSRF_COOKIE_SECURE"] is True
    assert namespace["ALLOWED_HOSTS"] == ["a.example"]


def test_debug_on_uses_development_defaults(monkeypatch):
    namespace = settings_namespace(monkeypatch, DJANGO_DEBUG="1")
    assert namespace["DEBUG"] is True
    assert namespace["SECRET_KEY"] == "dev-only-insecure-key-change-me"
    assert namespace["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]
    # `make run` serves plain HTTP: secure-only cookies would break its login.
    assert namespace["SESSION_COOKIE_SECURE"] is False


@pytest.mark.parametrize("value", ["0", "false", "no", "off", ""])
def test_debug_off_values(monkeypatch, value):
    namespace = settings_namespace(
        monkeypatch, DJANGO_DEBUG=value, DJANGO_SECRET_KEY="k" * 50, DJANGO_ALLOWED_HOSTS="a.example"
    )
    assert namespace["DEBUG"] is False


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DJANGO_DEBUG", "maybe", "DJANGO_DEBUG='maybe' is not a yes/no value"),
        ("DJANGO_SECURE_SSL_REDIRECT", "2", "DJANGO_SECURE_SSL_REDIRECT='2' is not a yes/no value"),
        ("DJANGO_SECURE_HSTS_SECONDS", "a year", "DJANGO_SECURE_HSTS_SECONDS='a year' is not a whole number"),
        ("DJANGO_SECURE_HSTS_SECONDS", "-1", "DJANGO_SECURE_HSTS_SECONDS='-1' must not be negative"),
        ("DJANGO_SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto", "is not HEADER,VALUE"),
        ("DJANGO_SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto,", "is not HEADER,VALUE"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL='LOUD' is not a level"),
    ],
)
def test_malformed_values_are_refused_by_name(monkeypatch, variable, value, message):
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        settings_namespace(monkeypatch, **{"DJANGO_DEBUG": "1", variable: value})


@pytest.mark.parametrize(
    "header", ["X-Forwarded-Proto,https", "x-forwarded-proto, https", "HTTP_X_FORWARDED_PROTO,https"]
)
def test_proxy_ssl_header_becomes_the_request_meta_key(monkeypatch, header):
    namespace = settings_namespace(monkeypatch, DJANGO_DEBUG="1", DJANGO_SECURE_PROXY_SSL_HEADER=header)
    assert namespace["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")


SECRET_KEY_MESSAGE = "DJANGO_SECRET_KEY is not set (set it to a long random value"
ALLOWED_HOSTS_MESSAGE = "DJANGO_ALLOWED_HOSTS is not set (set it to the host names this site is served under"


@pytest.mark.parametrize(
    ("entry_point", "variables", "named", "not_named"),
    [
        (["manage.py", "check"], {}, [SECRET_KEY_MESSAGE, ALLOWED_HOSTS_MESSAGE], []),
        (["manage.py", "check"], {"DJANGO_ALLOWED_HOSTS": "a.example"}, [SECRET_KEY_MESSAGE], [ALLOWED_HOSTS_MESSAGE]),
        (["manage.py", "check"], {"DJANGO_SECRET_KEY": "k" * 50}, [ALLOWED_HOSTS_MESSAGE], [SECRET_KEY_MESSAGE]),
        (
            ["manage.py", "check"],
            {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": " ", "DJANGO_ALLOWED_HOSTS": " , "},
            [SECRET_KEY_MESSAGE, ALLOWED_HOSTS_MESSAGE],
            [],
        ),
        (["-c", "import django; django.setup()"], {}, [SECRET_KEY_MESSAGE, ALLOWED_HOSTS_MESSAGE], []),
    ],
    ids=["nothing-set", "no-secret-key", "no-allowed-hosts", "blank-values", "django-setup"],
)
def test_debug_off_refuses_to_start_without_secret_key_or_allowed_hosts(entry_point, variables, named, not_named):
    result = run_python(*entry_point, env=clean_environ(**variables))
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    # manage.py says it in one line (issue 25); django.setup() elsewhere raises.
    said_by = (
        "manage.py: improperly_configured: "
        if entry_point[0] == "manage.py"
        else "django.core.exceptions.ImproperlyConfigured: "
    )
    assert last_line.startswith(said_by + "DEBUG is off (DJANGO_DEBUG is not 1)")
    for message in named:
        assert message in last_line
    for message in not_named:
        assert message not in last_line
    assert "set DJANGO_DEBUG=1 instead" in last_line


def test_gunicorn_refuses_to_start_in_one_line_without_production_variables(tmp_path):
    """gunicorn (the production server) says what is missing in one line and
    stops with exit code 2, instead of a traceback per worker (issue 25)."""
    gunicorn = Path(sys.executable).with_name("gunicorn")
    result = subprocess.run(
        [str(gunicorn), "--bind", f"unix:{tmp_path / 'g.sock'}", "--workers", "1", "config.wsgi:application"],
        cwd=PROJECT_DIR,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if "improperly_configured" in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gunicorn: improperly_configured: DEBUG is off (DJANGO_DEBUG is not 1)")
    assert SECRET_KEY_MESSAGE in lines[0] and ALLOWED_HOSTS_MESSAGE in lines[0]
    assert "Traceback" not in result.stderr


def test_debug_on_starts_without_production_variables():
    result = run_python("manage.py", "check", env=clean_environ(DJANGO_DEBUG="1"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == NO_ISSUES


# --- manage.py check --deploy ---


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_python("manage.py", "check", "--deploy", "--fail-level", "WARNING", env=env)


def warning_ids(output: str) -> set[str]:
    return set(re.findall(r"\((security\.\w+)\)", output))


def test_check_deploy_is_clean_under_the_documented_production_environment():
    production = documented_production_environment()
    result = check_deploy(clean_environ(**production))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == NO_ISSUES
    assert result.stderr == ""


def test_check_deploy_names_what_the_https_variables_would_fix():
    """Without the HTTPS variables the same check fails: each one above is needed, and the check is live."""
    production = documented_production_environment()
    for name in list(production):
        if name.startswith(("DJANGO_SECURE_SSL", "DJANGO_SECURE_HSTS")):
            del production[name]
    production["DJANGO_SECURE_COOKIES"] = "0"
    result = check_deploy(clean_environ(**production))
    assert result.returncode != 0
    assert warning_ids(result.stderr) == {"security.W004", "security.W008", "security.W012", "security.W016"}

    hsts_only = documented_production_environment()
    del hsts_only["DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS"], hsts_only["DJANGO_SECURE_HSTS_PRELOAD"]
    result = check_deploy(clean_environ(**hsts_only))
    assert result.returncode != 0
    assert warning_ids(result.stderr) == {"security.W005", "security.W021"}


# --- logging: each line once, no traceback for a client error ---

# Serves four requests with the real URLs plus one failing view, on an
# in-memory database: an unknown page (404), a page the staff user may not see
# (403), a host not allowed (400) and a view that raises (500); then logs two
# lines the way runserver logs its requests.
LOGGING_PROBE = """
import sys, types
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.test import Client
from django.test.utils import override_settings
from django.urls import include, path

def fail(request):
    raise RuntimeError("probe failure")

probe = types.ModuleType("probe_urls")
probe.urlpatterns = [path("fail/", fail), path("", include("config.urls"))]
sys.modules["probe_urls"] = probe
client = Client(raise_request_exception=False)
client.force_login(User.objects.create_user("clerk", is_staff=True))
with override_settings(ROOT_URLCONF="probe_urls"):
    statuses = [
        client.get("/no-such-page/").status_code,
        client.get("/admin/auth/user/").status_code,
        client.get("/admin/", HTTP_HOST="evil.example").status_code,
        client.get("/fail/").status_code,
    ]
print(*statuses)

# How runserver logs each request (django.core.servers.basehttp).
import logging
server_log = logging.getLogger("django.server")
server_log.info('"%s" %s %s', "GET /admin/ HTTP/1.1", "200", "3100", extra={"server_time": "T", "status_code": 200})
server_log.warning('"%s" %s %s', "GET /nope/ HTTP/1.1", "404", "179", extra={"server_time": "T", "status_code": 404})
"""


@pytest.mark.parametrize("debug", ["1", "0"], ids=["debug-on", "debug-off"])
def test_each_request_log_line_appears_once_and_only_a_500_has_a_traceback(debug):
    env = clean_environ(
        DJANGO_DEBUG=debug,
        DJANGO_SECRET_KEY=get_random_secret_key(),
        DJANGO_ALLOWED_HOSTS="testserver",
        SQLITE_PATH=":memory:",
    )
    result = run_python("-c", LOGGING_PROBE, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["404", "403", "400", "500"]

    lines = result.stderr.splitlines()
    # Log lines start at the margin; a traceback's frames are indented.
    log_lines = [line for line in lines if line and not line.startswith(" ")]
    assert log_lines == [
        "Not Found: /no-such-page/",
        "Forbidden (Permission denied): /admin/auth/user/",
        "Invalid HTTP_HOST header: 'evil.example'. You may need to add 'evil.example' to ALLOWED_HOSTS.",
        "Internal Server Error: /fail/",
        "Traceback (most recent call last):",
        "RuntimeError: probe failure",
        '[T] "GET /admin/ HTTP/1.1" 200 3100',
        '[T] "GET /nope/ HTTP/1.1" 404 179',
    ]
