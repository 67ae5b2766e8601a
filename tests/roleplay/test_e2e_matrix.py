"""The roleplay seed's E2E matrix (§9), end to end through the services, on every provider.

Navigation, fork/clone and correction are three different operations: the
first moves the leaf, the second makes a new session, the third appends to
the current branch. The state always follows the active path.
"""

from __future__ import annotations

import json

import pytest

from roleplay import schema, service
from roleplay.context import build_roleplay_context
from roleplay.reducer import NON_CANON_BOUNDARY_NOTE, render_character_view
from sessiontree.core.compaction import CompactionSettings

from .story import LONG_HAIR, SHORT_HAIR, FakeSummarizer, Story, add, review

ABANDONED = "In the abandoned branch Alice cut her hair ear-length and arrived in the royal capital."


@pytest.fixture
def story(provider):
    return Story(provider)


def hair(state):
    return state["state"].get("appearance", {}).get("hair")


def mentions_short_hair(value) -> bool:
    return SHORT_HAIR in json.dumps(value, ensure_ascii=False)


# --- 9.1 in-place tree ---


def test_9_1_in_place_tree_back_before_the_haircut_and_forward_again(story):
    ids = story.haircut_story()
    assert hair(service.inspect_state(story.provider, story.session_id)) == SHORT_HAIR

    # /tree to the user message that asked for the cut: the leaf goes to its parent.
    moved = service.history_goto(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        actor="system",
        channel="internal",
    )
    assert moved["leaf_entry_id"] == ids["reply"] and story.leaf == ids["reply"]
    assert moved["editor_text"] == "Will you cut your hair?"
    assert moved["state"]["revision"] == 0

    refuse = story.user("Please don't cut your hair.")
    story.assistant(f"Alice keeps her {LONG_HAIR} hair.")
    state = service.inspect_state(story.provider, story.session_id)
    assert state["revision"] == 0
    assert not mentions_short_hair(state)
    assert story.entry(refuse)["parentId"] == ids["reply"]

    # The old branch is still there: navigating to it restores the short hair.
    refused_leaf = story.leaf
    back = service.history_goto(
        provider=story.provider, session_id=story.session_id, entry_id=ids["cut"], actor="system", channel="internal"
    )
    assert back["leaf_entry_id"] == ids["cut"]
    assert back["state"]["revision"] == 1 and hair(back["state"]) == SHORT_HAIR
    again = service.history_goto(
        provider=story.provider, session_id=story.session_id, entry_id=refused_leaf, actor="system", channel="internal"
    )
    assert again["state"]["revision"] == 0 and not mentions_short_hair(again["state"])


# --- 9.2 fork before / 9.3 clone at ---


def parent_reference(story) -> str:
    """What Pi writes as a fork's ``parentSession``: the file's path, or the id."""
    source = story.provider.get_session(story.session_id)
    return source["session_file"] if story.provider.kind == "file" else story.session_id


def test_9_2_fork_before_the_haircut_request(story):
    ids = story.haircut_story()
    source_entries = story.entries()
    source_state = service.inspect_state(story.provider, story.session_id)

    forked = service.history_fork(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        position="before",
        actor="system",
        channel="internal",
    )
    new = forked["session"]
    new_id = new["session_id"]
    assert new_id != story.session_id
    assert new["parent_session_id"] == story.session_id
    assert story.provider.get_header(new_id)["parentSession"] == parent_reference(story)
    assert [e["id"] for e in story.provider.list_entries(new_id)] == [ids["identity"], ids["greet"], ids["reply"]]
    assert forked["state"]["character_id"] == "alice"
    assert forked["state"]["revision"] == 0 and not mentions_short_hair(forked["state"])

    # Later writes land in the new session only.
    service.correct_state(
        provider=story.provider,
        session_id=new_id,
        payload={"op": "add", "path": "/appearance", "value": {"hair": "braided"}, "reason": "r"},
        actor="system",
        channel="internal",
    )
    assert hair(service.inspect_state(story.provider, new_id)) == "braided"
    assert story.entries() == source_entries
    assert service.inspect_state(story.provider, story.session_id) == source_state
    assert hair(source_state) == SHORT_HAIR


