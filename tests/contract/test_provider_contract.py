"""The provider contract: every case runs against every provider.

Ported from the plan's ``runSessionTreeProviderContract`` and extended with
the bad-input and branching rules of DESIGN.md.
"""

from __future__ import annotations

import re

import pytest

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.errors import SessionClosed
from sessiontree.providers.base import (
    EntryNotFound,
    ImmutableEntry,
    InvalidEntry,
    InvalidSessionId,
    LeafConflict,
    OneStepWriter,
    SessionAlreadyExists,
    SessionNotFound,
    SessionTreeProvider,
)
from sessiontree.providers.one_step import ONE_STEP_WRITES

from .erasing import EraseIds


def user(text):
    return {"role": "user", "content": text}


def assistant(text, model="m-1"):
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": model}


def ids(entries):
    return [e["id"] for e in entries]


def test_implements_protocol(provider):
    assert isinstance(provider, SessionTreeProvider)


def test_creates_session_appends_messages_and_advances_leaf(provider):
    session = provider.create_session(session_id="s1", cwd="C:/workspace")
    assert session["session_id"] == "s1"
    assert session["leaf_entry_id"] is None and session["root_entry_id"] is None
    assert session["provider"] == provider.kind
    assert session["status"] == "active"
    u = provider.append_message("s1", user("hello"))
    a = provider.append_message("s1", assistant("hi"))
    assert u["parentId"] is None and a["parentId"] == u["id"]
    assert len(u["id"]) == 8 and u["timestamp"].endswith("Z")
    got = provider.get_session("s1")
    assert got["leaf_entry_id"] == a["id"]
    assert got["root_entry_id"] == u["id"]
    assert got["cwd"] == "C:/workspace"
    assert ids(provider.get_active_path("s1")) == [u["id"], a["id"]]
    assert provider.list_entries("s1") == [u, a]


def test_generated_session_id_is_uuid7(provider):
    session = provider.create_session()
    assert len(session["session_id"]) == 36 and session["session_id"][14] == "7"


def test_branches_without_deleting_sibling_history(provider):
    provider.create_session(session_id="s1")
    root = provider.append_message("s1", user("root"))
    branch_a = provider.append_message("s1", assistant("a"))
    provider.switch_leaf("s1", root["id"])
    branch_b = provider.append_message("s1", assistant("b"))
    assert sorted(ids(provider.list_entries("s1"))) == sorted([root["id"], branch_a["id"], branch_b["id"]])
    assert ids(provider.get_active_path("s1")) == [root["id"], branch_b["id"]]
    assert ids(provider.get_active_path("s1", branch_a["id"])) == [root["id"], branch_a["id"]]
    assert provider.get_active_path("s1", None) == []


def test_branch_summary_compaction_labels_and_reset_leaf(provider):
    provider.create_session(session_id="s1")
    root = provider.append_message("s1", user("root"))
    provider.append_label_change("s1", root["id"], "入口")
    kept = provider.append_message("s1", user("kept"))
    compaction = provider.append_compaction("s1", summary="summary", first_kept_entry_id=kept["id"], tokens_before=1000)
    assert compaction["type"] == "compaction" and compaction["firstKeptEntryId"] == kept["id"]
    assert compaction["tokensBefore"] == 1000
    summary = provider.append_branch_summary("s1", branch_from_entry_id=root["id"], summary="branch summary")
    assert summary["type"] == "branch_summary"
    # fromId: the leaf that was left (Pi since 0.84.3), here the compaction
    assert summary["parentId"] == root["id"] and summary["fromId"] == compaction["id"]
    assert provider.get_session("s1")["leaf_entry_id"] == summary["id"]
    provider.reset_leaf("s1")
    assert provider.get_session("s1")["leaf_entry_id"] is None
    new_root = provider.append_message("s1", user("new root"))
    assert new_root["parentId"] is None
    snapshot = provider.get_snapshot("s1")
    assert snapshot["labels_by_entry_id"][root["id"]]["label"] == "入口"
    assert snapshot["active_path"] == [new_root["id"]]
    assert snapshot["root_entry_ids"] == [root["id"], new_root["id"]]
    # the first root stays the session's root
    assert provider.get_session("s1")["root_entry_id"] == root["id"]


def test_branch_summary_from_the_root(provider):
    provider.create_session(session_id="s1")
    left = provider.append_message("s1", user("a"))
    summary = provider.append_branch_summary("s1", branch_from_entry_id=None, summary="abandoned")
    assert summary["parentId"] is None and summary["fromId"] == left["id"]
    provider.reset_leaf("s1")
    from_nowhere = provider.append_branch_summary("s1", branch_from_entry_id=None, summary="no leaf")
    assert from_nowhere["fromId"] == "root"
    context = provider.build_context("s1")
    assert [m["role"] for m in context["messages"]] == ["branchSummary"]


# --- Pi 1.x entries: context edits, usage, retain-none and system checkpoints --


