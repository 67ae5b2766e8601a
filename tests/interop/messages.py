"""Agent messages as Pi records them, for the interop scenarios."""

from __future__ import annotations

from itertools import count
from typing import Any

_clock = count(1_764_000_000_000, 1000)
_calls = count(1)


def usage(total: int) -> dict[str, Any]:
    return {"input": total - 50, "output": 50, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total}


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": next(_clock)}


def assistant(
    text: str | None = None,
    *,
    tools: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    thinking: str | None = None,
    tokens: int | None = None,
    stop: str = "stop",
    model: str = "claude-sonnet-4-5",
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "thinkingSignature": "sig"})
    if text is not None:
        content.append({"type": "text", "text": text})
    for name, arguments in tools:
        content.append({"type": "toolCall", "id": f"call_{next(_calls)}", "name": name, "arguments": arguments})
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": model,
        "stopReason": "toolUse" if tools and stop == "stop" else stop,
        "timestamp": next(_clock),
    }
    if tokens is not None:
        message["usage"] = usage(tokens)
    return message


def tool_result(
    call: dict[str, Any], text: Any, *, index: int = 0, nested: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    block = [b for b in call["content"] if b["type"] == "toolCall"][index]
    content = [{"type": "text", "text": text}] if isinstance(text, str) else text
    message = {
        "role": "toolResult",
        "toolCallId": block["id"],
        "toolName": block["name"],
        "content": content,
        "isError": False,
        "timestamp": next(_clock),
    }
    if nested is not None:
        message["nestedCalls"] = {"calls": nested}
    return message


def bash(command: str, output: str, *, exit_code: int = 0, exclude: bool = False) -> dict[str, Any]:
    message = {
        "role": "bashExecution",
        "command": command,
        "output": output,
        "exitCode": exit_code,
        "cancelled": False,
        "truncated": False,
        "timestamp": next(_clock),
    }
    if exclude:
        message["excludeFromContext"] = True
    return message


def system(content: str = "", *, sections: dict[str, Any] | None = None, added=(), removed=()) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "system", "content": content}
    if sections is not None:
        message["sections"] = sections
    if added:
        message["toolsAdded"] = [
            {"name": name, "description": f"the {name} tool", "parameters": {"type": "object"}} for name in added
        ]
    if removed:
        message["toolsRemoved"] = [{"name": name} for name in removed]
    message["timestamp"] = next(_clock)
    return message


def image(data: str = "aGVsbG8=") -> dict[str, Any]:
    return {"type": "image", "data": data, "mimeType": "image/png"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}
