"""Roleplay writes against the length of a roleplay session, on both
providers (issue 23).

Roleplay sessions of 1,000, 10,000 and 100,000 entries (``--sizes``) made by
``bench/history_sessions.generate(roleplay=True)`` (an identity near the
root, a ``roleplay_finalize_turn`` result with a one-op commit every turn, a
checkpoint after each compaction, the last ~100 entries before the leaf),
stored as ``bench_history`` stores them (``file``: registered where it lies;
``mysql``: imported in batches). At the leaf, untimed, a turn that proposes
a review and a turn marked incomplete are appended; then each write below
is timed ``--repeat`` times (median, after one cold run not counted), each
run followed, untimed, by a move of the leaf back where it was (so every
run writes on the same branch, and the session grows by one entry a run):

- ``correct``: ``correct_state`` of ``/turn`` without ``correctsCommitId``
  (the commit that set it found from provenance);
- ``correct_recent``: the same naming the branch's last commit;
- ``correct_old``: the same naming the branch's first commit (near the root);
- ``amend``: ``amend_review``; ``accept``: ``decide_review`` accepting it;
- ``repair``: ``repair_turn`` of the incomplete turn;
- ``checkpoint``: ``create_checkpoint``; ``compaction_checkpoint``:
  ``history.checkpoint_after_compaction`` at the leaf;
- ``archive``: ``archive``;
- ``plan``: ``plan_write(correct_state, …)`` (all the checks, nothing appended).

Each figure is followed by its ratio to the smallest size's (``1.00`` = it
costs the same whatever the history), and the SQL statements one run sent.

Runs on SQLite in a temporary file unless ``DATABASE_URL`` is a mysql:// URL
(then its own database on that server, ``--database``, created and dropped
at the end), as ``bench_history.py``. From the repository root:

    .venv/bin/python bench/bench_roleplay_writes.py [--sizes 1000,10000,100000] [--repeat 5] [--providers file,mysql]
    DATABASE_URL=mysql://root@127.0.0.1:3306/x .venv/bin/python bench/bench_roleplay_writes.py [--database NAME]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import bench_history  # noqa: E402
from bench.bench_history import import_mysql, setup  # noqa: E402
from bench.history_sessions import CHARACTER, generate  # noqa: E402

WRITES = (
    "correct",
    "correct_recent",
    "correct_old",
    "amend",
    "accept",
    "repair",
    "checkpoint",
    "compaction_checkpoint",
    "archive",
    "plan",
)
REVIEW = "bench-review"
TURN = "bench-incomplete"


def prepare(provider: Any, session_id: str) -> dict[str, Any]:
    """Append (untimed) a turn proposing a review and a turn marked incomplete;
    return the leaf and the branch's first and last commit ids."""
    from roleplay import schema

    review = {"reviewId": REVIEW, "op": {"op": "add", "path": "/trust", "value": 1}, "note": "bench"}
    commit = {"commitId": "bench-commit", "ops": [{"op": "add", "path": "/mood", "value": "calm"}], "reviews": [review]}
    message = schema.build_turn_result_message(
        tool_call_id="bench-call", character_id=CHARACTER, commit=commit, turn_id="bench-turn"
    )
    provider.append_message(session_id, message)
    data = schema.build_turn_status_data(character_id=CHARACTER, turn_id=TURN, status="incomplete")
    leaf = provider.append_custom_entry(session_id, schema.TURN_STATUS_TYPE, data)["id"]
    first = None
    for entry in provider.get_active_path(session_id):  # untimed: the oldest commit on the branch
        if schema.roleplay_entry_kind(entry) == "turn":
            first = entry["message"]["details"]["commit"]["commitId"]
            break
    return {"leaf": leaf, "first": first, "last": "bench-commit"}


