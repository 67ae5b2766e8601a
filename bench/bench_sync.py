"""``sync_sessions`` on a large generated Pi folder, against a real MySQL/MariaDB.

Generates a folder in Pi's layout (``--<cwd>--/<time>_<id>.jsonl``) of
``--sessions`` sessions holding ``--entries`` entries in all (user /
assistant-with-tool-call / tool-result turns, a session name, labels, a
branch every 400 entries, a compaction per session), then prints:

- ``import`` into the ``mysql`` provider: seconds, entries per second
  (target >= 20,000/s), and the growth of the process's peak RSS during it
  (bounded: files are streamed in batches, not whole folders);
- the same ``import`` again with no change (target <= 5 s);
- ``index`` of the same folder (file sessions registered in place; target
  <= 10 s) and again with no change.

Creates its own database (``sessiontree_bench_sync``, ``--database``),
migrates it and drops it at the end (``--keep`` keeps it); the generated
folder is removed too unless ``--folder`` names one to keep. The server
comes from ``DATABASE_URL`` (default ``mysql://root@127.0.0.1:3306/test``;
only host, port and credentials are used). Run from the repository root:

    .venv/bin/python bench/bench_sync.py [--sessions 200] [--entries 1000000] [--workers 1]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mysql_provider import production_settings, server_url

TARGET_RATE = 20_000
TARGET_RERUN_S = 5.0
TARGET_INDEX_S = 10.0


def ts(i: int) -> str:
    return f"2026-01-{1 + i // 86_400 % 28:02d}T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z"


def turn(i: int, entry_id: str, parent: str | None) -> dict[str, Any]:
    """One of a realistic mix of Pi entries (about 400 bytes each)."""
    kind = i % 3
    base: dict[str, Any] = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts(i)}
    if kind == 0:
        base["message"] = {
            "role": "user",
            "content": [{"type": "text", "text": f"step {i}: please look at this " * 6}],
            "timestamp": 1767225600000 + i,
        }
    elif kind == 1:
        base["message"] = {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading the file. " * 5},
                {"type": "toolCall", "id": f"call_{i}", "name": "read", "arguments": {"path": f"src/m{i}.py"}},
            ],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280},
            "stopReason": "toolUse",
            "timestamp": 1767225600000 + i,
        }
    else:
        base["message"] = {
            "role": "toolResult",
            "toolCallId": f"call_{i - 1}",
            "toolName": "read",
            "content": [{"type": "text", "text": f"def f{i}():\n    return {i}\n" * 3}],
            "isError": False,
            "timestamp": 1767225600000 + i,
        }
    return base


def generate(folder: Path, sessions: int, entries: int) -> tuple[int, int]:
    """Write the folder, one file at a time; returns (entries, bytes)."""
    per = entries // sessions
    total_entries = total_bytes = 0
    for s in range(sessions):
        session_id = str(uuid.UUID(int=s + 1))
        cwd = f"/home/dev/project-{s % 10}"
        path = (
            folder
            / f"--{cwd.strip('/').replace('/', '-')}--"
            / f"2026-01-01T00-00-{s % 60:02d}-000Z_{session_id}.jsonl"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            orjson.dumps({"type": "session", "version": 3, "id": session_id, "timestamp": ts(s), "cwd": cwd}),
        ]
        count = per if s < sessions - 1 else entries - per * (sessions - 1)
        ids: list[str] = []
        parent: str | None = None
        for i in range(count):
            entry_id = f"{s:03x}{i:05x}"[-8:]
            if i == 1:
                entry: dict[str, Any] = {
                    "type": "session_info",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": ts(i),
                    "name": f"Task {s}",
                }
            elif i % 400 == 399 and len(ids) > 50:
                # Pi's branch(): back 30 entries, then on from there.
                parent = ids[-30]
                entry = turn(0, entry_id, parent)
            elif i % 250 == 200:
                entry = {
                    "type": "label",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": ts(i),
                    "targetId": ids[-5],
                    "label": f"mark {i}",
                }
            elif i == count // 2:
                entry = {
                    "type": "compaction",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": ts(i),
                    "summary": "Earlier work: " + "summary " * 40,
                    "firstKeptEntryId": ids[-20],
                    "tokensBefore": 150_000,
                }
            else:
                entry = turn(i, entry_id, parent)
            lines.append(orjson.dumps(entry))
            ids.append(entry_id)
            parent = entry_id
        data = b"\n".join(lines) + b"\n"
        path.write_bytes(data)
        total_entries += count
        total_bytes += len(data)
    return total_entries, total_bytes


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # pragma: no cover - not Linux


class RssPeak:
    """The process's largest resident set while the block runs (sampled every 20 ms)."""

    def __enter__(self) -> RssPeak:
        self.start = self.peak = rss_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mib())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mib())

    @property
    def growth(self) -> float:
        return self.peak - self.start


