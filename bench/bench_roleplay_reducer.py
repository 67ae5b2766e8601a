"""Benchmark: reduce_branch on long paths with a checkpoint every 200 entries.

A roleplay path is a repeating turn (user message, assistant reply,
roleplay_finalize_turn result with a few ops and an event; now and then a
memory, a review and its decision). A checkpoint is appended every 200
entries, placed so that the last one is 199 entries before the leaf (the
worst case). With checkpoints the reduce time must stay flat as the path
grows; the same paths without checkpoints are timed for contrast.

Run: python bench/bench_roleplay_reducer.py [--repeat N]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roleplay import schema
from roleplay.reducer import make_checkpoint_data, reduce_branch

CHARACTER = "alice"
CHECKPOINT_EVERY = 200
LENGTHS = (2_000, 5_000, 10_000)


def turn_entries(turn: int) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = [
        {"op": "replace" if turn else "add", "path": "/location", "value": f"place {turn % 17}"},
        {"op": "replace" if turn else "add", "path": "/turns", "value": turn},
    ]
    if turn == 0:
        ops.append({"op": "add", "path": "/relationship", "value": {"user": {"trust": 0.5}}})
        ops.append({"op": "add", "path": "/appearance", "value": {"hair": "black", "eyes": "grey"}})
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
    entries = [
        {"type": "message", "message": {"role": "user", "content": f"turn {turn}"}},
        {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "..."}]}},
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": f"call-{turn}",
                "toolName": schema.TURN_TOOL_NAME,
                "content": [{"type": "text", "text": "ok"}],
                "details": {"characterId": CHARACTER, "commit": commit},
                "isError": False,
            },
        },
    ]
    if turn % 20 == 6:
        entries.append(
            {
                "type": "custom",
                "customType": schema.REVIEW_DECISION_TYPE,
                "data": {"reviewId": f"review-{turn - 1}", "characterId": CHARACTER, "decision": "accept"},
            }
        )
    return entries


def build_path(length: int) -> list[dict[str, Any]]:
    path: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    turn = 0
    while len(path) < length:
        index = len(path)
        if index and index % CHECKPOINT_EVERY == 0:
            # Reducing here is itself flat: it starts from the previous checkpoint.
            body: dict[str, Any] = {
                "type": "custom",
                "customType": schema.CHECKPOINT_TYPE,
                "data": make_checkpoint_data(reduce_branch(path, CHARACTER)),
            }
        else:
            if not pending:
                pending = turn_entries(turn)
                turn += 1
            body = pending.pop(0)
        parent = path[-1]["id"] if path else None
        path.append({"id": f"{index + 1:08x}", "parentId": parent, "timestamp": "2026-04-19T00:00:00.000Z", **body})
    return path


def median_ms(path: list[dict[str, Any]], character_id: str | None, repeat: int) -> float:
    # As timeit does: collect first and keep the collector out of the timed
    # runs, so a full collection of the benchmark's own large heap is not
    # billed to whichever length happens to trigger it.
    gc.collect()
    gc.disable()
    try:
        timings = []
        for _ in range(repeat):
            started = time.perf_counter()
            reduce_branch(path, character_id)
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        gc.enable()
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=31)
    args = parser.parse_args()

    rows = []
    for length in LENGTHS:
        path = build_path(length)
        bare = [e for e in path if e.get("customType") != schema.CHECKPOINT_TYPE]
        result = reduce_branch(path, CHARACTER)
        assert result["state"] == reduce_branch(bare, CHARACTER)["state"], "checkpointed and bare reduce differ"
        tail = len(path) - 1 - next(i for i, e in enumerate(path) if e["id"] == result["checkpoint_entry_id"])
        rows.append(
            {
                "length": length,
                "tail": tail,
                "revision": result["revision"],
                "events": len(result["events"]),
                "with_id": median_ms(path, CHARACTER, args.repeat),
                "resolved": median_ms(path, None, args.repeat),
                "bare": median_ms(bare, CHARACTER, max(3, args.repeat // 5)),
            }
        )

    print(f"reduce_branch, checkpoint every {CHECKPOINT_EVERY} entries, median of {args.repeat} runs")
    print(
        f"{'entries':>8} {'after cp':>8} {'revision':>8} {'events':>7} {'ms (id)':>9} {'ms (resolve)':>12} {'ms (no cp)':>10}"
    )
    for row in rows:
        print(
            f"{row['length']:>8} {row['tail']:>8} {row['revision']:>8} {row['events']:>7} "
            f"{row['with_id']:>9.3f} {row['resolved']:>12.3f} {row['bare']:>10.2f}"
        )
    first, last = rows[0], rows[-1]
    print(
        f"ratio {last['length']}/{first['length']} with checkpoints: {last['with_id'] / first['with_id']:.2f} (flat ≈ 1)"
    )
    print(
        f"ratio {last['length']}/{first['length']} with identity resolution: {last['resolved'] / first['resolved']:.2f}"
    )
    print(f"ratio {last['length']}/{first['length']} without checkpoints: {last['bare'] / first['bare']:.2f}")


if __name__ == "__main__":
    main()
