"""The reads the faces build on, on every provider: the state with provenance
(``inspect_state_detail``), the state diff between two entries (``diff_states``),
the review queue (``list_reviews``/``get_review``/``review_queue``), the checkpoints
on a path (``list_checkpoints``) and the roleplay errors' categories."""

from __future__ import annotations

import pytest

from roleplay import errors, service
from roleplay.inspection import PROVENANCE_KINDS
from roleplay.reducer import reduce_branch
from roleplay.schema import RoleplayValidationError
from sessiontree.core.errors import CATEGORIES, CONFLICT, NOT_FOUND, EntryNotFound, SessionNotFound

from .story import LONG_HAIR, SHORT_HAIR, Story, add, review


@pytest.fixture
def story(provider):
    return Story(provider)


def kinds(detail):
    return {pointer: record["kind"] for pointer, record in detail["provenance"].items()}


# --- provenance kinds ---


def test_provenance_names_a_turn_a_correction_a_repair_and_an_accepted_review(story):
    ids = story.haircut_story()
    correction = service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "add", "path": "/location", "value": "inn", "reason": "the scene is at the inn"},
        actor="system",
        channel="internal",
    )
    story.mark_incomplete("turn-9")
    repair = service.repair_turn(
        provider=story.provider,
        session_id=story.session_id,
        proposal={"turnId": "turn-9", "ops": [add("/mood", "calm")], "reason": "lost result"},
        actor="system",
        channel="internal",
    )
    story.user("A wolf!")
    story.turn(reviews=[review("review-trust", add("/trust", 0.5), "after the rescue")], commit_id="commit-rescue")
    decision = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        value=0.6,
        actor="system",
        channel="internal",
    )

    detail = service.inspect_state_detail(story.provider, story.session_id)
    assert kinds(detail) == {"/appearance": "turn", "/location": "correction", "/mood": "repair", "/trust": "review"}
    assert set(kinds(detail).values()) <= set(PROVENANCE_KINDS)
    turn = detail["provenance"]["/appearance"]
    assert turn["entry_id"] == ids["cut"] and turn["commit_id"] == "commit-haircut" and turn["source"] == "turn"
    assert turn["reason"] is None and turn["timestamp"] == story.entry(ids["cut"])["timestamp"]
    fixed = detail["provenance"]["/location"]
    assert fixed["entry_id"] == correction["id"] and fixed["commit_id"] == correction["data"]["commitId"]
    assert fixed["reason"] == "the scene is at the inn" and fixed["source"] == "manual-correction"
    repaired = detail["provenance"]["/mood"]
    assert repaired["entry_id"] == repair["id"] and repaired["turn_id"] == "turn-9"
    assert repaired["reason"] == "lost result" and repaired["commit_id"] == repair["data"]["commit"]["commitId"]
    accepted = detail["provenance"]["/trust"]
    assert accepted["entry_id"] == decision["id"] and accepted["review_id"] == "review-trust"
    assert accepted["commit_id"] == "commit-rescue" and accepted["note"] == "after the rescue"
    assert detail["state"] == {"appearance": {"hair": SHORT_HAIR}, "location": "inn", "mood": "calm", "trust": 0.6}


def test_a_commit_entry_with_source_turn_is_a_turn_and_a_correction_of_it_shows_its_reason(story):
    # The demo data's shape: the turn's commit as a pi-roleplay-commit custom entry.
    story.user("Alice? You cut your hair!")
    commit = story.provider.append_custom_entry(
        story.session_id,
        "pi-roleplay-commit",
        {"commitId": "c1", "characterId": "alice", "source": "turn", "ops": [add("/hair", "short")]},
    )
    detail = service.inspect_state_detail(story.provider, story.session_id)
    assert detail["provenance"]["/hair"]["kind"] == "turn" and detail["provenance"]["/hair"]["entry_id"] == commit["id"]
    service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "replace", "path": "/hair", "from": "short", "value": "chin-length", "reason": "only trimmed"},
        actor="system",
        channel="internal",
    )
    record = service.inspect_state_detail(story.provider, story.session_id)["provenance"]["/hair"]
    assert (record["kind"], record["reason"], record["corrects_commit_id"]) == ("correction", "only trimmed", "c1")


