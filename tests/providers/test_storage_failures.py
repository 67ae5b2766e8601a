"""Every storage failure typed, retried where a retry is safe (issue 24 #2/#3).

- A deadlock, a lock-wait timeout or a Galera certification failure (MySQL
  1213/1205) is retried; when the retries are used up it is a typed
  ``StorageConflict`` (409 with ``Retry-After``, exit 4), never a bare
  ``OperationalError``.
- A connection lost (2002/2006/2013) or a node not ready (1047) before the
  COMMIT: the transaction runs again on a new connection, within
  ``SESSIONTREE_DB_RETRY_SECONDS``; then ``StorageUnavailable`` (503, exit 6).
- A connection lost *during* COMMIT: the write may have happened.
  ``CommitOutcomeUnknown`` (503) without an idempotency key; with one, the
  operation asks the key again and answers the first result: nothing is
  stored twice.

The failures are injected at the statement or at the COMMIT, through the
backend's own error wrapper, so they arrive exactly as the server's would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import InterfaceError, OperationalError, connection, connections

from sessiontree.core.errors import (
    CONFLICT,
    UNAVAILABLE,
    CommitOutcomeUnknown,
    SessionTreeError,
    StorageConflict,
    StorageUnavailable,
)
from sessiontree.management.base import command_error
from sessiontree.models import AuditRecord, IdempotencyRecord
from sessiontree.providers import db_errors
from sessiontree.services import entries, idempotency
from tests.contract.conftest import PROVIDER_KINDS, make_provider

WHO = {"actor": "agent-7", "channel": "internal"}
AUDIT_TABLE = AuditRecord._meta.db_table


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, transactional_db, tmp_path, monkeypatch):
    monkeypatch.setattr(db_errors, "CONFLICT_BASE_SECONDS", 0)
    monkeypatch.setattr(db_errors, "RECONNECT_BASE_SECONDS", 0)
    found = make_provider(request.param, tmp_path)
    if request.param == "mysql":
        from sessiontree.providers import mysql_provider

        monkeypatch.setattr(mysql_provider, "RETRY_BASE_SECONDS", 0)
    return found


def server_error(code: int, message: str) -> None:
    """Raise what the driver raises for a server error ``code``, through the backend's wrapper."""
    with connection.wrap_database_errors:
        raise connection.Database.OperationalError(code, message)


@contextmanager
def failing_audit_inserts(code: int, times: int) -> Iterator[list[str]]:
    """The next ``times`` INSERTs of an audit record fail with server error ``code``."""
    failed: list[str] = []

    def wrapper(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("INSERT") and AUDIT_TABLE in sql and len(failed) < times:
            failed.append(sql)
            server_error(code, "injected")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield failed


@contextmanager
def commit_lost_after_commit(times: int = 1) -> Iterator[list[int]]:
    """The next ``times`` COMMITs reach the server and commit, then the
    connection is lost before the answer comes back (MySQL 2013)."""
    lost: list[int] = []
    wrapper_class = type(connections["default"])
    real_commit = wrapper_class._commit

    def commit_then_lose(self):
        real_commit(self)
        if len(lost) < times:
            lost.append(1)
            server_error(2013, "Lost connection to server during query")

    wrapper_class._commit = commit_then_lose
    try:
        yield lost
    finally:
        wrapper_class._commit = real_commit


# --- the mapping -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected", "lost"),
    [
        (OperationalError(1213, "Deadlock found when trying to get lock"), StorageConflict, False),
        (OperationalError(1205, "Lock wait timeout exceeded"), StorageConflict, False),
        (OperationalError("database is locked"), StorageConflict, False),
        (OperationalError(1047, "WSREP has not yet prepared node for application use"), StorageUnavailable, True),
        (OperationalError(2002, "Can't connect to server"), StorageUnavailable, True),
        (OperationalError(2013, "Lost connection to server during query"), StorageUnavailable, True),
        (OperationalError(2006, "Server has gone away"), StorageUnavailable, True),
        (OperationalError(1054, "Unknown column"), StorageUnavailable, False),
        (OperationalError("disk I/O error"), StorageUnavailable, False),
        (InterfaceError(0, ""), StorageUnavailable, True),
    ],
)
def test_every_database_failure_has_a_category(raw, expected, lost):
    found = db_errors.typed(raw, "mysql")
    assert isinstance(found, expected) and isinstance(found, type(raw))  # typed, and still Django's class
    assert db_errors.lost_connection(found) is lost
    assert (
        "Lost connection" not in str(found) and "server" not in str(found).lower()
    )  # the server's words go to the log


