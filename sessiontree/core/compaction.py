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
    ProjectedEntry,
    apply_context_edit,
    branch_summary_message,
    compaction_summary_message,
    custom_message,
    entry_context_messages,
    project_path,
)
from .entries import message_of
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


# Integers JavaScript holds exactly; beyond, a decoded JSON number is a double.
_JS_SAFE_INTEGER = 2**53


def js_number(value: float | int) -> str:
    """A number as JavaScript's ``Number.prototype.toString`` (and so
    ``JSON.stringify``) writes it: ``1e-7``, ``1e+21``, ``0.00001``, ``100``
    (never ``100.0``), ``0`` for ``-0``; ``null`` for NaN and infinities.
    Integers beyond 2**53 are written as the double JavaScript would have
    read from the JSON text."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) <= _JS_SAFE_INTEGER:
            return str(value)
        value = float(value)
    if value != value or value in (math.inf, -math.inf):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that read back as the same double, as
    # JavaScript does; only the layout of those digits differs.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    leading_zeros = len(whole + fraction) - len(significant)
    digits = significant.rstrip("0")
    # value = 0.<digits> * 10**n, with k digits
    k, n = len(digits), len(whole) + int(exponent or 0) - leading_zeros
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    shown = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{shown}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


def _js_drifts(value: Any) -> bool:
    """Whether Python's JSON of ``value`` may differ from JavaScript's: it
    holds a float, or an integer JavaScript cannot hold exactly."""
    if isinstance(value, float):
        return True
    if isinstance(value, int):
        return not isinstance(value, bool) and abs(value) > _JS_SAFE_INTEGER
    if isinstance(value, dict):
        return any(_js_drifts(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_js_drifts(item) for item in value)
    return False


def _js_stringify(value: Any) -> str:
    if value is None or value is True or value is False:
        return orjson.dumps(value).decode()
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_js_stringify(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(_js_stringify(item) for item in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def js_json_stringify(value: Any) -> str:
    """Compact JSON as ``JSON.stringify`` writes it (no spaces, non-ASCII
    kept, numbers as JavaScript writes them: see ``js_number``)."""
    if not _js_drifts(value):
        try:
            return orjson.dumps(value).decode("utf-8")
        except TypeError:
            pass  # non-string keys: written below
    return _js_stringify(value)


def _ceil_quarter(chars: int) -> int:
    return math.ceil(chars / 4)


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
    its JSON arguments (a plain-string content counts nothing, as in Pi, which
    walks it as a list of blocks); a system message counts its content, its
    sections and its added tools as JSON; a bash execution counts command and
    output; branch and compaction summaries count the summary. Unknown roles
    count nothing.
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
        return _ceil_quarter(chars)
    if role == "system":
        chars = _content_chars(message.get("content"))
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            chars += sum(js_length(text) for text in sections.values() if text)
        tools_added = message.get("toolsAdded")
        if tools_added:
            chars += js_length(js_json_stringify(tools_added))
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


def content_text(content: Any, separator: str = "\n") -> str:
    """A string content as is, or its text blocks joined (pi-ai's ``contentText``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return separator.join(
        str(block.get("text")) for block in content if isinstance(block, Mapping) and block.get("type") == "text"
    )


_UNDEFINED: Any = object()


def current_system_message(messages: Iterable[Mapping[str, Any]]) -> Message | None:
    """Every ``system`` message replayed into one (pi-ai's
    ``getCurrentSystemMessage``): contents appended, ``sections`` patched by
    name (``null`` removes one), tools added and removed by name. ``None``
    when there is no system message with a timestamp and no tool."""
    content: list[str] = []
    sections: dict[str, Any] = {}
    tools: dict[Any, Any] = {}
    timestamp: Any = _UNDEFINED
    for message in messages:
        if message.get("role") != "system":
            continue
        if timestamp is _UNDEFINED or timestamp is None:
            timestamp = message.get("timestamp", _UNDEFINED)
        text = content_text(message.get("content"))
        if text:
            content.append(text)
        message_sections = message.get("sections")
        if isinstance(message_sections, Mapping):
            for name, value in message_sections.items():
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
        for tool in message.get("toolsRemoved") or ():
            if isinstance(tool, Mapping):
                tools.pop(tool.get("name"), None)
        for tool in message.get("toolsAdded") or ():
            if isinstance(tool, Mapping):
                tools[tool.get("name")] = tool
    if timestamp is _UNDEFINED and not tools:
        return None
    system: Message = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        system["sections"] = sections
    if tools:
        system["toolsAdded"] = list(tools.values())
    system["timestamp"] = 0 if timestamp is _UNDEFINED or timestamp is None else timestamp
    return system


