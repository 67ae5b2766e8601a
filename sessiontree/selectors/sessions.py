"""One session's meta as the API's detail shows it."""

from __future__ import annotations

from typing import Any

from sessiontree.providers.base import SessionTreeProvider


def session_detail(provider: SessionTreeProvider, session_id: str) -> dict[str, Any]:
    """The session's meta with its tree counts as its storage says now, and
    ``in_flight_entry_id`` (the entry being streamed, if any)."""
    with provider.read(session_id) as view:
        session: dict[str, Any] = dict(view.session())
        session["in_flight_entry_id"] = view.state.in_flight_entry_id
    return session
