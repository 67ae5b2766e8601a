"""An operator in a real browser: open the branched demo session, unfold a
branch, open an entry and its context, switch the leaf, label, fork and
follow the lineage, archive."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider_for_session

pytestmark = pytest.mark.browser


def open_tree(page: Page, base: str, session_id: str) -> None:
    """From the session list, as an operator would: search, then the row's tree link."""
    title = AgentSession.objects.get(session_id=session_id).title
    page.goto(f"{base}/admin/sessiontree/agentsession/?q={session_id}")
    page.locator("#result_list tr", has=page.get_by_role("link", name=title, exact=True)).locator(
        "td.field-tree_link a"
    ).click()
    expect(page.locator("h1")).to_contain_text(title)
    expect(page.locator("#session-tree")).to_be_visible()


def labelled(session_id: str, label: str) -> str:
    labels = get_provider_for_session(session_id).get_snapshot(session_id)["labels_by_entry_id"]
    return next(entry_id for entry_id, info in labels.items() if info["label"] == label)


def test_unfold_a_branch_and_see_an_entrys_context(operator_page: Page, demo_site, screenshot):
    page = operator_page
    open_tree(page, demo_site, "demo-coding-1")
    decimal = labelled("demo-coding-1", "decimal fix")
    expect(page.locator(f"#entry-{decimal}")).to_have_count(0)

    page.locator("details.branch > summary", has_text="Use Decimal").click()
    row = page.locator(f"#entry-{decimal}")
    expect(row).to_be_visible()
    expect(row.locator(".tag")).to_have_text("decimal fix")

    row.locator(".marker").click()  # the row (messages show a rendered body, not a preview)
    panel = page.locator("#entry-panel")
    expect(panel.locator("h3")).to_have_text("LLM context with this entry as the leaf")
    expect(panel.locator(".context-steps .step-sent").first).to_be_visible()
    expect(panel.locator(".entry-json")).to_contain_text(f'"id": "{decimal}"')
    screenshot(page, "entry-context")

    open_tree(page, demo_site, "demo-coding-2")
    page.locator("#jump-leaf").click()
    # The steps start where the context does (the compaction's summary and
    # what it keeps); what it left out is counted, not listed (issue 23).
    expect(panel.locator(".step-summary").first).to_be_visible()
    expect(panel.locator(".step-compacted")).to_have_count(0)
    expect(panel.locator(".left-out-count")).to_be_visible()
    expect(panel.locator(".left-out-count")).to_have_text(re.compile(r"^[1-9]\d*$"))
    screenshot(page, "left-out-by-compaction")


def test_switch_the_leaf_and_see_the_highlighted_path_change(operator_page: Page, demo_site, screenshot):
    page = operator_page
    open_tree(page, demo_site, "demo-coding-1")
    old_leaf = AgentSession.objects.get(session_id="demo-coding-1").leaf_entry_id
    decimal = labelled("demo-coding-1", "decimal fix")
    expect(page.locator(f"#entry-{old_leaf}.active.leaf")).to_be_visible()

    page.locator("details.branch > summary", has_text="Use Decimal").click()
    page.locator(f"#entry-{decimal} .marker").click()
    page.locator("#switch-leaf").click()
    expect(page.locator(".confirm-preview")).to_contain_text(f"to {decimal}")
    screenshot(page, "confirm")
    page.locator("#confirm-action").click()

    expect(page.locator(".messagelist")).to_contain_text(f"to {decimal}")
    expect(page.locator(f"#entry-{decimal}")).to_have_class(re.compile(r"\bactive\b.*\bleaf\b"))
    expect(page.locator(f"#entry-{old_leaf}.active")).to_have_count(0)  # its branch is folded now
    expect(page.locator("details.branch > summary", has_text="Keep floats in the model")).to_be_visible()
    expect(page.locator("#history")).to_contain_text("switch_leaf")
    screenshot(page, "switched")


def test_label_an_entry(operator_page: Page, demo_site, screenshot):
    page = operator_page
    open_tree(page, demo_site, "demo-coding-2")
    leaf = AgentSession.objects.get(session_id="demo-coding-2").leaf_entry_id
    target = get_provider_for_session("demo-coding-2").get_entry("demo-coding-2", leaf)["parentId"]

    page.locator(f"#entry-{target} .marker").click()
    page.locator("#label-input").fill("checked by ops")
    page.locator("#set-label").click()

    expect(page.locator(".messagelist")).to_contain_text('"checked by ops"')
    expect(page.locator(f"#entry-{target} .tag")).to_have_text("checked by ops")
    screenshot(page, "labelled")


def test_fork_and_follow_the_lineage_link(operator_page: Page, demo_site, screenshot):
    page = operator_page
    open_tree(page, demo_site, "demo-roleplay-1")
    leaf = AgentSession.objects.get(session_id="demo-roleplay-1").leaf_entry_id

    page.locator("#jump-leaf").click()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", leaf)
    page.locator("summary", has_text="Fork into a new session").click()
    page.locator("#entry-actions input[name=title]").fill("Alice, another evening")
    page.locator("#fork-session").click()
    page.locator("#confirm-action").click()

    expect(page.locator(".messagelist")).to_contain_text("Forked demo-roleplay-1")
    expect(page.locator("#lineage")).to_contain_text("Forked from")
    fork = AgentSession.objects.get(title="Alice, another evening")
    assert fork.parent.session_id == "demo-roleplay-1"
    screenshot(page, "fork")

    page.locator("#lineage a.lineage-link", has_text="demo-roleplay-1").click()
    expect(page.locator("h1")).to_contain_text("Alice at the Crossroads Inn")
    expect(page.locator("#lineage a.fork-link", has_text=fork.session_id)).to_be_visible()
    screenshot(page, "lineage")


def test_archive_and_see_the_banner(operator_page: Page, demo_site, screenshot):
    page = operator_page
    open_tree(page, demo_site, "demo-mysql-coding-1")

    page.locator("#session-actions > summary").click()
    page.locator("#archive-session").click()

    expect(page.locator(".session-banner")).to_contain_text("This session is archived")
    expect(page.locator("#session-actions")).to_have_count(0)
    page.locator("#jump-leaf").click()
    expect(page.locator("#entry-detail")).to_be_visible()
    expect(page.locator("#switch-leaf")).to_have_count(0)
    assert AgentSession.objects.get(session_id="demo-mysql-coding-1").status == "archived"
    screenshot(page, "archived")
