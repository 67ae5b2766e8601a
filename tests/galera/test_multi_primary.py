"""Multi-primary scenarios on a 3-node Galera cluster (``make test-galera``).

Writers on different nodes at once, through the operations layer as the API
calls it: one session with and without ``expected_leaf_id``, one session
each, session creations and forks, a node killed and rejoined by IST. After
each: nothing acknowledged is lost, nothing is stored twice, every session is
one valid chain, every node holds identical copies, the lineage is valid,
and every error a writer saw was typed (``SessionTreeError``).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import Counter
from typing import Any

import MySQLdb
import pytest
from django.db import connection

from config.settings import init_command
from sessiontree.core.errors import LeafConflict, StorageConflict, StorageUnavailable
from sessiontree.models import AgentSession, AgentSessionEntry
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider
from sessiontree.services import entries, sessions, tree
from tests.providers.lineage import assert_valid_lineage

from .cluster import GaleraCluster, Node
from .conftest import Outcome, on_node, point_at, run_in_processes, run_on_nodes

pytestmark = [pytest.mark.galera, pytest.mark.django_db(transaction=True)]

WHO = {"actor": "galera-writer", "channel": "api"}
ATTEMPTS = 30  # a writer's own retries of typed refusals (a client's loop), per logical write
RESTART_TIMEOUT = 400  # kill, --wsrep-recover, its ports free, started and synced: each bounded in cluster.py


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


@pytest.fixture
def provider(galera: GaleraCluster, transactional_db) -> MySQLSessionTreeProvider:
    return MySQLSessionTreeProvider()


# --- checks -----------------------------------------------------------------------------


def node_connection(node: Node) -> Any:
    """A plain connection to ``node`` that waits for the node to apply
    everything committed cluster-wide before it reads (``wsrep_sync_wait``)."""
    params = {**connection.get_connection_params(), "port": node.sql_port, "host": "127.0.0.1"}
    raw = MySQLdb.connect(**params)
    raw.cursor().execute("SET SESSION wsrep_sync_wait = 1")
    return raw


def node_rows(node: Node, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    raw = node_connection(node)
    try:
        cursor = raw.cursor()
        cursor.execute(sql, params or [])
        return list(cursor.fetchall())
    finally:
        raw.close()


ENTRY_TABLE = AgentSessionEntry._meta.db_table
SESSION_TABLE = AgentSession._meta.db_table


def copies(node: Node) -> str:
    """A digest of what ``node`` holds: every session row's tree fields and lineage, every entry."""
    session_rows = node_rows(
        node,
        f"SELECT session_id, leaf_entry_id, entry_count, branch_count, tree_id, lft, rght, level, parent_id "
        f"FROM {SESSION_TABLE} ORDER BY session_id",
    )
    entry_rows = node_rows(
        node,
        f"SELECT s.session_id, e.entry_seq, e.entry_id, e.parent_entry_id, e.depth, e.message "
        f"FROM {ENTRY_TABLE} e JOIN {SESSION_TABLE} s ON s.id = e.session_id ORDER BY s.session_id, e.entry_seq",
    )
    return hashlib.sha256(repr((session_rows, entry_rows)).encode()).hexdigest()


def assert_identical_copies(cluster: GaleraCluster) -> None:
    digests = {node.number: copies(node) for node in cluster.nodes}
    assert len(set(digests.values())) == 1, f"the nodes hold different data: {digests}"


def assert_one_chain(provider: MySQLSessionTreeProvider, session_id: str) -> list[dict[str, Any]]:
    """The session's entries form one chain: seqs 1..n, each the child of the one before, the last the leaf."""
    stored = provider.list_entries(session_id)
    rows = list(
        AgentSessionEntry.objects.filter(session__session_id=session_id)
        .order_by("entry_seq")
        .values_list("entry_seq", "entry_id", "parent_entry_id")
    )
    assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1))
    for (_, _, parent), (_, previous, _) in zip(rows[1:], rows[:-1], strict=True):
        assert parent == previous
    if rows:
        assert rows[0][2] is None
        session = provider.get_session(session_id)
        assert session is not None and session["leaf_entry_id"] == rows[-1][1] and session["entry_count"] == len(rows)
    return stored


