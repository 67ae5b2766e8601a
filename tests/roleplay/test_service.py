"""roleplay.service on every provider: reads, validated appends, reviews, repair, archive, checkpoints."""

from __future__ import annotations

import contextlib

import pytest

from roleplay import schema, service
from roleplay.schema import RoleplayValidationError
from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.errors import EntryNotFound, LeafConflict, SessionNotFound

from .story import SHORT_HAIR, FakeSummarizer, Story, add, review

TRUST_REVIEW = review("review-trust", add("/relationship", {"user": {"trust": 0.55}}), "trust after the rescue")


@pytest.fixture
def story(provider):
    return Story(provider)


def appended_nothing(story, before):
    return story.entries() == before and story.leaf == before[-1]["id"]


# --- reading ---


def test_inspect_state_at_the_leaf_and_at_any_entry_without_moving_the_leaf(story):
    ids = story.haircut_story()
    leaf = story.leaf
    at_leaf = service.inspect_state(story.provider, story.session_id)
    assert at_leaf["character_id"] == "alice"
    assert at_leaf["state"] == {"appearance": {"hair": SHORT_HAIR}} and at_leaf["revision"] == 1
    before_cut = service.inspect_state(story.provider, story.session_id, leaf_entry_id=ids["reply"])
    assert before_cut["state"] == {} and before_cut["revision"] == 0
    assert story.leaf == leaf


def test_inspect_state_of_a_session_without_roleplay_entries(story):
    story.user("hi")
    state = service.inspect_state(story.provider, story.session_id)
    assert state["character_id"] is None and state["state"] == {} and state["revision"] == 0


def test_inspect_state_unknown_session_or_entry(story):
    with pytest.raises(SessionNotFound):
        service.inspect_state(story.provider, "no-such-session")
    with pytest.raises(EntryNotFound):
        service.inspect_state(story.provider, story.session_id, leaf_entry_id="deadbeef")


# --- correction ---


@pytest.mark.parametrize(
    "payload",
    [
        {"op": "replace", "path": "/appearance/hair", "value": "long"},
        {"op": "replace", "path": "/appearance/hair", "value": "long", "reason": "   "},
        {"op": "replace", "path": "/appearance/hair", "value": "long", "reason": "x", "reasn": "typo"},
        {"op": "frobnicate", "path": "/appearance/hair", "reason": "x"},
        {"op": "replace", "path": "appearance", "value": 1, "reason": "x"},
        {"ops": [], "reason": "x"},
        ["not", "an", "object"],
    ],
)
def test_bad_correction_is_refused_and_nothing_is_appended(story, payload):
    story.haircut_story()
    before = story.entries()
    with pytest.raises(RoleplayValidationError):
        service.correct_state(
            provider=story.provider, session_id=story.session_id, payload=payload, actor="system", channel="internal"
        )
    assert appended_nothing(story, before)


def test_correction_missing_reason_names_reason(story):
    story.haircut_story()
    with pytest.raises(RoleplayValidationError, match="'reason' is required"):
        service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={"op": "add", "path": "/location", "value": "inn"},
            actor="system",
            channel="internal",
        )


def test_correction_is_a_commit_on_the_current_branch_with_provenance(story):
    ids = story.haircut_story()
    payload = {
        "op": "replace",
        "path": "/appearance/hair",
        "from": SHORT_HAIR,
        "value": "chin-length",
        "reason": "the barber stopped early",
        "correctsCommitId": "commit-haircut",
    }
    entry = service.correct_state(
        provider=story.provider, session_id=story.session_id, payload=payload, actor="system", channel="internal"
    )

    # A child of the old leaf, which it becomes: the tree did not move anywhere else.
    assert entry["parentId"] == ids["cut"] and story.leaf == entry["id"]
    assert entry["type"] == "custom" and entry["customType"] == schema.COMMIT_TYPE
    data = entry["data"]
    assert data["source"] == "manual-correction"
    assert data["reason"] == "the barber stopped early"
    assert data["correctsCommitId"] == "commit-haircut" and "correctsCommitIdInferred" not in data
    assert data["ops"][0] == {"op": "test", "path": "/appearance/hair", "value": SHORT_HAIR}

    state = service.inspect_state(story.provider, story.session_id)
    assert state["state"] == {"appearance": {"hair": "chin-length"}}
    assert state["revision"] == 2
    assert state["provenance"]["/appearance/hair"] == entry["id"]
    assert state["last_commit_id"] == data["commitId"]


