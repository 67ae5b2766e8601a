"""Session lifecycle: create, update title/metadata, archive, restore, delete.

Status moves: ``active`` → ``archived`` (read-only, restorable), ``active`` or
``archived`` → ``deleted`` (soft: readable, closed to writes, restorable),
``archived``/``deleted`` → ``active`` (restore). Asking for the status a
session already has changes nothing and writes no audit record.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessiontree.core.context_builder import UNSET
from sessiontree.core.errors import InvalidEntry, SessionClosed
from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.models import Agent
from sessiontree.providers import meta
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider, resolve_session_provider_kind

from ._common import provider_for, who
from .audit import record

EDITABLE_FIELDS = ("title", "metadata", "user_id", "agent_id", "cwd")


def _agent_id(agent: Any) -> int | None:
    if agent is None:
        return None
    if isinstance(agent, Agent):
        return agent.pk
    if isinstance(agent, int) and not isinstance(agent, bool):
        return agent
    raise InvalidEntry(f"agent must be an Agent or its id, not {type(agent).__name__}")


def create_session(
    *,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    kind: str | None = None,
    agent: Any = None,
    session_id: str | None = None,
    cwd: str | None = None,
    user_id: str | None = None,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    parent_session_id: str | None = None,
    entries: list[Entry] | None = None,
    header_extra: dict[str, Any] | None = None,
) -> SessionTreeSession:
    """Create a session (empty, or holding already-built ``entries``: an import).

    The provider is ``provider`` if given, else resolved as everywhere:
    ``kind`` (an explicit choice), else the agent's ``session_provider``, else
    ``SESSIONTREE_DEFAULT_PROVIDER``, else ``file``.
    """
    acting, channel = who(actor, channel)
    agent_row = Agent.objects.filter(pk=agent).first() if isinstance(agent, int) else agent
    if provider is None:
        provider = get_provider(resolve_session_provider_kind(agent_row, explicit=kind))

    def audit(session: SessionTreeSession) -> None:
        record(
            actor=acting,
            channel=channel,
            operation="create_session",
            session_id=session["session_id"],
            entry_ids=[e["id"] for e in entries or []][:50],
            leaf_after=session["leaf_entry_id"],
            detail={"provider": provider.kind, "entries": len(entries or []), "title": title},
        )

    return provider.create_session(
        session_id=session_id,
        cwd=cwd,
        agent_id=_agent_id(agent),
        user_id=user_id,
        title=title,
        parent_session_id=parent_session_id,
        metadata=metadata,
        entries=entries,
        header_extra=header_extra,
        before_commit=audit,
    )


def update_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    **fields: Any,
) -> SessionTreeSession:
    """Change ``title``, ``metadata``, ``user_id``, ``agent_id`` or ``cwd``
    (fields given as ``UNSET`` are left alone). The tree is never touched."""
    acting, channel = who(actor, channel)
    fields = {name: value for name, value in fields.items() if value is not UNSET}
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidEntry(f"Cannot update session field(s): {', '.join(sorted(unknown))}")
    provider = provider_for(provider, session_id)
    current = provider.get_session(session_id)
    if current is None:
        provider.update_session(session_id)  # raises SessionNotFound, saying why
    changed = {name: value for name, value in fields.items() if current is None or current.get(name) != value}
    if not changed:
        return current  # type: ignore[return-value]
    with transaction.atomic():
        session = provider.update_session(session_id, **changed)
        record(
            actor=acting,
            channel=channel,
            operation="update_session",
            session_id=session_id,
            detail={"fields": sorted(changed), **({"title": changed["title"]} if "title" in changed else {})},
        )
    return session


def _set_status(
    session_id: str,
    status: str,
    operation: str,
    allowed_from: tuple[str, ...],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None,
) -> SessionTreeSession:
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    # The status lives in the meta row: lock that (never a session file inside
    # a database transaction: file locks are always taken first).
    with transaction.atomic():
        current = meta.get_row(session_id, provider=provider.kind, for_update=True).status
        if current != status:
            if current not in allowed_from:
                raise SessionClosed(f"Session {session_id} is {current}; it cannot be {status} (restore it first)")
            provider.update_session(session_id, status=status)
            record(
                actor=acting,
                channel=channel,
                operation=operation,
                session_id=session_id,
                detail={"from": current, "to": status},
            )
    session = provider.get_session(session_id)
    assert session is not None
    return session


def archive_session(
    *, session_id: str, actor: Any, channel: str, provider: SessionTreeProvider | None = None
) -> SessionTreeSession:
    """Archive: read-only until restored (appends and leaf moves are refused)."""
    return _set_status(session_id, "archived", "archive_session", ("active",), actor, channel, provider)


def restore_session(
    *, session_id: str, actor: Any, channel: str, provider: SessionTreeProvider | None = None
) -> SessionTreeSession:
    """Back to ``active`` from ``archived`` or (soft) ``deleted``."""
    return _set_status(session_id, "active", "restore_session", ("archived", "deleted"), actor, channel, provider)


def delete_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    hard: bool = False,
    provider: SessionTreeProvider | None = None,
) -> SessionTreeSession | None:
    """Soft delete (status ``deleted``: readable, closed to writes, restorable),
    or with ``hard`` remove the session and its entries for good (its forks
    stay, detached from the lineage tree). Returns the session after a soft
    delete, ``None`` after a hard one."""
    if not hard:
        return _set_status(session_id, "deleted", "delete_session", ("active", "archived"), actor, channel, provider)
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    current = provider.get_session(session_id)
    if current is None:
        provider.update_session(session_id)  # raises SessionNotFound

    def audit() -> None:
        record(
            actor=acting,
            channel=channel,
            operation="hard_delete_session",
            session_id=session_id,
            leaf_before=current["leaf_entry_id"] if current else None,
            detail={
                "provider": provider.kind,
                "entries": current.get("entry_count") if current else None,
                "title": current.get("title") if current else None,
            },
        )

    provider.delete_session(session_id, hard=True, before_commit=audit)
    return None
