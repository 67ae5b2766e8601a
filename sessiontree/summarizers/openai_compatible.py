"""A summarizer backed by any OpenAI-compatible chat-completions server.

One POST to ``{base_url}/chat/completions`` per summary, with the standard
library's HTTP client (no extra dependency). Every way the call can fail —
server unreachable, timeout, HTTP error status, a reply that is not the
expected JSON, an empty or cut-off answer — raises ``SummarizerError`` with a
message that says which, and never returns partial text.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from sessiontree.core.errors import SummarizerError

from .base import SummaryRequest
from .prompts import build_chat_messages

# Pi's caps on a summary's length when the request does not bring one.
DEFAULT_MAX_TOKENS = {"compaction": 13107, "turn_prefix": 8192, "branch": 2048}
_ERROR_BODY_CHARS = 300


def _is_timeout(error: BaseException | object) -> bool:
    return isinstance(error, (TimeoutError, socket.timeout))


class OpenAICompatibleSummarizer:
    """Summaries from a chat-completions endpoint.

    ``base_url`` is the API root (``http://host:port/v1``); ``api_key`` is
    sent as a bearer token when given; ``timeout`` (seconds) bounds the
    connection and each read.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        temperature: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        if not base_url:
            raise SummarizerError("The OpenAI-compatible summarizer needs a base URL")
        if not model:
            raise SummarizerError("The OpenAI-compatible summarizer needs a model name")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key or None
        self.timeout = float(timeout)
        self.temperature = temperature
        self.extra_headers = dict(extra_headers or {})

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def __repr__(self) -> str:
        # Never show the API key.
        return f"OpenAICompatibleSummarizer(endpoint={self.endpoint!r}, model={self.model!r}, timeout={self.timeout})"

    def build_payload(self, request: SummaryRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": build_chat_messages(request),
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS[request.kind],
            "stream": False,
        }
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        return payload

    def summarize(self, request: SummaryRequest) -> str:
        body = json.dumps(self.build_payload(request)).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.extra_headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        http_request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        where = f"{self.endpoint} (model {self.model})"
        try:
            with urllib.request.urlopen(http_request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise SummarizerError(
                f"Summarizer at {where} answered HTTP {error.code}: {_error_detail(error)}"
            ) from error
        except urllib.error.URLError as error:
            if _is_timeout(error.reason):
                raise SummarizerError(f"Summarizer at {where} timed out after {self.timeout:g}s") from error
            raise SummarizerError(f"Summarizer at {where} is unreachable: {error.reason}") from error
        except TimeoutError as error:
            raise SummarizerError(f"Summarizer at {where} timed out after {self.timeout:g}s") from error
        except OSError as error:
            raise SummarizerError(f"Summarizer at {where} is unreachable: {error}") from error
        return _summary_from_reply(raw, where)


def _error_detail(error: urllib.error.HTTPError) -> str:
    try:
        raw = error.read()
    except OSError:
        raw = b""
    text = raw.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        detail = parsed.get("error")
        if isinstance(detail, dict) and isinstance(detail.get("message"), str):
            text = detail["message"]
        elif isinstance(detail, str):
            text = detail
    text = text or str(error.reason)
    return text[:_ERROR_BODY_CHARS]


def _summary_from_reply(raw: bytes, where: str) -> str:
    try:
        reply = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise SummarizerError(f"Summarizer at {where} sent a malformed reply (not JSON)") from error
    try:
        choice = reply["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError) as error:
        raise SummarizerError(
            f"Summarizer at {where} sent a malformed reply (no choices[0].message.content)"
        ) from error
    if isinstance(content, list):
        # Some servers answer with content parts instead of a string.
        content = "\n".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    if not isinstance(content, str):
        raise SummarizerError(f"Summarizer at {where} sent a malformed reply (content is not text)")
    if isinstance(choice, dict) and choice.get("finish_reason") == "length":
        raise SummarizerError(f"Summarizer at {where} stopped at its output limit; the summary would be cut off")
    text = content.strip()
    if not text:
        raise SummarizerError(f"Summarizer at {where} returned an empty summary")
    return text
