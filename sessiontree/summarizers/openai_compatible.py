"""A summarizer backed by any OpenAI-compatible chat-completions server.

One POST to ``{base_url}/chat/completions`` per summary, with the standard
library's HTTP client (no extra dependency). Every way the call can fail —
server unreachable, timeout, HTTP error status, a reply that is not the
expected JSON, an empty or cut-off answer — raises ``SummarizerError`` with a
message that says which, and never returns partial text. The API key never
appears in an error: it is masked wherever a server echoes it back, and the
URL shown in messages drops any user info and query string.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import urllib.error
import urllib.parse
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
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SummarizerError(
                f"The OpenAI-compatible summarizer needs an http(s) base URL with a host, got {_public_url(base_url)!r}"
            )
        try:
            seconds = float(timeout)
        except (TypeError, ValueError):
            seconds = math.nan
        # The socket refuses a negative or infinite timeout, and 0 would make it non-blocking.
        if not (math.isfinite(seconds) and seconds > 0):
            raise SummarizerError(f"The summarizer timeout must be a positive number of seconds, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key or None
        self.timeout = seconds
        self.temperature = temperature
        self.extra_headers = dict(extra_headers or {})

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def __repr__(self) -> str:
        # Never show the API key.
        return (
            f"OpenAICompatibleSummarizer(endpoint={_public_url(self.endpoint)!r}, "
            f"model={self.model!r}, timeout={self.timeout})"
        )

    def _masked(self, text: str) -> str:
        """``text`` with the API key masked: servers often quote a rejected key back."""
        return text.replace(self.api_key, "***") if self.api_key else text

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
        where = f"{_public_url(self.endpoint)} (model {self.model})"
        cause: BaseException
        try:
            with urllib.request.urlopen(http_request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            cause, message = error, f"Summarizer at {where} answered HTTP {error.code}: {_error_detail(error)}"
        except urllib.error.URLError as error:
            cause = error
            if _is_timeout(error.reason):
                message = f"Summarizer at {where} timed out after {self.timeout:g}s"
            else:
                message = f"Summarizer at {where} is unreachable: {error.reason}"
        except TimeoutError as error:
            cause, message = error, f"Summarizer at {where} timed out after {self.timeout:g}s"
        except OSError as error:
            cause, message = error, f"Summarizer at {where} is unreachable: {error}"
        except http.client.HTTPException as error:
            # Not HTTP at all (BadStatusLine), or a body cut short (IncompleteRead).
            cause = error
            message = f"Summarizer at {where} sent an invalid HTTP reply ({type(error).__name__})"
        else:
            return _summary_from_reply(raw, where)
        raise SummarizerError(self._masked(message)) from cause


def _public_url(url: str) -> str:
    """``url`` fit for a message: no user info (a password) and no query (a key parameter)."""
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.hostname or ""
        if parts.port is not None:
            netloc += f":{parts.port}"
    except ValueError:
        return "(unparsable URL)"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


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
