"""Compaction: Pi's token estimate, cut points, split turns and preparation.

A compaction replaces the older part of the active path with a summary. It
is stored as a ``compaction`` entry appended at the leaf, holding the summary
and ``firstKeptEntryId``: context building then emits the summary, the kept
entries from ``firstKeptEntryId`` up to the compaction, and everything after.

Everything here is pure: it reads entries and messages and never calls a
model. ``prepare_compaction`` says *what* to summarize; a summarizer (see
``sessiontree.summarizers``) writes the text; a service appends the entry.

Pi counts string lengths in UTF-16 code units (JavaScript's ``length``) and
serializes tool-call arguments with ``JSON.stringify``; both are mirrored so
that cut points land on the same entries Pi would choose.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .context_builder import (
    branch_summary_message,
    build_context_from_path,
    compaction_summary_message,
    custom_message,
)
from .types import Entry

Message = dict[str, Any]

# An image block has no text to measure; Pi charges it as 4,800 characters
# (1,200 tokens), a deliberate overestimate.
ESTIMATED_IMAGE_CHARS = 4800

# Tool results can be huge (file dumps); a summarizer only needs their start.
TOOL_RESULT_MAX_CHARS = 2000

# Pi's wording for the combined text of a split-turn compaction. Kept
# verbatim because it is stored in session files that Pi reads back.
SPLIT_TURN_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
NO_PRIOR_HISTORY = "No prior history."


@dataclass(frozen=True)
class CompactionSettings:
    """When to compact and how much recent context to keep (Pi's defaults)."""

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000


# --- token estimate -----------------------------------------------------------


def js_length(text: Any) -> int:
    """``text.length`` as JavaScript counts it: UTF-16 code units."""
    if not isinstance(text, str):
        return 0
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_json_stringify(value: Any) -> str:
    """Compact JSON as ``JSON.stringify`` writes it (no spaces, non-ASCII kept)."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:
        # orjson refuses non-string keys and integers beyond 64 bits.
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _ceil_quarter(chars: int) -> int:
    return math.ceil(chars / 4)


def estimate_text_tokens(text: Any) -> int:
    return _ceil_quarter(js_length(text))


def _content_chars(content: Any) -> int:
    """Characters of a string or of a block list's text and image blocks."""
    if isinstance(content, str):
        return js_length(content)
    chars = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            block_type = block.get("type")
            if block_type == "text" and block.get("text"):
                chars += js_length(block.get("text"))
            elif block_type == "image":
                chars += ESTIMATED_IMAGE_CHARS
    return chars


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """Conservative token count of one agent message: characters / 4, rounded up.

    What counts per role: user, custom and tool results count their text and
    images; an assistant counts text, thinking, and each tool call's name plus
    its JSON arguments; a bash execution counts command and output; branch and
    compaction summaries count the summary. Unknown roles count nothing.
    """
    role = message.get("role")
    if role in ("user", "custom", "toolResult"):
        return _ceil_quarter(_content_chars(message.get("content")))
    if role == "assistant":
        chars = 0
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, Mapping):
                    continue
                block_type = block.get("type")
                if block_type == "text":
                    chars += js_length(block.get("text"))
                elif block_type == "thinking":
                    chars += js_length(block.get("thinking"))
                elif block_type == "toolCall":
                    chars += js_length(block.get("name")) + js_length(js_json_stringify(block.get("arguments")))
        elif isinstance(content, str):
            chars = js_length(content)
        return _ceil_quarter(chars)
    if role == "bashExecution":
        return _ceil_quarter(js_length(message.get("command")) + js_length(message.get("output")))
    if role in ("branchSummary", "compactionSummary"):
        return _ceil_quarter(js_length(message.get("summary")))
    return 0


def calculate_context_tokens(usage: Mapping[str, Any]) -> int:
    """Tokens a provider reported for a whole request: ``totalTokens``, else the sum of its parts."""
    total = usage.get("totalTokens")
    if isinstance(total, (int, float)) and total:
        return int(total)
    return int(sum(usage.get(key) or 0 for key in ("input", "output", "cacheRead", "cacheWrite")))


