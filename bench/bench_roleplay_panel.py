"""Benchmark: the roleplay state panel and the state diff, on both providers.

Two sessions, written through ``create_session(entries=…)``:

- ``panel``: one 10,000-entry roleplay branch (user message, assistant reply,
  ``roleplay_finalize_turn`` result with a few ops and an event; now and then
  a memory, a review and its decision) with a checkpoint every 200 entries,
  the last one 199 entries before the leaf (the worst case);
- ``diff``: a trunk, then two branches of 5,000 entries each from the same
  entry, checkpoints every 200 entries along each path.

Timed (median over ``--repeat`` runs, garbage collector collected first and
paused while timing): ``roleplay.service.inspect_state_detail`` at the leaf
(what the admin's state panel and ``GET …/roleplay/state/`` call) and
``roleplay.service.diff_states`` between the two branch leaves (``GET
…/roleplay/diff/``), each also with the JSON encoding of its answer; the
first call of a fresh process (the file provider parses the file then); the
admin's state panel page and diff page and the REST API's ``GET
…/roleplay/state/`` and ``GET …/roleplay/diff/`` on the same sessions
(Django's test client: middleware, auth, reads and templates or JSON, DEBUG
off; warm, and first after the file provider's index is dropped); and, for
contrast, both reads on
the same sessions without checkpoints. Target: <= 200 ms each (server time).

The file leg runs on a temporary SQLite database and folder; the mysql leg on
its own database (``sessiontree_bench_rp`` by default) on the server of
``DATABASE_URL`` (default ``mysql://root@127.0.0.1:3306/test``; only host,
port and credentials are used), created, migrated and dropped by the script.
Each leg runs in a child process. Run from the repository root:

    .venv/bin/python bench/bench_roleplay_panel.py [--repeat 21] [--legs file,mysql]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHARACTER = "alice"
CHECKPOINT_EVERY = 200
TARGET_MS = 200.0
DEFAULT_URL = "mysql://root@127.0.0.1:3306/test"


# --- entries ---------------------------------------------------------------------------


def turn_bodies(turn: int) -> list[dict[str, Any]]:
    from roleplay import schema

    ops: list[dict[str, Any]] = [
        {"op": "replace" if turn else "add", "path": "/location", "value": f"place {turn % 17}"},
        {"op": "replace" if turn else "add", "path": "/turns", "value": turn},
    ]
    if turn == 0:
        ops.append({"op": "add", "path": "/relationship", "value": {"user": {"trust": 0.5}}})
        ops.append({"op": "add", "path": "/appearance", "value": {"hair": "black", "eyes": "grey"}})
        ops.append({"op": "add", "path": "/inventory", "value": ["rope"]})
    if turn % 7 == 3:
        ops.append({"op": "add", "path": "/inventory/-", "value": f"item {turn}"})
    reviews = []
    if turn % 20 == 5:
        reviews.append(
            {
                "reviewId": f"review-{turn}",
                "op": {"op": "replace", "path": "/relationship/user/trust", "value": (turn % 10) / 10},
                "note": "trust shift",
            }
        )
    commit = {
        "commitId": f"commit-{turn}",
        "ops": ops,
        "events": [{"summary": f"turn {turn} happened"}],
        "memories": [{"text": f"memory of turn {turn}"}] if turn % 5 == 0 else [],
        "reviews": reviews,
    }
    bodies: list[dict[str, Any]] = [
        {"type": "message", "message": {"role": "user", "content": f"turn {turn}: " + "what happens next? " * 10}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Alice looks around the square and answers. " * 10}],
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "stopReason": "toolUse",
            },
        },
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": f"call-{turn}",
                "toolName": schema.TURN_TOOL_NAME,
                "content": [{"type": "text", "text": "Turn finalized."}],
                "details": {"characterId": CHARACTER, "commit": commit},
                "isError": False,
            },
        },
    ]
    if turn % 20 == 6:
        bodies.append(
            {
                "type": "custom",
                "customType": schema.REVIEW_DECISION_TYPE,
                "data": {"reviewId": f"review-{turn - 1}", "characterId": CHARACTER, "decision": "accept"},
            }
        )
    return bodies


class Builder:
    """Entries with ids and parents; each path gets a checkpoint every ``CHECKPOINT_EVERY`` entries."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.turn = 0

    def extend(self, path: list[dict[str, Any]], count: int, *, checkpoints: bool, tag: str) -> list[dict[str, Any]]:
        """Append ``count`` entries after ``path``; returns the longer path."""
        from roleplay import schema
        from roleplay.reducer import make_checkpoint_data, reduce_branch

        path = list(path)
        pending: list[dict[str, Any]] = []
        for _ in range(count):
            index = len(path)
            if checkpoints and index and index % CHECKPOINT_EVERY == 0:
                body: dict[str, Any] = {
                    "type": "custom",
                    "customType": schema.CHECKPOINT_TYPE,
                    "data": make_checkpoint_data(reduce_branch(path, CHARACTER)),
                }
            elif index == 0:
                body = {"type": "custom", "customType": schema.IDENTITY_TYPE, "data": {"characterId": CHARACTER}}
            else:
                if not pending:
                    pending = turn_bodies(self.turn)
                    self.turn += 1
                body = pending.pop(0)
                if body.get("message", {}).get("toolName"):
                    # Unique commit ids across branches.
                    body = json.loads(json.dumps(body))
                    body["message"]["details"]["commit"]["commitId"] += f"-{tag}"
            entry = {
                "id": f"{len(self.entries) + 1:08x}",
                "parentId": path[-1]["id"] if path else None,
                "timestamp": "2026-04-19T00:00:00.000Z",
                **body,
            }
            self.entries.append(entry)
            path.append(entry)
        return path


