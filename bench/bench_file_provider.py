"""Append latency of the file provider at 10 and at 10,000 entries.

An append must cost the same whatever the session's size (one line written,
no rewrite, no full re-read). Prints the median latency at both sizes and
their ratio; then, side by side for comparison with other commits (no
pass/fail), the median of a navigate through the operations layer (a leaf
move with its audit record) and of ``build_context`` at both sizes. Run from
the repository root:

    .venv/bin/python bench/bench_file_provider.py [--samples 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mysql_provider import production_settings
from machine import median_ms


def setup_django(tmp: str) -> None:
    production_settings()
    os.environ.pop("DATABASE_URL", None)
    os.environ["SQLITE_PATH"] = os.path.join(tmp, "bench.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def median_append_ms(provider, session_id: str, samples: int) -> float:
    timings = []
    for i in range(samples):
        message = {"role": "user", "content": f"sample {i}"}
        start = time.perf_counter()
        provider.append_message(session_id, message)
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def median_navigate_ms(provider, session_id: str, targets: tuple[str, str], samples: int) -> float:
    """A navigate through the operations layer (what the API and the admin
    call), alternating between two entries so that every call moves the leaf."""
    from sessiontree.services import tree

    timings = []
    for i in range(samples):
        start = time.perf_counter()
        tree.navigate_tree(
            session_id=session_id, target_id=targets[i % 2], actor="bench", channel="internal", provider=provider
        )
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def navigate_targets(provider, session_id: str) -> tuple[str, str]:
    """Two assistant entries at the end of the session (a plain leaf move each)."""
    first = provider.append_message(session_id, {"role": "assistant", "content": [{"type": "text", "text": "a"}]})
    second = provider.append_message(session_id, {"role": "assistant", "content": [{"type": "text", "text": "b"}]})
    return first["id"], second["id"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--large", type=int, default=10_000)
    args = parser.parse_args()
    from machine import describe  # beside this script

    print(describe())
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        from sessiontree.providers.file_provider import FileSessionTreeProvider

        provider = FileSessionTreeProvider(root=Path(tmp) / "sessions")
        provider.create_session(session_id="small")
        for i in range(10):
            provider.append_message("small", {"role": "user", "content": f"warm {i}"})
        provider.create_session(session_id="large")
        start = time.perf_counter()
        for i in range(args.large):
            provider.append_message("large", {"role": "user", "content": f"fill {i} " + "x" * 200})
        fill_s = time.perf_counter() - start
        small = median_append_ms(provider, "small", args.samples)
        large = median_append_ms(provider, "large", args.samples)
        size_mb = os.path.getsize(Path(tmp) / "sessions" / "large.jsonl") / 1e6
        print(
            f"filled {args.large} entries in {fill_s:.2f} s ({args.large / fill_s:.0f} appends/s), file {size_mb:.1f} MB"
        )
        print(f"median append at 10 entries:     {small:.3f} ms")
        print(f"median append at {args.large} entries: {large:.3f} ms")
        print(f"ratio large/small: {large / small:.2f} (flat means close to 1.0)")
        small_targets = navigate_targets(provider, "small")
        large_targets = navigate_targets(provider, "large")
        nav_small = median_navigate_ms(provider, "small", small_targets, args.samples)
        nav_large = median_navigate_ms(provider, "large", large_targets, args.samples)
        print(f"median navigate (operations layer) at 10 / {args.large} entries: {nav_small:.3f} / {nav_large:.3f} ms")
        ctx_small = median_ms(lambda: provider.build_context("small"), max(5, args.samples // 10))
        ctx_large = median_ms(lambda: provider.build_context("large"), max(5, args.samples // 10))
        print(f"median build_context at 10 / {args.large} entries: {ctx_small:.3f} / {ctx_large:.3f} ms")


if __name__ == "__main__":
    main()
