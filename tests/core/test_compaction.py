"""Compaction kernel: token estimates, cut points, split turns, preparation."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.core import compaction
from sessiontree.core.compaction import (
    ESTIMATED_IMAGE_CHARS,
    CompactionSettings,
    FileOperations,
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    find_cut_point,
    format_file_operations,
    js_json_stringify,
    js_length,
    merge_split_turn_summary,
    prepare_compaction,
    serialize_conversation,
    should_compact,
    strip_file_operations,
)
from sessiontree.core.context_builder import build_session_context, entry_context_messages
from sessiontree.core.pi_session_file import load_entries_from_file, migrate_to_current_version
from tests.pi_fixtures import fixture_path, split_header

# --- entry builders ------------------------------------------------------------------


class PathBuilder:
    """Builds a linear path of entries, each the child of the previous one."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def add(self, entry_type: str, **fields: Any) -> dict[str, Any]:
        entry = {
            "type": entry_type,
            "id": f"e{len(self.entries):07d}",
            "parentId": self.entries[-1]["id"] if self.entries else None,
            "timestamp": f"2026-01-01T00:00:{len(self.entries) % 60:02d}.000Z",
            **fields,
        }
        self.entries.append(entry)
        return entry

    def user(self, text: str) -> dict[str, Any]:
        return self.add("message", message={"role": "user", "content": text, "timestamp": 1})

    def assistant(
        self, text: str = "", *, tools: list[tuple[str, dict[str, Any]]] = (), usage: dict | None = None, **extra: Any
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for index, (name, arguments) in enumerate(tools):
            content.append(
                {"type": "toolCall", "id": f"call{len(self.entries)}_{index}", "name": name, "arguments": arguments}
            )
        message = {"role": "assistant", "content": content, "stopReason": "toolUse" if tools else "stop", **extra}
        if usage is not None:
            message["usage"] = usage
        return self.add("message", message=message)

    def tool_result(self, text: str, *, call_id: str = "call", is_error: bool = False) -> dict[str, Any]:
        return self.add(
            "message",
            message={
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": "bash",
                "content": [{"type": "text", "text": text}],
                "isError": is_error,
            },
        )

    def compaction(self, summary: str, first_kept_entry_id: str, **extra: Any) -> dict[str, Any]:
        return self.add("compaction", summary=summary, firstKeptEntryId=first_kept_entry_id, tokensBefore=1000, **extra)


def ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in entries]


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


# --- token estimate --------------------------------------------------------------------


def test_estimate_tokens_per_role() -> None:
    assert estimate_tokens({"role": "user", "content": "x" * 40}) == 10
    assert estimate_tokens({"role": "user", "content": "x" * 41}) == 11  # rounded up
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    assert estimate_tokens({"role": "user", "content": [{"type": "text", "text": "abcd"}, image]}) == math.ceil(
        (4 + ESTIMATED_IMAGE_CHARS) / 4
    )
    assert estimate_tokens({"role": "toolResult", "content": [image, image]}) == 2 * ESTIMATED_IMAGE_CHARS // 4
    assert estimate_tokens({"role": "custom", "content": "y" * 8}) == 2

    arguments = {"path": "a.txt", "limit": 10}
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "t" * 10},
            {"type": "thinking", "thinking": "h" * 6},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": arguments},
        ],
    }
    chars = 10 + 6 + len("read") + len('{"path":"a.txt","limit":10}')
    assert estimate_tokens(assistant) == math.ceil(chars / 4)

    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "a\nb"}) == math.ceil(5 / 4)
    assert estimate_tokens({"role": "compactionSummary", "summary": "s" * 12}) == 3
    assert estimate_tokens({"role": "branchSummary", "summary": "s" * 13}) == 4
    assert estimate_tokens({"role": "somethingElse", "content": "x" * 400}) == 0


def test_lengths_are_counted_as_javascript_counts_them() -> None:
    # An emoji outside the BMP is two UTF-16 code units, as String.length says.
    assert js_length("a😀") == 3
    assert js_length("中文") == 2
    assert estimate_tokens({"role": "user", "content": "😀" * 4}) == 2
    assert js_json_stringify({"path": "a b", "n": 1, "u": "é"}) == '{"path":"a b","n":1,"u":"é"}'


