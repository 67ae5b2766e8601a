"""The MySQL/MariaDB backend's transactions (``providers/backends/mysql``):
an ``atomic`` block begins with ``START TRANSACTION`` and leaves the session
in autocommit (one round trip instead of ``SET autocommit`` off and on), and
everything Django promises of its transactions still holds.

Counted on the server (``SHOW SESSION STATUS``), not in Django's query log:
``SET autocommit`` is sent by the driver, outside the log. Skipped on SQLite;
the MySQL leg (``REQUIRE_MYSQL=1``) must run them.
"""

from __future__ import annotations

from collections.abc import Iterator

import MySQLdb
import pytest
from django.db import DatabaseError, connection, transaction

# Skipped with its reason where the database is not MySQL/MariaDB (tests/conftest.py);
# with REQUIRE_MYSQL=1 the run stops at once if it is not.
pytestmark = pytest.mark.mysql

TABLE = "sessiontree_txn_probe"


@pytest.fixture
def table(transactional_db) -> Iterator[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {TABLE} (n INT NOT NULL) ENGINE=InnoDB")
    try:
        yield TABLE
    finally:
        connection.close()  # whatever a test left open
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {TABLE}")


def seen_from_another_connection() -> list[int]:
    """What another session reads: only committed rows."""
    other = MySQLdb.connect(**connection.get_connection_params(), autocommit=True)
    try:
        cursor = other.cursor()
        cursor.execute(f"SELECT n FROM {TABLE} ORDER BY n")
        return [row[0] for row in cursor.fetchall()]
    finally:
        other.close()


def server_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Com_begin', 'Com_commit', 'Com_set_option')")
        return {name: int(value) for name, value in cursor.fetchall()}


def insert(n: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} (n) VALUES (%s)", [n])


def test_an_atomic_block_costs_one_round_trip_to_begin_and_none_after_its_commit(table):
    connection.ensure_connection()
    before = server_counts()
    with transaction.atomic():
        insert(1)
        assert seen_from_another_connection() == []  # in a transaction: not committed yet
    after = server_counts()
    sent = {name: after[name] - before[name] for name in before}
    # START TRANSACTION and COMMIT; no SET autocommit=0 before, no SET autocommit=1 after.
    assert sent == {"Com_begin": 1, "Com_commit": 1, "Com_set_option": 0}
    assert connection.connection.get_autocommit() is True
    assert seen_from_another_connection() == [1]
    insert(2)  # outside any block: committed at once, as in autocommit
    assert seen_from_another_connection() == [1, 2]


def test_a_failed_atomic_block_leaves_nothing_and_the_session_in_autocommit(table):
    with pytest.raises(RuntimeError), transaction.atomic():
        insert(1)
        with transaction.atomic():  # a savepoint inside the transaction
            insert(2)
        raise RuntimeError("rolled back")
    assert seen_from_another_connection() == []
    assert connection.connection.get_autocommit() is True
    with transaction.atomic():
        insert(3)
        try:
            with transaction.atomic():
                insert(4)
                raise RuntimeError("only the savepoint")
        except RuntimeError:
            pass
    assert seen_from_another_connection() == [3]


def test_autocommit_turned_off_by_hand_keeps_a_transaction_open_after_each_commit(table):
    transaction.set_autocommit(False)
    try:
        insert(1)
        transaction.commit()
        insert(2)  # a new transaction, begun by the server itself
        transaction.rollback()
    finally:
        transaction.set_autocommit(True)
    assert seen_from_another_connection() == [1]
    assert connection.connection.get_autocommit() is True


def test_a_connection_lost_in_a_transaction_is_replaced_by_one_in_autocommit(table):
    with pytest.raises(DatabaseError), transaction.atomic():
        insert(1)
        killer = MySQLdb.connect(**connection.get_connection_params(), autocommit=True)
        try:
            killer.cursor().execute(f"KILL {connection.connection.thread_id()}")
        finally:
            killer.close()
        insert(2)
    # Django dropped the lost connection; the next statement opens a new one,
    # which must be in autocommit (the server's default for it is not).
    insert(3)
    assert connection.connection.get_autocommit() is True
    assert seen_from_another_connection() == [3]


def test_a_connection_closed_in_a_transaction_is_replaced_by_one_in_autocommit(table):
    with transaction.atomic():
        insert(1)
        connection.close()  # Django drops it when the block ends; the server rolls back
    insert(2)
    assert connection.connection.get_autocommit() is True
    assert seen_from_another_connection() == [2]