def panel_session(length: int) -> tuple[list[dict[str, Any]], str]:
    builder = Builder()
    # The last checkpoint 199 entries before the leaf: the most the reducer replays.
    path = builder.extend([], length, checkpoints=True, tag="p")
    return builder.entries, path[-1]["id"]


def diff_session(trunk: int, branch: int) -> tuple[list[dict[str, Any]], str, str]:
    builder = Builder()
    base = builder.extend([], trunk, checkpoints=True, tag="t")
    left = builder.extend(base, branch, checkpoints=True, tag="l")
    right = builder.extend(base, branch, checkpoints=True, tag="r")
    return builder.entries, left[-1]["id"], right[-1]["id"]


def without_checkpoints(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same session with every checkpoint taken out (its child re-attached to its parent)."""
    from roleplay import schema

    dropped = {e["id"]: e["parentId"] for e in entries if e.get("customType") == schema.CHECKPOINT_TYPE}
    kept = []
    for entry in entries:
        if entry["id"] in dropped:
            continue
        parent = entry["parentId"]
        while parent in dropped:
            parent = dropped[parent]
        kept.append({**entry, "parentId": parent})
    return kept


# --- timing ----------------------------------------------------------------------------


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    gc.collect()
    gc.disable()
    try:
        timings = []
        for _ in range(repeat):
            started = time.perf_counter()
            fn()
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        gc.enable()
    return statistics.median(timings)


def first_call_ms(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def build_sessions(kind: str, args: argparse.Namespace) -> dict[str, str]:
    """Phase 1 (its own process): write the sessions, with and without checkpoints;
    returns the two branch tips of the diffed session."""
    from sessiontree.providers.factory import get_provider

    provider = get_provider(kind)
    entries, leaf = panel_session(args.panel)
    for sid, stored in (("panel", entries), ("panel-bare", without_checkpoints(entries))):
        provider.create_session(session_id=sid, entries=stored)
        provider.switch_leaf(sid, leaf)
    entries, left, right = diff_session(args.trunk, args.branch)
    for sid, stored in (("diff", entries), ("diff-bare", without_checkpoints(entries))):
        provider.create_session(session_id=sid, entries=stored)
        provider.switch_leaf(sid, left)
    return {"left": left, "right": right}


def time_reads(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """Phase 2 (a fresh process: no parsed file or connection cached yet): time the reads."""
    import orjson

    from roleplay import service
    from sessiontree.providers.factory import get_provider

    provider = get_provider(kind)
    results: dict[str, Any] = {"kind": kind}

    def panel(sid: str = "panel") -> Any:
        return service.inspect_state_detail(provider, sid)

    # Checkpoints taken out keep every other id: the same tips in both diffed sessions.
    left, right = args.tips.split(",")
    results["panel_first_ms"] = first_call_ms(panel)
    results["diff_first_ms"] = first_call_ms(lambda: service.diff_states(provider, "diff", left, right))
    stored = provider.get_session("panel") or {}  # after the first calls: the file provider parses here
    if stored.get("session_file"):
        results["panel_file_mib"] = os.path.getsize(stored["session_file"]) / 2**20

    detail = panel()
    results["panel_path"] = detail["path_length"]
    results["panel_revision"] = detail["revision"]
    results["panel_rows"] = len(detail["rows"])
    results["panel_replayed"] = (
        detail["path_length"]
        - 1
        - next(i for i, e in enumerate(provider.get_active_path("panel")) if e["id"] == detail["checkpoint_entry_id"])
    )
    results["panel_ms"] = median_ms(panel, args.repeat)
    results["panel_json_ms"] = median_ms(lambda: orjson.dumps(panel()), args.repeat)
    results["panel_json_kb"] = len(orjson.dumps(detail)) / 1024
    results["path_ms"] = median_ms(lambda: provider.get_active_path("panel"), args.repeat)

    result = service.diff_states(provider, "diff", left, right)
    results["diff_paths"] = (result["from"]["path_length"], result["to"]["path_length"])
    results["diff_items"] = sum(len(result[k]) for k in ("changed", "added", "removed"))
    results["diff_ms"] = median_ms(lambda: service.diff_states(provider, "diff", left, right), args.repeat)
    results["diff_json_ms"] = median_ms(
        lambda: orjson.dumps(service.diff_states(provider, "diff", left, right)), args.repeat
    )

    results.update(time_admin_pages(args, left, right))

    bare_left, bare_right = left, right
    bare = max(3, args.repeat // 3)
    results["panel_bare_ms"] = median_ms(lambda: panel("panel-bare"), bare)
    results["diff_bare_ms"] = median_ms(lambda: service.diff_states(provider, "diff-bare", bare_left, bare_right), bare)
    assert panel("panel-bare")["state_hash"] == detail["state_hash"], "checkpointed and bare states differ"
    bare_diff = service.diff_states(provider, "diff-bare", bare_left, bare_right)
    assert {k: bare_diff[k] for k in ("changed", "added", "removed")} == {
        k: result[k] for k in ("changed", "added", "removed")
    }, "checkpointed and bare diffs differ"
    return results


def time_admin_pages(args: argparse.Namespace, left: str, right: str) -> dict[str, Any]:
    """The admin's state panel page and diff page, and the REST API's
    ``GET …/roleplay/state/`` and ``GET …/roleplay/diff/``, on the same
    sessions: server time through Django's test client (middleware, auth,
    the reads, the templates or the JSON), as a server runs them without the
    network, DEBUG off."""
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from sessiontree.models import AgentSession
    from sessiontree.providers.file_provider import clear_index_cache

    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["testserver"]
    user = User.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client()
    client.force_login(user)
    panel = reverse("admin:sessiontree_agentsession_roleplay", args=[AgentSession.objects.get(session_id="panel").pk])
    diff = reverse(
        "admin:sessiontree_agentsession_roleplay_diff", args=[AgentSession.objects.get(session_id="diff").pk]
    )
    diff += f"?from={left}&to={right}"
    api_panel = "/api/sessions/panel/roleplay/state/"
    api_diff = f"/api/sessions/diff/roleplay/diff/?from={left}&to={right}"

    def get(url: str) -> bytes:
        response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        return response.content

    results: dict[str, Any] = {}
    pages = (("panel_page", panel), ("diff_page", diff), ("panel_api", api_panel), ("diff_api", api_diff))
    for name, url in pages:
        clear_index_cache()  # the file provider parses the file again: a page after a restart
        results[f"{name}_first_ms"] = first_call_ms(lambda url=url: get(url))
        with CaptureQueriesContext(connection) as queries:
            body = get(url)
        results[f"{name}_queries"] = len(queries.captured_queries)
        results[f"{name}_kb"] = len(body) / 1024
        results[f"{name}_ms"] = median_ms(lambda url=url: get(url), args.repeat)
    return results


# --- legs --------------------------------------------------------------------------------


def mysql_connect_args() -> tuple[Any, dict[str, Any]]:
    parts = urlsplit(os.environ.get("DATABASE_URL") or DEFAULT_URL)
    if not parts.scheme.startswith("mysql"):
        sys.exit(f"DATABASE_URL must be a mysql:// URL for the mysql leg, not {parts.scheme}://")
    connect = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": parts.username or "root",
        "password": parts.password or "",
        "charset": "utf8mb4",
    }
    return parts, connect


def child(args: argparse.Namespace) -> None:
    """One phase of one leg, in this process, on the storage the parent prepared."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "1")
    import django

    django.setup()
    if args.phase == "build":
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        tips = build_sessions(args.leg, args)
        print(json.dumps(tips))
    else:
        print(json.dumps(time_reads(args.leg, args)))


