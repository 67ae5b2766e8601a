"""Concurrent writers on a real MySQL/MariaDB server.

SQLite serializes every writer with one database lock, so these tests prove
nothing there and are skipped; the MySQL leg (``REQUIRE_MYSQL=1``) must run
them and fails if the database is not MySQL. Each thread uses its own Django
connection and closes it when done.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
from collections.abc import Callable

import pytest
from django.db import connection

from sessiontree.core.errors import LeafConflict
from sessiontree.models import AgentSession, AgentSessionEntry
from sessiontree.providers import mysql_provider
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider

from .lineage import assert_valid_lineage

REQUIRE_MYSQL = os.environ.get("REQUIRE_MYSQL") == "1"
IS_MYSQL = connection.vendor == "mysql"

pytestmark = [
    pytest.mark.mysql,
    pytest.mark.skipif(
        not IS_MYSQL and not REQUIRE_MYSQL,
        reason="concurrent writers need MySQL/MariaDB (SQLite serializes them itself): "
        "set DATABASE_URL=mysql://… or run `make test-mysql`",
    ),
]

THREAD_TIMEOUT_SECONDS = 180


@pytest.fixture
def provider(transactional_db):
    if not IS_MYSQL:
        pytest.fail(f"REQUIRE_MYSQL=1 but the database is {connection.vendor}, not MySQL/MariaDB")
    return MySQLSessionTreeProvider()


def run_threads(count: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(i)`` in ``count`` threads started together; the errors they raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT_SECONDS)
    assert not any(t.is_alive() for t in threads), "a writer hung (deadlock?)"
    return errors


def stored_rows(session_id: str) -> list[tuple[int, str, str | None, int]]:
    return list(
        AgentSessionEntry.objects.filter(session__session_id=session_id)
        .order_by("entry_seq")
        .values_list("entry_seq", "entry_id", "parent_entry_id", "depth")
    )


def test_eight_writers_on_one_session(provider):
    threads, appends = 8, 250
    provider.create_session(session_id="hot")
    written: dict[int, list[str]] = {}

    def work(i: int) -> None:
        written[i] = [
            provider.append_message("hot", {"role": "user", "content": f"t{i}-{n}"})["id"] for n in range(appends)
        ]

    assert run_threads(threads, work) == []
    rows = stored_rows("hot")
    total = threads * appends
    assert [seq for seq, *_ in rows] == list(range(1, total + 1))  # gap-free, no duplicates
    assert len({entry_id for _, entry_id, _, _ in rows}) == total
    # Every append attached to the leaf of the moment: one chain, in entry_seq order.
    assert rows[0][2] is None
    for (_, previous_id, _, previous_depth), (_, _, parent_id, depth) in itertools.pairwise(rows):
        assert parent_id == previous_id and depth == previous_depth + 1
    session = AgentSession.objects.get(session_id="hot")
    assert session.entry_count == total and session.leaf_entry_id == rows[-1][1]
    assert session.root_entry_id == rows[0][1]
    seq_of = {entry_id: seq for seq, entry_id, _, _ in rows}
    for ids in written.values():  # each writer's own appends keep its order
        assert [seq_of[i] for i in ids] == sorted(seq_of[i] for i in ids)
    path = provider.get_active_path("hot")
    assert [e["id"] for e in path] == [entry_id for _, entry_id, _, _ in rows]


def test_expected_leaf_turns_races_into_conflicts_never_into_wrong_parents(provider):
    threads, appends = 4, 40
    provider.create_session(session_id="cas")
    attached: list[tuple[str, str | None]] = []

    def work(i: int) -> None:
        done = 0
        while done < appends:
            leaf = provider.get_session("cas")["leaf_entry_id"]
            try:
                entry = provider.append_message(
                    "cas", {"role": "user", "content": f"{i}-{done}"}, expected_leaf_id=leaf
                )
            except LeafConflict:
                continue
            attached.append((entry["parentId"], leaf))
            done += 1

    assert run_threads(threads, work) == []
    assert all(parent == expected for parent, expected in attached)
    rows = stored_rows("cas")
    assert [seq for seq, *_ in rows] == list(range(1, threads * appends + 1))
    assert len({parent for _, _, parent, _ in rows}) == len(rows)  # a chain: no parent has two children


def test_concurrent_creation_forks_and_appends_keep_the_lineage_valid(provider):
    sources = []
    for s in range(3):
        provider.create_session(session_id=f"src{s}")
        for n in range(5):
            provider.append_message(f"src{s}", {"role": "user", "content": f"{s}-{n}"})
        sources.append(f"src{s}")
    known = list(sources)
    known_lock = threading.Lock()
    forks: list[tuple[str, str, str | None]] = []  # fork, source, fork point

    def creator(i: int) -> None:
        rng = random.Random(i)
        for n in range(12):
            if n % 3 == 0:
                session = provider.create_session(title=f"root {i}-{n}")
            else:
                with known_lock:
                    source = rng.choice(known)
                entries = provider.list_entries(source)
                point = rng.choice(entries)["id"] if entries and n % 4 else None
                session = provider.create_branched_session(source, point)
                forks.append((session["session_id"], source, point))
            with known_lock:
                known.append(session["session_id"])

    def appender(i: int) -> None:
        for n in range(60):
            provider.append_message(sources[i % len(sources)], {"role": "assistant", "content": f"a{i}-{n}"})

    assert run_threads(8, lambda i: creator(i) if i < 6 else appender(i)) == []
    assert AgentSession.objects.count() == 3 + 6 * 12
    assert_valid_lineage()
    for fork_id, source_id, point in forks:
        fork = AgentSession.objects.get(session_id=fork_id)
        assert fork.parent.session_id == source_id and fork.parent_session_id == source_id
        copied = [e["id"] for e in provider.list_entries(fork_id) if e["type"] != "label"]
        path = provider.get_active_path(source_id, point) if point else []
        assert copied == [e["id"] for e in path if e["type"] != "label"]
    appended = {source_id: 5 for source_id in sources}
    for i in (6, 7):
        appended[sources[i % len(sources)]] += 60
    for source_id, count in appended.items():
        assert [seq for seq, *_ in stored_rows(source_id)] == list(range(1, count + 1))


def test_concurrent_forks_and_hard_deletes_in_one_lineage_tree_keep_it_valid(provider):
    """Forks of forks and hard deletes of inner sessions, at once in one tree
    (each write locks the tree by its root row) and in trees of their own."""
    provider.create_session(session_id="top")
    for n in range(3):
        provider.append_message("top", {"role": "user", "content": f"t{n}"})
    alive = ["top"]
    lock = threading.Lock()
    deleted: list[str] = []

    def work(i: int) -> None:
        rng = random.Random(100 + i)
        for n in range(10):
            with lock:
                candidates = [s for s in alive if s != "top"]
                victim = rng.choice(candidates) if i % 3 == 0 and candidates and n % 2 else None
                if victim is not None:
                    alive.remove(victim)
                source = rng.choice(alive)
            if victim is not None:
                provider.delete_session(victim, hard=True)
                deleted.append(victim)
                continue
            if i % 3 == 2 and n % 3 == 0:
                session = provider.create_session(title=f"root {i}-{n}")
            else:
                try:
                    session = provider.create_branched_session(source, None)
                except Exception as exc:  # the source went meanwhile: a typed not-found, never anything else
                    from sessiontree.core.errors import SessionNotFound

                    assert isinstance(exc, SessionNotFound), exc
                    continue
            with lock:
                alive.append(session["session_id"])

    assert run_threads(6, work) == []
    assert deleted and not AgentSession.objects.filter(session_id__in=deleted).exists()
    assert set(AgentSession.objects.values_list("session_id", flat=True)) == set(alive)
    assert_valid_lineage()


def test_a_real_deadlock_is_retried_and_never_reaches_the_caller(provider, monkeypatch):
    """Another transaction (REPEATABLE READ) locks the gap where the next entry
    of the session goes; the append locks the session row and waits at its
    INSERT; the other transaction then asks for the session row. InnoDB breaks
    the cycle by rolling back the lighter transaction (the append: the other
    one has modified rows), and the provider runs the append again."""
    import MySQLdb

    provider.create_session(session_id="dl")
    leaf = provider.append_message("dl", {"role": "user", "content": "leaf"})
    provider.create_session(session_id="weight")
    for n in range(30):
        provider.append_message("weight", {"role": "user", "content": f"w{n}"})
    dl_pk = AgentSession.objects.get(session_id="dl").pk
    retries: list[str] = []
    monkeypatch.setattr(mysql_provider.logger, "info", lambda msg, *args: retries.append(msg % args))
    appended: list[dict] = []

    def append(_: int) -> None:
        appended.append(provider.append_message("dl", {"role": "user", "content": "after the deadlock"}))

    other = MySQLdb.connect(**connection.get_connection_params())
    try:
        cursor = other.cursor()
        cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("SET SESSION innodb_lock_wait_timeout = 30")
        other.autocommit(False)
        cursor.execute("UPDATE neta_agent_session_entry SET depth = depth + 1 WHERE session_id = %s", ["weight"])
        cursor.execute(
            "SELECT id FROM neta_agent_session_entry WHERE session_id = %s AND entry_seq > 1 FOR UPDATE", ["dl"]
        )
        errors: list[BaseException] = []
        writer = threading.Thread(target=lambda: errors.extend(run_threads(1, append)))
        writer.start()
        for _ in range(500):  # until the append waits at its INSERT
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.processlist "
                "WHERE id <> CONNECTION_ID() AND info LIKE 'INSERT INTO `neta_agent_session_entry`%%'"
            )
            if cursor.fetchone()[0]:
                break
            threading.Event().wait(0.01)
        else:
            pytest.fail("the append never reached its INSERT")
        cursor.execute("SELECT id FROM neta_agent_session WHERE id = %s FOR UPDATE", [dl_pk])
        other.rollback()
    finally:
        other.close()
    writer.join(THREAD_TIMEOUT_SECONDS)
    assert errors == []
    assert [r for r in retries if "1213" in r], f"no deadlock happened, the test proved nothing: {retries}"
    assert [e["id"] for e in provider.list_entries("dl")] == [leaf["id"], appended[0]["id"]]
    assert appended[0]["parentId"] == leaf["id"]
    assert [seq for seq, *_ in stored_rows("dl")] == [1, 2]
