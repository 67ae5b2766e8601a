"""The ``mysql`` append against the same locked transaction sent raw (issue 23).

An append through the operations layer (``services.entries.append_message``,
what the API, the admin and the commands call) and through the provider
alone (``provider.append_message``) are each recorded once, statement by
statement, as Django sends them (``connection.execute_wrapper``). Then, in
one run, the timed calls alternate sample by sample with a replay of exactly
those statements and parameters through mysqlclient on a connection that
stays out of autocommit, ended by one ``COMMIT``: the same locked
transaction without Python, Django or the project in between. Savepoints
Django adds for nested ``atomic`` blocks are not replayed (they are part of
the overhead being measured).

So that every sample finds the same state and the replay needs no other
change, each sample has a session of its own, cloned untimed beforehand
from one template (the same entries, the same leaf); the replay only
swaps the session's id and key. Session keys start at 10,000,000 so they
cannot be mistaken for any other number in the parameters.

Prints the statements of each kind of append, then per kind the medians
(ms) of the call and of its raw replay, and the ratio (target: at most 1.5);
then the figures the machine's noise moves least: the round trips of one
call as the server counts its statements (``Questions``) against the
replay's (its statements and the ``COMMIT``), and this process's CPU time
per call against the replay's.
Uses its own database (``sessiontree_bench_floor``) on the server of
``DATABASE_URL`` (default the local test server), dropped at the end.

    .venv/bin/python bench/bench_write_floor.py [--samples 300] [--entries 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mysql_provider import message, server_url, setup_django
from machine import describe

DATABASE = "sessiontree_bench_floor"
FIRST_KEY = 10_000_000
WHO = {"actor": "bench", "channel": "internal"}
TARGET = 1.5


def _mysql(connect: dict[str, Any], sql: str) -> None:
    import MySQLdb

    conn = MySQLdb.connect(**connect, autocommit=True)
    conn.cursor().execute(sql)
    conn.close()


class Recorder:
    """``connection.execute_wrapper``: every statement with its parameters."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, Any, bool]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements.append((sql, params, many))
        return execute(sql, params, many, context)


def is_savepoint(sql: str) -> bool:
    return sql.lstrip().upper().startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT"))


