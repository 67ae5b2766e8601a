"""Repairing a damaged session: only what is safe, planned first.

Safe: a torn last line of a ``file`` session is cut off (after the whole
file is copied to a backup beside it), and the meta row's counts, root and
leaf are recomputed from the entries. Everything else the checks find
(orphans whose parent is missing, duplicate ids, cycles, …) is reported and
left as it is: re-attaching an entry somewhere would invent history.

Each change writes an audit record ``repair_session`` in the same
transaction.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import transaction

from sessiontree.core.pi_session_file import whole_lines_end
from sessiontree.core.verify import LEAF_MISSING, META_MISMATCH, REPAIRABLE, TORN_LAST_LINE, Problem
from sessiontree.providers.file_provider import clear_index_cache
from sessiontree.selectors.verify import SessionReport, verify_session

from . import sessions
from ._common import who
from .audit import record
from .operations import Operation

OPERATION = Operation.REPAIR_SESSION


@dataclass
class RepairStep:
    action: str  # "cut_torn_tail" | "recompute_meta"
    description: str
    done: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "description": self.description, "done": self.done}


@dataclass
class RepairPlan:
    session_id: str
    steps: list[RepairStep] = field(default_factory=list)
    unrepaired: list[Problem] = field(default_factory=list)  # reported, left for an operator
    applied: bool = False
    backup: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "applied": self.applied,
            "steps": [step.as_dict() for step in self.steps],
            "unrepaired": [problem.as_dict() for problem in self.unrepaired],
            **({"backup": self.backup} if self.backup else {}),
        }


def plan_repair(session_id: str) -> RepairPlan:
    """What ``repair_session`` would do, from the session's current problems."""
    return _plan(verify_session(session_id))


def _plan(report: SessionReport) -> RepairPlan:
    plan = RepairPlan(session_id=report.session_id)
    codes = {problem.code for problem in report.problems}
    if TORN_LAST_LINE in codes and report.scanned is not None:
        plan.steps.append(
            RepairStep(
                "cut_torn_tail",
                f"cut the torn last line ({report.scanned.torn_bytes} byte(s)) of {report.path} "
                "after copying the file to a backup beside it",
            )
        )
    if codes & {META_MISMATCH, LEAF_MISSING}:
        plan.steps.append(
            RepairStep("recompute_meta", "recompute the meta row's counts, root and leaf from the entries")
        )
    plan.unrepaired = [problem for problem in report.problems if problem.code not in REPAIRABLE]
    return plan


def repair_session(*, session_id: str, actor: Any, channel: str, apply: bool) -> RepairPlan:
    """Plan the safe repairs of a session and, with ``apply``, make them."""
    acting, channel = who(actor, channel)
    report = verify_session(session_id)
    plan = _plan(report)
    if not apply:
        return plan
    for step in plan.steps:
        if step.action == "cut_torn_tail":
            assert report.path is not None
            plan.backup = _cut_torn_tail(Path(report.path), session_id, acting, channel)
            step.done = True
        elif step.action == "recompute_meta":
            changes = sessions.refresh_session(
                session_id=session_id, actor=acting, channel=channel, operation=OPERATION
            )
            step.done = True
            if changes:
                step.description += ": " + ", ".join(f"{k} {a!r} → {b!r}" for k, (a, b) in changes.items())
    plan.applied = True
    return plan


def _cut_torn_tail(path: Path, session_id: str, actor: Any, channel: str) -> str | None:
    """Cut the bytes after the last newline, under the file's exclusive lock
    (writers wait), once the whole file is safe in a backup."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        complete = whole_lines_end(data)
        if not data[complete:].strip():
            return None  # finished meanwhile by its writer: nothing torn any more
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        backup = path.with_name(f"{path.name}.torn-{stamp}.bak")
        backup_fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(backup_fd, view) :]
            os.fsync(backup_fd)
        finally:
            os.close(backup_fd)
        with transaction.atomic():
            record(
                actor=actor,
                channel=channel,
                operation=OPERATION,
                session_id=session_id,
                detail={"cut_torn_tail_bytes": len(data) - complete, "backup": backup.name},
            )
            os.ftruncate(fd, complete)  # last: a failure here rolls the record back
            os.fsync(fd)
    finally:
        os.close(fd)
    clear_index_cache()  # this process's parsed copy of the file is stale now
    return str(backup)
