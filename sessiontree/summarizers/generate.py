"""Turn a prepared compaction or an abandoned branch into the text of the
entry to append, using any summarizer.

These functions only compute: they return the summary and the ``details``
for the entry and write nothing, so the caller appends the entry only once
every summarizer call has succeeded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sessiontree.core.branch_summary import prepare_branch_entries
from sessiontree.core.compaction import (
    CompactionPreparation,
    append_file_operations,
    merge_split_turn_summary,
    strip_file_operations,
)
from sessiontree.core.errors import SummarizerError
from sessiontree.core.types import Entry

from .base import Summarizer, SummaryRequest

# Pi budgets a branch by the model's window (128k when unknown) minus its reserve.
DEFAULT_BRANCH_TOKEN_BUDGET = 128_000 - 16_384
BRANCH_SUMMARY_MAX_TOKENS = 2048
# Put before a branch summary so the model reading it later knows where it comes from.
BRANCH_SUMMARY_PREAMBLE = (
    "The user worked on another branch of this conversation and then came back here.\nWhat happened on that branch:\n\n"
)
NO_BRANCH_CONTENT = "No content to summarize"


@dataclass(frozen=True)
class CompactionSummary:
    """Fields of the ``compaction`` entry to append."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: dict[str, Any]


@dataclass(frozen=True)
class BranchSummary:
    """Fields of the ``branch_summary`` entry to append."""

    summary: str
    details: dict[str, Any]


def run_summarizer(summarizer: Summarizer, request: SummaryRequest) -> str:
    """Call a summarizer; any failure or an empty answer becomes ``SummarizerError``."""
    try:
        text = summarizer.summarize(request)
    except SummarizerError:
        raise
    except Exception as error:  # a back end's own bug must not escape as a 500
        name = getattr(summarizer, "name", type(summarizer).__name__)
        raise SummarizerError(f"Summarizer {name!r} failed on a {request.kind} summary: {error}") from error
    if not isinstance(text, str) or not text.strip():
        name = getattr(summarizer, "name", type(summarizer).__name__)
        raise SummarizerError(f"Summarizer {name!r} returned no text for a {request.kind} summary")
    return text.strip()


def generate_compaction_summary(
    summarizer: Summarizer,
    preparation: CompactionPreparation,
    *,
    custom_instructions: str | None = None,
) -> CompactionSummary:
    """Summary text and details for a prepared compaction.

    A split turn takes two summaries — the history before the turn, and the
    turn's beginning — merged as Pi merges them. The cumulative lists of read
    and modified files are appended to the text and stored in ``details``.
    """
    reserve = preparation.settings.reserve_tokens
    read_files, modified_files = preparation.file_ops.file_lists()
    history_request = SummaryRequest(
        kind="compaction",
        messages=preparation.messages_to_summarize,
        previous_summary=preparation.previous_summary,
        custom_instructions=custom_instructions,
        read_files=read_files,
        modified_files=modified_files,
        max_tokens=math.floor(0.8 * reserve),
    )
    if preparation.is_split_turn and preparation.turn_prefix_messages:
        history: str | None
        if preparation.messages_to_summarize:
            history = run_summarizer(summarizer, history_request)
        elif preparation.previous_summary:
            # Nothing new before the turn: the previous summary is still the
            # history. (Pi writes "No prior history." here and loses it.)
            history = strip_file_operations(preparation.previous_summary)
        else:
            history = None
        prefix = run_summarizer(
            summarizer,
            SummaryRequest(
                kind="turn_prefix",
                messages=preparation.turn_prefix_messages,
                read_files=read_files,
                modified_files=modified_files,
                max_tokens=math.floor(0.5 * reserve),
            ),
        )
        summary = merge_split_turn_summary(history, prefix)
    else:
        summary = run_summarizer(summarizer, history_request)
    return CompactionSummary(
        summary=append_file_operations(summary, preparation.file_ops),
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        details=preparation.details(),
    )


def generate_branch_summary(
    summarizer: Summarizer,
    entries: Sequence[Entry],
    *,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    token_budget: int = DEFAULT_BRANCH_TOKEN_BUDGET,
) -> BranchSummary:
    """Summary text and details for abandoned ``entries`` (oldest first, as
    ``collect_entries_for_branch_summary`` returns them).

    A branch with no message to summarize (only labels or settings, say)
    gets Pi's fixed text without calling the summarizer.
    """
    preparation = prepare_branch_entries(entries, token_budget)
    if not preparation.messages:
        return BranchSummary(summary=NO_BRANCH_CONTENT, details={"readFiles": [], "modifiedFiles": []})
    read_files, modified_files = preparation.file_ops.file_lists()
    text = run_summarizer(
        summarizer,
        SummaryRequest(
            kind="branch",
            messages=preparation.messages,
            custom_instructions=custom_instructions,
            replace_instructions=replace_instructions,
            read_files=read_files,
            modified_files=modified_files,
            max_tokens=BRANCH_SUMMARY_MAX_TOKENS,
        ),
    )
    return BranchSummary(
        summary=append_file_operations(BRANCH_SUMMARY_PREAMBLE + text, preparation.file_ops),
        details=preparation.details(),
    )
