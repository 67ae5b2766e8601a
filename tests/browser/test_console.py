"""The operator console of issue 25 in Debian's Chromium: messages that read like
a conversation (and hostile ones that stay text), an address for every view
state with Back and Forward, the keyboard, the alternatives pager, compare from
named branch tips, the layout and the glyph, token totals explained, a stale
confirmation, no request that fails (the favicon), and axe-core's check on the
list, tree, entry, compare and moderation pages. Screenshots: test-artifacts/."""

from __future__ import annotations

import re
import shutil
import subprocess
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from sessiontree import services
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider_for_session
from tests.admin.console_sessions import PNG_WIDTH, alternatives_session, hostile_session, rich_session

from .conftest import in_ci

pytestmark = pytest.mark.browser


def tree_address(base: str, session_id: str, query: str = "") -> str:
    pk = AgentSession.objects.get(session_id=session_id).pk
    return f"{base}/admin/sessiontree/agentsession/{pk}/tree/{query}"


def query_of(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


@pytest.fixture
def failed_requests(operator_page):
    """Every response of 400 or more the page gets (a missing favicon was one on every page)."""
    failed: list[str] = []
    operator_page.on(
        "response",
        lambda response: failed.append(f"{response.status} {response.url}") if response.status >= 400 else None,
    )
    return failed


def labelled(session_id: str, label: str) -> str:
    labels = get_provider_for_session(session_id).get_snapshot(session_id)["labels_by_entry_id"]
    return next(entry_id for entry_id, info in labels.items() if info["label"] == label)


# --- rendered messages ------------------------------------------------------------------------------


def test_messages_read_like_a_conversation(operator_page: Page, demo_site, screenshot, failed_requests):
    page = operator_page
    page.set_viewport_size({"width": 1440, "height": 1000})
    rich_session("file", "rich-browser")
    page.goto(tree_address(demo_site, "rich-browser"))

    user = page.locator("#entry-a0000001 .row-body")
    expect(user.locator("strong")).to_have_text("fix")
    expect(user.locator("li")).to_have_count(2)
    expect(page.locator("#entry-a0000002 .msg-tool-call")).to_contain_text("billing/invoice.py")
    expect(page.locator("#entry-a0000003 .msg-tool-result")).to_contain_text("def total(lines)")
    expect(page.locator("#entry-a0000005 .msg-tool-result.msg-error")).to_contain_text("(error)")
    expect(page.locator("#entry-a0000006 .row-body strong")).to_have_text("integer cents")  # a summary, as text
    thumbnail = page.locator("#entry-a0000004 img.msg-image")
    expect(thumbnail).to_be_visible()
    assert thumbnail.evaluate("img => img.complete && img.naturalWidth") == PNG_WIDTH  # the PNG, served and decoded
    screenshot(page, "conversation")

    page.locator("#entry-a0000002 .marker").click()
    panel = page.locator("#entry-panel")
    expect(panel.locator(".entry-message code.language-python")).to_contain_text("def total(lines)")
    expect(panel.locator("details.msg-thinking > summary")).to_have_text("thinking")
    screenshot(page, "entry-panel")
    assert not failed_requests, failed_requests


def test_hostile_content_stays_text(operator_page: Page, demo_site, screenshot):
    page = operator_page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    hostile_session("file", "hostile-browser")

    page.goto(tree_address(demo_site, "hostile-browser"))
    expect(page.locator("#entry-b0000001 .row-body")).to_contain_text("<script>window.__pwned = 'script'</script>")
    for entry_id in ("b0000001", "b0000002", "b0000003", "b0000005", "b0000007"):
        page.locator(f"#entry-{entry_id} .marker").click()
        expect(page.locator("#entry-detail")).to_have_attribute("data-entry", entry_id)
    page.locator("#entry-b0000002 .marker").click()
    expect(page.locator("#entry-detail .msg-image-missing").first).to_contain_text("image/svg+xml")
    links = page.locator("#entry-panel a, #session-tree a").evaluate_all("links => links.map(a => a.href)")
    assert not [href for href in links if href.lower().startswith(("javascript:", "data:", "vbscript:"))]
    for hover in page.locator("#session-tree .tag:visible").all():  # the label tried onmouseover
        hover.hover()
    screenshot(page, "hostile")
    page.goto(tree_address(demo_site, "hostile-browser", "compare/?a=b0000007&b=b0000008"))
    expect(page.locator("#compare-table")).to_be_visible()

    assert page.evaluate("() => window.__pwned") is None and not dialogs
    assert page.evaluate("() => document.querySelectorAll('iframe, object, embed').length") == 0


# --- addresses, Back and Forward ----------------------------------------------------------------------


def test_every_view_state_has_an_address_back_and_forward_work(operator_page: Page, demo_site, screenshot):
    page = operator_page
    page.goto(tree_address(demo_site, "demo-coding-1"))
    leaf = AgentSession.objects.get(session_id="demo-coding-1").leaf_entry_id
    first = page.locator("#session-tree .entry").nth(2).get_attribute("data-entry")
    panel = page.locator("#entry-panel")
    expect(panel).to_be_hidden()  # nothing open: the tree has the width

    page.locator(f"#entry-{first} .marker").click()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", first)
    assert query_of(page)["focus"] == [first]
    page.locator("#jump-leaf").click()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", leaf)
    assert query_of(page)["focus"] == [leaf]

    page.go_back()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", first)
    page.go_back()
    expect(panel).to_be_hidden()
    assert "focus" not in query_of(page)
    page.go_forward()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", first)

    shared = page.url  # another operator opens the same address
    page.goto("about:blank")
    page.goto(shared)
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", first)
    expect(page.locator(f"#entry-{first}")).to_have_class(re.compile(r"\bselected\b"))

    page.locator("#filter-show").select_option("user")
    page.locator("#filter-q").fill("decimal")
    page.locator("#tree-filter button[type=submit]").click()
    assert query_of(page)["show"] == ["user"] and query_of(page)["q"] == ["decimal"]
    expect(page.locator("#matches h2").first).to_contain_text("1 match")
    match = page.locator("#matches .entry").first.get_attribute("data-entry")
    page.locator("#matches .entry .marker").first.click()
    assert query_of(page) == {"show": ["user"], "q": ["decimal"], "focus": [match]}
    screenshot(page, "find-and-focus")

    page.goto(tree_address(demo_site, "demo-coding-1", "?focus=deadbeef"))
    expect(page.locator("#unknown-focus")).to_contain_text("No entry deadbeef in this session")
    expect(panel).to_be_hidden()
    screenshot(page, "unknown-focus")


def test_find_looks_at_the_text_not_the_json_keys(operator_page: Page, demo_site):
    page = operator_page
    page.goto(tree_address(demo_site, "demo-coding-1", "?q=usage"))
    expect(page.locator("#matches h2").first).to_have_text("0 matches for “usage”")
    page.goto(tree_address(demo_site, "demo-coding-1", "?q=Decimal"))
    expect(page.locator("#matches .entry").first).to_be_visible()


# --- the keyboard and the alternatives pager ----------------------------------------------------------------


def test_the_keyboard_moves_along_the_rows_opens_and_flips_alternatives(operator_page: Page, demo_site, screenshot):
    page = operator_page
    alternatives_session("file", "alternatives-browser")
    page.goto(tree_address(demo_site, "alternatives-browser"))
    expect(page.locator("#keyboard-help")).to_contain_text("Enter")  # documented on the page

    page.keyboard.press("ArrowDown")  # the cursor starts at the leaf
    expect(page.locator(".entry.cursor")).to_have_attribute("data-entry", "c0000007")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(page.locator(".entry.cursor")).to_have_attribute("data-entry", "c0000003")
    page.keyboard.press("Enter")
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", "c0000003")
    assert query_of(page)["focus"] == ["c0000003"]
    screenshot(page, "cursor")

    page.keyboard.press("ArrowRight")  # the next alternative at the branch point
    page.wait_for_url(re.compile(r"line=c0000004"))
    expect(page.locator("#entry-c0000004 .alt-count")).to_have_text("3/3")
    expect(page.locator("#entry-c0000006")).to_be_visible()  # its own follow-up, on the main line now
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", "c0000004")
    page.keyboard.press("Escape")
    expect(page.locator("#entry-panel")).to_be_hidden()
    page.keyboard.press("ArrowLeft")  # the cursor stayed on the third answer: back to the second
    page.wait_for_url(re.compile(r"line=c0000003"))
    expect(page.locator("#entry-c0000003 .alt-count")).to_have_text("2/3")


def test_the_pager_flips_between_alternatives(operator_page: Page, demo_site, screenshot):
    page = operator_page
    page.goto(tree_address(demo_site, "demo-coding-1"))
    pager = page.locator("#session-tree .alt-pager").first
    expect(pager.locator(".alt-count")).to_have_text("3/3")
    screenshot(page, "pager-3-of-3")

    pager.locator(".alt-prev").click()
    expect(page.locator("#session-tree .alt-pager").first.locator(".alt-count")).to_have_text("2/3")
    # That branch is the main line now: its messages are rows, not a folded branch.
    expect(
        page.locator("#session-tree > .entry .row-body", has_text="Store amounts as integer cents instead.")
    ).to_be_visible()
    expect(page.locator("#back-to-active")).to_be_visible()
    expect(page.locator("#entry-detail")).to_be_visible()  # the alternative flipped to, open
    screenshot(page, "pager-2-of-3")
    page.locator("#session-tree .alt-pager .alt-prev").first.click()
    expect(page.locator("#session-tree .alt-pager").first.locator(".alt-count")).to_have_text("1/3")
    decimal = labelled("demo-coding-1", "decimal fix")
    expect(page.locator(f"#entry-{decimal}")).to_be_visible()
    page.go_back()
    expect(page.locator("#session-tree .alt-pager").first.locator(".alt-count")).to_have_text("2/3")


# --- compare --------------------------------------------------------------------------------------------------


def test_compare_starts_from_two_named_branch_tips(operator_page: Page, demo_site, screenshot):
    page = operator_page
    page.goto(tree_address(demo_site, "demo-coding-1"))
    page.locator("#compare-link").click()

    expect(page.locator("#compare-table")).to_be_visible()  # a comparison without choosing
    expect(page.locator("#compare-a option[selected]")).to_contain_text("the leaf (active path)")
    options = page.locator("#compare-b option").all_inner_texts()
    assert any("“decimal fix”" in text for text in options), options
    decimal_tip = next(o for o in page.locator("#compare-b option").all() if "decimal fix" in o.inner_text())
    page.locator("#compare-b").select_option(decimal_tip.get_attribute("value"))
    page.locator("#compare-form button[type=submit]").click()
    assert query_of(page)["b"] == [decimal_tip.get_attribute("value")] and "a" in query_of(page)
    expect(page.locator("#compare-counts")).to_contain_text("changed")
    expect(page.locator(".compare-text ins").first).to_be_visible()
    transforms = page.locator("code").evaluate_all("codes => codes.map(c => getComputedStyle(c).textTransform)")
    assert transforms and set(transforms) == {"none"}  # ids read as they are
    screenshot(page, "compare")


# --- layout, glyph, tokens -------------------------------------------------------------------------------------


def test_the_tree_uses_the_width_and_the_branch_glyph_has_a_font(operator_page: Page, demo_site, screenshot):
    page = operator_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(tree_address(demo_site, "demo-coding-1"))

    content = page.locator("#content-main").bounding_box()
    tree = page.locator("#session-tree").bounding_box()
    assert tree["width"] > 0.95 * content["width"]  # no empty side panel
    preview = page.locator("#session-tree .entry.active .row-body").first.bounding_box()
    assert preview["width"] > 700  # a message reads at length, not 45 characters
    assert "⑂" not in page.content() and page.locator("#session-tree .fork-mark").first.inner_text().startswith("⎇")

    page.locator("#jump-leaf").click()
    expect(page.locator("#entry-panel")).to_be_visible()
    tree_open = page.locator("#session-tree").bounding_box()
    assert 0.5 * content["width"] < tree_open["width"] < content["width"]
    screenshot(page, "layout")

    fc_list = shutil.which("fc-list")
    if fc_list is None:
        if in_ci():
            pytest.fail("fc-list is missing: cannot check the glyph's font")
        pytest.skip("fc-list is missing: cannot check the glyph's font")
    covering = subprocess.run([fc_list, ":charset=2387", "family"], capture_output=True, text=True, check=True).stdout
    assert covering.strip(), "no installed font has U+2387 (⎇)"


def test_the_panel_says_how_its_token_total_adds_up(operator_page: Page, demo_site, screenshot):
    page = operator_page
    page.goto(tree_address(demo_site, "demo-coding-1"))
    page.locator("#jump-leaf").click()

    explanation = page.locator("#token-explanation")
    expect(explanation).to_contain_text("as the provider reported them")
    # The figures by their places, not every number of the text: the reply's
    # entry id is in it too, and a random id can be all digits.
    total = int(re.search(r"How the (\d+) tokens", explanation.inner_text()).group(1))
    reported, estimated = (int(explanation.locator("strong").nth(n).inner_text()) for n in (0, 1))
    assert reported + estimated == total
    explanation.scroll_into_view_if_needed()
    screenshot(page, "tokens")


# --- a stale confirmation ---------------------------------------------------------------------------------------


def test_a_stale_confirmation_is_refreshed_before_yes(operator_page: Page, demo_site, screenshot):
    page = operator_page
    page.goto(tree_address(demo_site, "demo-coding-2"))
    seen = AgentSession.objects.get(session_id="demo-coding-2").leaf_entry_id
    page.locator("#session-tree .entry .marker").nth(3).click()
    target = page.locator("#entry-detail").get_attribute("data-entry")
    appended = services.entries.append_message(
        session_id="demo-coding-2", message={"role": "user", "content": "meanwhile"}, actor="agent", channel="api"
    )["id"]

    page.locator("#switch-leaf").click()

    expect(page.locator("#leaf-moved")).to_contain_text(f"you saw {seen}, it is now {appended}")
    expect(page.locator(".confirm-preview")).to_contain_text(f"The leaf moves from {appended}")
    screenshot(page, "stale-confirmation")
    page.locator("#confirm-action").click()
    expect(page.locator(".messagelist")).to_contain_text(f"to {target}")
    assert AgentSession.objects.get(session_id="demo-coding-2").leaf_entry_id == target


# --- accessibility ---------------------------------------------------------------------------------------------


def test_no_serious_accessibility_violation_on_the_console(operator_page: Page, demo_site, accessibility, screenshot):
    page = operator_page
    row = AgentSession.objects.get(session_id="demo-coding-1")
    services.moderation.flag_entry(
        session_id=row.session_id,
        entry_id=row.leaf_entry_id,
        category="spam",
        note="looks odd",
        actor="ops",
        channel="admin",
    )
    rich_session("file", "rich-a11y")

    page.goto(f"{demo_site}/admin/sessiontree/agentsession/")
    accessibility(page, "list")
    page.goto(tree_address(demo_site, "rich-a11y"))
    accessibility(page, "tree")
    page.locator("#entry-a0000004 .marker").click()
    expect(page.locator("#entry-detail")).to_be_visible()
    accessibility(page, "entry")
    screenshot(page, "a11y-entry")
    page.goto(tree_address(demo_site, "demo-coding-1", "compare/"))
    accessibility(page, "compare")
    page.goto(f"{demo_site}/admin/sessiontree/moderationflag/")
    expect(page.locator("#result_list")).to_be_visible()
    accessibility(page, "moderation")
    screenshot(page, "a11y-moderation")
