"""A page of a session's entries in append order, for paginated lists.

Append order never changes (entries are only ever added at the end), so a
position in it is a stable cursor: a page read again after more appends holds
the same entries, and the next page starts where this one stopped.
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import islice
from typing import NamedTuple

from sessiontree.core.types import Entry
from sessiontree.providers.base import SessionTreeProvider


class EntryPage(NamedTuple):
    entries: list[Entry]
    has_more: bool


def entry_page(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    offset: int,
    limit: int,
    types: Collection[str] | None = None,
) -> EntryPage:
    """Entries ``offset`` … ``offset + limit - 1`` in append order (the
    in-flight entry last), counting only entries of ``types`` when given.

    Without ``types`` only the page's payloads are read: the skeleton
    (``view.parents()``, append order) gives the page's ids.
    """
    with provider.read(session_id) as view:
        if types:
            matching = view.all_entries(types=types)
            window = matching[offset : offset + limit + 1]
        else:
            ids = list(islice(iter(view.parents()), offset, offset + limit + 1))
            window = view.entries(ids)
    return EntryPage(window[:limit], len(window) > limit)