def swap(value: Any, old: tuple[int, str], new: tuple[int, str]) -> Any:
    """``value`` with the template session's key and id replaced by a clone's."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value == old[0]:
        return new[0]
    if isinstance(value, str) and old[1] in value:
        return value.replace(old[1], new[1])
    if isinstance(value, (list, tuple)):
        return type(value)(swap(item, old, new) for item in value)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--entries", type=int, default=50, help="entries in each session before the append")
    args = parser.parse_args()

    url, connect = server_url(DATABASE)
    print(describe(connect))
    _mysql(connect, f"DROP DATABASE IF EXISTS {DATABASE}")
    _mysql(connect, f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    try:
        run(args, url, connect)
    finally:
        _mysql(connect, f"DROP DATABASE IF EXISTS {DATABASE}")


def run(args: argparse.Namespace, url: str, connect: dict[str, Any]) -> None:
    setup_django(url)
    import MySQLdb
    from django.db import connection

    from sessiontree.models import AgentSession
    from sessiontree.providers.factory import get_provider
    from sessiontree.services import entries, sessions

    provider = get_provider("mysql")
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {AgentSession._meta.db_table} AUTO_INCREMENT = {FIRST_KEY}")
    # The same entries (ids included) in every clone: a linear conversation.
    history = [
        {
            "type": "message",
            "id": f"{i:08x}",
            "parentId": f"{i - 1:08x}" if i else None,
            "timestamp": "2026-12-06T00:00:00.000Z",
            "message": message(i),
        }
        for i in range(args.entries)
    ]

    def clone(name: str) -> tuple[int, str]:
        sessions.create_session(session_id=name, provider=provider, entries=history, **WHO)
        return AgentSession.objects.get(session_id=name).pk, name

    kinds = {
        "audited append (services.entries.append_message)": lambda sid, payload: entries.append_message(
            session_id=sid, message=payload, provider=provider, **WHO
        ),
        "provider append (provider.append_message)": lambda sid, payload: provider.append_message(sid, payload),
    }
    payload = message(args.entries)
    raw = MySQLdb.connect(database=DATABASE, **connect)
    raw.autocommit(False)
    raw_cursor = raw.cursor()
    figures: dict[str, tuple[float, float]] = {}
    cpu: dict[str, tuple[float, float]] = {}
    trips: dict[str, tuple[int, int]] = {}

    def questions() -> int:
        """Statements this process's Django connection has sent, as the server counts them."""
        with connection.cursor() as cursor:
            cursor.execute("SHOW SESSION STATUS LIKE 'Questions'")
            return int(cursor.fetchone()[1])

    for kind, call in kinds.items():
        template = clone(f"tpl-{len(figures)}")
        recorder = Recorder()
        with connection.execute_wrapper(recorder):
            call(template[1], payload)
        statements = [(sql, params, many) for sql, params, many in recorder.statements if not is_savepoint(sql)]
        skipped = len(recorder.statements) - len(statements)
        print(f"\n{kind}: {len(statements)} statements + COMMIT (savepoints left out: {skipped})")
        for sql, _params, many in statements:
            print(f"  {'many ' if many else ''}{sql[:150]}")
        # Round trips of one call, as the server counts statements (the SHOW itself subtracted).
        probe = clone(f"q{len(figures)}")
        first = questions()
        itself = questions() - first  # what one SHOW adds to the count
        before = questions()
        call(probe[1], payload)
        sent = questions() - before - itself
        trips[kind] = (sent, len(statements) + 1)
        clones = [(clone(f"c{len(figures)}-{n:05d}"), clone(f"r{len(figures)}-{n:05d}")) for n in range(args.samples)]
        called: list[float] = []
        replayed: list[float] = []
        call_cpu = replay_cpu = 0.0
        for n, (for_call, for_replay) in enumerate(clones):
            order = ("call", "raw") if n % 2 == 0 else ("raw", "call")
            for which in order:
                if which == "call":
                    cpu_start = time.process_time()
                    start = time.perf_counter()
                    call(for_call[1], payload)
                    called.append((time.perf_counter() - start) * 1000)
                    call_cpu += time.process_time() - cpu_start
                else:
                    cpu_start = time.process_time()
                    start = time.perf_counter()
                    for sql, params, many in statements:
                        swapped = swap(params, template, for_replay)
                        if many:
                            raw_cursor.executemany(sql, swapped)
                        else:
                            raw_cursor.execute(sql, swapped)
                        if raw_cursor.description:
                            raw_cursor.fetchall()
                    raw.commit()
                    replayed.append((time.perf_counter() - start) * 1000)
                    replay_cpu += time.process_time() - cpu_start
        figures[kind] = (statistics.median(called), statistics.median(replayed))
        cpu[kind] = (call_cpu * 1000 / args.samples, replay_cpu * 1000 / args.samples)
    raw.close()
    print(f"\n{args.samples} samples each, alternating; sessions of {args.entries} entries")
    for kind, (call_ms, raw_ms) in figures.items():
        ratio = call_ms / raw_ms
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"{kind}: {call_ms:.3f} ms vs raw {raw_ms:.3f} ms: {ratio:.2f}x ({verdict} the {TARGET}x target)")
        ours, floor = trips[kind]
        call_cpu_ms, replay_cpu_ms = cpu[kind]
        print(
            f"  round trips {ours} vs raw {floor}; this process's CPU {call_cpu_ms:.3f} ms vs raw {replay_cpu_ms:.3f} ms "
            f"(+{call_cpu_ms - replay_cpu_ms:.3f} ms: Python, Django and the project)"
        )


if __name__ == "__main__":
    main()