def test_context_edit_replaces_or_omits_a_message_from_here_on(provider):
    provider.create_session(session_id="s1")
    question = provider.append_message("s1", user("secret question"))
    answer = provider.append_message("s1", assistant("long answer"))
    note = provider.append_custom_message("s1", "note", "a note")
    edit = provider.append_context_edit("s1", answer["id"], {"content": "short"})
    assert edit == {**edit, "type": "context_edit", "targetId": answer["id"], "parentId": note["id"]}
    # A string for an assistant is stored as one text block, as Pi stores it.
    assert edit["replacement"] == {"content": [{"type": "text", "text": "short"}]}
    omit = provider.append_context_edit("s1", question["id"], None)
    assert omit["replacement"] is None and "replacement" in omit
    provider.append_context_edit("s1", note["id"], {"content": "edited note"})
    context = provider.build_context("s1")
    assert [m["role"] for m in context["messages"]] == ["assistant", "custom"]
    assert context["messages"][0]["content"] == [{"type": "text", "text": "short"}]
    assert context["messages"][0]["provider"] == "p"  # only the content changes
    assert context["messages"][1]["content"] == "edited note"
    assert context["source_entry_ids"] == [answer["id"], note["id"]]
    # Stored entries never change; before the edits the context is the original one.
    assert provider.get_entry("s1", answer["id"]) == answer
    before = provider.build_context("s1", note["id"])
    assert [m["content"] for m in before["messages"]][:1] == ["secret question"]
    assert provider.list_entries("s1")[-3:][0] == edit


def test_context_edit_refuses_what_pi_refuses(provider):
    provider.create_session(session_id="s1")
    first = provider.append_message("s1", user("a"))
    provider.append_thinking_level_change("s1", "high")
    settings = provider.list_entries("s1")[-1]
    with pytest.raises(InvalidEntry, match="not a message"):
        provider.append_context_edit("s1", settings["id"], None)
    provider.switch_leaf("s1", first["id"])
    side = provider.append_message("s1", user("b"))
    provider.switch_leaf("s1", settings["id"])
    with pytest.raises(EntryNotFound, match="not on the active path"):
        provider.append_context_edit("s1", side["id"], None)
    with pytest.raises(InvalidEntry, match="replacement"):
        provider.append_entry("s1", {"type": "context_edit", "targetId": first["id"], "replacement": {"content": 3}})
    with pytest.raises(InvalidEntry, match="replacement"):
        provider.append_entry("s1", {"type": "context_edit", "targetId": first["id"]})
    with pytest.raises(EntryNotFound):
        provider.append_entry("s1", {"type": "context_edit", "targetId": "missing1", "replacement": None})
    assert provider.get_session("s1")["leaf_entry_id"] == settings["id"]


def test_usage_entries_are_stored_but_never_in_the_context(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    usage = {"input": 0, "output": 0, "cacheRead": 50000, "cacheWrite": 0, "totalTokens": 50000}
    entry = provider.append_usage("s1", "cache_warm", "anthropic", "claude-x", usage, note="warm")
    assert {k: entry[k] for k in ("type", "kind", "provider", "model", "usage", "note")} == {
        "type": "usage",
        "kind": "cache_warm",
        "provider": "anthropic",
        "model": "claude-x",
        "usage": usage,
        "note": "warm",
    }
    assert provider.list_entries("s1")[-1] == entry
    context = provider.build_context("s1")
    assert [m["role"] for m in context["messages"]] == ["user"]
    assert context["model"] is None  # a usage entry names a model but does not select one
    with pytest.raises(InvalidEntry, match="usage"):
        provider.append_entry("s1", {"type": "usage", "kind": "k", "provider": "p", "model": "m", "usage": 5})


def test_retain_none_compaction_with_a_system_checkpoint(provider):
    provider.create_session(session_id="s1")
    system = {"role": "system", "content": "You are terse.", "sections": {"cwd": "/w"}, "timestamp": 1}
    provider.append_message("s1", system)
    provider.append_message("s1", user("old"))
    compaction = provider.append_compaction(
        "s1",
        summary="S",
        first_kept_entry_id=None,
        tokens_before=10,
        usage={"input": 5, "output": 1},
        system_message={"role": "system", "content": "You are terse.", "sections": {"cwd": "/w"}, "timestamp": 1},
    )
    # Stored as Pi stores it: the compaction names itself, the checkpoint carries its time.
    assert compaction["firstKeptEntryId"] == compaction["id"]
    assert compaction["usage"] == {"input": 5, "output": 1}
    assert compaction["systemMessage"]["timestamp"] != 1
    after = provider.append_message("s1", user("new"))
    context = provider.build_context("s1")
    assert [m["role"] for m in context["messages"]] == ["system", "compactionSummary", "user"]
    assert context["messages"][0]["content"] == "You are terse."
    assert context["source_entry_ids"] == [compaction["id"], compaction["id"], after["id"]]
    assert provider.list_entries("s1")[-2] == compaction
    # A verbatim entry may say null: it keeps nothing either.
    verbatim = provider.append_entry(
        "s1", {"type": "compaction", "summary": "T", "firstKeptEntryId": None, "tokensBefore": 1}
    )
    assert verbatim["firstKeptEntryId"] == verbatim["id"]
    assert [m["role"] for m in provider.build_context("s1")["messages"]] == ["compactionSummary"]


def test_session_name_is_the_latest_session_info_and_empty_clears_it(provider):
    from sessiontree.core.entries import resolve_session_name

    provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    named = provider.append_session_info("s1", "  Refactor\r\nauth  ")
    assert named["name"] == "Refactor auth"
    assert resolve_session_name(provider.list_entries("s1")) == "Refactor auth"
    cleared = provider.append_session_info("s1", "")
    assert cleared["name"] == ""
    assert resolve_session_name(provider.list_entries("s1")) is None


def test_typed_appends_have_pi_shapes(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("x"))
    t = provider.append_thinking_level_change("s1", "high")
    m = provider.append_model_change("s1", "openai", "gpt-x")
    c = provider.append_custom_entry("s1", "ext", {"k": 1})
    cm = provider.append_custom_message("s1", "note", "shown", display=False, details={"d": 1})
    info = provider.append_session_info("s1", "My session")
    label = provider.append_label_change("s1", u["id"], "start")
    cleared = provider.append_label_change("s1", u["id"], None)
    assert t["thinkingLevel"] == "high" and t["type"] == "thinking_level_change"
    assert (m["provider"], m["modelId"]) == ("openai", "gpt-x")
    assert c["customType"] == "ext" and c["data"] == {"k": 1}
    assert cm["content"] == "shown" and cm["display"] is False and cm["details"] == {"d": 1}
    assert info["name"] == "My session"
    assert label["targetId"] == u["id"] and label["label"] == "start"
    assert "label" not in cleared  # Pi writes a cleared label as an absent key
    assert provider.get_snapshot("s1")["labels_by_entry_id"] == {}
    # the target entry is never modified
    assert provider.get_entry("s1", u["id"]) == u
    context = provider.build_context("s1")
    assert context["thinking_level"] == "high"
    assert context["model"] == {"provider": "openai", "modelId": "gpt-x"}
    assert [msg["role"] for msg in context["messages"]] == ["user", "custom"]
    assert context["source_entry_ids"] == [u["id"], cm["id"]]


def test_context_matches_the_kernel(provider):
    provider.create_session(session_id="s1")
    first = provider.append_message("s1", user("one"))
    provider.append_message("s1", assistant("two"))
    kept = provider.append_message("s1", user("three"))
    provider.append_compaction("s1", summary="S", first_kept_entry_id=kept["id"], tokens_before=5)
    provider.append_message("s1", assistant("four"))
    provider.switch_leaf("s1", first["id"])
    provider.append_message("s1", assistant("other"))
    entries = provider.list_entries("s1")
    for leaf in ids(entries):
        assert provider.build_context("s1", leaf) == build_session_context(entries, leaf)
    assert provider.build_context("s1") == build_session_context(entries, provider.get_session("s1")["leaf_entry_id"])
    assert provider.build_context("s1", None)["messages"] == []


def test_unknown_fields_and_unicode_survive(provider):
    provider.create_session(session_id="s1")
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "héllo 🌳 世界"},
            {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "a"}},
        ],
        "provider": "anthropic",
        "model": "claude",
        "usage": {"input": 3, "output": 5, "cost": {"total": 0.0001}},
        "stopReason": "toolUse",
        "timestamp": 1763681630793,
        "futureField": {"nested": [1, 2.5, None, True]},
    }
    entry = provider.append_entry(
        "s1", {"type": "message", "message": message, "sourceRuntime": "pi-0.58", "x-extra": [1]}
    )
    (stored,) = provider.list_entries("s1")
    assert stored == entry
    assert stored["message"] == message
    assert stored["sourceRuntime"] == "pi-0.58" and stored["x-extra"] == [1]