def test_calculate_context_tokens_prefers_total() -> None:
    assert calculate_context_tokens({"totalTokens": 900, "input": 1}) == 900
    assert calculate_context_tokens({"input": 100, "output": 20, "cacheRead": 3, "cacheWrite": 4}) == 127
    assert calculate_context_tokens({"totalTokens": 0, "input": 5}) == 5


def test_estimate_context_tokens_uses_last_valid_usage_plus_trailing() -> None:
    user = {"role": "user", "content": "x" * 40}  # 10 tokens
    good = {"role": "assistant", "content": [], "stopReason": "stop", "usage": {"totalTokens": 500}}
    aborted = {"role": "assistant", "content": [], "stopReason": "aborted", "usage": {"totalTokens": 9999}}
    errored = {"role": "assistant", "content": [], "stopReason": "error", "usage": {"totalTokens": 9999}}
    empty_usage = {"role": "assistant", "content": [], "stopReason": "stop", "usage": {"totalTokens": 0}}

    estimate = estimate_context_tokens([user, good, user, aborted, errored, empty_usage, user])
    assert estimate.usage_tokens == 500
    assert estimate.last_usage_index == 1
    assert estimate.trailing_tokens == 20  # two user messages after it; the invalid replies count 0
    assert estimate.tokens == 520

    without = estimate_context_tokens([user, aborted, user])
    assert without.last_usage_index is None
    assert without.usage_tokens == 0
    assert without.tokens == 20


def test_should_compact_threshold() -> None:
    config = CompactionSettings(reserve_tokens=1000)
    assert should_compact(9001, 10000, config)
    assert not should_compact(9000, 10000, config)  # strictly more than window - reserve
    assert not should_compact(10**9, 10000, CompactionSettings(enabled=False))


def test_default_settings_are_pis() -> None:
    assert CompactionSettings() == CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=20000)


# --- cut points ---------------------------------------------------------------------------


def test_valid_cut_points_exclude_tool_results_and_settings() -> None:
    p = PathBuilder()
    p.user("u")
    p.assistant("a", tools=[("bash", {"command": "ls"})])
    p.tool_result("out")
    p.add("thinking_level_change", thinkingLevel="high")
    p.add("custom_message", customType="note", content="n", display=True)
    p.add("branch_summary", fromId="e0000000", summary="b")
    p.add("message", message={"role": "bashExecution", "command": "ls", "output": ""})
    p.add("label", targetId="e0000000", label="x")
    cut_points = [i for i, e in enumerate(p.entries) if compaction._is_cut_point(e, entry_context_messages(e))]
    assert cut_points == [0, 1, 4, 5, 6]


def test_cut_moves_forward_from_a_tool_result_to_the_next_valid_point() -> None:
    p = PathBuilder()
    p.user("u" * 400)  # 0
    p.assistant("a", tools=[("bash", {"command": "ls"})])  # 1
    p.tool_result("r" * 400)  # 2 (100 tokens)
    p.tool_result("r" * 400)  # 3
    p.assistant("done" * 10)  # 4 (10 tokens)
    # The budget is reached at index 3 (a tool result): the cut goes to the
    # next valid point, the assistant message at 4, not back into the results.
    cut = find_cut_point(p.entries, 0, len(p.entries), keep_recent_tokens=50)
    assert cut.first_kept_entry_index == 4
    assert cut.is_split_turn
    assert cut.turn_start_index == 0


def test_cut_at_assistant_with_tool_calls_keeps_its_results() -> None:
    p = PathBuilder()
    p.user("old " * 200)  # 0
    p.assistant("old answer " * 50)  # 1
    p.user("do it")  # 2
    p.assistant("calling", tools=[("read", {"path": "a.py"})])  # 3
    p.tool_result("x" * 40)  # 4
    budget = estimate_tokens(p.entries[4]["message"]) + estimate_tokens(p.entries[3]["message"])
    cut = find_cut_point(p.entries, 0, len(p.entries), keep_recent_tokens=budget)
    assert cut.first_kept_entry_index == 3
    assert cut.is_split_turn and cut.turn_start_index == 2


