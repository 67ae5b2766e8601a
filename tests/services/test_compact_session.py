"""compact_session over every provider: Pi's cut points, split turns, updated
summaries and the context that results."""

from __future__ import annotations

import pytest

from sessiontree.core.compaction import CompactionSettings, merge_split_turn_summary
from sessiontree.core.errors import InvalidEntry, LeafConflict, SummarizerError
from sessiontree.services import compact_session

from .session_builders import (
    FailingSummarizer,
    MeddlingSummarizer,
    RecordingSummarizer,
    assistant,
    snapshot_state,
    tool_call,
    tool_result,
    user,
    words,
)


def keep(tokens: int) -> CompactionSettings:
    return CompactionSettings(keep_recent_tokens=tokens)


def append_turns(provider, session_id, first: int, last: int) -> dict[int, tuple[dict, dict]]:
    """Turns ``first..last``: a user message and a reply of 100 tokens each."""
    turns = {}
    for n in range(first, last + 1):
        u = provider.append_message(session_id, user(f"u{n} " + words(99)))
        a = provider.append_message(session_id, assistant(f"a{n} " + words(99)))
        turns[n] = (u, a)
    return turns


def path_ids(provider, session_id) -> list[str]:
    return [e["id"] for e in provider.get_active_path(session_id)]


def tool_turns(provider, session_id, count: int) -> None:
    """Turns with tool calls: user, assistant calling a tool, its big result, a final reply."""
    for n in range(count):
        provider.append_message(session_id, user(f"task {n} " + words(100)))
        provider.append_message(
            session_id, assistant(f"reading {n} " + words(100), tool_call(f"call-{n}", "read", path=f"src/f{n}.py"))
        )
        provider.append_message(session_id, tool_result(f"call-{n}", "read", words(400)))
        provider.append_message(session_id, assistant(f"done {n} " + words(100)))


@pytest.mark.parametrize("keep_tokens", [1, 150, 450, 700, 1000, 1500, 2000])
def test_cut_points_never_split_a_tool_call_from_its_result(provider, keep_tokens):
    provider.create_session(session_id="s1")
    tool_turns(provider, "s1", 4)
    entry = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=RecordingSummarizer(),
        settings=keep(keep_tokens),
        actor="system",
        channel="internal",
    )
    assert entry is not None

    first_kept = provider.get_entry("s1", entry["firstKeptEntryId"])
    assert first_kept["message"]["role"] != "toolResult"
    messages = provider.build_context("s1")["messages"]
    assert messages[0]["role"] == "compactionSummary"
    calls_seen: set[str] = set()
    for message in messages[1:]:
        if message["role"] == "assistant":
            calls_seen.update(block["id"] for block in message["content"] if block["type"] == "toolCall")
        if message["role"] == "toolResult":
            assert message["toolCallId"] in calls_seen, f"result of {message['toolCallId']} kept without its call"


def test_split_turn_produces_the_merged_summary(provider):
    provider.create_session(session_id="s1")
    u1 = provider.append_message("s1", user("first " + words(100)))
    a1 = provider.append_message("s1", assistant("reply " + words(100)))
    u2 = provider.append_message("s1", user("second " + words(100)))
    provider.append_message("s1", assistant("", tool_call("c1", "read", path="a.py")))
    provider.append_message("s1", tool_result("c1", "read", words(100)))
    provider.append_message("s1", assistant("", tool_call("c2", "edit", path="a.py")))
    provider.append_message("s1", tool_result("c2", "edit", words(100)))
    last = provider.append_message("s1", assistant("finished " + words(100)))

    summarizer = RecordingSummarizer()
    entry = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=summarizer,
        settings=keep(150),
        actor="system",
        channel="internal",
    )

    # The budget is reached inside the second turn: the cut lands on its last reply.
    assert entry["firstKeptEntryId"] == last["id"]
    history, prefix = summarizer.requests
    assert (history.kind, prefix.kind) == ("compaction", "turn_prefix")
    assert list(history.messages) == [u1["message"], a1["message"]]
    path = provider.get_active_path("s1")
    ids = [e["id"] for e in path]
    turn = path[ids.index(u2["id"]) : ids.index(last["id"])]
    assert list(prefix.messages) == [e["message"] for e in turn]

    merged = merge_split_turn_summary("COMPACTION 1", "TURN_PREFIX 2")
    assert entry["summary"].startswith(merged)
    assert entry["summary"] == merged + "\n\n<modified-files>\na.py\n</modified-files>"
    assert entry["details"] == {"readFiles": [], "modifiedFiles": ["a.py"]}
    context = provider.build_context("s1")["messages"]
    assert [m["role"] for m in context] == ["compactionSummary", "assistant"]
    assert context[0]["summary"] == entry["summary"]
    assert context[1] == last["message"]


