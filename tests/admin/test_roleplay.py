"""Roleplay on a session's admin pages, on both providers: the state panel at
the leaf or any entry (values with the entry behind them), the diff of two
branches, the review queue, corrections, checkpoints, repairs and archiving
the character; who may act, what is appended, what each action records, and
what the panel costs."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from roleplay import schema, service
from roleplay.reducer import make_checkpoint_data, reduce_branch
from sessiontree import services
from sessiontree.admin.plugins import CONTENT_SECURITY_POLICY
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider
from tests.roleplay.story import LONG_HAIR, SHORT_HAIR, Story, add, review

from .conftest import BUILDER, provider_of, tree_url

pytestmark = pytest.mark.django_db


# --- sessions ---------------------------------------------------------------------------------


class AdminStory(Story):
    """A story whose session the admin shows (the provider's own meta row)."""

    @property
    def row(self) -> AgentSession:
        return AgentSession.objects.get(session_id=self.session_id)


def new_story(kind: str, name: str = "rp") -> AdminStory:
    return AdminStory(get_provider(kind), session_id=f"{name}-{kind}", title=f"Alice ({kind})")


@pytest.fixture
def story(db, kind) -> tuple[AdminStory, dict[str, str]]:
    """The haircut, an event and a memory, then a rescue whose trust review is pending."""
    story = new_story(kind)
    ids = story.haircut_story()
    ids["rescue"] = story.turn(
        [add("/location", "the old bridge")],
        memories=[{"text": "the player saved her from a wolf"}],
        reviews=[review("review-trust", add("/relationship", {"user": {"trust": 0.55}}), "trust after the rescue")],
        commit_id="commit-rescue",
    )
    return story, ids


def state_url(row: AgentSession, **query: str) -> str:
    url = reverse("admin:sessiontree_agentsession_roleplay", args=[row.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def diff_url(row: AgentSession, **query: str) -> str:
    url = reverse("admin:sessiontree_agentsession_roleplay_diff", args=[row.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def rp_action(row: AgentSession, action: str) -> str:
    return reverse("admin:sessiontree_agentsession_roleplay_action", args=[row.pk, action])


def text(response) -> str:
    return html.unescape(response.content.decode())


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def entry_count(story: Story) -> int:
    return len(story.entries())


def confirm(client: Client, row: AgentSession, action: str, data: dict) -> tuple:
    """Post once (the confirmation page), then again with ``confirmed``."""
    page = client.post(rp_action(row, action), data)
    done = client.post(rp_action(row, action), {**data, "confirmed": "yes"})
    return page, done


def correction(story: Story, **fields: str) -> dict[str, str]:
    data = {"op": "replace", "path": "/appearance/hair", "value": '"chin-length"', "reason": "the barber stopped early"}
    data.update(fields)
    data.setdefault("expected_leaf", story.leaf or "-")
    return {key: value for key, value in data.items() if value is not None}


# --- the state panel ---------------------------------------------------------------------------------


def test_state_panel_shows_the_state_as_a_tree_with_the_entry_behind_each_value(admin_client, story):
    story, ids = story
    detail = service.inspect_state_detail(story.provider, story.session_id)

    response = admin_client.get(state_url(story.row))
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    page = text(response)

    assert re.search(r'id="rp-revision">2<', page) and f'title="{detail["state_hash"]}"' in page
    assert 'id="rp-character">alice<' in page and "(the leaf)" in page
    rows = re.findall(r'<tr class="rp-row rp-node-(\w+)[^"]*" data-pointer="([^"]*)">', page)
    assert rows == [
        ("object", "/appearance"),
        ("value", "/appearance/hair"),
        ("value", "/location"),
    ]
    assert f'"{SHORT_HAIR}"' in page and '"the old bridge"' in page
    # /appearance was set by the haircut turn; its hair inherits it; /location by the rescue turn.
    tree = tree_url(story.row)
    assert f'href="{tree}?focus={ids["cut"]}#entry-{ids["cut"]}"' in page
    assert f'href="{tree}?focus={ids["rescue"]}#entry-{ids["rescue"]}"' in page
    assert "commit-haircut" in page and "commit-rescue" in page
    assert "↑ with /appearance: turn" in page
    assert "Alice cut her hair" in page and "the player saved her from a wolf" in page
    assert 'id="review-review-trust"' in page and "add /relationship" in page and "trust after the rescue" in page


def test_each_value_says_whether_a_turn_a_correction_a_repair_or_a_review_set_it(admin_client, kind):
    story = new_story(kind)
    story.haircut_story()
    service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "add", "path": "/location", "value": "inn", "reason": "set at the inn"},
        actor="system",
        channel="internal",
    )
    story.mark_incomplete("turn-9")
    service.repair_turn(
        provider=story.provider,
        session_id=story.session_id,
        proposal={"turnId": "turn-9", "ops": [add("/mood", "calm")]},
        actor="system",
        channel="internal",
    )
    story.turn(reviews=[review("review-trust", add("/trust", 0.5))])
    decision = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        actor="system",
        channel="internal",
    )

    page = text(admin_client.get(state_url(story.row)))

    kinds = dict(
        re.findall(
            r'data-pointer="(/\w+)">.*?<td class="rp-set-by"><span class="rp-prov"><span class="rp-kind rp-kind-(\w+)"',
            page,
            re.S,
        )
    )
    assert kinds == {"/appearance": "turn", "/location": "correction", "/mood": "repair", "/trust": "review"}
    assert "“set at the inn”" in page and "review review-trust" in page and decision["id"] in page


def test_the_state_at_any_entry_is_read_without_moving_the_leaf_and_offers_no_action(admin_client, story):
    story, ids = story
    leaf = story.leaf

    page = text(admin_client.get(state_url(story.row, at=ids["ask_cut"])))

    assert re.search(r'id="rp-revision">0<', page) and 'id="rp-empty-state"' in page
    assert "not at the session's leaf" in page and "(on the active path, before the leaf)" in page
    assert 'id="correction-form"' not in page and "Accept…" not in page and 'id="checkpoint-now"' not in page
    assert story.leaf == leaf
    at_cut = text(admin_client.get(state_url(story.row, at=ids["cut"])))
    assert re.search(r'id="rp-revision">1<', at_cut) and f'"{SHORT_HAIR}"' in at_cut and "review-trust" not in at_cut


def test_an_unknown_entry_is_404_and_a_session_without_roleplay_says_so(admin_client, story, branched):
    story, _ids = story
    assert admin_client.get(state_url(story.row, at="nope0000")).status_code == 404

    page = text(admin_client.get(state_url(branched)))

    assert 'id="rp-no-character"' in page and 'id="correction-form"' not in page


def test_the_tree_offers_the_roleplay_pages_only_for_roleplay_sessions(admin_client, story, branched):
    story, ids = story

    assert 'id="roleplay-state"' in text(admin_client.get(tree_url(story.row)))
    assert 'id="roleplay-state"' not in text(admin_client.get(tree_url(branched)))
    panel = text(admin_client.get(tree_url(story.row, "tree_entry", ids["ask_cut"])))
    assert f'href="{state_url(story.row)}?at={ids["ask_cut"]}"' in panel
    assert "roleplay diff with the leaf" in panel


def test_the_change_form_links_the_state_panel_when_the_metadata_names_a_character(admin_client, branched):
    change_url = tree_url(branched, "change")
    assert 'id="roleplay-state"' not in text(admin_client.get(change_url))  # loads no entry: the metadata decides

    services.sessions.update_session(
        session_id=branched.session_id, metadata={"characterId": "alice"}, actor=BUILDER, channel="internal"
    )

    page = text(admin_client.get(change_url))
    assert f'id="roleplay-state" href="{state_url(branched)}">Roleplay state<' in page


def test_the_demo_roleplay_session_has_its_roleplay_pages(admin_client, roleplay):
    page = text(admin_client.get(tree_url(roleplay)))
    assert 'id="roleplay-state"' in page
    state = text(admin_client.get(state_url(roleplay)))
    assert 'data-pointer="/hair"' in state and '"short"' in state and "c1" in state


# --- roleplay entries in the tree ----------------------------------------------------------------------


def test_every_roleplay_entry_reads_as_fields_in_the_tree_never_a_python_repr(admin_client, kind):
    story = new_story(kind)
    ids = story.haircut_story()
    story.turn(reviews=[review("review-trust", add("/trust", 0.5), "after the rescue")])
    service.amend_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        value=0.6,
        actor="system",
        channel="internal",
    )
    service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        actor="system",
        channel="internal",
    )
    service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "replace", "path": "/appearance/hair", "value": "chin-length", "reason": "trimmed only"},
        actor="system",
        channel="internal",
    )
    story.mark_incomplete("turn-9")
    service.repair_turn(
        provider=story.provider,
        session_id=story.session_id,
        proposal={"turnId": "turn-9", "ops": [add("/mood", "calm")]},
        actor="system",
        channel="internal",
    )
    service.create_checkpoint(provider=story.provider, session_id=story.session_id, actor="system", channel="internal")
    service.archive(
        provider=story.provider, session_id=story.session_id, reason="story over", actor="system", channel="internal"
    )

    page = text(admin_client.get(tree_url(story.row)))
    markers = set(re.findall(r'<span class="marker marker-rp-[\w-]+">([^<]+)</span>', page))
    assert markers == {
        "rp identity",
        "rp turn",
        "rp amendment",
        "rp review",
        "rp correction",
        "rp turn status",
        "rp repair",
        "rp checkpoint",
        "rp archive",
    }
    assert 'commit: commit-haircut · ops: add /appearance = {"hair":"ear-length"}' in page
    assert "review: review-trust · value: 0.6" in page and "review: review-trust · decision: accept" in page
    assert "ops: test /appearance/hair = " not in page  # no guard given: one op
    assert re.search(r'commit: commit-\w+ · ops: replace /appearance/hair = "chin-length" · reason: trimmed only', page)
    assert "turn: turn-9 · status: incomplete" in page and "turn: turn-9 · commit: " in page
    assert "revision: 5" in page and "reason: story over" in page
    assert "{'" not in page and "'commitId'" not in page
    turn_panel = text(admin_client.get(tree_url(story.row, "tree_entry", ids["cut"])))
    assert "<caption>roleplay_finalize_turn result</caption>" in turn_panel
    assert "<th>commit</th><td>commit-haircut</td>" in turn_panel


