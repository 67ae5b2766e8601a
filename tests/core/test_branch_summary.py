"""Branch summaries: which entries a move abandons, and what a summarizer gets."""

from __future__ import annotations

from typing import Any

import pytest

from sessiontree.core.branch_summary import collect_entries_for_branch_summary, prepare_branch_entries
from sessiontree.core.compaction import estimate_tokens
from sessiontree.core.errors import EntryNotFound


def entry(entry_id: str, parent_id: str | None, entry_type: str = "message", **fields: Any) -> dict[str, Any]:
    return {
        "type": entry_type,
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        **fields,
    }


def user(entry_id: str, parent_id: str | None, text: str = "hello") -> dict[str, Any]:
    return entry(entry_id, parent_id, message={"role": "user", "content": text})


def assistant(entry_id: str, parent_id: str | None, text: str = "ok", tools: list | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for name, arguments in tools or []:
        content.append({"type": "toolCall", "id": f"c-{entry_id}", "name": name, "arguments": arguments})
    return entry(entry_id, parent_id, message={"role": "assistant", "content": content})


def tool_result(entry_id: str, parent_id: str | None) -> dict[str, Any]:
    return entry(
        entry_id,
        parent_id,
        message={
            "role": "toolResult",
            "toolCallId": "c",
            "toolName": "read",
            "content": [{"type": "text", "text": "x"}],
        },
    )


@pytest.fixture
def tree() -> list[dict[str, Any]]:
    """
    u1 ─ a1 ─ u2 ─ a2 ─ t2 ─ a3        (old branch, leaf a3)
             └ u3 ─ a4                 (other branch, leaf a4)
    r2 ─ a9                            (a second root, after a reset leaf)
    """
    return [
        user("u1", None),
        assistant("a1", "u1"),
        user("u2", "a1", "try approach A"),
        assistant("a2", "u2", "reading", tools=[("read", {"path": "a.py"})]),
        tool_result("t2", "a2"),
        assistant("a3", "t2", "approach A done", tools=[("edit", {"path": "a.py"})]),
        user("u3", "a1", "try approach B"),
        assistant("a4", "u3"),
        user("r2", None, "fresh start"),
        assistant("a9", "r2"),
    ]


def ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in entries]


def test_collects_the_abandoned_branch_back_to_the_common_ancestor(tree) -> None:
    entries, ancestor = collect_entries_for_branch_summary(tree, "a3", "a4")
    assert ancestor == "a1"
    assert ids(entries) == ["u2", "a2", "t2", "a3"]  # oldest first


def test_moving_back_to_an_ancestor_abandons_what_lies_below_it(tree) -> None:
    entries, ancestor = collect_entries_for_branch_summary(tree, "a3", "u2")
    assert ancestor == "u2"
    assert ids(entries) == ["a2", "t2", "a3"]


def test_nothing_is_abandoned_moving_forward_or_staying(tree) -> None:
    assert collect_entries_for_branch_summary(tree, "a1", "a3") == ([], "a1")
    assert collect_entries_for_branch_summary(tree, "a3", "a3") == ([], "a3")


def test_no_old_leaf_means_nothing_to_summarize(tree) -> None:
    assert collect_entries_for_branch_summary(tree, None, "a3") == ([], None)


def test_disjoint_roots_abandon_the_whole_old_path(tree) -> None:
    entries, ancestor = collect_entries_for_branch_summary(tree, "a9", "a4")
    assert ancestor is None
    assert ids(entries) == ["r2", "a9"]


def test_unknown_ids_are_named(tree) -> None:
    with pytest.raises(EntryNotFound, match="nope1234"):
        collect_entries_for_branch_summary(tree, "nope1234", "a4")
    with pytest.raises(EntryNotFound, match="gone5678"):
        collect_entries_for_branch_summary(tree, "a3", "gone5678")


