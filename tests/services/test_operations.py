"""The operations layer: every state change is audited with who and from where,
an audit record exists if and only if the change happened, and every append
and leaf move accepts an expected leaf."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sessiontree import services
from sessiontree.core.errors import EntryNotFound, InvalidEntry, LeafConflict, SessionClosed
from sessiontree.models import AuditRecord
from sessiontree.services import entries, sessions, tree
from tests.contract.conftest import PROVIDER_KINDS, make_provider

WHO = {"actor": "alice", "channel": "api"}


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


@pytest.fixture
def sid(provider):
    sessions.create_session(provider=provider, session_id="s1", title="t", **WHO)
    AuditRecord.objects.all().delete()
    return "s1"


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def records(**filters):
    return list(AuditRecord.objects.filter(**filters).order_by("id"))


def only_record(operation):
    found = records(operation=operation)
    assert len(found) == 1, [r.operation for r in records()]
    return found[0]


# --- who and where -----------------------------------------------------------------------


def test_a_record_names_the_actor_the_channel_the_entries_and_the_leaf_move(provider, sid):
    a = entries.append_message(session_id=sid, message=user("a"), provider=provider, **WHO)
    b = entries.append_message(session_id=sid, message=user("b"), provider=provider, actor="bob", channel="cli")
    record = records(actor="bob")[0]
    assert (record.channel, record.operation, record.session_id) == ("cli", "append_entry", sid)
    assert (record.entry_ids, record.leaf_before, record.leaf_after) == ([b["id"]], a["id"], b["id"])
    assert record.detail == {"type": "message", "role": "user"}
    assert record.user is None


def test_the_record_row_reads_back_as_the_orm_would_have_stored_it(db):
    """``audit.record`` writes one plain INSERT; the row reads back with every
    field typed as ``AuditRecord.objects.create`` would have stored it."""
    from django.utils import timezone

    from sessiontree.services.audit import MAX_DETAIL_TEXT, Actor, record

    account = get_user_model().objects.create_user("dora")
    before = timezone.now()
    record(
        actor=Actor.of(account),
        channel="admin",
        operation="set_label",
        session_id="s9",
        entry_ids=["e1", "e2"],
        leaf_before=None,
        leaf_after="e2",
        detail={"label": "ü✓ «x»", "long": "y" * 500, "nested": {"n": [1, 2.5, None, True]}},
    )
    row = AuditRecord.objects.get(session_id="s9")
    assert (row.actor, row.user, row.channel, row.operation) == ("dora", account, "admin", "set_label")
    assert (row.entry_ids, row.leaf_before, row.leaf_after) == (["e1", "e2"], None, "e2")
    assert row.detail["label"] == "ü✓ «x»" and row.detail["nested"] == {"n": [1, 2.5, None, True]}
    assert len(row.detail["long"]) == MAX_DETAIL_TEXT
    assert timezone.is_aware(row.created_at) and before <= row.created_at <= timezone.now()
    # Stored as JSON the database understands, not as a quoted string.
    assert AuditRecord.objects.filter(entry_ids__1="e2", detail__nested__n__1=2.5).count() == 1


def test_a_user_actor_is_linked_to_the_account(provider, sid):
    account = get_user_model().objects.create_user("carol")
    entries.append_message(session_id=sid, message=user("a"), provider=provider, actor=account, channel="admin")
    record = only_record("append_entry")
    assert (record.actor, record.user, record.channel) == ("carol", account, "admin")


def test_system_actors_and_bad_channels(provider, sid):
    with pytest.raises(TypeError, match="needs an actor"):  # no default actor: a write says who makes it
        entries.append_message(session_id=sid, message=user("a"), provider=provider, actor=None, channel="internal")
    assert provider.list_entries(sid) == []
    entries.append_message(
        session_id=sid, message=user("a"), provider=provider, actor=services.SYSTEM_ACTOR, channel="internal"
    )
    assert only_record("append_entry").actor == "system"
    assert services.cli_actor().name.startswith("cli:")
    assert services.SYNC_ACTOR.name == "sync"
    with pytest.raises(ValueError, match="Unknown channel"):
        entries.append_message(session_id=sid, message=user("b"), provider=provider, actor="x", channel="email")
    with pytest.raises(ValueError, match="empty"):
        entries.append_message(session_id=sid, message=user("b"), provider=provider, actor=" ", channel="api")
    assert len(provider.list_entries(sid)) == 1  # refused before anything was written


def test_the_provider_is_found_from_the_session_when_not_given(provider, sid):
    entry = entries.append_message(session_id=sid, message=user("a"), **WHO)
    assert provider.get_entry(sid, entry["id"]) == entry


# --- a record if and only if the change happened ----------------------------------------


def test_refused_operations_write_no_record(provider, sid):
    a = entries.append_message(session_id=sid, message=user("a"), provider=provider, **WHO)
    AuditRecord.objects.all().delete()
    refused = [
        (InvalidEntry, lambda: entries.append_entry(session_id=sid, entry={"type": "nope"}, provider=provider, **WHO)),
        (EntryNotFound, lambda: tree.switch_leaf(session_id=sid, entry_id="missing", provider=provider, **WHO)),
        (
            EntryNotFound,
            lambda: tree.set_label(session_id=sid, target_id="missing", label="x", provider=provider, **WHO),
        ),
        (InvalidEntry, lambda: tree.set_label(session_id=sid, target_id=a["id"], label=5, provider=provider, **WHO)),
        (
            LeafConflict,
            lambda: entries.append_message(
                session_id=sid, message=user("b"), provider=provider, expected_leaf_id="other", **WHO
            ),
        ),
        (
            InvalidEntry,
            lambda: entries.append_entries(
                session_id=sid,
                entries=[{"type": "message", "message": user("ok")}, {"type": "nope"}],
                provider=provider,
                **WHO,
            ),
        ),
        (InvalidEntry, lambda: sessions.update_session(session_id=sid, provider=provider, status="x", **WHO)),
    ]
    for error, call in refused:
        with pytest.raises(error):
            call()
    assert provider.list_entries(sid) == [a]  # the valid first of the two entries was not stored either
    assert records() == []


def test_no_op_changes_write_no_record(provider, sid):
    a = entries.append_message(session_id=sid, message=user("a"), provider=provider, **WHO)
    AuditRecord.objects.all().delete()
    sessions.update_session(session_id=sid, provider=provider, title="t", **WHO)  # unchanged
    sessions.restore_session(session_id=sid, provider=provider, **WHO)  # already active
    tree.navigate_tree(provider=provider, session_id=sid, target_id=a["id"], **WHO)  # already the leaf
    assert records() == []


def test_several_entries_are_one_unit_and_one_record(provider, sid):
    written = entries.append_entries(
        session_id=sid,
        entries=[{"type": "message", "message": user("q")}, {"type": "message", "message": user("a")}],
        provider=provider,
        **WHO,
    )
    assert written[1]["parentId"] == written[0]["id"]
    record = only_record("append_entries")
    assert record.entry_ids == [e["id"] for e in written]
    assert record.detail == {"count": 2, "types": ["message"]}


# --- each operation ---------------------------------------------------------------------


def test_session_lifecycle_is_audited(provider):
    created = sessions.create_session(provider=provider, session_id="life", title="Life", **WHO)
    assert created["status"] == "active"
    assert only_record("create_session").detail["provider"] == provider.kind
    sessions.update_session(session_id="life", provider=provider, title="Renamed", metadata={"k": 1}, **WHO)
    assert only_record("update_session").detail == {"fields": ["metadata", "title"], "title": "Renamed"}
    assert sessions.archive_session(session_id="life", provider=provider, **WHO)["status"] == "archived"
    with pytest.raises(SessionClosed, match="archived"):
        entries.append_message(session_id="life", message=user("x"), provider=provider, **WHO)
    assert sessions.restore_session(session_id="life", provider=provider, **WHO)["status"] == "active"
    assert sessions.delete_session(session_id="life", provider=provider, **WHO)["status"] == "deleted"
    with pytest.raises(SessionClosed, match="deleted; it cannot be archived"):
        sessions.archive_session(session_id="life", provider=provider, **WHO)
    sessions.restore_session(session_id="life", provider=provider, **WHO)
    entries.append_message(session_id="life", message=user("x"), provider=provider, **WHO)
    assert sessions.delete_session(session_id="life", provider=provider, hard=True, **WHO) is None
    assert provider.get_session("life") is None
    assert [r.operation for r in records(session_id="life")] == [
        "create_session",
        "update_session",
        "archive_session",
        "restore_session",
        "delete_session",
        "restore_session",
        "append_entry",
        "hard_delete_session",
    ]
    assert only_record("hard_delete_session").detail["entries"] == 1


def test_in_flight_entries_are_audited_from_begin_to_complete(provider, sid):
    streaming = entries.begin_in_flight(
        session_id=sid, entry={"type": "message", "message": {"role": "assistant", "content": []}},
        provider=provider, **WHO,
    )  # fmt: skip
    entries.update_in_flight(
        session_id=sid, entry_id=streaming["id"], patch={"message": {"role": "assistant", "content": "Hel"}},
        provider=provider, **WHO,
    )  # fmt: skip
    done = entries.complete_in_flight(
        session_id=sid, entry_id=streaming["id"], patch={"message": {"role": "assistant", "content": "Hello"}},
        provider=provider, **WHO,
    )  # fmt: skip
    assert done["message"]["content"] == "Hello"
    assert [r.operation for r in records()] == ["begin_in_flight", "update_in_flight", "complete_in_flight"]
    assert only_record("complete_in_flight").entry_ids == [streaming["id"]]


def test_leaf_moves_and_labels_are_audited(provider, sid):
    a = entries.append_message(session_id=sid, message=user("a"), provider=provider, **WHO)
    b = entries.append_message(session_id=sid, message=user("b"), provider=provider, **WHO)
    assert tree.switch_leaf(session_id=sid, entry_id=a["id"], provider=provider, **WHO)["leaf_entry_id"] == a["id"]
    assert tree.reset_leaf(session_id=sid, provider=provider, **WHO)["leaf_entry_id"] is None
    label = tree.set_label(session_id=sid, target_id=b["id"], label="keep", provider=provider, **WHO)
    cleared = tree.clear_label(session_id=sid, target_id=b["id"], provider=provider, **WHO)
    assert "label" not in cleared
    switch, reset = only_record("switch_leaf"), only_record("reset_leaf")
    assert (switch.leaf_before, switch.leaf_after) == (b["id"], a["id"])
    assert (reset.leaf_before, reset.leaf_after) == (a["id"], None)
    assert only_record("set_label").entry_ids == [label["id"]]
    assert only_record("clear_label").detail == {"target_id": b["id"], "label": None}


def test_navigate_fork_and_compact_are_audited(provider, sid):
    from sessiontree.core.compaction import CompactionSettings
    from tests.roleplay.story import FakeSummarizer

    first = entries.append_message(session_id=sid, message=user("first " + "w " * 300), provider=provider, **WHO)
    for i in range(4):
        entries.append_message(session_id=sid, message=user(f"m{i} " + "w " * 300), provider=provider, **WHO)
    old_leaf = provider.get_session(sid)["leaf_entry_id"]
    result = tree.navigate_tree(
        provider=provider,
        session_id=sid,
        target_id=first["id"],
        summarize=True,
        summarizer=FakeSummarizer("gone"),
        label="back",
        **WHO,
    )
    record = only_record("navigate_tree")
    assert record.entry_ids == [result["summary_entry"]["id"], result["label_entry"]["id"]]
    assert (record.leaf_before, record.leaf_after) == (old_leaf, result["leaf_entry_id"])
    assert result["summary_entry"]["fromId"] == old_leaf  # Pi: the leaf being left

    fork = tree.fork_session(
        provider=provider, session_id=sid, entry_id=first["id"], position="at", new_session_id="f1", **WHO
    )
    assert only_record("fork_session").detail == {"new_session_id": "f1", "position": "at"}
    assert records(session_id="f1", operation="create_session")[0].detail["forked_from"] == sid
    assert fork["parent_session_id"] == sid

    tree.switch_leaf(session_id=sid, entry_id=old_leaf, provider=provider, **WHO)
    compaction = tree.compact_session(
        provider=provider,
        session_id=sid,
        summarizer=FakeSummarizer("short"),
        settings=CompactionSettings(keep_recent_tokens=50),
        **WHO,
    )
    assert compaction is not None
    assert only_record("compact_session").entry_ids == [compaction["id"]]


# --- expected leaf everywhere -------------------------------------------------------------


def test_every_append_and_leaf_move_accepts_an_expected_leaf(provider, sid):
    a = entries.append_message(session_id=sid, message=user("a"), provider=provider, **WHO)
    stale = {"expected_leaf_id": "not-the-leaf", "provider": provider, **WHO}
    calls = [
        lambda: entries.append_entry(session_id=sid, entry={"type": "message", "message": user("x")}, **stale),
        lambda: entries.append_message(session_id=sid, message=user("x"), **stale),
        lambda: entries.append_entries(session_id=sid, entries=[{"type": "message", "message": user("x")}], **stale),
        lambda: entries.begin_in_flight(session_id=sid, entry={"type": "message", "message": user("x")}, **stale),
        lambda: tree.switch_leaf(session_id=sid, entry_id=a["id"], **stale),
        lambda: tree.reset_leaf(session_id=sid, **stale),
        lambda: tree.set_label(session_id=sid, target_id=a["id"], label="l", **stale),
        lambda: tree.navigate_tree(
            provider=provider, session_id=sid, target_id=a["id"], expected_leaf_id="not-the-leaf", **WHO
        ),
    ]
    for call in calls:
        with pytest.raises(LeafConflict, match="not-the-leaf"):
            call()
    assert provider.list_entries(sid) == [a] and records(operation="append_entry")[0].entry_ids == [a["id"]]
    assert len(records()) == 1
    ok = entries.append_message(session_id=sid, message=user("b"), expected_leaf_id=a["id"], provider=provider, **WHO)
    assert ok["parentId"] == a["id"]
    root = entries.append_message(session_id=sid, message=user("r"), provider=provider, **WHO)
    tree.reset_leaf(session_id=sid, expected_leaf_id=root["id"], provider=provider, **WHO)
    entries.append_message(session_id=sid, message=user("new root"), expected_leaf_id=None, provider=provider, **WHO)


# --- which provider a new session gets ----------------------------------------------------


def test_a_new_session_gets_its_provider_as_everywhere(db, settings):
    """Explicit choice, else the agent's session_provider, else
    SESSIONTREE_DEFAULT_PROVIDER, else file."""
    from sessiontree.models import Agent

    def kind_of(**kwargs):
        return sessions.create_session(**WHO, **kwargs)["provider"]

    plain = Agent.objects.create(name="no choice")
    on_file = Agent.objects.create(name="files", session_provider="file")
    on_mysql = Agent.objects.create(name="tables", session_provider="mysql")
    assert kind_of() == "file"
    assert kind_of(agent=plain) == "file"
    settings.SESSIONTREE_DEFAULT_PROVIDER = "mysql"
    assert kind_of() == "mysql"
    assert kind_of(agent=plain) == "mysql"
    assert kind_of(agent=on_file) == "file"
    assert kind_of(agent=on_file.pk) == "file"
    assert kind_of(agent=on_mysql, kind="file") == "file"
    settings.SESSIONTREE_DEFAULT_PROVIDER = "file"
    assert kind_of(agent=on_mysql) == "mysql"
    assert kind_of(kind="mysql") == "mysql"
