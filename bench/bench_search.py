"""Search across sessions over 1,000,000 indexed entries, on SQLite (FTS5)
and on MySQL/MariaDB (InnoDB FULLTEXT).

Each leg builds its own database: ``--sessions`` session rows and
``--entries`` search index rows spread over them (written straight into the
index table in batches: the index is what is measured, and appending a
million entries through the providers would take most of an hour). Texts
are 8 to 40 words drawn from a 20,000-word made-up vocabulary with a Zipf
distribution (a few words are in a large share of all entries, most in a
handful), so queries meet posting lists of every length; a card number is
planted in 50 entries and one rare word in 10; 1 % of the sessions belong
to user ``alice``.

Then ``services.moderation.search_entries`` (what the API, the admin and
the command call: the engine's query, the texts of the page, the snippets)
is timed ``--repeat`` times per query, as a system actor (every session),
limit 50: a rare, a medium and a very common word; two words; the card
number (a phrase); a word in no entry; a common word in one user's
sessions; a common word in one session. Prints per leg each query's median
and the number of index rows that hold it, then the median of all queries
against the target (100 ms).

    .venv/bin/python bench/bench_search.py [--entries 1000000] [--sessions 1000] [--repeat 20]
                                           [--legs sqlite,mysql] [--keep]

The SQLite leg works in a temporary folder; the MySQL leg in its own
database (``sessiontree_bench_search``) on the server of ``DATABASE_URL``
(default the local test server), dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DATABASE = "sessiontree_bench_search"
VOCABULARY = 20_000
SEED = 21
CARD = "4111 1111 1111 1111"
RARE = "xylophonist"
TARGET_MS = 100.0


def made_up_words(count: int, rng: random.Random) -> list[str]:
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words, key=lambda w: (len(w), w))  # deterministic; rank = position


def texts(entries: int, words: list[str], rng: random.Random) -> Any:
    """(index, text) for every entry: Zipf-distributed words, planted rarities."""
    weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(words))]
    cumulative = list(itertools.accumulate(weights))
    card_at = set(rng.sample(range(entries), 50))
    rare_at = set(rng.sample(range(entries), 10))
    for i in range(entries):
        chosen = rng.choices(words, cum_weights=cumulative, k=rng.randint(8, 40))
        if i in card_at:
            chosen.insert(len(chosen) // 2, f"card {CARD}")
        if i in rare_at:
            chosen.append(RARE)
        yield i, " ".join(chosen)


def child(args: argparse.Namespace) -> None:
    from bench_mysql_provider import production_settings, server_url

    if args.kind == "mysql":
        url, _connect = server_url(DATABASE)
        os.environ["DATABASE_URL"] = url
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(Path(args.workdir) / "search.sqlite3")
    production_settings()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from sessiontree.models import AgentSession, SearchEntry
    from sessiontree.services import moderation

    rng = random.Random(SEED)
    words = made_up_words(VOCABULARY, rng)
    quote = connection.ops.quote_name
    started = time.perf_counter()
    if not SearchEntry.objects.exists():
        sessions = [f"bench-{n:05d}" for n in range(args.sessions)]
        owners = ["alice" if n % 100 == 0 else f"user{n % 97}" for n in range(args.sessions)]
        columns = ["session_id", "provider", "status", "user_id", "cwd", "session_file", "metadata", "header"]
        columns += ["entry_count", "branch_count", "compaction_count", "leaf_in_flight", "leaf_has_children"]
        columns += ["created_at", "updated_at", "lft", "rght", "tree_id", "level"]
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        rows = [
            (sid, "mysql", "active", owner, "", "", "{}", "{}", 0, 0, 0, False, False, now, now, 1, 2, n + 1, 0)
            for n, (sid, owner) in enumerate(zip(sessions, owners, strict=True))
        ]
        with connection.cursor() as cursor, transaction.atomic():
            cursor.executemany(
                f"INSERT INTO {quote(AgentSession._meta.db_table)} ({', '.join(quote(c) for c in columns)}) "
                f"VALUES ({', '.join(['%s'] * len(columns))})",
                rows,
            )
        sql = (
            f"INSERT INTO {quote(SearchEntry._meta.db_table)} (session_id, entry_id, entry_type, role, text) "
            "VALUES (%s, %s, %s, %s, %s)"
        )
        batch: list[tuple[Any, ...]] = []
        for i, text in texts(args.entries, words, rng):
            batch.append((sessions[i % args.sessions], f"{i:08x}", "message", "user" if i % 2 else "assistant", text))
            if len(batch) == 5000:
                with connection.cursor() as cursor, transaction.atomic():
                    cursor.executemany(sql, batch)
                batch = []
        if batch:
            with connection.cursor() as cursor, transaction.atomic():
                cursor.executemany(sql, batch)
    built = time.perf_counter() - started
    started = time.perf_counter()
    from sessiontree.providers import search_index

    search_index.catch_up()  # SQLite: FTS5 takes the rows (InnoDB took them at each commit)
    caught_up = time.perf_counter() - started

    # Ranks whose words are in about 11 %, 1 % and 0.06 % of the entries
    # (and the top word, in 95 %: a stop word in all but name).
    top, common, medium, uncommon = words[0], words[20], words[200], words[3000]
    queries = {
        f"common word, ~11% ({common})": {"q": common},
        f"medium word, ~1% ({medium})": {"q": medium},
        f"uncommon word, ~0.06% ({uncommon})": {"q": uncommon},
        f"rare word ({RARE})": {"q": RARE},
        "two words (~1% and ~36%)": {"q": f"{medium} {words[5]}"},
        "card number (a phrase)": {"q": CARD},
        "no entry holds it": {"q": "zzzqqq"},
        "common word, one user's sessions (1%)": {"q": common, "user": "alice"},
        "common word, one session": {"q": common, "session_id": "bench-00042"},
        f"the top word, ~95% ({top})": {"q": top},
    }

    def holding(q: str) -> int:
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("SELECT COUNT(*) FROM neta_search_fts WHERE neta_search_fts MATCH %s", [f'"{q}"'])
            else:
                cursor.execute(
                    f"SELECT COUNT(*) FROM {quote(SearchEntry._meta.db_table)} "
                    "WHERE MATCH (text) AGAINST (%s IN BOOLEAN MODE)",
                    [f'+"{q}"'],
                )
            return int(cursor.fetchone()[0])

    results: dict[str, Any] = {
        "built_s": round(built, 1),
        "caught_up_s": round(caught_up, 1),
        "rows": SearchEntry.objects.count(),
        "queries": {},
    }
    from sessiontree.core.errors import SearchTooBroad

    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@innodb_buffer_pool_size")
            results["buffer_pool_mb"] = int(cursor.fetchone()[0]) // 2**20
    for name, query in queries.items():
        timings = []
        found: int | str = 0
        for run in range(args.repeat + 1):  # the first run warms the caches
            start = time.perf_counter()
            try:
                found = len(moderation.search_entries(actor="bench", **query))
            except SearchTooBroad:
                found = "search_too_broad"
            if run:
                timings.append((time.perf_counter() - start) * 1000)
        results["queries"][name] = {
            "median_ms": round(statistics.median(timings), 2),
            "max_ms": round(max(timings), 2),
            "returned": found,
            "rows_holding": holding(query["q"]) if " " not in query["q"] else None,
        }
    print(json.dumps(results))


def _mysql(sql: str) -> Any:
    import MySQLdb
    from bench_mysql_provider import server_url

    _url, connect = server_url(DATABASE)
    conn = MySQLdb.connect(**connect, autocommit=True)
    cursor = conn.cursor()
    cursor.execute(sql)
    row = cursor.fetchone() if cursor.description else None
    conn.close()
    return row[0] if row else None


def _resize_buffer_pool(megabytes: int) -> None:
    """``SET GLOBAL innodb_buffer_pool_size``, then wait while the server
    resizes it (in the background)."""
    _mysql(f"SET GLOBAL innodb_buffer_pool_size = {megabytes * 2**20}")
    time.sleep(0.5)
    for _ in range(600):
        status = _mysql(
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
            "WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_RESIZE_STATUS'"
        )
        if not status or str(status).startswith("Completed"):
            return
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--legs", default="sqlite,mysql")
    parser.add_argument("--keep", action="store_true", help="keep the MySQL database (a later run reuses it)")
    parser.add_argument(
        "--buffer-pool-mb",
        type=int,
        help="MySQL leg: set the server's innodb_buffer_pool_size to this for the run (restored after)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=float,
        default=0,
        help="SESSIONTREE_SEARCH_TIMEOUT_MS for the queries (default 0: the engine's own time, no limit)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from bench_mysql_provider import server_url
    from machine import describe

    legs = [leg.strip() for leg in args.legs.split(",") if leg.strip()]
    print(describe(server_url("test")[1] if "mysql" in legs else None))
    print(f"search over {args.entries:,} indexed entries in {args.sessions:,} sessions, {args.repeat} runs a query")
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-search-") as workdir:
        for leg in legs:
            pool_before = None
            if leg == "mysql":
                _mysql(f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
                if args.buffer_pool_mb:
                    pool_before = int(_mysql("SELECT @@innodb_buffer_pool_size")) // 2**20
                    _resize_buffer_pool(args.buffer_pool_mb)
            try:
                command = [sys.executable, __file__, "--child", f"--kind={leg}", f"--workdir={workdir}"]
                command += [f"--entries={args.entries}", f"--sessions={args.sessions}", f"--repeat={args.repeat}"]
                done = subprocess.run(
                    command,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT), "SESSIONTREE_SEARCH_TIMEOUT_MS": str(args.timeout_ms)},
                    capture_output=True,
                    text=True,
                    check=False,
                )
            finally:
                if leg == "mysql" and not args.keep:
                    _mysql(f"DROP DATABASE IF EXISTS {DATABASE}")
                if pool_before is not None:
                    _resize_buffer_pool(pool_before)
            if done.returncode != 0:
                sys.exit(f"{leg} failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            engine = "FTS5" if leg == "sqlite" else f"InnoDB FULLTEXT, {result['buffer_pool_mb']} MiB buffer pool"
            print(
                f"{leg} ({engine}): {result['rows']:,} rows, written in {result['built_s']} s "
                f"(+ {result['caught_up_s']} s for the engine to take them in after the bulk load)"
            )
            for name, figures in result["queries"].items():
                holding = f", {figures['rows_holding']:,} rows hold it" if figures["rows_holding"] is not None else ""
                returned = figures["returned"]
                answer = f"{returned} returned" if isinstance(returned, int) else f"answered {returned}"
                print(
                    f"  {name:<40} median {figures['median_ms']:8.2f} ms  max {figures['max_ms']:8.2f} ms  "
                    f"({answer}{holding})"
                )
            medians[leg] = statistics.median(f["median_ms"] for f in result["queries"].values())
    for leg, value in medians.items():
        verdict = "within" if value <= TARGET_MS else "OVER"
        print(f"{leg}: median of the query medians {value:.2f} ms ({verdict} the {TARGET_MS:.0f} ms target)")


if __name__ == "__main__":
    main()