class QueryClock:
    """Time spent waiting for the database (this thread's connection)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.statements = 0

    def __call__(self, execute: Any, sql: Any, params: Any, many: bool, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - start
            self.statements += 1


def run_sync(folder: Path, *args: str, clock: QueryClock | None = None) -> tuple[float, dict[str, Any]]:
    from django.core.management import call_command
    from django.db import connection

    out = io.StringIO()
    start = time.perf_counter()
    if clock is not None:
        with connection.execute_wrapper(clock):
            call_command("sync_sessions", str(folder), "--json", *args, stdout=out, stderr=io.StringIO())
    else:
        call_command("sync_sessions", str(folder), "--json", *args, stdout=out, stderr=io.StringIO())
    elapsed = time.perf_counter() - start
    report = orjson.loads(out.getvalue())
    if report["summary"]["failed"]:
        sys.exit(f"sync failed: {report['files'][:3]}")
    return elapsed, report


def empty_tables() -> None:
    from django.db import connection

    from sessiontree.models import AgentSession, AgentSessionEntry, AuditRecord, SyncedFile

    with connection.cursor() as cursor:
        cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
        for model in (AgentSessionEntry, AgentSession, AuditRecord, SyncedFile):
            cursor.execute(f"TRUNCATE TABLE {connection.ops.quote_name(model._meta.db_table)}")
        cursor.execute("SET FOREIGN_KEY_CHECKS = 1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--database", default="sessiontree_bench_sync")
    parser.add_argument("--folder", type=Path, help="generate here and keep it (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    import MySQLdb

    url, connect = server_url(args.database)
    admin = MySQLdb.connect(**connect)
    admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
    admin.cursor().execute(f"CREATE DATABASE `{args.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    temporary = args.folder is None
    folder = Path(tempfile.mkdtemp(prefix="bench-sync-")) if args.folder is None else args.folder
    file_root = tempfile.mkdtemp(prefix="bench-sync-root-")  # the file provider's own root (stays empty)
    try:
        os.environ["DATABASE_URL"] = url
        production_settings()
        os.environ["SESSIONTREE_FILE_ROOT"] = file_root
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)

        start = time.perf_counter()
        entries, size = generate(folder, args.sessions, args.entries)
        print(
            f"generated {args.sessions} sessions, {entries:,} entries, {size / 2**20:,.0f} MiB "
            f"in {time.perf_counter() - start:.1f} s ({folder})"
        )
        workers = ("--workers", str(args.workers))

        clock = QueryClock() if args.workers == 1 else None
        load_before = os.getloadavg()[0]
        with RssPeak() as rss:
            elapsed, report = run_sync(folder, "--mode", "import", "--provider", "mysql", *workers, clock=clock)
        rss_growth = rss.growth
        imported = report["summary"]["entries"]
        rate = imported / elapsed
        print(
            f"import:        {report['summary']['created']} sessions, {imported:,} entries in {elapsed:.1f} s: "
            f"{rate:,.0f} entries/s (target >= {TARGET_RATE:,}: ratio {rate / TARGET_RATE:.2f}); "
            f"peak RSS +{rss_growth:,.0f} MiB over {rss.start:,.0f} MiB (folder: {size / 2**20:,.0f} MiB)"
        )
        if clock is not None:
            print(
                f"               of which {clock.seconds:.1f} s ({clock.seconds / elapsed:.0%}) waiting for the "
                f"database ({clock.statements:,} statements), {elapsed - clock.seconds:.1f} s in Python"
            )
        print(
            f"               load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)"
        )
        elapsed, report = run_sync(folder, "--mode", "import", "--provider", "mysql", *workers)
        print(
            f"import again:  {report['summary']['unchanged']} unchanged in {elapsed:.2f} s "
            f"(target <= {TARGET_RERUN_S:.0f} s: ratio {elapsed / TARGET_RERUN_S:.2f})"
        )

        empty_tables()
        load_before = os.getloadavg()[0]
        with RssPeak() as rss:
            elapsed, report = run_sync(folder, "--mode", "index", *workers)
        rss_growth = rss.growth
        print(
            f"index:         {report['summary']['created']} sessions, {report['summary']['entries']:,} entries "
            f"in {elapsed:.1f} s (target <= {TARGET_INDEX_S:.0f} s: ratio {elapsed / TARGET_INDEX_S:.2f}); "
            f"peak RSS +{rss_growth:,.0f} MiB"
        )
        print(f"               load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
        elapsed, report = run_sync(folder, "--mode", "index", *workers)
        print(f"index again:   {report['summary']['unchanged']} unchanged in {elapsed:.2f} s")
    finally:
        if not args.keep:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
        admin.close()
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(file_root, ignore_errors=True)


if __name__ == "__main__":
    main()
