"""From a prepared compaction or an abandoned branch to the entry's text and details."""

from __future__ import annotations

from typing import Any

import pytest

from sessiontree.core.branch_summary import collect_entries_for_branch_summary
from sessiontree.core.compaction import CompactionSettings, prepare_compaction
from sessiontree.core.errors import SummarizerError
from sessiontree.summarizers import (
    ExtractiveSummarizer,
    SummaryRequest,
    generate_branch_summary,
    generate_compaction_summary,
)
from sessiontree.summarizers.generate import BRANCH_SUMMARY_PREAMBLE, NO_BRANCH_CONTENT


class RecordingSummarizer:
    """A fake back end: answers ``<kind>:<n messages>`` and remembers each request."""

    name = "recording"

    def __init__(self, answer: str | None = None) -> None:
        self.requests: list[SummaryRequest] = []
        self.answer = answer

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return self.answer if self.answer is not None else f"{request.kind}:{len(request.messages)}"


class BrokenSummarizer:
    name = "broken"

    def summarize(self, request: SummaryRequest) -> str:
        raise RuntimeError("kaboom")


def message_entry(index: int, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"m{index:07d}",
        "parentId": f"m{index - 1:07d}" if index else None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": message,
        **extra,
    }


def linear(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [message_entry(i, m) for i, m in enumerate(messages)]


def read_call(path: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": path, "name": "read", "arguments": {"path": path}}


def edit_call(path: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": path, "name": "edit", "arguments": {"path": path}}


SPLIT_PATH = linear(
    [
        {"role": "user", "content": "earlier " * 50},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}, read_call("early.py")]},
        {"role": "user", "content": "big task"},
        {"role": "assistant", "content": [{"type": "text", "text": "step " * 400}, edit_call("big.py")]},
        {"role": "assistant", "content": [{"type": "text", "text": "last " * 100}]},
    ]
)


def test_plain_compaction_summary() -> None:
    path = linear(
        [
            {"role": "user", "content": "first " * 100},
            {"role": "assistant", "content": [{"type": "text", "text": "reply"}, read_call("a.py")]},
            {"role": "user", "content": "second " * 100},
        ]
    )
    preparation = prepare_compaction(path, CompactionSettings(keep_recent_tokens=100, reserve_tokens=1000))
    assert preparation is not None and not preparation.is_split_turn
    summarizer = RecordingSummarizer()
    result = generate_compaction_summary(summarizer, preparation, custom_instructions="focus")
    assert result.summary == "compaction:2\n\n<read-files>\na.py\n</read-files>"
    assert result.first_kept_entry_id == "m0000002"
    assert result.tokens_before == preparation.tokens_before
    assert result.details == {"readFiles": ["a.py"], "modifiedFiles": []}
    (sent,) = summarizer.requests
    assert sent.custom_instructions == "focus"
    assert sent.max_tokens == 800  # 80% of the reserve
    assert list(sent.read_files) == ["a.py"]


def test_split_turn_compaction_merges_both_summaries() -> None:
    preparation = prepare_compaction(SPLIT_PATH, CompactionSettings(keep_recent_tokens=100))
    assert preparation is not None and preparation.is_split_turn
    summarizer = RecordingSummarizer()
    result = generate_compaction_summary(summarizer, preparation)
    assert [r.kind for r in summarizer.requests] == ["compaction", "turn_prefix"]
    assert summarizer.requests[1].max_tokens == 8192  # half the reserve
    assert result.summary == (
        "compaction:2\n\n---\n\n**Turn Context (split turn):**\n\nturn_prefix:2"
        "\n\n<read-files>\nearly.py\n</read-files>\n\n<modified-files>\nbig.py\n</modified-files>"
    )
    assert result.details == {"readFiles": ["early.py"], "modifiedFiles": ["big.py"]}