def test_compactions_on_the_abandoned_branch_are_included(tree) -> None:
    tree.append(entry("c1", "a3", "compaction", summary="compacted", firstKeptEntryId="a2", tokensBefore=10))
    tree.append(user("u9", "c1", "after compaction"))
    entries, ancestor = collect_entries_for_branch_summary(tree, "u9", "a4")
    assert ancestor == "a1"
    assert ids(entries) == ["u2", "a2", "t2", "a3", "c1", "u9"]


def test_an_orphaned_entry_acts_as_a_root(tree) -> None:
    # Pi's own forks can leave an entry whose parent is missing.
    tree.append(user("o1", "missing0", "orphan"))
    tree.append(assistant("o2", "o1"))
    entries, ancestor = collect_entries_for_branch_summary(tree, "o2", "a4")
    assert ancestor is None
    assert ids(entries) == ["o1", "o2"]


def test_prepare_branch_entries_messages_and_files(tree) -> None:
    tree.append(
        entry(
            "b1",
            "a3",
            "branch_summary",
            fromId="zz",
            summary="nested",
            details={"readFiles": ["nested-read.py"], "modifiedFiles": ["nested-mod.py"]},
        )
    )
    tree.append(
        entry(
            "b2", "b1", "branch_summary", fromId="zz", summary="hook", fromHook=True, details={"readFiles": ["hook.py"]}
        )
    )
    tree.append(entry("c1", "b2", "compaction", summary="compacted", firstKeptEntryId="a2", tokensBefore=10))
    tree.append(entry("m1", "c1", "custom_message", customType="note", content="note", display=True))
    tree.append(entry("l1", "m1", "label", targetId="u2", label="x"))
    entries, _ = collect_entries_for_branch_summary(tree, "l1", "a4")
    preparation = prepare_branch_entries(entries)
    roles = [m["role"] for m in preparation.messages]
    # Tool results and labels are left out; summaries and custom messages stay.
    assert roles == ["user", "assistant", "assistant", "branchSummary", "branchSummary", "compactionSummary", "custom"]
    assert preparation.total_tokens == sum(estimate_tokens(m) for m in preparation.messages)
    read_files, modified_files = preparation.file_ops.file_lists()
    assert read_files == ["nested-read.py"]  # a.py was read then edited: modified only
    assert modified_files == ["a.py", "nested-mod.py"]
    assert preparation.details() == {"readFiles": ["nested-read.py"], "modifiedFiles": ["a.py", "nested-mod.py"]}


def test_prepare_branch_entries_keeps_the_newest_within_budget() -> None:
    entries = [
        user("u1", None, "old " * 100),  # 100 tokens
        assistant("a1", "u1", "old reply " * 40),  # 100 tokens
        user("u2", "a1", "new " * 25),  # 25 tokens
        assistant("a2", "u2", "new reply" + "." * 91),  # 25 tokens
    ]
    preparation = prepare_branch_entries(entries, token_budget=120)
    assert [m["content"] if m["role"] == "user" else m["content"][0]["text"][:9] for m in preparation.messages] == [
        "new " * 25,
        "new reply",
    ]
    assert preparation.total_tokens == 50
    assert prepare_branch_entries(entries, token_budget=0).total_tokens == 250  # 0 = unlimited


def test_an_overflowing_summary_still_fits_below_ninety_percent() -> None:
    entries = [
        entry("b1", None, "branch_summary", fromId="zz", summary="s" * 400),  # 100 tokens
        user("u1", "b1", "u" * 200),  # 50 tokens
    ]
    # 50 used of 100 (< 90%): the summary is taken although it overflows.
    taken = prepare_branch_entries(entries, token_budget=100)
    assert [m["role"] for m in taken.messages] == ["branchSummary", "user"]
    # 95 used of 100 (>= 90%): it is not.
    entries[1] = user("u1", "b1", "u" * 380)
    skipped = prepare_branch_entries(entries, token_budget=100)
    assert [m["role"] for m in skipped.messages] == ["user"]