def test_rows_are_the_state_in_document_order_with_inherited_provenance(story):
    ids = story.haircut_story()
    story.turn([add("/appearance/eyes", "grey"), add("/bag", ["rope", "map"])], commit_id="commit-2")
    detail = service.inspect_state_detail(story.provider, story.session_id)
    rows = [(r["pointer"], r["depth"], r["key"], r["node"], r["value"], r["size"]) for r in detail["rows"]]
    assert rows == [
        ("/appearance", 0, "appearance", "object", None, 2),
        ("/appearance/hair", 1, "hair", "value", SHORT_HAIR, None),
        ("/appearance/eyes", 1, "eyes", "value", "grey", None),
        ("/bag", 0, "bag", "array", None, 2),
        ("/bag/0", 1, 0, "value", "rope", None),
        ("/bag/1", 1, 1, "value", "map", None),
    ]
    by_pointer = {r["pointer"]: r for r in detail["rows"]}
    assert by_pointer["/appearance"]["provenance"]["entry_id"] == ids["cut"]
    assert by_pointer["/appearance"]["inherited"] is False
    # /appearance/hair came with the object the haircut added: inherited from it.
    assert by_pointer["/appearance/hair"]["provenance"]["commit_id"] == "commit-haircut"
    assert by_pointer["/appearance/hair"]["inherited"] is True
    assert by_pointer["/appearance/eyes"]["provenance"]["commit_id"] == "commit-2"
    assert by_pointer["/appearance/eyes"]["inherited"] is False
    assert by_pointer["/bag/1"]["provenance"]["pointer"] == "/bag" and by_pointer["/bag/1"]["inherited"] is True


def test_detail_at_any_entry_matches_inspect_state_and_never_moves_the_leaf(story):
    ids = story.haircut_story()
    leaf = story.leaf
    for at in (service.UNSET, ids["reply"], ids["cut"], None):
        detail = service.inspect_state_detail(story.provider, story.session_id, leaf_entry_id=at)
        plain = service.inspect_state(story.provider, story.session_id, leaf_entry_id=at)
        for key in ("character_id", "state", "revision", "state_hash", "events", "memories", "archived"):
            assert detail[key] == plain[key], (at, key)
        assert set(detail["provenance"]) == set(plain["provenance"])
    earlier = service.inspect_state_detail(story.provider, story.session_id, leaf_entry_id=ids["reply"])
    assert earlier["leaf_entry_id"] == ids["reply"] and earlier["session_leaf_entry_id"] == leaf
    assert earlier["at_session_leaf"] is False and earlier["path_length"] == 3 and earlier["rows"] == []
    at_leaf = service.inspect_state_detail(story.provider, story.session_id)
    assert at_leaf["at_session_leaf"] is True and at_leaf["leaf_entry_id"] == leaf
    assert story.leaf == leaf


def test_detail_lists_reviews_and_incomplete_turns_with_what_a_face_needs(story):
    story.haircut_story()
    turn = story.turn(
        reviews=[
            review("review-trust", add("/trust", 0.5), "after the rescue"),
            review("review-forget", {"op": "remove", "path": "/secret"}, "forget the secret"),
            review("review-fear", add("/fear", "wolves")),
        ],
        commit_id="commit-rescue",
    )
    amendment = service.amend_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        value=0.7,
        actor="system",
        channel="internal",
    )
    service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-fear",
        decision="reject",
        actor="system",
        channel="internal",
    )
    marked = story.mark_incomplete("turn-5")

    detail = service.inspect_state_detail(story.provider, story.session_id)
    trust, forget = detail["pending_reviews"]
    assert trust["reviewId"] == "review-trust" and trust["status"] == "pending"
    assert trust["op"] == add("/trust", 0.5) and trust["note"] == "after the rescue"
    assert trust["commitId"] == "commit-rescue" and trust["entryId"] == turn
    assert trust["amendment"] == {"value": 0.7, "entryId": amendment["id"]}
    assert trust["effectiveOp"] == add("/trust", 0.7)
    assert trust["amendable"] is True and trust["appliesNow"] is True and trust["applyError"] is None
    # Accepting the remove would fail now: the face can say so before anyone clicks.
    assert forget["amendable"] is False and forget["appliesNow"] is False and "/secret" in forget["applyError"]
    [fear] = detail["decided_reviews"]
    assert fear["status"] == "rejected" and fear["decision"] == "reject" and fear["amendable"] is False

    [incomplete] = detail["incomplete_turns"]
    assert incomplete["turnId"] == "turn-5" and incomplete["entryId"] == marked
    assert incomplete["markedAt"] == story.entry(marked)["timestamp"]
    template = incomplete["repairTemplate"]
    assert template["turnId"] == "turn-5" and template["ops"] == []
    # The template, filled in, is a valid repair.
    service.repair_turn(
        provider=story.provider,
        session_id=story.session_id,
        proposal={**template, "ops": [add("/x", 1)], "reason": "lost"},
        actor="system",
        channel="internal",
    )
    assert service.inspect_state_detail(story.provider, story.session_id)["incomplete_turns"] == []


