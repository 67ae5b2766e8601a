"""Legal holds and retention on every provider."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessiontree.core.errors import BadInput, SessionNotFound, SessionOnHold, StorageUnavailable
from sessiontree.models import Agent, AgentSession, AuditRecord
from sessiontree.services import entries, moderation, protection, sessions, tree

WHO = {"actor": "dpo", "channel": "internal"}


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def make(provider, session_id, *, agent=None, days_idle=0, text="hello"):
    provider.create_session(session_id=session_id, agent_id=agent.pk if agent else None)
    entry = entries.append_message(session_id=session_id, message=user(text), provider=provider, **WHO)
    if days_idle:
        AgentSession.objects.filter(session_id=session_id).update(updated_at=timezone.now() - timedelta(days=days_idle))
    return entry


def exists(provider, session_id) -> bool:
    return provider.get_session(session_id) is not None


# --- legal hold --------------------------------------------------------------------------------------


def test_a_hold_blocks_a_hard_delete_and_nothing_else(provider):
    make(provider, "s1")
    held = protection.place_hold(session_id="s1", reason="litigation 2026-17", **WHO)
    assert held["legal_hold"]["reason"] == "litigation 2026-17" and held["legal_hold"]["placed_by"] == "dpo"
    with pytest.raises(SessionOnHold, match="litigation 2026-17"):
        sessions.delete_session(session_id="s1", hard=True, provider=provider, **WHO)
    assert exists(provider, "s1") and len(provider.list_entries("s1")) == 1
    entries.append_message(session_id="s1", message=user("still writable"), provider=provider, **WHO)
    tree.reset_leaf(session_id="s1", provider=provider, **WHO)
    sessions.delete_session(session_id="s1", provider=provider, **WHO)  # a soft delete is not a deletion
    sessions.restore_session(session_id="s1", provider=provider, **WHO)
    protection.release_hold(session_id="s1", **WHO)
    sessions.delete_session(session_id="s1", hard=True, provider=provider, **WHO)
    assert not AgentSession.objects.filter(session_id="s1").exists()
    ops = list(AuditRecord.objects.filter(session_id="s1").values_list("operation", flat=True))
    assert "place_hold" in ops and "release_hold" in ops and "hard_delete_session" in ops


def test_hold_refusals(provider):
    make(provider, "s1")
    with pytest.raises(BadInput):
        protection.place_hold(session_id="s1", reason="  ", **WHO)
    protection.place_hold(session_id="s1", reason="r", **WHO)
    with pytest.raises(protection.HoldExists):
        protection.place_hold(session_id="s1", reason="again", **WHO)
    protection.release_hold(session_id="s1", **WHO)
    with pytest.raises(protection.NotOnHold):
        protection.release_hold(session_id="s1", **WHO)
    with pytest.raises(SessionNotFound):
        protection.place_hold(session_id="nope", reason="r", **WHO)


# --- retention ------------------------------------------------------------------------------------------


def test_retention_deletes_what_is_idle_longer_than_its_period(provider, settings):
    settings.SESSIONTREE_RETENTION_DAYS = 30
    short = Agent.objects.create(name="short", retention_days=7)
    make(provider, "old-default", days_idle=40)
    make(provider, "young-default", days_idle=10)
    make(provider, "old-short", agent=short, days_idle=8)
    make(provider, "fresh-short", agent=short, days_idle=1)
    planned = protection.apply_retention(dry_run=True, **WHO)
    assert sorted(planned["deleted"]) == ["old-default", "old-short"]
    assert all(exists(provider, sid) for sid in ("old-default", "old-short"))  # a dry run deletes nothing
    done = protection.apply_retention(**WHO)
    assert sorted(done["deleted"]) == sorted(planned["deleted"])
    assert not exists(provider, "old-default") and not exists(provider, "old-short")
    assert exists(provider, "young-default") and exists(provider, "fresh-short")
    assert protection.apply_retention(**WHO)["deleted"] == []  # idempotent
    record = AuditRecord.objects.filter(operation="hard_delete_session", session_id="old-short").get()
    assert record.detail["reason"] == "retention"


def test_no_period_keeps_everything(provider, settings):
    settings.SESSIONTREE_RETENTION_DAYS = None
    make(provider, "ancient", days_idle=4000)
    assert protection.apply_retention(**WHO)["considered"] == 0 and exists(provider, "ancient")


def test_retention_skips_holds_open_flags_and_parents_of_young_forks(provider, settings):
    settings.SESSIONTREE_RETENTION_DAYS = 30
    make(provider, "held", days_idle=60)
    protection.place_hold(session_id="held", reason="court order", **WHO)
    AgentSession.objects.filter(session_id="held").update(updated_at=timezone.now() - timedelta(days=60))
    flagged = make(provider, "flagged", days_idle=60)
    moderation.flag_entry(session_id="flagged", entry_id=flagged["id"], category="pii", **WHO)
    AgentSession.objects.filter(session_id="flagged").update(updated_at=timezone.now() - timedelta(days=60))
    parent_entry = make(provider, "parent", days_idle=60)
    tree.fork_session(
        session_id="parent",
        entry_id=parent_entry["id"],
        position="at",
        new_session_id="child",
        provider=provider,
        **WHO,
    )
    AgentSession.objects.filter(session_id="parent").update(updated_at=timezone.now() - timedelta(days=60))
    report = protection.apply_retention(**WHO)
    assert report["deleted"] == []
    assert report["skipped"] == {
        "legal_hold": ["held"],
        "open_flags": ["flagged"],
        "fork_inside_its_period": ["parent"],
    }
    assert all(exists(provider, sid) for sid in ("held", "flagged", "parent", "child"))
    # Once the fork is idle too, both go; the fork's copy was its own.
    AgentSession.objects.filter(session_id="child").update(updated_at=timezone.now() - timedelta(days=60))
    assert sorted(protection.apply_retention(**WHO)["deleted"]) == ["child", "parent"]


def test_a_crash_midway_leaves_every_session_whole_or_gone_and_a_rerun_completes(provider, settings, monkeypatch):
    settings.SESSIONTREE_RETENTION_DAYS = 30
    for n in range(5):
        make(provider, f"old-{n}", days_idle=40 + n)
    real = sessions.delete_session
    calls = []

    def crash_on_third(**kwargs):
        calls.append(kwargs["session_id"])
        if len(calls) == 3:
            raise KeyboardInterrupt("the process is killed")
        return real(**kwargs)

    monkeypatch.setattr(sessions, "delete_session", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        protection.apply_retention(**WHO)
    monkeypatch.setattr(sessions, "delete_session", real)
    for n in range(5):
        sid = f"old-{n}"
        if exists(provider, sid):
            assert len(provider.list_entries(sid)) == 1  # whole
        else:
            assert (
                AuditRecord.objects.filter(session_id=sid, operation="hard_delete_session").count() == 1
            )  # gone, audited
    report = protection.apply_retention(**WHO)
    assert len(report["deleted"]) == 3 and not any(exists(provider, f"old-{n}") for n in range(5))


def test_a_fault_inside_a_sessions_deletion_leaves_it_whole_and_a_rerun_completes(provider, settings, monkeypatch):
    """The fault is raised inside the hard delete's unit (its row deleted and
    its file moved aside, before the commit), after two sessions went."""
    settings.SESSIONTREE_RETENTION_DAYS = 30
    for n in range(5):
        make(provider, f"old-{n}", days_idle=40 + n, text=f"words {n}")
    real = sessions.check_not_held
    calls = []

    def fault_on_third(session_ids, *, what):
        real(session_ids, what=what)
        calls.append(next(iter(session_ids)))
        if len(calls) == 3:
            raise StorageUnavailable("the database went away mid-deletion")

    monkeypatch.setattr(sessions, "check_not_held", fault_on_third)
    report = protection.apply_retention(**WHO)
    assert len(report["deleted"]) == 4 and [f["session_id"] for f in report["failed"]] == [calls[2]]
    monkeypatch.setattr(sessions, "check_not_held", real)
    broken = calls[2]
    assert exists(provider, broken) and provider.list_entries(broken)[0]["message"]["content"].startswith("words")
    if provider.kind == "file":
        path = provider.path_for(broken)
        assert path.is_file() and not path.with_name(path.name + ".deleting").exists()
    assert not AuditRecord.objects.filter(session_id=broken, operation="hard_delete_session").exists()

    def killed_on_first(session_ids, *, what):
        real(session_ids, what=what)
        raise KeyboardInterrupt("the process is killed mid-deletion")

    monkeypatch.setattr(sessions, "check_not_held", killed_on_first)
    with pytest.raises(KeyboardInterrupt):
        protection.apply_retention(**WHO)
    monkeypatch.setattr(sessions, "check_not_held", real)
    assert exists(provider, broken) and len(provider.list_entries(broken)) == 1
    assert protection.apply_retention(**WHO)["deleted"] == [broken]
    assert not any(exists(provider, f"old-{n}") for n in range(5))