def test_the_backend_raises_typed_errors(db):
    with pytest.raises(StorageConflict) as conflict:
        server_error(1213, "Deadlock found")
    assert isinstance(conflict.value, OperationalError) and conflict.value.category == CONFLICT
    with pytest.raises(StorageUnavailable) as unavailable:
        server_error(2013, "Lost connection")
    assert unavailable.value.category == UNAVAILABLE and unavailable.value.http_status == 503


def test_commands_exit_with_the_category_of_a_database_failure():
    assert command_error(OperationalError(1213, "Deadlock found")).returncode == 4
    assert command_error(OperationalError(2013, "Lost connection")).returncode == 6
    assert command_error(db_errors.typed(OperationalError(1047, "not ready"), "mysql")).returncode == 6


# --- conflicts ------------------------------------------------------------------------------


def test_a_conflict_is_retried_and_the_write_happens_once(provider):
    provider.create_session(session_id="s1")
    with failing_audit_inserts(1213, times=3) as failed:
        entry = entries.append_message(session_id="s1", message=user("a"), provider=provider, **WHO)
    assert len(failed) == 3
    assert [e["id"] for e in provider.list_entries("s1")] == [entry["id"]]
    assert AuditRecord.objects.filter(operation="append_entry").count() == 1


def test_exhausted_conflict_retries_are_a_typed_conflict_and_store_nothing(provider):
    provider.create_session(session_id="s1")
    with failing_audit_inserts(1213, times=100) as failed, pytest.raises(StorageConflict) as raised:
        entries.append_message(session_id="s1", message=user("a"), provider=provider, **WHO)
    assert len(failed) == db_errors.CONFLICT_ATTEMPTS
    assert isinstance(raised.value, SessionTreeError) and raised.value.http_status == 409
    assert provider.list_entries("s1") == []
    assert not AuditRecord.objects.filter(operation="append_entry").exists()


def test_a_keyed_write_retried_after_a_conflict_keeps_its_key(provider):
    """The key is taken in the transaction that commits, not in the one the
    deadlock rolled back: a retry of the request with the key replays it."""
    provider.create_session(session_id="s1")
    with failing_audit_inserts(1213, times=2):
        first = entries.append_message(
            session_id="s1", message=user("a"), provider=provider, idempotency_key="after-deadlock", **WHO
        )
    assert IdempotencyRecord.objects.filter(key="after-deadlock").count() == 1
    again = entries.append_message(
        session_id="s1", message=user("a"), provider=provider, idempotency_key="after-deadlock", **WHO
    )
    assert idempotency.replayed() and again == first
    assert len(provider.list_entries("s1")) == 1


def test_a_certification_conflict_at_commit_is_retried_and_keeps_the_key(provider, monkeypatch):
    """Galera refuses a write set that lost certification with 1213 at COMMIT,
    after the whole unit (the key's claim included) ran: the unit runs again
    and the key is taken by the run that commits."""
    provider.create_session(session_id="s1")
    wrapper_class = type(connections["default"])
    real_commit = wrapper_class._commit
    refused: list[int] = []

    def certification_failure(self):
        if len(refused) < 2:
            refused.append(1)
            self._rollback()
            server_error(1213, "Deadlock found when trying to get lock; try restarting transaction")
        real_commit(self)

    monkeypatch.setattr(wrapper_class, "_commit", certification_failure)
    first = entries.append_message(
        session_id="s1", message=user("a"), provider=provider, idempotency_key="certified", **WHO
    )
    monkeypatch.setattr(wrapper_class, "_commit", real_commit)
    assert refused == [1, 1]
    assert IdempotencyRecord.objects.filter(key="certified").count() == 1
    again = entries.append_message(
        session_id="s1", message=user("a"), provider=provider, idempotency_key="certified", **WHO
    )
    assert idempotency.replayed() and again == first
    assert [e["id"] for e in provider.list_entries("s1")] == [first["id"]]


# --- lost connections -------------------------------------------------------------------------


def test_a_connection_lost_before_the_commit_is_retried(provider):
    provider.create_session(session_id="s1")
    with failing_audit_inserts(2013, times=1) as failed:
        entry = entries.append_message(session_id="s1", message=user("a"), provider=provider, **WHO)
    assert len(failed) == 1
    assert [e["id"] for e in provider.list_entries("s1")] == [entry["id"]]


def test_a_node_that_stays_unready_is_unavailable_after_the_retry_budget(provider, settings):
    settings.SESSIONTREE_DB_RETRY_SECONDS = 0.2
    provider.create_session(session_id="s1")
    with failing_audit_inserts(1047, times=10_000) as failed, pytest.raises(StorageUnavailable) as raised:
        entries.append_message(session_id="s1", message=user("a"), provider=provider, **WHO)
    assert len(failed) >= 2 and raised.value.http_status == 503
    assert not isinstance(raised.value, CommitOutcomeUnknown)
    assert provider.list_entries("s1") == []


