"""What every operation does the same way: resolve the provider, and write
the audit record inside the change's own transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sessiontree.models import AgentSession
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.providers.template import SessionWriter

from .audit import Actor, check_channel, entry_ids, record


def provider_for(provider: SessionTreeProvider | None, session_id: str) -> SessionTreeProvider:
    """``provider``, or the one that stores ``session_id`` (``SessionNotFound`` if none)."""
    return provider if provider is not None else get_provider_for_session(session_id)


def who(actor: Any, channel: Any) -> tuple[Actor, str]:
    """The ``Actor`` and checked channel of an operation, before anything is read or written."""
    return Actor.of(actor), check_channel(channel)


def audit_writer(
    actor: Actor,
    channel: str,
    operation: str,
    *,
    detail: Mapping[str, Any] | Callable[[SessionWriter], Mapping[str, Any]] | None = None,
) -> Callable[[SessionWriter], None]:
    """A ``before_commit`` for ``provider.transact``: one audit record with the
    entries the operation wrote and the leaf before and after it."""

    def before_commit(writer: SessionWriter) -> None:
        record(
            actor=actor,
            channel=channel,
            operation=operation,
            session_id=writer.session_id,
            entry_ids=entry_ids(writer.written),
            leaf_before=writer.leaf_before,
            leaf_after=writer.leaf_entry_id,
            detail=detail(writer) if callable(detail) else detail,
        )

    return before_commit


def set_times(session_id: str, *, created_at: datetime | None = None, activity_at: datetime | None = None) -> None:
    """Set a session's creation time and last activity (``updated_at``) from
    its source (a Pi file's header and last entry), inside the caller's
    transaction. ``None`` leaves a time as it is."""
    times = {
        name: value for name, value in (("created_at", created_at), ("updated_at", activity_at)) if value is not None
    }
    if times:
        AgentSession.objects.filter(session_id=session_id).update(**times)