def test_list_reviews_and_get_review(story):
    story.haircut_story()
    story.turn(reviews=[review("review-trust", add("/trust", 0.5))], commit_id="commit-rescue")
    [pending] = service.list_reviews(story.provider, story.session_id)
    assert pending == service.get_review(story.provider, story.session_id, "review-trust")
    decision = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        actor="system",
        channel="internal",
    )
    decided = service.get_review(story.provider, story.session_id, "review-trust")
    assert decided["status"] == "accepted" and decided["decisionEntryId"] == decision["id"]
    assert decided["appliedOp"] == decided["effectiveOp"] == add("/trust", 0.5)
    with pytest.raises(errors.ReviewNotFound):
        service.get_review(story.provider, story.session_id, "review-none")
    # On a branch before the proposal the review does not exist.
    with pytest.raises(errors.ReviewNotFound):
        service.get_review(story.provider, story.session_id, "review-trust", leaf_entry_id=story.entries()[2]["id"])


def test_review_queue_splits_pending_and_decided_and_names_the_leaf_it_read(story):
    story.haircut_story()
    story.turn(
        reviews=[review("review-trust", add("/trust", 0.5)), review("review-mood", add("/mood", "calm"))],
        commit_id="commit-rescue",
    )
    proposal_leaf = story.leaf
    queue = service.review_queue(story.provider, story.session_id)
    assert (queue["leaf_entry_id"], queue["session_leaf_entry_id"], queue["at_session_leaf"]) == (
        proposal_leaf,
        proposal_leaf,
        True,
    )
    assert queue["character_id"] == "alice"
    assert [r["reviewId"] for r in queue["pending"]] == ["review-trust", "review-mood"] and queue["decided"] == []
    assert queue["pending"] == service.list_reviews(story.provider, story.session_id)

    decision = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-mood",
        decision="reject",
        expected_leaf_id=queue["session_leaf_entry_id"],
        actor="system",
        channel="internal",
    )
    after = service.review_queue(story.provider, story.session_id)
    assert [r["reviewId"] for r in after["pending"]] == ["review-trust"]
    assert [(r["reviewId"], r["status"], r["decisionEntryId"]) for r in after["decided"]] == [
        ("review-mood", "rejected", decision["id"])
    ]
    assert after["pending"] + after["decided"] == service.list_reviews(
        story.provider, story.session_id, include_decided=True
    )
    # At an earlier entry: that branch's queue, and the session's leaf is reported apart.
    earlier = service.review_queue(story.provider, story.session_id, leaf_entry_id=proposal_leaf)
    assert [r["reviewId"] for r in earlier["pending"]] == ["review-trust", "review-mood"]
    assert (earlier["leaf_entry_id"], earlier["session_leaf_entry_id"], earlier["at_session_leaf"]) == (
        proposal_leaf,
        decision["id"],
        False,
    )
    assert story.leaf == decision["id"]  # reading never moves the leaf
    with pytest.raises(EntryNotFound):
        service.review_queue(story.provider, story.session_id, leaf_entry_id="deadbeef")
    with pytest.raises(SessionNotFound):
        service.review_queue(story.provider, "no-such-session")