def test_correction_infers_the_corrected_commit_from_provenance(story):
    story.haircut_story()
    story.turn([add("/location", "royal capital")], commit_id="commit-arrive")
    entry = service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "replace", "path": "/appearance/hair", "value": "chin-length", "reason": "misremembered"},
        actor="system",
        channel="internal",
    )
    assert entry["data"]["correctsCommitId"] == "commit-haircut"
    assert entry["data"]["correctsCommitIdInferred"] is True


def test_correction_refuses_a_commit_id_that_is_not_on_this_branch(story):
    ids = story.haircut_story()
    story.provider.switch_leaf(story.session_id, ids["reply"])
    story.user("No haircut today.")
    story.turn([add("/mood", "calm")])
    before = story.entries()
    with pytest.raises(RoleplayValidationError, match="commit-haircut is not a commit"):
        service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={
                "op": "replace",
                "path": "/mood",
                "value": "cheerful",
                "reason": "x",
                "correctsCommitId": "commit-haircut",
            },
            actor="system",
            channel="internal",
        )
    assert appended_nothing(story, before)


def test_correction_against_another_recorded_value_is_refused(story):
    story.haircut_story()
    before = story.entries()
    with pytest.raises(RoleplayValidationError, match="does not apply"):
        service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={"op": "replace", "path": "/appearance/hair", "from": "long", "value": "bald", "reason": "x"},
            actor="system",
            channel="internal",
        )
    with pytest.raises(RoleplayValidationError, match="does not apply"):
        service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={"op": "replace", "path": "/nothing/here", "value": 1, "reason": "x"},
            actor="system",
            channel="internal",
        )
    assert appended_nothing(story, before)


def test_writes_need_a_character_on_the_branch(story):
    story.user("hi")
    before = story.entries()
    with pytest.raises(service.NoRoleplayCharacter):
        service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={"op": "add", "path": "/x", "value": 1, "reason": "r"},
            actor="system",
            channel="internal",
        )
    with pytest.raises(service.NoRoleplayCharacter):
        service.create_checkpoint(
            provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
        )
    with pytest.raises(service.NoRoleplayCharacter):
        service.archive(provider=story.provider, session_id=story.session_id, actor="system", channel="internal")
    assert appended_nothing(story, before)


class LeafMovingProvider:
    """Delegates to a real provider, but moves the leaf right after the service read the path,
    as a concurrent ``/tree`` would."""

    def __init__(self, inner, session_id, move_to):
        self._inner, self._session_id, self._move_to = inner, session_id, move_to

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def get_active_path(self, session_id, leaf_entry_id=service.UNSET):
        path = self._inner.get_active_path(session_id, leaf_entry_id)
        self._inner.switch_leaf(self._session_id, self._move_to)
        return path

    @contextlib.contextmanager
    def read(self, session_id):
        """The branch is read by key inside one consistent read: the leaf moves as it closes."""
        with self._inner.read(session_id) as view:
            yield view
        self._inner.switch_leaf(self._session_id, self._move_to)


def test_a_leaf_moved_meanwhile_gives_leaf_conflict_not_a_commit_on_the_wrong_branch(story):
    ids = story.haircut_story()
    before = story.entries()
    racing = LeafMovingProvider(story.provider, story.session_id, ids["reply"])
    with pytest.raises(LeafConflict):
        service.correct_state(
            provider=racing,
            session_id=story.session_id,
            payload={"op": "add", "path": "/x", "value": 1, "reason": "r"},
            actor="system",
            channel="internal",
        )
    assert story.entries() == before and story.leaf == ids["reply"]


# --- reviews ---


