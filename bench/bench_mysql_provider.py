"""The mysql provider on a real MySQL/MariaDB server.

Prints:
- median append latency at depth 10 and at depth 10,000, and their ratio
  (every timed append is a child of the same entry at that depth: the leaf is
  moved back, untimed, after each one);
- appends per second from one client (the 10,000 sequential appends that build
  the deep session);
- active path and context of a 10,000-entry session with 50 branches, and a
  navigate through the operations layer there (leaf moves between two
  branch tips, each with its audit record);
- the floor: a plain autocommit ``INSERT`` loop with mysqlclient into the same
  table, and the provider's append latency as a multiple of it;
- the design's locked append sent as raw SQL with mysqlclient (the session
  row's ``SELECT … FOR UPDATE``, the ``INSERT``, the session ``UPDATE``,
  ``COMMIT``; no Python or Django in between), alternating with the plain
  ``INSERT``: the lowest multiple of the floor the locked design can reach
  on the server.

Creates its own database (``sessiontree_bench`` by default), migrates it and
drops it at the end. Run from the repository root:

    .venv/bin/python bench/bench_mysql_provider.py [--samples 300] [--deep 10000]

``DATABASE_URL`` (default ``mysql://root@127.0.0.1:3306/test``) names the
server; only its host, port and credentials are used.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe, median_ms

DEFAULT_URL = "mysql://root@127.0.0.1:3306/test"


def server_url(database: str) -> tuple[str, dict[str, Any]]:
    """The bench database's URL and mysqlclient connect() arguments for the server."""
    parts = urlsplit(os.environ.get("DATABASE_URL") or DEFAULT_URL)
    if not parts.scheme.startswith("mysql"):
        sys.exit(f"DATABASE_URL must be a mysql:// URL for this benchmark, not {parts.scheme}://")
    connect = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": parts.username or "root",
        "password": parts.password or "",
        "charset": "utf8mb4",
    }
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, "")), connect


