"""The admin's entry-tree page at scale, on both providers.

For a 10,000-entry session with 50 branches and a 100,000-entry session (50
branches too; half the entries on the active path, labels, compactions), on
the ``file`` and the ``mysql`` provider, prints the server time of:

- the tree page (median of ``--repeat`` warm requests, and the first, cold,
  request: for the file provider that one parses the file, which a running
  server then keeps indexed), with the number of database queries;
- opening a folded branch and expanding a collapsed run (the on-demand fragments);
- the entry panel of the leaf (the whole path's context).

Then the ratios that matter: page time / target (targets: 0.5 s at 10,000
entries, 1 s at 100,000) and 100,000 / 10,000 (1.0 = the page costs the same
whatever the size). Requests go through Django's test client (middleware,
auth, templates), as a server would run them, without the network.

Runs on SQLite in a temporary file unless ``DATABASE_URL`` is a mysql:// URL:
then in its own database ``sessiontree_bench_admin`` on that server, dropped
at the end. Run from the repository root:

    DJANGO_DEBUG=1 .venv/bin/python bench/bench_admin.py [--repeat 5] [--sizes 10000,100000]

Side by side with another commit (``--compare-with main``): that commit's
tree is extracted (``git archive``) to a temporary folder, and the same
measurements (this script's) run in a fresh process for each tree in turn,
alternating which goes first, for ``--rounds`` rounds; the figures are the
medians over the rounds, with the ratio this tree / that one per figure
(below 1.0: faster than that commit). ``--code DIR`` measures the project in
DIR (what the comparison runs for each tree); ``--json`` prints one JSON
object per session instead of the sentence.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {10_000: 0.5, 100_000: 1.0}
BENCH_DB = "sessiontree_bench_admin"


def setup(tmp: str) -> str | None:
    """Configure Django on a scratch database; returns the MySQL database to drop, if any."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.environ["SESSIONTREE_FILE_ROOT"] = str(Path(tmp) / "sessions")
    url = os.environ.get("DATABASE_URL", "")
    drop = None
    if url.startswith("mysql"):
        import MySQLdb

        parts = urlsplit(url)
        connection = MySQLdb.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
        )
        connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {BENCH_DB} CHARACTER SET utf8mb4")
        connection.close()
        os.environ["DATABASE_URL"] = urlunsplit((parts.scheme, parts.netloc, f"/{BENCH_DB}", parts.query, ""))
        drop = BENCH_DB
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(Path(tmp) / "bench.sqlite3")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    Path(settings.SESSIONTREE_FILE_ROOT).mkdir(parents=True, exist_ok=True)
    settings.SESSIONTREE_FILE_ROOT = os.environ["SESSIONTREE_FILE_ROOT"]
    call_command("migrate", verbosity=0)
    # Measure as production runs: no debug templates, no query log.
    settings.DEBUG = False
    settings.TEMPLATES[0].setdefault("OPTIONS", {})["debug"] = False
    settings.ALLOWED_HOSTS = ["testserver"]
    return drop


def message(i: int, parent: str | None) -> dict[str, Any]:
    role = ("user", "assistant", "toolResult")[i % 3]
    if role == "user":
        body: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": f"step {i}: look at this " * 6}]}
    elif role == "assistant":
        body = {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading the file. " * 5},
                {"type": "toolCall", "id": f"call_{i}", "name": "read", "arguments": {"path": f"src/m{i}.py"}},
            ],
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280},
            "stopReason": "toolUse",
        }
    else:
        body = {
            "role": "toolResult",
            "toolCallId": f"call_{i - 1}",
            "toolName": "read",
            "content": [{"type": "text", "text": "def f():\n    return 1\n" * 4}],
            "isError": False,
        }
    return {"type": "message", "id": f"{i:08x}", "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
            "message": body}  # fmt: skip


