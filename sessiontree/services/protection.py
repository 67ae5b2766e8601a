"""Data protection: legal holds, retention by policy, and (with the erase of
``moderation``) a person's data erased.

- **Legal hold** (``place_hold``/``release_hold``): while a session is held,
  nothing deletes or erases it: a hard delete, an erase, a user erasure and
  retention each refuse with ``SessionOnHold`` (409, exit 4) naming the hold.
  Appends, moves and reads go on.
- **Retention** (``apply_retention``): sessions idle longer than their
  period are hard-deleted, one whole session at a time, in batches. The
  period is the session's agent's ``retention_days``, else
  ``SESSIONTREE_RETENTION_DAYS``, else none (kept). Idle means the session's
  ``updated_at`` (every write moves it) is older than the period. Skipped,
  with the reason counted: held sessions, sessions with open moderation
  flags, and sessions with a fork (a lineage child) still inside its own
  period. A run is idempotent, and a crash leaves every session whole or gone.

Every function is keyword-only and needs an ``actor`` and a ``channel``;
docs/data-protection.md says what each deletes and keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from sessiontree.core.errors import CONFLICT, BadInput, SessionNotFound, SessionOnHold, SessionTreeError
from sessiontree.models import Agent, AgentSession, LegalHold, ModerationFlag
from sessiontree.providers import db_errors, meta

from . import idempotency, sessions
from .audit import Actor, check_channel, record
from .holds import _iso, held_session_ids, hold_of
from .idempotency import idempotent
from .operations import Operation
from .user_erasure import UserNotFound, erase_user_data

MAX_REASON = 2000
RETENTION_BATCH = 200

SKIP_HOLD = "legal_hold"
SKIP_OPEN_FLAGS = "open_flags"
SKIP_YOUNG_FORK = "fork_inside_its_period"
SKIP_REASONS = (SKIP_HOLD, SKIP_OPEN_FLAGS, SKIP_YOUNG_FORK)

__all__ = [
    "HoldExists",
    "NotOnHold",
    "UserNotFound",
    "apply_retention",
    "erase_user_data",
    "place_hold",
    "release_hold",
]


class HoldExists(SessionTreeError):
    code = "hold_exists"
    category = CONFLICT


class NotOnHold(SessionTreeError):
    code = "not_on_hold"
    category = CONFLICT


def _who(actor: Any, channel: Any) -> tuple[Actor, str]:
    return Actor.of(actor), check_channel(channel)


def _session_with_hold(session_id: str) -> dict[str, Any]:
    from sessiontree.providers.factory import get_provider_for_session

    session = get_provider_for_session(session_id).get_session(session_id)
    if session is None:
        raise SessionNotFound(f"Session {session_id} not found")
    return {**session, "legal_hold": hold_of(session_id)}


@idempotent(Operation.PLACE_HOLD)
def place_hold(*, session_id: str, reason: str, actor: Any, channel: str) -> dict[str, Any]:
    """Hold ``session_id`` for ``reason``; returns the session with ``legal_hold``."""
    acting, channel = _who(actor, channel)
    if not isinstance(reason, str) or not reason.strip():
        raise BadInput("A legal hold needs a reason")
    if len(reason) > MAX_REASON:
        raise BadInput(f"A hold's reason is at most {MAX_REASON} characters")

    def write() -> None:
        # The session row, locked: a hard delete running now finishes first (then: not found).
        meta.get_row(session_id, for_update=True)
        existing = LegalHold.objects.select_for_update().filter(session_id=session_id).first()
        if existing is not None:
            raise HoldExists(f"Session {session_id} is already on hold (placed by {existing.placed_by})")
        LegalHold.objects.create(
            session_id=session_id,
            reason=reason.strip(),
            placed_by=acting.name,
            placed_by_user_id=acting.user_id,
            placed_at=timezone.now(),
        )
        record(
            actor=acting,
            channel=channel,
            operation=Operation.PLACE_HOLD,
            session_id=session_id,
            detail={"reason": reason.strip()},
        )

    db_errors.run_in_transaction(write)
    return _session_with_hold(session_id)


@idempotent(Operation.RELEASE_HOLD)
def release_hold(*, session_id: str, actor: Any, channel: str) -> dict[str, Any]:
    """Release the hold on ``session_id``; ``NotOnHold`` when there is none."""
    acting, channel = _who(actor, channel)

    def write() -> None:
        meta.get_row(session_id, for_update=True)
        hold = LegalHold.objects.select_for_update().filter(session_id=session_id).first()
        if hold is None:
            raise NotOnHold(f"Session {session_id} is not on hold")
        detail = {"placed_by": hold.placed_by, "placed_at": _iso(hold.placed_at)}
        hold.delete()
        record(actor=acting, channel=channel, operation=Operation.RELEASE_HOLD, session_id=session_id, detail=detail)

    db_errors.run_in_transaction(write)
    return _session_with_hold(session_id)


# --- retention -----------------------------------------------------------------------------------


def default_retention_days() -> int | None:
    value = getattr(settings, "SESSIONTREE_RETENTION_DAYS", None)
    return int(value) if value is not None else None


@dataclass
class RetentionReport:
    now: str
    dry_run: bool
    deleted: list[str] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=lambda: {reason: [] for reason in SKIP_REASONS})
    failed: list[dict[str, Any]] = field(default_factory=list)
    considered: int = 0
    idempotency_keys_purged: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "now": self.now,
            "dry_run": self.dry_run,
            "considered": self.considered,
            "deleted": list(self.deleted),
            "skipped": {reason: list(ids) for reason, ids in self.skipped.items()},
            "failed": list(self.failed),
            "idempotency_keys_purged": self.idempotency_keys_purged,
            "counts": {
                "deleted": len(self.deleted),
                **{f"skipped_{reason}": len(ids) for reason, ids in self.skipped.items()},
                "failed": len(self.failed),
            },
        }


def summary_line(report: dict[str, Any]) -> str:
    """One line of a retention report, for the command and cron's mail."""
    verb = "would delete" if report["dry_run"] else "deleted"
    skipped = ", ".join(f"{len(ids)} {reason.replace('_', ' ')}" for reason, ids in report["skipped"].items())
    tail = f", {len(report['failed'])} failed" if report["failed"] else ""
    if report.get("idempotency_keys_purged"):
        tail += f"; {report['idempotency_keys_purged']} expired idempotency key(s) purged"
    return f"retention: {verb} {len(report['deleted'])} of {report['considered']} expired session(s); skipped: {skipped}{tail}"