def production_settings() -> None:
    """Run Django as in production: DEBUG off (with it on, Django keeps every
    SQL statement in memory), so the settings want a secret key and allowed
    hosts: bench-only placeholders unless the environment has its own."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 50)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "localhost")


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    production_settings()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def message(i: int) -> dict[str, Any]:
    """A realistic mix of Pi messages (about 0.5 KB each)."""
    kind = i % 3
    if kind == 0:
        return {"role": "user", "content": [{"type": "text", "text": f"step {i}: " + "please look at this " * 12}]}
    if kind == 1:
        return {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading the file. " * 6},
                {"type": "toolCall", "id": f"call_{i}", "name": "read", "arguments": {"path": f"src/m{i}.py"}},
            ],
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {"input": 1200 + i, "output": 80, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.0012}},
            "stopReason": "toolUse",
            "timestamp": 1763681630793 + i,
        }
    return {
        "role": "toolResult",
        "toolCallId": f"call_{i - 1}",
        "toolName": "read",
        "content": [{"type": "text", "text": "def f(x):\n    return x * 2\n" * 8}],
        "isError": False,
        "timestamp": 1763681630793 + i,
    }


def timed_appends_at(provider, targets: list[tuple[str, str]], samples: int) -> list[float]:
    """Median ms of ``samples`` appends per (session, parent) target, each a
    new child of that parent. Targets take turns, so a noisy moment of the
    machine (disk flushes, other processes) hits all of them alike."""
    timings: list[list[float]] = [[] for _ in targets]
    for i in range(samples):
        for target, (session_id, parent_id) in enumerate(targets):
            provider.switch_leaf(session_id, parent_id)
            payload = message(i)
            start = time.perf_counter()
            provider.append_message(session_id, payload)
            timings[target].append((time.perf_counter() - start) * 1000)
    return [statistics.median(t) for t in timings]


def median_navigate_ms(provider, session_id: str, targets: tuple[str, str], samples: int) -> float:
    """A navigate through the operations layer (what the API and the admin
    call), alternating between two entries so that every call moves the leaf."""
    from sessiontree.services import tree

    timings = []
    for i in range(samples):
        start = time.perf_counter()
        tree.navigate_tree(
            session_id=session_id, target_id=targets[i % 2], actor="bench", channel="internal", provider=provider
        )
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def branched_entries(total: int, branches: int) -> tuple[list[dict[str, Any]], str]:
    """A session of ``total`` entries: a main line with ``branches`` side
    branches hanging off it at even intervals (half the entries each)."""
    from sessiontree.core.pi_session_file import now_iso

    entries: list[dict[str, Any]] = []
    ts = now_iso()

    def add(parent: str | None, i: int) -> str:
        entry_id = f"{len(entries):08x}"
        entries.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts, "message": message(i)})
        return entry_id

    main_length = total // 2
    branch_length = (total - main_length) // branches
    fork_every = main_length // (branches + 1)
    main: list[str] = []
    parent = None
    for i in range(main_length):
        parent = add(parent, i)
        main.append(parent)
    for b in range(branches):
        parent = main[(b + 1) * fork_every]
        for i in range(branch_length):
            parent = add(parent, i)
    return entries, main[-1]


# One entry row, as plainly as it can be inserted (the floor's statement).
INSERT_ENTRY_SQL = (
    "INSERT INTO neta_agent_session_entry (session_id, entry_id, parent_entry_id, entry_seq, depth, "
    "type, timestamp, message, status, extra, created_at) "
    "VALUES (%s, %s, %s, %s, %s, 'message', '2026-01-01T00:00:00.000Z', %s, 'completed', '{}', NOW(6))"
)


def floor_insert_ms(connect: dict[str, Any], database: str, session_key: str, samples: int) -> tuple[float, float]:
    """Median ms per plain autocommit INSERT of one entry row, and rows/s."""
    import MySQLdb
    import orjson

    conn = MySQLdb.connect(database=database, **connect)
    conn.autocommit(True)
    cursor = conn.cursor()
    timings = []
    parent = None
    start_all = time.perf_counter()
    for i in range(samples):
        entry_id = f"f{i:07x}"
        params = (session_key, entry_id, parent, i + 1, i, orjson.dumps(message(i)).decode())
        start = time.perf_counter()
        cursor.execute(INSERT_ENTRY_SQL, params)
        timings.append((time.perf_counter() - start) * 1000)
        parent = entry_id
    total = time.perf_counter() - start_all
    conn.close()
    return statistics.median(timings), samples / total


def raw_locked_append_ms(
    connect: dict[str, Any], database: str, session_key: str, samples: int, *, batched: bool = False
) -> tuple[float, float]:
    """The floor of the design's locked append, without Python or Django in the way:
    the same statements the provider sends (``SELECT … FOR UPDATE`` of the session
    row, the entry ``INSERT``, the session ``UPDATE``, ``COMMIT``) through mysqlclient
    on a connection that stays out of autocommit (so no ``SET autocommit`` round
    trips), alternating in blocks of 25 with the plain autocommit ``INSERT``.
    With ``batched`` the same transaction takes two round trips instead of four
    (multi-statements: ``START TRANSACTION; SELECT … FOR UPDATE``, then
    ``INSERT …; UPDATE …; COMMIT``): the least any locked append can cost.
    Returns the medians (ms) of the locked transaction and of the INSERT."""
    import MySQLdb
    import orjson
    from MySQLdb.constants import CLIENT

    if batched:
        locked = MySQLdb.connect(database=database, client_flag=CLIENT.MULTI_STATEMENTS, **connect)
    else:
        locked = MySQLdb.connect(database=database, **connect)
        locked.autocommit(False)
    plain = MySQLdb.connect(database=database, **connect)
    plain.autocommit(True)
    lock_cursor, plain_cursor = locked.cursor(), plain.cursor()
    insert = INSERT_ENTRY_SQL
    select = (
        "SELECT id, provider, status, leaf_entry_id, root_entry_id, entry_count, branch_count, "
        "compaction_count, leaf_depth, leaf_in_flight, leaf_has_children "
        "FROM neta_agent_session WHERE session_id = %s FOR UPDATE"
    )
    update = (
        "UPDATE neta_agent_session SET leaf_entry_id = %s, entry_count = %s, leaf_depth = %s, "
        "leaf_in_flight = 0, leaf_has_children = 0, updated_at = NOW(6) WHERE session_id = %s"
    )
    plain_cursor.execute(
        "SELECT COALESCE(MAX(entry_seq), 0) FROM neta_agent_session_entry WHERE session_id = %s", [session_key]
    )
    seq = int(plain_cursor.fetchone()[0])
    locked_ms: list[float] = []
    plain_ms: list[float] = []
    parent = None
    for block in range(0, samples, 25):
        for i in range(block, min(samples, block + 25)):
            seq += 1
            entry_id = f"r{seq:07x}"
            body = orjson.dumps(message(i)).decode()
            start = time.perf_counter()
            if batched:
                lock_cursor.execute("START TRANSACTION; " + lock_cursor.mogrify(select, [session_key]))
                lock_cursor.nextset()
                lock_cursor.fetchone()
                statements = [
                    lock_cursor.mogrify(insert, (session_key, entry_id, parent, seq, seq - 1, body)),
                    lock_cursor.mogrify(update, (entry_id, seq, seq - 1, session_key)),
                    "COMMIT",
                ]
                lock_cursor.execute("; ".join(statements))
                while lock_cursor.nextset():
                    pass
            else:
                lock_cursor.execute(select, [session_key])
                lock_cursor.fetchone()
                lock_cursor.execute(insert, (session_key, entry_id, parent, seq, seq - 1, body))
                lock_cursor.execute(update, (entry_id, seq, seq - 1, session_key))
                locked.commit()
            locked_ms.append((time.perf_counter() - start) * 1000)
            parent = entry_id
        for i in range(block, min(samples, block + 25)):
            seq += 1
            entry_id = f"r{seq:07x}"
            body = orjson.dumps(message(i)).decode()
            start = time.perf_counter()
            plain_cursor.execute(insert, (session_key, entry_id, parent, seq, seq - 1, body))
            plain_ms.append((time.perf_counter() - start) * 1000)
            parent = entry_id
    locked.close()
    plain.close()
    return statistics.median(locked_ms), statistics.median(plain_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="timed appends per depth")
    parser.add_argument("--deep", type=int, default=10_000, help="depth of the deep session")
    parser.add_argument("--entries", type=int, default=10_000, help="entries of the branched session")
    parser.add_argument("--branches", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=30, help="runs of each read")
    parser.add_argument("--database", default="sessiontree_bench")
    parser.add_argument("--keep", action="store_true", help="do not drop the database at the end")
    args = parser.parse_args()

    import MySQLdb

    url, connect = server_url(args.database)
    print(describe(connect))
    admin = MySQLdb.connect(**connect)
    admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
    admin.cursor().execute(f"CREATE DATABASE `{args.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    try:
        setup_django(url)
        run(args, connect)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
        admin.close()


def run(args: argparse.Namespace, connect: dict[str, Any]) -> None:
    from django.db import connection

    from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider

    random.seed(1)
    provider = MySQLSessionTreeProvider()
    print(f"server: {connection.mysql_server_info if hasattr(connection, 'mysql_server_info') else '?'}")

    # 1. appends at depth 10 and at depth N; N sequential appends = one client's rate
    provider.create_session(session_id="shallow")
    for i in range(11):
        shallow_parent = provider.append_message("shallow", message(i))["id"]
    provider.create_session(session_id="deep")
    start = time.perf_counter()
    for i in range(args.deep + 1):
        deep_parent = provider.append_message("deep", message(i))["id"]
    fill_s = time.perf_counter() - start
    shallow, deep = timed_appends_at(provider, [("shallow", shallow_parent), ("deep", deep_parent)], args.samples)
    print(
        f"one client: {args.deep + 1} sequential appends in {fill_s:.2f} s = {(args.deep + 1) / fill_s:.0f} appends/s"
    )
    print(f"median append at depth 10:     {shallow:.3f} ms")
    print(f"median append at depth {args.deep}: {deep:.3f} ms")
    print(f"ratio deep/shallow: {deep / shallow:.2f} (must be <= 1.5)")

    # 2. reads of a 10,000-entry session with 50 branches
    entries, leaf = branched_entries(args.entries, args.branches)
    provider.create_session(session_id="branched", entries=entries)
    provider.switch_leaf("branched", leaf)
    path_len = len(provider.get_active_path("branched"))
    path_ms = median_ms(lambda: provider.get_active_path("branched"), args.repeat)
    context_ms = median_ms(lambda: provider.build_context("branched"), args.repeat)
    list_ms = median_ms(lambda: provider.list_entries("branched"), max(5, args.repeat // 3))
    snapshot_ms = median_ms(lambda: provider.get_snapshot("branched"), max(5, args.repeat // 3))
    print(f"branched session: {len(entries)} entries, {args.branches} branches, active path {path_len} entries")
    print(f"median get_active_path:        {path_ms:.1f} ms")
    print(f"median build_context (path + context): {context_ms:.1f} ms (target <= 50 ms)")
    print(f"median list_entries (all {len(entries)}):  {list_ms:.1f} ms")
    print(f"median get_snapshot:           {snapshot_ms:.1f} ms")
    navigate_ms = median_navigate_ms(provider, "branched", (leaf, entries[-1]["id"]), args.samples)
    print(f"median navigate (operations layer, between two tips): {navigate_ms:.3f} ms")

    # 3. the floor: plain INSERTs with mysqlclient into the same table
    floor_key = provider.create_session(session_id="floor")["session_id"]
    floor_ms, floor_rate = floor_insert_ms(connect, args.database, floor_key, args.samples * 3)
    print(f"floor: plain autocommit INSERT median {floor_ms:.3f} ms ({floor_rate:.0f} rows/s)")
    print(f"ratio append/floor: {shallow / floor_ms:.2f} at depth 10, {deep / floor_ms:.2f} at depth {args.deep}")

    # 4. the design's locked append as raw SQL (no Python/Django overhead), against the floor
    raw_key = provider.create_session(session_id="raw")["session_id"]
    raw_ms, raw_floor_ms = raw_locked_append_ms(connect, args.database, raw_key, args.samples * 3)
    print(
        f"raw locked append (SELECT FOR UPDATE + INSERT + UPDATE + COMMIT, mysqlclient, no autocommit toggling): "
        f"median {raw_ms:.3f} ms vs plain INSERT {raw_floor_ms:.3f} ms, alternating: ratio {raw_ms / raw_floor_ms:.2f}"
    )
    batched_key = provider.create_session(session_id="raw-batched")["session_id"]
    batched_ms, batched_floor_ms = raw_locked_append_ms(
        connect, args.database, batched_key, args.samples * 3, batched=True
    )
    print(
        f"the same in 2 round trips (multi-statements: START TRANSACTION + SELECT FOR UPDATE; INSERT + UPDATE + COMMIT): "
        f"median {batched_ms:.3f} ms vs plain INSERT {batched_floor_ms:.3f} ms, alternating: "
        f"ratio {batched_ms / batched_floor_ms:.2f}"
    )


if __name__ == "__main__":
    main()