# --- corrections ---------------------------------------------------------------------------------------------


def test_a_correction_is_checked_confirmed_and_appended_as_the_moderator(moderator_client, moderator, story):
    story, ids = story
    before = entry_count(story)

    page, done = confirm(moderator_client, story.row, "correct", correction(story, expected='"ear-length"'))

    assert page.status_code == 200
    preview = text(page)
    assert "Yes, I\u2019m sure" in preview and 'id="rp-plan-changes"' in preview
    assert '"ear-length"' in preview and '"chin-length"' in preview and "Revision 2 → <strong>3</strong>" in preview
    assert (
        "reason</strong>: the barber stopped early" in preview
        and "corrects</strong>: commit-haircut (inferred)" in preview
    )
    assert done.status_code == 302 and done["Location"] == state_url(story.row)
    assert entry_count(story) == before + 1
    entry = story.entry(story.leaf)
    assert entry["customType"] == schema.COMMIT_TYPE and entry["parentId"] == ids["rescue"]
    data = entry["data"]
    assert data["source"] == "manual-correction" and data["reason"] == "the barber stopped early"
    assert data["ops"] == [
        {"op": "test", "path": "/appearance/hair", "value": "ear-length"},
        {"op": "replace", "path": "/appearance/hair", "value": "chin-length"},
    ]
    record = AuditRecord.objects.get(session_id=story.session_id, operation="roleplay_correct_state")
    assert (record.actor, record.user_id, record.channel) == ("moderator", moderator.pk, "admin")
    log = LogEntry.objects.get(action_flag=CHANGE, object_id=str(story.row.pk))
    assert log.user_id == moderator.pk and f"as entry {entry['id']}" in log.change_message
    (message,) = messages_of(done)
    assert f"Appended correction commit {data['commitId']} as entry {entry['id']}" in message
    assert "Now: character alice, revision 3" in message
    panel = text(moderator_client.get(state_url(story.row)))
    assert '"chin-length"' in panel and "“the barber stopped early”" in panel


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({"path": "/location", "op": "remove", "value": None, "expected": '"the inn"'}, "does not apply"),
        ({"path": "/appearance/eyes"}, "does not apply to the current state"),
        ({"reason": ""}, "This field is required."),
        ({"value": "chin-length"}, "The new value is not JSON"),
        (
            {"op": "patch", "ops": '[{"op": "replace", "path": "/nowhere", "value": 1}]', "path": "", "value": None},
            "does not apply",
        ),
        ({"op": "patch", "ops": '{"op": "replace"}', "path": "", "value": None}, "invalid_roleplay_entry"),
        ({"op": "add", "expected": '"x"'}, "Only replace and remove check the recorded value."),
        (
            {"correctsCommitId": None, "corrects_commit_id": "commit-elsewhere"},
            "is not a commit of alice on the current branch",
        ),
    ],
)
def test_a_correction_the_reducer_refuses_is_shown_on_the_form_and_appends_nothing(
    moderator_client, story, fields, shown
):
    story, _ids = story
    before = entry_count(story)

    response = moderator_client.post(rp_action(story.row, "correct"), correction(story, **fields))

    assert response.status_code == 200
    page = text(response)
    assert 'id="rp-refused"' in page and shown in page and 'id="correction-form"' in page
    assert entry_count(story) == before
    assert not AuditRecord.objects.filter(session_id=story.session_id, channel="admin").exists()
    assert not LogEntry.objects.exists()


