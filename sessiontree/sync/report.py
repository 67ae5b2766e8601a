"""What ``sync_sessions`` did, file by file (``FileResult``), and in sum
(``SyncReport``); ``guarded`` turns a file's failure into its result."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import DatabaseError, InterfaceError, reset_queries

from sessiontree.core.errors import CATEGORIES, EXIT_UNEXPECTED, UNAVAILABLE, SessionTreeError

logger = logging.getLogger(__name__)

CREATED, UPDATED, UNCHANGED, SKIPPED, FAILED = "created", "updated", "unchanged", "skipped", "failed"
ACTIONS: tuple[str, ...] = (CREATED, UPDATED, UNCHANGED, SKIPPED, FAILED)


@dataclass
class FileResult:
    path: str
    action: str
    session_id: str | None = None
    reason: str | None = None
    code: str | None = None  # a failure's error code
    exit_code: int | None = None  # a failure's exit code
    entries: int = 0  # entries written (or that would be, in a dry run)
    malformed_lines: int = 0
    torn_bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value not in (None, 0) or key == "action"}


@dataclass
class SyncReport:
    folder: Path
    mode: str
    dry_run: bool
    results: list[FileResult] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for result in self.results if result.action == action)

    @property
    def failed(self) -> list[FileResult]:
        return [result for result in self.results if result.action == FAILED]

    @property
    def entries(self) -> int:
        return sum(result.entries for result in self.results)

    @property
    def malformed_lines(self) -> int:
        return sum(result.malformed_lines for result in self.results)

    def skipped_reasons(self) -> dict[str, int]:
        return dict(Counter(_reason_kind(r.reason) for r in self.results if r.action == SKIPPED).most_common())

    def summary_line(self) -> str:
        would = "would be " if self.dry_run else ""
        parts = [
            f"{self.count(CREATED)} {would}created",
            f"{self.count(UPDATED)} {would}updated",
            f"{self.count(UNCHANGED)} unchanged",
        ]
        reasons = self.skipped_reasons()
        skipped = f"{self.count(SKIPPED)} skipped"
        if reasons:
            skipped += " (" + "; ".join(f"{count} {reason}" for reason, count in reasons.items()) + ")"
        parts.append(skipped)
        parts.append(f"{len(self.failed)} failed")
        noun = "session" if self.mode == "export" else "file"
        total = len(self.results)
        line = f"{self.mode}{' (dry run)' if self.dry_run else ''}: {total} {noun}{'' if total == 1 else 's'}: "
        line += ", ".join(parts)
        line += f"; {self.entries} entries {'would be ' if self.dry_run else ''}{_verb(self.mode)}"
        if self.malformed_lines:
            files = sum(1 for r in self.results if r.malformed_lines)
            line += f"; {self.malformed_lines} malformed line(s) skipped in {files} file(s)"
        torn = sum(1 for r in self.results if r.torn_bytes)
        if torn:
            line += f"; {torn} file(s) end in a torn line, left for the next run"
        return line

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "mode": self.mode,
            "dry_run": self.dry_run,
            "summary": {
                **{action: self.count(action) for action in ACTIONS},
                "entries": self.entries,
                "malformed_lines": self.malformed_lines,
                "skipped_reasons": self.skipped_reasons(),
            },
            "files": [result.as_dict() for result in self.results],
        }


def _verb(mode: str) -> str:
    return {"index": "indexed", "import": "imported", "export": "exported"}[mode]


def _reason_kind(reason: str | None) -> str:
    """A skip reason without the details that differ per file (for the summary)."""
    if not reason:
        return "no reason"
    return reason.split(":", 1)[0].split(" (", 1)[0]


class Skip(Exception):
    """This file is deliberately left alone; the message says why."""


Task = Callable[[], FileResult]


def guarded(path: Path, folder: Path, work: Callable[[FileResult], FileResult]) -> Task:
    """A task whose known failures become a failed result with a one-line reason."""

    def task() -> FileResult:
        result = FileResult(path=shown(path, folder), action=FAILED)
        reset_queries()  # with DEBUG on, Django would keep every statement of the run
        try:
            return work(result)
        except Skip as skip:
            result.action, result.reason = SKIPPED, str(skip)
        except SessionTreeError as exc:
            result.action, result.reason, result.code, result.exit_code = FAILED, one_line(exc), exc.code, exc.exit_code
        except (DatabaseError, InterfaceError, OSError) as exc:
            result.action, result.reason = FAILED, one_line(exc)
            result.code, result.exit_code = "storage_unavailable", CATEGORIES[UNAVAILABLE].exit_code
        except Exception as exc:
            logger.exception("sync_sessions: unexpected failure on %s", path)
            result.action, result.reason = FAILED, f"unexpected {type(exc).__name__}: {one_line(exc)}"
            result.code, result.exit_code = "unexpected_error", EXIT_UNEXPECTED
        return result

    return task


def one_line(value: Any) -> str:
    return " ".join(str(value).split())


def shown(path: Path, folder: Path) -> str:
    """How a file is named in the report: relative to the synced folder."""
    try:
        return str(path.relative_to(folder)) if path != folder else path.name
    except ValueError:
        return str(path)
