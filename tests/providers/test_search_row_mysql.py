"""MySQL/MariaDB: an append's search row goes straight to mysqlclient when
nothing watches Django's cursors (``providers/search_index._execute_one``),
in the append's own transaction: found right after the commit, and when the
row is refused the failure is Django's error and nothing of the append is
kept. SQLite's side: tests/providers/test_search_fts5.py."""

from __future__ import annotations

import MySQLdb
import pytest
from django.db import DatabaseError, connection
from django.db.backends.utils import CursorWrapper

from sessiontree.models import AuditRecord, SearchEntry
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider
from sessiontree.services import entries, moderation

# InnoDB's full-text index sees committed rows only: these tests commit.
pytestmark = pytest.mark.django_db(transaction=True)
WHO = {"actor": "t", "channel": "internal"}


@pytest.fixture(autouse=True)
def _mysql_only():
    if connection.vendor != "mysql":
        pytest.skip("MySQL/MariaDB's direct statement (SQLite's: test_search_fts5.py)")


@pytest.fixture(params=["file", "mysql"])
def provider(request, tmp_path):
    if request.param == "file":
        clear_index_cache()
        return FileSessionTreeProvider(root=tmp_path / "sessions")
    return MySQLSessionTreeProvider()


@pytest.fixture
def through_django(monkeypatch):
    """The SQL sent through Django's cursors (not the direct statement)."""
    sent: list[str] = []
    real = CursorWrapper.execute

    def execute(self, sql, params=None):
        sent.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", execute)
    return sent


def search_rows_sent(sent: list[str]) -> int:
    return sum("INSERT INTO `neta_search_entry`" in sql for sql in sent)


def test_an_append_row_is_direct_and_found_after_the_commit(provider, through_django):
    assert not connection.queries_logged  # as in production
    provider.create_session(session_id="m1")
    stored = entries.append_message(
        session_id="m1", message={"role": "user", "content": "a shearwater glides"}, provider=provider, **WHO
    )
    assert search_rows_sent(through_django) == 0  # the row went straight to mysqlclient
    row = SearchEntry.objects.get(session_id="m1", entry_id=stored["id"])
    assert (row.entry_type, row.role, row.text) == ("message", "user", "a shearwater glides")
    assert [hit["entry_id"] for hit in moderation.search_entries(q="shearwater", actor="t")] == [stored["id"]]


def test_a_refused_row_is_djangos_error_and_the_append_keeps_nothing(provider, through_django):
    provider.create_session(session_id="m1")
    first = entries.append_message(
        session_id="m1", message={"role": "user", "content": "first"}, provider=provider, **WHO
    )
    audits = AuditRecord.objects.filter(session_id="m1").count()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TRIGGER refuse_search_row BEFORE INSERT ON neta_search_entry FOR EACH ROW "
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no row'"
        )
    try:
        with pytest.raises(DatabaseError) as failed:
            entries.append_message(
                session_id="m1", message={"role": "user", "content": "a lost petrel"}, provider=provider, **WHO
            )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_search_row")
    assert not isinstance(failed.value, MySQLdb.Error)  # Django's class, not the driver's
    assert search_rows_sent(through_django) == 0  # the direct statement was the one refused
    assert [entry["id"] for entry in provider.list_entries("m1")] == [first["id"]]
    assert provider.get_session("m1")["leaf_entry_id"] == first["id"]
    assert AuditRecord.objects.filter(session_id="m1").count() == audits
    assert set(SearchEntry.objects.filter(session_id="m1").values_list("entry_id", flat=True)) == {first["id"]}
    again = entries.append_message(
        session_id="m1", message={"role": "user", "content": "a petrel again"}, provider=provider, **WHO
    )
    assert [hit["entry_id"] for hit in moderation.search_entries(q="petrel", actor="t")] == [again["id"]]
