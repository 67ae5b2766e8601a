"""The offline extractive summarizer: deterministic, bounded, faithful to the input."""

from __future__ import annotations

from typing import Any

import pytest

from sessiontree.summarizers import ExtractiveSummarizer, SummaryRequest


def conversation(turns: int = 3) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Request number {turn}: please improve module_{turn}.py"})
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Looking at module_{turn}.py"},
                    {
                        "type": "toolCall",
                        "id": f"r{turn}",
                        "name": "read",
                        "arguments": {"path": f"src/module_{turn}.py"},
                    },
                    {
                        "type": "toolCall",
                        "id": f"e{turn}",
                        "name": "edit",
                        "arguments": {"path": f"src/edited_{turn}.py"},
                    },
                    {"type": "toolCall", "id": f"b{turn}", "name": "bash", "arguments": {"command": "pytest -q"}},
                ],
            }
        )
        messages.append(
            {
                "role": "toolResult",
                "toolCallId": f"b{turn}",
                "toolName": "bash",
                "content": [{"type": "text", "text": "AssertionError: boom\nmore"}],
                "isError": turn == 1,
            }
        )
    return messages


def test_mentions_requests_files_and_tools() -> None:
    text = ExtractiveSummarizer().summarize(SummaryRequest(kind="compaction", messages=conversation()))
    assert text.startswith("## Goal")
    for turn in range(3):
        assert f"Request number {turn}" in text
        assert f"src/edited_{turn}.py" in text
        assert f"src/module_{turn}.py" in text
    assert "Modified: src/edited_0.py, src/edited_1.py, src/edited_2.py" in text
    assert "Read: src/module_0.py, src/module_1.py, src/module_2.py" in text
    assert "bash (3), edit (3), read (3)" in text
    assert "`pytest -q`" in text
    assert "bash: AssertionError: boom" in text
    assert "Looking at module_2.py" in text


def test_is_deterministic() -> None:
    request = SummaryRequest(kind="compaction", messages=conversation(5), custom_instructions="the parser")
    assert ExtractiveSummarizer().summarize(request) == ExtractiveSummarizer().summarize(request)
    assert "## Requested Focus\n- the parser" in ExtractiveSummarizer().summarize(request)


def test_files_from_the_request_are_listed() -> None:
    request = SummaryRequest(
        kind="compaction", messages=conversation(1), read_files=["docs/x.md"], modified_files=["carried.py"]
    )
    text = ExtractiveSummarizer().summarize(request)
    assert "carried.py" in text and "docs/x.md" in text


@pytest.mark.parametrize("kind", ["compaction", "turn_prefix", "branch"])
def test_is_bounded(kind) -> None:
    huge = [{"role": "user", "content": "word " * 5000}] * 200 + conversation(200)
    summarizer = ExtractiveSummarizer(max_chars=2000)
    text = summarizer.summarize(SummaryRequest(kind=kind, messages=huge, previous_summary="P" * 50_000))
    assert len(text) <= 2000
    assert "Request number 199" in text or kind == "turn_prefix"


def test_long_request_lists_keep_first_and_latest() -> None:
    messages = [{"role": "user", "content": f"ask {i}"} for i in range(20)]
    text = ExtractiveSummarizer().summarize(SummaryRequest(kind="compaction", messages=messages))
    goal = text.split("\n\n")[0]
    assert [line for line in goal.splitlines()[1:]] == [
        "- ask 0",
        "- ask 1",
        "- ask 2",
        "- (… 12 more requests …)",
        "- ask 15",
        "- ask 16",
        "- ask 17",
        "- ask 18",
        "- ask 19",
    ]


def test_keeps_the_previous_summary_and_adds_the_new_part() -> None:
    previous = "## Goal\n- build the compiler\n\n<read-files>\nold.py\n</read-files>"
    text = ExtractiveSummarizer().summarize(
        SummaryRequest(kind="compaction", messages=conversation(1), previous_summary=previous)
    )
    assert text.startswith("## Goal\n- build the compiler")
    assert "## Update (since the previous summary)" in text
    assert "### Goal\n- Request number 0" in text
    # The file lists are rebuilt on every compaction, not copied along.
    assert "<read-files>" not in text


def test_squeezes_an_overlong_previous_summary_in_the_middle() -> None:
    previous = "HEAD-GOAL " + "m" * 20_000 + " TAIL-LATEST"
    text = ExtractiveSummarizer(max_chars=4000).summarize(
        SummaryRequest(kind="compaction", messages=conversation(1), previous_summary=previous)
    )
    assert len(text) <= 4000
    assert text.startswith("HEAD-GOAL")
    assert "TAIL-LATEST" in text
    assert "characters of the earlier summary omitted" in text
    assert "Request number 0" in text


def test_previous_summary_is_ignored_for_branches() -> None:
    text = ExtractiveSummarizer().summarize(
        SummaryRequest(kind="branch", messages=conversation(1), previous_summary="SHOULD NOT APPEAR")
    )
    assert "SHOULD NOT APPEAR" not in text
    assert text.startswith("## Goal (branch)")


def test_turn_prefix_layout() -> None:
    text = ExtractiveSummarizer().summarize(SummaryRequest(kind="turn_prefix", messages=conversation(1)))
    assert text.startswith("## Original Request\n- Request number 0")
    assert "## Early Progress" in text and "## Context for the Rest" in text
    assert "src/edited_0.py" in text

    by_command = ExtractiveSummarizer().summarize(
        SummaryRequest(
            kind="turn_prefix", messages=[{"role": "bashExecution", "command": "make", "output": "", "exitCode": 1}]
        )
    )
    assert "(the turn began with a command) `make`" in by_command
    assert "`make` exited with code 1" in by_command


def test_empty_input_still_gives_a_summary() -> None:
    text = ExtractiveSummarizer().summarize(SummaryRequest(kind="compaction", messages=[]))
    assert "(no user request in this part)" in text


def test_rejects_a_tiny_bound() -> None:
    with pytest.raises(ValueError):
        ExtractiveSummarizer(max_chars=10)