def test_list_checkpoints_on_the_path_only_root_first(story):
    ids = story.haircut_story()
    first = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    story.turn([add("/location", "royal capital")])
    second = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    leaf_a = story.leaf

    listed = service.list_checkpoints(story.provider, story.session_id)
    assert [c["entry_id"] for c in listed["checkpoints"]] == [first["id"], second["id"]]
    record = listed["checkpoints"][1]
    assert record == {
        "entry_id": second["id"],
        "parent_id": second["parentId"],
        "timestamp": second["timestamp"],
        "character_id": "alice",
        "revision": 2,
        "state_hash": second["data"]["stateHash"],
        "trigger": None,
        "compaction_entry_id": None,
        "valid": True,
        "problem": None,
    }
    assert (listed["leaf_entry_id"], listed["at_session_leaf"]) == (leaf_a, True)

    # Another branch: the checkpoints of the first are not on its path.
    service.history_goto(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        actor="system",
        channel="internal",
    )
    story.user("Stay in the village.")
    assert service.list_checkpoints(story.provider, story.session_id)["checkpoints"] == []
    third = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    assert [c["entry_id"] for c in service.list_checkpoints(story.provider, story.session_id)["checkpoints"]] == [
        third["id"]
    ]
    at_a = service.list_checkpoints(story.provider, story.session_id, leaf_entry_id=leaf_a)
    assert [c["entry_id"] for c in at_a["checkpoints"]] == [first["id"], second["id"]]
    assert at_a["at_session_leaf"] is False
    # Filtered by character; one that is not valid is listed with its reason.
    assert service.list_checkpoints(story.provider, story.session_id, character_id="bob")["checkpoints"] == []
    forged = {**third["data"], "stateHash": "0" * 64}
    bad = story.provider.append_custom_entry(story.session_id, "pi-roleplay-checkpoint", forged)
    [*_, listed_bad] = service.list_checkpoints(story.provider, story.session_id, character_id="alice")["checkpoints"]
    assert listed_bad["entry_id"] == bad["id"] and listed_bad["valid"] is False
    assert "stateHash" in (listed_bad["problem"] or "")
    with pytest.raises(EntryNotFound):
        service.list_checkpoints(story.provider, story.session_id, leaf_entry_id="deadbeef")
    with pytest.raises(SessionNotFound):
        service.list_checkpoints(story.provider, "no-such-session")


def test_detail_unknown_session_or_entry(story):
    story.haircut_story()
    with pytest.raises(SessionNotFound):
        service.inspect_state_detail(story.provider, "no-such-session")
    with pytest.raises(EntryNotFound, match=story.session_id):
        service.inspect_state_detail(story.provider, story.session_id, leaf_entry_id="deadbeef")


# --- diff ---


def braid_branch(story, ids):
    """Back before the haircut (``/tree`` to the request), then another path: Alice braids her hair."""
    moved = service.history_goto(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        actor="system",
        channel="internal",
    )
    assert moved["leaf_entry_id"] == ids["reply"]
    story.user("Please don't cut your hair. Braid it?")
    return story.turn(
        [add("/appearance", {"hair": "braided"}), add("/location", "river")],
        events=["Alice braided her hair"],
        commit_id="commit-braid",
    )


def test_diff_between_two_branches_of_the_haircut_story(story):
    ids = story.haircut_story()
    braid = braid_branch(story, ids)

    diff = service.diff_states(story.provider, story.session_id, ids["cut"], braid)
    assert diff["character_id"] == "alice" and diff["common_ancestor_entry_id"] == ids["reply"]
    assert diff["from"]["entry_id"] == ids["cut"] and diff["to"]["entry_id"] == braid
    assert diff["from"]["revision"] == 1 and diff["to"]["revision"] == 1
    assert diff["from"]["path_length"] == 6 and diff["to"]["path_length"] == 5
    assert (
        diff["from"]["state_hash"]
        == service.inspect_state(story.provider, story.session_id, leaf_entry_id=ids["cut"])["state_hash"]
    )
    [changed] = diff["changed"]
    assert changed["pointer"] == "/appearance/hair"
    assert (changed["old_value"], changed["new_value"]) == (SHORT_HAIR, "braided")
    [was] = changed["from_provenance"]
    [now] = changed["to_provenance"]
    assert (was["entry_id"], was["commit_id"], was["kind"]) == (ids["cut"], "commit-haircut", "turn")
    assert (now["entry_id"], now["commit_id"], now["kind"]) == (braid, "commit-braid", "turn")
    assert [a["pointer"] for a in diff["added"]] == ["/location"]
    assert diff["added"][0]["new_value"] == "river" and "old_value" not in diff["added"][0]
    assert diff["added"][0]["from_removed_by"] is None and diff["added"][0]["from_provenance"] == []
    assert diff["removed"] == []

    # The other way round: the same pointers, sides swapped.
    back = service.diff_states(story.provider, story.session_id, braid, ids["cut"])
    assert [c["pointer"] for c in back["changed"]] == ["/appearance/hair"]
    assert back["changed"][0]["old_value"] == "braided" and back["changed"][0]["new_value"] == SHORT_HAIR
    assert [r["pointer"] for r in back["removed"]] == ["/location"] and back["added"] == []
    assert back["removed"][0]["to_removed_by"] is None

    # The session's leaf (UNSET) is the braid branch; the same diff.
    assert service.diff_states(story.provider, story.session_id, ids["cut"], service.UNSET) == diff
    # Against the common ancestor: everything the haircut did is "added".
    from_before = service.diff_states(story.provider, story.session_id, ids["reply"], ids["cut"])
    assert from_before["common_ancestor_entry_id"] == ids["reply"]
    assert [(a["pointer"], a["new_value"]) for a in from_before["added"]] == [("/appearance", {"hair": SHORT_HAIR})]
    assert from_before["changed"] == from_before["removed"] == []


