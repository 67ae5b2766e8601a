"""The admin entry panel at the leaf of a long session, before and after it
read by key (issue 23).

The sessions of ``bench_context_facts.py`` (a compaction every 400 entries
keeping the last ~140, a side branch every 50 entries). For each size and
provider, side by side in one run (medians, warm: the file provider's index
and the tree page's per-process shape cache loaded):

- ``whole path``: what the panel read before: the session's shape (the whole
  skeleton and its labels), the root→leaf path's payloads, one step per path
  entry, and the moderation block's skeleton and every ``context_edit``
  (the previous ``entry_context`` and ``hidden_on_branches``, kept here);
- ``by key``: ``selectors.entry_context.entry_context`` and
  ``selectors.hidden.hidden_on_branches`` now (the context's segment, the
  last path ids, children, label, subtree and edits, read by key);

and checks that both give the same context and messages. Run from the
repository root, on SQLite or (``--mysql``) on the server ``DATABASE_URL``
names, as ``bench_context_facts.py``:

    .venv/bin/python bench/bench_entry_panel.py [--sizes 10000,100000] [--repeat 5] [--mysql]
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

from bench_context_facts import EVERY, long_session
from machine import describe, median_ms


def whole_path_panel(provider: Any, session_id: str, entry_id: str) -> tuple[dict[str, Any], int]:
    """The panel's reads before issue 23 (context, steps, label, children, hiding)."""
    from sessiontree.core.compaction import estimate_context_tokens
    from sessiontree.core.context_builder import build_context_from_path
    from sessiontree.core.path import walk_path
    from sessiontree.selectors.entry_context import _shorten_steps, context_steps
    from sessiontree.selectors.tree_window import read_shape, read_skeleton

    with provider.read(session_id) as view:
        state = view.state
        shape = read_shape(view)
        parent = shape.parent
        path = view.entries(walk_path(entry_id, parent))
        leaf_id = state.leaf_entry_id
        active = set(walk_path(leaf_id, parent)) if leaf_id is not None else set()
        shape.labels.get(entry_id)
        list(shape.children.get(entry_id, ()))
    context = build_context_from_path(path)
    steps, _ = context_steps(path, context)
    _shorten_steps(steps)
    estimate_context_tokens(context["messages"])
    assert entry_id in active
    with provider.read(session_id) as view:  # the moderation block
        skeleton = read_skeleton(view)
        view.entries([entry_id])
        [e for e in view.all_entries(types=("context_edit",)) if e.get("targetId") == entry_id]
        skeleton.shape.children.get(entry_id, ())
    return context, len(steps)


def by_key_panel(provider: Any, session_id: str, entry_id: str) -> tuple[dict[str, Any], int]:
    from sessiontree.selectors.entry_context import entry_context
    from sessiontree.selectors.hidden import hidden_on_branches

    detail = entry_context(provider, session_id, entry_id)
    hidden_on_branches(provider, session_id, entry_id, branches_when_unedited=False)  # as the panel asks
    assert detail.on_active_path
    return dict(detail.context), len(detail.steps) + detail.hidden_steps


def run(args: argparse.Namespace, connect: dict[str, Any] | None) -> None:
    from sessiontree.providers.factory import get_provider

    print(describe(connect))
    print(f"database: {'MySQL/MariaDB' if connect else 'SQLite'}; compaction every {EVERY} entries")
    print(
        f"{'provider':<8} {'entries':>8} {'steps before':>12} {'steps now':>9} "
        f"{'whole path ms':>14} {'by key ms':>10} {'speed-up':>9}"
    )
    for size in [int(s) for s in args.sizes.split(",")]:
        entries = long_session(size)
        for kind in ("file", "mysql"):
            provider = get_provider(kind)
            sid = provider.create_session(entries=entries)["session_id"]
            leaf = provider.get_session(sid)["leaf_entry_id"]
            before, steps_before = whole_path_panel(provider, sid, leaf)
            after, steps_now = by_key_panel(provider, sid, leaf)
            assert before == after, (kind, size)
            whole = median_ms(lambda p=provider, s=sid, e=leaf: whole_path_panel(p, s, e), args.repeat)
            keyed = median_ms(lambda p=provider, s=sid, e=leaf: by_key_panel(p, s, e), args.repeat)
            print(
                f"{kind:<8} {size:>8,} {steps_before:>12,} {steps_now:>9,} "
                f"{whole:>14.1f} {keyed:>10.2f} {whole / keyed:>8.0f}x"
            )
            provider.delete_session(sid, hard=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mysql", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-panel-"))
    os.environ["SESSIONTREE_FILE_ROOT"] = str(work / "sessions")
    connect = None
    database = "sessiontree_bench_panel"
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


if __name__ == "__main__":
    main()
