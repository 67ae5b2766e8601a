"""Data protection at scale: ``apply_retention`` over 100,000 expired
sessions, and one user's erasure (``erase_user_data``) with 1,000 sessions.

The sessions are ``mysql``-provider sessions, each a user message and an
answer with their search index rows. One session is written through the
provider (``create_session`` and two appends); the others are its rows
copied with ``bulk_create`` (meta row, entry rows, search rows): writing
100,000 sessions one append at a time would take longer than deleting them,
which is what is measured. 1 % of the expired sessions are held and 1 %
carry an open flag (both skipped, counted).

1. Retention: a dry run (what the admin's page and ``--dry-run`` cost),
   then the run, one hard delete per session through the operations layer
   (audit record, lineage, entries, search rows); sessions per second of
   each.
2. A user's erasure: 1,000 sessions of ``erin`` among 10,000 of other
   users; 10 of hers forked by ``bob`` through the fork service (so copies
   are found in the lineage and erased in place). The dry run (the plan:
   every session's lineage, copies, files and rows), then the erasure;
   milliseconds per session of each.

    .venv/bin/python bench/bench_protection.py [--sessions 100000] [--user-sessions 1000]
                                               [--others 10000] [--legs sqlite,mysql] [--keep]

The SQLite leg works in a temporary folder; the MySQL leg in its own
database (``sessiontree_bench_protection``) on the server of ``DATABASE_URL``
(default the local test server), dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DATABASE = "sessiontree_bench_protection"
BATCH = 2000
WHO = {"actor": "bench", "channel": "cli"}


def child(args: argparse.Namespace) -> None:
    from bench_mysql_provider import production_settings, server_url

    if args.kind == "mysql":
        url, _connect = server_url(DATABASE)
        os.environ["DATABASE_URL"] = url
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(Path(args.workdir) / "protection.sqlite3")
    os.environ["SESSIONTREE_FILE_ROOT"] = str(Path(args.workdir) / "files")
    os.environ["SESSIONTREE_RETENTION_DAYS"] = "30"
    production_settings()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import F
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from sessiontree.models import AgentSession, AgentSessionEntry, LegalHold, ModerationFlag, SearchEntry
    from sessiontree.providers.factory import get_provider
    from sessiontree.services import entries, protection, tree

    provider = get_provider("mysql")

    def template(session_id: str, owner: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        provider.create_session(session_id=session_id, user_id=owner, title="a session")
        user = {"role": "user", "content": f"{owner}'s question: " + "what about this " * 10, "timestamp": 1}
        answer = {
            "role": "assistant",
            "content": [{"type": "text", "text": "An answer " + "with some words " * 20}],
            "api": "x",
            "provider": "x",
            "model": "x",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            "stopReason": "stop",
            "timestamp": 2,
        }
        entries.append_message(session_id=session_id, message=user, provider=provider, **WHO)
        entries.append_message(session_id=session_id, message=answer, provider=provider, **WHO)
        row = AgentSession.objects.filter(session_id=session_id).values().get()
        entry_rows = list(AgentSessionEntry.objects.filter(session_id=session_id).values())
        search_rows = list(SearchEntry.objects.filter(session_id=session_id).values())
        return row, entry_rows, search_rows

    def clone(prefix: str, count: int, owner_of: Any, tpl: Any) -> list[str]:
        row, entry_rows, search_rows = tpl
        made: list[str] = []
        for start in range(0, count, BATCH):
            ids = [f"{prefix}-{n:06d}" for n in range(start, min(count, start + BATCH))]
            metas, rows, texts = [], [], []
            for n, sid in enumerate(ids, start):
                meta = {k: v for k, v in row.items() if k not in ("id",)}
                meta.update(session_id=sid, user_id=owner_of(n), tree_id=0, lft=1, rght=2, level=0)
                metas.append(AgentSession(**meta))
                for entry in entry_rows:
                    rows.append(
                        AgentSessionEntry(**{**{k: v for k, v in entry.items() if k != "id"}, "session_id": sid})
                    )
                for text in search_rows:
                    texts.append(SearchEntry(**{**{k: v for k, v in text.items() if k != "id"}, "session_id": sid}))
            AgentSession.objects.bulk_create(metas)
            # Each its own lineage tree, whose id is the root's own key (providers/lineage.py).
            AgentSession.objects.filter(session_id__in=ids).update(tree_id=F("pk"))
            AgentSessionEntry.objects.bulk_create(rows)
            SearchEntry.objects.bulk_create(texts)
            made += ids
        return made

    def idle(ids: list[str], days: int) -> None:
        old = timezone.now() - timedelta(days=days)
        for start in range(0, len(ids), BATCH):
            AgentSession.objects.filter(session_id__in=ids[start : start + BATCH]).update(updated_at=old)

    results: dict[str, Any] = {}
    # --- 1. retention ---------------------------------------------------------------------------------
    started = time.perf_counter()
    tpl = template("tpl-retention", "someone")
    expired = clone("old", args.sessions, lambda n: f"user{n % 997}", tpl)
    idle(expired, 40)
    for sid in expired[::100]:
        LegalHold.objects.create(session_id=sid, reason="bench", placed_by="bench", placed_at=timezone.now())
    for sid in expired[50::100]:
        ModerationFlag.objects.create(
            session_id=sid, entry_id=tpl[1][0]["entry_id"], category="other", source="operator",
            opened_by="bench", opened_at=timezone.now(),
        )  # fmt: skip
    results["retention_built_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    dry = protection.apply_retention(dry_run=True, **WHO)
    dry_s = time.perf_counter() - started
    started = time.perf_counter()
    done = protection.apply_retention(**WHO)
    run_s = time.perf_counter() - started
    results["retention"] = {
        "considered": done["considered"],
        "deleted": len(done["deleted"]),
        "skipped": {reason: len(ids) for reason, ids in done["skipped"].items()},
        "failed": len(done["failed"]),
        "dry_run_s": round(dry_s, 2),
        "dry_run_per_s": round(dry["considered"] / dry_s),
        "run_s": round(run_s, 1),
        "deleted_per_s": round(len(done["deleted"]) / run_s, 1),
        "left": AgentSession.objects.count(),
    }
    # --- 2. one user's erasure ---------------------------------------------------------------------------
    started = time.perf_counter()
    clone("other", args.others, lambda n: f"user{n % 997}", template("tpl-other", "user0"))
    hers = clone("erin", args.user_sessions, lambda n: "erin", template("tpl-erin", "erin"))
    first = (
        AgentSessionEntry.objects.filter(session_id=hers[0]).order_by("entry_seq").values_list("entry_id", flat=True)
    )
    answer_id = list(first)[1]
    for n, sid in enumerate(hers[: args.forks]):
        tree.fork_session(
            session_id=sid, entry_id=answer_id, position="at", new_session_id=f"bob-fork-{n}", provider=provider,
            **WHO,
        )  # fmt: skip
        AgentSession.objects.filter(session_id=f"bob-fork-{n}").update(user_id="bob")
    results["erasure_built_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    plan = protection.erase_user_data(user_id="erin", dry_run=True, **WHO)
    plan_s = time.perf_counter() - started
    started = time.perf_counter()
    report = protection.erase_user_data(user_id="erin", **WHO)
    erase_s = time.perf_counter() - started
    assert report == {**plan, "dry_run": False}
    assert not AgentSession.objects.filter(user_id="erin").exists()
    results["erasure"] = {
        "sessions": report["counts"]["sessions"],
        "entries": report["counts"]["entries"],
        "copies": report["counts"]["copies"],
        "rows": {name: len(ids) for name, ids in report["rows"].items()},
        "among": AgentSession.objects.count(),
        "dry_run_s": round(plan_s, 2),
        "dry_run_ms_per_session": round(plan_s * 1000 / report["counts"]["sessions"], 2),
        "run_s": round(erase_s, 2),
        "run_ms_per_session": round(erase_s * 1000 / report["counts"]["sessions"], 2),
    }
    print(json.dumps(results))


def _mysql(sql: str) -> None:
    import MySQLdb
    from bench_mysql_provider import server_url

    _url, connect = server_url(DATABASE)
    conn = MySQLdb.connect(**connect, autocommit=True)
    conn.cursor().execute(sql)
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000, help="expired sessions for retention")
    parser.add_argument("--user-sessions", type=int, default=1000, help="sessions of the user erased")
    parser.add_argument("--others", type=int, default=10_000, help="other users' sessions beside them")
    parser.add_argument("--forks", type=int, default=10, help="the user's sessions forked by another user")
    parser.add_argument("--legs", default="sqlite")
    parser.add_argument("--keep", action="store_true", help="keep the MySQL database")
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
    for leg in legs:
        with tempfile.TemporaryDirectory(prefix="bench-protection-") as workdir:
            if leg == "mysql":
                _mysql(f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            try:
                command = [sys.executable, __file__, "--child", f"--kind={leg}", f"--workdir={workdir}"]
                command += [f"--sessions={args.sessions}", f"--user-sessions={args.user_sessions}"]
                command += [f"--others={args.others}", f"--forks={args.forks}"]
                done = subprocess.run(
                    command,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                    capture_output=True,
                    text=True,
                    check=False,
                )
            finally:
                if leg == "mysql" and not args.keep:
                    _mysql(f"DROP DATABASE IF EXISTS {DATABASE}")
        if done.returncode != 0:
            sys.exit(f"{leg} failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        ret, era = result["retention"], result["erasure"]
        database = "SQLite" if leg == "sqlite" else "MySQL/MariaDB"
        print(f"{leg}: mysql provider on {database}")
        print(
            f"  retention: {ret['considered']:,} expired sessions (built in {result['retention_built_s']} s); "
            f"dry run {ret['dry_run_s']} s ({ret['dry_run_per_s']:,} sessions/s); "
            f"run {ret['run_s']} s: {ret['deleted']:,} deleted, {ret['deleted_per_s']:,} sessions/s; "
            f"skipped {ret['skipped']}; failed {ret['failed']}; {ret['left']:,} sessions left"
        )
        print(
            f"  erasure of one user: {era['sessions']:,} sessions ({era['entries']:,} entries, "
            f"{era['copies']} copies in another user's forks) among {era['among']:,} sessions; "
            f"dry run {era['dry_run_s']} s ({era['dry_run_ms_per_session']} ms/session); "
            f"erasure {era['run_s']} s ({era['run_ms_per_session']} ms/session); rows {era['rows']}"
        )


if __name__ == "__main__":
    main()
