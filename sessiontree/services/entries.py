"""Appending entries: any of Pi's entry types, several at once, and in-flight
(streaming) entries that are begun, updated and completed.

Every append accepts ``expected_leaf_id``: if the leaf is not that entry
(``None``: before the root) when the session is locked, ``LeafConflict`` is
raised and nothing is written. Several entries appended in one call are
stored all together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

import orjson

from sessiontree.core import entries as build
from sessiontree.core.errors import CONFLICT, BadInput, EntryNotFound, LeafConflict, SessionTreeError
from sessiontree.core.types import UNSET, Entry, Unset
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import provider_for
from sessiontree.providers.template import SessionWriter

from . import versions
from .audit import audit_writer, describe_entry, who
from .idempotency import idempotent
from .operations import Operation
from .sessions import set_times

Expected = str | None | Unset


class EntryIdTaken(SessionTreeError):
    """A new entry names an id the session holds already: the request
    conflicts with what is stored (409), it is not malformed."""

    code = "entry_id_taken"
    category = CONFLICT


class NothingInFlight(SessionTreeError):
    """An abort asked of a session with no entry in flight."""

    code = "nothing_in_flight"
    category = CONFLICT


def _append_new(writer: SessionWriter, entry: Entry, expected_leaf_id: Expected = UNSET) -> Entry:
    """``writer.append(entry)``, a chosen id that is taken refused as a
    conflict, unless the entry stored under it is this very entry: then this
    is a retry of an append that happened, and its entry is the answer (no
    write, whatever the leaf is now)."""
    stored = _already_stored(writer, entry)
    if stored is not None:
        return stored
    writer.check_expected_leaf(expected_leaf_id)
    _check_id_free(writer, entry)
    return writer.append(entry)


def _already_stored(writer: SessionWriter, entry: Any) -> Entry | None:
    """The stored entry ``entry`` names by its own id, if every field the
    caller gave it is what is stored (``parentId`` and ``timestamp`` too, when
    given): the same entry appended again."""
    chosen = entry.get("id") if isinstance(entry, dict) else None
    if not isinstance(chosen, str) or not writer.state.entry_count:
        return None
    try:
        stored = writer.get_entry(chosen)
    except EntryNotFound:
        return None
    try:
        given = orjson.loads(orjson.dumps(entry))  # as it would read back once stored
    except (TypeError, orjson.JSONEncodeError):
        return None
    return stored if all(stored.get(key) == value for key, value in given.items()) else None


def _audit_unless_nothing_written(before_commit: Callable[[SessionWriter], None]) -> Callable[[SessionWriter], None]:
    """An append answered from what is stored writes nothing: no audit record either."""

    def audit(writer: SessionWriter) -> None:
        if writer.written:
            before_commit(writer)

    return audit


def _check_id_free(writer: SessionWriter, entry: Any) -> None:
    chosen = entry.get("id") if isinstance(entry, dict) else None
    if isinstance(chosen, str) and writer.state.entry_count and _holds(writer, chosen):
        raise EntryIdTaken(f"Session {writer.session_id} holds an entry {chosen} already; choose another id")


def _holds(writer: SessionWriter, entry_id: str) -> bool:
    try:
        writer.get_entry(entry_id)
    except EntryNotFound:
        return False
    return True


@idempotent(Operation.APPEND_ENTRY)
def append_entry(
    *,
    session_id: str,
    entry: Entry,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
) -> Entry:
    """Append one entry of any type as a child of the leaf; it becomes the
    leaf. ``id``, ``parentId`` and ``timestamp`` are filled in."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    return provider.transact(
        session_id,
        lambda writer: _append_new(writer, entry, expected_leaf_id),
        before_commit=_audit_unless_nothing_written(
            audit_writer(acting, channel, Operation.APPEND_ENTRY, detail=lambda w: describe_entry(w.written[0]))
        ),
    )