def test_explicit_id_and_timestamp_are_kept(provider):
    provider.create_session(session_id="s1")
    entry = provider.append_entry(
        "s1", {"type": "message", "id": "abcd1234", "timestamp": "2026-04-19T00:00:00.000Z", "message": user("x")}
    )
    assert entry["id"] == "abcd1234" and entry["timestamp"] == "2026-04-19T00:00:00.000Z"


@pytest.mark.parametrize(
    "bad",
    [
        "not a dict",
        {"type": "nonsense"},
        {"type": "message"},
        {"type": "message", "message": {"content": "no role"}},
        {"type": "thinking_level_change"},
        {"type": "model_change", "provider": "p"},
        {"type": "compaction", "summary": "s", "tokensBefore": 1},
        {"type": "compaction", "summary": "s", "firstKeptEntryId": "root0001", "tokensBefore": -1},
        {"type": "compaction", "summary": "s", "firstKeptEntryId": "root0001", "tokensBefore": 4.5},
        {"type": "custom"},
        {"type": "custom_message", "customType": "x", "content": 5, "display": True},
        {"type": "label"},
        {"type": "message", "message": user("x"), "timestamp": 12},
        {"type": "message", "message": user("x"), "id": ""},
        {"type": "message", "message": user("x"), "parentId": "elsewhere"},
    ],
)
def test_bad_entries_are_refused_and_nothing_changes(provider, bad):
    provider.create_session(session_id="s1")
    provider.append_entry("s1", {"type": "message", "id": "root0001", "message": user("x")})
    before = (provider.list_entries("s1"), provider.get_session("s1")["leaf_entry_id"])
    with pytest.raises(InvalidEntry):
        provider.append_entry("s1", bad)
    assert (provider.list_entries("s1"), provider.get_session("s1")["leaf_entry_id"]) == before


def test_a_whole_number_written_with_a_fraction_is_an_integer(provider):
    """JSON Schema and Pi's JavaScript read 4.0 as the integer 4 (Schemathesis
    sent one in a compaction's tokensBefore, which the schema allows)."""
    provider.create_session(session_id="s1")
    provider.append_entry("s1", {"type": "message", "id": "root0001", "message": user("x")})
    entry = provider.append_entry(
        "s1", {"type": "compaction", "summary": "s", "firstKeptEntryId": None, "tokensBefore": 4.0}
    )
    assert entry["tokensBefore"] == 4 and provider.get_entry("s1", entry["id"])["tokensBefore"] == 4


