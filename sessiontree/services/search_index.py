"""The search index's door for the operations layer: entries rewritten in
place (an erase, ``services/erasure.py``) are passed here, inside the
rewrite's own transaction, with their text as it is stored now.

``reindex`` replaces each entry's row in the search index with what the
entry holds now (an entry left without text loses its row), so no query
finds the old text, and purges the engine's own copy where that can be done
inside a transaction: on SQLite FTS5's index is merged (no byte of the old
words is left in its tables; the merge reads and rewrites the whole index,
so it takes longer the larger the index is). On MySQL/MariaDB InnoDB keeps
deleted words in its internal full-text tables until ``OPTIMIZE TABLE``
(``manage.py build_search_index --optimize``), which cannot run inside a
transaction (docs/moderation.md, "Search").
"""

from __future__ import annotations

from collections.abc import Iterable

from sessiontree.core.types import Entry
from sessiontree.providers.search_index import reindex_entries


def reindex(*, session_id: str, entries: Iterable[Entry]) -> dict[str, int]:
    """The search rows of ``entries`` of ``session_id`` made what they hold
    now, the old words purged from FTS5 (SQLite); ``{"updated", "removed"}``."""
    return reindex_entries(session_id, entries, purge=True)


__all__ = ["reindex"]