def assert_nothing_lost_nothing_twice(stored: list[dict[str, Any]], acknowledged: list[dict[str, Any]]) -> None:
    contents = Counter(entry["message"]["content"] for entry in stored)
    assert [text for text, count in contents.items() if count > 1] == [], "stored twice"
    stored_ids = {entry["id"] for entry in stored}
    assert [e["id"] for e in acknowledged if e["id"] not in stored_ids] == [], "acknowledged but lost"


def report(name: str, outcome: Outcome, started: float) -> None:
    print(
        f"\n[galera] {name}: {len(outcome.acknowledged)} acknowledged in {time.monotonic() - started:.1f} s; "
        f"typed refusals {dict(outcome.typed)}; untyped {len(outcome.untyped)}"
    )


def until_acknowledged(outcome: Outcome, write: Any, *, retry_on: tuple[type[BaseException], ...]) -> Any:
    """A client's loop: ``write()`` again after a typed refusal in ``retry_on``; any other error is recorded."""
    for _ in range(ATTEMPTS):
        try:
            result = write()
        except retry_on as exc:
            outcome.refused(exc)
            time.sleep(0.01)
            continue
        except Exception as exc:
            outcome.refused(exc)
            return None
        outcome.ack(result)
        return result
    return None


# --- one session, writers on three nodes ----------------------------------------------------


def test_one_session_with_expected_leaf_is_one_chain_on_every_node(galera, provider):
    provider.create_session(session_id="cas")
    outcome, started, per_writer = Outcome(), time.monotonic(), 12

    def writer(i: int, node: Node) -> None:
        for n in range(per_writer):

            def append(text: str = f"w{i}-{n}") -> dict[str, Any]:
                leaf = provider.get_session("cas")["leaf_entry_id"]
                return entries.append_message(
                    session_id="cas", message=user(text), expected_leaf_id=leaf, provider=provider, **WHO
                )

            until_acknowledged(outcome, append, retry_on=(LeafConflict, StorageConflict, StorageUnavailable))

    assert run_on_nodes(galera, 6, writer) == []
    report("one session, expected_leaf_id", outcome, started)
    assert outcome.untyped == []
    assert len(outcome.acknowledged) == 6 * per_writer
    stored = assert_one_chain(provider, "cas")
    assert len(stored) == 6 * per_writer
    assert_nothing_lost_nothing_twice(stored, outcome.acknowledged)
    assert_identical_copies(galera)


def test_one_session_without_expected_leaf_is_one_chain_on_every_node(galera, provider):
    provider.create_session(session_id="blind")
    outcome, started, per_writer = Outcome(), time.monotonic(), 12

    def writer(i: int, node: Node) -> None:
        for n in range(per_writer):
            until_acknowledged(
                outcome,
                lambda text=f"w{i}-{n}": entries.append_message(
                    session_id="blind", message=user(text), provider=provider, **WHO
                ),
                # A storage conflict stored nothing: the client may send it again as it is.
                retry_on=(StorageConflict,),
            )

    assert run_on_nodes(galera, 6, writer) == []
    report("one session, no expected_leaf_id", outcome, started)
    assert outcome.untyped == []
    assert set(outcome.typed) <= {"storage_conflict"}
    stored = assert_one_chain(provider, "blind")
    assert len(stored) == len(outcome.acknowledged) == 6 * per_writer
    assert_nothing_lost_nothing_twice(stored, outcome.acknowledged)
    assert_identical_copies(galera)


def test_one_session_each_never_conflicts(galera, provider):
    for i in range(6):
        provider.create_session(session_id=f"own-{i}")
    outcome, started, per_writer = Outcome(), time.monotonic(), 15

    def writer(i: int, node: Node) -> None:
        for n in range(per_writer):
            try:
                outcome.ack(entries.append_message(session_id=f"own-{i}", message=user(f"w{i}-{n}"), **WHO))
            except Exception as exc:
                outcome.refused(exc)

    assert run_on_nodes(galera, 6, writer) == []
    report("one session each", outcome, started)
    assert outcome.untyped == [] and outcome.typed == {}
    for i in range(6):
        stored = assert_one_chain(provider, f"own-{i}")
        assert len(stored) == per_writer
        mine = [e for e in outcome.acknowledged if e["message"]["content"].startswith(f"w{i}-")]
        assert_nothing_lost_nothing_twice(stored, mine)
    assert_identical_copies(galera)


