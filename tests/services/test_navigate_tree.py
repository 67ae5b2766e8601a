"""navigate_tree over every provider: Pi's /tree rules for where the leaf
goes, what is summarized, and where summaries and labels are attached."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sessiontree.core.errors import EntryNotFound, InvalidEntry, LeafConflict, SummarizerError
from sessiontree.core.path import resolve_latest_labels
from sessiontree.services import navigate_tree
from sessiontree.summarizers.generate import BRANCH_SUMMARY_PREAMBLE

from .session_builders import (
    FailingSummarizer,
    MeddlingSummarizer,
    RecordingSummarizer,
    assistant,
    snapshot_state,
    tool_call,
    tool_result,
    user,
)


@pytest.fixture
def tree(provider):
    """
    u1 "hello" ─ a1 ─┬─ u2 "try A" ─ a2 (reads a.py) ─ tr2 ─ a3 "A done"
                     └─ u3 "try B" ─ a4 "B done"   ← leaf
    """
    provider.create_session(session_id="s1")
    t = SimpleNamespace(provider=provider)
    t.u1 = provider.append_message("s1", user("hello"))
    t.a1 = provider.append_message("s1", assistant("hi"))
    t.u2 = provider.append_message("s1", user("try A"))
    t.a2 = provider.append_message("s1", assistant("", tool_call("c1", "read", path="a.py")))
    t.tr2 = provider.append_message("s1", tool_result("c1", "read", "contents of a.py"))
    t.a3 = provider.append_message("s1", assistant("A done"))
    provider.switch_leaf("s1", t.a1["id"])
    t.u3 = provider.append_message("s1", user("try B"))
    t.a4 = provider.append_message("s1", assistant("B done"))
    return t


def leaf(provider) -> str | None:
    return provider.get_session("s1")["leaf_entry_id"]


# --- without a summary ------------------------------------------------------------------


def test_user_message_target_moves_the_leaf_to_its_parent_and_returns_its_text(tree):
    p = tree.provider
    before = p.list_entries("s1")
    result = navigate_tree(provider=p, session_id="s1", target_id=tree.u2["id"], actor="system", channel="internal")
    assert result == {
        "leaf_entry_id": tree.a1["id"],
        "editor_text": "try A",
        "summary_entry": None,
        "label_entry": None,
    }
    assert leaf(p) == tree.a1["id"]
    assert p.list_entries("s1") == before  # navigation alone never appends


def test_editor_text_joins_the_text_blocks_of_a_user_message(tree):
    p = tree.provider
    blocks = [
        {"type": "text", "text": "look at "},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "text", "text": "this"},
    ]
    u = p.append_message("s1", user(blocks))
    p.append_message("s1", assistant("seen"))
    result = navigate_tree(provider=p, session_id="s1", target_id=u["id"], actor="system", channel="internal")
    assert result["editor_text"] == "look at this"
    assert result["leaf_entry_id"] == tree.a4["id"]


def test_user_message_at_the_root_resets_the_leaf(tree):
    p = tree.provider
    result = navigate_tree(provider=p, session_id="s1", target_id=tree.u1["id"], actor="system", channel="internal")
    assert result["leaf_entry_id"] is None and result["editor_text"] == "hello"
    assert leaf(p) is None
    assert p.build_context("s1")["messages"] == []
    # The next message starts a new root, as in Pi.
    assert p.append_message("s1", user("hello again"))["parentId"] is None


def test_assistant_target_becomes_the_leaf(tree):
    p = tree.provider
    result = navigate_tree(provider=p, session_id="s1", target_id=tree.a3["id"], actor="system", channel="internal")
    assert result == {"leaf_entry_id": tree.a3["id"], "editor_text": None, "summary_entry": None, "label_entry": None}
    assert [m.get("content") for m in p.build_context("s1")["messages"]][-1] == tree.a3["message"]["content"]


def test_tool_result_target_becomes_the_leaf(tree):
    p = tree.provider
    assert (
        navigate_tree(provider=p, session_id="s1", target_id=tree.tr2["id"], actor="system", channel="internal")[
            "leaf_entry_id"
        ]
        == tree.tr2["id"]
    )


def test_custom_message_target_behaves_like_a_user_message(tree):
    p = tree.provider
    note = p.append_custom_message("s1", "note", [{"type": "text", "text": "remember "}, {"type": "text", "text": "X"}])
    p.append_message("s1", assistant("noted"))
    result = navigate_tree(provider=p, session_id="s1", target_id=note["id"], actor="system", channel="internal")
    assert result["leaf_entry_id"] == tree.a4["id"]
    assert result["editor_text"] == "remember X"


def test_target_equal_to_the_leaf_does_nothing(tree):
    p = tree.provider
    before = snapshot_state(p, "s1")
    summarizer = RecordingSummarizer()
    result = navigate_tree(
        provider=p,
        session_id="s1",
        target_id=tree.a4["id"],
        summarize=True,
        summarizer=summarizer,
        label="here",
        actor="system",
        channel="internal",
    )
    assert result == {"leaf_entry_id": tree.a4["id"], "editor_text": None, "summary_entry": None, "label_entry": None}
    assert snapshot_state(p, "s1") == before
    assert summarizer.requests == []


def test_unknown_target_raises_and_changes_nothing(tree):
    p = tree.provider
    before = snapshot_state(p, "s1")
    with pytest.raises(EntryNotFound, match="nope1234"):
        navigate_tree(
            provider=p,
            session_id="s1",
            target_id="nope1234",
            summarize=True,
            summarizer=RecordingSummarizer(),
            actor="system",
            channel="internal",
        )
    assert snapshot_state(p, "s1") == before


# --- with a summary ---------------------------------------------------------------------------


def test_branch_summary_between_branches(tree):
    p = tree.provider
    summarizer = RecordingSummarizer()
    result = navigate_tree(
        provider=p,
        session_id="s1",
        target_id=tree.a3["id"],
        summarize=True,
        summarizer=summarizer,
        actor="system",
        channel="internal",
    )

    (request,) = summarizer.requests
    assert request.kind == "branch"
    assert list(request.messages) == [tree.u3["message"], tree.a4["message"]]
    summary = result["summary_entry"]
    assert summary["type"] == "branch_summary"
    assert summary["summary"] == BRANCH_SUMMARY_PREAMBLE + "BRANCH 1"
    # Attached at the new position; fromId names the leaf that was left (Pi 0.84.3).
    assert summary["parentId"] == tree.a3["id"]
    assert summary["fromId"] == tree.a4["id"]
    assert "abandonedLeafId" not in summary["details"]
    assert result["leaf_entry_id"] == summary["id"] == leaf(p)
    assert p.list_entries("s1")[-1] == summary

    messages = p.build_context("s1")["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "branchSummary",
    ]
    assert messages[-1]["summary"] == summary["summary"] and messages[-1]["fromId"] == tree.a4["id"]


def test_branch_summary_leaves_out_tool_results_and_lists_files(tree):
    p = tree.provider
    navigate_tree(
        provider=p, session_id="s1", target_id=tree.a3["id"], actor="system", channel="internal"
    )  # leaf on branch A
    summarizer = RecordingSummarizer()
    result = navigate_tree(
        provider=p,
        session_id="s1",
        target_id=tree.a4["id"],
        summarize=True,
        summarizer=summarizer,
        actor="system",
        channel="internal",
    )
    (request,) = summarizer.requests
    assert list(request.messages) == [tree.u2["message"], tree.a2["message"], tree.a3["message"]]
    assert result["summary_entry"]["details"] == {"readFiles": ["a.py"], "modifiedFiles": []}
    assert result["summary_entry"]["fromId"] == tree.a3["id"]
    assert result["summary_entry"]["summary"].endswith("<read-files>\na.py\n</read-files>")


def test_summary_when_the_target_is_a_user_message(tree):
    p = tree.provider
    summarizer = RecordingSummarizer()
    result = navigate_tree(
        provider=p,
        session_id="s1",
        target_id=tree.u2["id"],
        summarize=True,
        summarizer=summarizer,
        actor="system",
        channel="internal",
    )
    assert result["editor_text"] == "try A"
    assert list(summarizer.requests[0].messages) == [tree.u3["message"], tree.a4["message"]]
    summary = result["summary_entry"]
    assert summary["parentId"] == tree.a1["id"] and summary["fromId"] == tree.a4["id"]
    assert leaf(p) == summary["id"]


def test_branch_summary_from_the_root(tree):
    p = tree.provider
    summarizer = RecordingSummarizer()
    result = navigate_tree(
        provider=p,
        session_id="s1",
        target_id=tree.u1["id"],
        summarize=True,
        summarizer=summarizer,
        actor="system",
        channel="internal",
    )
    assert list(summarizer.requests[0].messages) == [tree.a1["message"], tree.u3["message"], tree.a4["message"]]
    summary = result["summary_entry"]
    assert summary["parentId"] is None
    assert summary["fromId"] == tree.a4["id"]
    assert result["editor_text"] == "hello"
    assert leaf(p) == summary["id"]
    assert [m["role"] for m in p.build_context("s1")["messages"]] == ["branchSummary"]


def test_nothing_left_behind_means_no_summary(tree):
    p = tree.provider
    p.switch_leaf("s1", tree.a1["id"])
    before = p.list_entries("s1")
    summarizer = RecordingSummarizer()
    result = navigate_tree(
        provider=p,
        session_id="s1",
        target_id=tree.a4["id"],
        summarize=True,
        summarizer=summarizer,
        actor="system",
        channel="internal",
    )
    assert summarizer.requests == []
    assert result["summary_entry"] is None and result["leaf_entry_id"] == tree.a4["id"]
    assert p.list_entries("s1") == before


def test_default_summarizer_is_the_configured_one(tree, settings):
    settings.SESSIONTREE_SUMMARIZER = "extractive"
    result = navigate_tree(
        provider=tree.provider,
        session_id="s1",
        target_id=tree.a3["id"],
        summarize=True,
        actor="system",
        channel="internal",
    )
    assert result["summary_entry"]["summary"].startswith(BRANCH_SUMMARY_PREAMBLE + "## Goal (branch)")
    assert "try B" in result["summary_entry"]["summary"]


def test_custom_instructions_reach_the_summarizer(tree):
    summarizer = RecordingSummarizer()
    navigate_tree(
        provider=tree.provider,
        session_id="s1",
        target_id=tree.a3["id"],
        summarize=True,
        summarizer=summarizer,
        custom_instructions="only the decisions",
        replace_instructions=True,
        actor="system",
        channel="internal",
    )
    assert summarizer.requests[0].custom_instructions == "only the decisions"
    assert summarizer.requests[0].replace_instructions is True


def test_summarizer_failure_writes_nothing_and_keeps_the_leaf(tree):
    p = tree.provider
    before = snapshot_state(p, "s1")
    with pytest.raises(SummarizerError):
        navigate_tree(
            provider=p,
            session_id="s1",
            target_id=tree.u2["id"],
            summarize=True,
            summarizer=FailingSummarizer(),
            label="x",
            actor="system",
            channel="internal",
        )
    assert snapshot_state(p, "s1") == before


def test_leaf_moving_while_summarizing_is_a_conflict(tree):
    p = tree.provider
    with pytest.raises(LeafConflict):
        navigate_tree(
            provider=p,
            session_id="s1",
            target_id=tree.a3["id"],
            summarize=True,
            summarizer=MeddlingSummarizer(p, "s1"),
            actor="system",
            channel="internal",
        )
    assert [e["type"] for e in p.list_entries("s1")].count("branch_summary") == 0


# --- labels -----------------------------------------------------------------------------------


def test_label_goes_on_the_target_without_a_summary(tree):
    p = tree.provider
    result = navigate_tree(
        provider=p, session_id="s1", target_id=tree.a3["id"], label="plan A", actor="system", channel="internal"
    )
    label_entry = result["label_entry"]
    assert label_entry["type"] == "label" and label_entry["targetId"] == tree.a3["id"]
    # A label is appended at the leaf like any entry (Pi does the same); the context is unchanged.
    assert label_entry["parentId"] == tree.a3["id"]
    assert result["leaf_entry_id"] == label_entry["id"]
    assert resolve_latest_labels(p.list_entries("s1"))[tree.a3["id"]]["label"] == "plan A"
    assert p.build_context("s1")["messages"][-1] == tree.a3["message"]


def test_label_on_a_user_message_target_labels_that_message(tree):
    p = tree.provider
    result = navigate_tree(
        provider=p, session_id="s1", target_id=tree.u2["id"], label="retry here", actor="system", channel="internal"
    )
    assert result["label_entry"]["targetId"] == tree.u2["id"]
    assert result["label_entry"]["parentId"] == tree.a1["id"]
    assert result["editor_text"] == "try A"


def test_label_goes_on_the_summary_entry_with_a_summary(tree):
    p = tree.provider
    result = navigate_tree(
        provider=p,
        session_id="s1",
        target_id=tree.a3["id"],
        summarize=True,
        summarizer=RecordingSummarizer(),
        label="left B",
        actor="system",
        channel="internal",
    )
    summary = result["summary_entry"]
    assert result["label_entry"]["targetId"] == summary["id"]
    assert result["label_entry"]["parentId"] == summary["id"]
    labels = resolve_latest_labels(p.list_entries("s1"))
    assert labels[summary["id"]]["label"] == "left B"
    assert tree.a3["id"] not in labels


def test_empty_label_adds_nothing(tree):
    p = tree.provider
    count = len(p.list_entries("s1"))
    assert (
        navigate_tree(
            provider=p, session_id="s1", target_id=tree.a3["id"], label="", actor="system", channel="internal"
        )["label_entry"]
        is None
    )
    assert len(p.list_entries("s1")) == count


@pytest.mark.parametrize("options", [{"label": 123}, {"label": ["x"]}, {"custom_instructions": ["focus"]}])
def test_a_non_text_label_or_instruction_is_refused_before_anything_moves(tree, options):
    # Found only when the label was appended, it used to leave the leaf moved
    # (and a summary written) behind a failed call.
    p = tree.provider
    summarizer = RecordingSummarizer()
    before = snapshot_state(p, "s1")
    with pytest.raises(InvalidEntry, match="must be a string or None"):
        navigate_tree(
            provider=p,
            session_id="s1",
            target_id=tree.a3["id"],
            summarize=True,
            summarizer=summarizer,
            actor="system",
            channel="internal",
            **options,
        )
    assert snapshot_state(p, "s1") == before
    assert summarizer.requests == []