def rescue_with_review(story):
    story.user("A wolf attacks!")
    story.assistant("You drive the wolf away and Alice is safe.")
    return story.turn(events=["the player rescued Alice"], reviews=[TRUST_REVIEW], commit_id="commit-rescue")


def test_list_reviews_pending_then_all(story):
    rescue_with_review(story)
    [pending] = service.list_reviews(story.provider, story.session_id)
    assert pending["reviewId"] == "review-trust" and pending["status"] == "pending"
    assert pending["commitId"] == "commit-rescue"
    service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="reject",
        actor="system",
        channel="internal",
    )
    assert service.list_reviews(story.provider, story.session_id) == []
    [decided] = service.list_reviews(story.provider, story.session_id, include_decided=True)
    assert decided["status"] == "rejected"


def test_accept_applies_the_proposed_op(story):
    turn = rescue_with_review(story)
    entry = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        actor="system",
        channel="internal",
    )
    assert entry["parentId"] == turn and entry["customType"] == schema.REVIEW_DECISION_TYPE
    assert entry["data"] == {"reviewId": "review-trust", "characterId": "alice", "decision": "accept"}
    state = service.inspect_state(story.provider, story.session_id)
    assert state["state"] == {"relationship": {"user": {"trust": 0.55}}}
    assert state["provenance"]["/relationship"] == entry["id"]


def test_amend_then_accept_uses_the_amended_value(story):
    rescue_with_review(story)
    amendment = service.amend_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        value={"user": {"trust": 0.4}},
        actor="system",
        channel="internal",
    )
    assert amendment["customType"] == schema.REVIEW_AMENDMENT_TYPE
    [pending] = service.list_reviews(story.provider, story.session_id)
    assert pending["amendment"]["value"] == {"user": {"trust": 0.4}}
    service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        actor="system",
        channel="internal",
    )
    assert service.inspect_state(story.provider, story.session_id)["state"] == {
        "relationship": {"user": {"trust": 0.4}}
    }


def test_accept_with_a_value_appends_the_amendment_then_the_decision(story):
    turn = rescue_with_review(story)
    decision = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        value={"user": {"trust": 0.7}},
        actor="system",
        channel="internal",
    )
    amendment = story.entry(decision["parentId"])
    assert amendment["customType"] == schema.REVIEW_AMENDMENT_TYPE and amendment["parentId"] == turn
    state = service.inspect_state(story.provider, story.session_id)
    assert state["state"] == {"relationship": {"user": {"trust": 0.7}}} and state["revision"] == 2


def test_bad_review_decisions_are_refused_and_nothing_is_appended(story):
    rescue_with_review(story)
    story.turn(reviews=[review("review-forget", {"op": "remove", "path": "/secret"})])
    before = story.entries()
    cases = [
        ("review-trust", "maybe", {}),
        ("review-trust", "reject", {"value": 1}),
        # Accepting would fail: /secret does not exist.
        ("review-forget", "accept", {}),
        # A remove has no value to amend.
        ("review-forget", "accept", {"value": 1}),
    ]
    for review_id, decision, kwargs in cases:
        with pytest.raises(RoleplayValidationError):
            service.decide_review(**story.at, review_id=review_id, decision=decision, **kwargs)
    with pytest.raises(RoleplayValidationError, match="no value to amend"):
        service.amend_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-forget",
            value=1,
            actor="system",
            channel="internal",
        )
    with pytest.raises(RoleplayValidationError, match="not plain JSON"):
        service.amend_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            value={1, 2},
            actor="system",
            channel="internal",
        )
    for decision in ("accept", "reject"):
        with pytest.raises(service.ReviewNotFound, match="review-unknown"):
            service.decide_review(
                provider=story.provider,
                session_id=story.session_id,
                review_id="review-unknown",
                decision=decision,
                actor="system",
                channel="internal",
            )
    with pytest.raises(service.ReviewNotFound, match="review-unknown"):
        service.amend_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-unknown",
            value=1,
            actor="system",
            channel="internal",
        )
    assert appended_nothing(story, before)


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, {"user": {1: "int key"}}])
def test_values_the_storage_codec_refuses_are_typed_errors_not_crashes(story, value):
    # Plain `json` takes these; the providers' orjson codec does not, and used
    # to fail the append with a bare TypeError.
    rescue_with_review(story)
    before = story.entries()
    with pytest.raises(RoleplayValidationError, match="not plain JSON"):
        service.amend_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            value=value,
            actor="system",
            channel="internal",
        )
    with pytest.raises(RoleplayValidationError, match="not plain JSON"):
        service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={"op": "add", "path": "/n", "value": value, "reason": "r"},
            actor="system",
            channel="internal",
        )
    assert appended_nothing(story, before)