def test_cut_at_user_message_is_not_a_split_turn() -> None:
    p = PathBuilder()
    p.user("first " * 100)
    p.assistant("reply " * 100)
    p.user("second " * 100)  # 2
    p.assistant("reply " * 100)
    budget = estimate_tokens(p.entries[3]["message"]) + estimate_tokens(p.entries[2]["message"])
    cut = find_cut_point(p.entries, 0, len(p.entries), keep_recent_tokens=budget)
    assert cut.first_kept_entry_index == 2
    assert not cut.is_split_turn
    assert cut.turn_start_index == -1


def test_cut_pulls_in_preceding_settings_entries_but_stops_at_messages_and_compactions() -> None:
    p = PathBuilder()
    p.user("old " * 100)  # 0
    p.assistant("old " * 100)  # 1
    p.add("model_change", provider="x", modelId="y")  # 2
    p.add("thinking_level_change", thinkingLevel="low")  # 3
    p.add("label", targetId="e0000000", label="mark")  # 4
    p.user("new " * 100)  # 5
    p.assistant("new " * 100)  # 6
    budget = estimate_tokens(p.entries[6]["message"]) + estimate_tokens(p.entries[5]["message"])
    cut = find_cut_point(p.entries, 0, len(p.entries), keep_recent_tokens=budget)
    assert cut.first_kept_entry_index == 2  # the settings travel with the kept turn
    # Pi's rule: only a cut *on* a user message is a clean turn boundary. A cut
    # on the settings before it looks back for a turn start and finds the
    # previous turn's user message, so that whole turn becomes the "prefix".
    assert cut.is_split_turn
    assert cut.turn_start_index == 0

    q = PathBuilder()
    q.user("old " * 100)  # 0
    q.compaction("s", "e0000000")  # 1
    q.add("thinking_level_change", thinkingLevel="low")  # 2
    q.user("new " * 100)  # 3
    budget = estimate_tokens(q.entries[3]["message"])
    cut = find_cut_point(q.entries, 0, len(q.entries), keep_recent_tokens=budget)
    assert cut.first_kept_entry_index == 2  # stops right after the compaction


def test_cut_without_reaching_budget_keeps_from_first_valid_point() -> None:
    p = PathBuilder()
    p.add("thinking_level_change", thinkingLevel="low")
    p.user("short")
    p.assistant("short")
    cut = find_cut_point(p.entries, 0, len(p.entries), keep_recent_tokens=10_000)
    assert cut.first_kept_entry_index == 0  # first cut point (1) then the settings entry before it
    assert not cut.is_split_turn


def test_cut_with_no_valid_points_keeps_from_start() -> None:
    p = PathBuilder()
    p.add("thinking_level_change", thinkingLevel="low")
    p.tool_result("orphan")
    cut = find_cut_point(p.entries, 0, len(p.entries), keep_recent_tokens=1)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (0, -1, False)


def test_turn_start_index_recognises_user_like_entries() -> None:
    p = PathBuilder()
    p.user("u")  # 0
    p.add("custom_message", customType="c", content="injected", display=False)  # 1
    p.assistant("a")  # 2
    p.add("message", message={"role": "bashExecution", "command": "ls", "output": "x"})  # 3
    p.assistant("b")  # 4
    starts = [i for i, e in enumerate(p.entries) if compaction._is_turn_start(e, entry_context_messages(e))]
    assert starts == [0, 1, 3]  # the turn holding entry 2 opened at 1, the one holding 4 at 3


