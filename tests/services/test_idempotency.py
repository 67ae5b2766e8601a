"""Idempotency keys on every provider: a retried write happens once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from roleplay import service as roleplay_service
from sessiontree.core.errors import BadInput, LeafConflict
from sessiontree.models import AgentSession, AuditRecord, IdempotencyRecord
from sessiontree.services import entries, idempotency, moderation, sessions, tree
from sessiontree.services.entries import EntryIdTaken

WHO = {"actor": "agent-7", "channel": "internal"}


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


@pytest.fixture
def sid(provider):
    return provider.create_session(session_id="s1")["session_id"]


def test_an_append_retried_with_its_key_is_stored_once(provider, sid):
    first = entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-1", **WHO)
    assert not idempotency.replayed()
    again = entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-1", **WHO)
    assert idempotency.replayed() and again == first
    assert [e["id"] for e in provider.list_entries(sid)] == [first["id"]]
    assert AuditRecord.objects.filter(operation="append_entry").count() == 1
    record = IdempotencyRecord.objects.get()
    assert (record.key, record.scope, record.session_id) == ("k-1", "actor:agent-7", sid)


def test_the_key_is_taken_in_the_writes_own_transaction(provider, sid, monkeypatch):
    """The answer is stored with the write: a crash before the wrapper's own
    bookkeeping (simulated by losing the stored answer) still never writes twice."""
    entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-2", **WHO)
    assert IdempotencyRecord.objects.get(key="k-2").result["value"]["message"]["content"] == "a"
    IdempotencyRecord.objects.filter(key="k-2").update(result=None)  # the answer lost after the commit
    with pytest.raises(idempotency.IdempotentAnswerLost):
        entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-2", **WHO)
    assert len(provider.list_entries(sid)) == 1


def test_a_key_reused_for_another_request_is_refused(provider, sid):
    entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-3", **WHO)
    with pytest.raises(idempotency.IdempotencyKeyReused):
        entries.append_message(session_id=sid, message=user("b"), provider=provider, idempotency_key="k-3", **WHO)
    # Another caller has keys of their own.
    entries.append_message(
        session_id=sid, message=user("b"), provider=provider, idempotency_key="k-3", actor="other", channel="internal"
    )
    assert len(provider.list_entries(sid)) == 2
    with pytest.raises(BadInput):
        entries.append_message(session_id=sid, message=user("c"), provider=provider, idempotency_key="no spaces", **WHO)


def test_a_refused_write_takes_no_key_and_its_retry_runs(provider, sid):
    with pytest.raises(LeafConflict):
        entries.append_message(
            session_id=sid, message=user("a"), provider=provider, expected_leaf_id="stale", idempotency_key="k-4", **WHO
        )
    assert not IdempotencyRecord.objects.exists()
    entry = entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-4", **WHO)
    assert provider.list_entries(sid) == [entry]


def test_an_expired_key_is_free_again(provider, sid, settings):
    entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-5", **WHO)
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=25))
    entries.append_message(session_id=sid, message=user("a"), provider=provider, idempotency_key="k-5", **WHO)
    assert len(provider.list_entries(sid)) == 2
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency.purge_expired() == 1 and not IdempotencyRecord.objects.exists()


def test_retention_purges_expired_keys_and_keeps_fresh_ones(provider, sid):
    from sessiontree.services import protection

    for key in ("old-1", "old-2", "fresh"):
        entries.append_message(session_id=sid, message=user(key), provider=provider, idempotency_key=key, **WHO)
    IdempotencyRecord.objects.exclude(key="fresh").update(created_at=timezone.now() - timedelta(hours=25))
    dry = protection.apply_retention(actor="cron", channel="cli", dry_run=True)
    assert dry["idempotency_keys_purged"] == 0 and IdempotencyRecord.objects.count() == 3
    report = protection.apply_retention(actor="cron", channel="cli", batch_size=1)
    assert report["idempotency_keys_purged"] == 2
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]
    assert "2 expired idempotency key(s) purged" in protection.summary_line(report)


def test_a_retried_create_without_an_id_gives_the_same_session(provider):
    first = sessions.create_session(provider=provider, title="t", idempotency_key="create-1", **WHO)
    again = sessions.create_session(provider=provider, title="t", idempotency_key="create-1", **WHO)
    assert again["session_id"] == first["session_id"]
    assert AgentSession.objects.filter(title="t").count() == 1


def test_moves_forks_flags_and_roleplay_writes_are_keyed_too(provider, sid):
    a = entries.append_message(session_id=sid, message=user("a"), provider=provider, **WHO)
    b = entries.append_message(session_id=sid, message=user("b"), provider=provider, **WHO)
    moved = tree.switch_leaf(session_id=sid, entry_id=a["id"], provider=provider, idempotency_key="m", **WHO)
    entries.append_message(session_id=sid, message=user("c"), provider=provider, **WHO)
    assert tree.switch_leaf(session_id=sid, entry_id=a["id"], provider=provider, idempotency_key="m", **WHO) == moved
    assert provider.get_session(sid)["leaf_entry_id"] != a["id"]  # the replay moved nothing
    fork = tree.fork_session(
        session_id=sid, entry_id=b["id"], position="at", provider=provider, idempotency_key="f", **WHO
    )
    assert (
        tree.fork_session(
            session_id=sid, entry_id=b["id"], position="at", provider=provider, idempotency_key="f", **WHO
        )
        == fork
    )
    assert AgentSession.objects.filter(parent_session_id=sid).count() == 1
    flag = moderation.flag_entry(session_id=sid, entry_id=a["id"], category="spam", idempotency_key="fl", **WHO)
    assert moderation.flag_entry(session_id=sid, entry_id=a["id"], category="spam", idempotency_key="fl", **WHO) == flag


def test_an_identical_append_with_its_own_id_is_a_success_not_a_duplicate(provider, sid):
    entry = {"type": "message", "id": "client-1", "message": user("hello")}
    first = entries.append_entry(session_id=sid, entry=entry, provider=provider, expected_leaf_id=None, **WHO)
    entries.append_message(session_id=sid, message=user("later"), provider=provider, **WHO)
    # The retry carries the expected leaf of its first attempt: answered from what is stored.
    again = entries.append_entry(session_id=sid, entry=entry, provider=provider, expected_leaf_id=None, **WHO)
    assert again == first and len(provider.list_entries(sid)) == 2
    assert AuditRecord.objects.filter(operation="append_entry").count() == 2
    with pytest.raises(EntryIdTaken):
        entries.append_entry(
            session_id=sid,
            entry={"type": "message", "id": "client-1", "message": user("other")},
            provider=provider,
            **WHO,
        )
    batch = [
        {"type": "message", "id": "b-1", "message": user("x")},
        {"type": "message", "id": "b-2", "message": user("y")},
    ]
    stored = entries.append_entries(session_id=sid, entries=batch, provider=provider, **WHO)
    assert entries.append_entries(session_id=sid, entries=batch, provider=provider, **WHO) == stored
    assert len(provider.list_entries(sid)) == 4


def test_a_roleplay_write_retried_with_its_key_happens_once(provider):
    from tests.roleplay.story import Story

    story = Story(provider)
    story.haircut_story()
    payload = {"op": "add", "path": "/mood", "value": "calm", "reason": "seen in the scene"}
    first = roleplay_service.correct_state(**story.at, payload=payload, idempotency_key="rp-1")
    count = len(story.entries())
    again = roleplay_service.correct_state(**story.at, payload=payload, idempotency_key="rp-1")
    assert again == first and len(story.entries()) == count


def test_a_roleplay_move_is_replayed_with_its_state(provider):
    from tests.roleplay.story import Story

    story = Story(provider)
    story.haircut_story()
    first_entry = story.entries()[0]["id"]
    leaf = story.leaf
    moved = roleplay_service.history_goto(**story.at, entry_id=first_entry, idempotency_key="go-1")
    story.user("after the move")
    again = roleplay_service.history_goto(**story.at, entry_id=first_entry, idempotency_key="go-1")
    assert idempotency.replayed() and again == moved and "state" in again
    assert story.leaf not in (first_entry, leaf)  # the replay moved nothing


def test_a_keyed_operation_that_answers_no_json_is_refused_before_it_commits():
    with pytest.raises(TypeError, match="must be JSON"):
        idempotency._to_json(object())