def test_9_3_clone_at_the_haircut_turn_result(story):
    ids = story.haircut_story()
    source_entries = story.entries()

    cloned = service.history_fork(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["cut"],
        position="at",
        actor="system",
        channel="internal",
    )
    new_id = cloned["session"]["session_id"]
    assert cloned["session"]["parent_session_id"] == story.session_id
    assert story.provider.get_header(new_id)["parentSession"] == parent_reference(story)
    assert story.provider.list_entries(new_id)[-1]["id"] == ids["cut"]
    assert cloned["state"]["revision"] == 1 and hair(cloned["state"]) == SHORT_HAIR

    clone = Story.__new__(Story)
    clone.__dict__.update(story.__dict__, session_id=new_id)
    clone.turn([add("/location", "royal capital")])
    assert service.inspect_state(story.provider, new_id)["state"]["location"] == "royal capital"
    assert story.entries() == source_entries
    assert "location" not in service.inspect_state(story.provider, story.session_id)["state"]


# --- 9.4 pending review branches ---


def test_9_4_pending_review_accept_and_reject_on_two_branches(story):
    story.select_character()
    story.user("A wolf!")
    story.assistant("You drive the wolf away.")
    pending = story.turn(
        events=["the player rescued Alice"],
        reviews=[review("review-trust", add("/relationship", {"user": {"trust": 0.55}}))],
    )
    assert [r["reviewId"] for r in service.list_reviews(story.provider, story.session_id)] == ["review-trust"]

    accept = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="accept",
        actor="system",
        channel="internal",
    )
    service.history_goto(
        provider=story.provider, session_id=story.session_id, entry_id=pending, actor="system", channel="internal"
    )
    reject = service.decide_review(
        provider=story.provider,
        session_id=story.session_id,
        review_id="review-trust",
        decision="reject",
        actor="system",
        channel="internal",
    )
    assert accept["parentId"] == reject["parentId"] == pending

    on_accept = service.inspect_state(story.provider, story.session_id, leaf_entry_id=accept["id"])
    on_reject = service.inspect_state(story.provider, story.session_id, leaf_entry_id=reject["id"])
    assert on_accept["state"] == {"relationship": {"user": {"trust": 0.55}}}
    assert on_reject["state"] == {}
    assert on_accept["events"] == on_reject["events"] == ["the player rescued Alice"]
    assert [r["decision"] for r in on_accept["decided_reviews"]] == ["accept"]
    assert [r["decision"] for r in on_reject["decided_reviews"]] == ["reject"]
    assert on_accept["pending_reviews"] == on_reject["pending_reviews"] == []


# --- 9.5 branch summary pollution ---


def test_9_5_a_branch_summary_never_becomes_canon(story):
    ids = story.haircut_story()
    summarizer = FakeSummarizer(ABANDONED)
    moved = service.history_goto(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        summarize=True,
        summarizer=summarizer,
        actor="system",
        channel="internal",
    )
    summary = moved["summary_entry"]
    assert summary is not None and summary["parentId"] == ids["reply"]
    assert ABANDONED in summary["summary"]
    assert len(summarizer.requests) == 1
    story.user("Please keep your hair long.")
    story.assistant(f"Alice keeps her {LONG_HAIR} hair.")

    state = service.inspect_state(story.provider, story.session_id)
    assert state["revision"] == 0 and not mentions_short_hair(state)
    assert SHORT_HAIR not in render_character_view(state)

    # The summary is stored and still reaches the plain session context…
    plain = story.provider.build_context(story.session_id)
    assert any(m["role"] == "branchSummary" and ABANDONED in m["summary"] for m in plain["messages"])
    # …but not the roleplay context, which carries the non-canon boundary instead.
    context = build_roleplay_context(story.provider, story.session_id)
    assert all(m["role"] != "branchSummary" for m in context["messages"])
    assert not any(ABANDONED in json.dumps(m, ensure_ascii=False) for m in context["messages"])
    view = context["messages"][-1]["content"]
    assert NON_CANON_BOUNDARY_NOTE in view and SHORT_HAIR not in view
    assert context["roleplay"]["removed_branch_summary_entry_ids"] == [summary["id"]]
    assert story.entry(summary["id"]) == summary