def test_diff_names_the_correction_and_the_entry_that_removed_a_value(story):
    ids = story.haircut_story()
    story.turn([add("/bag", ["rope"]), add("/coins", 3)], commit_id="commit-pack")
    fork_point = story.leaf
    correction = service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={
            "op": "replace",
            "path": "/appearance/hair",
            "value": "chin-length",
            "reason": "the barber stopped early",
        },
        actor="system",
        channel="internal",
    )
    spent = story.turn([{"op": "remove", "path": "/coins"}, {"op": "add", "path": "/bag/-", "value": "map"}])
    left = story.leaf
    story.provider.switch_leaf(story.session_id, fork_point)
    right = story.turn([add("/appearance/eyes", "grey")], commit_id="commit-eyes")

    diff = service.diff_states(story.provider, story.session_id, right, left)
    assert diff["common_ancestor_entry_id"] == fork_point
    by_pointer = {item["pointer"]: (kind, item) for kind in ("changed", "added", "removed") for item in diff[kind]}
    assert sorted(by_pointer) == ["/appearance/eyes", "/appearance/hair", "/bag", "/coins"]
    kind, hair = by_pointer["/appearance/hair"]
    assert kind == "changed" and hair["to_provenance"][0]["kind"] == "correction"
    assert hair["to_provenance"][0]["entry_id"] == correction["id"]
    assert hair["to_provenance"][0]["reason"] == "the barber stopped early"
    assert hair["from_provenance"][0]["entry_id"] == ids["cut"]
    # An element appended to an array: the array is one value, attributed as a whole.
    kind, bag = by_pointer["/bag"]
    assert kind == "changed" and (bag["old_value"], bag["new_value"]) == (["rope"], ["rope", "map"])
    assert bag["to_provenance"][0]["entry_id"] == spent and bag["from_provenance"][0]["commit_id"] == "commit-pack"
    kind, coins = by_pointer["/coins"]
    assert kind == "removed" and coins["old_value"] == 3
    assert coins["from_provenance"][0]["commit_id"] == "commit-pack"
    assert coins["to_removed_by"]["entry_id"] == spent and coins["to_removed_by"]["pointer"] == "/coins"
    kind, eyes = by_pointer["/appearance/eyes"]
    assert kind == "removed" and eyes["to_removed_by"] is None
    # Ordered by pointer within each list.
    assert [i["pointer"] for i in diff["changed"]] == ["/appearance/hair", "/bag"]


def test_diff_of_a_state_with_itself_is_empty(story):
    story.haircut_story()
    diff = service.diff_states(story.provider, story.session_id, service.UNSET, service.UNSET)
    assert diff["changed"] == diff["added"] == diff["removed"] == []
    assert diff["common_ancestor_entry_id"] == story.leaf


def test_diff_refuses_two_different_characters_and_unknown_ids(story):
    ids = story.haircut_story()
    story.provider.reset_leaf(story.session_id)
    bob = Story.__new__(Story)
    bob.__dict__.update(story.__dict__, character_id="bob")
    bob_leaf = bob.turn([add("/hair", "red")])
    with pytest.raises(RoleplayValidationError, match="different characters"):
        service.diff_states(story.provider, story.session_id, ids["cut"], bob_leaf)
    named = service.diff_states(story.provider, story.session_id, ids["cut"], bob_leaf, character_id="alice")
    assert named["common_ancestor_entry_id"] is None and named["to"]["revision"] == 0
    assert [r["pointer"] for r in named["removed"]] == ["/appearance"]
    with pytest.raises(EntryNotFound):
        service.diff_states(story.provider, story.session_id, ids["cut"], "deadbeef")
    with pytest.raises(SessionNotFound):
        service.diff_states(story.provider, "no-such-session", "a", "b")