def test_a_refusal_names_the_value_in_the_way_in_json_terms_never_a_python_type(moderator_client, story):
    """Issue 25: a pointer through a string was refused with jsonpointer's
    "non-container type <class 'str'>"."""
    story, _ids = story

    response = moderator_client.post(
        rp_action(story.row, "correct"), correction(story, op="add", path="/appearance/hair/color", value='"red"')
    )

    page = text(response)
    assert 'id="rp-refused"' in page
    assert "<class" not in html.unescape(page)
    assert '/appearance/hair is a string ("ear-length"), not an object or an array' in page


def test_the_correct_link_prefills_the_form_with_the_recorded_value(admin_client, story):
    story, _ids = story

    page = text(admin_client.get(state_url(story.row, path="/appearance/hair")))

    form = page[page.index('id="correction-form"') :]
    assert 'value="/appearance/hair"' in form
    assert re.search(r'name="value"[^>]*>\s*"ear-length"</textarea>', form)
    assert re.search(r'name="expected"[^>]*>\s*"ear-length"</textarea>', form)


# --- reviews ---------------------------------------------------------------------------------------------------


def test_accepting_a_review_confirms_then_appends_the_decision(moderator_client, moderator, story):
    story, _ids = story
    before = entry_count(story)

    page, done = confirm(
        moderator_client, story.row, "accept_review", {"review_id": "review-trust", "expected_leaf": story.leaf}
    )

    assert "Yes, I\u2019m sure" in text(page) and '{"user":{"trust":0.55}}' in text(page)
    assert entry_count(story) == before + 1
    decision = story.entry(story.leaf)
    assert decision["customType"] == schema.REVIEW_DECISION_TYPE and decision["data"]["decision"] == "accept"
    assert (
        AuditRecord.objects.get(session_id=story.session_id, operation="roleplay_accept_review").user_id == moderator.pk
    )
    assert any(f"Appended acceptance of review review-trust as entry {decision['id']}" in m for m in messages_of(done))
    panel = text(moderator_client.get(state_url(story.row)))
    assert 'id="rp-no-pending"' in panel and 'data-pointer="/relationship/user/trust"' in panel
    assert re.search(
        r'rp-kind-review"[^>]*>review</span> <a class="rp-entry-link" href="[^"]*focus=' + decision["id"], panel
    )