def run_leg(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """Prepare the leg's storage, build in one process, time in a fresh one, clean up."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "SESSIONTREE_FILE_ROOT": os.path.join(tmp, "sessions"),
            "SESSIONTREE_DEFAULT_PROVIDER": kind,
        }
        admin = None
        if kind == "file":
            env.pop("DATABASE_URL", None)
            env["SQLITE_PATH"] = os.path.join(tmp, "bench.sqlite3")
        else:
            import MySQLdb

            parts, connect = mysql_connect_args()
            admin = MySQLdb.connect(**connect)
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
            admin.cursor().execute(f"CREATE DATABASE `{args.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            env["DATABASE_URL"] = urlunsplit((parts.scheme, parts.netloc, f"/{args.database}", parts.query, ""))
        try:
            extra: list[str] = []
            for phase in ("build", "time"):
                command = [sys.executable, __file__, *sys.argv[1:], "--leg", kind, "--phase", phase, *extra]
                done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"{phase} phase failed:\n{done.stderr.strip()}")
                answer = json.loads(done.stdout.strip().splitlines()[-1])
                extra = ["--tips", f"{answer['left']},{answer['right']}"] if phase == "build" else []
            return dict(answer)
        finally:
            if admin is not None:
                admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
                admin.close()


def report(r: dict[str, Any]) -> None:
    def verdict(ms: float) -> str:
        return f"{ms:7.1f} ms  ({ms / TARGET_MS:.2f} of the {TARGET_MS:.0f} ms target)"

    print(f"== {r['kind']} provider")
    print(
        f"state panel: path {r['panel_path']} entries, revision {r['panel_revision']}, {r['panel_rows']} rows, "
        f"{r['panel_replayed']} entries replayed after the last checkpoint, answer {r['panel_json_kb']:.0f} KiB as JSON"
    )
    print(f"  inspect_state_detail median     {verdict(r['panel_ms'])}")
    print(f"  ... plus JSON encoding          {verdict(r['panel_json_ms'])}")
    stored = f" (parses the {r['panel_file_mib']:.1f} MiB file)" if "panel_file_mib" in r else ""
    print(f"  first call, fresh process       {verdict(r['panel_first_ms'])}{stored}")
    print(f"  of which get_active_path alone  {r['path_ms']:7.1f} ms")
    print(f"  same branch without checkpoints {verdict(r['panel_bare_ms'])}")
    print(f"state diff: paths {r['diff_paths'][0]} and {r['diff_paths'][1]} entries, {r['diff_items']} items")
    print(f"  diff_states median              {verdict(r['diff_ms'])}")
    print(f"  ... plus JSON encoding          {verdict(r['diff_json_ms'])}")
    print(f"  first call, fresh process       {verdict(r['diff_first_ms'])}")
    print(f"  same branches, no checkpoints   {verdict(r['diff_bare_ms'])}")
    print("admin pages and API requests (Django test client: middleware, auth, reads, templates or JSON; DEBUG off)")
    for name, what, unit in (
        ("panel_page", "state panel page", "HTML"),
        ("diff_page", "diff page", "HTML"),
        ("panel_api", "GET roleplay/state/", "JSON"),
        ("diff_api", "GET roleplay/diff/", "JSON"),
    ):
        print(
            f"  {what + ' median':31} {verdict(r[f'{name}_ms'])}, {r[f'{name}_queries']} queries, "
            f"{r[f'{name}_kb']:.0f} KiB of {unit}"
        )
        print(f"  ... first after a restart       {verdict(r[f'{name}_first_ms'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="runs of each timed read")
    parser.add_argument("--panel", type=int, default=10_000, help="entries of the panel's branch")
    parser.add_argument("--trunk", type=int, default=1_000, help="entries before the two diffed branches split")
    parser.add_argument("--branch", type=int, default=5_000, help="entries of each diffed branch after the split")
    parser.add_argument("--legs", default="file,mysql", help="comma-separated: file, mysql")
    parser.add_argument("--database", default="sessiontree_bench_rp", help="the mysql leg's database")
    parser.add_argument("--leg", help=argparse.SUPPRESS)  # set for a child process
    parser.add_argument("--phase", choices=("build", "time"), help=argparse.SUPPRESS)
    parser.add_argument("--tips", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.leg:
        child(args)
        return
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"panel branch {args.panel} entries; diff: trunk {args.trunk} + two branches of {args.branch}; "
        f"checkpoint every {CHECKPOINT_EVERY}; median of {args.repeat} runs; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    failed = False
    for kind in args.legs.split(","):
        try:
            report(run_leg(kind, args))
        except RuntimeError as exc:
            print(f"== {kind} provider: FAILED: {exc}")
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
