"""A person's data erased (``protection.erase_user_data``) on every provider."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from sessiontree.core.errors import SessionOnHold
from sessiontree.core.redaction import ERASED
from sessiontree.models import AgentSession, AuditRecord, ModerationFlag, SearchEntry
from sessiontree.services import entries, moderation, protection, tree, user_erasure

WHO = {"actor": "dpo", "channel": "internal"}
SECRET = "alice-secret-7Q"


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text):
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "x",
        "provider": "x",
        "model": "x",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
        "stopReason": "stop",
        "timestamp": 2,
    }


def session_of(provider, session_id, owner, *texts):
    provider.create_session(session_id=session_id, user_id=owner, title=f"{texts[0][:20]}")
    made = []
    for n, text in enumerate(texts):
        message = user(text) if n % 2 == 0 else assistant(text)
        made.append(
            entries.append_message(
                session_id=session_id, message=message, provider=provider, actor=owner, channel="api"
            )
        )
    return made


def texts_of(provider, session_id):
    return str(provider.list_entries(session_id))


def exists(session_id):
    return AgentSession.objects.filter(session_id=session_id).exists()


@pytest.fixture
def world(provider):
    """alice: a1 (forked by bob into b-fork), a2; bob: b1, forked by alice into a-fork."""
    User.objects.create_user("alice")
    User.objects.create_user("bob")
    a1 = session_of(provider, "a1", "alice", f"{SECRET} one", "answer one", f"{SECRET} two", "answer two")
    session_of(provider, "a2", "alice", f"{SECRET} three", "answer three")
    b1 = session_of(provider, "b1", "bob", "bob's own question", "bob's own answer")
    tree.fork_session(
        session_id="a1", entry_id=a1[1]["id"], position="at", new_session_id="b-fork", provider=provider,
        actor="bob", channel="api",
    )  # fmt: skip
    AgentSession.objects.filter(session_id="b-fork").update(user_id="bob")
    entries.append_message(
        session_id="b-fork", message=user("bob continues"), provider=provider, actor="bob", channel="api"
    )
    tree.fork_session(
        session_id="b1", entry_id=b1[1]["id"], position="at", new_session_id="a-fork", provider=provider,
        actor="alice", channel="api",
    )  # fmt: skip
    AgentSession.objects.filter(session_id="a-fork").update(user_id="alice")
    entries.append_message(
        session_id="a-fork", message=user(f"{SECRET} four"), provider=provider, actor="alice", channel="api"
    )
    moderation.flag_entry(
        session_id="b1", entry_id=b1[0]["id"], category="other", note=f"alice says {SECRET}", actor="alice",
        channel="api", source="user_report",
    )  # fmt: skip
    return {"a1": a1, "b1": b1}


def test_a_dry_run_lists_exactly_what_the_erasure_does_and_changes_nothing(provider, world):
    dry = protection.erase_user_data(user_id="alice", dry_run=True, **WHO)
    assert {s["session_id"] for s in dry["sessions"]} == {"a1", "a2", "a-fork"}
    assert all(exists(sid) for sid in ("a1", "a2", "a-fork"))
    assert SECRET in texts_of(provider, "b-fork")
    copied = {(place["session_id"], place["entry_id"]) for place in dry["copies"]}
    # The fork's copies of alice's two first entries; never bob's own entries in a-fork's source.
    assert copied == {("b-fork", world["a1"][0]["id"]), ("b-fork", world["a1"][1]["id"])}
    if provider.kind == "file":
        assert len(dry["files"]["deleted"]) == 3 and dry["files"]["rewritten"]
    assert dry["rows"]["search_entries"] and dry["rows"]["audit_records"] and dry["rows"]["flags"]
    done = protection.erase_user_data(user_id="alice", **WHO)
    assert done == {**dry, "dry_run": False}


def test_the_erasure_deletes_their_sessions_and_erases_their_copies_only(provider, world):
    protection.erase_user_data(user_id="alice", **WHO)
    assert not any(exists(sid) for sid in ("a1", "a2", "a-fork"))
    assert not SearchEntry.objects.filter(session_id__in=["a1", "a2", "a-fork"]).exists()
    fork = provider.list_entries("b-fork")
    assert SECRET not in str(fork) and "answer one" not in str(fork)
    assert fork[-1]["message"]["content"] == "bob continues"  # bob's own entry stays
    assert "bob's own question" in texts_of(provider, "b1")  # alice's fork copied it: bob's, kept
    flag = ModerationFlag.objects.get(session_id="b1")
    assert flag.note == ERASED
    for record in AuditRecord.objects.all():
        assert SECRET not in str(record.detail), record.operation
    summary = AuditRecord.objects.get(operation="erase_user_data")
    assert summary.detail["user_id"] == "alice" and summary.detail["counts"]["sessions"] == 3
    deleted = AuditRecord.objects.filter(operation="hard_delete_session", session_id="a1").get()
    assert deleted.detail["reason"] == "erase_user_data" and deleted.detail["title"] == ERASED
    assert protection.erase_user_data(user_id="alice", **WHO)["sessions"] == []  # again: nothing left


def test_a_hold_on_their_session_or_on_a_copy_refuses_it_and_changes_nothing(provider, world):
    protection.place_hold(session_id="a2", reason="case 12", **WHO)
    with pytest.raises(SessionOnHold, match="case 12"):
        protection.erase_user_data(user_id="alice", **WHO)
    with pytest.raises(SessionOnHold):
        protection.erase_user_data(user_id="alice", dry_run=True, **WHO)
    protection.release_hold(session_id="a2", **WHO)
    protection.place_hold(session_id="b-fork", reason="bob's case", **WHO)
    with pytest.raises(SessionOnHold, match="bob's case"):
        protection.erase_user_data(user_id="alice", **WHO)
    assert all(exists(sid) for sid in ("a1", "a2", "a-fork"))
    assert SECRET in texts_of(provider, "b-fork") and SECRET in texts_of(provider, "a1")


def test_an_unknown_user_is_not_found(provider, db):
    with pytest.raises(protection.UserNotFound):
        protection.erase_user_data(user_id="nobody", **WHO)


def test_a_crash_inside_a_session_leaves_it_whole_and_a_rerun_completes(provider, world, monkeypatch):
    real = user_erasure._scrub_session_rows
    calls = []

    def crash_on_second(session_id, pk):
        calls.append(session_id)
        real(session_id, pk)
        if len(calls) == 2:
            raise KeyboardInterrupt("the process is killed inside the unit")

    monkeypatch.setattr(user_erasure, "_scrub_session_rows", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        protection.erase_user_data(user_id="alice", **WHO)
    monkeypatch.setattr(user_erasure, "_scrub_session_rows", real)
    first, second = calls
    assert not exists(first)
    assert exists(second) and len(provider.list_entries(second)) == 2  # whole: rolled back
    assert not AuditRecord.objects.filter(session_id=second, operation="hard_delete_session").exists()
    if provider.kind == "file":
        assert provider.path_for(second).is_file()
    report = protection.erase_user_data(user_id="alice", **WHO)
    assert [s["session_id"] for s in report["sessions"]] == [sid for sid in ("a1", "a2", "a-fork") if sid != first]
    assert not any(exists(sid) for sid in ("a1", "a2", "a-fork"))


def test_a_hard_delete_takes_the_backups_the_file_storage_wrote(provider, db):
    if provider.kind != "file":
        pytest.skip("backups are the file storage's")
    session_of(provider, "s1", "carol", f"{SECRET} in a backup")
    path = provider.path_for("s1")
    backup = path.with_name(path.name + ".torn-20260101T000000.bak")
    backup.write_bytes(path.read_bytes())
    assert provider.stored_files("s1") == [str(path), str(backup)]
    protection.erase_user_data(user_id="carol", **WHO)
    assert not path.exists() and not backup.exists()


def test_a_crash_after_the_copies_were_erased_and_before_the_delete_is_finished_by_a_rerun(
    provider, world, monkeypatch
):
    """Killed between a session's copies erased (in bob's fork) and its hard delete."""
    real = user_erasure.sessions.delete_session

    def killed(**kwargs):
        raise KeyboardInterrupt("killed before the delete")

    monkeypatch.setattr(user_erasure.sessions, "delete_session", killed)
    with pytest.raises(KeyboardInterrupt):
        protection.erase_user_data(user_id="alice", **WHO)
    monkeypatch.setattr(user_erasure.sessions, "delete_session", real)
    assert SECRET not in texts_of(provider, "b-fork")  # a1's copies went first
    assert exists("a1") and len(provider.list_entries("a1")) == 4  # whole (its own copies erased in place)
    report = protection.erase_user_data(user_id="alice", **WHO)
    assert {s["session_id"] for s in report["sessions"]} == {"a1", "a2", "a-fork"}
    assert report["copies"] == []  # erased already
    assert not any(exists(sid) for sid in ("a1", "a2", "a-fork"))
    assert AuditRecord.objects.filter(operation="erase_user_data").count() == 1
