"""Append latency of the file provider at 10 and at 10,000 entries.

An append must cost the same whatever the session's size (one line written,
no rewrite, no full re-read). Prints the median latency at both sizes and
their ratio. Run from the repository root:

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


if __name__ == "__main__":
    main()