def test_split_turn_with_no_history_keeps_the_previous_summary() -> None:
    path = [
        *SPLIT_PATH[:2],
        {
            "type": "compaction",
            "id": "c0000000",
            "parentId": SPLIT_PATH[1]["id"],
            "timestamp": "2026-01-01T00:00:00.000Z",
            "summary": "PREVIOUS\n\n<read-files>\nold.py\n</read-files>",
            "firstKeptEntryId": "m0000002",
            "tokensBefore": 1,
            "details": {"readFiles": ["old.py"], "modifiedFiles": []},
        },
        {**SPLIT_PATH[2], "parentId": "c0000000"},
        *SPLIT_PATH[3:],
    ]
    preparation = prepare_compaction(path, CompactionSettings(keep_recent_tokens=100))
    assert preparation is not None
    assert preparation.is_split_turn and preparation.messages_to_summarize == []
    summarizer = RecordingSummarizer()
    result = generate_compaction_summary(summarizer, preparation)
    assert [r.kind for r in summarizer.requests] == ["turn_prefix"]
    assert result.summary.startswith("PREVIOUS\n\n---\n\n**Turn Context (split turn):**\n\nturn_prefix:2")
    # The previous file lists are carried through details and appended once.
    assert result.summary.count("<read-files>") == 1
    assert result.summary.count("old.py") == 1


def test_split_turn_without_any_history_says_so() -> None:
    path = SPLIT_PATH[2:]
    path[0] = {**path[0], "parentId": None}
    preparation = prepare_compaction(path, CompactionSettings(keep_recent_tokens=100))
    assert preparation is not None and preparation.is_split_turn
    result = generate_compaction_summary(RecordingSummarizer(), preparation)
    assert result.summary.startswith("No prior history.\n\n---\n\n**Turn Context (split turn):**")


def test_extractive_end_to_end() -> None:
    preparation = prepare_compaction(SPLIT_PATH, CompactionSettings(keep_recent_tokens=100))
    assert preparation is not None
    result = generate_compaction_summary(ExtractiveSummarizer(), preparation)
    assert "earlier" in result.summary and "big task" in result.summary
    assert result.summary.endswith("<modified-files>\nbig.py\n</modified-files>")


@pytest.mark.parametrize(
    ("summarizer", "message"), [(BrokenSummarizer(), "kaboom"), (RecordingSummarizer(" \n"), "no text")]
)
def test_failures_raise_summarizer_error(summarizer, message) -> None:
    preparation = prepare_compaction(SPLIT_PATH, CompactionSettings(keep_recent_tokens=100))
    assert preparation is not None
    with pytest.raises(SummarizerError, match=message):
        generate_compaction_summary(summarizer, preparation)


def branch_tree() -> list[dict[str, Any]]:
    return [
        message_entry(0, {"role": "user", "content": "root"}),
        message_entry(1, {"role": "user", "content": "approach A"}),
        message_entry(2, {"role": "assistant", "content": [{"type": "text", "text": "did A"}, edit_call("a.py")]}),
        {**message_entry(3, {"role": "user", "content": "approach B"}), "parentId": "m0000000"},
    ]


def test_branch_summary() -> None:
    tree = branch_tree()
    entries, ancestor = collect_entries_for_branch_summary(tree, "m0000002", "m0000003")
    assert ancestor == "m0000000"
    summarizer = RecordingSummarizer()
    result = generate_branch_summary(summarizer, entries, custom_instructions="only A", replace_instructions=True)
    assert result.summary == BRANCH_SUMMARY_PREAMBLE + "branch:2\n\n<modified-files>\na.py\n</modified-files>"
    assert result.details == {"readFiles": [], "modifiedFiles": ["a.py"]}
    (sent,) = summarizer.requests
    assert (sent.kind, sent.custom_instructions, sent.replace_instructions, sent.max_tokens) == (
        "branch",
        "only A",
        True,
        2048,
    )


def test_branch_without_messages_needs_no_summarizer() -> None:
    label = {
        "type": "label",
        "id": "l0000000",
        "parentId": "m0000000",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "targetId": "m0000000",
        "label": "x",
    }
    result = generate_branch_summary(BrokenSummarizer(), [label])
    assert result.summary == NO_BRANCH_CONTENT
    assert result.details == {"readFiles": [], "modifiedFiles": []}


def test_branch_failure_raises() -> None:
    entries, _ = collect_entries_for_branch_summary(branch_tree(), "m0000002", "m0000003")
    with pytest.raises(SummarizerError, match="broken"):
        generate_branch_summary(BrokenSummarizer(), entries)
