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
- The accessibility check injects axe-core (pinned in
  ``tests/browser/axe/package-lock.json``, installed by ``make axe``, which
  ``make test`` runs) into the page and fails on any serious or critical
  violation; each page's full report goes to ``test-artifacts/axe-*.json``.
  Without the package the check skips with the reason, in CI it fails.
"""

from __future__ import annotations

import json
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
AXE_SCRIPT = Path(__file__).resolve().parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
# What the check fails on (axe's impacts: minor, moderate, serious, critical).
AXE_FAILING = ("serious", "critical")
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


@pytest.fixture(scope="session")
def axe_source() -> str:
    if AXE_SCRIPT.is_file():
        return AXE_SCRIPT.read_text(encoding="utf-8")
    reason = f"axe-core is not installed at {AXE_SCRIPT.relative_to(ARTIFACTS.parent)} (make axe; it needs npm)"
    if in_ci():
        pytest.fail(f"the accessibility check must run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def accessibility(axe_source, request):
    """``check(page, name)``: axe-core's report on the page as it is now; fails on
    any serious or critical violation. Injected with ``evaluate`` (the session
    pages' Content-Security-Policy refuses inline scripts, as it should)."""
    ARTIFACTS.mkdir(exist_ok=True)

    def check(page, name: str) -> list[dict[str, Any]]:
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            page.evaluate(axe_source)
        violations = page.evaluate(
            """async () => {
                const result = await window.axe.run(document, {resultTypes: ["violations"]});
                return result.violations.map(v => ({
                    id: v.id, impact: v.impact, help: v.help,
                    nodes: v.nodes.slice(0, 8).map(n => ({target: n.target.join(" "), summary: n.failureSummary})),
                }));
            }"""
        )
        report = ARTIFACTS / f"axe-{request.node.name}-{name}.json".replace("/", "_")
        report.write_text(json.dumps({"url": page.url, "violations": violations}, indent=2), encoding="utf-8")
        failing = [v for v in violations if v["impact"] in AXE_FAILING]
        assert not failing, f"axe on {name} ({page.url}): " + json.dumps(failing, indent=2)
        return violations

    return check