def test_references_to_missing_entries_are_refused(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("x"))
    with pytest.raises(EntryNotFound, match="nope"):
        provider.append_label_change("s1", "nope", "l")
    with pytest.raises(EntryNotFound, match="gone"):
        provider.append_compaction("s1", summary="s", first_kept_entry_id="gone", tokens_before=1)
    with pytest.raises(EntryNotFound, match="missing"):
        provider.switch_leaf("s1", "missing")
    with pytest.raises(EntryNotFound):
        provider.append_branch_summary("s1", branch_from_entry_id="missing", summary="s")
    with pytest.raises(EntryNotFound):
        provider.get_entry("s1", "missing")
    with pytest.raises(EntryNotFound):
        provider.get_active_path("s1", "missing")
    with pytest.raises(EntryNotFound):
        provider.create_branched_session("s1", "missing")
    assert provider.list_entries("s1") == [u]
    assert provider.get_session("s1")["leaf_entry_id"] == u["id"]


def test_duplicate_entry_id_is_refused(provider):
    provider.create_session(session_id="s1")
    first = provider.append_entry("s1", {"type": "message", "id": "dup00001", "message": user("x")})
    with pytest.raises(InvalidEntry, match="dup00001"):
        provider.append_entry("s1", {"type": "message", "id": "dup00001", "message": user("y")})
    assert provider.list_entries("s1") == [first]


# Ids that a case-insensitive or PAD SPACE database collation would take for "ab12".
LOOKALIKE_IDS = ["AB12", "ab12 ", "Ab12"]


@pytest.mark.parametrize("lookalike", LOOKALIKE_IDS)
def test_ids_that_differ_only_by_case_or_trailing_spaces_are_other_ids(provider, lookalike):
    """As in Pi (and in a file): ids compare exactly, whatever the database's collation."""
    provider.create_session(session_id="s1")
    first = provider.append_entry("s1", {"type": "message", "id": "ab12", "message": user("x")})
    second = provider.append_message("s1", user("y"))
    # No entry has the lookalike id yet: nothing may find "ab12" for it.
    with pytest.raises(EntryNotFound):
        provider.switch_leaf("s1", lookalike)
    with pytest.raises(EntryNotFound):
        provider.get_entry("s1", lookalike)
    with pytest.raises(EntryNotFound):
        provider.append_label_change("s1", lookalike, "l")
    assert provider.get_session("s1")["leaf_entry_id"] == second["id"]
    assert ids(provider.get_active_path("s1")) == ["ab12", second["id"]]
    # It is a free id: stored as a new entry beside "ab12", found exactly.
    other = provider.append_entry("s1", {"type": "message", "id": lookalike, "message": user("z")})
    assert other["id"] == lookalike
    assert provider.get_entry("s1", lookalike)["message"]["content"] == "z"
    assert provider.get_entry("s1", "ab12") == first
    provider.switch_leaf("s1", "ab12")
    assert ids(provider.get_active_path("s1")) == ["ab12"]
    provider.switch_leaf("s1", lookalike)
    assert ids(provider.get_active_path("s1")) == ["ab12", second["id"], lookalike]
    with pytest.raises(InvalidEntry, match=re.escape(lookalike)):
        provider.append_entry("s1", {"type": "message", "id": lookalike, "message": user("again")})


def test_session_ids_that_differ_only_by_case_are_other_sessions(provider):
    provider.create_session(session_id="Case-1")
    provider.append_message("Case-1", user("upper"))
    provider.create_session(session_id="case-1")
    provider.append_message("case-1", user("lower"))
    assert [e["message"]["content"] for e in provider.list_entries("Case-1")] == ["upper"]
    assert [e["message"]["content"] for e in provider.list_entries("case-1")] == ["lower"]
    assert provider.get_session("CASE-1") is None


def test_unknown_and_malicious_sessions(provider):
    assert provider.get_session("nope") is None
    with pytest.raises(SessionNotFound):
        provider.append_message("nope", user("x"))
    with pytest.raises(SessionNotFound):
        provider.list_entries("nope")
    with pytest.raises(SessionNotFound):
        provider.switch_leaf("nope", "x")
    with pytest.raises(SessionNotFound):
        provider.get_snapshot("nope")
    for bad_id in ["../../etc/passwd", "a/b", "..", "", "x" * 65, "a\x00b", ".hidden", "a\\b"]:
        with pytest.raises(InvalidSessionId):
            provider.create_session(session_id=bad_id)
        with pytest.raises(InvalidSessionId):
            provider.get_session(bad_id)
        with pytest.raises(InvalidSessionId):
            provider.append_message(bad_id, user("x"))


def test_session_id_is_unique(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("keep me"))
    with pytest.raises(SessionAlreadyExists):
        provider.create_session(session_id="s1")
    assert [e["message"]["content"] for e in provider.list_entries("s1")] == ["keep me"]


def test_expected_leaf_guards_appends(provider):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"), expected_leaf_id=None)
    b = provider.append_message("s1", user("b"), expected_leaf_id=a["id"])
    with pytest.raises(LeafConflict):
        provider.append_message("s1", user("c"), expected_leaf_id=a["id"])
    with pytest.raises(LeafConflict):
        provider.append_message("s1", user("c"), expected_leaf_id=None)
    assert ids(provider.list_entries("s1")) == [a["id"], b["id"]]