@idempotent(Operation.APPEND_ENTRY)
def append_message(
    *,
    session_id: str,
    message: dict[str, Any],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
) -> Entry:
    """Append an agent message (``user``, ``assistant``, ``toolResult`` …)."""
    return append_entry(
        session_id=session_id,
        entry=build.message_entry(message),
        actor=actor,
        channel=channel,
        provider=provider,
        expected_leaf_id=expected_leaf_id,
    )


@idempotent(Operation.APPEND_ENTRIES)
def append_entries(
    *,
    session_id: str,
    entries: Sequence[Entry],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
    operation: str = Operation.APPEND_ENTRIES,
) -> list[Entry]:
    """Append ``entries`` in order, each a child of the one before: all of
    them, or (any refused) none. One audit record names them all."""
    acting, channel = who(actor, channel)
    if isinstance(entries, dict) or not isinstance(entries, Sequence) or not entries:
        raise BadInput("entries must be a non-empty list of entries")
    provider = provider_for(provider, session_id)

    def work(writer: SessionWriter) -> list[Entry]:
        # The whole list again (a retry of an append that happened) is answered
        # from what is stored; otherwise the leaf must be the one expected.
        stored = [_already_stored(writer, entry) for entry in entries]
        if all(found is not None for found in stored):
            return [found for found in stored if found is not None]
        writer.check_expected_leaf(expected_leaf_id)
        return [_append_new(writer, entry) for entry in entries]

    def detail(writer: SessionWriter) -> dict[str, Any]:
        return {"count": len(writer.written), "types": sorted({str(e.get("type")) for e in writer.written})}

    return provider.transact(
        session_id,
        work,
        before_commit=_audit_unless_nothing_written(audit_writer(acting, channel, operation, detail=detail)),
    )


def import_entries(
    *,
    session_id: str,
    entries: Sequence[Entry],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_entry_count: int | None = None,
    activity_at: datetime | None = None,
    also: Callable[[int], None] | None = None,
) -> list[Entry]:
    """Copy entries read from a Pi file (the appended tail of one already
    imported) into the session as they are: own ids, own ``parentId`` (a
    branch in the file moves the leaf to the entry's parent first), any type,
    unknown fields kept. Afterwards the leaf is the last entry, Pi's rule.

    All of them or none. ``expected_entry_count``: refuse with
    ``LeafConflict`` unless the session holds exactly that many entries
    (nothing was added since the last import). ``activity_at`` becomes the
    session's last activity; ``also(entry_count)`` makes more database writes in the same
    transaction (the sync command's record of how far it read the file)."""
    acting, channel = who(actor, channel)
    if isinstance(entries, dict) or not isinstance(entries, Sequence) or not entries:
        raise BadInput("entries must be a non-empty list of entries")
    provider = provider_for(provider, session_id)

    def work(writer: SessionWriter) -> list[Entry]:
        if expected_entry_count is not None and writer.state.entry_count != expected_entry_count:
            raise LeafConflict(
                f"Session {session_id} holds {writer.state.entry_count} entries, not the "
                f"{expected_entry_count} of its last import: it changed since"
            )
        return [writer.copy_entry(entry) for entry in entries]

    def detail(writer: SessionWriter) -> dict[str, Any]:
        return {"count": len(writer.written), "types": sorted({str(e.get("type")) for e in writer.written})}

    audit = audit_writer(acting, channel, Operation.IMPORT_ENTRIES, detail=detail)

    def before_commit(writer: SessionWriter) -> None:
        audit(writer)
        set_times(session_id, activity_at=activity_at)
        if also is not None:
            also(writer.state.entry_count)

    return provider.transact(session_id, work, before_commit=before_commit)