def test_amend_keeps_the_review_pending_then_reject_is_final(moderator_client, story):
    story, _ids = story
    before = entry_count(story)

    amended = moderator_client.post(
        rp_action(story.row, "amend_review"),
        {"review_id": "review-trust", "value": '{"user": {"trust": 0.6}}', "expected_leaf": story.leaf},
    )

    assert amended.status_code == 302 and entry_count(story) == before + 1
    assert any("stays pending" in m for m in messages_of(amended))
    (pending,) = service.list_reviews(story.provider, story.session_id)
    assert pending["amendment"]["value"] == {"user": {"trust": 0.6}}
    assert "amended by" in text(moderator_client.get(state_url(story.row)))

    _page, rejected = confirm(
        moderator_client, story.row, "reject_review", {"review_id": "review-trust", "expected_leaf": story.leaf}
    )

    assert story.entry(story.leaf)["data"]["decision"] == "reject"
    assert any(f"Appended rejection of review review-trust as entry {story.leaf}" in m for m in messages_of(rejected))
    assert service.inspect_state(story.provider, story.session_id)["pending_reviews"] == []
    again = moderator_client.post(
        rp_action(story.row, "accept_review"),
        {"review_id": "review-trust", "expected_leaf": story.leaf, "confirmed": "yes"},
    )
    assert any("review_already_decided" in m for m in messages_of(again))
    assert {r.operation for r in AuditRecord.objects.filter(session_id=story.session_id, channel="admin")} == {
        "roleplay_amend_review",
        "roleplay_reject_review",
    }