def assistant_usage(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The usage of an assistant reply that can be trusted: not aborted, not an error, not empty."""
    if message.get("role") != "assistant":
        return None
    if message.get("stopReason") in ("aborted", "error"):
        return None
    usage = message.get("usage")
    if not isinstance(usage, Mapping) or calculate_context_tokens(usage) <= 0:
        return None
    return usage


def last_assistant_usage(entries: Sequence[Entry]) -> Mapping[str, Any] | None:
    """Usage of the newest trustworthy assistant message among ``entries``."""
    for entry in reversed(entries):
        if entry.get("type") == "message":
            usage = assistant_usage(entry.get("message") or {})
            if usage is not None:
                return usage
    return None


@dataclass(frozen=True)
class ContextUsageEstimate:
    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def estimate_context_tokens(messages: Sequence[Mapping[str, Any]]) -> ContextUsageEstimate:
    """Size of a context: the provider's count at the last valid assistant
    reply, plus an estimate of every message after it. Without any usage,
    everything is estimated."""
    for index in range(len(messages) - 1, -1, -1):
        usage = assistant_usage(messages[index])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = sum(estimate_tokens(m) for m in messages[index + 1 :])
            return ContextUsageEstimate(usage_tokens + trailing, usage_tokens, trailing, index)
    estimated = sum(estimate_tokens(m) for m in messages)
    return ContextUsageEstimate(estimated, 0, estimated, None)


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """True once the context leaves less than ``reserve_tokens`` of the window free."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


# --- cut points ------------------------------------------------------------------

# Roles a kept region may start with. A tool result may not: it would lose
# the assistant tool call it answers.
_CUTTABLE_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
# Entries that act as a user turn in the LLM context.
_USER_LIKE_ENTRY_TYPES = frozenset({"branch_summary", "custom_message"})


def _role(entry: Entry) -> Any:
    return (entry.get("message") or {}).get("role")


def find_valid_cut_points(entries: Sequence[Entry], start: int, end: int) -> list[int]:
    """Indices in ``[start, end)`` where a kept region may begin."""
    points: list[int] = []
    for index in range(start, end):
        entry = entries[index]
        entry_type = entry.get("type")
        if (entry_type == "message" and _role(entry) in _CUTTABLE_ROLES) or entry_type in _USER_LIKE_ENTRY_TYPES:
            points.append(index)
    return points


def find_turn_start_index(entries: Sequence[Entry], entry_index: int, start: int) -> int:
    """Index of the entry that opened the turn holding ``entry_index``: a user
    message, a bash execution, a branch summary or a custom message. ``-1``
    when there is none at or after ``start``."""
    for index in range(entry_index, start - 1, -1):
        entry = entries[index]
        entry_type = entry.get("type")
        if entry_type in _USER_LIKE_ENTRY_TYPES:
            return index
        if entry_type == "message" and _role(entry) in ("user", "bashExecution"):
            return index
    return -1


@dataclass(frozen=True)
class CutPoint:
    first_kept_entry_index: int
    # Where the split turn begins, -1 when the cut does not split a turn.
    turn_start_index: int
    is_split_turn: bool


def find_cut_point(entries: Sequence[Entry], start: int, end: int, keep_recent_tokens: int) -> CutPoint:
    """Where to cut so that about ``keep_recent_tokens`` of recent messages stay.

    Walk back from ``end`` adding up message estimates; at the message where
    the budget is reached, cut at the nearest valid cut point at or after it
    (never at a tool result, so a tool call always keeps its results). Then
    pull in the settings/label/custom entries just before the cut, stopping at
    a message or a compaction. A cut that lands on anything but a user message
    splits a turn; the turn's opening entry is reported with it.
    Without any valid cut point everything from ``start`` is kept.
    """
    cut_points = find_valid_cut_points(entries, start, end)
    if not cut_points:
        return CutPoint(start, -1, False)

    cut_index = cut_points[0]
    accumulated = 0
    for index in range(end - 1, start - 1, -1):
        entry = entries[index]
        if entry.get("type") != "message":
            continue
        accumulated += estimate_tokens(entry.get("message") or {})
        if accumulated >= keep_recent_tokens:
            for point in cut_points:
                if point >= index:
                    cut_index = point
                    break
            break

    while cut_index > start:
        previous_type = entries[cut_index - 1].get("type")
        if previous_type in ("compaction", "message"):
            break
        cut_index -= 1

    cut_entry = entries[cut_index]
    is_user_message = cut_entry.get("type") == "message" and _role(cut_entry) == "user"
    turn_start = -1 if is_user_message else find_turn_start_index(entries, cut_index, start)
    return CutPoint(cut_index, turn_start, not is_user_message and turn_start != -1)


# --- file operations -------------------------------------------------------------


@dataclass
class FileOperations:
    """Paths touched by the built-in ``read``/``write``/``edit`` tools."""

    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add_from_message(self, message: Mapping[str, Any]) -> None:
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            return
        for block in message["content"]:
            if not isinstance(block, Mapping) or block.get("type") != "toolCall":
                continue
            arguments = block.get("arguments")
            if not isinstance(arguments, Mapping):
                continue
            path = arguments.get("path")
            if not isinstance(path, str) or not path:
                continue
            name = block.get("name")
            if name == "read":
                self.read.add(path)
            elif name == "write":
                self.written.add(path)
            elif name == "edit":
                self.edited.add(path)

    def add_from_details(self, details: Any) -> None:
        """Carry forward the lists a previous compaction or branch summary stored."""
        if not isinstance(details, Mapping):
            return
        read_files = details.get("readFiles")
        if isinstance(read_files, list):
            self.read.update(f for f in read_files if isinstance(f, str))
        modified_files = details.get("modifiedFiles")
        if isinstance(modified_files, list):
            self.edited.update(f for f in modified_files if isinstance(f, str))

    def file_lists(self) -> tuple[list[str], list[str]]:
        """``(read_files, modified_files)``, sorted; a file both read and
        modified counts as modified only."""
        modified = self.edited | self.written
        return sorted(self.read - modified), sorted(modified)

    def details(self) -> dict[str, list[str]]:
        """The ``details`` payload Pi stores on the entry it writes."""
        read_files, modified_files = self.file_lists()
        return {"readFiles": read_files, "modifiedFiles": modified_files}


def extract_file_operations(
    messages: Iterable[Mapping[str, Any]], file_ops: FileOperations | None = None
) -> FileOperations:
    file_ops = file_ops if file_ops is not None else FileOperations()
    for message in messages:
        file_ops.add_from_message(message)
    return file_ops


def format_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    """The tagged file lists appended to a stored summary (Pi's format, which Pi parses back)."""
    sections: list[str] = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    if not sections:
        return ""
    return "\n\n" + "\n\n".join(sections)


_FILE_OPERATION_TAGS = re.compile(r"\s*<(read-files|modified-files)>.*?</\1>", re.DOTALL)


def strip_file_operations(summary: str) -> str:
    """A stored summary without its appended file lists (they are rebuilt,
    cumulatively, on every compaction; an embedded copy would only pile up)."""
    return _FILE_OPERATION_TAGS.sub("", summary).rstrip()


def append_file_operations(summary: str, file_ops: FileOperations) -> str:
    read_files, modified_files = file_ops.file_lists()
    return summary + format_file_operations(read_files, modified_files)


def merge_split_turn_summary(history_summary: str | None, prefix_summary: str) -> str:
    """One summary text for a split-turn compaction: the history summary (or
    Pi's placeholder when nothing before the turn was summarized), then the
    summary of the cut turn's beginning, in the layout Pi stores."""
    history = history_summary if history_summary else NO_PRIOR_HISTORY
    return history + SPLIT_TURN_SEPARATOR + prefix_summary


# --- entries → messages for a summarizer -------------------------------------------


def entry_message_for_compaction(entry: Entry) -> Message | None:
    """The message an entry contributes to a compaction summary. A previous
    compaction entry contributes nothing: its text travels as ``previous_summary``."""
    entry_type = entry.get("type")
    if entry_type == "message":
        return entry.get("message")
    if entry_type == "custom_message":
        return custom_message(entry)
    if entry_type == "branch_summary":
        return branch_summary_message(entry)
    return None


def entry_message_for_branch_summary(entry: Entry) -> Message | None:
    """The message an entry contributes to a branch summary. Tool results are
    left out (the assistant's tool call says what was done); compactions on
    the abandoned branch contribute their summary."""
    entry_type = entry.get("type")
    if entry_type == "message":
        message = entry.get("message") or {}
        if message.get("role") == "toolResult":
            return None
        return message
    if entry_type == "custom_message":
        return custom_message(entry)
    if entry_type == "branch_summary":
        return branch_summary_message(entry)
    if entry_type == "compaction":
        return compaction_summary_message(entry)
    return None


# --- preparation ---------------------------------------------------------------------


@dataclass
class CompactionPreparation:
    """Everything a summarizer and the compaction entry need, computed from the path."""

    first_kept_entry_id: str
    first_kept_entry_index: int
    messages_to_summarize: list[Message]
    turn_prefix_messages: list[Message]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    previous_compaction_id: str | None
    file_ops: FileOperations
    settings: CompactionSettings

    @property
    def has_content(self) -> bool:
        """False when the kept region already starts where the last compaction
        kept from, so a new compaction would summarize nothing."""
        return bool(self.messages_to_summarize or self.turn_prefix_messages)

    def details(self) -> dict[str, list[str]]:
        return self.file_ops.details()


def prepare_compaction(path_entries: Sequence[Entry], settings: CompactionSettings) -> CompactionPreparation | None:
    """Plan a compaction of the active path (root first).

    Returns ``None`` for an empty path, and when the path already ends in a
    compaction (nothing new since). With an earlier compaction on the path,
    its summary is the ``previous_summary`` to update, and the region to
    consider starts at *its* first kept entry: those kept messages are still
    in the context, so they must be either summarized again or kept (Pi fixed
    dropping them in its issue #2608). ``tokens_before`` estimates the
    current context. File operations gather the previous compaction's lists
    and the tool calls of everything summarized.
    """
    if not path_entries or path_entries[-1].get("type") == "compaction":
        return None

    previous_index = -1
    for index in range(len(path_entries) - 1, -1, -1):
        if path_entries[index].get("type") == "compaction":
            previous_index = index
            break

    previous: Entry | None = path_entries[previous_index] if previous_index >= 0 else None
    boundary_start = 0
    if previous is not None:
        boundary_start = previous_index + 1
        kept_id = previous.get("firstKeptEntryId")
        for index in range(previous_index):
            if path_entries[index].get("id") == kept_id:
                boundary_start = index
                break
    boundary_end = len(path_entries)

    tokens_before = estimate_context_tokens(build_context_from_path(path_entries)["messages"]).tokens

    cut = find_cut_point(path_entries, boundary_start, boundary_end, settings.keep_recent_tokens)
    first_kept = path_entries[cut.first_kept_entry_index] if cut.first_kept_entry_index < boundary_end else None
    if first_kept is None or not first_kept.get("id"):
        return None  # entries without ids: the session must be migrated first

    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    messages_to_summarize = [
        message
        for entry in path_entries[boundary_start:history_end]
        if (message := entry_message_for_compaction(entry)) is not None
    ]
    turn_prefix_messages: list[Message] = []
    if cut.is_split_turn:
        turn_prefix_messages = [
            message
            for entry in path_entries[cut.turn_start_index : cut.first_kept_entry_index]
            if (message := entry_message_for_compaction(entry)) is not None
        ]

    file_ops = FileOperations()
    if previous is not None and not previous.get("fromHook"):
        # Lists written by an extension (fromHook) may mean something else.
        file_ops.add_from_details(previous.get("details"))
    extract_file_operations(messages_to_summarize, file_ops)
    extract_file_operations(turn_prefix_messages, file_ops)

    previous_summary = previous.get("summary") if previous is not None else None
    return CompactionPreparation(
        first_kept_entry_id=first_kept["id"],
        first_kept_entry_index=cut.first_kept_entry_index,
        messages_to_summarize=messages_to_summarize,
        turn_prefix_messages=turn_prefix_messages,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary if isinstance(previous_summary, str) else None,
        previous_compaction_id=previous.get("id") if previous is not None else None,
        file_ops=file_ops,
        settings=settings,
    )


# --- conversation text for a summarizer prompt -------------------------------------------

COMPACTION_SUMMARY_INTRO = "The conversation history before this point was compacted into the following summary:"
BRANCH_SUMMARY_INTRO = "The following is a summary of a branch that this conversation came back from:"


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block.get("text") or ""
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
    return ""


def message_text(message: Mapping[str, Any]) -> str:
    """Plain text of a user, custom or tool-result message (images dropped)."""
    return _blocks_text(message.get("content"))


def bash_execution_text(message: Mapping[str, Any]) -> str:
    """A user-run shell command as the model sees it."""
    command = message.get("command") or ""
    output = message.get("output") or ""
    text = f"Ran `{command}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code not in (None, 0):
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message.get('fullOutputPath')}]"
    return text


