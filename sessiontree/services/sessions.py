"""Session lifecycle: create, update title/metadata, archive, restore, delete.

Status moves: ``active`` → ``archived`` (read-only, restorable), ``active`` or
``archived`` → ``deleted`` (soft: readable, closed to writes, restorable),
``archived``/``deleted`` → ``active`` (restore). Asking for the status a
session already has changes nothing and writes no audit record.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any, TypeVar

from django.db import transaction

from sessiontree.core.errors import BadInput, InvalidEntry, SessionClosed, SessionNotFound
from sessiontree.core.types import UNSET, Entry, SessionTreeSession, Unset
from sessiontree.models import Agent, AgentSession
from sessiontree.providers import db_errors, meta
from sessiontree.providers.base import RegistersFiles, SessionTreeProvider
from sessiontree.providers.factory import (
    file_registering_provider,
    get_provider,
    provider_for,
    resolve_session_provider_kind,
)
from sessiontree.providers.port import MetaRecount
from sessiontree.providers.template import SessionWriter

from . import versions
from .audit import record, who
from .holds import check_not_held
from .idempotency import idempotent
from .operations import Operation

EDITABLE_FIELDS = ("title", "metadata", "user_id", "agent_id", "cwd")
T = TypeVar("T")


def set_times(session_id: str, *, created_at: datetime | None = None, activity_at: datetime | None = None) -> None:
    """Set a session's creation time and last activity (``updated_at``) from
    its source (a Pi file's header and last entry), inside the caller's
    transaction. ``None`` leaves a time as it is."""
    times = {
        name: value for name, value in (("created_at", created_at), ("updated_at", activity_at)) if value is not None
    }
    meta.set_row_fields(session_id, **times)


def _agent_id(agent: Any) -> int | None:
    if agent is None:
        return None
    if isinstance(agent, Agent):
        return agent.pk
    if isinstance(agent, int) and not isinstance(agent, bool):
        return agent
    raise BadInput(f"agent must be an Agent or its id, not {type(agent).__name__}")


@idempotent(Operation.CREATE_SESSION)
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
            operation=Operation.CREATE_SESSION,
            session_id=session["session_id"],
            entry_ids=[e["id"] for e in entries or []][:50],
            leaf_after=session["leaf_entry_id"],
            detail={"provider": provider.kind, "entries": len(entries or []), "title": title},
            result=session,
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


@idempotent(Operation.UPDATE_SESSION)
def update_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset = UNSET,
    **fields: Any,
) -> SessionTreeSession:
    """Change ``title``, ``metadata``, ``user_id``, ``agent_id`` or ``cwd``
    (fields given as ``UNSET`` are left alone). The tree is never touched.

    ``expected_etag``: the session's tag the caller read (``"*"``: any);
    checked with the session locked, together with the change, so that of
    two callers who read the same version only the first one writes
    (``PreconditionFailed`` for the other)."""
    acting, channel = who(actor, channel)
    fields = {name: value for name, value in fields.items() if value is not UNSET}
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise BadInput(f"Cannot update session field(s): {', '.join(sorted(unknown))}")
    provider = provider_for(provider, session_id)

    def change(row: AgentSession) -> SessionTreeSession | None:
        current = meta.to_session_dict(row)
        changed = {name: value for name, value in fields.items() if current.get(name) != value}
        if not changed:
            return None
        session = provider.update_session(session_id, **changed)
        record(
            actor=acting,
            channel=channel,
            operation=Operation.UPDATE_SESSION,
            session_id=session_id,
            detail={"fields": sorted(changed), **({"title": changed["title"]} if "title" in changed else {})},
        )
        return session

    session = _locked(provider, session_id, expected_etag, change)
    return session if session is not None else _current(provider, session_id)


def _current(provider: SessionTreeProvider, session_id: str) -> SessionTreeSession:
    session = provider.get_session(session_id)
    if session is None:
        raise SessionNotFound(f"Session {session_id} not found")
    return session


def _locked(
    provider: SessionTreeProvider,
    session_id: str,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset,
    change: Callable[[AgentSession], T],
) -> T:
    """``change(row)`` with the session's meta row locked, in one transaction.

    With ``expected_etag`` the session is first locked as its storage locks
    it for any write (the file's lock, then the row), so that the tag is
    read from the same leaf a tree write sees; the tag is checked there and
    the change made before the lock is let go."""
    if isinstance(expected_etag, Unset):
        return db_errors.run_in_transaction(
            lambda: change(meta.get_row(session_id, provider=provider.kind, for_update=True))
        )

    def work(writer: SessionWriter) -> T:
        row = meta.get_row(session_id, provider=provider.kind, for_update=True)
        current = versions.session_etag_of(writer.leaf_entry_id, meta.iso(row.updated_at))
        versions.check(expected_etag, current, f"Session {session_id}")
        return change(row)

    # One transaction around the storage's own: the row stays locked until the change is committed.
    return db_errors.run_in_transaction(lambda: provider.transact(session_id, work))


def _set_status(
    session_id: str,
    status: str,
    operation: str,
    allowed_from: tuple[str, ...],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset = UNSET,
) -> SessionTreeSession:
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)

    # The status lives in the meta row: lock that (a session file is only
    # opened first, as every write does, when a tag is to be checked).
    def change(row: AgentSession) -> None:
        current = row.status
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

    _locked(provider, session_id, expected_etag, change)
    return _current(provider, session_id)


@idempotent(Operation.ARCHIVE_SESSION)
def archive_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset = UNSET,
) -> SessionTreeSession:
    """Archive: read-only until restored (appends and leaf moves are refused)."""
    return _set_status(
        session_id, "archived", Operation.ARCHIVE_SESSION, ("active",), actor, channel, provider, expected_etag
    )


@idempotent(Operation.RESTORE_SESSION)
def restore_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset = UNSET,
) -> SessionTreeSession:
    """Back to ``active`` from ``archived`` or (soft) ``deleted``."""
    return _set_status(
        session_id,
        "active",
        Operation.RESTORE_SESSION,
        ("archived", "deleted"),
        actor,
        channel,
        provider,
        expected_etag,
    )


@idempotent(Operation.DELETE_SESSION, Operation.HARD_DELETE_SESSION)
def delete_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    hard: bool = False,
    provider: SessionTreeProvider | None = None,
    reason: str | None = None,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset = UNSET,
    before_commit: Callable[[], None] | None = None,
) -> SessionTreeSession | None:
    """Soft delete (status ``deleted``: readable, closed to writes, restorable),
    or with ``hard`` remove the session and its entries for good (its forks
    stay, detached from the lineage tree). A hard delete of a session under a
    legal hold is ``SessionOnHold`` and deletes nothing. ``reason`` (e.g.
    ``retention``) is kept in the audit record. Returns the session after a
    soft delete, ``None`` after a hard one.

    ``expected_etag``: a soft delete checks it with the session locked, as
    every status change; a hard delete checks it just before it deletes (the
    removal takes the session's locks itself).

    ``before_commit`` (a hard delete only) runs inside the delete's
    transaction after its audit record: what must go with the session
    (``protection.erase_user_data`` scrubs the rows kept beside it there)."""
    if not hard:
        return _set_status(
            session_id,
            "deleted",
            Operation.DELETE_SESSION,
            ("active", "archived"),
            actor,
            channel,
            provider,
            expected_etag,
        )
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    if not isinstance(expected_etag, Unset):
        _locked(provider, session_id, expected_etag, lambda row: None)
    current = provider.get_session(session_id)
    if current is None:
        provider.update_session(session_id)  # raises SessionNotFound

    def audit() -> None:
        # Inside the delete's transaction, after its row is gone (locked):
        # a hold placed meanwhile waited for it, one placed before refuses it.
        check_not_held([session_id], what="a hard delete")
        record(
            actor=acting,
            channel=channel,
            operation=Operation.HARD_DELETE_SESSION,
            session_id=session_id,
            leaf_before=current["leaf_entry_id"] if current else None,
            detail={
                "provider": provider.kind,
                "entries": current.get("entry_count") if current else None,
                "title": current.get("title") if current else None,
                **({"reason": reason} if reason else {}),
            },
        )
        if before_commit is not None:
            before_commit()

    provider.delete_session(session_id, hard=True, before_commit=audit)
    return None


# --- sessions from Pi files (the sync command) -------------------------------------------

HEADER_FIELDS_KEPT_ELSEWHERE = ("type", "version", "id", "cwd", "parentSession")


def import_session(
    *,
    header: dict[str, Any],
    entries: list[Entry],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider,
    title: str | None = None,
    created_at: datetime | None = None,
    activity_at: datetime | None = None,
    also: Callable[[int], None] | None = None,
) -> SessionTreeSession:
    """Create a session from a Pi file's header and entries (already at v3),
    copied verbatim: the header's id becomes the session id, its other
    fields are kept in the stored header, ``parentSession`` (a path or an id)
    links the lineage. ``created_at``/``activity_at`` set the session's times;
    ``also(entry_count)`` makes more database writes in the same transaction
    (the sync command's record of how far it read the file)."""
    acting, channel = who(actor, channel)
    session_id = header.get("id")
    if not isinstance(session_id, str):
        raise InvalidEntry("A Pi header needs a string id")
    parent = header.get("parentSession")
    cwd = header.get("cwd")
    extra = {key: value for key, value in header.items() if key not in HEADER_FIELDS_KEPT_ELSEWHERE}

    def audit(session: SessionTreeSession) -> None:
        record(
            actor=acting,
            channel=channel,
            operation=Operation.IMPORT_SESSION,
            session_id=session["session_id"],
            entry_ids=[e["id"] for e in entries][:50],
            leaf_after=session["leaf_entry_id"],
            detail={"provider": provider.kind, "entries": len(entries), "title": title},
        )
        set_times(session["session_id"], created_at=created_at, activity_at=activity_at)
        if also is not None:
            also(session.get("entry_count", 0))

    return provider.create_session(
        session_id=session_id,
        cwd=cwd if isinstance(cwd, str) and cwd else None,
        title=title,
        parent_session_id=parent if isinstance(parent, str) and parent else None,
        entries=entries,
        header_extra=extra,
        before_commit=audit,
    )


def register_file(
    *,
    session_id: str,
    path: str | os.PathLike[str],
    actor: Any,
    channel: str,
    title: str | None = None,
    created_at: datetime | None = None,
    activity_at: datetime | None = None,
    also: Callable[[int], None] | None = None,
    provider: SessionTreeProvider | None = None,
) -> SessionTreeSession:
    """Register a Pi file where it lies as a session of a provider that keeps
    Pi files (``RegistersFiles``: the ``file`` provider), without copying
    its entries: leaf = its last entry (Pi's rule), counts from the file,
    cwd and parent from its header. A v1/v2 file is migrated to v3 in place
    (as Pi does), keeping a ``.pre-v3.bak`` when lines would be dropped."""
    acting, channel = who(actor, channel)
    registering = provider if provider is not None else file_registering_provider()
    if not isinstance(registering, RegistersFiles):
        raise BadInput(f"Registering a file needs a provider that keeps Pi files, not {registering.kind}")

    def audit(session: SessionTreeSession) -> None:
        record(
            actor=acting,
            channel=channel,
            operation=Operation.REGISTER_FILE,
            session_id=session["session_id"],
            leaf_after=session["leaf_entry_id"],
            detail={"path": str(path), "entries": session.get("entry_count"), "title": title},
        )
        set_times(session["session_id"], created_at=created_at, activity_at=activity_at)
        if also is not None:
            also(session.get("entry_count", 0))

    return registering.register_existing_file(session_id, path=path, title=title, before_commit=audit)


def refresh_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    title: str | None | Unset = UNSET,
    activity_at: datetime | None = None,
    also: Callable[[int], None] | None = None,
    dry_run: bool = False,
    operation: str = Operation.REFRESH_SESSION,
) -> dict[str, tuple[Any, Any]]:
    """Recompute the meta row's tree fields (entry, branch and compaction
    counts, root, leaf) from the stored entries, and set ``title`` and the
    last activity when given. The leaf stays where it is while it is an
    entry of the session, else it is the last entry (Pi's rule); for a file
    that grew behind the row's back it is the file's last entry. The storage
    does the recount (``recount``, ``recompute_meta``): this only decides
    whether to write, and audits it.

    Returns what changed (field → (before, after)); nothing changed means
    nothing written and no audit record (``also(entry_count)`` still runs).
    ``dry_run`` only computes that. ``operation`` names the audit record."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    recount = provider.recount(session_id)
    planned = _changes(recount, title)
    if not planned:
        if also is not None and not dry_run:
            with transaction.atomic():
                also(recount.stored.entry_count)
        return {}
    if dry_run:
        return planned
    changes: dict[str, tuple[Any, Any]] = {}

    def audit(recount: MetaRecount) -> None:
        # What the locked unit found: a writer may have come between the plan and the lock.
        changes.update(_changes(recount, title))
        record(
            actor=acting,
            channel=channel,
            operation=operation,
            session_id=session_id,
            leaf_before=recount.recorded.leaf_entry_id,
            leaf_after=recount.stored.leaf_entry_id,
            detail={name: {"from": before, "to": after} for name, (before, after) in changes.items()},
        )
        if "title" in changes:
            meta.set_row_fields(session_id, title=title)
        set_times(session_id, activity_at=activity_at)
        if also is not None:
            also(recount.stored.entry_count)

    provider.recompute_meta(session_id, before_commit=audit)
    return changes


def _changes(recount: MetaRecount, title: str | None | Unset) -> dict[str, tuple[Any, Any]]:
    changes = recount.changes()
    if not isinstance(title, Unset) and title != recount.title:
        changes["title"] = (recount.title, title)
    return changes