def test_a_commit_whose_answer_was_lost_is_unknown_without_a_key(provider):
    provider.create_session(session_id="s1")
    if provider.kind == "file":
        # The file storage settles it itself: it holds the session's lock and
        # reads the row again (its entry count says whether the commit happened).
        with commit_lost_after_commit() as lost:
            entry = entries.append_message(session_id="s1", message=user("a"), provider=provider, **WHO)
        assert lost == [1] and [e["id"] for e in provider.list_entries("s1")] == [entry["id"]]
        return
    with commit_lost_after_commit() as lost, pytest.raises(CommitOutcomeUnknown) as raised:
        entries.append_message(session_id="s1", message=user("a"), provider=provider, **WHO)
    assert lost == [1] and raised.value.http_status == 503 and raised.value.code == "commit_outcome_unknown"
    # It did commit: the caller must look before writing again (or use a key).
    assert [e["message"]["content"] for e in provider.list_entries("s1")] == ["a"]


def test_a_file_write_whose_commit_did_not_happen_is_cut_back_and_run_again(provider, monkeypatch):
    if provider.kind != "file":
        pytest.skip("only the file storage writes lines before the commit")
    provider.create_session(session_id="s1")
    wrapper_class = type(connections["default"])
    real_commit = wrapper_class._commit
    lost: list[int] = []

    def lose_before_commit(self):
        if not lost:  # the answer and the commit both lost: the server rolls back
            lost.append(1)
            self._rollback()
            server_error(2013, "Lost connection to server during query")
        real_commit(self)

    monkeypatch.setattr(wrapper_class, "_commit", lose_before_commit)
    entry = entries.append_message(session_id="s1", message=user("a"), provider=provider, **WHO)
    assert lost == [1]
    assert [e["id"] for e in provider.list_entries("s1")] == [entry["id"]]  # once: the first lines were cut
    assert provider.get_session("s1")["entry_count"] == 1
    assert AuditRecord.objects.filter(operation="append_entry").count() == 1


def test_a_keyed_write_whose_commit_answer_was_lost_answers_the_first_result_and_stores_once(provider):
    provider.create_session(session_id="s1")
    with commit_lost_after_commit() as lost:
        first = entries.append_message(
            session_id="s1", message=user("a"), provider=provider, idempotency_key="ambiguous-1", **WHO
        )
    # mysql: answered from the key, not written again; file: settled by the storage itself.
    assert lost == [1] and idempotency.replayed() is (provider.kind == "mysql")
    assert [e["id"] for e in provider.list_entries("s1")] == [first["id"]]
    assert AuditRecord.objects.filter(operation="append_entry").count() == 1
    # The client's own retry with the key gets the same entry.
    again = entries.append_message(
        session_id="s1", message=user("a"), provider=provider, idempotency_key="ambiguous-1", **WHO
    )
    assert again == first and idempotency.replayed() and len(provider.list_entries("s1")) == 1


def test_a_client_chosen_entry_id_retried_after_a_lost_commit_is_a_success(provider):
    """Without a key, an entry whose id the client chose is its own key: the
    same entry again is a success, not a second copy."""
    provider.create_session(session_id="s1")
    chosen = {"type": "message", "id": "c0ffee01", "message": user("a")}
    with commit_lost_after_commit():
        try:
            entries.append_entry(session_id="s1", entry=chosen, provider=provider, **WHO)
        except CommitOutcomeUnknown:
            assert provider.kind == "mysql"
    again = entries.append_entry(session_id="s1", entry=chosen, provider=provider, **WHO)
    assert again["id"] == "c0ffee01"
    assert [e["id"] for e in provider.list_entries("s1")] == ["c0ffee01"]


# --- reads ------------------------------------------------------------------------------------


@pytest.mark.mysql
def test_a_read_whose_connection_was_killed_connects_again(provider):
    """A real lost connection: another connection KILLs ours; the next read
    (autocommit, outside any transaction) is sent again on a new one."""
    import MySQLdb

    provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT CONNECTION_ID()")
        before = cursor.fetchone()[0]
    other = MySQLdb.connect(**connection.get_connection_params())
    try:
        other.cursor().execute(f"KILL CONNECTION {int(before)}")
    finally:
        other.close()
    assert [e["message"]["content"] for e in provider.list_entries("s1")] == ["a"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT CONNECTION_ID()")
        assert cursor.fetchone()[0] != before


def test_a_read_inside_a_transaction_is_not_sent_again(provider):
    from django.db import transaction

    provider.create_session(session_id="s1")
    calls: list[str] = []

    def lose(execute, sql, params, many, context):
        calls.append(sql)
        server_error(2013, "Lost connection")

    with pytest.raises(StorageUnavailable), transaction.atomic(), connection.execute_wrapper(lose):
        provider.get_session("s1")
    assert len(calls) == 1
