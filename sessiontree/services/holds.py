"""Legal holds as the other operations see them: is a session held, and a
refusal that names the hold (``SessionOnHold``). Placing and releasing a
hold are ``protection.place_hold``/``release_hold``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TypedDict

from sessiontree.core.errors import SessionOnHold
from sessiontree.models import LegalHold


class HoldDict(TypedDict):
    reason: str
    placed_by: str
    placed_at: str


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def hold_dict(hold: LegalHold) -> HoldDict:
    return {"reason": hold.reason, "placed_by": hold.placed_by, "placed_at": _iso(hold.placed_at)}


def hold_of(session_id: str) -> HoldDict | None:
    """The legal hold on ``session_id``, if there is one."""
    hold = LegalHold.objects.filter(session_id=session_id).first()
    return hold_dict(hold) if hold is not None else None


def held_session_ids(session_ids: Iterable[str]) -> set[str]:
    return set(LegalHold.objects.filter(session_id__in=list(session_ids)).values_list("session_id", flat=True))


def check_not_held(session_ids: Iterable[str], *, what: str) -> None:
    """``SessionOnHold`` naming the hold when any of ``session_ids`` is held
    (call it inside the transaction of the change it guards)."""
    hold = LegalHold.objects.filter(session_id__in=list(session_ids)).order_by("session_id").first()
    if hold is not None:
        raise SessionOnHold(
            f"Session {hold.session_id} is under a legal hold placed by {hold.placed_by} on "
            f"{_iso(hold.placed_at)} ({hold.reason}); {what} is refused until the hold is released"
        )


def list_holds() -> list[dict[str, str]]:
    """Every hold in force, oldest first: ``{"session_id", "reason", "placed_by", "placed_at"}``."""
    return [
        {
            "session_id": hold.session_id,
            "reason": hold.reason,
            "placed_by": hold.placed_by,
            "placed_at": _iso(hold.placed_at),
        }
        for hold in LegalHold.objects.order_by("placed_at", "session_id")
    ]