def test_a_decided_review_cannot_be_decided_again(story):
    rescue_with_review(story)
    decision = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        actor="system",
        channel="internal",
    )
    before = story.entries()
    with pytest.raises(
        service.ReviewAlreadyDecided, match=f"already accepted on this branch \\(entry {decision['id']}"
    ):
        service.decide_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            decision="reject",
            actor="system",
            channel="internal",
        )
    with pytest.raises(service.ReviewAlreadyDecided):
        service.amend_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            value=0.9,
            actor="system",
            channel="internal",
        )
    assert appended_nothing(story, before)


# --- checkpoints ---


def test_checkpoint_is_the_leafs_child_and_the_reducer_starts_from_it(story):
    story.haircut_story()
    leaf = story.leaf
    before = service.inspect_state(story.provider, story.session_id)
    entry = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    assert entry["parentId"] == leaf and entry["customType"] == schema.CHECKPOINT_TYPE
    assert entry["data"]["stateHash"] == before["state_hash"] and entry["data"]["revision"] == 1
    schema.validate_checkpoint_data(entry["data"])
    after = service.inspect_state(story.provider, story.session_id)
    assert after["checkpoint_entry_id"] == entry["id"]
    assert (after["state"], after["revision"], after["events"]) == (before["state"], 1, before["events"])


# --- turn repair ---


def test_repair_completes_an_incomplete_turn(story):
    story.haircut_story()
    story.user("Let's go to the capital.")
    story.mark_incomplete("turn-7")
    assert [t["turnId"] for t in service.inspect_state(story.provider, story.session_id)["incomplete_turns"]] == [
        "turn-7"
    ]
    entry = service.repair_turn(
        provider=story.provider,
        session_id=story.session_id,
        proposal={
            "turnId": "turn-7",
            "ops": [add("/location", "royal capital")],
            "events": ["arrived"],
            "reason": "lost",
        },
        actor="system",
        channel="internal",
    )
    assert entry["customType"] == schema.REPAIR_TYPE and entry["data"]["commit"]["source"] == "repair"
    state = service.inspect_state(story.provider, story.session_id)
    assert state["incomplete_turns"] == []
    assert state["state"]["location"] == "royal capital" and state["revision"] == 2
    assert state["events"][-1] == "arrived"


@pytest.mark.parametrize(
    ("proposal", "message"),
    [
        ({"turnId": "turn-8", "ops": []}, "not an incomplete turn"),
        ({"ops": []}, "'turnId' is required"),
        ({"turnId": "turn-7", "ops": [{"op": "remove", "path": "/nowhere"}]}, "does not apply"),
        ({"turnId": "turn-7", "ops": [], "reviews": [TRUST_REVIEW, TRUST_REVIEW]}, "proposed twice"),
        ({"turnId": "turn-7", "ops": [], "colour": "red"}, "unknown field"),
    ],
)
def test_bad_repairs_are_refused(story, proposal, message):
    story.haircut_story()
    story.mark_incomplete("turn-7")
    before = story.entries()
    with pytest.raises(RoleplayValidationError, match=message):
        service.repair_turn(
            provider=story.provider, session_id=story.session_id, proposal=proposal, actor="system", channel="internal"
        )
    assert appended_nothing(story, before)


# --- archive ---


