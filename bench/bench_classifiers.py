"""Scan rate of the moderation classifiers (``moderate_sessions``), entries per second.

Builds ``--sessions`` sessions of the ``mysql`` provider holding ``--entries``
message entries in all (created with their entries, so the write path
indexes them), about 1 % of them with personal data (a card number, an
e-mail address or a phone number in a sentence), the rest chat-like text of
20 to 60 words. Then prints, for the ``pii`` classifier:

- the classifier alone over the same texts (``PIIClassifier.classify``);
- a dry run of the scan (``services.classification.scan_entries``: the
  index read in batches, classified, nothing opened, no cursor moved);
- the real scan: every finding opens a flag through the operations layer
  (``moderation.flag_entry``: the entry read back, the flag and its audit
  record), the cursor stored after each batch;
- a second run, which scans nothing (the cursor).

    .venv/bin/python bench/bench_classifiers.py [--entries 50000] [--sessions 100] [--legs sqlite,mysql]

The SQLite leg works in a temporary folder; the MySQL leg in its own
database (``sessiontree_bench_classifiers``) on the server of
``DATABASE_URL``, dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DATABASE = "sessiontree_bench_classifiers"
WORDS = [
    "the",
    "a",
    "we",
    "it",
    "is",
    "to",
    "and",
    "of",
    "in",
    "that",
    "this",
    "for",
    "you",
    "on",
    "with",
    "can",
    "please",
    "file",
    "function",
    "test",
    "error",
    "build",
    "deploy",
    "value",
    "return",
    "config",
    "server",
    "request",
    "change",
    "look",
    "fix",
    "read",
    "write",
    "update",
    "check",
    "run",
]
PERSONAL = ["my card is 4111 1111 1111 1111", "mail me at jane.doe@example.org", "call +44 20 7946 0958"]


def text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]
    if rng.random() < 0.01:
        words.insert(rng.randrange(len(words)), rng.choice(PERSONAL))
    return " ".join(words)


def child(args: argparse.Namespace) -> None:
    from bench_mysql_provider import production_settings, server_url

    if args.kind == "mysql":
        os.environ["DATABASE_URL"] = server_url(DATABASE)[0]
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(Path(args.workdir) / "classifiers.sqlite3")
    production_settings()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from sessiontree.classifiers.pii import PIIClassifier
    from sessiontree.models import ModerationFlag
    from sessiontree.providers.factory import get_provider
    from sessiontree.services import classification

    rng = random.Random(5)
    provider = get_provider("mysql")
    per_session = args.entries // args.sessions
    texts: list[str] = []
    for n in range(args.sessions):
        entries: list[dict[str, Any]] = []
        parent = None
        for i in range(per_session):
            body = text(rng)
            texts.append(body)
            entry_id = f"{i:08x}"
            entries.append(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": {"role": "user" if i % 2 == 0 else "assistant", "content": body, "timestamp": 1},
                }
            )
            parent = entry_id
        provider.create_session(session_id=f"bench-{n:04d}", entries=entries)

    def rate(seconds: float, count: int) -> float:
        return round(count / seconds, 1) if seconds else float("inf")

    results: dict[str, Any] = {"entries": len(texts)}
    started = time.perf_counter()
    findings = PIIClassifier().classify(texts)
    results["classifier_only"] = rate(time.perf_counter() - started, len(texts))
    results["with_findings"] = sum(1 for found in findings if found)
    who = {"actor": "cli:bench", "channel": "cli"}
    started = time.perf_counter()
    dry = classification.scan_entries(classifiers=["pii"], dry_run=True, **who)["classifiers"][0]
    results["dry_run"] = rate(time.perf_counter() - started, dry["scanned"])
    started = time.perf_counter()
    real = classification.scan_entries(classifiers=["pii"], **who)["classifiers"][0]
    results["scan"] = rate(time.perf_counter() - started, real["scanned"])
    results["flags_opened"] = real["flags_opened"]
    assert ModerationFlag.objects.count() == real["flags_opened"]
    started = time.perf_counter()
    again = classification.scan_entries(classifiers=["pii"], **who)["classifiers"][0]
    results["rerun_ms"] = round((time.perf_counter() - started) * 1000, 1)
    results["rerun_scanned"] = again["scanned"]
    print(json.dumps(results))


def _mysql(sql: str) -> None:
    import MySQLdb
    from bench_mysql_provider import server_url

    conn = MySQLdb.connect(**server_url(DATABASE)[1], autocommit=True)
    conn.cursor().execute(sql)
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--legs", default="sqlite,mysql")
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
    with tempfile.TemporaryDirectory(prefix="bench-classifiers-") as workdir:
        for leg in legs:
            if leg == "mysql":
                _mysql(f"DROP DATABASE IF EXISTS {DATABASE}")
                _mysql(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            command = [sys.executable, __file__, "--child", f"--kind={leg}", f"--workdir={workdir}"]
            command += [f"--entries={args.entries}", f"--sessions={args.sessions}"]
            try:
                done = subprocess.run(
                    command,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                    capture_output=True,
                    text=True,
                    check=False,
                )
            finally:
                if leg == "mysql":
                    _mysql(f"DROP DATABASE IF EXISTS {DATABASE}")
            if done.returncode != 0:
                sys.exit(f"{leg} failed:\n{done.stderr[-3000:]}")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{leg}: {r['entries']:,} entries, {r['with_findings']} with personal data; pii classifier alone "
                f"{r['classifier_only']:,.0f} entries/s; scan, dry run {r['dry_run']:,.0f} entries/s; "
                f"scan opening flags {r['scan']:,.0f} entries/s ({r['flags_opened']} flags); "
                f"a second run {r['rerun_ms']} ms ({r['rerun_scanned']} scanned)"
            )


if __name__ == "__main__":
    main()
