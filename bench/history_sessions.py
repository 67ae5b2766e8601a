"""Sessions that look like a long agent conversation, written straight to a
Pi v3 JSONL file (fast: one orjson line per entry, nothing kept but the
active path's ids), for bench/bench_history.py and bench/bench_vs_pi.py.

The shape, from Pi's recorded sessions (shared/fixtures/pi/): turns of a
user message (~300 bytes), an assistant message with thinking and a tool
call, the tool's result (a few hundred bytes to several KiB, long-tailed),
and the assistant's answer (~1 KiB); about 1 KiB an entry on average. A
compaction every ~400 entries keeps the last ~40 entries of the path, the
last one placed ~100 entries before the end, so that the model's context
at the leaf holds ~140 messages at every size. 2 % of appends first move
the leaf back 1 to 60 entries (never past the last compaction, and not in
the last ~140 entries, so that the context at the leaf is the same size
whatever the history), half of them with a branch summary; a label every ~80 entries, a thinking-level
change every ~120, a model change every ~2,000.

With ``roleplay=True`` it is a roleplay session of the same shape: an
identity selection after the first user message, every turn's tool result a
``roleplay_finalize_turn`` result with a one-op commit, and a checkpoint of
the state reduced so far right after each compaction (the last one ~100
entries before the leaf).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

COMPACTION_EVERY = 400
KEPT_AFTER_COMPACTION = 40
AFTER_LAST_COMPACTION = 100
BRANCH_RATE = 0.02

_WORDS = [
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
    "leaf",
    "never",
    "loses",
    "history",
    "while",
    "agent",
    "reads",
    "file",
    "writes",
    "test",
    "runs",
    "output",
    "error",
    "fixed",
    "function",
    "class",
    "module",
    "import",
    "returns",
    "value",
    "config",
    "path",
    "build",
    "context",
    "message",
    "tool",
    "result",
    "compaction",
    "summary",
    "model",
    "thinking",
    "user",
    "assistant",
    "request",
    "answer",
]


@dataclass
class Generated:
    path: Path
    session_id: str
    entries: int
    branches: int
    compactions: int
    leaf_id: str
    bytes: int


class _Text:
    """Random prose cut from one long pre-made string (cheap per entry)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pool = " ".join(rng.choice(_WORDS) for _ in range(400_000))

    def __call__(self, length: int) -> str:
        start = self.rng.randrange(0, len(self.pool) - length - 1)
        return self.pool[start : start + length]

    def tool_output_length(self) -> int:
        # Long-tailed: median ~800 bytes, some of several KiB.
        return min(12_000, int(self.rng.lognormvariate(6.7, 0.9)))


CHARACTER = "alice"
TURN_TOOL = "roleplay_finalize_turn"


def _checkpoint(revision: int, entry_id: str | None, commit_id: str | None, turn: int) -> dict[str, Any]:
    """The ``pi-roleplay-checkpoint`` data of the state ``{"turn": turn}`` after ``revision`` commits."""
    from roleplay.schema import CHECKPOINT_TYPE, compute_state_hash

    state = {"turn": turn} if revision else {}
    data = {
        "characterId": CHARACTER,
        "revision": revision,
        "state": state,
        "events": [],
        "memories": [],
        "reviews": {"pending": [], "decided": []},
        "incompleteTurns": [],
        "provenance": {"/turn": entry_id} if entry_id else {},
        "archived": False,
        "archive": None,
        "lastCommitId": commit_id,
        "problems": [],
        "ignoredEntries": [],
        "stateHash": compute_state_hash(state),
    }
    return {"type": "custom", "customType": CHECKPOINT_TYPE, "data": data}


