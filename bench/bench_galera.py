"""Appends on a 3-node Galera cluster: one node against three, and the write
stall when a node is killed.

Starts its own cluster on loopback (``tests/galera/cluster.py``: its own
datadirs under ``--dir`` and ports from ``--base-port``, never the 3306
server's), creates a database on node 1 and migrates it, then:

1. appends per second for ``--seconds`` each, from ``--writers`` writer
   processes (one Django connection each, through the operations layer as
   the API calls it, no ``expected_leaf_id``):
   - one session, every writer on node 1;
   - one session, writers spread over the three nodes (certification
     conflicts at COMMIT are retried: their cost is part of the figure);
   - a session each, every writer on node 1;
   - a session each, writers spread over the three nodes;
   with the ratio spread / one node for both;
2. the write stall: one writer per node on its own session; node 3 is killed
   (``kill -9``) after ``--kill-after`` seconds; the longest gap between two
   acknowledged appends of the writers on nodes 1 and 2 is the stall (how
   long the survivors waited for the cluster to declare node 3 gone); then
   node 3 is started again from its recovered position and the time until it
   is synced (IST) is printed.

``SESSIONTREE_DB_SESSION_VARIABLES`` defaults to ``wsrep_sync_wait=1`` (the
recommended setting, docs/scale-out.md). The cluster is stopped at the end.

    .venv/bin/python bench/bench_galera.py [--seconds 8] [--writers 3] [--base-port 17306]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import itertools

from bench_mysql_provider import message, production_settings
from machine import describe

from tests.galera.cluster import GaleraCluster, Node, missing_reason

WHO = {"actor": "bench", "channel": "api"}
DATABASE = "sessiontree_bench_galera"


def point_at(node: Node) -> None:
    from django.db import connections

    db = connections["default"]
    db.close()
    db.settings_dict = {**db.settings_dict, "HOST": "127.0.0.1", "PORT": str(node.sql_port)}


def writer(node: Node, session_id: str, seconds: float, results: Any, index: int, start_at: float) -> None:
    """Append to ``session_id`` through ``node`` until ``seconds`` have passed;
    report (acknowledged times, typed refusals by code, untyped count)."""
    from django.db import connections

    from sessiontree.core.errors import SessionTreeError
    from sessiontree.services import entries

    acks: list[float] = []
    refusals: dict[str, int] = {}
    untyped = 0
    try:
        point_at(node)
        while time.time() < start_at:
            time.sleep(0.001)
        n = 0
        while time.time() < start_at + seconds:
            try:
                entries.append_message(session_id=session_id, message=message(n), **WHO)
                acks.append(time.time())
                n += 1
            except SessionTreeError as exc:
                refusals[exc.code] = refusals.get(exc.code, 0) + 1
                if exc.code in ("storage_unavailable", "commit_outcome_unknown"):
                    time.sleep(0.2)  # its node is gone: a client would try another
            except Exception:
                untyped += 1
    finally:
        connections.close_all()
        results.put((index, acks, refusals, untyped))
        results.close()
        results.join_thread()


def run_writers(plan: list[tuple[Node, str]], seconds: float) -> list[tuple[list[float], dict[str, int], int]]:
    from django.db import connections

    connections.close_all()
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    start_at = time.time() + 0.5
    processes = [
        context.Process(target=writer, args=(node, session_id, seconds, results, i, start_at))
        for i, (node, session_id) in enumerate(plan)
    ]
    for process in processes:
        process.start()
    found: dict[int, Any] = {}
    while len(found) < len(processes):
        i, acks, refusals, untyped = results.get(timeout=seconds + 120)
        found[i] = (acks, refusals, untyped)
    for process in processes:
        process.join(30)
    return [found[i] for i in range(len(plan))]


def throughput(cluster: GaleraCluster, writers: int, seconds: float) -> None:
    from sessiontree.services import sessions

    def rate(plan: list[tuple[Node, str]]) -> tuple[float, dict[str, int], int]:
        outcome = run_writers(plan, seconds)
        total = sum(len(acks) for acks, _r, _u in outcome)
        refusals: dict[str, int] = {}
        for _acks, found, _u in outcome:
            for code, count in found.items():
                refusals[code] = refusals.get(code, 0) + count
        return total / seconds, refusals, sum(u for _a, _r, u in outcome)

    node1 = cluster.nodes[0]
    figures: dict[str, float] = {}
    for label, shared in (("one session", True), ("a session each", False)):
        for where in ("node 1", "3 nodes"):
            tag = f"{'shared' if shared else 'own'}-{where.replace(' ', '')}"
            ids = [
                sessions.create_session(session_id=f"{tag}-{i}", kind="mysql", **WHO)["session_id"]
                for i in range(1 if shared else writers)
            ]
            plan = [
                (node1 if where == "node 1" else cluster.nodes[i % 3], ids[0] if shared else ids[i])
                for i in range(writers)
            ]
            per_second, refusals, untyped = rate(plan)
            figures[f"{label}, {where}"] = per_second
            print(
                f"{label:15} {writers} writers on {where:7}: {per_second:7.0f} appends/s "
                f"(typed refusals {refusals or 'none'}, untyped {untyped})"
            )
    for label in ("one session", "a session each"):
        ratio = figures[f"{label}, 3 nodes"] / figures[f"{label}, node 1"]
        print(f"ratio spread over 3 nodes / all on node 1, {label}: {ratio:.2f}")


def stall(cluster: GaleraCluster, seconds: float, kill_after: float) -> None:
    from sessiontree.services import sessions

    ids = [sessions.create_session(session_id=f"stall-{i}", kind="mysql", **WHO)["session_id"] for i in range(3)]
    victim = cluster.nodes[2]
    killed: list[float] = []

    def killer(delay: float) -> None:  # a thread: the servers are this process's children
        time.sleep(delay)
        killed.append(time.time())
        cluster.kill(victim)

    chaos = threading.Thread(target=killer, args=(kill_after + 0.5,))
    chaos.start()
    outcome = run_writers([(cluster.nodes[i], ids[i]) for i in range(3)], seconds)
    chaos.join(30)
    killed_at = killed[0]
    for i, (acks, refusals, untyped) in enumerate(outcome[:2]):
        gaps = [b - a for a, b in itertools.pairwise(acks)]
        around = [b - a for a, b in itertools.pairwise(acks) if a <= killed_at + 10 and b >= killed_at]
        print(
            f"writer on node {i + 1}: {len(acks)} appends, median gap {statistics.median(gaps) * 1000:.1f} ms, "
            f"longest gap around the kill {max(around, default=0.0):.2f} s (the stall); refusals {refusals or 'none'}, "
            f"untyped {untyped}"
        )
    acks, refusals, untyped = outcome[2]
    print(f"writer on node 3 (killed): {len(acks)} appends, refusals {refusals or 'none'}, untyped {untyped}")
    restart = time.perf_counter()
    cluster.restart(victim)
    cluster.wait_synced(victim)
    print(f"node 3 started again from its recovered position and synced in {time.perf_counter() - restart:.1f} s")
    log = victim.log.read_text(errors="replace")
    tail = log[log.rfind("Prepared IST receiver") :][:200] if "Prepared IST receiver" in log else "(no IST in the log)"
    print(f"node 3 rejoined by: {tail.splitlines()[0] if tail else '?'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "sessiontree-bench-galera")
    parser.add_argument("--base-port", type=int, default=17306)
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds of appends per configuration")
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--stall-seconds", type=float, default=16.0)
    parser.add_argument("--kill-after", type=float, default=3.0)
    args = parser.parse_args()

    reason = missing_reason()
    if reason is not None:
        sys.exit(f"cannot start a Galera cluster here: {reason}")
    cluster = GaleraCluster(args.dir, args.base_port)
    print(f"starting a 3-node cluster under {args.dir} (SQL ports {args.base_port}-{args.base_port + 2})")
    cluster.start()
    try:
        node1 = cluster.nodes[0]
        cluster.sql(node1, f"CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        os.environ["DATABASE_URL"] = f"mysql://root@127.0.0.1:{node1.sql_port}/{DATABASE}"
        os.environ.setdefault("SESSIONTREE_DB_SESSION_VARIABLES", "wsrep_sync_wait=1")
        production_settings()
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(describe({"host": "127.0.0.1", "port": node1.sql_port, "user": "root", "charset": "utf8mb4"}))
        print(f"SESSIONTREE_DB_SESSION_VARIABLES={os.environ['SESSIONTREE_DB_SESSION_VARIABLES']}")
        throughput(cluster, args.writers, args.seconds)
        stall(cluster, args.stall_seconds, args.kill_after)
    finally:
        from django.db import connections

        connections.close_all()
        cluster.stop()


if __name__ == "__main__":
    main()
