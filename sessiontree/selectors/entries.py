"""A page of a session's entries in append order, for paginated lists.

Append order never changes (entries are only ever added at the end), so a
position in it is a stable cursor: a page read again after more appends holds
the same entries, and the next page starts where this one stopped.
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import islice
from typing import NamedTuple

from sessiontree.core.errors import EntryNotFound
from sessiontree.core.types import Entry
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
