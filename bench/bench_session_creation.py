"""Session creation with 100,000 sessions against an empty table, both id orders.

A lineage root's tree id is its own pk (``providers/lineage.py``): creating a
session touches no other row, whatever the number of sessions and wherever
its id sorts. (Before, ``order_insertion_by=session_id`` shifted the tree id of
every later root: an imported Pi session with an old, random id cost
O(sessions).) This measures it on a real MySQL/MariaDB server:

two databases side by side, one almost empty and one holding ``--sessions``
sessions (100,000 by default, inserted in bulk with valid lineage rows: each
its own tree); in blocks of 20 that alternate between the two (so that the
machine's noise hits both alike), creations whose ids sort before every other
id and creations whose ids sort after, taking turns, and forks of a session.

Prints the median per order and size and the ratios (target ≤ 1.5: the same
cost whatever the number of sessions), through the operations layer
(``services.sessions.create_session``, with its audit record: what the API
calls) and for a fork of a session (lineage insert into an existing tree).

Creates its own database (``sessiontree_bench_creation``), drops it at the
end (``--keep`` keeps it). ``DATABASE_URL`` names the server (default the
local one); only host, port and credentials are used.

    .venv/bin/python bench/bench_session_creation.py [--sessions 100000] [--samples 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mysql_provider import server_url, setup_django
from machine import describe

WHO = {"actor": "bench", "channel": "internal"}


def fill(count: int) -> float:  # into the database the connection uses
    """``count`` root sessions in bulk (each its own lineage tree: tree id =
    its pk), ids in the middle of the id space; seconds taken."""
    from django.db import connection, transaction

    from sessiontree.models import AgentSession

    start = time.perf_counter()
    batch = 5000
    for first in range(0, count, batch):
        rows = [
            AgentSession(
                session_id=f"m-{n:09d}", provider="mysql", lft=1, rght=2, level=0, tree_id=0, title=f"bulk {n}"
            )
            for n in range(first, min(count, first + batch))
        ]
        with transaction.atomic():
            AgentSession.objects.bulk_create(rows, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE neta_agent_session SET tree_id = id WHERE tree_id = 0")
    return time.perf_counter() - start


def use_database(name: str) -> None:
    """Point the default connection at database ``name`` (untimed)."""
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name


def prepare(tag: str) -> tuple[str, str]:
    """A session to fork and the entry to fork at."""
    from sessiontree.services import entries, sessions

    source = sessions.create_session(session_id=f"src-{tag}", kind="mysql", **WHO)["session_id"]
    point = entries.append_message(session_id=source, message={"role": "user", "content": "hi"}, **WHO)["id"]
    return source, point


def timed_block(tag: str, first: int, count: int, source: tuple[str, str], timings: dict[str, list[float]]) -> None:
    """``count`` creations per id order (taking turns) and as many forks, ms each."""
    from sessiontree.services import sessions, tree

    for n in range(first, first + count):
        for order, session_id in (("sorts first", f"0-{tag}-{n:06d}"), ("sorts last", f"z-{tag}-{n:06d}")):
            start = time.perf_counter()
            sessions.create_session(session_id=session_id, kind="mysql", **WHO)
            timings[order].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        tree.fork_session(session_id=source[0], entry_id=source[1], position="at", **WHO)
        timings["fork"].append((time.perf_counter() - start) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000, help="sessions in the full table")
    parser.add_argument("--samples", type=int, default=200, help="timed creations per id order and size")
    parser.add_argument("--database", default="sessiontree_bench_creation")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    import MySQLdb

    names = {"empty": f"{args.database}_empty", "full": f"{args.database}_full"}
    url, connect = server_url(names["full"])
    print(describe(connect))
    admin = MySQLdb.connect(**connect)
    for name in names.values():
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    try:
        setup_django(url)  # migrates the full one
        use_database(names["empty"])
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        run(args, names)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            for name in names.values():
                admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def run(args: argparse.Namespace, names: dict[str, str]) -> None:
    from sessiontree.models import AgentSession

    use_database(names["full"])
    seconds = fill(args.sessions)
    sizes: dict[str, int] = {}
    sources: dict[str, tuple[str, str]] = {}
    for size, name in names.items():
        use_database(name)
        sources[size] = prepare(size)
        sizes[size] = AgentSession.objects.count()
    print(
        f"filled {args.sessions:,} sessions in {seconds:.1f} s; tables: {sizes['empty']:,} and {sizes['full']:,} sessions"
    )
    timings = {size: {"sorts first": [], "sorts last": [], "fork": []} for size in names}
    block = 20
    for first in range(0, args.samples, block):
        for size, name in names.items():
            use_database(name)
            timed_block(size, first, min(block, args.samples - first), sources[size], timings[size])
    empty, full = timings["empty"], timings["full"]

    def med(values: list[float]) -> float:
        return statistics.median(values)

    print(f"session creation through the operations layer (median of {args.samples}, ms; blocks alternate):")
    full_label = f"{sizes['full']:,} sessions"
    print(f"{'':14} {'~empty table':>14} {full_label:>18} {'ratio':>7}")
    worst = 0.0
    for order in ("sorts first", "sorts last", "fork"):
        ratio = med(full[order]) / med(empty[order])
        if order != "fork":
            worst = max(worst, ratio)
        print(f"{order:14} {med(empty[order]):14.3f} {med(full[order]):18.3f} {ratio:7.2f}")
    print(f"worst ratio of a new session (either id order): {worst:.2f} (target <= 1.5)")
    first_vs_last = med(full["sorts first"]) / med(full["sorts last"])
    print(f"at {sizes['full']:,} sessions, an id that sorts first vs last: {first_vs_last:.2f}")


if __name__ == "__main__":
    main()