def test_in_flight_entries(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("q"))
    streaming = provider.begin_in_flight_entry(
        "s1", {"type": "message", "message": {"role": "assistant", "content": ""}}
    )
    assert streaming["parentId"] == u["id"]
    assert provider.get_session("s1")["leaf_entry_id"] == streaming["id"]
    with pytest.raises(LeafConflict):
        provider.append_message("s1", user("too early"))
    with pytest.raises(LeafConflict):
        provider.switch_leaf("s1", u["id"])
    partial = provider.update_in_flight_entry(
        "s1", streaming["id"], {"message": {"role": "assistant", "content": "Hel"}}
    )
    assert partial["message"]["content"] == "Hel"
    assert provider.list_entries("s1")[-1]["message"]["content"] == "Hel"
    with pytest.raises(InvalidEntry):
        provider.update_in_flight_entry("s1", streaming["id"], {"parentId": None})
    with pytest.raises(InvalidEntry):
        provider.update_in_flight_entry("s1", streaming["id"], {"message": "not an object"})
    done = provider.update_in_flight_entry(
        "s1", streaming["id"], {"message": {"role": "assistant", "content": "Hello"}}, complete=True
    )
    assert done["message"]["content"] == "Hello"
    assert provider.list_entries("s1") == [u, done]
    with pytest.raises(ImmutableEntry):
        provider.update_in_flight_entry("s1", streaming["id"], {"message": {"role": "assistant", "content": "x"}})
    with pytest.raises(ImmutableEntry):
        provider.update_in_flight_entry("s1", u["id"], {"message": user("rewrite")})
    with pytest.raises(EntryNotFound):
        provider.update_in_flight_entry("s1", "nope", {})
    after = provider.append_message("s1", user("next"))
    assert after["parentId"] == done["id"]
    assert provider.get_entry("s1", u["id"]) == u


def test_an_in_flight_entry_can_be_aborted(provider):
    """A stream that failed leaves nothing behind: the leaf, the counts and
    the next append are as if it had never begun (issue 20: an in-flight
    entry used to wedge its session until completed)."""
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("q"))
    before = provider.get_session("s1")
    streaming = provider.begin_in_flight_entry("s1", {"type": "message", "message": assistant("partial")})
    with pytest.raises(ImmutableEntry):
        provider.abort_in_flight_entry("s1", u["id"])
    with pytest.raises(EntryNotFound):
        provider.abort_in_flight_entry("s1", "nope")
    dropped = provider.abort_in_flight_entry("s1", streaming["id"])
    assert dropped["id"] == streaming["id"]
    after = provider.get_session("s1")
    for key in ("leaf_entry_id", "entry_count", "branch_count", "compaction_count"):
        assert after[key] == before[key], key
    assert provider.list_entries("s1") == [u]
    with pytest.raises(EntryNotFound):
        provider.get_entry("s1", streaming["id"])
    again = provider.append_message("s1", assistant("answer"))
    assert again["parentId"] == u["id"] and provider.get_session("s1")["branch_count"] == 1
    # A streaming sibling and a streaming root are undone as well.
    provider.switch_leaf("s1", u["id"])
    sibling = provider.begin_in_flight_entry("s1", {"type": "message", "message": assistant("other")})
    provider.abort_in_flight_entry("s1", sibling["id"])
    assert provider.get_session("s1")["branch_count"] == 1
    assert provider.get_session("s1")["leaf_entry_id"] == u["id"]
    provider.reset_leaf("s1")
    root = provider.begin_in_flight_entry("s1", {"type": "message", "message": assistant("root")})
    provider.abort_in_flight_entry("s1", root["id"])
    state = provider.get_session("s1")
    assert state["leaf_entry_id"] is None and state["branch_count"] == 1 and state["entry_count"] == 2
    assert ids(provider.list_entries("s1")) == [u["id"], again["id"]]


def test_create_branched_session_copies_the_path_and_labels(provider):
    provider.create_session(session_id="src", cwd="/w")
    a = provider.append_message("src", user("a"))
    provider.append_label_change("src", a["id"], "start")  # a label ON the path
    b = provider.append_message("src", assistant("b"))  # child of the label entry
    c = provider.append_message("src", user("c"))
    provider.append_label_change("src", c["id"], "decision")
    d = provider.append_message("src", assistant("d"))
    source_context_at_c = provider.build_context("src", c["id"])
    fork = provider.create_branched_session("src", c["id"], new_session_id="fork1")
    assert fork["session_id"] == "fork1" and fork["parent_session_id"] == "src"
    assert fork["cwd"] == "/w"
    entries = provider.list_entries("fork1")
    non_labels = [e for e in entries if e["type"] != "label"]
    assert ids(non_labels) == [a["id"], b["id"], c["id"]]
    assert d["id"] not in ids(entries)
    # b followed the dropped label entry: it is re-attached to a, not orphaned
    assert non_labels[1]["parentId"] == a["id"]
    labels = provider.get_snapshot("fork1")["labels_by_entry_id"]
    assert {k: v["label"] for k, v in labels.items()} == {a["id"]: "start", c["id"]: "decision"}
    assert fork["leaf_entry_id"] == entries[-1]["id"]
    fork_context = provider.build_context("fork1")
    assert fork_context["messages"] == source_context_at_c["messages"]
    # later writes only in the fork; the source is unchanged
    source_before = provider.list_entries("src")
    provider.append_message("fork1", user("only in fork"))
    assert provider.list_entries("src") == source_before
    empty = provider.create_branched_session("src", None)
    assert provider.list_entries(empty["session_id"]) == []
    assert empty["parent_session_id"] == "src"


def test_snapshot(provider):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    b = provider.append_message("s1", assistant("b"))
    provider.switch_leaf("s1", a["id"])
    c = provider.append_message("s1", assistant("c"))
    snapshot = provider.get_snapshot("s1")
    assert snapshot["session"]["leaf_entry_id"] == c["id"]
    assert snapshot["entries"] == [a, b, c]
    assert snapshot["active_path"] == [a["id"], c["id"]]
    assert snapshot["root_entry_ids"] == [a["id"]]
    assert snapshot["children_by_parent_id"] == {a["id"]: [b["id"], c["id"]]}
    assert snapshot["runtime_context"] == provider.build_context("s1")