# Random conversations: user turns made of assistant tool calls and their results.
turn_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 800), st.integers(1, 800)),  # tool calls, text sizes
    min_size=1,
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(
    turns=st.lists(turn_strategy, min_size=1, max_size=6),
    keep=st.integers(1, 3000),
    settings_every=st.integers(2, 9),
)
def test_cut_points_never_separate_a_tool_call_from_its_result(turns, keep, settings_every) -> None:
    p = PathBuilder()
    for turn in turns:
        p.user("u" * 50)
        for calls, text_size, result_size in turn:
            call = p.assistant("a" * text_size, tools=[("bash", {"command": "x"})] * calls)
            for block in call["message"]["content"]:
                if block["type"] == "toolCall":
                    p.tool_result("r" * result_size, call_id=block["id"])
            if len(p.entries) % settings_every == 0:
                p.add("thinking_level_change", thinkingLevel="low")
    entries = p.entries
    cut = find_cut_point(entries, 0, len(entries), keep)
    first = cut.first_kept_entry_index
    assert (entries[first].get("message") or {}).get("role") != "toolResult"
    calls_before_cut = {
        block["id"]
        for entry in entries[:first]
        for block in (entry.get("message") or {}).get("content") or []
        if isinstance(block, dict) and block.get("type") == "toolCall"
    }
    for entry in entries[first:]:
        message = entry.get("message") or {}
        if message.get("role") == "toolResult":
            assert message["toolCallId"] not in calls_before_cut
    if cut.is_split_turn:
        assert 0 <= cut.turn_start_index < first
        assert entries[cut.turn_start_index]["message"]["role"] == "user"
    else:
        assert cut.turn_start_index == -1


# --- prepare_compaction ------------------------------------------------------------------


def test_prepare_returns_none_for_empty_path_and_path_ending_in_compaction() -> None:
    assert prepare_compaction([], CompactionSettings()) is None
    p = PathBuilder()
    p.user("hi")
    p.compaction("summary", "e0000000")
    assert prepare_compaction(p.entries, CompactionSettings()) is None


def test_prepare_simple_history() -> None:
    p = PathBuilder()
    p.user("build the parser " * 20)  # 0
    p.assistant("reading", tools=[("read", {"path": "src/parser.py"})])  # 1
    p.tool_result("def parse(): ..." * 20)  # 2
    p.assistant("done " * 50, usage={"totalTokens": 4321})  # 3
    p.user("now the lexer " * 30)  # 4
    p.assistant("lexer written", tools=[("write", {"path": "src/lexer.py", "content": "x"})])  # 5
    p.tool_result("ok")  # 6
    budget = sum(estimate_tokens(e["message"]) for e in p.entries[4:])
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=budget))
    assert prep is not None
    assert prep.first_kept_entry_id == "e0000004"
    assert not prep.is_split_turn
    assert prep.turn_prefix_messages == []
    assert [m["role"] for m in prep.messages_to_summarize] == ["user", "assistant", "toolResult", "assistant"]
    assert prep.previous_summary is None and prep.previous_compaction_id is None
    # Usage at index 3, then messages 4..6 estimated.
    assert prep.tokens_before == 4321 + sum(estimate_tokens(e["message"]) for e in p.entries[4:])
    # Files come from the summarized part only: src/lexer.py is in the kept part.
    assert prep.file_ops.file_lists() == (["src/parser.py"], [])
    assert prep.details() == {"readFiles": ["src/parser.py"], "modifiedFiles": []}
    assert prep.has_content


def test_prepare_split_turn() -> None:
    p = PathBuilder()
    p.user("earlier question")  # 0
    p.assistant("earlier answer")  # 1
    p.user("refactor everything")  # 2: the turn that gets split
    p.assistant("step 1", tools=[("edit", {"path": "a.py", "oldText": "x", "newText": "y"})])  # 3
    p.tool_result("r" * 4000)  # 4
    p.assistant("step 2", tools=[("read", {"path": "b.py"})])  # 5
    p.tool_result("small")  # 6
    p.assistant("final")  # 7
    budget = sum(estimate_tokens(e["message"]) for e in p.entries[5:])
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=budget))
    assert prep is not None
    assert prep.is_split_turn
    assert prep.first_kept_entry_id == "e0000005"
    assert [text_of(m) for m in prep.messages_to_summarize] == ["earlier question", "earlier answer"]
    assert [m["role"] for m in prep.turn_prefix_messages] == ["user", "assistant", "toolResult"]
    assert text_of(prep.turn_prefix_messages[0]) == "refactor everything"
    # Files of the turn prefix count too; b.py is in the kept suffix.
    assert prep.file_ops.file_lists() == ([], ["a.py"])


