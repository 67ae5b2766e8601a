"""Kernel cost per stage: load, migrate, index, path, context, tree.

Runs on Pi's recorded large-session.jsonl (1,018 entries, v1: the migration
does real work) and on a generated branched v3 session of 100,000 entries
(user/assistant/toolResult turns, labels, branch points with summaries,
thinking/model changes and a few compactions). Each stage is repeated
``--repeat`` times; prints the median time, the time per entry, the
tracemalloc peak and the growth of the process's peak RSS, then one summary
line with the per-entry cost ratio between the two sizes (1.0 = linear).

Run from the repository root:

    .venv/bin/python bench/bench_kernel.py [--repeat 5] [--entries 100000] [--no-gc]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.ids import new_entry_id, new_session_id
from sessiontree.core.path import build_entry_index, build_tree, get_path_to_leaf
from sessiontree.core.pi_session_file import (
    load_entries_from_file,
    migrate_to_current_version,
    new_session_header,
    serialize_line,
)

STAGES = ["load", "migrate", "index", "path", "context", "tree"]
MIB = 1024 * 1024


def fixtures_dir() -> Path:
    configured = os.environ.get("SESSIONTREE_PI_FIXTURES")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "pi"


def max_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


# --- generated session -----------------------------------------------------

WORDS = [
    "the",
    "session",
    "tree",
    "keeps",
    "every",
    "branch",
    "append",
    "only",
    "so",
    "moving",
    "the",
    "leaf",
    "never",
    "loses",
    "history",
]


def prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def generate_session(path: Path, total: int, seed: int = 7) -> None:
    """Stream a realistic branched v3 session to ``path`` (entries are not kept in memory)."""
    rng = random.Random(seed)
    start = datetime(2026, 4, 19, tzinfo=UTC)
    used_ids: set[str] = set()
    active_path: list[str] = []  # ids root → leaf, to branch back and to pick kept entries
    user_positions: list[int] = []  # indexes into active_path of user messages
    count = 0
    compaction_at = {total * k // 5 for k in range(1, 5)}

    with path.open("wb") as out:
        out.write(
            serialize_line(new_session_header(new_session_id(), cwd="/bench", timestamp="2026-04-19T00:00:00.000Z"))
        )

        def append(entry: dict[str, Any]) -> str:
            nonlocal count
            entry_id = new_entry_id(used_ids)
            used_ids.add(entry_id)
            stamp = start + timedelta(milliseconds=count * 350)
            record = {
                "type": entry.pop("type"),
                "id": entry_id,
                "parentId": active_path[-1] if active_path else None,
                "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
                **entry,
            }
            out.write(serialize_line(record))
            active_path.append(entry_id)
            count += 1
            return entry_id

        turn = 0
        while count < total:
            turn += 1
            user_positions.append(len(active_path))
            append(
                {
                    "type": "message",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": prose(rng, 30)}],
                        "timestamp": turn,
                    },
                }
            )
            for call in range(rng.randint(1, 3)):
                if count >= total:
                    break
                call_id = f"call_{turn}_{call}"
                append(
                    {
                        "type": "message",
                        "message": {
                            "role": "assistant",
                            "content": [
                                {"type": "thinking", "thinking": prose(rng, 20)},
                                {"type": "toolCall", "id": call_id, "name": "bash", "arguments": {"command": "ls -la"}},
                            ],
                            "api": "anthropic-messages",
                            "provider": "anthropic",
                            "model": "claude-sonnet-4-5",
                            "usage": {
                                "input": 1200,
                                "output": 80,
                                "cacheRead": 9000,
                                "cacheWrite": 0,
                                "totalTokens": 10280,
                            },
                            "stopReason": "toolUse",
                            "timestamp": turn,
                        },
                    }
                )
                append(
                    {
                        "type": "message",
                        "message": {
                            "role": "toolResult",
                            "toolCallId": call_id,
                            "toolName": "bash",
                            "content": [{"type": "text", "text": prose(rng, 60)}],
                            "details": {"exitCode": 0},
                            "isError": False,
                            "timestamp": turn,
                        },
                    }
                )
            append(
                {
                    "type": "message",
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": prose(rng, 40)}],
                        "api": "anthropic-messages",
                        "provider": "anthropic",
                        "model": "claude-sonnet-4-5",
                        "usage": {
                            "input": 1300,
                            "output": 200,
                            "cacheRead": 9000,
                            "cacheWrite": 0,
                            "totalTokens": 10500,
                        },
                        "stopReason": "stop",
                        "timestamp": turn,
                    },
                }
            )
            if turn % 40 == 0:
                append({"type": "thinking_level_change", "thinkingLevel": rng.choice(["off", "low", "medium", "high"])})
            if turn % 400 == 0:
                append(
                    {
                        "type": "model_change",
                        "provider": "anthropic",
                        "modelId": rng.choice(["claude-sonnet-4-5", "claude-opus-4-5"]),
                    }
                )
            if turn % 25 == 0:
                # A label sits on the path: the next message becomes its child.
                append({"type": "label", "targetId": active_path[user_positions[-1]], "label": f"checkpoint {turn}"})
            if turn % 60 == 0 and len(active_path) > 300:
                # Go back to an earlier entry and continue from there, leaving a summary.
                back_to = len(active_path) - rng.randint(20, 250)
                abandoned = active_path[-1]
                del active_path[back_to + 1 :]
                user_positions[:] = [p for p in user_positions if p < len(active_path)]
                append({"type": "branch_summary", "fromId": abandoned, "summary": prose(rng, 50)})
            if any(count >= mark for mark in compaction_at):
                compaction_at = {mark for mark in compaction_at if count < mark}
                kept = [p for p in user_positions if p < len(active_path)][-8:]
                if kept:
                    append(
                        {
                            "type": "compaction",
                            "summary": prose(rng, 300),
                            "firstKeptEntryId": active_path[kept[0]],
                            "tokensBefore": 180_000,
                        }
                    )


# --- measuring -------------------------------------------------------------


def run_stages(path: Path) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    """The stage callables, chained through a shared state dict (each uses the previous result)."""
    state: dict[str, Any] = {}

    def load() -> None:
        state["file_entries"] = load_entries_from_file(path)

    def migrate() -> None:
        state["migrated"] = migrate_to_current_version(state["file_entries"])
        state["entries"] = state["file_entries"][1:]  # the header comes first

    def index() -> None:
        state["by_id"] = build_entry_index(state["entries"])

    def leaf_path() -> None:
        state["path"] = get_path_to_leaf(state["entries"], state["entries"][-1]["id"], state["by_id"])

    def context() -> None:
        state["context"] = build_session_context(state["entries"], state["entries"][-1]["id"], state["by_id"])

    def tree() -> None:
        state["tree"] = build_tree(state["entries"])

    return dict(zip(STAGES, [load, migrate, index, leaf_path, context, tree], strict=True)), state


def measure(path: Path, repeat: int) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    times: dict[str, list[float]] = {stage: [] for stage in STAGES}
    rss_growth: dict[str, int] = dict.fromkeys(STAGES, 0)
    facts: dict[str, Any] = {}
    for _ in range(repeat):
        stages, state = run_stages(path)
        for stage, run in stages.items():
            rss_before = max_rss_bytes()
            started = time.perf_counter()
            run()
            times[stage].append(time.perf_counter() - started)
            rss_growth[stage] = max(rss_growth[stage], max_rss_bytes() - rss_before)
        facts = {
            "entries": len(state["entries"]),
            "migrated": state["migrated"],
            "path": len(state["path"]),
            "messages": len(state["context"]["messages"]),
            "roots": len(state["tree"]),
        }
        del stages, state
        gc.collect()  # runs even when automatic collection is paused

    # Allocation peaks in a separate pass: tracing slows the code it measures.
    peaks: dict[str, int] = {}
    stages, state = run_stages(path)
    tracemalloc.start()
    for stage, run in stages.items():
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        run()
        peaks[stage] = tracemalloc.get_traced_memory()[1] - baseline
    tracemalloc.stop()
    del stages, state
    gc.collect()

    results = {
        stage: {"median_s": statistics.median(times[stage]), "peak": peaks[stage], "rss": rss_growth[stage]}
        for stage in STAGES
    }
    return results, facts


def report(title: str, path: Path, results: dict[str, dict[str, float]], facts: dict[str, Any]) -> float:
    entries = facts["entries"]
    print(
        f"{title}: {entries:,} entries, {path.stat().st_size / MIB:.1f} MiB, migrated={facts['migrated']}, "
        f"leaf path {facts['path']:,} entries, context {facts['messages']:,} messages, {facts['roots']} root(s)"
    )
    print(f"  {'stage':<8} {'median ms':>10} {'us/entry':>9} {'tracemalloc peak MiB':>21} {'maxrss +MiB':>12}")
    total = 0.0
    for stage in STAGES:
        r = results[stage]
        total += r["median_s"]
        print(
            f"  {stage:<8} {r['median_s'] * 1000:>10.2f} {r['median_s'] * 1e6 / entries:>9.2f} "
            f"{r['peak'] / MIB:>21.1f} {r['rss'] / MIB:>12.1f}"
        )
    print(f"  {'total':<8} {total * 1000:>10.2f} {total * 1e6 / entries:>9.2f}")
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per stage; the median is printed (default 5)")
    parser.add_argument("--entries", type=int, default=100_000, help="size of the generated session (default 100000)")
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="pause Python's cyclic garbage collector while measuring (shows how much of load/tree is GC)",
    )
    args = parser.parse_args()
    if args.no_gc:
        gc.disable()

    print(f"python {sys.version.split()[0]}, repeat={args.repeat}, gc={'paused' if args.no_gc else 'on'}")
    totals: dict[str, tuple[float, int]] = {}

    fixture = fixtures_dir() / "large-session.jsonl"
    if fixture.is_file():
        results, facts = measure(fixture, args.repeat)
        totals["large-session"] = (report("large-session.jsonl (Pi, v1)", fixture, results, facts), facts["entries"])
    else:
        print(f"large-session.jsonl not found in {fixture.parent} (set SESSIONTREE_PI_FIXTURES); skipped")

    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "generated.jsonl"
        started = time.perf_counter()
        generate_session(generated, args.entries)
        print(f"generated {args.entries:,} entries in {time.perf_counter() - started:.1f} s")
        results, facts = measure(generated, args.repeat)
        label = f"generated-{args.entries // 1000}k"
        totals[label] = (report(f"{label} (v3, branched)", generated, results, facts), facts["entries"])

    parts = [f"{name} {total * 1000:,.1f} ms ({total * 1e6 / n:.2f} us/entry)" for name, (total, n) in totals.items()]
    line = "summary: " + "; ".join(parts)
    if len(totals) == 2:
        (small_total, small_n), (big_total, big_n) = totals.values()
        line += f"; per-entry cost ratio {((big_total / big_n) / (small_total / small_n)):.2f} (1.0 = linear)"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
