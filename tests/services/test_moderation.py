"""Moderation services on every provider: flags beside the tree, hide and unhide."""

from __future__ import annotations

import pytest

from sessiontree.core.errors import BadInput, EntryNotFound, LeafConflict, SessionNotFound
from sessiontree.models import AuditRecord, ModerationFlag
from sessiontree.services import entries, moderation, tree

WHO = {"actor": "mod", "channel": "internal"}


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text):
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": "m"}


@pytest.fixture
def chat(provider):
    provider.create_session(session_id="s1")
    u = entries.append_message(
        session_id="s1", message=user("my card is 4111 1111 1111 1111"), provider=provider, **WHO
    )
    a = entries.append_message(session_id="s1", message=assistant("noted"), provider=provider, **WHO)
    return provider, u, a


def contents(provider, leaf=None):
    context = provider.build_context("s1") if leaf is None else provider.build_context("s1", leaf)
    return [m.get("content") for m in context["messages"]]


def test_a_flag_moves_no_leaf_changes_no_context_and_blocks_no_append(chat):
    provider, u, a = chat
    before = (provider.get_session("s1")["leaf_entry_id"], provider.build_context("s1"), provider.list_entries("s1"))
    flag = moderation.flag_entry(session_id="s1", entry_id=u["id"], category="pii", note="a card", **WHO)
    after = (provider.get_session("s1")["leaf_entry_id"], provider.build_context("s1"), provider.list_entries("s1"))
    assert after == before
    # A live agent that saw the leaf before the flag appends as if nothing happened.
    entries.append_message(session_id="s1", message=user("next"), provider=provider, expected_leaf_id=a["id"], **WHO)
    assert flag["status"] == "open" and flag["source"] == "operator" and flag["opened_by"] == "mod"
    assert (flag["session_id"], flag["entry_id"], flag["category"], flag["note"]) == ("s1", u["id"], "pii", "a card")
    record = AuditRecord.objects.get(operation="flag_entry")
    assert record.entry_ids == [u["id"]] and record.detail["flag_id"] == flag["id"]
    assert moderation.open_flags_of("s1") == {u["id"]: [flag]}


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"category": "rude"}, BadInput),
        ({"source": "robot"}, BadInput),
        ({"note": "x" * 2001}, BadInput),
        ({"entry_id": "missing"}, EntryNotFound),
        ({"session_id": "nope"}, SessionNotFound),
    ],
)
def test_bad_flags_are_refused_and_leave_nothing(chat, kwargs, error):
    _provider, u, _a = chat
    call = {"session_id": "s1", "entry_id": u["id"], "category": "pii", **WHO, **kwargs}
    with pytest.raises(error):
        moderation.flag_entry(**call)
    assert not ModerationFlag.objects.exists() and not AuditRecord.objects.filter(operation="flag_entry").exists()


def test_a_flag_is_resolved_once(chat):
    _provider, u, _a = chat
    flag = moderation.flag_entry(session_id="s1", entry_id=u["id"], category="spam", source="user_report", **WHO)
    with pytest.raises(BadInput):
        moderation.resolve_flag(flag_id=flag["id"], status="open", **WHO)
    done = moderation.resolve_flag(
        flag_id=flag["id"], status="dismissed", note="not spam", actor="lead", channel="admin"
    )
    assert (done["status"], done["resolved_by"]) == ("dismissed", "lead") and done["resolved_at"]
    with pytest.raises(moderation.FlagAlreadyResolved):
        moderation.resolve_flag(flag_id=flag["id"], status="actioned", **WHO)
    with pytest.raises(moderation.FlagNotFound):
        moderation.resolve_flag(flag_id=flag["id"] + 100, status="actioned", **WHO)
    assert AuditRecord.objects.filter(operation="resolve_flag").count() == 1
    assert moderation.open_flags_of("s1") == {}


def test_hide_sends_a_notice_instead_of_the_message_and_unhide_restores_it(chat):
    provider, u, _a = chat
    original = contents(provider)
    edit = moderation.hide_entry(session_id="s1", entry_id=u["id"], **WHO)
    assert (edit["type"], edit["targetId"], edit["replacement"]) == (
        "context_edit",
        u["id"],
        {"content": "[removed by a moderator]"},
    )
    assert contents(provider) == ["[removed by a moderator]", original[1]]
    assert provider.get_entry("s1", u["id"])["message"]["content"] == original[0]  # the entry itself is untouched
    assert moderation.hidden_on_path(provider.get_active_path("s1"), u["id"])
    restore = moderation.unhide_entry(session_id="s1", entry_id=u["id"], **WHO)
    assert restore["replacement"] == {"content": original[0]}
    assert contents(provider) == original
    with pytest.raises(moderation.NotHidden):
        moderation.unhide_entry(session_id="s1", entry_id=u["id"], **WHO)
    ops = list(
        AuditRecord.objects.filter(operation__in=["hide_entry", "unhide_entry"]).values_list("operation", flat=True)
    )
    assert sorted(ops) == ["hide_entry", "unhide_entry"]


def test_hide_applies_to_the_active_branch_only(chat):
    provider, u, a = chat
    tree.switch_leaf(session_id="s1", entry_id=u["id"], provider=provider, **WHO)
    other = entries.append_message(session_id="s1", message=assistant("other branch"), provider=provider, **WHO)
    moderation.hide_entry(session_id="s1", entry_id=u["id"], notice="hidden here", **WHO)
    assert contents(provider)[0] == "hidden here"
    assert contents(provider, a["id"])[0] == "my card is 4111 1111 1111 1111"  # the first branch still shows it
    assert other["id"] in [e["id"] for e in provider.get_active_path("s1")]


def test_hide_and_unhide_check_the_leaf_and_the_target(chat):
    provider, u, a = chat
    with pytest.raises(LeafConflict):
        moderation.hide_entry(session_id="s1", entry_id=u["id"], expected_leaf_id="stale", **WHO)
    with pytest.raises(EntryNotFound):
        moderation.hide_entry(session_id="s1", entry_id="missing", **WHO)
    with pytest.raises(EntryNotFound):
        moderation.unhide_entry(session_id="s1", entry_id="missing", **WHO)
    assert [e["id"] for e in provider.list_entries("s1")] == [u["id"], a["id"]]


def test_only_messages_the_model_sees_can_be_hidden(chat):
    provider, u, _a = chat
    label = tree.set_label(session_id="s1", target_id=u["id"], label="x", provider=provider, **WHO)
    with pytest.raises(moderation.NotAMessage):
        moderation.hide_entry(session_id="s1", entry_id=label["id"], **WHO)
    with pytest.raises(moderation.NotAMessage):
        moderation.unhide_entry(session_id="s1", entry_id=label["id"], **WHO)
    assert provider.list_entries("s1")[-1]["id"] == label["id"]  # nothing appended