# --- lineage ------------------------------------------------------------------------------


def test_two_creations_at_the_same_instant_on_two_nodes_never_share_a_tree_id(galera, provider):
    """The race of issue 24: 40 rounds, each two roots created at once by two
    processes on nodes 1 and 2, then two forks of one source at once; 0 shared
    tree ids, and the lineage is valid. (The source's id sorts before every
    new id: a root sorting before it made django-mptt shift its tree, a write
    Galera certifies, which hid the race.)"""
    provider.create_session(session_id="0-source")
    point = provider.append_message("0-source", user("a"))["id"]
    rounds = 40

    def creator(i: int, node: Node, barrier: Any) -> dict[str, Any]:
        outcome = Outcome()
        for n in range(rounds):
            barrier.wait()
            until_acknowledged(
                outcome,
                lambda n=n: sessions.create_session(title=f"race {n}", kind="mysql", **WHO),
                retry_on=(StorageConflict,),
            )
            barrier.wait()
            until_acknowledged(
                outcome,
                lambda: tree.fork_session(session_id="0-source", entry_id=point, position="at", **WHO),
                retry_on=(StorageConflict,),
            )
        return {
            "created": [s["session_id"] for s in outcome.acknowledged],
            "typed": outcome.typed,
            "untyped": [repr(e) for e in outcome.untyped],
        }

    started = time.monotonic()
    results = run_in_processes(galera, 2, creator)
    assert all(isinstance(r, dict) for r in results), results
    print(f"\n[galera] lineage race: {time.monotonic() - started:.1f} s; refusals {[r['typed'] for r in results]}")
    assert [r["untyped"] for r in results] == [[], []]
    assert sum(len(r["created"]) for r in results) == 4 * rounds
    roots = list(AgentSession.objects.filter(parent__isnull=True).values_list("tree_id", flat=True))
    shared = [tree_id for tree_id, count in Counter(roots).items() if count > 1]
    print(f"[galera] lineage race: {rounds} rounds, {len(roots)} roots, {len(shared)} shared tree ids")
    assert shared == []
    assert AgentSession.objects.get(session_id="0-source").get_descendant_count() == 2 * rounds
    assert_valid_lineage()
    assert_identical_copies(galera)


def test_concurrent_creations_and_forks_of_forks_keep_the_lineage_valid(galera, provider):
    known = []  # (session, its entry): what a fork may start from
    for s in range(3):
        provider.create_session(session_id=f"src{s}")
        known.append((f"src{s}", provider.append_message(f"src{s}", user(f"s{s}"))["id"]))
    lock = threading.Lock()
    outcome = Outcome()

    def creator(i: int, node: Node) -> None:
        for n in range(8):
            with lock:
                source, point = known[(i * 7 + n * 3) % len(known)]
            if n % 4 == 0:
                until_acknowledged(
                    outcome, lambda: sessions.create_session(kind="mysql", **WHO), retry_on=(StorageConflict,)
                )
                continue
            made = until_acknowledged(
                outcome,
                lambda source=source, point=point: tree.fork_session(
                    session_id=source, entry_id=point, position="at", **WHO
                ),
                retry_on=(StorageConflict,),
            )
            if made:
                with lock:
                    known.append((made["session_id"], point))  # a fork of a fork next

    started = time.monotonic()
    assert run_on_nodes(galera, 6, creator) == []
    report("creations and forks", outcome, started)
    assert outcome.untyped == [] and len(outcome.acknowledged) == 48
    assert AgentSession.objects.count() == 3 + 48
    assert_valid_lineage()
    assert_identical_copies(galera)


# --- read-your-writes -------------------------------------------------------------------------