def test_context_after_one_and_after_two_compactions(provider):
    provider.create_session(session_id="s1")
    turns = append_turns(provider, "s1", 1, 3)
    summarizer = RecordingSummarizer()

    first = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=summarizer,
        settings=keep(200),
        actor="system",
        channel="internal",
    )
    u3, a3 = turns[3]
    # The kept region starts at the last turn's user message, which is on the path.
    assert first["firstKeptEntryId"] == u3["id"]
    assert first["firstKeptEntryId"] in path_ids(provider, "s1")
    assert first["parentId"] == a3["id"]
    assert provider.get_session("s1")["leaf_entry_id"] == first["id"]
    (request,) = summarizer.requests
    assert request.previous_summary is None
    assert list(request.messages) == [m["message"] for turn in (turns[1], turns[2]) for m in turn]

    context = provider.build_context("s1")
    assert context["messages"][0] == {
        "role": "compactionSummary",
        "summary": first["summary"],
        "tokensBefore": first["tokensBefore"],
        "timestamp": context["messages"][0]["timestamp"],
    }
    assert context["messages"][1:] == [u3["message"], a3["message"]]
    assert context["source_entry_ids"] == [first["id"], u3["id"], a3["id"]]

    turns.update(append_turns(provider, "s1", 4, 5))
    messages = provider.build_context("s1")["messages"]
    assert messages[1:] == [turns[n][i]["message"] for n in (3, 4, 5) for i in (0, 1)]

    second = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=summarizer,
        settings=keep(200),
        actor="system",
        channel="internal",
    )
    u5, _a5 = turns[5]
    assert second["firstKeptEntryId"] == u5["id"]
    assert second["firstKeptEntryId"] in path_ids(provider, "s1")
    # The second compaction updates the first summary, and re-summarizes what
    # the first one kept (from its firstKeptEntryId), never dropping it.
    update = summarizer.requests[1]
    assert update.previous_summary == first["summary"]
    assert list(update.messages) == [turns[n][i]["message"] for n in (3, 4) for i in (0, 1)]

    turns.update(append_turns(provider, "s1", 6, 6))
    context = provider.build_context("s1")
    assert [m["role"] for m in context["messages"]] == ["compactionSummary", "user", "assistant", "user", "assistant"]
    assert context["messages"][0]["summary"] == second["summary"]
    assert context["messages"][1:] == [turns[n][i]["message"] for n in (5, 6) for i in (0, 1)]
    assert context["source_entry_ids"][0] == second["id"]


def test_details_list_files_read_and_modified_cumulatively(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("look " + words(100)))
    provider.append_message("s1", assistant("", tool_call("c1", "read", path="docs/a.md")))
    provider.append_message("s1", tool_result("c1", "read", words(50)))
    provider.append_message("s1", assistant("", tool_call("c2", "write", path="src/new.py")))
    provider.append_message("s1", tool_result("c2", "write", "ok"))
    append_turns(provider, "s1", 1, 2)
    first = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=RecordingSummarizer(),
        settings=keep(200),
        actor="system",
        channel="internal",
    )
    assert first["details"] == {"readFiles": ["docs/a.md"], "modifiedFiles": ["src/new.py"]}
    assert "<read-files>\ndocs/a.md\n</read-files>" in first["summary"]
    assert "<modified-files>\nsrc/new.py\n</modified-files>" in first["summary"]

    provider.append_message("s1", user("edit it " + words(100)))
    provider.append_message("s1", assistant("", tool_call("c3", "edit", path="docs/a.md")))
    provider.append_message("s1", tool_result("c3", "edit", "ok"))
    append_turns(provider, "s1", 3, 4)
    second = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=RecordingSummarizer(),
        settings=keep(200),
        actor="system",
        channel="internal",
    )
    # Carried forward from the first entry's details; a.md is now modified.
    assert second["details"] == {"readFiles": [], "modifiedFiles": ["docs/a.md", "src/new.py"]}


def test_custom_instructions_reach_the_summarizer(provider):
    provider.create_session(session_id="s1")
    append_turns(provider, "s1", 1, 3)
    summarizer = RecordingSummarizer()
    compact_session(
        provider=provider,
        session_id="s1",
        summarizer=summarizer,
        settings=keep(200),
        custom_instructions="the parser",
        actor="system",
        channel="internal",
    )
    assert summarizer.requests[0].custom_instructions == "the parser"


def test_nothing_to_compact_returns_none_and_writes_nothing(provider):
    provider.create_session(session_id="s1")
    summarizer = RecordingSummarizer()
    assert (
        compact_session(provider=provider, session_id="s1", summarizer=summarizer, actor="system", channel="internal")
        is None
    )  # empty session

    append_turns(provider, "s1", 1, 2)
    before = snapshot_state(provider, "s1")
    # Everything fits in the kept budget: the kept region would not move.
    assert (
        compact_session(
            provider=provider,
            session_id="s1",
            summarizer=summarizer,
            settings=keep(100_000),
            actor="system",
            channel="internal",
        )
        is None
    )
    assert snapshot_state(provider, "s1") == before

    entry = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=summarizer,
        settings=keep(200),
        actor="system",
        channel="internal",
    )
    assert entry is not None
    # The path ends in a compaction: nothing happened since.
    assert (
        compact_session(
            provider=provider,
            session_id="s1",
            summarizer=summarizer,
            settings=keep(200),
            actor="system",
            channel="internal",
        )
        is None
    )
    assert summarizer.requests and len(summarizer.requests) == 1
    assert provider.list_entries("s1")[-1] == entry


