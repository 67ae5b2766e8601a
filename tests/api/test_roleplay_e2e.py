"""The roleplay seed's E2E matrix (9.1 to 9.6) driven once more, over HTTP only,
on every provider: the session is written through ``POST entries/``, moved
with ``navigate/`` and ``fork/``, compacted with ``compact/``, and every
state is read with ``GET roleplay/state/`` (the service-level run of the same
matrix is ``tests/roleplay/test_e2e_matrix.py``).

Navigation, fork and correction are three different operations: the first
moves the leaf, the second makes a new session, the third appends to the
current branch. The state always follows the active path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.context import build_roleplay_context
from roleplay.reducer import NON_CANON_BOUNDARY_NOTE
from sessiontree.providers.factory import get_provider
from tests.services.session_builders import words

from .conftest import assert_audited
from .roleplay_story import LONG_HAIR, SHORT_HAIR, ApiStory, add, hair, review


@pytest.fixture
def story(api, kind) -> ApiStory:
    return ApiStory(api, kind)


def mentions_short_hair(value: Any) -> bool:
    return SHORT_HAIR in json.dumps(value, ensure_ascii=False)


# --- 9.1 in-place tree ---


def test_9_1_back_before_the_haircut_and_forward_again(story):
    ids = story.haircut_story()
    assert hair(story.state()) == SHORT_HAIR

    # /tree to the user message that asked for the cut: the leaf goes to its parent, the text comes back.
    moved = story.navigate(ids["ask_cut"])
    assert (moved["leaf_entry_id"], moved["editor_text"]) == (ids["reply"], "Will you cut your hair?")
    assert story.leaf == ids["reply"]
    at_reply = story.state()
    assert at_reply["revision"] == 0 and at_reply["state"] == {} and at_reply["leaf_entry_id"] == ids["reply"]

    refuse = story.user("Please don't cut your hair.")
    story.assistant(f"Alice keeps her {LONG_HAIR} hair.")
    state = story.state()
    assert state["revision"] == 0 and not mentions_short_hair(state)
    assert story.entry(refuse)["parentId"] == ids["reply"]

    # The old branch is still there: at its leaf (read, then moved to) the hair is short again.
    refused_leaf = story.leaf
    assert hair(story.state(leaf=ids["cut"])) == SHORT_HAIR and story.leaf == refused_leaf
    assert story.navigate(ids["cut"])["leaf_entry_id"] == ids["cut"]
    back = story.state()
    assert back["revision"] == 1 and hair(back) == SHORT_HAIR
    story.navigate(refused_leaf)
    again = story.state()
    assert again["revision"] == 0 and not mentions_short_hair(again)


# --- 9.2 fork before / 9.3 clone at ---


def test_9_2_fork_before_the_haircut_request(story):
    ids = story.haircut_story()
    source_entries = story.entries()
    source_state = story.state()

    new = story.fork(ids["ask_cut"], "before")
    assert new["session_id"] != story.sid and new["parent_session_id"] == story.sid
    fork = story.on(new["session_id"])
    assert [e["id"] for e in fork.entries()] == [ids["identity"], ids["greet"], ids["reply"]]
    forked = fork.state()
    assert forked["character_id"] == "alice" and forked["revision"] == 0 and not mentions_short_hair(forked)

    # Later writes land in the new session only.
    fork.correct({"op": "add", "path": "/appearance", "value": {"hair": "braided"}, "reason": "she braids it"})
    assert hair(fork.state()) == "braided"
    assert story.entries() == source_entries
    assert story.state() == source_state and hair(source_state) == SHORT_HAIR


def test_9_3_clone_at_the_haircut_turn_result(story):
    ids = story.haircut_story()
    source_entries = story.entries()

    new = story.fork(ids["cut"], "at")
    clone = story.on(new["session_id"])
    assert new["parent_session_id"] == story.sid
    assert clone.entries()[-1]["id"] == ids["cut"]
    cloned = clone.state()
    assert cloned["revision"] == 1 and hair(cloned) == SHORT_HAIR

    clone.turn([add("/location", "royal capital")])
    assert clone.state()["state"]["location"] == "royal capital"
    assert story.entries() == source_entries
    assert "location" not in story.state()["state"]


# --- 9.4 pending review branches ---


def test_9_4_pending_review_accepted_on_one_branch_rejected_on_another(story):
    story.select_character()
    story.user("A wolf!")
    story.assistant("You drive the wolf away.")
    pending = story.turn(
        events=["the player rescued Alice"],
        reviews=[review("review-trust", add("/relationship", {"user": {"trust": 0.55}}))],
    )
    assert [r["reviewId"] for r in story.reviews()["pending"]] == ["review-trust"]

    accept = story.decide("review-trust", {"decision": "accept", "expected_leaf_id": pending})
    assert story.navigate(pending)["leaf_entry_id"] == pending
    assert [r["reviewId"] for r in story.reviews()["pending"]] == ["review-trust"]  # pending again on this branch
    reject = story.decide("review-trust", {"decision": "reject", "expected_leaf_id": pending})
    assert accept["parentId"] == reject["parentId"] == pending

    on_accept = story.state(leaf=accept["id"])
    on_reject = story.state(leaf=reject["id"])
    assert on_accept["state"] == {"relationship": {"user": {"trust": 0.55}}}
    assert on_reject["state"] == {}
    assert on_accept["events"] == on_reject["events"] == ["the player rescued Alice"]
    assert [r["decision"] for r in on_accept["decided_reviews"]] == ["accept"]
    assert [r["decision"] for r in on_reject["decided_reviews"]] == ["reject"]
    assert on_accept["pending_reviews"] == on_reject["pending_reviews"] == []
    # Deciding again on the rejecting branch is a conflict; on the accepting one too.
    story.decide("review-trust", {"decision": "accept"}, expected=409)


# --- 9.5 branch summary pollution ---


def test_9_5_a_branch_summary_never_becomes_canon(story, kind):
    ids = story.haircut_story()
    moved = story.navigate(ids["ask_cut"], summarize=True)
    summary = moved["summary_entry"]
    assert summary is not None and summary["type"] == "branch_summary"
    assert summary["parentId"] == ids["reply"] and summary["fromId"] == ids["cut"]
    story.user("Please keep your hair long.")
    story.assistant(f"Alice keeps her {LONG_HAIR} hair.")

    state = story.state()
    assert state["revision"] == 0 and state["state"] == {} and not mentions_short_hair(state)
    assert summary["id"] not in {record["entry_id"] for record in state["provenance"].values()}
    # The summary is stored and reaches the plain context…
    assert story.entry(summary["id"]) == summary
    context = story.api.get(f"/api/sessions/{story.sid}/context/")
    assert any(m["role"] == "branchSummary" and m["summary"] == summary["summary"] for m in context["messages"])
    # …but not the roleplay context, which is the service's.
    roleplay_context = story.context()
    assert roleplay_context == json.loads(json.dumps(build_roleplay_context(get_provider(kind), story.sid)))
    assert all(m["role"] != "branchSummary" for m in roleplay_context["messages"])
    assert roleplay_context["roleplay"]["removed_branch_summary_entry_ids"] == [summary["id"]]
    assert NON_CANON_BOUNDARY_NOTE in roleplay_context["messages"][-1]["content"]


# --- 9.6 checkpoint isolation ---


def test_9_6_each_branch_reads_only_its_own_checkpoint(story):
    ids = story.haircut_story()
    short_checkpoint = story.checkpoint()
    a_leaf = story.turn([add("/location", "royal capital")])

    story.navigate(ids["ask_cut"])
    story.user("Let's stay in the village.")
    story.turn([add("/mood", "content")])
    long_checkpoint = story.checkpoint()
    b_leaf = story.turn([add("/location", "south district")])

    on_a, on_b = story.state(leaf=a_leaf), story.state(leaf=b_leaf)
    assert on_a["checkpoint_entry_id"] == short_checkpoint["id"]
    assert on_b["checkpoint_entry_id"] == long_checkpoint["id"]
    assert on_a["state"] == {"appearance": {"hair": SHORT_HAIR}, "location": "royal capital"}
    assert on_b["state"] == {"mood": "content", "location": "south district"}
    assert short_checkpoint["data"]["state"] == {"appearance": {"hair": SHORT_HAIR}}
    assert long_checkpoint["data"]["state"] == {"mood": "content"}
    assert [c["entry_id"] for c in story.checkpoints(leaf=a_leaf)["checkpoints"]] == [short_checkpoint["id"]]
    assert [c["entry_id"] for c in story.checkpoints()["checkpoints"]] == [long_checkpoint["id"]]

    # Back before either checkpoint: revision 0, no checkpoint on the path.
    story.navigate(ids["reply"])
    moved = story.state()
    assert moved["checkpoint_entry_id"] is None and moved["revision"] == 0
    assert story.checkpoints()["checkpoints"] == []


# --- compaction with its checkpoint ---


def test_compaction_appends_a_checkpoint_that_keeps_revision_and_hash(story, users):
    story.haircut_story()
    for n in range(4):
        story.user(f"Chapter {n}: " + words(9000))
        story.assistant(f"Alice tells story {n}. " + words(9000))
        story.turn([add(f"/chapter{n}", n)], memories=[f"chapter {n}"])
    before = story.state()
    leaf_before = story.leaf

    compaction = story.api.post(f"/api/sessions/{story.sid}/compact/", {}, expected=201)
    assert compaction["type"] == "compaction" and compaction["parentId"] == leaf_before
    [*_, listed] = story.checkpoints()["checkpoints"]
    assert (listed["trigger"], listed["compaction_entry_id"], listed["parent_id"]) == (
        "compaction",
        compaction["id"],
        compaction["id"],
    )
    assert story.leaf == listed["entry_id"]
    assert_audited(story.sid, "roleplay_checkpoint", users.alice)  # the hook writes as the API's caller

    after = story.state()
    assert after["checkpoint_entry_id"] == listed["entry_id"]
    assert (
        (after["revision"], after["state_hash"])
        == (before["revision"], before["state_hash"])
        == (5, listed["state_hash"])
    )
    assert after["state"] == before["state"] and after["memories"] == before["memories"]

    # /tree back before the compaction: its checkpoint is not on that path, the state is the same.
    story.navigate(leaf_before)
    assert listed["entry_id"] not in [c["entry_id"] for c in story.checkpoints()["checkpoints"]]
    moved = story.state()
    assert moved["checkpoint_entry_id"] != listed["entry_id"]
    assert (moved["revision"], moved["state_hash"]) == (before["revision"], before["state_hash"])


# --- a correction never moves the tree ---


def test_a_correction_is_recorded_with_provenance_on_the_current_branch_only(story):
    ids = story.haircut_story()
    before_entries = story.entries()
    story.correct({"op": "replace", "path": "/appearance/hair", "value": "long"}, expected=400)
    assert story.entries() == before_entries

    entry = story.correct(
        {
            "op": "replace",
            "path": "/appearance/hair",
            "from": SHORT_HAIR,
            "value": "chin-length",
            "reason": "the haircut was recorded wrong",
            "correctsCommitId": "commit-haircut",
        }
    )
    assert entry["parentId"] == ids["cut"]
    assert story.entries() == [*before_entries, entry]
    state = story.state()
    assert hair(state) == "chin-length"
    record = state["provenance"]["/appearance/hair"]
    assert (record["entry_id"], record["kind"], record["corrects_commit_id"]) == (
        entry["id"],
        "correction",
        "commit-haircut",
    )
    story.navigate(ids["ask_cut"])
    before_cut = story.state()
    assert before_cut["revision"] == 0 and hair(before_cut) is None
