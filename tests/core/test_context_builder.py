"""Context building (plan task 3): what the LLM sees at a leaf."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from sessiontree.core.context_builder import UNSET, build_session_context
from sessiontree.core.errors import BadInput, CorruptSessionTree, EntryNotFound
from sessiontree.core.path import build_entry_index

TS0 = "2026-04-19T00:00:00.000Z"


def message(entry_id: str, parent_id: str | None, role: str, content: str, **message_fields) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": TS0,
        "message": {"role": role, "content": content, **message_fields},
    }


def assistant(entry_id: str, parent_id: str | None, content: str, provider: str, model: str) -> dict:
    return message(entry_id, parent_id, "assistant", content, provider=provider, model=model, api="x")


def compaction(entry_id, parent_id, summary, first_kept, tokens_before=1000, timestamp="2026-04-19T00:00:01.000Z"):
    return {
        "type": "compaction",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": timestamp,
        "summary": summary,
        "firstKeptEntryId": first_kept,
        "tokensBefore": tokens_before,
    }


def thinking(entry_id, parent_id, level):
    return {
        "type": "thinking_level_change",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": TS0,
        "thinkingLevel": level,
    }


def model_change(entry_id, parent_id, provider, model_id):
    return {
        "type": "model_change",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": TS0,
        "provider": provider,
        "modelId": model_id,
    }


def epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC).timestamp() * 1000)


def contents(context) -> list:
    return [m.get("content", m.get("summary")) for m in context["messages"]]


# --- the plan's cases ------------------------------------------------------


def test_walks_the_active_path_and_excludes_sibling_branches():
    entries = [
        message("u1", None, "user", "root"),
        message("a1", "u1", "assistant", "branch a"),
        message("a2", "u1", "assistant", "branch b"),
    ]
    assert [m["content"] for m in build_session_context(entries, "a2")["messages"]] == ["root", "branch b"]


def test_handles_compaction_using_first_kept_entry_id():
    entries = [
        message("u1", None, "user", "old"),
        message("u2", "u1", "user", "kept"),
        compaction("c1", "u2", "summary", "u2"),
        message("a1", "c1", "assistant", "after"),
    ]
    context = build_session_context(entries, "a1")
    assert [m["role"] for m in context["messages"]] == ["compactionSummary", "user", "assistant"]
    assert contents(context) == ["summary", "kept", "after"]


def test_tracks_thinking_and_model_settings_without_adding_them_as_messages():
    entries = [
        message("u1", None, "user", "hello"),
        thinking("t1", "u1", "high"),
        model_change("m1", "t1", "openai", "gpt-x"),
    ]
    context = build_session_context(entries, "m1")
    assert context["messages"] == [{"role": "user", "content": "hello"}]
    assert context["thinking_level"] == "high"
    assert context["model"] == {"provider": "openai", "modelId": "gpt-x"}


# --- leaf selection --------------------------------------------------------


def test_omitted_leaf_uses_the_last_entry():
    entries = [
        message("u1", None, "user", "root"),
        message("a1", "u1", "assistant", "branch a"),
        message("a2", "u1", "assistant", "branch b"),
    ]
    assert contents(build_session_context(entries)) == ["root", "branch b"]
    assert contents(build_session_context(entries, UNSET)) == ["root", "branch b"]


def test_none_leaf_is_an_empty_context():
    entries = [message("u1", None, "user", "root"), thinking("t1", "u1", "high")]
    assert build_session_context(entries, None) == {
        "messages": [],
        "thinking_level": "off",
        "model": None,
        "source_entry_ids": [],
    }


def test_no_entries_is_an_empty_context():
    assert build_session_context([]) == {"messages": [], "thinking_level": "off", "model": None, "source_entry_ids": []}


def test_unknown_explicit_leaf_raises_naming_it():
    entries = [message("u1", None, "user", "root")]
    with pytest.raises(EntryNotFound, match="feedface"):
        build_session_context(entries, "feedface")


def test_context_at_an_earlier_entry_stops_there():
    entries = [
        message("u1", None, "user", "1"),
        message("a1", "u1", "assistant", "2"),
        message("u2", "a1", "user", "3"),
    ]
    assert contents(build_session_context(entries, "a1")) == ["1", "2"]


def test_given_index_is_used():
    entries = [message("u1", None, "user", "1"), message("a1", "u1", "assistant", "2")]
    by_id = build_entry_index(entries)
    assert contents(build_session_context(entries, "a1", by_id)) == ["1", "2"]


# --- message shapes --------------------------------------------------------


def test_message_entries_pass_the_whole_payload_through():
    payload = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "bash",
        "content": [{"type": "text", "text": "ok"}],
        "details": {"exitCode": 0},
        "isError": False,
        "timestamp": 1_700_000_000_000,
        "unknownField": {"kept": True},
    }
    entries = [{"type": "message", "id": "m1", "parentId": None, "timestamp": TS0, "message": payload}]
    context = build_session_context(entries)
    assert context["messages"] == [payload]


def test_compaction_summary_message_shape():
    entries = [
        message("u1", None, "user", "old"),
        compaction("c1", "u1", "the summary", "u1", tokens_before=175004, timestamp="2026-04-19T00:00:01.234Z"),
    ]
    first = build_session_context(entries)["messages"][0]
    assert first == {
        "role": "compactionSummary",
        "summary": "the summary",
        "tokensBefore": 175004,
        "timestamp": 1776556801234,
    }
    assert first["timestamp"] == epoch_ms("2026-04-19T00:00:01.234Z")


def test_branch_summary_message_shape():
    entries = [
        message("u1", None, "user", "root"),
        {
            "type": "branch_summary",
            "id": "b1",
            "parentId": "u1",
            "timestamp": "2026-04-19T00:00:05.000Z",
            "fromId": "x9",
            "summary": "what happened on the other branch",
            "details": {"files": ["a.py"]},
            "fromHook": False,
        },
        message("u2", "b1", "user", "next"),
    ]
    context = build_session_context(entries)
    assert context["messages"][1] == {
        "role": "branchSummary",
        "summary": "what happened on the other branch",
        "fromId": "x9",
        "timestamp": epoch_ms("2026-04-19T00:00:05.000Z"),
    }
    assert context["source_entry_ids"] == ["u1", "b1", "u2"]


def test_branch_summary_with_empty_summary_gives_no_message():
    entries = [
        message("u1", None, "user", "root"),
        {"type": "branch_summary", "id": "b1", "parentId": "u1", "timestamp": TS0, "fromId": "u1", "summary": ""},
        message("u2", "b1", "user", "next"),
    ]
    context = build_session_context(entries)
    assert contents(context) == ["root", "next"]
    assert context["source_entry_ids"] == ["u1", "u2"]


def test_custom_message_becomes_a_custom_role_message():
    entries = [
        message("u1", None, "user", "root"),
        {
            "type": "custom_message",
            "id": "cm1",
            "parentId": "u1",
            "timestamp": "2026-04-19T00:00:03.000Z",
            "customType": "reminder",
            "content": [{"type": "text", "text": "remember"}],
            "display": False,
            "details": {"k": 1},
        },
    ]
    context = build_session_context(entries)
    assert context["messages"][1] == {
        "role": "custom",
        "customType": "reminder",
        "content": [{"type": "text", "text": "remember"}],
        "display": False,
        "details": {"k": 1},
        "timestamp": epoch_ms("2026-04-19T00:00:03.000Z"),
    }
    assert context["source_entry_ids"] == ["u1", "cm1"]


def test_custom_message_without_details_has_no_details_key():
    # Pi builds the message with ``details: undefined``, which JSON leaves out.
    entries = [
        {
            "type": "custom_message",
            "id": "cm1",
            "parentId": None,
            "timestamp": TS0,
            "customType": "note",
            "content": "hi",
            "display": True,
        }
    ]
    message = build_session_context(entries)["messages"][0]
    assert "details" not in message
    assert message == {
        "role": "custom",
        "customType": "note",
        "content": "hi",
        "display": True,
        "timestamp": message["timestamp"],
    }


def test_label_session_info_custom_and_settings_give_no_message():
    entries = [
        message("u1", None, "user", "root"),
        {"type": "label", "id": "l1", "parentId": "u1", "timestamp": TS0, "targetId": "u1", "label": "start"},
        {"type": "session_info", "id": "s1", "parentId": "l1", "timestamp": TS0, "name": "my session"},
        {"type": "custom", "id": "c1", "parentId": "s1", "timestamp": TS0, "customType": "state", "data": {"x": 1}},
        thinking("t1", "c1", "low"),
        model_change("m1", "t1", "anthropic", "claude"),
        message("u2", "m1", "user", "end"),
    ]
    context = build_session_context(entries)
    assert contents(context) == ["root", "end"]
    assert context["source_entry_ids"] == ["u1", "u2"]


# --- settings --------------------------------------------------------------


def test_default_thinking_level_is_off_and_model_none():
    context = build_session_context([message("u1", None, "user", "hi")])
    assert context["thinking_level"] == "off"
    assert context["model"] is None


def test_assistant_message_sets_the_model():
    entries = [message("u1", None, "user", "hi"), assistant("a1", "u1", "hello", "anthropic", "claude-sonnet-4-5")]
    assert build_session_context(entries)["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}


def test_model_change_after_assistant_overrides_it():
    entries = [
        message("u1", None, "user", "hi"),
        assistant("a1", "u1", "hello", "anthropic", "claude-sonnet-4-5"),
        model_change("m1", "a1", "openai", "gpt-5"),
    ]
    assert build_session_context(entries)["model"] == {"provider": "openai", "modelId": "gpt-5"}


def test_assistant_after_model_change_overrides_it():
    entries = [
        message("u1", None, "user", "hi"),
        model_change("m1", "u1", "openai", "gpt-5"),
        assistant("a1", "m1", "hello", "anthropic", "claude-sonnet-4-5"),
        thinking("t1", "a1", "high"),
    ]
    context = build_session_context(entries)
    assert context["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    assert context["thinking_level"] == "high"


def test_latest_thinking_level_on_the_path_wins():
    entries = [
        message("u1", None, "user", "hi"),
        thinking("t1", "u1", "high"),
        thinking("t2", "t1", "minimal"),
        thinking("t3", "u1", "xhigh"),  # another branch
    ]
    assert build_session_context(entries, "t2")["thinking_level"] == "minimal"
    assert build_session_context(entries, "t3")["thinking_level"] == "xhigh"


def test_settings_before_a_compaction_still_count():
    entries = [
        thinking("t1", None, "high"),
        model_change("m1", "t1", "openai", "gpt-5"),
        message("u1", "m1", "user", "old"),
        message("u2", "u1", "user", "kept"),
        compaction("c1", "u2", "sum", "u2"),
    ]
    context = build_session_context(entries)
    assert context["thinking_level"] == "high"
    assert context["model"] == {"provider": "openai", "modelId": "gpt-5"}


# --- source_entry_ids and compaction ---------------------------------------


def test_source_entry_ids_align_with_messages():
    entries = [
        message("u1", None, "user", "old"),
        assistant("a1", "u1", "old reply", "p", "m"),
        message("u2", "a1", "user", "kept"),
        {"type": "label", "id": "l1", "parentId": "u2", "timestamp": TS0, "targetId": "u2", "label": "x"},
        compaction("c1", "l1", "sum", "u2"),
        assistant("a2", "c1", "after", "p", "m"),
        {
            "type": "custom_message",
            "id": "cm1",
            "parentId": "a2",
            "timestamp": TS0,
            "customType": "t",
            "content": "injected",
            "display": True,
        },
    ]
    context = build_session_context(entries)
    assert context["source_entry_ids"] == ["c1", "u2", "a2", "cm1"]
    assert len(context["source_entry_ids"]) == len(context["messages"])
    by_id = build_entry_index(entries)
    for entry_id, msg in zip(context["source_entry_ids"], context["messages"], strict=True):
        source = by_id[entry_id]
        if source["type"] == "message":
            assert msg is source["message"]
        else:
            assert msg["role"] in {"compactionSummary", "custom"}


def test_only_the_latest_compaction_on_the_path_is_used():
    entries = [
        message("u1", None, "user", "1"),
        message("a1", "u1", "assistant", "a"),
        compaction("c1", "a1", "First summary", "u1"),
        message("u2", "c1", "user", "2"),
        message("b1", "u2", "assistant", "b"),
        message("u3", "b1", "user", "3"),
        message("c2a", "u3", "assistant", "c"),
        compaction("c2", "c2a", "Second summary", "u3"),
        message("u4", "c2", "user", "4"),
        message("d1", "u4", "assistant", "d"),
    ]
    context = build_session_context(entries)
    assert contents(context) == ["Second summary", "3", "c", "4", "d"]
    assert context["source_entry_ids"] == ["c2", "u3", "c2a", "u4", "d1"]
    # The first compaction's summary is not re-emitted, even though it sits in the kept range's past.
    assert "First summary" not in contents(context)


def test_compaction_on_another_branch_does_not_apply():
    entries = [
        message("u1", None, "user", "1"),
        message("u2", "u1", "user", "2"),
        compaction("c1", "u2", "sum", "u2"),
        message("u3", "u1", "user", "other branch"),
    ]
    assert contents(build_session_context(entries, "u3")) == ["1", "other branch"]


def test_compaction_keeping_from_the_first_entry_keeps_everything():
    entries = [
        message("u1", None, "user", "1"),
        message("a1", "u1", "assistant", "a"),
        compaction("c1", "a1", "sum", "u1"),
        message("u2", "c1", "user", "2"),
    ]
    assert contents(build_session_context(entries)) == ["sum", "1", "a", "2"]


def test_compaction_whose_first_kept_entry_is_not_on_the_path_keeps_nothing_before_it():
    entries = [
        message("u1", None, "user", "1"),
        message("a1", "u1", "assistant", "a"),
        compaction("c1", "a1", "sum", "elsewhere"),
        message("u2", "c1", "user", "2"),
    ]
    assert contents(build_session_context(entries)) == ["sum", "2"]


def test_kept_range_includes_custom_and_branch_summary_messages():
    entries = [
        message("u1", None, "user", "1"),
        {"type": "branch_summary", "id": "b1", "parentId": "u1", "timestamp": TS0, "fromId": "u1", "summary": "bs"},
        {
            "type": "custom_message",
            "id": "cm1",
            "parentId": "b1",
            "timestamp": TS0,
            "customType": "t",
            "content": "cm",
            "display": True,
        },
        compaction("c1", "cm1", "sum", "b1"),
    ]
    context = build_session_context(entries)
    assert [m["role"] for m in context["messages"]] == ["compactionSummary", "branchSummary", "custom"]
    assert context["source_entry_ids"] == ["c1", "b1", "cm1"]


# --- damaged trees ---------------------------------------------------------


def test_entry_with_missing_parent_acts_as_root():
    # Pi's own forks leave such entries; Pi reads them as roots, so do we.
    entries = [
        message("u1", None, "user", "lost"),
        message("u2", "gone", "user", "orphan"),
        message("a2", "u2", "assistant", "reply"),
    ]
    context = build_session_context(entries)
    assert contents(context) == ["orphan", "reply"]
    assert context["source_entry_ids"] == ["u2", "a2"]


def test_cycle_is_corrupt():
    entries = [
        message("cyc1", "cyc3", "user", "1"),
        message("cyc2", "cyc1", "user", "2"),
        message("cyc3", "cyc2", "user", "3"),
    ]
    with pytest.raises(CorruptSessionTree, match="cyc3"):
        build_session_context(entries, "cyc3")


def test_duplicate_ids_are_corrupt():
    entries = [message("dup1", None, "user", "1"), message("dup1", None, "user", "2")]
    with pytest.raises(CorruptSessionTree, match="dup1"):
        build_session_context(entries)


def test_unparsable_timestamp_gives_none():
    entries = [message("u1", None, "user", "x"), compaction("c1", "u1", "sum", "u1", timestamp="not a date")]
    assert build_session_context(entries)["messages"][0]["timestamp"] is None


def test_entries_are_not_modified():
    entries = [
        message("u1", None, "user", "1"),
        compaction("c1", "u1", "sum", "u1"),
        message("u2", "c1", "user", "2"),
    ]
    before = copy.deepcopy(entries)
    build_session_context(entries)
    assert entries == before


def test_the_leaf_is_named_either_way_and_two_different_names_are_refused():
    entries = [message("a", None, "user", "one"), message("b", "a", "user", "two")]
    at_a = build_session_context(entries, "a")
    assert build_session_context(entries, leaf_id="a") == at_a
    assert build_session_context(entries, leaf_entry_id="a") == at_a
    assert build_session_context(entries, "a", leaf_entry_id="a") == at_a
    assert build_session_context(entries, leaf_entry_id=None)["messages"] == []
    assert len(build_session_context(entries)["messages"]) == 2
    with pytest.raises(BadInput, match="different leaves"):
        build_session_context(entries, leaf_id="a", leaf_entry_id="b")