def test_update_and_delete(provider):
    provider.create_session(session_id="s1", title="t")
    u = provider.append_message("s1", user("x"))
    updated = provider.update_session("s1", title="New", metadata={"k": "v"}, status="archived")
    assert (updated["title"], updated["metadata"], updated["status"]) == ("New", {"k": "v"}, "archived")
    with pytest.raises(InvalidEntry):
        provider.update_session("s1", leaf_entry_id="x")
    with pytest.raises(InvalidEntry):
        provider.update_session("s1", status="gone")
    provider.delete_session("s1")
    assert provider.get_session("s1")["status"] == "deleted"
    with pytest.raises(SessionClosed):
        provider.append_message("s1", user("y"))
    with pytest.raises(SessionClosed):
        provider.switch_leaf("s1", u["id"])
    with pytest.raises(SessionClosed):
        provider.reset_leaf("s1")
    assert provider.list_entries("s1") == [u]  # soft delete keeps everything
    provider.update_session("s1", status="active")
    provider.append_message("s1", user("y"))
    provider.delete_session("s1", hard=True)
    assert provider.get_session("s1") is None
    with pytest.raises(SessionNotFound):
        provider.delete_session("s1")


def read_all(provider, session_id):
    with provider.read(session_id) as view:
        return view.all_entries()


# Every method of the Protocol with the arguments to call it on a session
# ``sid`` whose entry ``eid`` exists. test_every_protocol_method_is_covered keeps
# this list complete: a method added to the Protocol must be added here.
METHOD_CALLS = {
    "create_session": None,  # creates; covered by the id and uniqueness cases
    "get_session": None,  # returns None for an unknown session (test_unknown_and_malicious_sessions)
    "update_session": lambda p, sid, eid: p.update_session(sid, title="t"),
    "delete_session": lambda p, sid, eid: p.delete_session(sid),
    "list_entries": lambda p, sid, eid: p.list_entries(sid),
    "get_entry": lambda p, sid, eid: p.get_entry(sid, eid),
    "append_entry": lambda p, sid, eid: p.append_entry(sid, {"type": "message", "message": user("x")}),
    "append_message": lambda p, sid, eid: p.append_message(sid, user("x")),
    "append_thinking_level_change": lambda p, sid, eid: p.append_thinking_level_change(sid, "high"),
    "append_model_change": lambda p, sid, eid: p.append_model_change(sid, "p", "m"),
    "append_compaction": lambda p, sid, eid: p.append_compaction(
        sid, summary="s", first_kept_entry_id=eid, tokens_before=1
    ),
    "append_branch_summary": lambda p, sid, eid: p.append_branch_summary(sid, branch_from_entry_id=eid, summary="s"),
    "append_custom_entry": lambda p, sid, eid: p.append_custom_entry(sid, "c"),
    "append_custom_message": lambda p, sid, eid: p.append_custom_message(sid, "c", "x"),
    "append_label_change": lambda p, sid, eid: p.append_label_change(sid, eid, "l"),
    "append_session_info": lambda p, sid, eid: p.append_session_info(sid, "n"),
    "append_context_edit": lambda p, sid, eid: p.append_context_edit(sid, eid, None),
    "append_usage": lambda p, sid, eid: p.append_usage(sid, "cache_warm", "p", "m", {"input": 1}),
    "begin_in_flight_entry": lambda p, sid, eid: p.begin_in_flight_entry(sid, {"type": "message", "message": user("")}),
    "update_in_flight_entry": lambda p, sid, eid: p.update_in_flight_entry(sid, eid, {}),
    "abort_in_flight_entry": lambda p, sid, eid: p.abort_in_flight_entry(sid, eid),
    "switch_leaf": lambda p, sid, eid: p.switch_leaf(sid, eid),
    "reset_leaf": lambda p, sid, eid: p.reset_leaf(sid),
    "create_branched_session": lambda p, sid, eid: p.create_branched_session(sid, eid),
    "get_active_path": lambda p, sid, eid: p.get_active_path(sid),
    "get_snapshot": lambda p, sid, eid: p.get_snapshot(sid),
    "build_context": lambda p, sid, eid: p.build_context(sid),
    "get_header": lambda p, sid, eid: p.get_header(sid),
    "read": lambda p, sid, eid: read_all(p, sid),
    "transact": lambda p, sid, eid: p.transact(sid, lambda writer: writer.switch_leaf(eid)),
    # creates; its source is the session dict the caller read (covered by the fork cases)
    "create_fork": None,
    "scan": lambda p, sid, eid: p.scan(sid),
    "cut_torn_tail": lambda p, sid, eid: p.cut_torn_tail(sid),
    "recount": lambda p, sid, eid: p.recount(sid),
    "recompute_meta": lambda p, sid, eid: p.recompute_meta(sid),
    "reindex_search": lambda p, sid, eid: p.reindex_search(sid),
    "erase_entries": lambda p, sid, eid: p.erase_entries(sid, EraseIds(eid)),
}
SESSION_METHODS = sorted(name for name, call in METHOD_CALLS.items() if call is not None)


def test_every_protocol_method_is_covered():
    protocol_methods = {
        name
        for protocol in (SessionTreeProvider, OneStepWriter)
        for name in vars(protocol)
        if not name.startswith("_") and callable(vars(protocol)[name])
    }
    assert protocol_methods == set(METHOD_CALLS)


