"""Erased text leaves the search index: found before the erase (in the
entry, its fork's copy and a compaction quoting it), found nowhere after,
and no byte of it left in the index's tables (on SQLite FTS5's own tables
too). On both providers, SQLite and MariaDB."""

from __future__ import annotations

import pytest
from django.db import connection

from sessiontree.core.compaction import CompactionSettings
from sessiontree.services import entries, moderation, tree
from tests.roleplay.story import FakeSummarizer

# InnoDB's full-text index sees committed rows only: these tests commit.
pytestmark = pytest.mark.django_db(transaction=True)
WHO = {"actor": "mod", "channel": "internal"}
CARD = "4111111111111111"


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def sessions_holding(q):
    return sorted(hit["session_id"] for hit in moderation.search_entries(q=q, actor="t"))


def index_tables_hold(needle: bytes) -> list[str]:
    """Index tables whose stored values hold ``needle`` (SQLite: FTS5's shadow tables too)."""
    tables = ["neta_search_entry"]
    if connection.vendor == "sqlite":
        tables += ["neta_search_fts_data", "neta_search_fts_idx"]
    holding = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT * FROM {table}")
            for row in cursor.fetchall():
                values = [v.encode() if isinstance(v, str) else bytes(v) for v in row if isinstance(v, str | bytes)]
                if any(needle in value for value in values):
                    holding.append(table)
                    break
    return holding


def test_an_erase_takes_the_text_out_of_the_index_with_every_copy(provider):
    provider.create_session(session_id="s1")
    secret = entries.append_message(
        session_id="s1", message=user(f"my card is {CARD} thanks"), provider=provider, **WHO
    )
    for i in range(3):
        entries.append_message(session_id="s1", message=user(f"more words {i} " + "w " * 60), provider=provider, **WHO)
    tree.fork_session(
        session_id="s1", entry_id=secret["id"], position="at", new_session_id="s1-fork", provider=provider, **WHO
    )
    tree.compact_session(
        session_id="s1",
        summarizer=FakeSummarizer(f"the user gave the card {CARD}"),
        settings=CompactionSettings(keep_recent_tokens=10),
        provider=provider,
        **WHO,
    )
    assert sessions_holding(CARD) == ["s1", "s1", "s1-fork"]  # the message, the summary, the fork's copy
    assert index_tables_hold(CARD.encode())

    result = moderation.erase_entry(
        session_id="s1", entry_id=secret["id"], reason="pii: a card", provider=provider, **WHO
    )

    assert {place["kind"] for place in result["changed"]} == {"entry", "copy", "summary"}
    assert sessions_holding(CARD) == []
    assert sessions_holding("erased") != []
    assert index_tables_hold(CARD.encode()) == []
