"""Append latency of both providers, against an earlier commit, in one run.

Runs the same measurement on this checkout ("head") and on a base commit
("base", default ``HEAD~1``; checked out with ``git worktree`` into a
temporary folder), alternating rounds so machine noise hits both alike, and
prints per provider the median append latency of each and their ratio.

Side by side (no pass/fail), per provider: a navigate through the
operations layer (a leaf move between two entries, with its audit record)
and ``build_context`` of the same session (about 440 entries), base and head.

Also prints:
- the audited append through the operations layer (``services.entries``,
  what the API, the admin and the commands call: the audit record in the
  same transaction), base and head;
- for head, the ``mysql`` append as a multiple of a plain autocommitted
  ``INSERT`` into the same table (mysqlclient, the floor a database append
  cannot beat).

The ``file`` provider keeps its meta rows in SQLite; ``mysql`` runs on the
MySQL/MariaDB server of ``DATABASE_URL`` (default the local test server) in
databases of its own, dropped at the end; ``mysql-sqlite`` is the ``mysql``
provider on a SQLite database (its tables beside the ``file`` provider's
meta rows, as in a checkout without ``DATABASE_URL``). Both variants run with
DEBUG off. Run from the repository root:

    .venv/bin/python bench/bench_append.py [--base REV] [--rounds 5] [--samples 200] [--kinds file,mysql,mysql-sqlite]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_URL = "mysql://root@127.0.0.1:3306/test"
KINDS = ("file", "mysql", "mysql-sqlite")


# --- the child: one measurement round on one code tree ------------------------------


def child(args: argparse.Namespace) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ.update(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="bench", DJANGO_ALLOWED_HOSTS="localhost")
    results: dict[str, Any] = {}
    if args.kind in ("file", "mysql-sqlite"):
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(Path(args.workdir) / "meta.sqlite3")
    else:
        os.environ["DATABASE_URL"] = args.url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from sessiontree.providers.factory import get_provider

    if args.kind == "file":
        from sessiontree.providers.file_provider import FileSessionTreeProvider

        provider: Any = FileSessionTreeProvider(root=Path(args.workdir) / "sessions")
    else:
        provider = get_provider("mysql")
    session_id = f"bench-{os.getpid()}-{time.monotonic_ns()}"
    provider.create_session(session_id=session_id)
    for i in range(20):
        provider.append_message(session_id, {"role": "user", "content": f"warm {i}"})
    results["provider"] = _median_ms(
        lambda i: provider.append_message(session_id, {"role": "user", "content": f"sample {i}"}), args.samples
    )
    try:
        from sessiontree.services import entries
    except ImportError:  # the base commit has no operations layer
        entries = None
    if entries is not None:
        results["audited"] = _median_ms(
            lambda i: entries.append_message(
                session_id=session_id,
                message={"role": "user", "content": f"audited {i}"},
                actor="bench",
                channel="internal",
                provider=provider,
            ),
            args.samples,
        )
        from sessiontree.services import tree

        ids = [entry["id"] for entry in provider.list_entries(session_id)[-2:]]
        results["navigate"] = _median_ms(
            lambda i: tree.navigate_tree(
                session_id=session_id, target_id=ids[i % 2], actor="bench", channel="internal", provider=provider
            ),
            args.samples,
        )
    results["context"] = _median_ms(lambda i: provider.build_context(session_id), args.samples)
    if args.kind == "mysql":
        results["floor"] = _insert_floor(args.url, args.samples)
    print(json.dumps(results))


def _median_ms(call: Any, samples: int) -> float:
    timings = []
    for i in range(samples):
        start = time.perf_counter()
        call(i)
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def _insert_floor(url: str, samples: int) -> float:
    """A plain autocommitted INSERT of a comparable row into a scratch table."""
    import MySQLdb

    parts = urlsplit(url)
    conn = MySQLdb.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=parts.path.lstrip("/"),
        charset="utf8mb4",
        autocommit=True,
    )
    cursor = conn.cursor()
    cursor.execute(
        "CREATE TABLE IF NOT EXISTS bench_floor (id BIGINT AUTO_INCREMENT PRIMARY KEY, session_id BIGINT, "
        "entry_id VARCHAR(64), parent_entry_id VARCHAR(64), entry_seq INT, message LONGTEXT, extra LONGTEXT, "
        "UNIQUE KEY (session_id, entry_id), UNIQUE KEY (session_id, entry_seq))"
    )
    message = json.dumps({"role": "user", "content": "sample"})
    timings = []
    for i in range(samples):
        start = time.perf_counter()
        cursor.execute(
            "INSERT INTO bench_floor (session_id, entry_id, parent_entry_id, entry_seq, message, extra) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (
                os.getpid(),
                f"{time.monotonic_ns():x}"[-8:] + str(i),
                "parent00",
                i + 1 + os.getpid() * 10000,
                message,
                "{}",
            ),
        )
        timings.append((time.perf_counter() - start) * 1000)
    conn.close()
    return statistics.median(timings)


# --- the parent: checkouts, databases, alternation, figures -----------------------------


def _mysql_admin(url: str, sql: str) -> None:
    import MySQLdb

    parts = urlsplit(url)
    conn = MySQLdb.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        autocommit=True,
    )
    conn.cursor().execute(sql)
    conn.close()


def _database_url(server: str, name: str) -> str:
    parts = urlsplit(server)
    return f"{parts.scheme}://{parts.netloc}/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--kinds", default="file,mysql,mysql-sqlite", help="providers to measure (comma-separated)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    kinds = [kind for kind in args.kinds.split(",") if kind]
    if not kinds or any(kind not in KINDS for kind in kinds):
        sys.exit(f"--kinds takes some of {', '.join(KINDS)}")
    server = os.environ.get("DATABASE_URL") or DEFAULT_URL
    if not urlsplit(server).scheme.startswith("mysql"):
        sys.exit("DATABASE_URL must be a mysql:// URL (the mysql provider is measured on it)")
    base_rev = subprocess.run(
        ["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_mysql_provider import server_url
    from machine import describe

    print(describe(server_url("test")[1]))  # the server's round trip (no database needed)
    tmp = Path(tempfile.mkdtemp(prefix="bench-append-"))
    base_tree = tmp / "base"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base_tree), base_rev], cwd=ROOT, check=True)
    trees = {"base": base_tree, "head": ROOT}
    # Named after this run, so that two runs on one server never share a database.
    databases = {name: f"sessiontree_bench_append_{os.getpid()}_{name}" for name in trees}
    figures: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        for name in databases.values():
            _mysql_admin(server, f"DROP DATABASE IF EXISTS {name}")
            _mysql_admin(server, f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        for round_no in range(args.rounds):
            order = ["base", "head"] if round_no % 2 == 0 else ["head", "base"]
            for kind in kinds:
                for variant in order:
                    workdir = tmp / f"{variant}-{kind}"
                    workdir.mkdir(exist_ok=True)
                    completed = subprocess.run(
                        [
                            sys.executable,
                            str(ROOT / "bench" / "bench_append.py"),
                            "--child",
                            f"--kind={kind}",
                            f"--workdir={workdir}",
                            f"--url={_database_url(server, databases[variant])}",
                            f"--samples={args.samples}",
                        ],
                        cwd=trees[variant],
                        env={**os.environ, "PYTHONPATH": str(trees[variant])},
                        capture_output=True,
                        text=True,
                    )
                    if completed.returncode != 0:
                        sys.exit(f"{variant}/{kind} failed:\n{completed.stderr[-3000:]}")
                    figures.setdefault((variant, kind), []).append(
                        json.loads(completed.stdout.strip().splitlines()[-1])
                    )
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for name in databases.values():
            _mysql_admin(server, f"DROP DATABASE IF EXISTS {name}")
        subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False)
        shutil.rmtree(tmp, ignore_errors=True)

    def median(variant: str, kind: str, key: str) -> float:
        return statistics.median(run[key] for run in figures[(variant, kind)])

    print(f"append latency, median of {args.rounds} rounds x {args.samples} appends (ms); base = {base_rev}")
    for kind in kinds:
        base, head = median("base", kind, "provider"), median("head", kind, "provider")
        print(f"  {kind:<12}  base {base:7.3f}   head {head:7.3f}   head/base {head / base:5.2f}")
    for key, what in (("navigate", "navigate (operations layer)"), ("context", "build_context")):
        for kind in kinds:
            base, head = median("base", kind, key), median("head", kind, key)
            print(f"  {kind:<12}  {what}: base {base:7.3f}   head {head:7.3f}   head/base {head / base:5.2f}")
    for kind in kinds:
        base, head = median("base", kind, "audited"), median("head", kind, "audited")
        print(
            f"  {kind:<12}  audited append (operations layer, what the faces call): "
            f"base {base:7.3f}   head {head:7.3f}   head/base {head / base:5.2f}"
        )
    if "mysql" not in kinds:
        return
    floor = median("head", "mysql", "floor")
    head_mysql = median("head", "mysql", "provider")
    base_floor = median("base", "mysql", "floor")
    print(f"  mysql  plain autocommit INSERT: {floor:.3f} ms; provider append / INSERT = {head_mysql / floor:.2f}")
    print(f"         (base: {median('base', 'mysql', 'provider') / base_floor:.2f})")


if __name__ == "__main__":
    main()
