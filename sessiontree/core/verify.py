"""Checks of a stored session tree: what ``verify_sessions`` reports and
``repair_session`` plans from. Pure: entries (append order) and bytes in,
problems out.

Every problem names what is wrong and where, one per finding, so an operator
can act on each line. Nothing here repairs anything; which problems are safe
to fix is the repair command's decision (``REPAIRABLE``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import CorruptSessionTree
from .path import TreeStats, find_cycles, tree_stats, walk_path
from .session_reader import read_session_bytes
from .types import Entry

# Problem codes, in the order a report lists them.
NOT_A_SESSION = "not_a_session"
TORN_LAST_LINE = "torn_last_line"
MALFORMED_LINE = "malformed_line"
MISSING_ID = "missing_id"
DUPLICATE_ID = "duplicate_id"
DANGLING_PARENT = "dangling_parent"
CYCLE = "cycle"
FIRST_KEPT_NOT_ON_PATH = "first_kept_not_on_path"
LABEL_TARGET_MISSING = "label_target_missing"
ORPHAN_TOOL_RESULT = "orphan_tool_result"
LEAF_MISSING = "leaf_missing"
META_MISMATCH = "meta_mismatch"

# What repair_session fixes: a torn tail is cut (after a backup), a meta row
# is recomputed from the entries. Everything else needs an operator.
REPAIRABLE = frozenset({TORN_LAST_LINE, LEAF_MISSING, META_MISMATCH})


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    entry_id: str | None = None
    line: int | None = None  # 1-based line of the file, when the problem is a line

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass
class ScannedFile:
    """A session file's bytes, read as Pi reads them, with what was skipped."""

    header: dict[str, Any] | None
    entries: list[Entry] = field(default_factory=list)
    malformed_lines: list[int] = field(default_factory=list)  # 1-based line numbers
    torn_bytes: int = 0  # bytes after the last newline (a torn last line)
    complete_bytes: int = 0  # bytes up to and including the last newline

    @property
    def is_session(self) -> bool:
        return self.header is not None


def scan_session_bytes(data: bytes) -> ScannedFile:
    """Read a whole file's bytes as Pi's loader does (``session_reader``:
    lines before the header that do not parse are skipped, the first that
    does must be the header, else ``header`` is ``None`` and nothing else
    is read), and say what was skipped."""
    read = read_session_bytes(data)
    return ScannedFile(
        header=read.header,
        entries=read.entries,
        malformed_lines=read.malformed_lines,
        torn_bytes=read.torn_bytes,
        complete_bytes=read.end,
    )


def file_problems(scanned: ScannedFile) -> list[Problem]:
    """What the bytes of a file say is wrong (before any tree check)."""
    if scanned.header is None:
        return [Problem(NOT_A_SESSION, "the first line is not a Pi session header")]
    problems = [
        Problem(MALFORMED_LINE, f"line {number} is not a JSON object (skipped on load)", line=number)
        for number in scanned.malformed_lines
    ]
    if scanned.torn_bytes:
        problems.append(
            Problem(TORN_LAST_LINE, f"the last line is torn: {scanned.torn_bytes} byte(s) after the last newline")
        )
    return problems


def tree_problems(entries: Sequence[Entry], *, leaf_entry_id: str | None = None) -> list[Problem]:
    """Every structural problem of ``entries`` (append order): missing and
    duplicate ids, parents that name no entry, cycles, compactions whose
    ``firstKeptEntryId`` is not on their path, labels of missing entries,
    tool results without their tool call, and a ``leaf_entry_id`` that is
    not in the session."""
    problems: list[Problem] = []
    by_id: dict[str, Entry] = {}
    for entry in entries:
        entry_id = entry.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            problems.append(Problem(MISSING_ID, f"a {entry.get('type')!r} entry has no string id"))
        elif entry_id in by_id:
            problems.append(Problem(DUPLICATE_ID, f"entry id {entry_id} is used more than once", entry_id=entry_id))
        else:
            by_id[entry_id] = entry
    parent_of: dict[str, Any] = {entry_id: entry.get("parentId") for entry_id, entry in by_id.items()}

    for entry_id, parent_id in parent_of.items():
        if parent_id is not None and parent_id not in parent_of:
            problems.append(
                Problem(
                    DANGLING_PARENT,
                    f"entry {entry_id} names parent {parent_id}, which is not in the session (read as a root)",
                    entry_id=entry_id,
                )
            )
    in_cycle = _cycles(parent_of, problems)

    for entry_id, entry in by_id.items():
        kind = entry.get("type")
        if kind == "compaction":
            _check_first_kept(entry_id, entry, parent_of, in_cycle, problems)
        elif kind == "label":
            target = entry.get("targetId")
            if not isinstance(target, str) or target not in by_id:
                problems.append(
                    Problem(
                        LABEL_TARGET_MISSING,
                        f"label {entry_id} targets {target!r}, which is not in the session",
                        entry_id=entry_id,
                    )
                )
        elif kind == "message" and entry_id not in in_cycle:
            _check_tool_result(entry_id, entry, by_id, problems)

    if leaf_entry_id is not None and leaf_entry_id not in by_id:
        problems.append(
            Problem(LEAF_MISSING, f"the leaf {leaf_entry_id} is not in the session", entry_id=leaf_entry_id)
        )
    return problems


