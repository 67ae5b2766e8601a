"""Branch summaries: what to summarize when the leaf moves to another branch.

Moving the leaf from ``old_leaf_id`` to ``target_id`` abandons the entries
between the old leaf and the deepest entry both positions share. Pi can
summarize them into a ``branch_summary`` entry appended at the new position,
so the model still knows what was tried. This module finds those entries and
turns them into summarizer input; it never calls a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .compaction import FileOperations, Message, entry_message_for_branch_summary, estimate_tokens
from .context_builder import walk_to_root
from .errors import EntryNotFound
from .path import build_entry_index
from .types import Entry

# Summaries are the densest context there is: one that overflows the budget
# is still taken while the budget is under 90% used.
_SUMMARY_OVERFLOW_RATIO = 0.9


def collect_entries_for_branch_summary(
    entries: Sequence[Entry],
    old_leaf_id: str | None,
    target_id: str,
    by_id: Mapping[str, Entry] | None = None,
) -> tuple[list[Entry], str | None]:
    """Entries abandoned by moving from ``old_leaf_id`` to ``target_id``, oldest
    first, and the id of the deepest entry on both paths (``None`` when they
    share none).

    Nothing is abandoned without an old leaf, or when the target lies on or
    below the old leaf's path. Compactions on the abandoned part are included:
    their summaries are part of what was explored. Raises ``EntryNotFound``
    for an unknown leaf or target.
    """
    if not old_leaf_id:
        return [], None
    if by_id is None:
        by_id = build_entry_index(entries)
    old_leaf = by_id.get(old_leaf_id)
    if old_leaf is None:
        raise EntryNotFound(f"Entry {old_leaf_id} not found")
    target = by_id.get(target_id)
    if target is None:
        raise EntryNotFound(f"Entry {target_id} not found")

    old_path = walk_to_root(old_leaf, by_id)
    on_old_path = {entry["id"] for entry in old_path}
    common_ancestor_id: str | None = None
    for entry in reversed(walk_to_root(target, by_id)):
        if entry["id"] in on_old_path:
            common_ancestor_id = entry["id"]
            break

    abandoned: list[Entry] = []
    for entry in reversed(old_path):
        if entry["id"] == common_ancestor_id:
            break
        abandoned.append(entry)
    abandoned.reverse()
    return abandoned, common_ancestor_id


@dataclass
class BranchPreparation:
    """Summarizer input for an abandoned branch."""

    messages: list[Message]
    file_ops: FileOperations = field(default_factory=FileOperations)
    total_tokens: int = 0

    def details(self) -> dict[str, list[str]]:
        return self.file_ops.details()


def prepare_branch_entries(entries: Sequence[Entry], token_budget: int = 0) -> BranchPreparation:
    """Messages to summarize from abandoned ``entries`` (oldest first).

    When the branch is longer than ``token_budget`` (0 = unlimited) the newest
    messages win: walk from the newest back and stop at the budget, letting
    one more summary message in while less than 90% of the budget is used.
    File operations come from the tool calls of the messages taken, and from
    the lists that earlier branch summaries on the branch stored (all of
    them, budget or not, unless an extension wrote them). A ``context_edit``
    on the branch replaces or hides its target here as in the context.
    """
    file_ops = FileOperations()
    for entry in entries:
        if entry.get("type") == "branch_summary" and not entry.get("fromHook"):
            file_ops.add_from_details(entry.get("details"))
    # The summary sees what the model saw: the latest context edit of each
    # target among these entries applies (Pi 1.5, #11602).
    edits: dict[Any, Entry] = {}
    for entry in entries:
        if entry.get("type") == "context_edit":
            edits[entry.get("targetId")] = entry

    kept: list[Message] = []
    total = 0
    for entry in reversed(entries):
        message = entry_message_for_branch_summary(entry, edits.get(entry.get("id")))
        if message is None:
            continue
        file_ops.add_from_message(message)
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            if entry.get("type") in ("compaction", "branch_summary") and total < token_budget * _SUMMARY_OVERFLOW_RATIO:
                kept.append(message)
                total += tokens
            break
        kept.append(message)
        total += tokens
    kept.reverse()
    return BranchPreparation(messages=kept, file_ops=file_ops, total_tokens=total)
