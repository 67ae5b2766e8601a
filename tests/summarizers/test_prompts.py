"""Prompt construction for model-backed summarizers."""

from __future__ import annotations

import pytest

from sessiontree.summarizers import SummaryRequest
from sessiontree.summarizers.prompts import (
    BRANCH_PROMPT,
    COMPACTION_PROMPT,
    COMPACTION_UPDATE_PROMPT,
    TURN_PREFIX_PROMPT,
    build_chat_messages,
    build_user_prompt,
    instructions_for,
)

MESSAGES = [{"role": "user", "content": "fix the bug in lexer.py"}]


def test_fresh_compaction_prompt() -> None:
    text = build_user_prompt(SummaryRequest(kind="compaction", messages=MESSAGES))
    assert text.startswith("<conversation>\n[User]: fix the bug in lexer.py\n</conversation>\n\n")
    assert "<previous-summary>" not in text
    assert text.endswith(COMPACTION_PROMPT)
    for section in ("## Goal", "## Constraints & Preferences", "## Progress", "## Next Steps", "## Critical Context"):
        assert section in text


def test_update_prompt_carries_the_previous_summary() -> None:
    request = SummaryRequest(
        kind="compaction", messages=MESSAGES, previous_summary="## Goal\n- old", custom_instructions="tests"
    )
    text = build_user_prompt(request)
    assert "</conversation>\n\n<previous-summary>\n## Goal\n- old\n</previous-summary>\n\n" in text
    assert text.endswith(COMPACTION_UPDATE_PROMPT + "\n\nPay particular attention to: tests")


def test_turn_prefix_prompt_ignores_focus_and_previous() -> None:
    request = SummaryRequest(kind="turn_prefix", messages=MESSAGES, previous_summary="x", custom_instructions="y")
    text = build_user_prompt(request)
    assert text.endswith(TURN_PREFIX_PROMPT)
    assert "<previous-summary>" not in text


def test_branch_prompt_focus_or_replacement() -> None:
    assert instructions_for(SummaryRequest(kind="branch", messages=MESSAGES)) == BRANCH_PROMPT
    focused = instructions_for(SummaryRequest(kind="branch", messages=MESSAGES, custom_instructions="perf"))
    assert focused == BRANCH_PROMPT + "\n\nPay particular attention to: perf"
    replaced = SummaryRequest(
        kind="branch", messages=MESSAGES, custom_instructions="Just list files.", replace_instructions=True
    )
    assert instructions_for(replaced) == "Just list files."


def test_chat_messages_and_unknown_kind() -> None:
    system, user = build_chat_messages(SummaryRequest(kind="branch", messages=MESSAGES))
    assert system["role"] == "system" and "do not continue it" in system["content"]
    assert user["role"] == "user"
    with pytest.raises(ValueError, match="Unknown summary kind"):
        SummaryRequest(kind="poem", messages=MESSAGES)  # type: ignore[arg-type]
