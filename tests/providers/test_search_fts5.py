"""SQLite's FTS5 index over the search rows: an append writes its row, and
the FTS5 index takes the rows above its position before any full-text read
(as InnoDB's own cache does on MySQL/MariaDB); rows it holds follow every
change and deletion at once. Whatever the order of writes, catch-ups and
searches, FTS5's own integrity check passes and a search finds exactly
what the rows hold."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from sessiontree.core.search import query_terms
from sessiontree.models import AuditRecord, SearchEntry
from sessiontree.providers import search_index
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider
from sessiontree.services import entries

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


# --- the append path's own statement (providers/search_index._execute_one) ---------------

WHO = {"actor": "t", "channel": "internal"}


@pytest.fixture(params=["file", "mysql"])
def sqlite_provider(request, db, tmp_path):
    """Both storages on this SQLite database (``mysql``: its tables here)."""
    if request.param == "file":
        clear_index_cache()
        return FileSessionTreeProvider(root=tmp_path / "sessions")
    return MySQLSessionTreeProvider()


@pytest.fixture
def direct_writes(monkeypatch):
    """Counts the rows written straight on the DB-API connection (what an
    append does when nothing watches Django's cursors)."""
    calls: list[str] = []
    real = search_index._sqlite_upsert_sql

    def counted() -> str:
        calls.append("direct")
        return real()

    monkeypatch.setattr(search_index, "_sqlite_upsert_sql", counted)
    return calls


def test_an_audited_append_is_found_right_after_its_commit(sqlite_provider, direct_writes):
    assert not connection.queries_logged  # as in production: the direct statement
    sqlite_provider.create_session(session_id="d1")
    stored = entries.append_message(
        session_id="d1", message={"role": "user", "content": "a cormorant dives"}, provider=sqlite_provider, **WHO
    )
    assert direct_writes == ["direct"]
    assert found("cormorant") == {stored["id"]}
    row = SearchEntry.objects.get(session_id="d1", entry_id=stored["id"])
    assert (row.entry_type, row.role, row.text) == ("message", "user", "a cormorant dives")
    check_integrity()


def test_a_failed_row_is_a_database_error_and_the_append_stores_nothing(sqlite_provider, direct_writes):
    """The row is written in the append's transaction: when it fails, the
    failure is Django's error (as from its cursor) and nothing of the append
    is kept, neither the entry nor its audit record."""
    sqlite_provider.create_session(session_id="d1")
    first = entries.append_message(
        session_id="d1", message={"role": "user", "content": "first"}, provider=sqlite_provider, **WHO
    )
    audits = AuditRecord.objects.filter(session_id="d1").count()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TRIGGER refuse_search_row BEFORE INSERT ON neta_search_entry "
            "BEGIN SELECT RAISE(ABORT, 'no row'); END"
        )
    try:
        with pytest.raises(DatabaseError) as failed:
            entries.append_message(
                session_id="d1", message={"role": "user", "content": "a lost gannet"}, provider=sqlite_provider, **WHO
            )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_search_row")
    assert not isinstance(failed.value, sqlite3.Error)  # Django's class, not the driver's
    assert direct_writes  # the direct statement was the one refused
    assert [entry["id"] for entry in sqlite_provider.list_entries("d1")] == [first["id"]]
    assert sqlite_provider.get_session("d1")["leaf_entry_id"] == first["id"]
    assert AuditRecord.objects.filter(session_id="d1").count() == audits
    assert set(SearchEntry.objects.filter(session_id="d1").values_list("entry_id", flat=True)) == {first["id"]}
    again = entries.append_message(
        session_id="d1", message={"role": "user", "content": "a gannet again"}, provider=sqlite_provider, **WHO
    )
    assert found("gannet") == {again["id"]}


def test_a_watched_connection_sees_the_rows_statement(sqlite_provider, direct_writes):
    """A query log (DEBUG, a test's CaptureQueriesContext) or an execute
    wrapper sees the row's statement: it then goes through Django's cursor."""
    sqlite_provider.create_session(session_id="d1")
    with CaptureQueriesContext(connection) as logged:
        sqlite_provider.append_message("d1", {"role": "user", "content": "a logged puffin"})
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        sqlite_provider.append_message("d1", {"role": "user", "content": "a wrapped puffin"})
    assert direct_writes == []
    assert sum('INSERT INTO "neta_search_entry"' in query["sql"] for query in logged.captured_queries) == 1
    assert sum('INSERT INTO "neta_search_entry"' in sql for sql in seen) == 1
    assert len(found("puffin")) == 2


def test_one_entry_reindexed_loses_its_old_words(db_session, direct_writes):
    """An erase rewrites one entry: its row is replaced by the one-row
    statement, and the old words leave FTS5 whether or not it held them."""
    add("kept", "razorbill before")
    assert found("razorbill") == {"kept"}  # in FTS5 now
    add("fresh", "guillemot before")  # above the position
    for entry_id, text in (("kept", "erased"), ("fresh", "erased too")):
        with transaction.atomic():
            search_index.reindex_entries(
                "s1", [{"type": "message", "id": entry_id, "message": {"role": "user", "content": text}}]
            )
    assert len(direct_writes) == 4
    assert found("razorbill") == set() and found("guillemot") == set()
    assert found("erased") == {"kept", "fresh"}
    check_integrity()
