"""A classifier backed by an OpenAI-compatible ``/v1/moderations`` endpoint.

One POST per batch of texts (``{"model", "input": [...]}``), with the
standard library's HTTP client. Categories the endpoint flags map onto ours
(``harassment/threatening`` → ``harassment``, ``self-harm/intent`` →
``self_harm``, ``illicit`` → ``illegal`` …; anything else → ``other``).
Rate limits (429), server errors (5xx) and timeouts are retried with a
growing pause, a bounded number of times; then, and for any other failure,
``ClassifierError`` says what went wrong (the API key never appears in it).
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from .base import ClassifierError, Finding

# The endpoint's category families → ours (sessiontree/services/moderation.py CATEGORIES).
CATEGORY_MAP = {
    "harassment": "harassment",
    "hate": "hate",
    "self-harm": "self_harm",
    "sexual": "sexual",
    "violence": "violence",
    "illicit": "illegal",
}
BATCH_SIZE = 32
_RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}


def our_category(theirs: str) -> str:
    return CATEGORY_MAP.get(theirs.split("/", 1)[0], "other")


def _public_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class OpenAIModerationClassifier:
    """Findings from an OpenAI-compatible moderation endpoint."""

    name = "openai_moderation"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from django.conf import settings

        base_url = base_url or getattr(settings, "SESSIONTREE_MODERATION_OPENAI_BASE_URL", "") or ""
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ClassifierError(
                f"openai_moderation needs an http(s) base URL (SESSIONTREE_MODERATION_OPENAI_BASE_URL), "
                f"got {_public_url(base_url) if base_url else 'nothing'!r}"
            )
        seconds = float(
            timeout if timeout is not None else getattr(settings, "SESSIONTREE_MODERATION_OPENAI_TIMEOUT", 30)
        )
        if not (math.isfinite(seconds) and seconds > 0):
            raise ClassifierError(f"The moderation timeout must be a positive number of seconds, got {seconds!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = (
            api_key if api_key is not None else getattr(settings, "SESSIONTREE_MODERATION_OPENAI_API_KEY", "")
        )
        self.model = model or getattr(settings, "SESSIONTREE_MODERATION_OPENAI_MODEL", "omni-moderation-latest")
        self.timeout = seconds
        self.retries = int(
            retries if retries is not None else getattr(settings, "SESSIONTREE_MODERATION_OPENAI_RETRIES", 3)
        )
        self.sleep = sleep

    def classify(self, texts: Sequence[str]) -> list[list[Finding]]:
        results: list[list[Finding]] = [[] for _ in texts]
        wanted = [index for index, text in enumerate(texts) if text.strip()]
        for start in range(0, len(wanted), BATCH_SIZE):
            batch = wanted[start : start + BATCH_SIZE]
            answers = self._moderate([texts[index] for index in batch])
            for index, answer in zip(batch, answers, strict=True):
                results[index] = self._findings(answer)
        return results

    # --- the endpoint ------------------------------------------------------------------------

    def _moderate(self, inputs: list[str]) -> list[dict[str, Any]]:
        url = f"{self.base_url}/moderations"
        body = json.dumps({"model": self.model, "input": inputs}).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempt = 0
        while True:
            attempt += 1
            try:
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    reply = json.loads(response.read().decode("utf-8"))
                break
            except urllib.error.HTTPError as error:
                if error.code in _RETRY_STATUSES and attempt <= self.retries:
                    self.sleep(self._pause(attempt, error.headers.get("Retry-After")))
                    continue
                raise ClassifierError(
                    f"The moderation endpoint {_public_url(url)} answered HTTP {error.code}"
                ) from None
            # A reply cut short (IncompleteRead, a bad status line) is a transport failure too.
            except (TimeoutError, urllib.error.URLError, ConnectionError, http.client.HTTPException) as error:
                reason = getattr(error, "reason", error)
                if attempt <= self.retries:
                    self.sleep(self._pause(attempt, None))
                    continue
                raise ClassifierError(
                    f"The moderation endpoint {_public_url(url)} cannot be reached ({type(reason).__name__})"
                ) from None
            except (ValueError, UnicodeDecodeError):
                raise ClassifierError(
                    f"The moderation endpoint {_public_url(url)} sent a reply that is not JSON"
                ) from None
        answers = reply.get("results") if isinstance(reply, dict) else None
        if (
            not isinstance(answers, list)
            or len(answers) != len(inputs)
            or not all(isinstance(a, dict) for a in answers)
        ):
            raise ClassifierError(
                f"The moderation endpoint {_public_url(url)} sent {len(answers) if isinstance(answers, list) else 'no'} "
                f"results for {len(inputs)} inputs"
            )
        return answers

    @staticmethod
    def _pause(attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(30.0, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return min(30.0, 0.5 * 2 ** (attempt - 1))

    @staticmethod
    def _findings(answer: dict[str, Any]) -> list[Finding]:
        if not answer.get("flagged"):
            return []
        raw_flags, raw_scores = answer.get("categories"), answer.get("category_scores")
        flags: dict[str, Any] = raw_flags if isinstance(raw_flags, dict) else {}
        scores: dict[str, Any] = raw_scores if isinstance(raw_scores, dict) else {}
        best: dict[str, tuple[float, str]] = {}
        for theirs, flagged in flags.items():
            if not flagged:
                continue
            score = scores.get(theirs)
            value = float(score) if isinstance(score, int | float) else 1.0
            ours = our_category(str(theirs))
            if ours not in best or value > best[ours][0]:
                best[ours] = (value, str(theirs))
        if not best:
            return [Finding("other", "Flagged by the moderation endpoint (no category named)", 1.0)]
        return [
            Finding(ours, f"Moderation endpoint: {theirs} ({value:.2f})", round(min(1.0, max(0.0, value)), 4))
            for ours, (value, theirs) in sorted(best.items())
        ]