def _truncate(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n\n[... {len(text) - max_chars} more characters truncated]"


def _format_tool_arguments(arguments: Any) -> str:
    if not isinstance(arguments, Mapping):
        return "" if arguments is None else js_json_stringify(arguments)
    return ", ".join(f"{key}={js_json_stringify(value)}" for key, value in arguments.items())


def serialize_conversation(
    messages: Iterable[Mapping[str, Any]], *, tool_result_max_chars: int = TOOL_RESULT_MAX_CHARS
) -> str:
    """The conversation as labelled plain text, so a summarizing model reads it
    as a document instead of continuing it.

    Custom messages, bash executions and earlier summaries appear as the user
    turns they are in the LLM context; bash executions flagged
    ``excludeFromContext`` are left out, as the model never saw them. Long
    tool results are cut to their beginning.
    """
    parts: list[str] = []
    for message in messages:
        role = message.get("role")
        if role in ("user", "custom"):
            text = message_text(message)
            if text:
                parts.append(f"[User]: {text}")
        elif role == "bashExecution":
            if not message.get("excludeFromContext"):
                parts.append(f"[User]: {bash_execution_text(message)}")
        elif role == "compactionSummary":
            parts.append(f"[User]: {COMPACTION_SUMMARY_INTRO}\n\n<summary>\n{message.get('summary') or ''}\n</summary>")
        elif role == "branchSummary":
            parts.append(f"[User]: {BRANCH_SUMMARY_INTRO}\n\n<summary>\n{message.get('summary') or ''}\n</summary>")
        elif role == "assistant":
            texts: list[str] = []
            thinking: list[str] = []
            calls: list[str] = []
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                for block in content:
                    if not isinstance(block, Mapping):
                        continue
                    block_type = block.get("type")
                    if block_type == "text" and isinstance(block.get("text"), str):
                        texts.append(block["text"])
                    elif block_type == "thinking" and isinstance(block.get("thinking"), str):
                        thinking.append(block["thinking"])
                    elif block_type == "toolCall":
                        calls.append(f"{block.get('name')}({_format_tool_arguments(block.get('arguments'))})")
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = message_text(message)
            if text:
                parts.append(f"[Tool result]: {_truncate(text, tool_result_max_chars)}")
    return "\n\n".join(parts)
