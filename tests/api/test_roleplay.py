"""The roleplay endpoints (``/api/sessions/{id}/roleplay/…``) on every provider:
what each answers, what each appends (through the service, audited as the
API's user), and every error code they give."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay import service
from roleplay.context import CHARACTER_VIEW_CUSTOM_TYPE, build_roleplay_context
from roleplay.reducer import NON_CANON_BOUNDARY_NOTE
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider

from .conftest import assert_audited
from .roleplay_story import SHORT_HAIR, ApiStory, add, hair, review
from .test_errors import error_of

DESIGN_STATE_KEYS = {
    "character_id",
    "state",
    "revision",
    "events",
    "memories",
    "pending_reviews",
    "decided_reviews",
    "incomplete_turns",
    "state_hash",
    "provenance",
    "archived",
}


@pytest.fixture
def story(api, kind) -> ApiStory:
    return ApiStory(api, kind)


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def entry_count(story: ApiStory) -> int:
    return AgentSession.objects.get(session_id=story.sid).entry_count


# --- reads ---------------------------------------------------------------------------------


def test_state_at_the_leaf_with_provenance_rows_and_every_design_key(story, kind):
    ids = story.haircut_story()
    state = story.state()
    assert set(state) >= DESIGN_STATE_KEYS
    assert (state["character_id"], state["revision"], state["archived"]) == ("alice", 1, False)
    assert state["state"] == {"appearance": {"hair": SHORT_HAIR}}
    assert state["events"] == ["Alice cut her hair"] and state["events_total"] == 1
    assert state["leaf_entry_id"] == state["session_leaf_entry_id"] == ids["cut"] and state["at_session_leaf"]
    record = state["provenance"]["/appearance"]
    assert (record["entry_id"], record["kind"], record["commit_id"]) == (ids["cut"], "turn", "commit-haircut")
    assert [(row["pointer"], row["node"], row["inherited"]) for row in state["rows"]] == [
        ("/appearance", "object", False),
        ("/appearance/hair", "value", True),
    ]
    assert state["rows"][1]["value"] == SHORT_HAIR and state["rows"][1]["provenance"] == record
    # The answer is the service's, unchanged.
    assert state == as_json(service.inspect_state_detail(get_provider(kind), story.sid))


def test_state_at_any_entry_never_moves_the_leaf(story):
    ids = story.haircut_story()
    before = story.state(leaf=ids["reply"])
    assert (before["revision"], before["state"], before["provenance"]) == (0, {}, {})
    assert before["leaf_entry_id"] == ids["reply"] and before["session_leaf_entry_id"] == ids["cut"]
    assert before["at_session_leaf"] is False
    assert story.leaf == ids["cut"]


def test_context_is_the_session_contexts_shape_without_branch_summaries(story, kind):
    ids = story.haircut_story()
    summary = story.navigate(ids["ask_cut"], summarize=True)["summary_entry"]
    story.user("Please keep your hair long.")
    plain = story.api.get(f"/api/sessions/{story.sid}/context/")
    count = entry_count(story)

    context = story.context()

    assert (
        set(context) == {*plain, "roleplay"} == {"messages", "thinking_level", "model", "source_entry_ids", "roleplay"}
    )
    assert (context["thinking_level"], context["model"]) == (plain["thinking_level"], plain["model"])
    kept = [pair for pair in zip(plain["messages"], plain["source_entry_ids"], strict=True) if pair[1] != summary["id"]]
    assert len(kept) == len(plain["messages"]) - 1
    assert list(zip(context["messages"][:-1], context["source_entry_ids"][:-1], strict=True)) == kept
    view = context["messages"][-1]
    assert context["source_entry_ids"][-1] is None
    assert (view["role"], view["customType"], view["display"]) == ("custom", CHARACTER_VIEW_CUSTOM_TYPE, False)
    assert view["content"].endswith(NON_CANON_BOUNDARY_NOTE) and SHORT_HAIR not in view["content"]
    assert context["roleplay"]["removed_branch_summary_entry_ids"] == [summary["id"]]
    assert (context["roleplay"]["character_id"], context["roleplay"]["revision"]) == ("alice", 0)
    # The answer is the service's, unchanged; reading appends nothing and keeps the summary stored.
    assert context == as_json(build_roleplay_context(get_provider(kind), story.sid))
    assert entry_count(story) == count and story.entry(summary["id"]) == summary


def test_context_at_any_entry_never_moves_the_leaf(story):
    ids = story.haircut_story()
    at_reply = story.context(leaf=ids["reply"])
    plain = story.api.get(f"/api/sessions/{story.sid}/context/", data={"leaf": ids["reply"]})
    assert at_reply["source_entry_ids"] == [*plain["source_entry_ids"], None] == [ids["greet"], ids["reply"], None]
    assert at_reply["roleplay"]["revision"] == 0
    at_leaf = story.context()
    assert at_leaf["roleplay"]["revision"] == 1 and SHORT_HAIR in at_leaf["messages"][-1]["content"]
    assert story.leaf == ids["cut"]


def test_context_errors(story, api):
    story.haircut_story()
    error_of(get(story, "context/", leaf="nothere1"), 404, "entry_not_found")
    error_of(get(story, "context/", leaf="x" * 65), 400, "invalid_input")
    error_of(api.client.get("/api/sessions/no-such-session/roleplay/context/"), 404, "session_not_found")
    error_of(api.client.post(f"{story.base}/context/", {}, format="json"), 405)


def test_state_of_another_character_and_limited_events(story):
    story.haircut_story()
    story.turn(events=["e2", "e3"], memories=["m1", "m2"])
    limited = story.state(max_events="1", max_memories="0")
    assert (limited["events"], limited["events_total"]) == (["e3"], 3)
    assert (limited["memories"], limited["memories_total"]) == ([], 2)
    bob = story.state(character="bob")
    assert (bob["character_id"], bob["revision"], bob["state"]) == ("bob", 0, {})
    assert bob["identity"]["source"] == "argument"
    assert {item["characterId"] for item in bob["ignored_entries"]} == {"alice"}


def test_state_of_a_session_without_roleplay(story):
    story.user("just chatting")
    state = story.state()
    assert (state["character_id"], state["revision"], state["state"], state["rows"]) == (None, 0, {}, [])
    empty = ApiStory(story.api, AgentSession.objects.get(session_id=story.sid).provider)
    assert empty.state()["leaf_entry_id"] is None and empty.state()["path_length"] == 0


def braid_branch(story: ApiStory, ids: dict[str, str]) -> str:
    """Back before the haircut (``/tree`` to the request), then Alice braids her hair instead."""
    assert story.navigate(ids["ask_cut"])["leaf_entry_id"] == ids["reply"]
    story.user("Please don't cut your hair. Braid it?")
    return story.turn([add("/appearance", {"hair": "braided"}), add("/location", "river")], commit_id="commit-braid")


def test_diff_between_two_branches(story, kind):
    ids = story.haircut_story()
    braid = braid_branch(story, ids)
    diff = story.diff(**{"from": ids["cut"]})  # to: the session's leaf
    assert {"changed", "added", "removed"} <= set(diff)
    assert diff["common_ancestor_entry_id"] == ids["reply"]
    assert (diff["from"]["entry_id"], diff["to"]["entry_id"]) == (ids["cut"], braid)
    [changed] = diff["changed"]
    assert (changed["pointer"], changed["old_value"], changed["new_value"]) == (
        "/appearance/hair",
        SHORT_HAIR,
        "braided",
    )
    assert changed["from_provenance"][0]["entry_id"] == ids["cut"]
    assert changed["to_provenance"][0]["commit_id"] == "commit-braid"
    assert [(item["pointer"], item["new_value"]) for item in diff["added"]] == [("/location", "river")]
    assert diff["removed"] == []
    assert diff == as_json(service.diff_states(get_provider(kind), story.sid, ids["cut"], braid))
    back = story.diff(**{"from": braid, "to": ids["cut"]})
    assert [item["pointer"] for item in back["removed"]] == ["/location"]
    same = story.diff(**{"from": braid, "to": braid})
    assert (same["changed"], same["added"], same["removed"]) == ([], [], [])


def test_review_queue_amend_and_decide(story, kind, users):
    story.haircut_story()
    proposal = story.turn(
        reviews=[
            review("review-trust", add("/relationship", {"user": {"trust": 0.55}}), "trust after the rescue"),
            review("review-mood", add("/mood", "grateful")),
            review("review-hair", {"op": "remove", "path": "/appearance/hair"}),
        ]
    )
    queue = story.reviews()
    assert [r["reviewId"] for r in queue["pending"]] == ["review-trust", "review-mood", "review-hair"]
    assert queue["decided"] == [] and queue["session_leaf_entry_id"] == proposal
    assert queue["pending"][0]["appliesNow"] is True and queue["pending"][2]["amendable"] is False
    assert queue == as_json(service.review_queue(get_provider(kind), story.sid))

    amendment = story.amend("review-trust", {"value": {"user": {"trust": 0.6}}, "expected_leaf_id": proposal})
    assert amendment["customType"] == "pi-roleplay-review-amendment" and amendment["parentId"] == proposal
    assert_audited(story.sid, "roleplay_amend_review", users.alice)
    pending = story.api.get(f"{story.base}/reviews/review-trust/")
    assert pending["status"] == "pending" and pending["amendment"] == {
        "value": {"user": {"trust": 0.6}},
        "entryId": amendment["id"],
    }

    accepted = story.decide("review-trust", {"decision": "accept"})
    assert accepted["customType"] == "pi-roleplay-review-decision" and accepted["data"]["decision"] == "accept"
    assert_audited(story.sid, "roleplay_accept_review", users.alice)
    rejected = story.decide("review-mood", {"decision": "reject", "expected_leaf_id": accepted["id"]})
    assert_audited(story.sid, "roleplay_reject_review", users.alice)
    # Accept with a value: an amendment, then the decision as its child (the answer).
    story.turn(reviews=[review("review-eyes", add("/eyes", "green"))])
    with_value = story.decide("review-eyes", {"decision": "accept", "value": "grey"})
    assert story.entry(with_value["parentId"])["customType"] == "pi-roleplay-review-amendment"

    state = story.state()
    assert state["state"]["relationship"] == {"user": {"trust": 0.6}} and state["state"]["eyes"] == "grey"
    assert "mood" not in state["state"]
    assert state["provenance"]["/relationship"]["kind"] == "review"
    assert state["provenance"]["/relationship"]["review_id"] == "review-trust"
    decided = story.reviews()["decided"]
    assert [(r["reviewId"], r["status"]) for r in decided] == [
        ("review-trust", "accepted"),
        ("review-mood", "rejected"),
        ("review-eyes", "accepted"),
    ]
    assert decided[1]["decisionEntryId"] == rejected["id"]
    assert [r["reviewId"] for r in story.reviews()["pending"]] == ["review-hair"]
    # At the proposal, the queue is that branch's.
    assert len(story.reviews(leaf=proposal)["pending"]) == 3


def test_corrections_inline_and_as_ops(story, users):
    ids = story.haircut_story()
    inline = story.correct(
        {"op": "replace", "path": "/appearance/hair", "from": SHORT_HAIR, "value": "chin-length", "reason": "trimmed"}
    )
    assert inline["parentId"] == ids["cut"] and inline["customType"] == "pi-roleplay-commit"
    data = inline["data"]
    assert (data["source"], data["reason"], data["correctsCommitId"]) == (
        "manual-correction",
        "trimmed",
        "commit-haircut",
    )
    assert data["ops"][0] == {"op": "test", "path": "/appearance/hair", "value": SHORT_HAIR}
    assert_audited(story.sid, "roleplay_correct_state", users.alice)
    ops = story.correct(
        {
            "ops": [add("/location", "inn"), {"op": "replace", "path": "/appearance/hair", "value": "long"}],
            "reason": "the scene is at the inn",
            "correctsCommitId": "commit-haircut",
            "expected_leaf_id": inline["id"],
        }
    )
    state = story.state()
    assert state["state"] == {"appearance": {"hair": "long"}, "location": "inn"}
    record = state["provenance"]["/location"]
    assert (record["entry_id"], record["kind"], record["reason"]) == (
        ops["id"],
        "correction",
        "the scene is at the inn",
    )
    assert record["corrects_commit_id"] == "commit-haircut"
    # A correction never moves the tree: it is the new leaf, a child of the old one.
    assert story.leaf == ops["id"] and ops["parentId"] == inline["id"]


def test_checkpoints_list_and_create(story, users):
    ids = story.haircut_story()
    assert story.checkpoints()["checkpoints"] == []
    made = story.checkpoint({"expected_leaf_id": ids["cut"]})
    assert made["customType"] == "pi-roleplay-checkpoint" and made["parentId"] == ids["cut"]
    assert made["data"]["revision"] == 1 and made["data"]["state"] == {"appearance": {"hair": SHORT_HAIR}}
    assert_audited(story.sid, "roleplay_checkpoint", users.alice)
    listed = story.checkpoints()
    assert [(c["entry_id"], c["revision"], c["valid"], c["trigger"]) for c in listed["checkpoints"]] == [
        (made["id"], 1, True, None)
    ]
    assert listed["checkpoints"][0]["state_hash"] == made["data"]["stateHash"] == story.state()["state_hash"]
    assert story.state()["checkpoint_entry_id"] == made["id"]
    # Branch-local: not on the path of an earlier entry.
    assert story.checkpoints(leaf=ids["reply"])["checkpoints"] == []
    assert story.checkpoints(character="bob")["checkpoints"] == []


def test_repair_an_incomplete_turn(story, users):
    story.haircut_story()
    marked = story.mark_incomplete("turn-9", reason="the tool call was cut off")
    [turn] = story.state()["incomplete_turns"]
    assert (turn["turnId"], turn["entryId"], turn["reason"]) == ("turn-9", marked, "the tool call was cut off")
    template = turn["repairTemplate"]
    repaired = story.repair({**template, "ops": [add("/mood", "calm")], "reason": "lost result", "events": ["calm"]})
    assert repaired["customType"] == "pi-roleplay-repair" and repaired["data"]["turnId"] == "turn-9"
    assert_audited(story.sid, "roleplay_repair_turn", users.alice)
    state = story.state()
    assert state["incomplete_turns"] == [] and state["state"]["mood"] == "calm"
    assert state["provenance"]["/mood"]["kind"] == "repair" and state["provenance"]["/mood"]["turn_id"] == "turn-9"
    assert state["events"][-1] == "calm"


def test_archive_makes_the_character_read_only_on_this_branch(story, users):
    ids = story.haircut_story()
    archived = story.archive({"reason": "the story ended"})
    assert archived["customType"] == "pi-roleplay-archive" and archived["data"]["reason"] == "the story ended"
    assert_audited(story.sid, "roleplay_archive", users.alice)
    state = story.state()
    assert state["archived"] is True and state["archive"] == {"entryId": archived["id"], "reason": "the story ended"}
    assert hair(state) == SHORT_HAIR  # still readable
    body = {"op": "add", "path": "/x", "value": 1, "reason": "r"}
    assert error_of(story.api.client.post(f"{story.base}/corrections/", body, format="json"), 409)["code"] == (
        "character_archived"
    )
    story.checkpoint()  # changes nothing: allowed
    story.archive(expected=409)
    # Before the archive entry the character is writable again.
    story.api.post(f"/api/sessions/{story.sid}/switch-leaf/", {"entry_id": ids["cut"]})
    story.correct(body)
    assert story.archive()["data"] == {"characterId": "alice"}  # no reason given: none stored


# --- expected_leaf_id ---------------------------------------------------------------------------


def test_every_write_refuses_a_stale_expected_leaf_and_appends_nothing(story):
    story.haircut_story()
    story.mark_incomplete("turn-9")
    story.turn(reviews=[review("review-a", add("/a", 1))])
    leaf = story.leaf
    stale = {"expected_leaf_id": "stale123"}
    writes = [
        (f"{story.base}/corrections/", {"op": "add", "path": "/b", "value": 2, "reason": "r"}),
        (f"{story.base}/reviews/review-a/amend/", {"value": 5}),
        (f"{story.base}/reviews/review-a/decide/", {"decision": "accept"}),
        (f"{story.base}/checkpoints/", {}),
        (f"{story.base}/repairs/", {"turnId": "turn-9", "ops": []}),
        (f"{story.base}/archive/", {}),
    ]
    count, records = entry_count(story), AuditRecord.objects.count()
    for url, body in writes:
        error = error_of(story.api.client.post(url, {**body, **stale}, format="json"), 409, "leaf_conflict")
        assert "stale123" in error["message"]
    assert (entry_count(story), AuditRecord.objects.count(), story.leaf) == (count, records, leaf)
    null_leaf = {"op": "add", "path": "/b", "value": 2, "reason": "r", "expected_leaf_id": None}  # "no leaf yet"
    error_of(story.api.client.post(f"{story.base}/corrections/", null_leaf, format="json"), 409, "leaf_conflict")
    for url, body in writes:  # the right leaf: each is appended (and the leaf moves on)
        leaf = story.api.post(url, {**body, "expected_leaf_id": leaf}, expected=201)["id"]


# --- errors -------------------------------------------------------------------------------------


def post(story: ApiStory, path: str, body: Any) -> Any:
    return story.api.client.post(f"{story.base}/{path}", body, format="json")


def get(story: ApiStory, path: str, **query: str) -> Any:
    return story.api.client.get(f"{story.base}/{path}", query)


def test_error_codes_of_the_roleplay_endpoints(story, api, kind):
    ids = story.haircut_story()
    story.turn(reviews=[review("review-a", add("/a", 1)), review("review-rm", {"op": "remove", "path": "/appearance"})])
    story.decide("review-a", {"decision": "reject"})
    count = entry_count(story)

    # 404: unknown review, entry, session.
    assert (
        "review-none"
        in error_of(post(story, "reviews/review-none/decide/", {"decision": "accept"}), 404, "review_not_found")[
            "message"
        ]
    )
    error_of(post(story, "reviews/review-none/amend/", {"value": 1}), 404, "review_not_found")
    error_of(get(story, "reviews/review-none/"), 404, "review_not_found")
    error_of(get(story, "reviews/review-a/", leaf=ids["cut"]), 404, "review_not_found")  # not on that branch
    error_of(get(story, "state/", leaf="nothere1"), 404, "entry_not_found")
    error_of(get(story, "diff/", **{"from": "nothere1"}), 404, "entry_not_found")
    error_of(get(story, "checkpoints/", leaf="nothere1"), 404, "entry_not_found")
    error_of(get(story, "reviews/", leaf="nothere1"), 404, "entry_not_found")
    error_of(api.client.get("/api/sessions/no-such-session/roleplay/state/"), 404, "session_not_found")
    error_of(api.client.post("/api/sessions/no-such-session/roleplay/checkpoints/", {}, format="json"), 404)

    # 409: decided already, no character, archived (below), session closed.
    error_of(post(story, "reviews/review-a/decide/", {"decision": "accept"}), 409, "review_already_decided")
    error_of(post(story, "reviews/review-a/amend/", {"value": 2}), 409, "review_already_decided")
    plain = ApiStory(api, kind)
    plain.user("no roleplay here")
    for path, body in [
        ("corrections/", {"op": "add", "path": "/x", "value": 1, "reason": "r"}),
        ("checkpoints/", {}),
        ("archive/", {}),
        ("repairs/", {"turnId": "t", "ops": []}),
    ]:
        error_of(post(plain, path, body), 409, "no_roleplay_character")

    # 400 from the roleplay layer: input it refuses, with the reason.
    refused = [
        ("corrections/", {"op": "replace", "path": "/location", "value": "inn", "reason": "r"}, "does not apply"),
        ("corrections/", {"op": "add", "path": "/x", "value": 1, "reason": "   "}, "reason"),
        ("corrections/", {"op": "add", "path": "/x", "value": 1, "reason": "r", "correctsCommitId": "nope"}, "nope"),
        ("corrections/", {"op": "add", "path": "/x", "value": 1, "ops": [add("/y", 2)], "reason": "r"}, "not both"),
        ("corrections/", {"ops": [{"op": "add", "path": "no-slash", "value": 1}], "reason": "r"}, "pointer"),
        ("corrections/", {"op": "test", "path": "/appearance", "value": {}, "reason": "r"}, "test"),
        ("repairs/", {"turnId": "turn-none", "ops": []}, "not an incomplete turn"),
        ("reviews/review-rm/amend/", {"value": 1}, "no value to amend"),
        ("reviews/review-rm/decide/", {"decision": "reject", "value": 1}, "only be given when accepting"),
    ]
    for path, body, reason in refused:
        error = error_of(post(story, path, body), 400, "invalid_roleplay_entry")
        assert reason in error["message"], (path, body, error)
    other = story.custom("pi-roleplay-identity", {"characterId": "bob"})  # ignored: alice's identity is locked
    assert story.state()["ignored_entries"][-1]["entryId"] == other
    two = story.diff(**{"from": ids["cut"], "character": "bob"})  # one character named: both sides are bob's
    assert two["character_id"] == "bob"
    count = entry_count(story)

    # 400 from the API's own checks: JSON types, unknown fields, missing fields, query values.
    invalid_input = [
        ("corrections/", {"op": "add", "path": "/x", "value": 1}),  # no reason
        ("corrections/", {"op": "add", "path": "/x", "value": 1, "reason": "r", "because": "typo"}),
        ("corrections/", {"op": "add", "path": 7, "value": 1, "reason": "r"}),
        ("corrections/", {"op": "add", "path": "no-slash", "value": 1, "reason": "r"}),
        ("corrections/", {"op": "add", "path": "/a~2", "value": 1, "reason": "r"}),
        ("corrections/", {"op": "rename", "path": "/x", "reason": "r"}),
        ("corrections/", {"ops": "add /x", "reason": "r"}),
        ("corrections/", {"ops": [1], "reason": "r"}),
        ("corrections/", {"ops": [], "reason": "r"}),
        ("corrections/", {"op": "add", "path": "/x", "value": 1, "reason": "r", "expected_leaf_id": 5}),
        ("reviews/review-rm/decide/", {"decision": "maybe"}),
        ("reviews/review-rm/decide/", {}),
        ("reviews/review-rm/amend/", {}),
        ("checkpoints/", {"note": "x"}),
        ("repairs/", {"ops": []}),
        ("repairs/", {"turnId": 5}),
        ("repairs/", {"turnId": "t", "events": "e"}),
        ("repairs/", {"turnId": "t", "reviews": ["r"]}),
        ("archive/", {"reason": 3}),
    ]
    for path, body in invalid_input:
        error_of(post(story, path, body), 400, "invalid_input")
    for path, query in [
        ("state/", {"max_events": "-1"}),
        ("state/", {"max_memories": "x"}),
        ("state/", {"leaf": "x" * 65}),
        ("diff/", {}),  # from is required
        ("diff/", {"from": ""}),
        ("checkpoints/", {"character": "c" * 300}),
    ]:
        error_of(get(story, path, **query), 400, "invalid_input")
    assert entry_count(story) == count

    # 413: a value the storage cannot hold (nested deeper than entries may be).
    deep: Any = 1
    for _ in range(40):
        deep = {"d": deep}
    error_of(
        post(story, "corrections/", {"op": "add", "path": "/deep", "value": deep, "reason": "r"}),
        413,
        "entry_too_large",
    )
    assert entry_count(story) == count

    # 409 on a closed session; reads still work.
    api.post(f"/api/sessions/{story.sid}/archive/")
    error_of(post(story, "checkpoints/", {}), 409, "session_closed")
    assert story.state()["character_id"] == "alice"
    assert entry_count(story) == count


def test_a_diff_of_two_characters_is_refused_unless_one_is_named(story):
    ids = story.haircut_story()
    story.api.post(f"/api/sessions/{story.sid}/reset-leaf/", {})
    bob_root = story.custom("pi-roleplay-identity", {"characterId": "bob"})  # a new root: bob's story
    assert story.state()["character_id"] == "bob"
    error = error_of(get(story, "diff/", **{"from": ids["cut"]}), 400, "invalid_roleplay_entry")
    assert "alice" in error["message"] and "bob" in error["message"]
    named = story.diff(**{"from": ids["cut"], "to": bob_root, "character": "alice"})
    assert [item["pointer"] for item in named["removed"]] == ["/appearance"]
    assert named["common_ancestor_entry_id"] is None


HOSTILE = [
    b"{",
    b"[]",
    b"null",
    b'"text"',
    b'{"ops": [[]], "reason": "r"}',
    b'{"ops": [{"op": "move", "from": {"a": 1}, "path": "/x"}], "reason": "r"}',
    b'{"ops": [{"op": "add", "path": "/a/b/c", "value": 1}], "reason": "r"}',
    b'{"ops": [{"op": "copy", "from": "/nothere", "path": "/x"}], "reason": "r"}',
    b'{"ops": [{"op": "add", "path": "/~2", "value": 1}], "reason": "r"}',
    b'{"ops": [{"op": "add", "path": "/appearance/-", "value": 1}], "reason": "r"}',
    b'{"ops": [{"op": "replace", "path": "", "value": []}], "reason": "r"}',
    b'{"ops": [{"op": "replace", "path": "", "value": {"x": 1}}], "reason": "r"}',
    b'{"op": "add", "path": "/x", "value": 18446744073709551616, "reason": "r"}',
    b'{"op": "add", "path": "/x", "value": "\\u0000", "reason": "\\u0000"}',
    b'{"op": "remove", "path": "/appearance", "from": {"hair": "x"}, "reason": "r"}',
    b'{"turnId": "turn-9", "ops": [], "reviews": [{"reviewId": "", "op": {"op": "add", "path": "/r", "value": 1}}]}',
    b'{"turnId": "turn-9", "ops": [], "reviews": [{"reviewId": "r1", "op": {"op": "test", "path": "/r", "value": 1}}]}',
    b'{"turnId": "turn-9", "ops": [], "reviews": [{"reviewId": "r1", "op": {"op": "add", "path": "/r"}}]}',
    b'{"turnId": "   ", "ops": []}',
    b'{"decision": "accept", "value": ' + b"[" * 60 + b"]" * 60 + b"}",
    b'{"value": {"\\ud800": 1}}',
]


@pytest.mark.parametrize("body", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_bodies_on_every_roleplay_write_are_4xx(story, body):
    story.haircut_story()
    story.mark_incomplete("turn-9")
    story.turn(reviews=[review("review-a", add("/a", 1))])
    for path in [
        "corrections/",
        "repairs/",
        "reviews/review-a/decide/",
        "reviews/review-a/amend/",
        "checkpoints/",
        "archive/",
    ]:
        count = entry_count(story)
        response = story.api.client.generic("POST", f"{story.base}/{path}", body, content_type="application/json")
        assert response.status_code < 500, (path, body, response.content[:500])
        if response.status_code >= 400:
            error_of(response, response.status_code)
            assert entry_count(story) == count, (path, body)


# --- audit ----------------------------------------------------------------------------------------


def test_every_roleplay_write_is_audited_once_as_the_api_user(story, users):
    ids = story.haircut_story()
    story.mark_incomplete("turn-9")
    story.turn(reviews=[review("review-a", add("/a", 1)), review("review-b", add("/b", 2))])
    writes = [
        ("corrections/", {"op": "add", "path": "/c", "value": 3, "reason": "r"}, "roleplay_correct_state"),
        ("reviews/review-a/amend/", {"value": 5}, "roleplay_amend_review"),
        ("reviews/review-a/decide/", {"decision": "accept"}, "roleplay_accept_review"),
        ("reviews/review-b/decide/", {"decision": "reject"}, "roleplay_reject_review"),
        ("checkpoints/", {}, "roleplay_checkpoint"),
        ("repairs/", {"turnId": "turn-9", "ops": []}, "roleplay_repair_turn"),
        ("archive/", {}, "roleplay_archive"),
    ]
    for path, body, operation in writes:
        leaf_before = story.leaf
        last = AuditRecord.objects.order_by("-id").values_list("id", flat=True).first() or 0
        entry = story.api.post(f"{story.base}/{path}", body, expected=201)
        [record] = AuditRecord.objects.filter(id__gt=last)
        assert (record.operation, record.channel, record.actor, record.user_id) == (
            operation,
            "api",
            "alice",
            users.alice.pk,
        )
        assert (record.session_id, record.leaf_before, record.leaf_after) == (story.sid, leaf_before, entry["id"])
        assert entry["id"] in record.entry_ids
    # Reads and refused writes leave nothing.
    last = AuditRecord.objects.order_by("-id").values_list("id", flat=True).first()
    story.state()
    story.diff(**{"from": ids["cut"]})
    story.reviews()
    story.checkpoints()
    story.correct({"op": "add", "path": "/d", "value": 4, "reason": "r"}, expected=409)  # archived
    assert AuditRecord.objects.order_by("-id").values_list("id", flat=True).first() == last


def test_options_describes_each_endpoint_and_its_body(story):
    story.haircut_story()
    bodies = {
        "corrections/": {"reason", "ops", "op", "path", "value", "from", "correctsCommitId", "expected_leaf_id"},
        "repairs/": {"turnId", "ops", "events", "memories", "reviews", "reason", "expected_leaf_id"},
        "archive/": {"reason", "expected_leaf_id"},
        "checkpoints/": {"expected_leaf_id"},
        "reviews/review-a/decide/": {"decision", "value", "expected_leaf_id"},
        "reviews/review-a/amend/": {"value", "expected_leaf_id"},
    }
    for path, fields in bodies.items():
        response = story.api.client.options(f"{story.base}/{path}")
        assert response.status_code == 200, (path, response.content[:300])
        assert set(response.json()["actions"]["POST"]) == fields, path
    for path in ("state/", "diff/", "reviews/", "reviews/review-a/"):
        response = story.api.client.options(f"{story.base}/{path}")
        assert response.status_code == 200 and "actions" not in response.json(), path