@idempotent(Operation.BEGIN_IN_FLIGHT)
def begin_in_flight(
    *,
    session_id: str,
    entry: Entry,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
) -> Entry:
    """Start a streaming entry (an assistant message being generated): it is
    the leaf and visible to reads; only it may change until it is completed."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)

    def begin(writer: SessionWriter) -> Entry:
        _check_id_free(writer, entry)
        return writer.begin_in_flight(entry)

    return provider.transact(
        session_id,
        begin,
        expected_leaf_id=expected_leaf_id,
        before_commit=audit_writer(
            acting, channel, Operation.BEGIN_IN_FLIGHT, detail=lambda w: describe_entry(w.written[0])
        ),
    )


@idempotent(Operation.UPDATE_IN_FLIGHT, Operation.COMPLETE_IN_FLIGHT)
def update_in_flight(
    *,
    session_id: str,
    entry_id: str,
    patch: dict[str, Any],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    complete: bool = False,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset = UNSET,
) -> Entry:
    """Merge ``patch`` (top-level keys) into the in-flight entry; ``complete``
    stores it for good. A completed entry raises ``ImmutableEntry``.
    ``expected_etag``: the entry's tag the caller read, checked under the
    session's lock (``PreconditionFailed`` when another patch came first)."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    operation = Operation.COMPLETE_IN_FLIGHT if complete else Operation.UPDATE_IN_FLIGHT

    def work(writer: SessionWriter) -> Entry:
        if not isinstance(expected_etag, Unset):
            current = versions.entry_etag(writer.get_entry(entry_id))
            versions.check(expected_etag, current, f"Entry {entry_id} of session {session_id}")
        return writer.update_in_flight(entry_id, patch, complete=complete)

    return provider.transact(
        session_id,
        work,
        before_commit=audit_writer(
            acting, channel, operation, detail=lambda w: {"fields": sorted(patch) if isinstance(patch, dict) else []}
        ),
    )


@idempotent(Operation.ABORT_IN_FLIGHT)
def abort_in_flight(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    entry_id: str | None = None,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
    expected_etag: str | Collection[str] | versions.ExpectedTags | Unset = UNSET,
) -> Entry:
    """Discard the in-flight entry (a stream that failed or was cancelled):
    the leaf goes back to its parent and the session takes writes again.
    ``entry_id`` names it (``None``: whatever is in flight, for an entry whose
    id cannot be addressed); returns the discarded entry. Nothing in flight
    is ``NothingInFlight`` (409); a completed entry ``ImmutableEntry`` (409).
    ``expected_leaf_id`` / ``expected_etag`` (the entry's tag): as for appends
    and patches."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)

    def work(writer: SessionWriter) -> Entry:
        target = entry_id if entry_id is not None else writer.state.in_flight_entry_id
        if target is None:
            raise NothingInFlight(f"No entry of session {session_id} is in flight")
        writer.check_expected_leaf(expected_leaf_id)
        if not isinstance(expected_etag, Unset):
            current = versions.entry_etag(writer.get_entry(target))
            versions.check(expected_etag, current, f"Entry {target} of session {session_id}")
        discarded = writer.abort_in_flight(target)
        aborted.append(discarded)
        return discarded

    aborted: list[Entry] = []
    return provider.transact(
        session_id,
        work,
        before_commit=audit_writer(
            acting,
            channel,
            Operation.ABORT_IN_FLIGHT,
            detail=lambda w: {"entry_id": aborted[0]["id"], **describe_entry(aborted[0])} if aborted else {},
        ),
    )


@idempotent(Operation.COMPLETE_IN_FLIGHT)
def complete_in_flight(
    *,
    session_id: str,
    entry_id: str,
    actor: Any,
    channel: str,
    patch: dict[str, Any] | None = None,
    provider: SessionTreeProvider | None = None,
) -> Entry:
    """Complete the in-flight entry (with a last ``patch``, if any)."""
    return update_in_flight(
        session_id=session_id,
        entry_id=entry_id,
        patch=patch or {},
        actor=actor,
        channel=channel,
        provider=provider,
        complete=True,
    )