def test_prepare_with_previous_compaction_merges_summary_and_keeps_kept_messages() -> None:
    p = PathBuilder()
    p.user("ancient " * 100)  # 0
    p.assistant("ancient " * 100)  # 1
    p.user("kept by the first compaction " * 20)  # 2
    p.assistant("kept reply", tools=[("read", {"path": "kept.py"})])  # 3
    p.tool_result("kept result")  # 4
    first = p.compaction(
        "FIRST SUMMARY",
        "e0000002",
        details={"readFiles": ["old-read.py"], "modifiedFiles": ["old-mod.py"]},
    )  # 5
    p.user("after the first compaction " * 20)  # 6
    p.assistant("recent reply " * 20)  # 7
    budget = sum(estimate_tokens(e["message"]) for e in p.entries[6:])
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=budget))
    assert prep is not None
    assert prep.previous_summary == "FIRST SUMMARY"
    assert prep.previous_compaction_id == first["id"]
    assert prep.first_kept_entry_id == "e0000006"
    # The messages the first compaction kept are still context: they are
    # summarized now, never silently dropped; the ancient ones are not re-summarized.
    summarized = [text_of(m) for m in prep.messages_to_summarize]
    assert summarized[0].startswith("kept by the first compaction")
    assert not any("ancient" in s for s in summarized)
    assert all(m.get("role") != "compactionSummary" for m in prep.messages_to_summarize)
    read_files, modified_files = prep.file_ops.file_lists()
    assert read_files == ["kept.py", "old-read.py"]
    assert modified_files == ["old-mod.py"]
    # tokens_before measures the current context: summary + kept + new.
    context = build_session_context(p.entries)["messages"]
    assert prep.tokens_before == sum(estimate_tokens(m) for m in context)


def test_prepare_can_keep_from_before_the_previous_compaction() -> None:
    p = PathBuilder()
    p.user("ancient")  # 0
    p.user("kept " * 100)  # 1
    p.assistant("kept reply " * 100)  # 2
    p.compaction("S1", "e0000001")  # 3
    p.user("tiny")  # 4
    budget = estimate_tokens(p.entries[4]["message"]) + estimate_tokens(p.entries[2]["message"])
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=budget))
    assert prep is not None
    assert prep.first_kept_entry_id == "e0000002"
    # The cut falls inside the turn the first compaction kept: its user
    # message becomes the turn prefix; "ancient" stays summarized away.
    assert prep.is_split_turn
    assert prep.messages_to_summarize == []
    assert [text_of(m) for m in prep.turn_prefix_messages] == ["kept " * 100]
    # Appending the new compaction keeps assistant 2 and user 4 in the context.
    p.compaction("S2", prep.first_kept_entry_id)
    context = build_session_context(p.entries)["messages"]
    assert [m.get("role") for m in context] == ["compactionSummary", "assistant", "user"]
    assert context[0]["summary"] == "S2"


def test_prepare_falls_back_when_previous_first_kept_is_missing() -> None:
    p = PathBuilder()
    p.user("before " * 100)  # 0
    p.compaction("S1", "gone0000")  # 1
    p.user("after one " * 100)  # 2
    p.assistant("reply")  # 3
    p.user("after two " * 100)  # 4
    budget = estimate_tokens(p.entries[4]["message"])
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=budget))
    assert prep is not None
    assert prep.first_kept_entry_id == "e0000004"
    # Without the recorded boundary, the region starts right after the compaction.
    assert [text_of(m) for m in prep.messages_to_summarize] == ["after one " * 100, "reply"]


@pytest.mark.parametrize(("from_hook", "carried"), [(True, False), (False, True), (None, True)])
def test_prepare_carries_file_lists_unless_an_extension_wrote_them(from_hook, carried) -> None:
    p = PathBuilder()
    p.user("x")  # 0
    extra = {} if from_hook is None else {"fromHook": from_hook}
    p.compaction("S1", "e0000000", details={"readFiles": ["hook.py"], "modifiedFiles": []}, **extra)
    p.user("y " * 200)
    p.assistant("z " * 200)
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=1))
    assert prep is not None
    assert ("hook.py" in prep.file_ops.file_lists()[0]) is carried


