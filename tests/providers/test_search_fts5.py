"""SQLite's FTS5 index over the search rows: an append writes its row, and
the FTS5 index takes the rows above its position before any full-text read
(as InnoDB's own cache does on MySQL/MariaDB); rows it holds follow every
change and deletion at once. Whatever the order of writes, catch-ups and
searches, FTS5's own integrity check passes and a search finds exactly
what the rows hold."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from sessiontree.core.search import query_terms
from sessiontree.models import SearchEntry
from sessiontree.providers import search_index

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("FTS5 is SQLite's; InnoDB keeps its own cache of new rows")


def position() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT position FROM neta_search_fts_position WHERE id = 1")
        return int(cursor.fetchone()[0])


def in_fts(word: str) -> set[int]:
    """Row ids FTS5's own index holds ``word`` for (a MATCH reads the index,
    not the rows; no catch-up runs)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rowid FROM neta_search_fts WHERE neta_search_fts MATCH %s", [f'"{word}"'])
        return {row[0] for row in cursor.fetchall()}


def check_integrity() -> None:
    """FTS5's check that its index holds exactly the rows (once caught up:
    rows above the position are not in it by design)."""
    search_index.catch_up()
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO neta_search_fts(neta_search_fts, rank) VALUES ('integrity-check', 1)")


def found(q: str) -> set[str]:
    hits = search_index.search(query_terms(q), search_index.SessionScope(), limit=50)
    return {hit.entry_id for hit in hits}


def add(entry_id: str, text: str, session_id: str = "s1") -> None:
    with transaction.atomic():
        search_index.add_entries(
            session_id, [{"type": "message", "id": entry_id, "message": {"role": "user", "content": text}}]
        )


def test_an_append_writes_its_row_and_a_read_catches_up(db_session):
    before = position()  # earlier tests' rows may have moved it: the table outlives a flush
    add("e1", "heron one")
    add("e2", "heron two")
    assert position() == before and not in_fts("heron")  # nothing of FTS5 written on the append path
    assert found("heron") == {"e1", "e2"}
    assert position() == SearchEntry.objects.order_by("-id")[0].id
    assert search_index.catch_up() == 0  # nothing left
    check_integrity()


def test_changes_and_deletions_of_rows_on_both_sides_of_the_position(db_session):
    add("old", "egret old words")
    found("egret")  # old is in FTS5 now
    add("new", "egret new words")  # above the position
    with transaction.atomic():
        search_index.reindex_entries(
            "s1",
            [
                {"type": "message", "id": "old", "message": {"role": "user", "content": "plover instead"}},
                {"type": "message", "id": "new", "message": {"role": "user", "content": "ibis instead"}},
            ],
        )
    check_integrity()
    assert found("egret") == set()
    assert found("plover") == {"old"} and found("ibis") == {"new"}
    add("gone", "stork")
    with transaction.atomic():
        search_index.remove_session("s1")
    check_integrity()
    assert found("stork") == set() and found("plover") == set()


def test_a_row_below_the_position_enters_the_index_at_once(db_session):
    """After a reset of the id sequence (a test database flushed with
    sequences reset) a new row may take an id at or below the position: it
    is indexed by its insert, since the position says it is."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE neta_search_fts_position SET position = 1000000 WHERE id = 1")
    add("low", "spoonbill")
    row = SearchEntry.objects.get(entry_id="low")
    assert row.id < 1000000 and in_fts("spoonbill") == {row.id}
    assert found("spoonbill") == {"low"}
    check_integrity()


@pytest.fixture
def db_session():
    from sessiontree.models import AgentSession

    AgentSession.objects.create(session_id="s1", provider="mysql")
    return "s1"
