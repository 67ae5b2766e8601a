"""Our kernel's answers in the shapes ``interop/pi_server.mjs`` reports Pi's,
so that a test compares plain JSON values and a mismatch names the leaf."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from sessiontree.core.branch_summary import collect_entries_for_branch_summary, prepare_branch_entries
from sessiontree.core.compaction import (
    CompactionPreparation,
    CompactionSettings,
    prepare_compaction,
    serialize_conversation,
)
from sessiontree.core.context_builder import build_session_context
from sessiontree.core.entries import resolve_session_name
from sessiontree.core.path import build_entry_index, build_tree, get_path_to_leaf, resolve_latest_labels
from sessiontree.core.pi_session_file import serialize_file
from sessiontree.core.types import Entry, SessionContext, TreeNode


def json_value(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, NaN null…)."""
    return orjson.loads(orjson.dumps(value))


def context_view(context: SessionContext) -> dict[str, Any]:
    return json_value(
        {"messages": context["messages"], "thinkingLevel": context["thinking_level"], "model": context["model"]}
    )


def preparation_view(prep: CompactionPreparation | None) -> dict[str, Any] | None:
    if prep is None:
        return None
    read_files, modified_files = prep.file_ops.file_lists()
    return json_value(
        {
            "firstKeptEntryId": prep.first_kept_entry_id,
            "messagesToSummarize": prep.messages_to_summarize,
            "turnPrefixMessages": prep.turn_prefix_messages,
            "isSplitTurn": prep.is_split_turn,
            "tokensBefore": prep.tokens_before,
            "previousSummary": prep.previous_summary,
            "fileOps": {
                "read": sorted(prep.file_ops.read),
                "written": sorted(prep.file_ops.written),
                "edited": sorted(prep.file_ops.edited),
            },
            "details": {"readFiles": read_files, "modifiedFiles": modified_files},
            "serialized": serialize_conversation(prep.messages_to_summarize),
            "serializedPrefix": serialize_conversation(prep.turn_prefix_messages),
        }
    )


def tree_view(roots: Sequence[TreeNode]) -> list[dict[str, Any]]:
    # Iterative: generated sessions can be deep.
    out: list[dict[str, Any]] = []
    stack: list[tuple[TreeNode, list[dict[str, Any]]]] = [(node, out) for node in reversed(roots)]
    while stack:
        node, siblings = stack.pop()
        view: dict[str, Any] = {"id": node["entry"]["id"], "label": node["label"], "children": []}
        siblings.append(view)
        stack.extend((child, view["children"]) for child in reversed(node["children"]))
    return out


def labels_view(entries: Sequence[Entry]) -> dict[str, str]:
    return {target: info["label"] for target, info in resolve_latest_labels(entries).items()}


def branch_view(entries: Sequence[Entry], old_leaf: str | None, target: str, budget: int = 0) -> dict[str, Any]:
    collected, common = collect_entries_for_branch_summary(entries, old_leaf, target)
    prepared = prepare_branch_entries(collected, budget)
    return json_value(
        {
            "entries": [entry["id"] for entry in collected],
            "commonAncestorId": common,
            "messages": prepared.messages,
            "fileOps": {
                "read": sorted(prepared.file_ops.read),
                "written": sorted(prepared.file_ops.written),
                "edited": sorted(prepared.file_ops.edited),
            },
            "totalTokens": prepared.total_tokens,
        }
    )


def kernel_read(
    entries: Sequence[Entry],
    leaves: Sequence[str | None],
    keep: Sequence[int] = (),
    branch_pairs: Sequence[tuple[str | None, str]] = (),
) -> dict[str, Any]:
    """What our kernel says about ``entries`` (a session, header excluded), in
    the shape of the Pi server's ``read`` answer."""
    by_id = build_entry_index(entries)
    contexts = []
    preparations = []
    for leaf in leaves:
        contexts.append(context_view(build_session_context(entries, leaf, by_id)))
        path = get_path_to_leaf(entries, leaf, by_id)
        preparations.append(
            [preparation_view(prepare_compaction(path, CompactionSettings(keep_recent_tokens=k))) for k in keep]
        )
    return {
        "name": resolve_session_name(entries),
        "labels": labels_view(entries),
        "tree": tree_view(build_tree(entries)),
        "contexts": contexts,
        "preparations": preparations,
        "branchSummaries": [branch_view(entries, old, target) for old, target in branch_pairs],
    }


def compare_read(pi_answer: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Every difference between Pi's and our answer, one line each (empty: equal)."""
    problems: list[str] = []
    for key in ("name", "labels", "tree"):
        if pi_answer[key] != ours[key]:
            problems.append(f"{key}: Pi {pi_answer[key]!r} != ours {ours[key]!r}")
    for leaf, pi_context, our_context in zip(pi_answer["leaves"], pi_answer["contexts"], ours["contexts"], strict=True):
        if pi_context != our_context:
            problems.append(f"context at leaf {leaf}: Pi {pi_context!r}\n   != ours {our_context!r}")
    for leaf, pi_preps, our_preps in zip(
        pi_answer["leaves"], pi_answer["preparations"], ours["preparations"], strict=True
    ):
        for index, (pi_prep, our_prep) in enumerate(zip(pi_preps, our_preps, strict=True)):
            if pi_prep != our_prep:
                problems.append(
                    f"compaction preparation #{index} at leaf {leaf}: Pi {pi_prep!r}\n   != ours {our_prep!r}"
                )
    for index, (pi_branch, our_branch) in enumerate(
        zip(pi_answer["branchSummaries"], ours["branchSummaries"], strict=True)
    ):
        if pi_branch != our_branch:
            problems.append(f"branch summary pair #{index}: Pi {pi_branch!r}\n   != ours {our_branch!r}")
    return problems


def write_session_file(path: Path, header: dict[str, Any], entries: Sequence[Entry]) -> Path:
    """A Pi JSONL file of ``header`` + ``entries`` (what an export writes)."""
    path.write_bytes(serialize_file([header, *entries]))
    return path
