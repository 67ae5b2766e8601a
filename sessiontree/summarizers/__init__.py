"""Summarizer back ends for compaction and branch summaries.

``get_summarizer()`` builds the configured one: ``SESSIONTREE_SUMMARIZER`` is
``"extractive"`` (offline and deterministic, the default) or ``"openai"``
(any OpenAI-compatible chat-completions server, configured by
``SESSIONTREE_OPENAI_BASE_URL``, ``_MODEL``, ``_API_KEY`` and ``_TIMEOUT``).
Django settings are read only when ``get_summarizer`` is called, and the
environment is used when Django is not configured, so the classes and this
package import without Django.
"""

from __future__ import annotations

import os
from typing import Any

from sessiontree.core.compaction import merge_split_turn_summary
from sessiontree.core.errors import SummarizerError

from .base import SUMMARY_KINDS, Summarizer, SummaryKind, SummaryRequest
from .extractive import ExtractiveSummarizer
from .generate import (
    BranchSummary,
    CompactionSummary,
    generate_branch_summary,
    generate_compaction_summary,
    run_summarizer,
)
from .openai_compatible import OpenAICompatibleSummarizer

__all__ = [
    "SUMMARIZER_NAMES",
    "SUMMARY_KINDS",
    "BranchSummary",
    "CompactionSummary",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummaryKind",
    "SummaryRequest",
    "generate_branch_summary",
    "generate_compaction_summary",
    "get_summarizer",
    "merge_split_turn_summary",
    "run_summarizer",
]

SUMMARIZER_NAMES = ("extractive", "openai")
_DEFAULTS: dict[str, Any] = {
    "SESSIONTREE_SUMMARIZER": "extractive",
    "SESSIONTREE_OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
    "SESSIONTREE_OPENAI_MODEL": "gpt-4o-mini",
    "SESSIONTREE_OPENAI_API_KEY": "",
    "SESSIONTREE_OPENAI_TIMEOUT": 60.0,
}


def _setting(name: str) -> Any:
    try:
        from django.conf import settings

        if settings.configured:
            return getattr(settings, name, _DEFAULTS[name])
    except ImportError:  # pragma: no cover - Django is a dependency of the project
        pass
    return os.environ.get(name, _DEFAULTS[name])


def get_summarizer(name: str | None = None) -> Summarizer:
    """The summarizer called ``name``, or the configured one."""
    chosen = (name or _setting("SESSIONTREE_SUMMARIZER") or "extractive").strip().lower()
    if chosen == "extractive":
        return ExtractiveSummarizer()
    if chosen in ("openai", "openai-compatible"):
        raw_timeout = _setting("SESSIONTREE_OPENAI_TIMEOUT")
        try:
            timeout = float(raw_timeout)
        except (TypeError, ValueError) as error:
            raise SummarizerError(
                f"SESSIONTREE_OPENAI_TIMEOUT must be a number of seconds, got {raw_timeout!r}"
            ) from error
        return OpenAICompatibleSummarizer(
            base_url=_setting("SESSIONTREE_OPENAI_BASE_URL"),
            model=_setting("SESSIONTREE_OPENAI_MODEL"),
            api_key=_setting("SESSIONTREE_OPENAI_API_KEY") or None,
            timeout=timeout,
        )
    raise SummarizerError(f"Unknown summarizer {chosen!r}; expected one of {', '.join(SUMMARIZER_NAMES)}")
