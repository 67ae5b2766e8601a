"""What the machine a benchmark ran on could do, in two figures.

Absolute targets (an append ≤ 0.5 ms, a context ≤ 60 ms) move with the
machine: the same commit measured 2.5 times slower on one of this project's CI
machines than on another. Every benchmark that checks one prints this line
first, so that figures from different machines can be told apart:

- ``python``: median ms of a fixed pure-Python loop (dicts, strings, ints:
  the kind of work the kernel and the API do), single-threaded;
- ``round trip``: median ms of ``SELECT 1`` on an open connection to the
  MySQL/MariaDB server, when one is given (what every statement costs at
  least, beside the commit's log flush).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall time of ``fn()`` over ``repeat`` calls, in ms."""
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def python_reference_ms(repeat: int = 7) -> float:
    """Median ms of one fixed pure-Python workload."""

    def work() -> int:
        table: dict[str, int] = {}
        for i in range(100_000):
            table[f"k{i}"] = i
        total = 0
        for key, value in table.items():
            if key.endswith("7"):
                total += value
        return total

    return median_ms(work, repeat)


def round_trip_ms(connect: dict[str, Any], samples: int = 300) -> float:
    """Median ms of ``SELECT 1`` over one mysqlclient connection."""
    import MySQLdb

    conn = MySQLdb.connect(**connect)
    try:
        cursor = conn.cursor()
        timings = []
        for _ in range(samples):
            start = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchall()
            timings.append((time.perf_counter() - start) * 1000)
        return statistics.median(timings)
    finally:
        conn.close()


def describe(connect: dict[str, Any] | None = None) -> str:
    """One line: the Python reference, the database round trip, the load average."""
    parts = [f"python reference {python_reference_ms():.1f} ms"]
    if connect is not None:
        parts.append(f"SELECT 1 round trip {round_trip_ms(connect):.3f} ms")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    parts.append(f"load average {load:.2f}, {os.cpu_count()} CPUs")
    return "machine: " + "; ".join(parts)
