"""The summarizer protocol: one request in, summary text out.

A summarizer is any object with ``summarize(request) -> str``. It either
returns the full text or raises ``SummarizerError``; it never writes
anything, so a failed summary can never leave a half-written entry behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from sessiontree.core.compaction import serialize_conversation

SummaryKind = Literal["compaction", "turn_prefix", "branch"]
SUMMARY_KINDS: frozenset[str] = frozenset({"compaction", "turn_prefix", "branch"})


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarize and how.

    ``kind``: ``"compaction"`` (history before the kept region; updates
    ``previous_summary`` when there is one), ``"turn_prefix"`` (the start of
    a turn cut in two by a compaction), or ``"branch"`` (a branch the user
    left). ``messages`` are agent messages, oldest first. With
    ``replace_instructions`` the ``custom_instructions`` replace the default
    branch prompt instead of adding a focus to it. ``read_files`` and
    ``modified_files`` are the paths the summarized part touched.
    ``max_tokens`` caps the length of a model's answer.
    """

    kind: SummaryKind
    messages: Sequence[Mapping[str, Any]]
    previous_summary: str | None = None
    custom_instructions: str | None = None
    replace_instructions: bool = False
    read_files: Sequence[str] = ()
    modified_files: Sequence[str] = ()
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in SUMMARY_KINDS:
            raise ValueError(f"Unknown summary kind {self.kind!r}; expected one of {sorted(SUMMARY_KINDS)}")

    def conversation_text(self) -> str:
        return serialize_conversation(self.messages)


@runtime_checkable
class Summarizer(Protocol):
    """Turns a ``SummaryRequest`` into summary text, or raises ``SummarizerError``."""

    name: str

    def summarize(self, request: SummaryRequest) -> str: ...