def test_accept_with_a_value_appends_the_amendment_and_the_decision(moderator_client, story):
    story, _ids = story
    before = entry_count(story)

    page, _done = confirm(
        moderator_client,
        story.row,
        "accept_review",
        {"review_id": "review-trust", "value": '{"user": {"trust": 0.7}}', "expected_leaf": story.leaf},
    )

    assert "rp amendment" in text(page) and "rp review" in text(page)
    assert entry_count(story) == before + 2
    assert service.inspect_state(story.provider, story.session_id)["state"]["relationship"] == {"user": {"trust": 0.7}}


def test_an_amended_value_that_is_not_json_stays_on_its_form(moderator_client, story):
    story, _ids = story
    before = entry_count(story)

    response = moderator_client.post(
        rp_action(story.row, "amend_review"),
        {"review_id": "review-trust", "value": "{trust: high}", "expected_leaf": story.leaf},
    )

    page = text(response)
    assert response.status_code == 200 and "The value is not JSON" in page
    row = page[page.index('id="review-review-trust"') :]
    assert "{trust: high}</textarea>" in row and '<ul class="errorlist">' in row
    assert entry_count(story) == before


def test_an_unknown_review_is_refused_with_its_reason(moderator_client, story):
    story, _ids = story
    before = entry_count(story)

    done = moderator_client.post(
        rp_action(story.row, "accept_review"), {"review_id": "review-typo", "expected_leaf": story.leaf}
    )

    assert done.status_code == 302
    assert any("review_not_found" in m and "nothing was appended" in m for m in messages_of(done))
    assert entry_count(story) == before


def test_a_leaf_moved_meanwhile_refuses_the_write(moderator_client, story):
    story, _ids = story
    seen = story.leaf
    story.user("Meanwhile the agent wrote this.")
    before = entry_count(story)

    _page, done = confirm(
        moderator_client, story.row, "accept_review", {"review_id": "review-trust", "expected_leaf": seen}
    )

    assert entry_count(story) == before
    assert any("leaf_conflict" in m for m in messages_of(done))


# --- checkpoint, repair, archive ---------------------------------------------------------------------------------


def test_checkpoint_now_appends_a_checkpoint_without_asking(moderator_client, story):
    story, _ids = story
    state = service.inspect_state(story.provider, story.session_id)

    done = moderator_client.post(rp_action(story.row, "checkpoint"), {"expected_leaf": story.leaf})

    assert done.status_code == 302
    checkpoint = story.entry(story.leaf)
    assert checkpoint["customType"] == schema.CHECKPOINT_TYPE and checkpoint["data"]["stateHash"] == state["state_hash"]
    assert any(f"Appended checkpoint {checkpoint['id']} of alice at revision 2" in m for m in messages_of(done))
    panel = text(moderator_client.get(state_url(story.row)))
    assert f'read from checkpoint <a href="{tree_url(story.row)}?focus={checkpoint["id"]}' in panel


def test_an_incomplete_turn_shows_a_prefilled_repair_form_and_is_repaired(moderator_client, story):
    story, _ids = story
    marker = story.mark_incomplete("turn-7")

    page = text(moderator_client.get(state_url(story.row)))

    assert 'id="turn-turn-7"' in page and marker in page
    template = re.search(r'id="repair-turn-7"[^>]*>(.*?)</textarea>', page, re.S).group(1)
    assert json.loads(template) == {"turnId": "turn-7", "ops": [], "events": [], "memories": [], "reason": ""}

    proposal = json.dumps({"turnId": "turn-7", "ops": [add("/mood", "relieved")], "reason": "result lost"})
    preview, _done = confirm(
        moderator_client, story.row, "repair", {"proposal": proposal, "turn_id": "turn-7", "expected_leaf": story.leaf}
    )

    assert "Incomplete turns 1 → 0" in text(preview)
    repair = story.entry(story.leaf)
    assert repair["customType"] == schema.REPAIR_TYPE and repair["data"]["turnId"] == "turn-7"
    after = service.inspect_state(story.provider, story.session_id)
    assert after["incomplete_turns"] == [] and after["state"]["mood"] == "relieved"
    assert 'id="turn-turn-7"' not in text(moderator_client.get(state_url(story.row)))


