"""A page of a session's entries in append order, for paginated lists.

Append order never changes (entries are only ever added at the end), so a
position in it is a stable cursor: a page read again after more appends holds
the same entries, and the next page starts where this one stopped.

``entry_page_at`` reads a page by key from a position of the storage's
(``keyed_reads.ids_in_order``): its cost is the page's, whatever the
session's length and whether or not the page is of some types only.
``entry_page`` reads by an offset among the entries of the types asked for
(the form of cursors handed out before): it reads the session's skeleton,
and with types every entry of those types.
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import islice
from typing import NamedTuple

from sessiontree.core.errors import EntryNotFound
from sessiontree.core.types import Entry
from sessiontree.providers import keyed_reads
from sessiontree.providers.base import SessionTreeProvider


class EntryPage(NamedTuple):
    entries: list[Entry]
    has_more: bool
    offset: int  # where the page starts (among entries of the types asked for)


def entry_page(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    offset: int,
    limit: int,
    types: Collection[str] | None = None,
    after: str | None = None,
) -> EntryPage:
    """Entries ``offset`` … ``offset + limit - 1`` in append order (the
    in-flight entry last), counting only entries of ``types`` when given.
    ``after``: the page starts after that entry instead (``EntryNotFound``
    if the session has none), whatever its type.

    Without ``types`` only the page's payloads are read: the skeleton
    (``view.parents()``, append order) gives the page's ids.
    """
    with provider.read(session_id) as view:
        order = view.parents() if after is not None or not types else {}
        if after is not None and after not in order:
            raise EntryNotFound(f"Entry {after} not found in session {session_id}")
        if types:
            matching = view.all_entries(types=types)
            if after is not None:
                position = {entry_id: index for index, entry_id in enumerate(order)}
                offset = sum(1 for entry in matching if position[entry["id"]] <= position[after])
            window = matching[offset : offset + limit + 1]
        else:
            if after is not None:
                offset = next(index for index, entry_id in enumerate(order) if entry_id == after) + 1
            ids = list(islice(iter(order), offset, offset + limit + 1))
            window = view.entries(ids)
    return EntryPage(window[:limit], len(window) > limit, offset)


class PositionPage(NamedTuple):
    entries: list[Entry]
    next_position: int | None  # where the next page starts (None: nothing follows)
    previous_position: int | None  # the page before ends before this position (None: nothing precedes)


def entry_page_at(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    position: int = 0,
    before: bool = False,
    limit: int,
    types: Collection[str] | None = None,
    after: str | None = None,
) -> PositionPage:
    """The ``limit`` entries (of ``types`` when given) at or after
    ``position`` in append order, or with ``before`` the last ``limit``
    before it; ``after``: from the entry after that one instead
    (``EntryNotFound`` if the session has none). Read by key: the page (with one more entry),
    one more to tell whether a page follows or precedes (none for the first page)."""
    kinds = list(dict.fromkeys(types)) if types else None
    with provider.read(session_id) as view:
        if after is not None:
            at = keyed_reads.position_of(view, after)
            if at is None:
                raise EntryNotFound(f"Entry {after} not found in session {session_id}")
            position, before = at + 1, False
        if before:
            found = keyed_reads.entries_in_order(view, position, limit + 1, kinds, before=True)
            page = found[-limit:]
            more_before = len(found) > limit
            next_position = position if keyed_reads.ids_in_order(view, position, 1, kinds) else None
        else:
            found = keyed_reads.entries_in_order(view, position, limit + 1, kinds)
            page = found[:limit]
            next_position = found[limit][0] if len(found) > limit else None
            # None of the types lies between ``position`` and the page's first
            # entry; positions are never negative: nothing precedes the first page.
            more_before = position > 0 and bool(keyed_reads.ids_in_order(view, position, 1, kinds, before=True))
        previous_position = (page[0][0] if page else position) if more_before else None
    return PositionPage([entry for _, entry in page], next_position, previous_position)