def test_a_read_on_another_node_sees_the_append_with_wsrep_sync_wait(galera, provider):
    """``SESSIONTREE_DB_SESSION_VARIABLES=wsrep_sync_wait=1`` (set here as the
    setting sets it, on connect): an append on node 1, then at once a read on
    node 2 sees it, 300 times out of 300."""
    provider.create_session(session_id="ryw")
    base = "SET sql_mode='STRICT_TRANS_TABLES'"
    stale = {"with": 0, "without": 0}
    rounds = 300

    def measure(label: str, reader_command: str) -> None:
        appended: list[str] = []
        ready, done = threading.Event(), threading.Event()
        seen: list[bool] = []

        def writer() -> None:
            with on_node(galera.nodes[0]):
                for n in range(rounds):
                    appended.append(provider.append_message("ryw", user(f"{label}-{n}"))["id"])
                    ready.set()
                    done.wait(30)
                    done.clear()

        def reader() -> None:
            with on_node(galera.nodes[1], init_command=reader_command):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT @@SESSION.wsrep_sync_wait")
                    seen.append(cursor.fetchone()[0] == (1 if label == "with" else 0))
                for _ in range(rounds):
                    ready.wait(30)
                    ready.clear()
                    if provider.get_session("ryw")["leaf_entry_id"] != appended[-1]:
                        stale[label] += 1
                    done.set()

        threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert seen == [True], f"the reader's session variable is not as configured ({label})"

    measure("with", init_command(base, {"wsrep_sync_wait": "1"}))
    measure("without", base)
    print(
        f"\n[galera] read-your-writes: stale reads on node 2 with wsrep_sync_wait=1: {stale['with']}/{rounds}, "
        f"without: {stale['without']}/{rounds}"
    )
    assert stale["with"] == 0


def test_a_write_waits_for_the_cluster_once_at_the_start_of_its_transaction(galera, provider):
    """With ``wsrep_sync_wait=1`` a write waits for the cluster once: its
    transaction begins with ``START TRANSACTION`` (a read statement to
    Galera, which waits), and its locking ``SELECT`` inside it does not wait
    again (docs/scale-out.md). Counted by the node (``wsrep_causal_reads``)."""
    with on_node(
        galera.nodes[0], init_command=init_command("SET sql_mode='STRICT_TRANS_TABLES'", {"wsrep_sync_wait": "1"})
    ):
        provider.create_session(session_id="waits")
        provider.append_message("waits", user("the connection and its caches"))
        counter = node_connection(galera.nodes[0])
        try:
            cursor = counter.cursor()
            cursor.execute("SET SESSION wsrep_sync_wait = 0")  # the counter's own reads wait for nothing

            def causal_reads() -> int:
                cursor.execute("SHOW GLOBAL STATUS LIKE 'wsrep_causal_reads'")
                return int(cursor.fetchone()[1])

            before = causal_reads()
            provider.append_message("waits", user("counted"))
            after = causal_reads()
        finally:
            counter.close()
    assert after - before == 1


# --- a node killed and rejoined -------------------------------------------------------------------