def test_a_repair_for_a_turn_that_is_not_incomplete_comes_back_on_its_form(moderator_client, story):
    story, _ids = story
    story.mark_incomplete("turn-7")
    before = entry_count(story)

    response = moderator_client.post(
        rp_action(story.row, "repair"),
        {"proposal": json.dumps({"turnId": "turn-8", "ops": []}), "turn_id": "turn-7", "expected_leaf": story.leaf},
    )

    page = text(response)
    assert response.status_code == 200 and "not an incomplete turn on the current branch" in page
    assert '"turnId": "turn-8"' in page[page.index('id="repair-turn-7"') :]
    assert entry_count(story) == before


def test_archiving_the_character_disables_its_actions_but_keeps_the_state_readable(moderator_client, story):
    story, _ids = story

    page, _done = confirm(
        moderator_client, story.row, "archive_character", {"reason": "the story ended", "expected_leaf": story.leaf}
    )

    assert "becomes read-only on this branch" in text(page)
    # Issue 25: the page read "Archive the character of character alice".
    assert "of character" not in text(page)
    assert "Archive the character: character <strong>alice</strong>, session" in text(page)
    archive = story.entry(story.leaf)
    assert archive["customType"] == schema.ARCHIVE_TYPE and archive["data"]["reason"] == "the story ended"
    panel = text(moderator_client.get(state_url(story.row)))
    assert 'id="character-archived"' in panel and "“the story ended”" in panel
    assert 'id="correction-form"' not in panel and "Accept…" not in panel and 'id="archive-character"' not in panel
    assert '"ear-length"' in panel and 'id="checkpoint-now"' in panel  # checkpoints still work
    before = entry_count(story)
    forged = moderator_client.post(rp_action(story.row, "correct"), {**correction(story), "confirmed": "yes"})
    assert "character_archived" in text(forged) and entry_count(story) == before


# --- permissions and closed sessions ----------------------------------------------------------------------------


ACTION_POSTS = {
    "correct": lambda story: correction(story),
    "accept_review": lambda story: {"review_id": "review-trust", "expected_leaf": story.leaf},
    "reject_review": lambda story: {"review_id": "review-trust", "expected_leaf": story.leaf},
    "amend_review": lambda story: {"review_id": "review-trust", "value": "1", "expected_leaf": story.leaf},
    "checkpoint": lambda story: {"expected_leaf": story.leaf},
    "repair": lambda story: {"proposal": '{"turnId": "t", "ops": []}', "expected_leaf": story.leaf},
    "archive_character": lambda story: {"expected_leaf": story.leaf},
}


def test_view_only_staff_see_the_state_but_no_action_and_get_403_on_a_forged_post(viewer_client, story):
    story, _ids = story
    story.mark_incomplete("turn-7")

    page = text(viewer_client.get(state_url(story.row)))

    assert 'data-pointer="/appearance/hair"' in page and 'id="review-review-trust"' in page
    for control in ('id="correction-form"', "Accept…", "Reject…", 'id="checkpoint-now"', 'id="archive-character"',
                    'id="repair-turn-7"', "correct…"):  # fmt: skip
        assert control not in page
    before = entry_count(story)
    for action, data in ACTION_POSTS.items():
        response = viewer_client.post(rp_action(story.row, action), {**data(story), "confirmed": "yes"})
        assert response.status_code == 403, action
    assert entry_count(story) == before
    assert not AuditRecord.objects.filter(session_id=story.session_id, channel="admin").exists()


def test_roleplay_pages_need_staff_and_actions_need_post(client, admin_client, story, django_user_model):
    story, _ids = story
    assert client.get(state_url(story.row)).status_code == 302  # to the login page
    outsider = django_user_model.objects.create_user("outsider", password="pw", is_staff=True)
    client.force_login(outsider)
    assert client.get(state_url(story.row)).status_code == 403
    assert client.get(diff_url(story.row)).status_code == 403
    assert admin_client.get(rp_action(story.row, "checkpoint")).status_code == 405
    assert admin_client.post(rp_action(story.row, "rewrite_history"), {}).status_code == 404