def estimate_projected_context_tokens(projection: Sequence[ProjectedEntry], path: Sequence[Entry]) -> int:
    """Size of a projected context, trusting the provider's count only when it
    was reported after the latest ``context_edit`` or compaction on ``path``
    (an edit or a compaction changes the context the count was made for);
    otherwise every message is estimated, the system messages as the one
    they replay into."""
    messages = [message for _entry, entry_messages in projection for message in entry_messages]
    estimate = estimate_context_tokens(messages)
    if estimate.last_usage_index is not None:
        usage_entry_id = None
        first_message = 0
        for entry, entry_messages in projection:
            next_message = first_message + len(entry_messages)
            if estimate.last_usage_index < next_message:
                usage_entry_id = entry.get("id")
                break
            first_message = next_message
        usage_entry_index = -1
        if usage_entry_id:
            usage_entry_index = next((i for i, entry in enumerate(path) if entry.get("id") == usage_entry_id), -1)
        latest_invalidating_index = -1
        for index in range(len(path) - 1, -1, -1):
            if path[index].get("type") in ("context_edit", "compaction"):
                latest_invalidating_index = index
                break
        if usage_entry_index > latest_invalidating_index:
            return estimate.tokens
    system = current_system_message(messages)
    tokens = estimate_tokens(system) if system is not None else 0
    return tokens + sum(estimate_tokens(message) for message in messages if message.get("role") != "system")


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """True once the context leaves less than ``reserve_tokens`` of the window free."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


# --- cut points ------------------------------------------------------------------

# Roles a kept region may start with. A tool result may not: it would lose
# the assistant tool call it answers.
_CUT_POINT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
# Roles that open a turn: everything the model reads as coming from the user.
_TURN_START_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary", "compactionSummary"})


def _is_cut_point(entry: Entry, messages: Sequence[Mapping[str, Any]]) -> bool:
    return entry.get("type") != "compaction" and any(m.get("role") in _CUT_POINT_ROLES for m in messages)


def _is_turn_start(entry: Entry, messages: Sequence[Mapping[str, Any]]) -> bool:
    return entry.get("type") != "compaction" and any(m.get("role") in _TURN_START_ROLES for m in messages)


@dataclass(frozen=True)
class CutPoint:
    first_kept_entry_index: int
    # Where the split turn begins, -1 when the cut does not split a turn.
    turn_start_index: int
    is_split_turn: bool


def _cut_point(
    items: Sequence[tuple[Entry, Sequence[Mapping[str, Any]]]], start: int, end: int, keep_recent_tokens: int
) -> tuple[int, bool]:
    """The budget walk shared by both cut-point searches: (cut index, whether the budget was reached)."""
    cut_points = [i for i in range(start, end) if _is_cut_point(*items[i])]
    if not cut_points:
        return start, False
    accumulated = 0
    for index in range(end - 1, start - 1, -1):
        tokens = sum(estimate_tokens(message) for message in items[index][1])
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            # The nearest cut point at or after this entry; when only trailing
            # tool results are left, the last cut point (their tool call).
            return next((p for p in cut_points if p >= index), cut_points[-1]), True
    return cut_points[0], False


def _finish_cut(items: Sequence[tuple[Entry, Sequence[Mapping[str, Any]]]], cut_index: int, start: int) -> CutPoint:
    # Pull in the context-invisible entries (settings, labels…) just before
    # the cut, stopping at a compaction or anything the model sees.
    while cut_index > start:
        previous_entry, previous_messages = items[cut_index - 1]
        if previous_entry.get("type") == "compaction" or previous_messages:
            break
        cut_index -= 1
    if _is_turn_start(*items[cut_index]):
        return CutPoint(cut_index, -1, False)
    turn_start = -1
    for index in range(cut_index, start - 1, -1):
        if _is_turn_start(*items[index]):
            turn_start = index
            break
    return CutPoint(cut_index, turn_start, turn_start != -1)


def find_cut_point(entries: Sequence[Entry], start: int, end: int, keep_recent_tokens: int) -> CutPoint:
    """Where to cut ``entries[start:end]`` so that about ``keep_recent_tokens``
    of recent context stays (Pi's ``findCutPoint``, on raw entries).

    Walk back from ``end`` adding up each entry's context messages; at the
    entry where the budget is reached, cut at the nearest valid cut point at
    or after it (never at a tool result, so a tool call always keeps its
    results; if only tool results follow, at the last cut point). Then pull
    in the settings/label/custom entries just before the cut. A cut on an
    entry that does not open a turn splits that turn; the turn's opening
    entry is reported with it. Without any valid cut point everything from
    ``start`` is kept.
    """
    items = [(entry, entry_context_messages(entry)) for entry in entries]
    if start >= end or not any(_is_cut_point(*items[i]) for i in range(start, end)):
        return CutPoint(start, -1, False)
    cut_index, _reached = _cut_point(items, start, end, keep_recent_tokens)
    return _finish_cut(items, cut_index, start)


def _is_intrinsically_visible(entry: Entry) -> bool:
    return entry.get("type") != "context_edit" and bool(entry_context_messages(entry))


def find_projected_cut_point(
    projection: Sequence[ProjectedEntry], start: int, end: int, keep_recent_tokens: int
) -> CutPoint:
    """``find_cut_point`` over a projected context (what ``prepare_compaction``
    uses): token counts and cut points come from what the model sees after
    context edits. One more rule: when the budget was reached and everything
    after the cut is an assistant attempt the context omits (a failed reply
    and the edit hiding it) plus invisible entries, the cut moves past the
    cut entry, so the hidden attempt is not what the kept region starts with."""
    if start >= end or not any(_is_cut_point(*projection[i]) for i in range(start, end)):
        return CutPoint(start, -1, False)
    cut_index, reached = _cut_point(projection, start, end, keep_recent_tokens)
    suffix = projection[cut_index + 1 : end]

    def is_omitted(item: ProjectedEntry) -> bool:
        return _is_intrinsically_visible(item[0]) and not item[1]

    omitted_ids = {entry.get("id") for entry, messages in suffix if is_omitted((entry, messages))}
    has_external_replacement = any(
        entry.get("type") == "context_edit"
        and entry.get("replacement") is not None
        and entry.get("targetId") not in omitted_ids
        for entry, _messages in suffix
    )
    if (
        reached
        and not has_external_replacement
        and any(
            entry.get("type") == "message" and _role(entry) == "assistant" and is_omitted((entry, messages))
            for entry, messages in suffix
        )
        and all(
            entry.get("type") != "compaction"
            and (not _is_intrinsically_visible(entry) or is_omitted((entry, messages)))
            for entry, messages in suffix
        )
    ):
        cut_index += 1
    return _finish_cut(projection, cut_index, start)


def _role(entry: Entry) -> Any:
    return message_of(entry).get("role")


# --- file operations -------------------------------------------------------------


@dataclass
class FileOperations:
    """Paths touched by the built-in ``read``/``write``/``edit`` tools."""

    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add_from_message(self, message: Mapping[str, Any]) -> None:
        """The tool calls of an assistant message, or the calls a tool result
        records as made from inside it (``nestedCalls``, e.g. a code-mode script)."""
        if message.get("role") == "toolResult":
            nested = message.get("nestedCalls")
            calls = nested.get("calls") if isinstance(nested, Mapping) else None
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, Mapping):
                    self._add(call.get("name"), call.get("arguments"))
            return
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            return
        for block in message["content"]:
            if not isinstance(block, Mapping) or block.get("type") != "toolCall":
                continue
            if "arguments" in block and "name" in block:
                self._add(block.get("name"), block.get("arguments"))

    def _add(self, name: Any, arguments: Any) -> None:
        path = arguments.get("path") if isinstance(arguments, Mapping) else None
        if not isinstance(path, str) or not path:
            return
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


def entry_message_for_branch_summary(entry: Entry, edit: Entry | None = None) -> Message | None:
    """The message an entry contributes to a branch summary, with its latest
    ``context_edit`` (if any) applied. Tool results are left out (the
    assistant's tool call says what was done); compactions on the abandoned
    branch contribute their summary; a branch summary counts even when empty."""
    entry_type = entry.get("type")
    if entry_type == "message":
        message = entry.get("message") or {}
        if message.get("role") == "toolResult":
            return None
        if edit is None:
            return message
        edited = apply_context_edit(entry_context_messages(entry), edit)
        return edited[0] if edited else None
    if entry_type == "custom_message":
        if edit is None:
            # Unlike the context, a branch summary takes the stored content as
            # it is, absent or null included.
            message = custom_message(entry)
            if "content" not in entry:
                del message["content"]
            else:
                message["content"] = entry["content"]
            return message
        edited = apply_context_edit(entry_context_messages(entry), edit)
        return edited[0] if edited else None
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
    first_kept_entry_index: int  # index of the first kept entry in the path
    messages_to_summarize: list[Message]
    turn_prefix_messages: list[Message]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    previous_compaction_id: str | None
    file_ops: FileOperations
    settings: CompactionSettings
    # The system prompt and tools in force (every system message of the
    # context replayed into one): the compaction entry stores it as its
    # ``systemMessage``, since the kept range drops system messages.
    system_message: Message | None = None

    @property
    def has_content(self) -> bool:
        """Always true: a preparation with nothing to summarize is not made."""
        return bool(self.messages_to_summarize or self.turn_prefix_messages)

    def details(self) -> dict[str, list[str]]:
        return self.file_ops.details()


def _summarizable(item: ProjectedEntry) -> list[Message]:
    entry, messages = item
    if entry.get("type") == "compaction":
        return []
    return [message for message in messages if message.get("role") != "system"]


def prepare_compaction(path_entries: Sequence[Entry], settings: CompactionSettings) -> CompactionPreparation | None:
    """Plan a compaction of the active path (root first), as Pi 1.6 does.

    Works on the projected context (what the model sees, context edits
    applied): with an earlier compaction on the path, that compaction comes
    first and the region to consider is everything after it, i.e. the
    entries it kept and the ones appended since (so messages it kept are
    summarized again or kept, never dropped: Pi's issue #2608); its summary is
    the ``previous_summary`` to update. ``tokens_before`` estimates the
    projected context. File operations gather the previous compaction's lists
    and the tool calls of everything summarized.

    Returns ``None`` for an empty path, when the path already ends in a
    compaction, and when there is nothing to summarize (Pi's #4811): no
    empty preparation is ever made.
    """
    if not path_entries or path_entries[-1].get("type") == "compaction":
        return None
    projection = project_path(path_entries)
    previous_index = next(
        (i for i, (entry, messages) in enumerate(projection) if entry.get("type") == "compaction" and messages), -1
    )
    previous: Entry | None = projection[previous_index][0] if previous_index >= 0 else None
    boundary_start = previous_index + 1
    boundary_end = len(projection)

    tokens_before = estimate_projected_context_tokens(projection, path_entries)
    cut = find_projected_cut_point(projection, boundary_start, boundary_end, settings.keep_recent_tokens)
    if cut.first_kept_entry_index >= boundary_end:
        return None
    first_kept = projection[cut.first_kept_entry_index][0]
    if not first_kept.get("id"):
        return None  # entries without ids: the session must be migrated first

    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    messages_to_summarize = [m for item in projection[boundary_start:history_end] for m in _summarizable(item)]
    turn_prefix_messages: list[Message] = []
    if cut.is_split_turn:
        turn_prefix_messages = [
            m for item in projection[cut.turn_start_index : cut.first_kept_entry_index] for m in _summarizable(item)
        ]
    if not messages_to_summarize and not turn_prefix_messages:
        return None

    file_ops = FileOperations()
    if previous is not None and not previous.get("fromHook"):
        # Lists written by an extension (fromHook) may mean something else.
        file_ops.add_from_details(previous.get("details"))
    extract_file_operations(messages_to_summarize, file_ops)
    extract_file_operations(turn_prefix_messages, file_ops)

    previous_summary = previous.get("summary") if previous is not None else None
    first_kept_id = first_kept["id"]
    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        first_kept_entry_index=next(i for i, entry in enumerate(path_entries) if entry.get("id") == first_kept_id),
        messages_to_summarize=messages_to_summarize,
        turn_prefix_messages=turn_prefix_messages,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary if isinstance(previous_summary, str) else None,
        previous_compaction_id=previous.get("id") if previous is not None else None,
        file_ops=file_ops,
        settings=settings,
        system_message=current_system_message(m for _entry, messages in projection for m in messages),
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
    """The first ``max_chars`` UTF-16 units of ``text`` (never half a surrogate
    pair), then how many more there were, as Pi cuts a tool result."""
    length = js_length(text)
    if length <= max_chars:
        return text
    if text.isascii():
        head = text[:max_chars]
    else:
        units = text.encode("utf-16-le", "surrogatepass")[: max_chars * 2]
        if len(units) >= 2 and 0xD800 <= int.from_bytes(units[-2:], "little") <= 0xDBFF:
            units = units[:-2]
        head = units.decode("utf-16-le", "surrogatepass")
    return f"{head}\n\n[... {length - max_chars} more characters truncated]"


def _format_tool_arguments(arguments: Any) -> str:
    if not isinstance(arguments, Mapping):
        return "" if arguments is None else js_json_stringify(arguments)
    return ", ".join(f"{key}={js_json_stringify(value)}" for key, value in arguments.items())


def serialize_conversation(
    messages: Iterable[Mapping[str, Any]], *, tool_result_max_chars: int = TOOL_RESULT_MAX_CHARS
) -> str:
    """The conversation as labelled plain text, so a summarizing model reads it
    as a document instead of continuing it (Pi's ``serializeConversation``
    after ``convertToLlm``).

    Custom messages, bash executions and earlier summaries appear as the user
    turns they are in the LLM context; bash executions flagged
    ``excludeFromContext`` are left out, as the model never saw them; system
    messages are prompt state, not conversation. Thinking is left out (Pi
    1.2): replayed reasoning is often not in the live context and can make
    the request larger than the context it summarizes. Long tool results are
    cut to their beginning.
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
            parts.append(f"[User]: {BRANCH_SUMMARY_INTRO}\n\n<summary>\n{message.get('summary') or ''}</summary>")
        elif role == "assistant":
            calls: list[str] = []
            content = message.get("content")
            blocks = [block for block in content if isinstance(block, Mapping)] if isinstance(content, list) else []
            for block in blocks:
                if block.get("type") == "toolCall":
                    calls.append(f"{block.get('name')}({_format_tool_arguments(block.get('arguments'))})")
            if isinstance(content, str) and content:
                parts.append(f"[Assistant]: {content}")
            elif any(block.get("type") == "text" for block in blocks):
                parts.append("[Assistant]: " + content_text(blocks))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = message_text(message)
            if text:
                parts.append(f"[Tool result]: {_truncate(text, tool_result_max_chars)}")
    return "\n\n".join(parts)