# --- 9.6 checkpoint isolation ---


def test_9_6_each_branch_reads_only_its_own_checkpoint(story):
    ids = story.haircut_story()
    short_checkpoint = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    a_leaf = story.turn([add("/location", "royal capital")])

    service.history_goto(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        actor="system",
        channel="internal",
    )
    story.user("Let's stay in the village.")
    story.turn([add("/mood", "content")])
    long_checkpoint = service.create_checkpoint(
        provider=story.provider, session_id=story.session_id, actor="system", channel="internal"
    )
    b_leaf = story.turn([add("/location", "south district")])

    on_a = service.inspect_state(story.provider, story.session_id, leaf_entry_id=a_leaf)
    on_b = service.inspect_state(story.provider, story.session_id, leaf_entry_id=b_leaf)
    assert on_a["checkpoint_entry_id"] == short_checkpoint["id"]
    assert on_b["checkpoint_entry_id"] == long_checkpoint["id"]
    assert on_a["state"] == {"appearance": {"hair": SHORT_HAIR}, "location": "royal capital"}
    assert on_b["state"] == {"mood": "content", "location": "south district"}
    assert short_checkpoint["data"]["state"] == {"appearance": {"hair": SHORT_HAIR}}
    assert long_checkpoint["data"]["state"] == {"mood": "content"}

    # Back before either checkpoint: revision 0, no checkpoint on the path.
    moved = service.history_goto(
        provider=story.provider, session_id=story.session_id, entry_id=ids["reply"], actor="system", channel="internal"
    )
    assert moved["state"]["checkpoint_entry_id"] is None and moved["state"]["revision"] == 0


# --- compaction checkpoint ---


def long_story(story):
    ids = story.haircut_story()
    for n in range(4):
        story.user(f"Chapter {n}: " + "They walk on through the hills. " * 40)
        story.assistant(f"Alice tells story {n}. " + "The road is long and the sky is grey. " * 40)
        story.turn([add(f"/chapter{n}", n)], memories=[f"chapter {n}"])
    return ids


def test_compaction_appends_a_checkpoint_that_keeps_revision_and_hash(story):
    long_story(story)
    before = service.inspect_state(story.provider, story.session_id)
    leaf_before = story.leaf

    result = service.compact_with_checkpoint(
        provider=story.provider,
        session_id=story.session_id,
        summarizer=FakeSummarizer("They travelled for four chapters."),
        settings=CompactionSettings(keep_recent_tokens=200),
        actor="system",
        channel="internal",
    )
    compaction, checkpoint = result["compaction"], result["checkpoint"]
    assert compaction is not None and compaction["type"] == "compaction"
    assert compaction["parentId"] == leaf_before
    assert checkpoint is not None and checkpoint["parentId"] == compaction["id"]
    assert checkpoint["customType"] == schema.CHECKPOINT_TYPE
    assert checkpoint["data"]["trigger"] == "compaction"
    assert checkpoint["data"]["compactionEntryId"] == compaction["id"]
    assert story.leaf == checkpoint["id"]

    after = service.inspect_state(story.provider, story.session_id)
    assert after["checkpoint_entry_id"] == checkpoint["id"]
    assert (after["revision"], after["state_hash"]) == (before["revision"], before["state_hash"])
    assert after["state"] == before["state"] and after["memories"] == before["memories"]
    assert after["revision"] == 5

    # The roleplay context after compaction: the summary first, the same view last.
    context = build_roleplay_context(story.provider, story.session_id)
    assert context["messages"][0]["role"] == "compactionSummary"
    assert context["roleplay"]["state_hash"] == before["state_hash"]

    # /tree back before the compaction: its checkpoint is not on that path.
    moved = service.history_goto(
        provider=story.provider, session_id=story.session_id, entry_id=leaf_before, actor="system", channel="internal"
    )
    assert moved["state"]["checkpoint_entry_id"] != checkpoint["id"]
    assert checkpoint["id"] not in [e["id"] for e in story.provider.get_active_path(story.session_id)]
    assert (moved["state"]["revision"], moved["state"]["state_hash"]) == (before["revision"], before["state_hash"])


