"""The search index row's own cost inside the audited append, on SQLite.

One process per provider (``file``: meta rows in SQLite; ``mysql``: the
``mysql`` provider on the same kind of SQLite database): audited appends
(``services.entries.append_message``) in blocks, the blocks taking turns
between the write path as it is and the same path with the index write left
out (``search_index.add_entries`` replaced by nothing, for the measurement
only). Separate processes differ by more than the row costs, so both run in
one. Prints the median of the block medians of each, the row's cost in µs
and the ratio. ``--server`` adds the ``mysql`` provider on the MySQL/MariaDB
server of ``DATABASE_URL`` (default the local test server), in a database of
its own (``sessiontree_bench_search_row``, dropped after). Run from the
repository root:

    .venv/bin/python bench/bench_search_row.py [--rounds 100] [--block 50] [--server]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER_DATABASE = "sessiontree_bench_search_row"


def child(kind: str, rounds: int, block: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-search-row-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ.update(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="bench", DJANGO_ALLOWED_HOSTS="localhost")
    if kind != "mysql-server":
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(workdir / "meta.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from sessiontree.providers import search_index
    from sessiontree.services import entries

    provider: Any
    if kind == "file":
        from sessiontree.providers.file_provider import FileSessionTreeProvider

        provider = FileSessionTreeProvider(root=workdir / "sessions")
    else:
        from sessiontree.providers.factory import get_provider

        provider = get_provider("mysql")
    session_id = f"bench-{os.getpid()}"
    provider.create_session(session_id=session_id)
    count = [0]

    def append() -> float:
        count[0] += 1
        start = time.perf_counter()
        entries.append_message(
            session_id=session_id,
            message={"role": "user", "content": f"audited sample number {count[0]} with a few words"},
            actor="bench",
            channel="internal",
            provider=provider,
        )
        return (time.perf_counter() - start) * 1e6

    with_row = search_index.add_entries
    variants = {"with the row": with_row, "without": lambda _session_id, _entries: 0}
    for _ in range(100):
        append()
    medians: dict[str, list[float]] = {name: [] for name in variants}
    for round_no in range(rounds):
        names = list(variants) if round_no % 2 == 0 else list(variants)[::-1]
        for name in names:
            search_index.add_entries = variants[name]  # type: ignore[assignment]
            medians[name].append(statistics.median(append() for _ in range(block)))
    search_index.add_entries = with_row
    row, without = statistics.median(medians["with the row"]), statistics.median(medians["without"])
    print(
        f"  {kind:<12}  without the row {without:6.1f} us   with it {row:6.1f} us   "
        f"the row {row - without:5.1f} us   ratio {row / without:5.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--server", action="store_true", help="also the mysql provider on DATABASE_URL's server")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rounds, args.block)
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from machine import describe

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kinds = ["file", "mysql"]
    connect = None
    if args.server:
        import MySQLdb
        from bench_mysql_provider import server_url

        url, connect = server_url(SERVER_DATABASE)
        server = MySQLdb.connect(**connect, autocommit=True)
        server.cursor().execute(f"DROP DATABASE IF EXISTS {SERVER_DATABASE}")
        server.cursor().execute(f"CREATE DATABASE {SERVER_DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        env["DATABASE_URL"] = url
        kinds.append("mysql-server")
    print(describe(connect))
    print(f"audited append, median of {args.rounds} rounds x {args.block} appends, both in one process")
    print("(file and mysql: SQLite; mysql-server: the mysql provider on the server)")
    try:
        for kind in kinds:
            subprocess.run(
                [sys.executable, __file__, f"--child={kind}", f"--rounds={args.rounds}", f"--block={args.block}"],
                cwd=ROOT,
                env=env,
                check=True,
            )
    finally:
        if args.server:
            server.cursor().execute(f"DROP DATABASE IF EXISTS {SERVER_DATABASE}")
            server.close()


if __name__ == "__main__":
    main()