def test_a_node_killed_and_rejoined_by_ist_loses_nothing_and_stores_nothing_twice(galera, provider):
    """Keyed appends from writers on all three nodes; node 3 is killed (-9)
    mid-run: its writers fail over to another node and send the same request
    again with the same idempotency key; node 3 is started again and catches
    up by IST. Nothing acknowledged lost, nothing twice, identical copies."""
    writers, per_writer = 6, 20
    for i in range(writers):
        provider.create_session(session_id=f"kill-{i}")
    outcome = Outcome()
    victim = galera.nodes[2]
    killed = threading.Event()
    progress = Counter[str]()

    def writer(i: int, node: Node) -> None:
        current = node
        for n in range(per_writer):
            key = f"kill-{i}-{n}"
            for _ in range(ATTEMPTS):
                try:
                    entry = entries.append_message(
                        session_id=f"kill-{i}", message=user(key), provider=provider, idempotency_key=key, **WHO
                    )
                except StorageConflict as exc:
                    outcome.refused(exc)
                    continue
                except StorageUnavailable as exc:  # its node is gone (or not ready): fail over, same key
                    outcome.refused(exc)
                    alive = [other for other in galera.nodes if other is not victim or not killed.is_set()]
                    current = alive[(alive.index(current) + 1) % len(alive)] if current in alive else alive[0]
                    point_at(current)  # this thread's connection goes to another node from now on
                    time.sleep(0.05)
                    continue
                except Exception as exc:
                    outcome.refused(exc)
                    break
                outcome.ack(entry)
                progress["acked"] += 1
                break
            time.sleep(0.01)

    log_before = victim.log.stat().st_size if victim.log.exists() else 0

    chaos_errors: list[BaseException] = []

    def killer() -> None:
        try:
            while progress["acked"] < writers * per_writer // 3:
                time.sleep(0.05)
            galera.kill(victim)
            killed.set()
            time.sleep(3)
            galera.restart(victim)  # rejoins: IST from a donor's gcache
        except BaseException as exc:  # surfaced below: a failed restart is named, not a sync timeout later
            chaos_errors.append(exc)

    started = time.monotonic()
    chaos = threading.Thread(target=killer)
    chaos.start()
    errors = run_on_nodes(galera, writers, writer)
    chaos.join(RESTART_TIMEOUT)
    assert not chaos.is_alive(), f"node {victim.number} was not restarted within {RESTART_TIMEOUT} s"
    if chaos_errors:
        raise chaos_errors[0]
    galera.wait_synced(victim)
    report("node killed and rejoined", outcome, started)
    assert errors == [] and outcome.untyped == []
    assert set(outcome.typed) <= {"storage_unavailable", "commit_outcome_unknown", "storage_conflict"}
    assert len(outcome.acknowledged) == writers * per_writer
    for i in range(writers):
        stored = assert_one_chain(provider, f"kill-{i}")
        assert len(stored) == per_writer
        mine = [e for e in outcome.acknowledged if e["message"]["content"].startswith(f"kill-{i}-")]
        assert_nothing_lost_nothing_twice(stored, mine)
    with victim.log.open("rb") as log:
        log.seek(log_before)
        rejoined = log.read().decode(errors="replace")
    # Caught up by IST from where it stopped (its recovered position), not by a whole copy (SST).
    assert re.search(r"Prepared IST receiver for [1-9][0-9]*-", rejoined), rejoined[-3000:]
    assert "IST received" in rejoined and "rsync SST completed" not in rejoined
    assert_identical_copies(galera)


# --- the ambiguous commit, across nodes ----------------------------------------------------------


def test_a_lost_commit_answer_retried_on_another_node_with_its_key_is_stored_once(galera, provider, settings):
    """A client's append through node 1 commits, but the answer is lost (MySQL
    2013 at COMMIT): ``commit_outcome_unknown``. The client sends it again with
    the same key through node 2: the first entry comes back, replayed, and
    every node holds it once."""
    from django.db import connections

    from sessiontree.core.errors import CommitOutcomeUnknown
    from sessiontree.services import idempotency

    settings.SESSIONTREE_DB_RETRY_SECONDS = 0  # no retry in process: the client retries elsewhere
    provider.create_session(session_id="ambiguous")
    wrapper_class = type(connections["default"])
    real_commit = wrapper_class._commit
    lost: list[int] = []

    def commit_then_lose(self):
        real_commit(self)
        if not lost:
            lost.append(1)
            with self.wrap_database_errors:
                raise self.Database.OperationalError(2013, "Lost connection to server during query")

    keyed = {"session_id": "ambiguous", "message": user("once"), "idempotency_key": "galera-ambiguous-1", **WHO}
    wrapper_class._commit = commit_then_lose
    try:
        with pytest.raises(CommitOutcomeUnknown):
            entries.append_message(provider=provider, **keyed)
    finally:
        wrapper_class._commit = real_commit
    assert lost == [1]
    with on_node(galera.nodes[1]):
        again = entries.append_message(provider=provider, **keyed)
        replayed = idempotency.replayed()
    assert replayed and again["message"]["content"] == "once"
    stored = assert_one_chain(provider, "ambiguous")
    assert [e["id"] for e in stored] == [again["id"]]
    assert_identical_copies(galera)
