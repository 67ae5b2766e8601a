"""A moderator in a real browser (Debian's Chromium): flag a message from the
entry panel, find it in the moderation queue, hide it from the model on the
active branch and see on which branches it is hidden, then erase it for
good; axe-core on the panel with its moderation block and on the erase page.
Screenshots: test-artifacts/."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from sessiontree.models import AuditRecord, ModerationFlag
from sessiontree.providers.factory import get_provider_for_session

from .test_console import tree_address

pytestmark = pytest.mark.browser

SESSION = "demo-coding-1"
TEXT = "off by one cent"


def first_user_message() -> str:
    path = get_provider_for_session(SESSION).get_active_path(SESSION)
    return next(e["id"] for e in path if e["type"] == "message" and e["message"]["role"] == "user")


def context_text() -> str:
    return str(get_provider_for_session(SESSION).build_context(SESSION)["messages"])


def test_flag_find_in_the_queue_hide_then_erase(operator_page: Page, demo_site, screenshot, accessibility):
    page = operator_page
    target = first_user_message()

    # Flag it from the entry panel.
    page.goto(tree_address(demo_site, SESSION, f"?focus={target}"))
    detail = page.locator("#entry-detail")
    expect(detail).to_have_attribute("data-entry", target)
    expect(detail.locator("#hidden-on")).to_contain_text("Shown to the model on every branch through it")
    accessibility(page, "entry-moderation")
    detail.locator("#entry-moderation summary", has_text="Flag for moderation").click()
    page.select_option("#flag-category", "pii")
    page.fill("#flag-note", "a customer's billing details")
    page.locator("#flag-entry").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Flagged {target} as pii")
    expect(page.locator(f"#entry-{target} .flag-mark")).to_have_text("⚑ 1")
    expect(page.locator("#entry-detail .entry-flag.flag-open")).to_contain_text("a customer's billing details")
    screenshot(page, "flagged")
    flag = ModerationFlag.objects.get(session_id=SESSION)
    assert (flag.entry_id, flag.category, flag.opened_by) == (target, "pii", "operator")

    # The queue lists it and leads back to the entry.
    page.goto(f"{demo_site}/admin/sessiontree/moderationflag/")
    row = page.locator("#result_list tbody tr", has_text="pii")
    expect(row).to_have_count(1)
    screenshot(page, "queue")
    row.get_by_role("link", name=target).click()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", target)

    # Hide it from the model: a confirmation, then the panel says where.
    page.fill("#hide-notice", "[hidden by a moderator: billing details]")
    page.locator("#hide-entry").click()
    expect(page.locator(".confirm-preview")).to_contain_text("is hidden from the model on the active branch")
    screenshot(page, "hide-confirmation")
    page.locator("#confirm-action").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Hid {target} from the model")
    hidden_on = page.locator("#entry-detail #hidden-on")
    expect(hidden_on).to_contain_text("Hidden from the model on 1 of the 3 branches through it")
    expect(page.locator("#entry-detail .hidden-branches li.is-hidden")).to_contain_text("the active branch")
    expect(page.locator("#unhide-entry")).to_be_visible()
    screenshot(page, "hidden")
    assert TEXT not in context_text() and "[hidden by a moderator: billing details]" in context_text()
    assert TEXT in str(get_provider_for_session(SESSION).get_entry(SESSION, target))  # hidden, still stored

    # Erase it for good, with a reason.
    page.locator("#erase-entry").click()
    expect(page.locator("#erase-places")).to_contain_text(target)
    accessibility(page, "erase")
    page.fill("#id_reason", "customer's erasure request #4711")
    screenshot(page, "erase-page")
    page.locator("#confirm-erase").click()
    expect(page.locator(".messagelist")).to_contain_text("rase")
    screenshot(page, "erased")
    assert TEXT not in str(get_provider_for_session(SESSION).get_entry(SESSION, target))
    operations = set(AuditRecord.objects.filter(session_id=SESSION).values_list("operation", flat=True))
    assert {"flag_entry", "hide_entry", "erase_entry"} <= operations
