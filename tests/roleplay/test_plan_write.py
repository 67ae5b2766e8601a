"""``plan_write`` (a write's own checks, nothing appended: what it would
append and the state after) and ``expected_leaf_id`` (a write refused when
the leaf is not the one the caller saw), on every provider. The admin's
confirmation pages are built on them."""

from __future__ import annotations

import pytest

from roleplay import schema, service
from roleplay.errors import CharacterArchived, ReviewNotFound
from roleplay.schema import RoleplayValidationError
from sessiontree.core.errors import LeafConflict
from sessiontree.models import AuditRecord

from .story import SHORT_HAIR, Story, add, review


@pytest.fixture
def story(provider):
    story = Story(provider)
    story.haircut_story()
    story.turn(reviews=[review("review-trust", add("/trust", 0.5), "after the rescue")], commit_id="commit-rescue")
    return story


def unchanged(story: Story, before: list) -> bool:
    return story.entries() == before and not AuditRecord.objects.filter(session_id=story.session_id).exists()


def test_a_planned_correction_says_what_it_appends_and_changes_and_appends_nothing(story):
    before = story.entries()
    payload = {"op": "replace", "path": "/appearance/hair", "from": SHORT_HAIR, "value": "chin-length", "reason": "r"}

    plan = service.plan_write(service.correct_state, **story.at, payload=payload)

    assert unchanged(story, before)
    assert plan["operation"] == "roleplay_correct_state" and plan["leaf_entry_id"] == story.leaf
    (entry,) = plan["entries"]
    assert entry["customType"] == schema.COMMIT_TYPE and entry["parentId"] == story.leaf and entry["id"] == "new-1"
    assert entry["data"]["source"] == "manual-correction" and entry["data"]["correctsCommitId"] == "commit-haircut"
    assert plan["changes"] == {
        "changed": [{"pointer": "/appearance/hair", "old_value": SHORT_HAIR, "new_value": "chin-length"}],
        "added": [],
        "removed": [],
    }
    assert (plan["before"]["revision"], plan["after"]["revision"]) == (2, 3)

    written = service.correct_state(
        provider=story.provider, session_id=story.session_id, payload=payload, actor="system", channel="internal"
    )
    after = service.inspect_state(story.provider, story.session_id)
    assert after["state_hash"] == plan["after"]["state_hash"] and after["revision"] == plan["after"]["revision"]
    assert written["data"]["ops"] == entry["data"]["ops"]


def test_a_planned_accept_with_a_value_lists_both_entries(story):
    before = story.entries()

    plan = service.plan_write(service.decide_review, **story.at, review_id="review-trust", decision="accept", value=0.7)

    assert unchanged(story, before)
    assert [e["customType"] for e in plan["entries"]] == [schema.REVIEW_AMENDMENT_TYPE, schema.REVIEW_DECISION_TYPE]
    assert plan["entries"][1]["parentId"] == "new-1"
    assert plan["changes"]["added"] == [{"pointer": "/trust", "new_value": 0.7}]
    assert plan["before"]["pending_reviews"] and not plan["after"]["pending_reviews"]


def test_a_plan_raises_what_the_write_would_raise(story):
    before = story.entries()
    with pytest.raises(RoleplayValidationError, match="does not apply"):
        service.plan_write(
            service.correct_state, **story.at, payload={"op": "remove", "path": "/nowhere", "reason": "r"}
        )
    with pytest.raises(ReviewNotFound):
        service.plan_write(service.decide_review, **story.at, review_id="review-typo", decision="accept")
    service.archive(provider=story.provider, session_id=story.session_id, actor="system", channel="internal")
    with pytest.raises(CharacterArchived):
        service.plan_write(service.amend_review, **story.at, review_id="review-trust", value=1)
    assert len(story.entries()) == len(before) + 1  # the archive only


def test_plan_write_refuses_what_is_not_a_roleplay_write(story):
    with pytest.raises(RuntimeError, match="not a roleplay write"):
        service.plan_write(service.inspect_state, provider=story.provider, session_id=story.session_id)


@pytest.mark.parametrize(
    ("write", "args"),
    [
        (service.correct_state, {"payload": {"op": "add", "path": "/mood", "value": "calm", "reason": "r"}}),
        (service.decide_review, {"review_id": "review-trust", "decision": "accept"}),
        (service.amend_review, {"review_id": "review-trust", "value": 0.6}),
        (service.create_checkpoint, {}),
        (service.archive, {}),
    ],
)
def test_a_write_for_a_leaf_the_caller_did_not_see_is_refused(story, write, args):
    seen = story.leaf
    story.user("Meanwhile, a new message.")
    before = story.entries()

    with pytest.raises(LeafConflict, match=f"not {seen}"):
        write(**story.at, **args, expected_leaf_id=seen)

    assert story.entries() == before
    written = write(**story.at, **args, expected_leaf_id=story.leaf)
    assert written["parentId"] == before[-1]["id"]


def test_a_repair_for_a_leaf_the_caller_did_not_see_is_refused(story):
    story.mark_incomplete("turn-7")
    seen = story.leaf
    story.assistant("…")
    with pytest.raises(LeafConflict):
        service.repair_turn(
            provider=story.provider,
            session_id=story.session_id,
            proposal={"turnId": "turn-7", "ops": []},
            expected_leaf_id=seen,
            actor="system",
            channel="internal",
        )
    assert service.inspect_state(story.provider, story.session_id)["incomplete_turns"]