def session_entries(size: int, branches: int) -> tuple[list[dict[str, Any]], str]:
    """``size`` entries: a main line of half of them (the active path), ``branches``
    side branches sharing the other half, a label every 500 and a compaction
    every 4,000 entries of the main line."""
    entries: list[dict[str, Any]] = []
    main = size // 2
    side = (size - main) // branches
    every = max(1, main // (branches + 1))
    counter = 0
    tip: str | None = None
    main_ids: list[str] = []
    while counter < size and len(main_ids) < main:
        entry = message(counter, tip)
        counter += 1
        entries.append(entry)
        tip = entry["id"]
        main_ids.append(tip)
        if len(main_ids) % every == 0 and (len(main_ids) // every) <= branches:
            branch_tip = tip
            for _ in range(side):
                branch = message(counter, branch_tip)
                counter += 1
                entries.append(branch)
                branch_tip = branch["id"]
        if len(main_ids) % 500 == 0:
            label = {"type": "label", "id": f"{counter:08x}", "parentId": tip, "timestamp": "2026-01-01T00:00:00.000Z",
                     "targetId": main_ids[-250], "label": f"mark {len(main_ids)}"}  # fmt: skip
            counter += 1
            entries.append(label)
            tip = label["id"]
        if len(main_ids) % 4000 == 0:
            compaction = {"type": "compaction", "id": f"{counter:08x}", "parentId": tip,
                          "timestamp": "2026-01-01T00:00:00.000Z", "summary": "## Goal\nKeep going.",
                          "firstKeptEntryId": main_ids[-30], "tokensBefore": 100_000}  # fmt: skip
            counter += 1
            entries.append(compaction)
            tip = compaction["id"]
    assert tip is not None
    return entries, tip


# CPU seconds of this process for the last request timed: on SQLite (in this
# process) the whole server's work, and far steadier than wall time on a
# machine other jobs share.
LAST_CPU: list[float] = [0.0]


def timed(client: Any, url: str) -> tuple[float, int, str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        cpu = time.process_time()
        started = time.perf_counter()
        response = client.get(url)
        body = response.content.decode()
        elapsed = time.perf_counter() - started
        LAST_CPU[0] = time.process_time() - cpu
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    return elapsed, len(queries.captured_queries), body


def timed_median(client: Any, url: str, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``repeat`` requests."""
    walls, cpus = [], []
    for _ in range(repeat):
        walls.append(timed(client, url)[0])
        cpus.append(LAST_CPU[0])
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--branches", type=int, default=50)
    parser.add_argument("--providers", default="file,mysql")
    parser.add_argument("--code", type=Path, default=ROOT, help="the project tree to measure (default: this one)")
    parser.add_argument("--json", action="store_true", help="one JSON object per session measured")
    parser.add_argument("--compare-with", metavar="REF", help="a commit to measure side by side with this tree")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the side-by-side comparison")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.compare_with:
        compare(args, sizes)
        return
    code = args.code.resolve()
    if code != ROOT:  # measure that tree's code, not this one's
        sys.path[:] = [str(code), *(entry for entry in sys.path if Path(entry or ".").resolve() != ROOT)]
        os.chdir(code)

    with tempfile.TemporaryDirectory(prefix="bench-admin-") as tmp:
        drop = setup(tmp)
        try:
            run(args, sizes)
        finally:
            if drop:
                from django.db import connection

                with connection.cursor() as cursor:
                    cursor.execute(f"DROP DATABASE {drop}")


def run(args: argparse.Namespace, sizes: list[int]) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from sessiontree import services
    from sessiontree.models import AgentSession
    from sessiontree.providers.file_provider import clear_index_cache

    user = User.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client()
    client.force_login(user)
    if not args.json:
        print(f"database: {connection.vendor}; {args.repeat} warm requests per figure (median); times in ms")
    results: dict[tuple[str, int], float] = {}
    for kind in args.providers.split(","):
        for size in sizes:
            entries, leaf = session_entries(size, args.branches)
            session_id = f"bench-{kind}-{size}"
            started = time.perf_counter()
            services.sessions.create_session(
                actor="bench", channel="internal", kind=kind, session_id=session_id, entries=entries
            )
            services.tree.switch_leaf(session_id=session_id, entry_id=leaf, actor="bench", channel="internal")
            build_s = time.perf_counter() - started
            row = AgentSession.objects.get(session_id=session_id)
            url = reverse("admin:sessiontree_agentsession_tree", args=[row.pk])

            clear_index_cache()
            cold, _q, _body = timed(client, url)
            cold_cpu = LAST_CPU[0]
            warm, warm_cpu = [], []
            for _ in range(args.repeat):
                elapsed, queries, body = timed(client, url)
                warm.append(elapsed)
                warm_cpu.append(LAST_CPU[0])
            page = statistics.median(warm)
            results[(kind, size)] = page
            rows = len(re.findall(r'<div class="entry', body))
            branch_url = re.search(r'data-url="([^"]+/tree/branch/[^"]+)"', body)
            run_url = re.search(r'data-url="([^"]+/tree/run/[^"]+)"', body)
            fragments = []
            figures: dict[str, float] = {}
            for name, found in (("branch", branch_url), ("run", run_url)):
                if found:
                    fragment_url = found.group(1).replace("&amp;", "&")
                    figures[name], figures[f"{name}_cpu"] = timed_median(client, fragment_url, args.repeat)
                    fragments.append(f"{name} {figures[name] * 1000:.0f}")
            entry_url = reverse("admin:sessiontree_agentsession_tree_entry", args=[row.pk, leaf])
            panel, panel_cpu = timed_median(client, entry_url, max(3, args.repeat // 2))
            if args.json:
                figures.update(
                    {
                        "page": page,
                        "page_cpu": statistics.median(warm_cpu),
                        "cold": cold,
                        "cold_cpu": cold_cpu,
                        "panel": panel,
                        "panel_cpu": panel_cpu,
                    }
                )
                # Rows whose message is rendered (0 before issue 25): which code was measured.
                rendered = body.count('class="row-body"')
                print(
                    json.dumps(
                        {"kind": kind, "size": size, "queries": queries, "rows": rows, "rendered": rendered, **figures}
                    ),
                    flush=True,
                )
                continue
            target = TARGETS.get(size)
            verdict = f"{page / target:.2f} of the {target:g} s target" if target else "no target"
            print(
                f"{kind:5} {size:>7,} entries: page {page * 1000:6.0f} (cold {cold * 1000:.0f}), "
                f"{queries} queries, {rows} rows shown; fragments: {', '.join(fragments) or 'none'}; "
                f"leaf's entry panel {panel * 1000:.0f}; {verdict}   [built in {build_s:.1f} s]"
            )
    for kind in args.providers.split(","):
        small, large = results.get((kind, sizes[0])), results.get((kind, sizes[-1]))
        if small and large and len(sizes) > 1 and not args.json:
            print(f"summary {kind}: page time {sizes[-1]:,} / {sizes[0]:,} entries = {large / small:.2f}")


FIGURES = ("page", "cold", "branch", "run", "panel")


def compare(args: argparse.Namespace, sizes: list[int]) -> None:
    """This tree and ``args.compare_with``'s, measured in turns by this script; the ratios."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", args.compare_with], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-admin-base-") as base:
        archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", base], input=archive.stdout, check=True)
        trees = {"base": Path(base), "head": ROOT}
        found: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        print(
            f"this tree ({head}, with its uncommitted changes) vs {args.compare_with} ({sha}): {args.rounds} rounds, "
            f"each a fresh process per tree and session, {args.repeat} warm requests per figure; times in ms",
            flush=True,
        )
        for round_number in range(args.rounds):
            for kind in args.providers.split(","):
                for size in sizes:
                    order = ["base", "head"] if round_number % 2 == 0 else ["head", "base"]
                    for name in order:
                        command = [
                            sys.executable, str(Path(__file__).resolve()), "--json", "--code", str(trees[name]),
                            "--sizes", str(size), "--providers", kind, "--repeat", str(args.repeat),
                            "--branches", str(args.branches),
                        ]  # fmt: skip
                        done = subprocess.run(
                            command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""}
                        )
                        if done.returncode != 0:
                            raise SystemExit(f"{name} {kind} {size}: {done.stderr.strip()[-2000:]}")
                        line = next(line for line in done.stdout.splitlines() if line.startswith("{"))
                        found.setdefault((name, kind, size), []).append(json.loads(line))
            print(f"round {round_number + 1} of {args.rounds} done", flush=True)
    print(
        f"{'session':<17} {'figure':<7} {'wall: ' + args.compare_with:>12} {'this':>6} {'ratio':>6}   "
        f"{'CPU: ' + args.compare_with:>11} {'this':>6} {'ratio':>6}"
    )
    for kind in args.providers.split(","):
        for size in sizes:
            base_runs, head_runs = found[("base", kind, size)], found[("head", kind, size)]
            for figure in FIGURES:
                if figure not in base_runs[0] or figure not in head_runs[0]:
                    continue
                before = statistics.median(run[figure] for run in base_runs) * 1000
                after = statistics.median(run[figure] for run in head_runs) * 1000
                cpu_before = statistics.median(run[f"{figure}_cpu"] for run in base_runs) * 1000
                cpu_after = statistics.median(run[f"{figure}_cpu"] for run in head_runs) * 1000
                counts = (
                    f"{base_runs[0]['queries']} → {head_runs[0]['queries']} queries, {base_runs[0]['rows']} → "
                    f"{head_runs[0]['rows']} rows ({base_runs[0]['rendered']} → {head_runs[0]['rendered']} rendered)"
                )
                print(
                    f"{kind + ' ' + format(size, ','):<17} {figure:<7} {before:>12.0f} {after:>6.0f} {after / before:>6.2f}   "
                    f"{cpu_before:>11.0f} {cpu_after:>6.0f} {cpu_after / cpu_before:>6.2f}"
                    + (f"   {counts}" if figure == "page" else "")
                )


if __name__ == "__main__":
    main()