def writes(provider: Any, session_id: str, facts: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    from roleplay.services import history, planning, writes

    common = {"session_id": session_id, "actor": "bench", "channel": "cli", "provider": provider}

    def correction(**extra: Any) -> dict[str, Any]:
        return {"op": "replace", "path": "/turn", "value": -1, "reason": "bench", **extra}

    repair = {"turnId": TURN, "ops": [{"op": "add", "path": "/repaired", "value": True}], "reason": "bench"}
    return {
        "correct": lambda: writes.correct_state(payload=correction(), **common),
        "correct_recent": lambda: writes.correct_state(payload=correction(correctsCommitId=facts["last"]), **common),
        "correct_old": lambda: writes.correct_state(payload=correction(correctsCommitId=facts["first"]), **common),
        "amend": lambda: writes.amend_review(review_id=REVIEW, value=2, **common),
        "accept": lambda: writes.decide_review(review_id=REVIEW, decision="accept", **common),
        "repair": lambda: writes.repair_turn(proposal=repair, **common),
        "checkpoint": lambda: writes.create_checkpoint(**common),
        "compaction_checkpoint": lambda: history.checkpoint_after_compaction(
            compaction={"id": facts["leaf"]}, **common
        ),
        "archive": lambda: writes.archive(**common),
        "plan": lambda: planning.plan_write(writes.correct_state, payload=correction(), **common),
    }


def timed(run: Callable[[], Any], back: Callable[[], Any], repeat: int) -> tuple[float, int]:
    """Median ms of ``run`` over ``repeat`` warm runs (``back`` after each, untimed) and one run's statements."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run()
    back()
    with CaptureQueriesContext(connection) as queries:
        run()
    back()
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
        back()
    return statistics.median(timings), len(queries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--providers", default="file,mysql")
    parser.add_argument(
        "--database", default="sessiontree_bench_rp_writes", help="on a mysql:// server: created, dropped"
    )
    args = parser.parse_args()
    bench_history.BENCH_DB = args.database  # not bench_history's own: both may run on one server
    sizes = [int(size) for size in args.sizes.split(",")]
    kinds = args.providers.split(",")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-rp-writes-") as tmp:
        drop = setup(tmp)
        try:
            from django.db import connection

            from sessiontree.providers.factory import get_provider
            from sessiontree.services import sessions as session_ops

            print(f"database: {connection.vendor}; {args.repeat} warm runs per figure (median), times in ms")
            print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start, {os.cpu_count()} CPUs")
            table: dict[str, dict[int, tuple[float, int]]] = {}
            for size in sizes:
                made = generate(Path(tmp) / "sessions" / f"roleplay-{size}.jsonl", size, seed=29, roleplay=True)
                stored: dict[str, tuple[str, dict[str, Any]]] = {}
                for kind in kinds:  # all stored before any is written to (a write on `file` grows the file)
                    if kind == "file":
                        session_id = made.session_id
                        session_ops.register_file(session_id=session_id, path=made.path, actor="bench", channel="cli")
                    else:
                        session_id = f"{made.session_id[:-4]}{kind[:4]}"
                        import_mysql(made.path, session_id)
                    stored[kind] = (session_id, {})
                for kind in kinds:
                    provider = get_provider(kind)
                    session_id = stored[kind][0]
                    facts = prepare(provider, session_id)

                    def back(provider: Any = provider, session_id: str = session_id, leaf: str = facts["leaf"]) -> None:
                        provider.switch_leaf(session_id, leaf)

                    figures = {
                        name: timed(run, back, args.repeat) for name, run in writes(provider, session_id, facts).items()
                    }
                    for name, figure in figures.items():
                        table.setdefault(f"{name}:{kind}", {})[size] = figure
                    print(
                        f"{kind:5} {size:>9,}: "
                        + ", ".join(f"{name} {ms:.1f} ({n})" for name, (ms, n) in figures.items()),
                        flush=True,
                    )
        finally:
            if drop:
                from django.db import connection

                with connection.cursor() as cursor:
                    cursor.execute(f"DROP DATABASE {drop}")
    print()
    print("| write | " + " | ".join(f"{size:,}" for size in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name in WRITES:
        for kind in kinds:
            values = table[f"{name}:{kind}"]
            base = values[sizes[0]][0]
            cells = [f"{values[s][0]:.1f} ms ({values[s][0] / base:.2f}x, {values[s][1]} q)" for s in sizes]
            print(f"| {name}, `{kind}` | " + " | ".join(cells) + " |")
    end = os.getloadavg()
    print(f"load average {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