# --- error categories ---


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (errors.RoleplayValidationError, "bad_input"),
        (errors.ReviewNotFound, NOT_FOUND),
        (errors.ReviewAlreadyDecided, CONFLICT),
        (errors.NoRoleplayCharacter, CONFLICT),
        (errors.CharacterArchived, CONFLICT),
    ],
)
def test_every_roleplay_error_has_its_category(error, category):
    exc = error("x")
    assert exc.category == category
    assert (exc.http_status, exc.exit_code) == (CATEGORIES[category].http_status, CATEGORIES[category].exit_code)
    assert getattr(service, error.__name__) is error


def test_error_categories_of_the_review_queue_on_a_real_branch(story):
    ids = story.haircut_story()
    story.turn(reviews=[review("review-trust", add("/trust", 0.5))])
    with pytest.raises(errors.ReviewNotFound) as missing:
        service.decide_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-typo",
            decision="accept",
            actor="system",
            channel="internal",
        )
    assert (missing.value.code, missing.value.http_status, missing.value.exit_code) == ("review_not_found", 404, 3)
    service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="reject",
        actor="system",
        channel="internal",
    )
    with pytest.raises(errors.ReviewAlreadyDecided) as decided:
        service.decide_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            decision="accept",
            actor="system",
            channel="internal",
        )
    assert (decided.value.http_status, decided.value.exit_code) == (409, 4)
    # Back on a branch before the proposal, the same review does not exist there.
    story.provider.switch_leaf(story.session_id, ids["cut"])
    with pytest.raises(errors.ReviewNotFound):
        service.decide_review(
            provider=story.provider,
            session_id=story.session_id,
            review_id="review-trust",
            decision="accept",
            actor="system",
            channel="internal",
        )
    # And on a branch with no character at all, writes are a conflict with that branch.
    story.provider.reset_leaf(story.session_id)
    story.user(LONG_HAIR)
    with pytest.raises(errors.NoRoleplayCharacter) as none:
        service.create_checkpoint(
            provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
        )
    assert (none.value.http_status, none.value.exit_code) == (409, 4)


def test_provenance_and_markers_from_before_the_checkpoint_are_still_named(story):
    # The reads load only the tail after the latest checkpoint; the entries
    # provenance names further back are fetched by id.
    ids = story.haircut_story()
    correction = service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "add", "path": "/location", "value": "inn", "reason": "at the inn"},
        actor="system",
        channel="internal",
    )
    marked = story.mark_incomplete("turn-4")
    checkpoint = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    for n in range(40):
        story.user(f"line {n}")
        story.assistant(f"reply {n}")
    story.turn([add("/mood", "tired")], events=["Alice yawned"], commit_id="commit-late")

    detail = service.inspect_state_detail(story.provider, story.session_id)
    assert detail["checkpoint_entry_id"] == checkpoint["id"]
    assert detail["provenance"]["/appearance"]["entry_id"] == ids["cut"]
    assert detail["provenance"]["/appearance"]["kind"] == "turn"
    assert detail["provenance"]["/location"]["entry_id"] == correction["id"]
    assert detail["provenance"]["/location"]["reason"] == "at the inn"
    assert detail["provenance"]["/mood"]["commit_id"] == "commit-late"
    assert detail["incomplete_turns"][0]["markedAt"] == story.entry(marked)["timestamp"]
    # The same as reducing the whole path.
    whole = reduce_branch(story.provider.get_active_path(story.session_id))
    assert (detail["state"], detail["revision"], detail["state_hash"]) == (
        whole["state"],
        whole["revision"],
        whole["state_hash"],
    )
    assert service.inspect_state(story.provider, story.session_id) == whole

    limited = service.inspect_state_detail(story.provider, story.session_id, max_events=1, max_memories=0)
    assert limited["events"] == ["Alice yawned"] and limited["events_total"] == 2
    assert detail["events"] == ["Alice cut her hair", "Alice yawned"]
    assert limited["memories"] == [] and limited["memories_total"] == 0
