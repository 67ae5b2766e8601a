"""An operator in a real browser searches entries across sessions (a
highlighted snippet, a link into the tree at the entry) and downloads an
export's manifest beside the export."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from sessiontree.models import AuditRecord

from .test_admin_console import labelled, open_tree

pytestmark = pytest.mark.browser


def test_search_entries_and_open_one_in_its_tree(operator_page: Page, demo_site, screenshot):
    page = operator_page
    page.goto(f"{demo_site}/admin/sessiontree/agentsession/")
    page.locator("#search-entries-link").click()
    page.locator("#id_q").fill("quantizes Decimal")
    page.locator("#entry-search-submit").click()
    hits = page.locator("#search-results tr.search-hit")
    expect(hits.first).to_be_visible()
    expect(hits.first.locator(".search-snippet mark", has_text="quantizes")).to_have_count(1)
    expect(hits.first.locator(".search-snippet mark", has_text="Decimal").first).to_be_visible()
    screenshot(page, "search-results")

    target = labelled("demo-coding-1", "decimal fix")
    page.locator(f"#search-results a.search-entry-link[href*='focus={target}']").first.click()
    expect(page.locator("#session-tree")).to_be_visible()
    expect(page.locator(f"#entry-{target}")).to_be_visible()
    assert f"focus={target}" in page.url
    screenshot(page, "search-hit-in-tree")


def test_download_an_export_and_its_manifest(operator_page: Page, demo_site, screenshot):
    page = operator_page
    open_tree(page, demo_site, "demo-coding-1")
    with page.expect_download() as export:
        page.locator(".exports a", has_text="active path").click()
    data = Path(export.value.path()).read_bytes()
    with page.expect_download() as manifest_download:
        page.locator(".exports a.export-manifest").nth(1).click()
    manifest = json.loads(Path(manifest_download.value.path()).read_bytes())
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert (manifest["scope"], manifest["exporter"], manifest["channel"]) == ("active", "operator", "admin")
    records = AuditRecord.objects.filter(operation="export_session", session_id="demo-coding-1").order_by("id")
    assert [r.detail.get("manifest_only", False) for r in records] == [False, True]
    screenshot(page, "tree-with-manifest-links")