@pytest.mark.parametrize("status", ["archived", "deleted"])
def test_a_closed_session_shows_its_banner_and_refuses_every_roleplay_action(admin_client, story, status):
    story, _ids = story
    close = services.sessions.archive_session if status == "archived" else services.sessions.delete_session
    close(session_id=story.session_id, actor=BUILDER, channel="internal")
    before = entry_count(story)

    page = text(admin_client.get(state_url(story.row)))

    assert f"This session is {status}" in page and 'data-pointer="/appearance/hair"' in page
    assert 'id="correction-form"' not in page and 'id="checkpoint-now"' not in page and "Accept…" not in page
    for action, data in ACTION_POSTS.items():
        done = admin_client.post(rp_action(story.row, action), {**data(story), "confirmed": "yes"})
        assert done.status_code == 302, action
        assert any(f"is {status}; restore it first" in m for m in messages_of(done)), action
    assert entry_count(story) == before


# --- the diff ------------------------------------------------------------------------------------------------------


def test_the_diff_of_two_branches_names_every_change_and_the_entries_behind_it(admin_client, kind):
    story = new_story(kind)
    ids = story.haircut_story()
    story.turn([add("/location", "the inn")], commit_id="commit-inn")
    left = story.leaf
    story.provider.switch_leaf(story.session_id, ids["ask_cut"])
    story.assistant("Alice keeps her hair and dyes it red.")
    right_turn = story.turn(
        [add("/appearance", {"hair": LONG_HAIR, "colour": "red"}), add("/mood", "playful")], commit_id="commit-dye"
    )

    page = text(admin_client.get(diff_url(story.row, **{"from": left, "to": right_turn})))

    assert f'id="rp-common-ancestor">{ids["ask_cut"]}<' in page
    changed = page[page.index('id="rp-diff-changed"') : page.index('id="rp-diff-added"')]
    assert 'data-pointer="/appearance/hair"' in changed and f'"{SHORT_HAIR}"' in changed and f'"{LONG_HAIR}"' in changed
    assert f"focus={ids['cut']}" in changed and f"focus={right_turn}" in changed
    assert "commit-haircut" in changed and "commit-dye" in changed
    added = page[page.index('id="rp-diff-added"') : page.index('id="rp-diff-removed"')]
    assert 'data-pointer="/appearance/colour"' in added and 'data-pointer="/mood"' in added
    assert "never set on this side" in added
    removed = page[page.index('id="rp-diff-removed"') :]
    assert 'data-pointer="/location"' in removed and "commit-inn" in removed
    assert re.search(r"<th>from</th><td><a [^>]*><code>" + left + r"</code></a></td><td>alice</td><td>2</td>", page)
    assert re.search(
        r"<th>to</th><td><a [^>]*><code>" + right_turn + r"</code></a> \(the leaf\)</td><td>alice</td><td>1</td>", page
    )

    same = text(admin_client.get(diff_url(story.row, to=right_turn)))
    assert 'id="rp-diff-same"' in same
    unknown = text(admin_client.get(diff_url(story.row, to="nope0000")))
    assert "entry_not_found" in unknown


# --- what it costs ---------------------------------------------------------------------------------------------------


def long_roleplay_entries(turns: int) -> list[dict]:
    """A roleplay branch of ``turns`` turns (four entries each) with a checkpoint every 200 entries."""
    entries: list[dict] = []

    def append(body: dict) -> None:
        parent = entries[-1]["id"] if entries else None
        entries.append(
            {"id": f"{len(entries) + 1:08x}", "parentId": parent, "timestamp": "2026-04-19T00:00:00.000Z", **body}
        )

    append({"type": "custom", "customType": schema.IDENTITY_TYPE, "data": {"characterId": "alice"}})
    for turn in range(turns):
        if len(entries) // 200 > sum(e.get("customType") == schema.CHECKPOINT_TYPE for e in entries):
            append(
                {
                    "type": "custom",
                    "customType": schema.CHECKPOINT_TYPE,
                    "data": make_checkpoint_data(reduce_branch(entries)),
                }
            )
        append({"type": "message", "message": {"role": "user", "content": f"turn {turn}"}})
        append({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}})
        commit = {
            "commitId": f"commit-{turn}",
            "ops": [add("/turn", turn) if turn == 0 else {"op": "replace", "path": "/turn", "value": turn}],
            "events": [f"turn {turn}"],
            "reviews": [review(f"review-{turn}", add(f"/r{turn}", turn))] if turn % 25 == 0 else [],
        }
        message = schema.build_turn_result_message(tool_call_id=f"call-{turn}", character_id="alice", commit=commit)
        append({"type": "message", "message": message})
    return entries


