"""Flags and hiding from the entry panel (issue 21 §1 and §2 in the admin):
a flag button and the entry's flags in the panel, open flags marked in the
tree, hide and unhide through a confirmation, and on which branches a
message is hidden; each through the operations layer, with its permission."""

from __future__ import annotations

import re

from django.test import Client

from sessiontree import services
from sessiontree.models import AgentSession, AuditRecord, ModerationFlag

from .conftest import action_url, leaf_of, login, provider_of, staff, tree_url


def first_user_message(row: AgentSession) -> str:
    path = provider_of(row).get_active_path(row.session_id)
    return next(e["id"] for e in path if e["type"] == "message" and e["message"]["role"] == "user")


def panel(client: Client, row: AgentSession, entry_id: str) -> str:
    response = client.get(tree_url(row, "tree_entry", entry_id))
    assert response.status_code == 200
    return response.content.decode()


def test_flag_from_the_entry_panel_opens_a_flag_and_marks_the_row(branched):
    target = first_user_message(branched)
    flagger = login(staff("flagger", "view_agentsession", "flag_entry"))
    leaf = leaf_of(branched)
    context = provider_of(branched).build_context(branched.session_id)
    html = panel(flagger, branched, target)
    assert 'id="flag-form"' in html and 'id="hide-entry"' not in html  # no moderate_session: no hide
    assert 'value="self_harm"' in html  # the configured categories

    response = flagger.post(action_url(branched, "flag"), {"entry_id": target, "category": "pii", "note": "a card"})
    assert response.status_code == 302
    flag = ModerationFlag.objects.get(session_id=branched.session_id)
    assert (flag.entry_id, flag.category, flag.note, flag.source, flag.status, flag.opened_by) == (
        target,
        "pii",
        "a card",
        "operator",
        "open",
        "flagger",
    )
    record = AuditRecord.objects.get(operation="flag_entry", session_id=branched.session_id)
    assert (record.actor, record.channel) == ("flagger", "admin")
    # Beside the tree: the leaf and the model's context are unchanged.
    assert leaf_of(branched) == leaf
    assert provider_of(branched).build_context(branched.session_id) == context

    html = panel(flagger, branched, target)
    assert re.search(r'class="entry-flag flag-open" data-flag="\d+"', html) and "a card" in html
    tree = flagger.get(tree_url(branched)).content.decode()
    assert re.search(rf'id="entry-{target}"[^\n]*class="flag-mark" title="1 open moderation flag">⚑ 1<', tree)

    services.moderation.resolve_flag(flag_id=flag.pk, status="dismissed", actor="resolver", channel="internal")
    assert "flag-mark" not in flagger.get(tree_url(branched)).content.decode()  # only open flags are marked
    assert 'class="entry-flag flag-dismissed"' in panel(flagger, branched, target)


def test_flagging_needs_flag_entry_and_hiding_needs_moderate_session(branched):
    target = first_user_message(branched)
    moderator = login(staff("mod", "view_agentsession", "moderate_session"))
    assert 'id="flag-form"' not in panel(moderator, branched, target)
    assert moderator.post(action_url(branched, "flag"), {"entry_id": target, "category": "pii"}).status_code == 403
    flagger = login(staff("flagger", "view_agentsession", "flag_entry"))
    assert flagger.post(action_url(branched, "hide"), {"entry_id": target, "confirmed": "yes"}).status_code == 403
    assert flagger.post(action_url(branched, "unhide"), {"entry_id": target, "confirmed": "yes"}).status_code == 403
    viewer = login(staff("viewer", "view_agentsession"))
    assert viewer.post(action_url(branched, "flag"), {"entry_id": target, "category": "pii"}).status_code == 403
    assert not ModerationFlag.objects.exists()
    assert not AuditRecord.objects.filter(operation__in=["flag_entry", "hide_entry", "unhide_entry"]).exists()


def test_a_bad_category_is_refused_with_a_message_and_nothing_stored(branched):
    target = first_user_message(branched)
    flagger = login(staff("flagger", "view_agentsession", "flag_entry"))
    response = flagger.post(action_url(branched, "flag"), {"entry_id": target, "category": "nonsense"}, follow=True)
    assert "Flag for moderation: category:" in response.content.decode()
    assert not ModerationFlag.objects.exists()


def test_hide_and_unhide_from_the_panel_say_on_which_branches(branched):
    target = first_user_message(branched)
    moderator = login(staff("mod", "view_agentsession", "moderate_session"))
    html = panel(moderator, branched, target)
    assert "Shown to the model on every branch through it" in html
    assert 'id="hide-entry"' in html and 'id="unhide-entry"' not in html

    leaf = leaf_of(branched)
    form = {"entry_id": target, "expected_leaf": leaf, "notice": "[hidden: personal data]"}
    confirm = moderator.post(action_url(branched, "hide"), form)
    assert confirm.status_code == 200  # the confirmation page first: nothing done yet
    assert "is hidden from the model on the active branch" in confirm.content.decode()
    assert leaf_of(branched) == leaf
    done = moderator.post(action_url(branched, "hide"), {**form, "confirmed": "yes"})
    assert done.status_code == 302
    messages = provider_of(branched).build_context(branched.session_id)["messages"]
    assert "[hidden: personal data]" in str(messages) and "off by one cent" not in str(messages)
    assert AuditRecord.objects.filter(operation="hide_entry", actor="mod", channel="admin").count() == 1

    tree = moderator.get(tree_url(branched)).content.decode()
    assert f"{target} → the model gets: [hidden: personal data]" in tree  # the edit reads as what it does
    assert '"targetId"' not in tree

    html = panel(moderator, branched, target)
    # The demo's first user message leads to three branches; the edit holds on the active one only.
    assert "<strong>Hidden from the model</strong> on 1 of the 3 branches through it" in html
    assert html.count('class="is-hidden"') == 1 and html.count('class="is-shown"') == 2
    assert 'id="unhide-entry"' in html and 'id="hide-entry"' not in html

    again = moderator.post(action_url(branched, "unhide"), {"entry_id": target, "expected_leaf": leaf_of(branched)})
    assert "is shown to the model again on the active branch" in again.content.decode()
    moderator.post(
        action_url(branched, "unhide"), {"entry_id": target, "expected_leaf": leaf_of(branched), "confirmed": "yes"}
    )
    messages = provider_of(branched).build_context(branched.session_id)["messages"]
    assert "off by one cent" in str(messages) and "[hidden: personal data]" not in str(messages)
    assert "Shown to the model on every branch through it" in panel(moderator, branched, target)


def test_hiding_what_the_active_branch_does_not_hold_offers_no_confirmation(branched):
    moderator = login(staff("mod", "view_agentsession", "moderate_session"))
    provider = provider_of(branched)
    snapshot = provider.get_snapshot(branched.session_id)
    active = {e["id"] for e in provider.get_active_path(branched.session_id)}
    off_path = next(
        e["id"]
        for e in provider.list_entries(branched.session_id)
        if e["id"] not in active and e["type"] == "message" and e["message"]["role"] == "user"
    )
    html = panel(moderator, branched, off_path)
    assert 'id="hide-entry"' not in html  # offered only on the active branch
    page = moderator.post(action_url(branched, "hide"), {"entry_id": off_path, "expected_leaf": leaf_of(branched)})
    assert "is not on the active branch" in page.content.decode()
    assert 'name="confirmed"' not in page.content.decode()
    assert provider.get_snapshot(branched.session_id)["entries"] == snapshot["entries"]