def test_the_one_step_writes_are_not_the_production_contract(provider):
    """The unaudited one-step writes are every provider's (tests and tools
    use them) but not ``SessionTreeProvider``'s, which production code types against."""
    assert isinstance(provider, OneStepWriter)
    production = {name for name in vars(SessionTreeProvider) if not name.startswith("_")}
    assert not production & set(ONE_STEP_WRITES)
    assert {name for name in vars(OneStepWriter) if not name.startswith("_")} == set(ONE_STEP_WRITES)


@pytest.mark.parametrize("method", SESSION_METHODS)
def test_every_method_refuses_an_unknown_session(provider, method):
    provider.create_session(session_id="s1")
    entry = provider.append_message("s1", user("x"))
    with pytest.raises(SessionNotFound, match="nope"):
        METHOD_CALLS[method](provider, "nope", entry["id"])
    assert provider.list_entries("s1") == [entry]


@pytest.mark.parametrize("method", SESSION_METHODS)
def test_every_method_refuses_a_traversing_session_id(provider, method):
    provider.create_session(session_id="s1")
    entry = provider.append_message("s1", user("x"))
    with pytest.raises(InvalidSessionId):
        METHOD_CALLS[method](provider, "../../etc/passwd", entry["id"])
    assert provider.list_entries("s1") == [entry]


@pytest.mark.parametrize("bad", [["a"], {"id": "x"}, 5], ids=["list", "dict", "int"])
def test_non_string_entry_ids_name_no_entry(provider, bad):
    provider.create_session(session_id="s1")
    entry = provider.append_message("s1", user("x"))
    for call in [
        lambda: provider.switch_leaf("s1", bad),
        lambda: provider.get_entry("s1", bad),
        lambda: provider.update_in_flight_entry("s1", bad, {}),
        lambda: provider.get_active_path("s1", bad),
        lambda: provider.build_context("s1", bad),
        lambda: provider.create_branched_session("s1", bad),
        lambda: provider.append_label_change("s1", bad, "l"),
    ]:
        with pytest.raises((EntryNotFound, InvalidEntry)):
            call()
    assert provider.list_entries("s1") == [entry]
    assert provider.get_session("s1")["leaf_entry_id"] == entry["id"]


def stored(entry_id, parent_id):
    return {"type": "message", "id": entry_id, "parentId": parent_id, "timestamp": "t", "message": user(entry_id)}


@pytest.mark.parametrize(
    ("entries", "error", "names"),
    [
        ([stored("dup00001", None), stored("dup00001", None)], "InvalidTree", "dup00001"),
        ([stored("a0000001", "b0000001"), stored("b0000001", "a0000001")], "InvalidTree", "Cycle"),
        ([stored("r0000001", None), stored("s0000001", "s0000001")], "InvalidTree", "s0000001"),
        ([{**stored("x", None), "id": 5}], "InvalidEntry", "5"),
        ([{**stored("x", None), "id": ""}], "InvalidEntry", "''"),
        (["not an entry"], "InvalidEntry", "str"),
    ],
    ids=["duplicate-id", "cycle", "self-parent", "int-id", "empty-id", "not-a-dict"],
)
def test_copied_entries_that_are_no_tree_create_nothing(provider, entries, error, names):
    # Entries given to be stored are the caller's input: InvalidTree is an
    # InvalidEntry (bad input), never CorruptSessionTree (stored-data damage).
    with pytest.raises(InvalidEntry, match=names) as caught:
        provider.create_session(session_id="copy", entries=entries)
    assert type(caught.value).__name__ == error
    assert provider.get_session("copy") is None
    provider.create_session(session_id="copy")  # nothing half-made is in the way
    assert provider.list_entries("copy") == []


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ([stored("dup00001", None), stored("dup00001", None)], "InvalidTree"),
        ([stored("a0000001", "b0000001"), stored("b0000001", "a0000001")], "InvalidTree"),
        ([{**stored("x", None), "id": 5}], "InvalidEntry"),
        ([{**stored("a0000001", None), "odd": {1, 2}}], "InvalidEntry"),
        ([{**stored("a0000001", None), "odd": "lone \ud800 surrogate"}], "InvalidEntry"),
    ],
    ids=["duplicate-id", "cycle", "int-id", "set", "surrogate"],
)
def test_copies_prepared_ahead_are_refused_as_create_session_refuses_them(provider, entries, error):
    with pytest.raises(InvalidEntry) as ahead:
        provider.prepare_copies(entries)
    with pytest.raises(InvalidEntry) as direct:
        provider.create_session(session_id="copy", entries=entries)
    assert type(ahead.value).__name__ == type(direct.value).__name__ == error
    assert str(ahead.value) == str(direct.value)
    assert provider.get_session("copy") is None


def test_copies_prepared_ahead_are_stored_as_given_ones(provider):
    entries = [
        stored("a0000001", None),
        {**stored("b0000001", "a0000001"), "odd": "quote ' back\\slash NUL\x00 é 😀", "n": float("nan")},
        stored("c0000001", "a0000001"),
        {
            "type": "compaction",
            "id": "d0000001",
            "parentId": "c0000001",
            "timestamp": "t",
            "summary": "s",
            "firstKeptEntryId": "c0000001",
            "tokensBefore": 10,
        },
    ]
    provider.create_session(session_id="given", entries=[dict(e) for e in entries])
    provider.create_session(session_id="ahead", entries=provider.prepare_copies([dict(e) for e in entries]))
    assert provider.list_entries("ahead") == provider.list_entries("given")
    assert provider.get_active_path("ahead") == provider.get_active_path("given")
    given, ahead = provider.get_session("given"), provider.get_session("ahead")
    for key in ("entry_count", "branch_count", "leaf_entry_id", "root_entry_id"):
        assert ahead[key] == given[key]


