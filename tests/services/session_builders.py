"""Messages, fake summarizers and small trees shared by the service tests."""

from __future__ import annotations

from typing import Any

from sessiontree.core.errors import SummarizerError
from sessiontree.summarizers import SummaryRequest


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.extend(calls)
    return {"role": "assistant", "content": content, "provider": "p", "model": "m-1", "stopReason": "stop"}


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def tool_result(call_id: str, name: str, text: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
    }


def words(count: int, word: str = "abc") -> str:
    """``count`` tokens of text by Pi's estimate (4 characters a token)."""
    return (word[:3] + " ") * count


class RecordingSummarizer:
    """Answers ``"<KIND> <n>"`` and remembers every request."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return f"{request.kind.upper()} {len(self.requests)}"


class FailingSummarizer:
    name = "failing"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        raise SummarizerError("the model is down")


class MeddlingSummarizer:
    """Appends to the session while it summarizes, as a concurrent writer would."""

    name = "meddling"

    def __init__(self, provider: Any, session_id: str) -> None:
        self.provider = provider
        self.session_id = session_id

    def summarize(self, request: SummaryRequest) -> str:
        self.provider.append_message(self.session_id, user("sneaked in"))
        return "SUMMARY"


def snapshot_state(provider: Any, session_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """Everything a failed operation must leave untouched: the entries and the leaf."""
    return provider.list_entries(session_id), provider.get_session(session_id)["leaf_entry_id"]