def test_prepare_converts_custom_messages_and_branch_summaries() -> None:
    p = PathBuilder()
    p.add("branch_summary", fromId="zzzzzzzz", summary="what happened elsewhere")  # 0
    p.add("custom_message", customType="note", content="remember this", display=True)  # 1
    p.user("question")  # 2
    p.assistant("answer")  # 3
    p.user("latest " * 100)  # 4
    budget = estimate_tokens(p.entries[4]["message"])
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=budget))
    assert prep is not None
    assert prep.first_kept_entry_id == "e0000004"
    assert [m["role"] for m in prep.messages_to_summarize] == ["branchSummary", "custom", "user", "assistant"]
    assert prep.messages_to_summarize[0]["summary"] == "what happened elsewhere"
    assert prep.messages_to_summarize[1]["content"] == "remember this"


def test_prepare_gives_no_preparation_when_nothing_is_new() -> None:
    # Pi 0.79.8 (#4811): nothing to summarize is no preparation at all, not an empty one.
    p = PathBuilder()
    p.user("kept")  # 0
    p.compaction("S1", "e0000000")  # 1
    p.user("new")  # 2
    assert prepare_compaction(p.entries, CompactionSettings()) is None
    # The same path with a tiny budget has something to summarize again.
    prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=1))
    assert prep is not None and prep.has_content
    assert prep.first_kept_entry_id == "e0000002"
    assert [m["content"] for m in prep.messages_to_summarize] == ["kept"]


def test_context_after_compaction_never_starts_with_a_tool_result() -> None:
    p = PathBuilder()
    for turn in range(6):
        p.user(f"turn {turn} " * 30)
        call = p.assistant("working", tools=[("bash", {"command": f"run {turn}"})])
        p.tool_result("output " * 200, call_id=call["message"]["content"][-1]["id"])
        p.assistant(f"finished {turn}")
    # Everything fits in 5,000 tokens: nothing to summarize, no preparation.
    assert prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=5000)) is None
    for keep in (1, 50, 200, 400, 800):
        prep = prepare_compaction(p.entries, CompactionSettings(keep_recent_tokens=keep))
        assert prep is not None
        compaction = {
            "type": "compaction",
            "id": "cmp00000",
            "parentId": p.entries[-1]["id"],
            "timestamp": "2026-01-02T00:00:00.000Z",
            "summary": "S",
            "firstKeptEntryId": prep.first_kept_entry_id,
            "tokensBefore": 1,
        }
        entries = [*p.entries, compaction]
        messages = build_session_context(entries)["messages"]
        assert messages[0]["role"] == "compactionSummary"
        if len(messages) > 1:
            assert messages[1]["role"] != "toolResult"


# --- summary text helpers ----------------------------------------------------------------


def test_merge_split_turn_summary_uses_pis_layout() -> None:
    assert merge_split_turn_summary("HISTORY", "PREFIX") == (
        "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
    )
    assert merge_split_turn_summary(None, "PREFIX").startswith("No prior history.\n\n---")
    assert merge_split_turn_summary("", "PREFIX").startswith("No prior history.")


def test_file_operation_lists() -> None:
    ops = FileOperations()
    ops.add_from_message(
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "name": "read", "arguments": {"path": "b.py"}},
                {"type": "toolCall", "name": "read", "arguments": {"path": "a.py"}},
                {"type": "toolCall", "name": "edit", "arguments": {"path": "a.py"}},
                {"type": "toolCall", "name": "write", "arguments": {"path": "c.py"}},
                {"type": "toolCall", "name": "bash", "arguments": {"path": "ignored.py"}},
                {"type": "toolCall", "name": "read", "arguments": {}},
            ],
        }
    )
    ops.add_from_message(
        {"role": "user", "content": [{"type": "toolCall", "name": "read", "arguments": {"path": "u"}}]}
    )
    assert ops.file_lists() == (["b.py"], ["a.py", "c.py"])
    text = format_file_operations(*ops.file_lists())
    assert text == "\n\n<read-files>\nb.py\n</read-files>\n\n<modified-files>\na.py\nc.py\n</modified-files>"
    assert format_file_operations([], []) == ""
    assert strip_file_operations("Summary body" + text) == "Summary body"


