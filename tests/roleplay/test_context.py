"""roleplay.context: branch summaries out of the model's copy, the character view and the note in."""

from __future__ import annotations

import pytest

from roleplay.context import CHARACTER_VIEW_CUSTOM_TYPE, build_roleplay_context
from roleplay.reducer import CHARACTER_VIEW_HEADING, NON_CANON_BOUNDARY_NOTE

from .story import ABANDONED, LONG_HAIR, SHORT_HAIR, Story, branch_with_summary


@pytest.fixture
def story(provider):
    return Story(provider)


def test_branch_summaries_are_removed_from_the_copy_only(story):
    ids = branch_with_summary(story)
    stored_before = story.entries()
    plain = story.provider.build_context(story.session_id)
    assert "branchSummary" in [m["role"] for m in plain["messages"]]

    context = build_roleplay_context(story.provider, story.session_id)

    roles = [m["role"] for m in context["messages"]]
    assert "branchSummary" not in roles
    assert all(ABANDONED not in str(m.get("content")) for m in context["messages"][:-1])
    assert context["roleplay"]["removed_branch_summary_entry_ids"] == [ids["summary"]]
    # Every other message is kept, in order, with its source entry id.
    kept = [(m, i) for m, i in zip(plain["messages"], plain["source_entry_ids"], strict=True) if i != ids["summary"]]
    assert list(zip(context["messages"][:-1], context["source_entry_ids"][:-1], strict=True)) == kept
    # Stored entries are untouched, and the plain context still has the summary.
    assert story.entries() == stored_before
    assert story.entry(ids["summary"])["summary"] == ABANDONED
    assert story.provider.build_context(story.session_id) == plain


def test_the_character_view_and_the_non_canon_note_come_last(story):
    branch_with_summary(story)
    context = build_roleplay_context(story.provider, story.session_id)
    view = context["messages"][-1]
    assert context["source_entry_ids"][-1] is None
    assert len(context["messages"]) == len(context["source_entry_ids"])
    assert view["role"] == "custom" and view["customType"] == CHARACTER_VIEW_CUSTOM_TYPE
    assert view["display"] is False
    text = view["content"]
    assert text.startswith(CHARACTER_VIEW_HEADING)
    assert "Character: alice" in text and "relieved" in text
    assert SHORT_HAIR not in text
    assert text.endswith(NON_CANON_BOUNDARY_NOTE)
    assert view["details"] == {
        "characterId": "alice",
        "revision": 1,
        "stateHash": context["roleplay"]["state_hash"],
    }
    assert context["roleplay"]["character_view"] in text
    assert context["roleplay"]["boundary_note"] == NON_CANON_BOUNDARY_NOTE


def test_context_at_another_entry_reflects_that_branch(story):
    ids = branch_with_summary(story)
    context = build_roleplay_context(story.provider, story.session_id, leaf_entry_id=ids["cut"])
    assert context["roleplay"]["removed_branch_summary_entry_ids"] == []
    assert context["roleplay"]["revision"] == 1
    assert SHORT_HAIR in context["messages"][-1]["content"]
    assert (
        context["source_entry_ids"][:-1]
        == story.provider.build_context(story.session_id, ids["cut"])["source_entry_ids"]
    )


def test_settings_and_compaction_summaries_are_kept(story):
    story.provider.append_thinking_level_change(story.session_id, "high")
    story.haircut_story()
    first = story.entries()[1]["id"]
    story.provider.append_compaction(
        story.session_id, summary="They met and talked.", first_kept_entry_id=first, tokens_before=100
    )
    context = build_roleplay_context(story.provider, story.session_id)
    assert context["thinking_level"] == "high"
    assert context["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    assert context["messages"][0]["role"] == "compactionSummary"


def test_a_session_without_roleplay_gets_an_empty_view_and_the_note(story):
    story.user("hi")
    context = build_roleplay_context(story.provider, story.session_id)
    assert [m["role"] for m in context["messages"]] == ["user", "custom"]
    assert "Character: (none)" in context["messages"][-1]["content"]
    assert context["roleplay"]["character_id"] is None
    assert LONG_HAIR not in context["messages"][-1]["content"]


def test_the_same_path_gives_the_same_context(story):
    branch_with_summary(story)
    assert build_roleplay_context(story.provider, story.session_id) == build_roleplay_context(
        story.provider, story.session_id
    )