def test_disabled_auto_compaction_does_not_stop_a_manual_one(provider):
    provider.create_session(session_id="s1")
    append_turns(provider, "s1", 1, 3)
    settings = CompactionSettings(enabled=False, keep_recent_tokens=200)
    assert (
        compact_session(
            provider=provider,
            session_id="s1",
            summarizer=RecordingSummarizer(),
            settings=settings,
            actor="system",
            channel="internal",
        )
        is not None
    )


def test_default_summarizer_is_the_configured_one(provider, settings):
    settings.SESSIONTREE_SUMMARIZER = "extractive"
    provider.create_session(session_id="s1")
    append_turns(provider, "s1", 1, 3)
    entry = compact_session(provider=provider, session_id="s1", settings=keep(200), actor="system", channel="internal")
    assert entry["type"] == "compaction"
    assert "## Goal" in entry["summary"] and "u1" in entry["summary"]


def test_summarizer_failure_appends_nothing(provider):
    provider.create_session(session_id="s1")
    append_turns(provider, "s1", 1, 3)
    before = snapshot_state(provider, "s1")
    failing = FailingSummarizer()
    with pytest.raises(SummarizerError, match="the model is down"):
        compact_session(
            provider=provider,
            session_id="s1",
            summarizer=failing,
            settings=keep(200),
            actor="system",
            channel="internal",
        )
    assert failing.calls == 1
    assert snapshot_state(provider, "s1") == before


def test_split_turn_failure_on_the_second_call_appends_nothing(provider):
    class FailsOnPrefix(RecordingSummarizer):
        def summarize(self, request):
            if request.kind == "turn_prefix":
                raise RuntimeError("connection reset")
            return super().summarize(request)

    provider.create_session(session_id="s1")
    append_turns(provider, "s1", 1, 1)
    provider.append_message("s1", user("go " + words(100)))
    provider.append_message("s1", assistant("", tool_call("c1", "read", path="a.py")))
    provider.append_message("s1", tool_result("c1", "read", words(100)))
    provider.append_message("s1", assistant("end " + words(100)))
    before = snapshot_state(provider, "s1")
    with pytest.raises(SummarizerError, match="connection reset"):
        compact_session(
            provider=provider,
            session_id="s1",
            summarizer=FailsOnPrefix(),
            settings=keep(150),
            actor="system",
            channel="internal",
        )
    assert snapshot_state(provider, "s1") == before


def test_leaf_moving_while_summarizing_is_a_conflict(provider):
    provider.create_session(session_id="s1")
    append_turns(provider, "s1", 1, 3)
    with pytest.raises(LeafConflict):
        compact_session(
            provider=provider,
            session_id="s1",
            summarizer=MeddlingSummarizer(provider, "s1"),
            settings=keep(200),
            actor="system",
            channel="internal",
        )
    assert [e["type"] for e in provider.list_entries("s1")].count("compaction") == 0
    assert provider.list_entries("s1")[-1]["message"] == user("sneaked in")


def test_compaction_on_a_branch_summarizes_that_branch_only(provider):
    provider.create_session(session_id="s1")
    turns = append_turns(provider, "s1", 1, 2)
    provider.switch_leaf("s1", turns[1][1]["id"])
    other = append_turns(provider, "s1", 3, 4)
    summarizer = RecordingSummarizer()
    entry = compact_session(
        provider=provider,
        session_id="s1",
        summarizer=summarizer,
        settings=keep(200),
        actor="system",
        channel="internal",
    )
    assert entry["parentId"] == other[4][1]["id"]
    (request,) = summarizer.requests
    assert list(request.messages) == [turns[1][0]["message"], turns[1][1]["message"]] + [m["message"] for m in other[3]]
    assert turns[2][0]["message"] not in request.messages


def test_non_text_custom_instructions_are_refused_before_summarizing(provider):
    provider.create_session(session_id="s1")
    append_turns(provider, "s1", 1, 3)
    summarizer = RecordingSummarizer()
    before = snapshot_state(provider, "s1")
    with pytest.raises(InvalidEntry, match="custom_instructions must be a string or None"):
        compact_session(
            provider=provider,
            session_id="s1",
            summarizer=summarizer,
            settings=keep(200),
            custom_instructions=["x"],
            actor="system",
            channel="internal",
        )
    assert summarizer.requests == [] and snapshot_state(provider, "s1") == before
