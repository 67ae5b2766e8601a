"""Pi session files written the way Pi writes them, for the sync tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

T0 = "2026-01-02T03:04:05.678Z"


def ts(i: int) -> str:
    return f"2026-01-02T03:{i // 60 % 60:02d}:{i % 60:02d}.000Z"


def header(session_id: str, *, cwd: str = "/home/me/project", version: int | None = 3, **extra: Any) -> dict:
    h: dict[str, Any] = {"type": "session"}
    if version is not None:
        h["version"] = version
    h.update({"id": session_id, "timestamp": T0, "cwd": cwd})
    h.update(extra)
    return h


def user(entry_id: str, parent: str | None, text: str, i: int = 0) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": ts(i),
        "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1767322800000 + i},
    }


def assistant(entry_id: str, parent: str | None, text: str, i: int = 0, *, calls: tuple[str, ...] = ()) -> dict:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "toolCall", "id": call, "name": "read", "arguments": {"path": "a.py"}} for call in calls]
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": ts(i),
        "message": {
            "role": "assistant",
            "content": content,
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {"input": 10, "output": 5},
            "stopReason": "toolUse" if calls else "stop",
            "timestamp": 1767322800000 + i,
        },
    }


def tool_result(entry_id: str, parent: str, call: str, i: int = 0) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": ts(i),
        "message": {
            "role": "toolResult",
            "toolCallId": call,
            "toolName": "read",
            "content": [{"type": "text", "text": "print(1)"}],
            "isError": False,
            "timestamp": 1767322800000 + i,
        },
    }


def branched_entries() -> list[dict]:
    """A Pi session with a branch (``branch()`` back to an earlier entry, then
    appends), a label, a session name, a tool call, a Pi 1.x entry type the
    kernel does not model and an unknown field."""
    return [
        {
            "type": "model_change",
            "id": "m0000001",
            "parentId": None,
            "timestamp": ts(0),
            "provider": "anthropic",
            "modelId": "claude-sonnet-4-5",
        },
        user("u0000001", "m0000001", "hello", 1),
        assistant("a0000001", "u0000001", "let me look", 2, calls=("call_1",)),
        tool_result("t0000001", "a0000001", "call_1", 3),
        assistant("a0000002", "t0000001", "done", 4),
        {"type": "session_info", "id": "s0000001", "parentId": "a0000002", "timestamp": ts(5), "name": "First try"},
        # Pi's branch(): back to the first user message's answer, then a new turn.
        user("u0000002", "u0000001", "no, differently", 6),
        assistant("a0000003", "u0000002", "sure", 7),
        {
            "type": "label",
            "id": "l0000001",
            "parentId": "a0000003",
            "timestamp": ts(8),
            "targetId": "a0000001",
            "label": "checkpoint",
        },
        {
            "type": "usage",
            "id": "x0000001",
            "parentId": "l0000001",
            "timestamp": ts(9),
            "tokens": 42,
            "futureField": {"kept": True},
        },
        {"type": "session_info", "id": "s0000002", "parentId": "x0000001", "timestamp": ts(10), "name": "Second try"},
    ]


def lines(objs: list[dict]) -> bytes:
    return b"".join(orjson.dumps(obj) + b"\n" for obj in objs)


def write(path: Path, objs: list[dict], *, tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lines(objs) + tail)
    return path


def append(path: Path, objs: list[dict]) -> None:
    with path.open("ab") as f:
        f.write(lines(objs))


def pi_path(folder: Path, session_id: str, *, cwd: str = "/home/me/project") -> Path:
    """Where Pi keeps a session: ``--<cwd>--/<timestamp>_<id>.jsonl``."""
    return folder / ("--" + cwd.strip("/").replace("/", "-") + "--") / f"2026-01-02T03-04-05-678Z_{session_id}.jsonl"


def v1_objs(session_id: str) -> list[dict]:
    """A v1 file: no version, no ids; a compaction keeping from a line index."""
    return [
        {"type": "session", "id": session_id, "timestamp": T0, "cwd": "/old", "provider": "openai"},
        {"type": "message", "timestamp": ts(1), "message": {"role": "user", "content": "one", "timestamp": 1}},
        {
            "type": "message",
            "timestamp": ts(2),
            "message": {"role": "assistant", "content": [{"type": "text", "text": "two"}], "timestamp": 2},
        },
        {"type": "message", "timestamp": ts(3), "message": {"role": "user", "content": "three", "timestamp": 3}},
        {
            "type": "compaction",
            "timestamp": ts(4),
            "summary": "one and two",
            "firstKeptEntryIndex": 3,
            "tokensBefore": 100,
        },
        {
            "type": "message",
            "timestamp": ts(5),
            "message": {"role": "assistant", "content": [{"type": "text", "text": "four"}], "timestamp": 5},
        },
    ]


def v2_objs(session_id: str) -> list[dict]:
    """A v2 file: ids, and the old ``hookMessage`` role."""
    return [
        {"type": "session", "version": 2, "id": session_id, "timestamp": T0, "cwd": "/v2"},
        user("b0000001", None, "hi", 1),
        {
            "type": "message",
            "id": "b0000002",
            "parentId": "b0000001",
            "timestamp": ts(2),
            "message": {
                "role": "hookMessage",
                "customType": "note",
                "content": "from a hook",
                "display": True,
                "timestamp": 2,
            },
        },
    ]