def test_the_state_panel_costs_a_number_of_queries_that_does_not_grow_with_the_branch(admin_client, kind):
    small = new_story(kind, "small")
    small.haircut_story()
    urls = {"small": state_url(small.row)}
    for name, turns in (("big", 450), ("bigger", 900)):
        session_id = f"{name}-{kind}"
        services.sessions.create_session(
            actor=BUILDER, channel="internal", kind=kind, session_id=session_id, entries=long_roleplay_entries(turns)
        )
        row = AgentSession.objects.get(session_id=session_id)
        urls[name] = state_url(row)
        urls[f"{name}-back"] = state_url(row, at=provider_of(row).get_active_path(session_id)[-600]["id"])
    assert AgentSession.objects.get(session_id=f"bigger-{kind}").entry_count > 2_700
    counts = {}
    for name, url in urls.items():
        admin_client.get(url)  # the tree's shape is kept per process after the first view, as on the tree page
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(url)
        assert response.status_code == 200, name
        counts[name] = len(queries.captured_queries)
        if name == "bigger":
            page = text(response)
            assert re.search(r'id="rp-revision">900<', page) and "The latest 50 of 900" in page

    # The reduction reads from the latest checkpoint: the same reads for 1,350 or 2,700 entries, at the leaf
    # or not; a short session is read in one chunk, a long one in the head and the tail (one more query).
    assert counts["big"] == counts["bigger"] == counts["big-back"] == counts["bigger-back"], counts
    assert counts["bigger"] <= counts["small"] + 1 and counts["bigger"] <= 10, counts


def test_a_long_list_in_the_state_shows_its_latest_items_and_every_row_on_demand(admin_client, kind):
    story = new_story(kind)
    story.haircut_story()
    items = [{"name": f"item {n}", "tags": [n]} for n in range(120)]
    story.turn([add("/inventory", items), add("/zone", "north")], commit_id="commit-inventory")

    page = text(admin_client.get(state_url(story.row)))

    pointers = re.findall(r'<tr class="rp-row[^"]*" data-pointer="([^"]*)">', page)
    shown_items = sorted({int(p.split("/")[2]) for p in pointers if p.startswith("/inventory/")})
    assert shown_items == list(range(70, 120))  # the latest 50
    assert "… 70 earlier items (show every row)" in page
    assert "/inventory/119/tags/0" in pointers and "/zone" in pointers and "/appearance/hair" in pointers
    everything = text(admin_client.get(state_url(story.row, rows="all")))
    assert len(re.findall(r'data-pointer="/inventory/\d+"', everything)) == 120
    assert "earlier items" not in everything


def test_shown_rows_keeps_nested_lists_and_caps_the_tree():
    from roleplay.admin.pages import ARRAY_ITEMS_SHOWN, ROWS_SHOWN, shown_rows
    from roleplay.inspection import state_rows

    document = {"a": [[i] * 3 for i in range(ARRAY_ITEMS_SHOWN + 5)], "b": {"c": list(range(ARRAY_ITEMS_SHOWN + 1))}}
    rows = shown_rows(state_rows(document, {}))

    hidden = [(r["pointer"], r["size"]) for r in rows if r["node"] == "hidden"]
    assert hidden == [("/a/0", 5), ("/b/c/0", 1)]
    items = [r["pointer"] for r in rows if r["depth"] == 1 and r["pointer"].startswith("/a/")]
    assert items[0] == "/a/0" and items[1] == "/a/5" and len(items) == 1 + ARRAY_ITEMS_SHOWN
    assert "/a/5/2" in {r["pointer"] for r in rows} and "/a/4/0" not in {r["pointer"] for r in rows}
    assert [r["pointer"] for r in rows][-1] == f"/b/c/{ARRAY_ITEMS_SHOWN}"

    wide = {f"k{n:04}": n for n in range(ROWS_SHOWN + 10)}
    capped = shown_rows(state_rows(wide, {}))
    assert len(capped) == ROWS_SHOWN + 1 and capped[-1]["node"] == "hidden"
    assert len(shown_rows(state_rows(wide, {}), everything=True)) == ROWS_SHOWN + 10
