"""Sessions for the console tests (issue 25): a conversation with every kind of
content (markdown, code, tool calls and results, an image, summaries), one
whose every text is hostile, and one with a three-way branch point."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

from sessiontree import services
from sessiontree.models import AgentSession

from .conftest import BUILDER

STAMP = "2026-11-20T14:03:05.000Z"


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG of one colour with a darker diagonal, made here (no file, no download)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    dark = bytes(channel // 2 for channel in rgb)
    rows = b"".join(
        b"\x00" + b"".join(dark if abs(x * height - y * width) < width else bytes(rgb) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PNG_WIDTH = 96
PNG = base64.b64encode(png(PNG_WIDTH, 64, (65, 118, 144))).decode()
# What a page would run if any of it were markup.
HOSTILE = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned='img'\">",
    "[click me](javascript:window.__pwned='link')",
    "[click me too](JaVaScRiPt:alert(1))",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[attr](https://example.com/\" onmouseover=\"window.__pwned='attr')",
    "![pixel](https://tracker.example.com/p.gif)",
    "![svg](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+)",
    "```js\" onload=\"window.__pwned='fence'\ncode\n```",
    '<iframe src="javascript:alert(1)"></iframe><style>body{display:none}</style>',
]


def message(entry_id: str, parent: str | None, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": STAMP, "message": body}


def assistant(content: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {"input": 900, "output": 100, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1000},
        "stopReason": "stop",
        **extra,
    }


def create(session_id: str, kind: str, entries: list[dict[str, Any]], leaf: str) -> AgentSession:
    services.sessions.create_session(
        actor=BUILDER, channel="internal", kind=kind, session_id=session_id, entries=entries
    )
    services.tree.switch_leaf(session_id=session_id, entry_id=leaf, actor=BUILDER, channel="internal")
    return AgentSession.objects.get(session_id=session_id)


def rich_session(kind: str, session_id: str | None = None) -> AgentSession:
    """A conversation with markdown, code, a tool call and its result, an image, an
    error result, a branch summary and a compaction."""
    entries = [
        message(
            "a0000001",
            None,
            {"role": "user", "content": "Please **fix** the `total()` bug:\n\n- round once\n- test it"},
        ),
        message(
            "a0000002",
            "a0000001",
            assistant(
                [
                    {"type": "thinking", "thinking": "The sum of floats drifts."},
                    {
                        "type": "text",
                        "text": "Reading it first.\n\n```python\ndef total(lines):\n    return sum(lines)\n```",
                    },
                    {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "billing/invoice.py"}},
                ]
            ),
        ),
        message(
            "a0000003",
            "a0000002",
            {
                "role": "toolResult",
                "toolCallId": "call_1",
                "toolName": "read",
                "content": [{"type": "text", "text": "def total(lines):\n    return sum(lines)"}],
                "isError": False,
            },
        ),
        message(
            "a0000004",
            "a0000003",
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here is the screenshot."},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                ],
            },
        ),
        message(
            "a0000005",
            "a0000004",
            {
                "role": "toolResult",
                "toolCallId": "call_2",
                "toolName": "bash",
                "content": [{"type": "text", "text": "exit 1: tests failed"}],
                "isError": True,
            },
        ),
        {
            "type": "branch_summary",
            "id": "a0000006",
            "parentId": "a0000005",
            "timestamp": STAMP,
            "fromId": "a0000003",
            "summary": "## Tried\nStoring **integer cents**: too many files.",
        },
        {
            "type": "compaction",
            "id": "a0000007",
            "parentId": "a0000006",
            "timestamp": STAMP,
            "summary": "## Goal\nFix the *rounding*.",
            "firstKeptEntryId": "a0000004",
            "tokensBefore": 5000,
        },
        message("a0000008", "a0000007", assistant([{"type": "text", "text": "Done: rounded once in `total()`."}])),
    ]
    return create(session_id or f"rich-{kind}", kind, entries, "a0000008")


def hostile_session(kind: str, session_id: str | None = None) -> AgentSession:
    """Every text a conversation can carry, hostile: message text, a tool's name
    and arguments, a tool result, a label, a custom entry, an SVG image, summaries."""
    text = "\n\n".join(HOSTILE)
    entries = [
        message("b0000001", None, {"role": "user", "content": text}),
        message(
            "b0000002",
            "b0000001",
            assistant(
                [
                    {"type": "text", "text": text},
                    {
                        "type": "toolCall",
                        "id": "c1",
                        "name": "<script>window.__pwned='tool'</script>",
                        "arguments": {"html": text},
                    },
                    {"type": "image", "data": "PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+", "mimeType": "image/svg+xml"},
                    {"type": "image", "data": "<script>", "mimeType": "image/png"},
                ]
            ),
        ),
        message(
            "b0000003",
            "b0000002",
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": '"><script>x</script>',
                "content": text,
                "isError": False,
            },
        ),
        {
            "type": "label",
            "id": "b0000004",
            "parentId": "b0000003",
            "timestamp": STAMP,
            "targetId": "b0000001",
            "label": "<b onmouseover=\"window.__pwned='label'\">x</b>",
        },
        {
            "type": "custom",
            "id": "b0000005",
            "parentId": "b0000004",
            "timestamp": STAMP,
            "customType": "<script>",
            "data": {"<img src=x onerror=alert(1)>": text},
        },
        {
            "type": "branch_summary",
            "id": "b0000006",
            "parentId": "b0000005",
            "timestamp": STAMP,
            "fromId": "b0000001",
            "summary": text,
        },
        {
            "type": "custom_message",
            "id": "b0000007",
            "parentId": "b0000006",
            "timestamp": STAMP,
            "customType": "note",
            "content": text,
            "display": True,
        },
        message("b0000008", "b0000001", assistant([{"type": "text", "text": "A sibling: " + HOSTILE[2]}])),
    ]
    return create(session_id or f"hostile-{kind}", kind, entries, "b0000007")


def alternatives_session(kind: str, session_id: str | None = None) -> AgentSession:
    """A question with three answers (a branch point with three alternatives);
    the leaf is at the end of the second answer's line; the third answer has a
    follow-up of its own."""
    entries = [
        message("c0000001", None, {"role": "user", "content": "Name a colour."}),
        message("c0000002", "c0000001", assistant([{"type": "text", "text": "Red."}])),
        message("c0000003", "c0000001", assistant([{"type": "text", "text": "Green."}])),
        message("c0000004", "c0000001", assistant([{"type": "text", "text": "Blue."}])),
        message("c0000005", "c0000003", {"role": "user", "content": "Why green?"}),
        message("c0000006", "c0000004", {"role": "user", "content": "Why blue?"}),
        message("c0000007", "c0000005", assistant([{"type": "text", "text": "Because of leaves."}])),
    ]
    return create(session_id or f"alternatives-{kind}", kind, entries, "c0000007")
