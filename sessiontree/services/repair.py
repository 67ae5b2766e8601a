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

from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.verify import LEAF_MISSING, META_MISMATCH, REPAIRABLE, TORN_LAST_LINE, Problem
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.providers.port import TornTailCut
from sessiontree.selectors.verify import SessionReport, verify_session

from . import sessions
from .audit import Actor, record, who
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
            plan.backup = _cut_torn_tail(session_id, acting, channel)
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


def _cut_torn_tail(session_id: str, actor: Actor, channel: str) -> str | None:
    """The storage cuts (backup first, cached parses dropped); the audit
    record is written in the same unit, so it exists only if the cut happened."""

    def audit(cut: TornTailCut) -> None:
        record(
            actor=actor,
            channel=channel,
            operation=OPERATION,
            session_id=session_id,
            detail={"cut_torn_tail_bytes": cut.cut_bytes, "backup": cut.backup_name},
        )

    cut = get_provider_for_session(session_id).cut_torn_tail(session_id, before_commit=audit)
    return cut.backup if cut is not None else None