def _cycles(parent_of: Mapping[str, Any], problems: list[Problem]) -> set[str]:
    """Report each cycle of parents once; return the ids on any cycle."""
    in_cycle: set[str] = set()
    for cycle in find_cycles(parent_of):
        in_cycle.update(cycle)
        problems.append(
            Problem(
                CYCLE,
                f"entries {' -> '.join(cycle)} form a cycle of parents (no path reaches a root)",
                entry_id=min(cycle),
            )
        )
    return in_cycle


def _check_first_kept(
    entry_id: str, entry: Entry, parent_of: Mapping[str, Any], in_cycle: set[str], problems: list[Problem]
) -> None:
    first_kept = entry.get("firstKeptEntryId")
    if entry_id in in_cycle:
        return
    try:
        path = walk_path(entry_id, parent_of)
    except CorruptSessionTree:  # its ancestors loop: reported as a cycle
        return
    if first_kept not in path[:-1]:
        where = "not in the session" if first_kept not in parent_of else "not on its path"
        problems.append(
            Problem(
                FIRST_KEPT_NOT_ON_PATH,
                f"compaction {entry_id} keeps from {first_kept!r}, which is {where}",
                entry_id=entry_id,
            )
        )


def _tool_call_ids(message: Mapping[str, Any]) -> set[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return set()
    return {
        block["id"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("id"), str)
    }


def _check_tool_result(entry_id: str, entry: Entry, by_id: Mapping[str, Entry], problems: list[Problem]) -> None:
    """A tool result answers a tool call of the assistant message before it on
    its path (other tool results and non-message entries may sit between)."""
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("role") != "toolResult":
        return
    call_id = message.get("toolCallId")
    parent: Any = entry.get("parentId")
    steps = 0
    while isinstance(parent, str) and parent in by_id and steps <= len(by_id):
        steps += 1
        ancestor = by_id[parent]
        ancestor_message = ancestor.get("message") if ancestor.get("type") == "message" else None
        role = ancestor_message.get("role") if isinstance(ancestor_message, dict) else None
        if role == "assistant":
            assert isinstance(ancestor_message, dict)
            if call_id in _tool_call_ids(ancestor_message):
                return
            break
        if role not in (None, "toolResult"):
            break  # a user (or other) message: the call is not in this turn
        parent = ancestor.get("parentId")
    problems.append(
        Problem(
            ORPHAN_TOOL_RESULT,
            f"tool result {entry_id} answers tool call {call_id!r}, which no assistant message before it made",
            entry_id=entry_id,
        )
    )


@dataclass(frozen=True)
class MetaCounts:
    """What a session's meta row says about its tree."""

    entry_count: int
    branch_count: int
    compaction_count: int
    leaf_entry_id: str | None
    root_entry_id: str | None = None


def meta_problems(row: MetaCounts, entries: Sequence[Entry], *, stats: TreeStats | None = None) -> list[Problem]:
    """Where the meta row disagrees with the entries: counts, and a leaf that
    is not an entry (an in-flight leaf is the caller's to leave out)."""
    stats = stats if stats is not None else tree_stats(entries)
    problems: list[Problem] = []
    differing = [
        f"{name} {stored} (entries say {actual})"
        for name, stored, actual in (
            ("entry_count", row.entry_count, stats.entry_count),
            ("branch_count", row.branch_count, stats.branch_count),
            ("compaction_count", row.compaction_count, stats.compaction_count),
        )
        if stored != actual
    ]
    if differing:
        problems.append(Problem(META_MISMATCH, "the meta row says " + ", ".join(differing)))
    ids = {entry.get("id") for entry in entries}
    if row.leaf_entry_id is not None and row.leaf_entry_id not in ids:
        problems.append(
            Problem(
                LEAF_MISSING,
                f"the meta row's leaf {row.leaf_entry_id} is not in the session",
                entry_id=row.leaf_entry_id,
            )
        )
    return problems


def sorted_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Problems in report order: by code (the order above), then line, then entry."""
    order = {
        code: index
        for index, code in enumerate(
            (
                NOT_A_SESSION,
                TORN_LAST_LINE,
                MALFORMED_LINE,
                MISSING_ID,
                DUPLICATE_ID,
                DANGLING_PARENT,
                CYCLE,
                FIRST_KEPT_NOT_ON_PATH,
                LABEL_TARGET_MISSING,
                ORPHAN_TOOL_RESULT,
                LEAF_MISSING,
                META_MISMATCH,
            )
        )
    }
    return sorted(problems, key=lambda p: (order.get(p.code, len(order)), p.line or 0, p.entry_id or ""))