def test_serialize_conversation() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "please fix"}, {"type": "image", "data": "x"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "on it"},
                {"type": "toolCall", "name": "read", "arguments": {"path": "a.py", "limit": 5}},
                {"type": "toolCall", "name": "bash", "arguments": {"command": "ls"}},
            ],
        },
        {"role": "toolResult", "content": [{"type": "text", "text": "z" * 2500}]},
        {"role": "bashExecution", "command": "make", "output": "", "exitCode": 2},
        {"role": "bashExecution", "command": "secret", "output": "x", "excludeFromContext": True},
        {"role": "compactionSummary", "summary": "OLD"},
        {"role": "branchSummary", "summary": "ELSEWHERE"},
        {"role": "custom", "content": "injected note"},
    ]
    text = serialize_conversation(messages)
    parts = text.split("\n\n[")
    assert parts[0] == "[User]: please fix"
    assert "hmm" not in text  # thinking is left out (Pi 1.2)
    assert "[Assistant]: on it" in text
    assert '[Assistant tool calls]: read(path="a.py", limit=5); bash(command="ls")' in text
    assert "[Tool result]: " + "z" * 2000 + "\n\n[... 500 more characters truncated]" in text
    assert "Ran `make`\n(no output)\n\nCommand exited with code 2" in text
    assert "secret" not in text
    # Pi's own layouts: the compaction summary ends on a new line, the branch summary does not.
    assert "<summary>\nOLD\n</summary>" in text and "<summary>\nELSEWHERE</summary>" in text
    assert "[User]: injected note" in text


# --- the real Pi fixture ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def before_compaction_path() -> list[dict[str, Any]]:
    file_entries = load_entries_from_file(fixture_path("before-compaction.jsonl"))
    migrate_to_current_version(file_entries)
    _header, entries = split_header(file_entries)
    return entries


def test_prepare_on_real_pi_session(before_compaction_path) -> None:
    entries = before_compaction_path
    # A linear v1 file: append order is the active path.
    assert entries[-1]["type"] != "compaction"
    compactions = [i for i, e in enumerate(entries) if e["type"] == "compaction"]
    assert len(compactions) == 2
    latest_index = compactions[-1]
    latest = entries[latest_index]

    prep = prepare_compaction(entries, CompactionSettings())
    assert prep is not None
    assert prep.previous_summary == latest["summary"]
    assert prep.previous_compaction_id == latest["id"]
    position = {e["id"]: i for i, e in enumerate(entries)}
    assert position[prep.first_kept_entry_id] > latest_index
    assert entries[position[prep.first_kept_entry_id]]["message"]["role"] != "toolResult"
    # The region summarized starts at the latest compaction's first kept entry.
    first_summarized = entries[position[latest["firstKeptEntryId"]]]["message"]
    assert prep.messages_to_summarize[0] is first_summarized
    assert prep.tokens_before == estimate_context_tokens(build_session_context(entries)["messages"]).tokens
    assert prep.tokens_before > 100_000
    assert prep.has_content
    # Pi's agent read and edited files through its tools; the lists are cumulative.
    read_files, modified_files = prep.file_ops.file_lists()
    assert modified_files and read_files
    assert set(latest.get("details", {}).get("modifiedFiles", [])) <= set(modified_files)


# --- JSON.stringify of tool-call arguments -------------------------------------------


@pytest.mark.parametrize(
    ("value", "javascript"),
    [
        (1e-07, "1e-7"),
        (1e21, "1e+21"),
        (1e-05, "0.00001"),
        (100.0, "100"),
        (1e20, "100000000000000000000"),
        (-0.0, "0"),
        (123e-20, "1.23e-18"),
        (2**53 + 1, "9007199254740992"),
        (10**21, "1e+21"),
        (0.000123, "0.000123"),
    ],
)
def test_numbers_are_written_as_javascript_writes_them(value, javascript):
    from sessiontree.core.compaction import js_number

    assert js_number(value) == javascript


def test_a_tool_call_with_a_whole_float_is_estimated_as_pi_does():
    # JSON.stringify({"x":100,"p":"aa"}) is 18 characters (+1 for the name: 5
    # tokens); Python writes 100.0 and made it 20 (6 tokens), as Pi never does.
    message = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c", "name": "f", "arguments": {"x": 100.0, "p": "aa"}}],
    }
    assert estimate_tokens(message) == 5