def test_any_compaction_of_a_roleplay_branch_gets_its_checkpoint(story):
    """Not only the roleplay wrapper: the plain session-tree compaction (what an
    API, admin action or agent runtime calls) appends the checkpoint too."""
    from sessiontree.services import compact_session

    long_story(story)
    before = service.inspect_state(story.provider, story.session_id)
    compaction = compact_session(
        provider=story.provider,
        session_id=story.session_id,
        summarizer=FakeSummarizer("They travelled."),
        settings=CompactionSettings(keep_recent_tokens=200),
        actor="system",
        channel="internal",
    )
    checkpoint = story.entry(story.leaf)
    assert checkpoint["customType"] == schema.CHECKPOINT_TYPE
    assert checkpoint["parentId"] == compaction["id"]
    after = service.inspect_state(story.provider, story.session_id)
    assert (after["revision"], after["state_hash"]) == (before["revision"], before["state_hash"])


def test_a_failing_compaction_hook_never_loses_the_compaction(story, caplog):
    from sessiontree import services as tree_services

    def broken_hook(provider, session_id, compaction):
        raise RuntimeError("hook broke")

    long_story(story)
    tree_services.register_compaction_hook(broken_hook)
    try:
        compaction = tree_services.compact_session(
            provider=story.provider,
            session_id=story.session_id,
            summarizer=FakeSummarizer("They travelled."),
            settings=CompactionSettings(keep_recent_tokens=200),
            actor="system",
            channel="internal",
        )
    finally:
        tree_services.unregister_compaction_hook(broken_hook)
    assert compaction is not None
    assert story.entry(compaction["id"]) == compaction
    assert "hook broke" in caplog.text


# --- correction ---


def test_correction_is_recorded_with_provenance_and_never_moves_the_tree(story):
    ids = story.haircut_story()
    before_entries = story.entries()
    with pytest.raises(schema.RoleplayValidationError, match="reason"):
        service.correct_state(
            provider=story.provider,
            session_id=story.session_id,
            payload={"op": "replace", "path": "/appearance/hair", "value": "long"},
            actor="system",
            channel="internal",
        )
    assert story.entries() == before_entries

    entry = service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={
            "op": "replace",
            "path": "/appearance/hair",
            "from": SHORT_HAIR,
            "value": "chin-length",
            "reason": "the haircut was recorded wrong",
            "correctsCommitId": "commit-haircut",
        },
        actor="system",
        channel="internal",
    )
    assert entry["parentId"] == ids["cut"]
    assert story.entries() == [*before_entries, entry]
    state = service.inspect_state(story.provider, story.session_id)
    assert hair(state) == "chin-length"
    assert state["provenance"]["/appearance/hair"] == entry["id"]
    assert entry["data"]["source"] == "manual-correction"
    assert entry["data"]["correctsCommitId"] == "commit-haircut"
    # The correction is branch-local like everything else.
    before_cut = service.history_goto(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        actor="system",
        channel="internal",
    )["state"]
    assert before_cut["revision"] == 0 and hair(before_cut) is None