def test_archive_makes_the_character_read_only_on_this_branch(story):
    ids = story.haircut_story()
    story.turn(reviews=[TRUST_REVIEW])
    story.mark_incomplete("turn-9")
    entry = service.archive(
        provider=story.provider,
        session_id=story.session_id,
        reason="story finished",
        actor="system",
        channel="internal",
    )
    assert entry["customType"] == schema.ARCHIVE_TYPE
    assert entry["data"] == {"characterId": "alice", "reason": "story finished"}
    before = story.entries()

    writes = [
        lambda: service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={"op": "add", "path": "/x", "value": 1, "reason": "r"},
            actor="system",
            channel="internal",
        ),
        lambda: service.decide_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            decision="accept",
            actor="system",
            channel="internal",
        ),
        lambda: service.amend_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            value=1,
            actor="system",
            channel="internal",
        ),
        lambda: service.repair_turn(
            provider=story.provider,
            session_id=story.session_id,
            proposal={"turnId": "turn-9", "ops": []},
            actor="system",
            channel="internal",
        ),
        lambda: service.archive(
            provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
        ),
    ]
    for write in writes:
        with pytest.raises(service.CharacterArchived, match=entry["id"]):
            write()
    assert appended_nothing(story, before)

    state = service.inspect_state(story.provider, story.session_id)
    assert state["archived"] and state["state"] == {"appearance": {"hair": SHORT_HAIR}}
    # A checkpoint changes nothing, so it is still allowed.
    checkpoint = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    assert checkpoint["data"]["archived"] is True

    # Branch-local: before the archive entry the character is writable again.
    story.provider.switch_leaf(story.session_id, ids["cut"])
    service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "replace", "path": "/appearance/hair", "value": "long", "reason": "r"},
        actor="system",
        channel="internal",
    )
    assert not service.inspect_state(story.provider, story.session_id)["archived"]


# --- compaction wrapper, without roleplay ---


def test_compaction_of_a_session_without_a_character_appends_no_checkpoint(story):
    for n in range(4):
        story.user(f"question {n} " + "words " * 200)
        story.assistant(f"answer {n} " + "words " * 200)
    result = service.compact_with_checkpoint(
        provider=story.provider,
        session_id=story.session_id,
        summarizer=FakeSummarizer("summary"),
        settings=CompactionSettings(keep_recent_tokens=50),
        actor="system",
        channel="internal",
    )
    assert result["compaction"] is not None and result["checkpoint"] is None
    assert story.leaf == result["compaction"]["id"]


def test_nothing_to_compact_appends_nothing(story):
    story.haircut_story()
    before = story.entries()
    # Everything fits in the kept region: there is nothing to summarize.
    result = service.compact_with_checkpoint(
        provider=story.provider,
        session_id=story.session_id,
        summarizer=FakeSummarizer("s"),
        actor="system",
        channel="internal",
    )
    assert result == {"compaction": None, "checkpoint": None}
    assert appended_nothing(story, before)


def test_a_write_racing_the_compaction_means_no_checkpoint_rather_than_a_misplaced_one(story):
    """The automatic checkpoint must be the compaction's child or nothing at all."""

    class RacingProvider:
        # Delegates everything; right after the compaction is appended, another writer appends.
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def transact(self, session_id, work, **kwargs):
            written = self._inner.transact(session_id, work, **kwargs)
            if isinstance(written, dict) and written.get("type") == "compaction":
                self._inner.append_message(session_id, {"role": "user", "content": "meanwhile", "timestamp": 1})
            return written

    story.haircut_story()
    for n in range(3):
        story.user(f"chapter {n} " + "words " * 200)
        story.assistant(f"reply {n} " + "words " * 200)
    result = service.compact_with_checkpoint(
        provider=RacingProvider(story.provider),
        session_id=story.session_id,
        summarizer=FakeSummarizer("summary"),
        settings=CompactionSettings(keep_recent_tokens=50),
        actor="system",
        channel="internal",
    )
    assert result["compaction"] is not None and result["checkpoint"] is None
    assert [e for e in story.entries() if e.get("customType") == schema.CHECKPOINT_TYPE] == []
    assert story.entry(story.leaf)["parentId"] == result["compaction"]["id"]
