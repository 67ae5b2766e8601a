"""Browser tests: Playwright (Python) driving Debian's headless Chromium
against ``live_server``.

- The browser is the system's ``/usr/bin/chromium`` (``SESSIONTREE_CHROMIUM``
  names another); Playwright never downloads one. Without it the tests skip
  with the reason, except in CI (``CI`` set, as ``.ci/run`` runs), where a
  missing browser is a failure: ``.ci/run`` installs it.
- The test settings send cookies over HTTPS only (DEBUG is off); the live
  server speaks plain HTTP on localhost, so these tests turn the secure-cookie
  flags off for their own run, or the login could not keep its session.
- Screenshots go to ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

CHROMIUM = os.environ.get("SESSIONTREE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Debian's chromium as root in a closed network: no sandbox, no background connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "browser-test-pw"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    reason = f"no Chromium at {CHROMIUM} (apt-get install chromium, or set SESSIONTREE_CHROMIUM)"
    if in_ci():
        pytest.fail(f"browser tests must run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any], chromium_path: str) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": chromium_path, "args": CHROMIUM_ARGS, "headless": True}


@pytest.fixture(scope="session", autouse=True)
def _orm_beside_playwright() -> Iterator[None]:
    # Playwright's sync API runs an event loop in this thread; the test's own
    # ORM calls are still synchronous, so Django's async guard must stand down.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def demo_site(transactional_db, live_server, settings, django_user_model) -> str:
    """The demo data, an operator account, cookies over plain HTTP: the live server's URL."""
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    call_command("load_demo", stdout=StringIO())
    django_user_model.objects.create_superuser("operator", "operator@example.com", PASSWORD)
    return live_server.url


@pytest.fixture
def operator_page(page, demo_site):
    page.set_default_timeout(15_000)
    page.goto(f"{demo_site}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    assert "/admin/login/" not in page.url, "the login did not keep its session"
    return page


@pytest.fixture
def screenshot(request):
    ARTIFACTS.mkdir(exist_ok=True)

    def take(page, name: str) -> Path:
        target = ARTIFACTS / f"{request.node.name}-{name}.png".replace("/", "_")
        page.screenshot(path=str(target), full_page=True)
        return target

    return take