def _periods() -> tuple[dict[int, int], int | None]:
    """(agent pk → its own retention days, the default days)."""
    agents = {
        pk: int(days)
        for pk, days in Agent.objects.filter(retention_days__isnull=False).values_list("pk", "retention_days")
        if days is not None
    }
    return agents, default_retention_days()


def expired_sessions(now: datetime) -> list[tuple[int, str, int | None]]:
    """(pk, session id, agent id) of every session idle longer than its period, oldest first."""
    agents, default = _periods()
    found: list[tuple[int, str, int | None, datetime]] = []
    for agent_id, days in agents.items():
        rows = AgentSession.objects.filter(agent_id=agent_id, updated_at__lt=now - timedelta(days=days))
        found += list(rows.values_list("pk", "session_id", "agent_id", "updated_at"))
    if default is not None:
        rows = AgentSession.objects.filter(updated_at__lt=now - timedelta(days=default)).exclude(
            agent_id__in=list(agents)
        )
        found += list(rows.values_list("pk", "session_id", "agent_id", "updated_at"))
    found.sort(key=lambda row: (row[3], row[0]))
    return [(pk, session_id, agent_id) for pk, session_id, agent_id, _ in found]


@idempotent()
def apply_retention(
    *,
    actor: Any,
    channel: str,
    now: datetime | None = None,
    dry_run: bool = False,
    batch_size: int = RETENTION_BATCH,
    progress: Callable[[int], Callable[[int], object] | None] | None = None,
) -> dict[str, Any]:
    """Hard-delete every session idle longer than its period (see the module
    docstring); returns the report (``dry_run``: the same report, nothing deleted).
    ``progress(total)`` may return a function told how many sessions each batch handled."""
    acting, channel = _who(actor, channel)
    if batch_size < 1:
        raise BadInput("The retention batch size must be at least 1")
    moment = now if now is not None else timezone.now()
    if timezone.is_naive(moment):
        raise BadInput("Retention's 'now' must be an aware datetime")
    # A keyed run (the REST API's Idempotency-Key) is taken once it is done: each
    # deletion is its own unit, and a retry after a crash finishes the run.
    with idempotency.claimed_when_done():
        return _apply_retention(acting, channel, moment, dry_run, batch_size, progress)


def _apply_retention(
    acting: Actor,
    channel: str,
    moment: datetime,
    dry_run: bool,
    batch_size: int,
    progress: Callable[[int], Callable[[int], object] | None] | None,
) -> dict[str, Any]:
    expired = expired_sessions(moment)
    expired_pks = {pk for pk, _, _ in expired}
    report = RetentionReport(now=_iso(moment), dry_run=dry_run, considered=len(expired))
    advance = progress(len(expired)) if progress is not None else None
    for start in range(0, len(expired), batch_size):
        batch = expired[start : start + batch_size]
        ids = [session_id for _, session_id, _ in batch]
        held = held_session_ids(ids)
        flagged = set(
            ModerationFlag.objects.filter(session_id__in=ids, status=ModerationFlag.Status.OPEN).values_list(
                "session_id", flat=True
            )
        )
        young_parents = _parents_of_young_forks([pk for pk, _, _ in batch], expired_pks)
        for pk, session_id, _agent_id in batch:
            if session_id in held:
                report.skipped[SKIP_HOLD].append(session_id)
            elif session_id in flagged:
                report.skipped[SKIP_OPEN_FLAGS].append(session_id)
            elif pk in young_parents:
                report.skipped[SKIP_YOUNG_FORK].append(session_id)
            elif dry_run:
                report.deleted.append(session_id)
            else:
                try:
                    sessions.delete_session(
                        session_id=session_id, hard=True, actor=acting, channel=channel, reason="retention"
                    )
                except SessionNotFound:
                    continue  # gone meanwhile: what retention wanted
                except SessionOnHold:
                    report.skipped[SKIP_HOLD].append(session_id)  # held meanwhile
                    continue
                except SessionTreeError as exc:
                    report.failed.append(
                        {"session_id": session_id, "code": exc.code, "message": str(exc), "exit_code": exc.exit_code}
                    )
                    continue
                report.deleted.append(session_id)
        if advance is not None:
            advance(len(batch))
    if not dry_run:
        # Expired idempotency keys go too (a retry a day later is a new request).
        while purged := idempotency.purge_expired(batch=batch_size):
            report.idempotency_keys_purged += purged
    return report.as_dict()


def _parents_of_young_forks(pks: Sequence[int], expired_pks: set[int]) -> set[int]:
    """Of ``pks``, those with a fork that is not itself expired (its own period
    has not run out, or it has none)."""
    young: set[int] = set()
    for parent_pk, child_pk in AgentSession.objects.filter(parent_id__in=list(pks)).values_list("parent_id", "pk"):
        if child_pk not in expired_pks:
            young.add(parent_pk)
    return young