def test_copied_orphans_are_kept_and_act_as_roots(provider):
    # e.g. a fork whose first entry hung from an entry of another session
    entries = [stored("a0000001", "other001"), stored("b0000001", "a0000001")]
    provider.create_session(session_id="copy", entries=entries)
    assert provider.list_entries("copy") == entries
    assert ids(provider.get_active_path("copy")) == ["a0000001", "b0000001"]


@pytest.mark.parametrize(
    "value", [{1, 2}, 2**70, "lone \ud800 surrogate", {1: "int key"}], ids=["set", "bigint", "surrogate", "int-key"]
)
def test_values_json_cannot_hold_are_refused_and_nothing_is_stored(provider, value):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("q"))
    with pytest.raises(InvalidEntry, match="'data'"):
        provider.append_custom_entry("s1", "c", {"v": value})
    with pytest.raises(InvalidEntry):
        provider.begin_in_flight_entry("s1", {"type": "message", "message": {"role": "assistant", "content": value}})
    streaming = provider.begin_in_flight_entry("s1", {"type": "message", "message": assistant("")})
    with pytest.raises(InvalidEntry):
        provider.update_in_flight_entry("s1", streaming["id"], {"message": assistant("x"), "odd": value})
    with pytest.raises(InvalidEntry):
        provider.update_in_flight_entry("s1", streaming["id"], {"odd": value}, complete=True)
    assert provider.list_entries("s1") == [u, streaming]
    done = provider.update_in_flight_entry("s1", streaming["id"], {}, complete=True)
    assert provider.list_entries("s1") == [u, done]
    with pytest.raises(InvalidEntry):
        provider.create_session(session_id="copy", entries=[{**stored("a0000001", None), "odd": value}])
    assert provider.get_session("copy") is None
    provider.create_session(session_id="copy")  # no half-written file or row in the way


def test_nan_is_stored_as_null_as_pis_json_does(provider):
    provider.create_session(session_id="s1")
    entry = provider.append_custom_entry("s1", "c", {"v": float("nan"), "w": float("inf")})
    assert provider.list_entries("s1") == [entry]  # the append returns what is stored
    assert entry["data"] == {"v": None, "w": None}
    streaming = provider.begin_in_flight_entry("s1", {"type": "message", "message": assistant(""), "x": float("nan")})
    assert streaming["x"] is None
    done = provider.update_in_flight_entry("s1", streaming["id"], {"y": float("-inf")}, complete=True)
    assert provider.list_entries("s1") == [entry, done] and done["y"] is None


@pytest.mark.parametrize(
    "bad",
    [{"summary": 5}, {"summary": "s", "details": {1, 2}}, {"summary": "s", "details": 2**70}],
    ids=["summary-not-text", "details-set", "details-bigint"],
)
def test_a_refused_branch_summary_leaves_the_leaf_where_it_was(provider, bad):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    b = provider.append_message("s1", user("b"))
    with pytest.raises(InvalidEntry):
        provider.append_branch_summary("s1", branch_from_entry_id=a["id"], **bad)
    assert provider.get_session("s1")["leaf_entry_id"] == b["id"]
    assert provider.list_entries("s1") == [a, b]


@pytest.mark.parametrize(
    "fields",
    [
        {"title": "t" * 256},
        {"title": 5},
        {"user_id": "u" * 192},
        {"agent_id": 987654},
        {"agent_id": "1"},
        {"metadata": {"k": {1, 2}}},
        {"metadata": {"k": float("nan")}},
    ],
    ids=["title-long", "title-int", "user-long", "agent-unknown", "agent-str", "metadata-set", "metadata-nan"],
)
def test_meta_values_the_columns_cannot_hold_are_refused_alike_on_every_database(provider, fields):
    provider.create_session(session_id="s1", title="kept")
    before = provider.get_session("s1")
    with pytest.raises(InvalidEntry, match=next(iter(fields)).split("_")[0]):
        provider.update_session("s1", **fields)
    assert provider.get_session("s1") == before
    with pytest.raises(InvalidEntry):
        provider.create_session(session_id="s2", **fields)
    assert provider.get_session("s2") is None


@pytest.mark.parametrize("bad_id", ["abc-", "abc_", "abc.", "-abc", "a", "x\n", "a b", "a/b"])
def test_new_session_ids_follow_pis_rule(provider, bad_id):
    """Pi 1.6.0: letters, digits, '-', '_' and '.', starting and ending with a
    letter or digit; whole-string matches only (a trailing newline is no id)."""
    if bad_id == "a":  # one character is an id
        assert provider.create_session(session_id=bad_id)["session_id"] == "a"
        return
    provider.create_session(session_id="source")
    with pytest.raises(InvalidSessionId):
        provider.create_session(session_id=bad_id)
    with pytest.raises(InvalidSessionId):
        provider.create_branched_session("source", None, new_session_id=bad_id)
    assert provider.get_session("abc") is None


def test_ids_pi_accepts_are_accepted(provider):
    for good_id in ["a.b", "a..b", "A_1-b.c", "0" * 64]:
        assert provider.create_session(session_id=good_id)["session_id"] == good_id
        assert provider.get_session(good_id)["session_id"] == good_id
