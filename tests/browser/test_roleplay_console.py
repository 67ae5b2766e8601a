"""An operator and a roleplay session in a real browser: correct a value with
a reason, accept a review, move the leaf back before a change and see the
state panel follow, diff two branches."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from roleplay import service
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider, get_provider_for_session
from tests.roleplay.story import LONG_HAIR, SHORT_HAIR, Story, add, review

from .test_admin_console import open_tree

pytestmark = pytest.mark.browser


def open_state_panel(page: Page, base: str, session_id: str) -> None:
    """From the session list to the tree, then its "Roleplay state" button."""
    open_tree(page, base, session_id)
    page.locator("#roleplay-state").click()
    expect(page.locator("h1")).to_contain_text("Roleplay state of")
    expect(page.locator("#rp-summary")).to_be_visible()


def state_row(page: Page, pointer: str):
    return page.locator(f'#rp-state tr[data-pointer="{pointer}"]')


@pytest.fixture
def alice(demo_site) -> tuple[Story, dict[str, str]]:
    """A file session with the haircut, then a rescue whose trust review is pending."""
    story = Story(get_provider("file"), session_id="browser-alice", title="Alice and the wolf")
    ids = story.haircut_story()
    ids["rescue"] = story.turn(
        [add("/location", "the old bridge")],
        reviews=[review("review-trust", add("/relationship", {"user": {"trust": 0.55}}), "trust after the rescue")],
        commit_id="commit-rescue",
    )
    return story, ids


def test_correct_a_value_with_a_reason(operator_page: Page, demo_site, screenshot):
    page = operator_page
    open_state_panel(page, demo_site, "demo-roleplay-1")
    hair = state_row(page, "/hair")
    expect(hair.locator(".rp-value")).to_have_text('"short"')
    expect(hair.locator(".rp-kind")).to_have_text("turn")
    screenshot(page, "panel")

    hair.locator(".rp-correct-link").click()
    form = page.locator("#correction-form")
    expect(form.locator("#id_path")).to_have_value("/hair")
    expect(form.locator("#id_expected")).to_have_value('"short"')
    # First a path the state does not hold: refused on the form, nothing appended.
    form.locator("#id_path").fill("/haircut")
    form.locator("#id_expected").fill("")
    form.locator("#id_value").fill('"chin-length"')
    form.locator("#id_reason").fill("she only trimmed it")
    count = AgentSession.objects.get(session_id="demo-roleplay-1").entry_count
    form.locator("#correct-submit").click()
    expect(page.locator("#rp-refused")).to_contain_text("does not apply to the current state")
    expect(page.locator("#correction-form .errorlist")).to_contain_text("values on this branch: /hair")
    assert AgentSession.objects.get(session_id="demo-roleplay-1").entry_count == count
    screenshot(page, "refused")

    form = page.locator("#correction-form")
    form.locator("#id_path").fill("/hair")
    form.locator("#correct-submit").click()
    expect(page.locator("#rp-plan-changes")).to_contain_text('"short"')
    expect(page.locator("#rp-plan-changes")).to_contain_text('"chin-length"')
    screenshot(page, "confirm")
    page.locator("#confirm-action").click()

    expect(page.locator(".messagelist")).to_contain_text("Appended correction commit")
    hair = state_row(page, "/hair")
    expect(hair.locator(".rp-value")).to_have_text('"chin-length"')
    expect(hair.locator(".rp-kind")).to_have_text("correction")
    expect(hair.locator(".rp-reason")).to_have_text("“she only trimmed it”")
    expect(page.locator("#rp-revision")).to_have_text("2")
    screenshot(page, "corrected")

    # The entry behind the value, in the tree.
    entry_id = hair.locator(".rp-entry-link code").inner_text()
    hair.locator(".rp-entry-link").click()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", entry_id)
    expect(page.locator(f"#entry-{entry_id} .marker")).to_have_text("rp correction")
    expect(page.locator("#entry-detail .custom-fields")).to_contain_text("she only trimmed it")


def test_accept_a_review(operator_page: Page, demo_site, alice, screenshot):
    page = operator_page
    story, _ids = alice
    open_state_panel(page, demo_site, story.session_id)
    row = page.locator("#review-review-trust")
    expect(row).to_contain_text("trust after the rescue")
    expect(row.locator(".rp-applies")).to_be_visible()
    screenshot(page, "queue")

    row.locator("#accept-review-trust").click()
    expect(page.locator(".roleplay-confirm")).to_contain_text("Revision 2 → 3")
    page.locator("#confirm-action").click()

    expect(page.locator(".messagelist")).to_contain_text("Appended acceptance of review review-trust")
    expect(page.locator("#rp-no-pending")).to_be_visible()
    trust = state_row(page, "/relationship")
    expect(trust.locator(".rp-kind")).to_have_text("review")
    expect(trust.locator(".rp-review")).to_have_text("review review-trust")
    expect(state_row(page, "/relationship/user/trust").locator(".rp-value")).to_have_text("0.55")
    assert service.inspect_state(story.provider, story.session_id)["pending_reviews"] == []
    screenshot(page, "accepted")


def test_navigate_back_before_a_change_and_see_the_state_panel_change(operator_page: Page, demo_site, screenshot):
    page = operator_page
    session_id = "demo-roleplay-1"
    open_state_panel(page, demo_site, session_id)
    expect(page.locator("#rp-revision")).to_have_text("1")
    expect(state_row(page, "/hair")).to_be_visible()
    commit_id = state_row(page, "/hair").locator(".rp-entry-link code").inner_text()
    before_commit = get_provider_for_session(session_id).get_entry(session_id, commit_id)["parentId"]

    # The tree page: the entry before the haircut's commit, "Switch the leaf here".
    page.locator("a.button", has_text="Entry tree").click()
    page.locator(f"#entry-{before_commit} .marker").click()
    page.locator("#switch-leaf").click()
    page.locator("#confirm-action").click()
    expect(page.locator(f"#entry-{before_commit}")).to_have_class(re.compile(r"\bleaf\b"))

    page.locator("#roleplay-state").click()
    expect(page.locator("#rp-revision")).to_have_text("0")
    expect(page.locator("#rp-empty-state")).to_be_visible()
    expect(page.locator("#rp-at")).to_have_text(before_commit)
    screenshot(page, "before-the-change")

    # The state at the commit, read without moving the leaf.
    page.locator("#rp-at-input").fill(commit_id)
    page.locator("#rp-at-form button").click()
    expect(page.locator("#rp-revision")).to_have_text("1")
    expect(page.locator("#rp-not-leaf-note")).to_be_visible()
    expect(page.locator("#correction-form")).to_have_count(0)
    assert AgentSession.objects.get(session_id=session_id).leaf_entry_id == before_commit
    screenshot(page, "at-an-entry")


def test_diff_two_branches(operator_page: Page, demo_site, screenshot):
    page = operator_page
    story = Story(get_provider("file"), session_id="browser-branches", title="Alice, two evenings")
    ids = story.haircut_story()
    story.turn([add("/location", "the inn")], commit_id="commit-inn")
    cut_branch = story.leaf
    story.provider.switch_leaf(story.session_id, ids["ask_cut"])
    story.assistant("Alice keeps her hair and dyes it red.")
    dye_branch = story.turn([add("/appearance", {"hair": LONG_HAIR, "colour": "red"})], commit_id="commit-dye")

    open_state_panel(page, demo_site, story.session_id)
    page.locator("#rp-diff-link").click()
    page.locator("#rp-diff-from").fill(cut_branch)
    page.locator("#rp-diff-to").fill(dye_branch)
    page.locator("#rp-diff-submit").click()

    expect(page.locator("#rp-common-ancestor")).to_have_text(ids["ask_cut"])
    changed = page.locator('#rp-diff-changed tr[data-pointer="/appearance/hair"]')
    expect(changed.locator(".rp-old")).to_have_text(f'"{SHORT_HAIR}"')
    expect(changed.locator(".rp-new")).to_have_text(f'"{LONG_HAIR}"')
    expect(changed.locator(".rp-diff-old")).to_contain_text("commit-haircut")
    expect(changed.locator(".rp-diff-new")).to_contain_text("commit-dye")
    expect(page.locator('#rp-diff-added tr[data-pointer="/appearance/colour"]')).to_be_visible()
    removed = page.locator('#rp-diff-removed tr[data-pointer="/location"]')
    expect(removed).to_contain_text("commit-inn")
    screenshot(page, "diff")

    # Each side's entry links to the tree.
    changed.locator(".rp-diff-new .rp-entry-link").click()
    expect(page.locator("#entry-detail")).to_have_attribute("data-entry", dye_branch)
