"""Appending entries: any of Pi's entry types, several at once, and in-flight
(streaming) entries that are begun, updated and completed.

Every append accepts ``expected_leaf_id``: if the leaf is not that entry
(``None``: before the root) when the session is locked, ``LeafConflict`` is
raised and nothing is written. Several entries appended in one call are
stored all together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessiontree.core import entries as build
from sessiontree.core.context_builder import UNSET, _Unset
from sessiontree.core.errors import InvalidEntry
from sessiontree.core.types import Entry
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.template import SessionWriter

from ._common import audit_writer, provider_for, who
from .audit import describe_entry

Expected = str | None | _Unset


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
        lambda writer: writer.append(entry),
        expected_leaf_id=expected_leaf_id,
        before_commit=audit_writer(acting, channel, "append_entry", detail=lambda w: describe_entry(w.written[0])),
    )


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


def append_entries(
    *,
    session_id: str,
    entries: Sequence[Entry],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
    operation: str = "append_entries",
) -> list[Entry]:
    """Append ``entries`` in order, each a child of the one before: all of
    them, or (any refused) none. One audit record names them all."""
    acting, channel = who(actor, channel)
    if isinstance(entries, dict) or not isinstance(entries, Sequence) or not entries:
        raise InvalidEntry("entries must be a non-empty list of entries")
    provider = provider_for(provider, session_id)

    def work(writer: SessionWriter) -> list[Entry]:
        return [writer.append(entry) for entry in entries]

    def detail(writer: SessionWriter) -> dict[str, Any]:
        return {"count": len(writer.written), "types": sorted({str(e.get("type")) for e in writer.written})}

    return provider.transact(
        session_id,
        work,
        expected_leaf_id=expected_leaf_id,
        before_commit=audit_writer(acting, channel, operation, detail=detail),
    )


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
    return provider.transact(
        session_id,
        lambda writer: writer.begin_in_flight(entry),
        expected_leaf_id=expected_leaf_id,
        before_commit=audit_writer(acting, channel, "begin_in_flight", detail=lambda w: describe_entry(w.written[0])),
    )


def update_in_flight(
    *,
    session_id: str,
    entry_id: str,
    patch: dict[str, Any],
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    complete: bool = False,
) -> Entry:
    """Merge ``patch`` (top-level keys) into the in-flight entry; ``complete``
    stores it for good. A completed entry raises ``ImmutableEntry``."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    operation = "complete_in_flight" if complete else "update_in_flight"
    return provider.transact(
        session_id,
        lambda writer: writer.update_in_flight(entry_id, patch, complete=complete),
        before_commit=audit_writer(
            acting, channel, operation, detail=lambda w: {"fields": sorted(patch) if isinstance(patch, dict) else []}
        ),
    )


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
