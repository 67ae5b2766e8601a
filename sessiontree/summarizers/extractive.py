"""The offline summarizer: a deterministic digest, no model needed.

It extracts instead of paraphrasing: the user's requests (first and latest),
what the assistant did (tool calls by name, commands run, errors seen, its
latest replies) and the files read and modified. The same request always
gives the same text, and the text never exceeds ``max_chars``. Updating a
previous compaction summary keeps it and adds the new part after it, so
nothing earlier is silently dropped until the length bound forces it (then
the middle of the old text goes first, with a visible marker).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.compaction import FileOperations, message_text, strip_file_operations

from .base import SummaryRequest

_OMITTED = "\n\n[… {count} characters of the earlier summary omitted …]\n\n"
_CUT = "\n[… summary cut to its length limit …]"
# However long the update, this much of the previous summary survives.
_MIN_PREVIOUS_CHARS = 800


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


@dataclass
class _Digest:
    """What the messages of a request say, in order of appearance."""

    requests: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    earlier_summaries: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    tool_calls: Counter[str] = field(default_factory=Counter)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    file_ops: FileOperations = field(default_factory=FileOperations)
    counts: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]]) -> _Digest:
        digest = cls()
        for message in messages:
            role = message.get("role")
            digest.counts[str(role)] += 1
            if role == "user":
                text = message_text(message)
                if text.strip():
                    digest.requests.append(text)
            elif role == "custom":
                text = message_text(message)
                if text.strip():
                    digest.notes.append(text)
            elif role in ("compactionSummary", "branchSummary"):
                summary = message.get("summary")
                if isinstance(summary, str) and summary.strip():
                    digest.earlier_summaries.append(strip_file_operations(summary))
            elif role == "bashExecution":
                command = message.get("command")
                if isinstance(command, str) and command.strip():
                    digest.commands.append(command)
                    exit_code = message.get("exitCode")
                    if exit_code not in (None, 0):
                        digest.errors.append(f"`{_one_line(command)}` exited with code {exit_code}")
            elif role == "assistant":
                digest._add_assistant(message)
            elif role == "toolResult" and message.get("isError"):
                first_line = next((line for line in message_text(message).splitlines() if line.strip()), "")
                digest.errors.append(f"{message.get('toolName') or 'tool'}: {first_line}")
        return digest

    def _add_assistant(self, message: Mapping[str, Any]) -> None:
        self.file_ops.add_from_message(message)
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return
        texts: list[str] = []
        for block in content:
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                texts.append(block["text"])
            elif block.get("type") == "toolCall":
                name = block.get("name")
                self.tool_calls[str(name)] += 1
                arguments = block.get("arguments")
                if isinstance(arguments, Mapping) and isinstance(arguments.get("command"), str):
                    self.commands.append(arguments["command"])
        if texts:
            self.replies.append("\n".join(texts))


class ExtractiveSummarizer:
    """Deterministic, bounded summaries built from the messages themselves."""

    name = "extractive"

    def __init__(
        self,
        *,
        max_chars: int = 6000,
        snippet_chars: int = 240,
        first_requests: int = 3,
        latest_requests: int = 5,
        latest_replies: int = 3,
        list_limit: int = 12,
    ) -> None:
        if max_chars < 1000:
            raise ValueError("max_chars must be at least 1000")
        self.max_chars = max_chars
        self.snippet_chars = snippet_chars
        self.first_requests = first_requests
        self.latest_requests = latest_requests
        self.latest_replies = latest_replies
        self.list_limit = list_limit

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_chars={self.max_chars})"

    def summarize(self, request: SummaryRequest) -> str:
        digest = _Digest.of(request.messages)
        digest.file_ops.read.update(request.read_files)
        digest.file_ops.edited.update(request.modified_files)
        if request.kind == "turn_prefix":
            text = self._turn_prefix(digest)
        else:
            text = self._checkpoint(digest, request)
            previous = (request.previous_summary or "").strip() if request.kind == "compaction" else ""
            if previous:
                text = self._merge_with_previous(strip_file_operations(previous).strip(), text)
        return self._bound(text)

    # --- layouts ---------------------------------------------------------------

    def _checkpoint(self, digest: _Digest, request: SummaryRequest) -> str:
        goal_heading = "## Goal (branch)" if request.kind == "branch" else "## Goal"
        sections = [goal_heading + "\n" + self._bullets(self._request_lines(digest), "(no user request in this part)")]
        sections.append("## Progress\n" + self._bullets(self._progress_lines(digest), "(nothing done yet)"))
        sections.append("## Files\n" + self._bullets(self._file_lines(digest), "(no files read or modified)"))
        if request.custom_instructions:
            sections.append("## Requested Focus\n- " + _clip(request.custom_instructions, self.snippet_chars))
        # Least essential last: the length bound cuts from the end.
        if digest.earlier_summaries:
            sections.append(
                "## Earlier Summaries\n"
                + self._bullets([_clip(s, self.snippet_chars * 2) for s in digest.earlier_summaries[-2:]], "")
            )
        if digest.notes:
            sections.append("## Notes\n" + self._bullets(self._latest(digest.notes, self.latest_replies), ""))
        if digest.replies:
            sections.append(
                "## Latest Assistant Replies\n" + self._bullets(self._latest(digest.replies, self.latest_replies), "")
            )
        return "\n\n".join(sections)

    def _turn_prefix(self, digest: _Digest) -> str:
        if digest.requests:
            original = "- " + _clip(digest.requests[0], self.snippet_chars * 2)
        elif digest.commands:
            original = "- (the turn began with a command) `" + _clip(digest.commands[0], self.snippet_chars) + "`"
        else:
            original = "- (the turn's request is not in this part)"
        early = self._progress_lines(digest) + [
            "Assistant: " + reply for reply in self._latest(digest.replies, self.latest_replies)
        ]
        return "\n\n".join(
            [
                "## Original Request\n" + original,
                "## Early Progress\n" + self._bullets(early, "(no progress before the cut)"),
                "## Context for the Rest\n" + self._bullets(self._file_lines(digest), "(no files touched yet)"),
            ]
        )

    def _merge_with_previous(self, previous: str, update: str) -> str:
        # Demote the update's sections one level so they sit under one heading.
        nested = re.sub(r"^## ", "### ", update, flags=re.MULTILINE)
        addition = "\n\n---\n\n## Update (since the previous summary)\n\n" + nested
        room = self.max_chars - len(addition)
        if len(previous) > room:
            previous = self._squeeze(previous, max(room, _MIN_PREVIOUS_CHARS))
        return previous + addition

    # --- pieces -------------------------------------------------------------------

    def _request_lines(self, digest: _Digest) -> list[str]:
        requests = digest.requests
        limit = self.first_requests + self.latest_requests
        if len(requests) <= limit:
            chosen = requests
            skipped = 0
        else:
            chosen = requests[: self.first_requests] + requests[-self.latest_requests :]
            skipped = len(requests) - limit
        lines = [_clip(text, self.snippet_chars) for text in chosen]
        if skipped:
            lines.insert(self.first_requests, f"(… {skipped} more requests …)")
        return lines

    def _progress_lines(self, digest: _Digest) -> list[str]:
        lines: list[str] = []
        counted = [(role, digest.counts[role]) for role in ("user", "assistant", "toolResult") if digest.counts[role]]
        if counted:
            lines.append("Messages: " + ", ".join(f"{count} {role}" for role, count in counted))
        if digest.tool_calls:
            ranked = sorted(digest.tool_calls.items(), key=lambda item: (-item[1], item[0]))
            lines.append("Tool calls: " + ", ".join(f"{name} ({count})" for name, count in ranked[: self.list_limit]))
        if digest.commands:
            latest = self._distinct_latest(digest.commands, 5)
            lines.append("Commands run (latest): " + ", ".join(f"`{_clip(c, 80)}`" for c in latest))
        if digest.errors:
            lines.append("Errors seen: " + "; ".join(_clip(e, 160) for e in self._distinct_latest(digest.errors, 5)))
        return lines

    def _file_lines(self, digest: _Digest) -> list[str]:
        read_files, modified_files = digest.file_ops.file_lists()
        lines: list[str] = []
        for label, files in (("Modified", modified_files), ("Read", read_files)):
            if files:
                shown = ", ".join(files[: self.list_limit])
                more = len(files) - self.list_limit
                lines.append(f"{label}: {shown}" + (f" (+{more} more)" if more > 0 else ""))
        return lines

    def _latest(self, texts: Sequence[str], count: int) -> list[str]:
        return [_clip(text, self.snippet_chars) for text in texts[-count:]] if count > 0 else []

    @staticmethod
    def _distinct_latest(items: Sequence[str], count: int) -> list[str]:
        seen: set[str] = set()
        latest: list[str] = []
        for item in reversed(items):
            key = _one_line(item)
            if key not in seen:
                seen.add(key)
                latest.append(item)
            if len(latest) == count:
                break
        latest.reverse()
        return latest

    @staticmethod
    def _bullets(lines: Sequence[str], empty: str) -> str:
        if not lines:
            return f"- {empty}" if empty else ""
        return "\n".join(f"- {line}" for line in lines)

    @staticmethod
    def _squeeze(text: str, limit: int) -> str:
        """Keep the beginning (the original goal) and the end (the latest
        update) of an over-long text, dropping its middle."""
        if len(text) <= limit:
            return text
        marker_room = len(_OMITTED.format(count=len(text)))
        keep = max(limit - marker_room, 0)
        head = keep // 2
        tail = keep - head
        omitted = len(text) - head - tail
        return text[:head] + _OMITTED.format(count=omitted) + (text[-tail:] if tail else "")

    def _bound(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars - len(_CUT)].rstrip() + _CUT