def generate(path: Path, total: int, *, seed: int = 23, roleplay: bool = False) -> Generated:
    """Write a session of ``total`` entries to ``path`` (a roleplay one with ``roleplay``)."""
    rng = random.Random(seed * 1_000_003 + total)  # a session id of its own per size
    text = _Text(rng)
    session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    used: set[str] = set()
    active: list[str] = []  # the current path's ids
    floor = 0  # the path may not be cut before this index (the last compaction)
    count = branches = compactions = 0
    first_compaction = (total - AFTER_LAST_COMPACTION) % COMPACTION_EVERY or COMPACTION_EVERY
    next_compaction = first_compaction
    out = path.open("wb")
    dumps = orjson.dumps
    # Roleplay: per entry of the active path, (revision, last commit's entry id, its commit id, turn).
    reduced: list[tuple[int, str | None, str | None, int]] = []

    def new_id() -> str:
        while True:
            candidate = f"{rng.getrandbits(32):08x}"
            if candidate not in used:
                used.add(candidate)
                return candidate

    def write(body: dict[str, Any]) -> str:
        nonlocal count
        entry_id = new_id()
        stamp = start + timedelta(milliseconds=count * 1500)
        record = {
            "type": body.pop("type"),
            "id": entry_id,
            "parentId": active[-1] if active else None,
            "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            **body,
        }
        out.write(dumps(record) + b"\n")
        if roleplay:
            before = reduced[-1] if reduced else (0, None, None, 0)
            message = record.get("message")
            if isinstance(message, dict) and message.get("toolName") == TURN_TOOL:
                commit = message["details"]["commit"]
                before = (before[0] + 1, entry_id, commit["commitId"], commit["ops"][0]["value"])
            reduced.append(before)
        active.append(entry_id)
        count += 1
        return entry_id

    def maybe_branch() -> None:
        nonlocal branches
        room = len(active) - floor - 2
        near_end = count >= total - AFTER_LAST_COMPACTION - KEPT_AFTER_COMPACTION
        if room > 1 and not near_end and rng.random() < BRANCH_RATE:
            abandoned = active[-1]
            cut = len(active) - rng.randint(1, min(60, room))
            del active[cut:]
            del reduced[cut:]
            branches += 1
            if rng.random() < 0.5:
                write({"type": "branch_summary", "fromId": abandoned, "summary": text(600)})

    def append(body: dict[str, Any]) -> None:
        nonlocal next_compaction, compactions, floor
        if count >= total:
            return
        maybe_branch()
        if count >= next_compaction and len(active) > KEPT_AFTER_COMPACTION + 1:
            kept = active[-KEPT_AFTER_COMPACTION]
            write(
                {
                    "type": "compaction",
                    "summary": "# Context checkpoint\n\n" + text(3000),
                    "firstKeptEntryId": kept,
                    "tokensBefore": 150_000 + rng.randrange(20_000),
                }
            )
            compactions += 1
            next_compaction += COMPACTION_EVERY
            if roleplay and count < total:
                write(_checkpoint(*reduced[-1]))
            floor = len(active)
            if count >= total:
                return
        write(body)

    header = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/bench/project",
    }
    out.write(dumps(header) + b"\n")
    usage = {"input": 1200, "output": 300, "cacheRead": 90_000, "cacheWrite": 0, "totalTokens": 91_500}
    turn = 0
    model = "claude-sonnet-4-5"
    tool = TURN_TOOL if roleplay else "bash"
    try:
        while count < total:
            turn += 1
            append(
                {
                    "type": "message",
                    "message": {"role": "user", "content": [{"type": "text", "text": text(250)}], "timestamp": turn},
                }
            )
            if roleplay and turn == 1:
                append({"type": "custom", "customType": "pi-roleplay-identity", "data": {"characterId": CHARACTER}})
            call_id = f"toolu_{turn:08d}"
            append(
                {
                    "type": "message",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": text(300), "thinkingSignature": "sig" + text(40)},
                            {"type": "toolCall", "id": call_id, "name": tool, "arguments": {"command": text(60)}},
                        ],
                        "api": "anthropic-messages",
                        "provider": "anthropic",
                        "model": model,
                        "usage": usage,
                        "stopReason": "toolUse",
                        "timestamp": turn,
                    },
                }
            )
            result: dict[str, Any] = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": tool,
                "content": [{"type": "text", "text": text(text.tool_output_length())}],
                "isError": False,
                "timestamp": turn,
            }
            if roleplay:
                commit = {"commitId": f"commit-{turn}", "ops": [{"op": "add", "path": "/turn", "value": turn}]}
                result["details"] = {"characterId": CHARACTER, "turnId": f"turn-{turn}", "commit": commit}
            append({"type": "message", "message": result})
            append(
                {
                    "type": "message",
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": text(900)}],
                        "api": "anthropic-messages",
                        "provider": "anthropic",
                        "model": model,
                        "usage": usage,
                        "stopReason": "stop",
                        "timestamp": turn,
                    },
                }
            )
            if turn % 30 == 0:
                append({"type": "thinking_level_change", "thinkingLevel": rng.choice(["off", "low", "medium", "high"])})
            if turn % 20 == 0 and len(active) > 4:
                append({"type": "label", "targetId": active[-4], "label": f"checkpoint {turn}"})
            if turn % 500 == 0:
                model = rng.choice(["claude-sonnet-4-5", "claude-opus-4-1"])
                append({"type": "model_change", "provider": "anthropic", "modelId": model})
    finally:
        out.close()
    return Generated(path, session_id, count, branches, compactions, active[-1], path.stat().st_size)


if __name__ == "__main__":  # pragma: no cover - a manual check
    import sys
    import time

    began = time.perf_counter()
    made = generate(Path(sys.argv[1]), int(sys.argv[2]))
    print(made, f"{time.perf_counter() - began:.2f} s")
