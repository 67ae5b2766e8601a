"""The context at the leaf of a long session, before and after path facts (issue 23).

Sessions that look like a long agent conversation: ~0.5 KB messages, a
compaction every 400 entries keeping the last ~140, a side branch every 50
entries (2 %), a thinking level set once at the start and a model change
every 1,000. For each size and provider, side by side in one run (medians):

- ``whole path``: what ``build_context`` did before the facts: the root→leaf
  path read through the skeleton (``get_active_path``), then
  ``build_context_from_path``;
- ``facts``: ``build_context`` now (``core/path_facts.py``: the leaf's facts
  name the kept segment, read by key);

and checks that both give the same context. The ``file`` provider is timed
warm (its per-process index loaded).

Run from the repository root, on SQLite (a temporary database) or on a
MySQL/MariaDB server (``--mysql``: its own database, created, migrated and
dropped; ``DATABASE_URL`` names the server as for ``bench_mysql_provider.py``):

    .venv/bin/python bench/bench_context_facts.py [--sizes 10000,100000] [--repeat 5] [--mysql]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe, median_ms

EVERY = 400
KEEP = 140


def long_session(count: int) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    parent = None
    main = []
    for i in range(count):
        entry_id = f"{i:08x}"
        base = {"id": entry_id, "parentId": parent, "timestamp": "2026-04-19T00:00:00.000Z"}
        if i == 1:
            entry = {**base, "type": "thinking_level_change", "thinkingLevel": "high"}
        elif i % 1000 == 7:
            entry = {**base, "type": "model_change", "provider": "p", "modelId": f"m{i}"}
        elif i and i % EVERY == 0:
            first_kept = main[-KEEP] if len(main) >= KEEP else main[0]
            entry = {**base, "type": "compaction", "summary": "summary " * 60, "firstKeptEntryId": first_kept}
            entry["tokensBefore"] = i
        elif i % 50 == 25 and len(main) > 1:
            side = {**base, "parentId": main[-2], "type": "message"}
            side["message"] = {"role": "user", "content": [{"type": "text", "text": "a side question " * 30}]}
            entries.append(side)
            continue
        elif i % 2:
            text = "please look at this " * 25
            entry = {
                **base,
                "type": "message",
                "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            }
        else:
            message = {
                "role": "assistant",
                "content": [{"type": "text", "text": "here is what I found " * 22}],
                "provider": "anthropic",
                "model": "claude",
                "usage": {"input": 10, "output": 20},
                "stopReason": "stop",
            }
            entry = {**base, "type": "message", "message": message}
        entries.append(entry)
        main.append(entry_id)
        parent = entry_id
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mysql", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-facts-"))
    os.environ["SESSIONTREE_FILE_ROOT"] = str(work / "sessions")
    connect = None
    database = "sessiontree_bench_facts"
    if args.mysql:
        from bench_mysql_provider import server_url, setup_django

        url, connect = server_url(database)
        import MySQLdb

        conn = MySQLdb.connect(**connect)
        conn.cursor().execute(f"DROP DATABASE IF EXISTS {database}")
        conn.cursor().execute(f"CREATE DATABASE {database} CHARACTER SET utf8mb4")
        conn.close()
        setup_django(url)
    else:
        from bench_mysql_provider import production_settings

        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(work / "db.sqlite3")
        production_settings()
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    try:
        run(args, connect)
    finally:
        if connect is not None:
            import MySQLdb
            from django.db import connection

            connection.close()
            conn = MySQLdb.connect(**connect)
            conn.cursor().execute(f"DROP DATABASE IF EXISTS {database}")
            conn.close()


def run(args: argparse.Namespace, connect: dict[str, Any] | None) -> None:
    from sessiontree.core.context_builder import build_context_from_path
    from sessiontree.providers.factory import get_provider

    print(describe(connect))
    print(f"database: {'MySQL/MariaDB' if connect else 'SQLite'}; compaction every {EVERY} entries")
    print(f"{'provider':<8} {'entries':>8} {'messages':>8} {'whole path ms':>14} {'facts ms':>9} {'speed-up':>9}")
    for size in [int(s) for s in args.sizes.split(",")]:
        entries = long_session(size)
        for kind in ("file", "mysql"):
            provider = get_provider(kind)
            sid = provider.create_session(entries=entries)["session_id"]
            before = build_context_from_path(provider.get_active_path(sid))
            after = provider.build_context(sid)
            assert before == after, (kind, size)
            whole = median_ms(lambda p=provider, s=sid: build_context_from_path(p.get_active_path(s)), args.repeat)
            facts = median_ms(lambda p=provider, s=sid: p.build_context(s), args.repeat)
            print(
                f"{kind:<8} {size:>8,} {len(after['messages']):>8} {whole:>14.1f} {facts:>9.2f} {whole / facts:>8.0f}x"
            )
            provider.delete_session(sid, hard=True)


if __name__ == "__main__":
    main()
