"""Models and migrations agree: a model change without its migration fails the suite."""

from __future__ import annotations

from contextlib import contextmanager
from io import StringIO

import pytest
from django.core.management import call_command


@contextmanager
def migrated_from(before: list[tuple[str, str]]):
    """The database migrated back to ``before`` (its models: what this yields),
    then forward to the latest migrations when the block ends."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    try:
        yield executor.loader.project_state(before).apps
    finally:
        MigrationExecutor(connection).migrate(latest)


def entry_row(entry_model, session, seq: int, **fields):
    """Row ``seq`` of a line of entries (``<session id>-e<seq>``, each the child
    of the one before), as a historical model of the entries stores it."""
    prefix = session.session_id
    values = {
        "session": session,
        "entry_id": f"{prefix}-e{seq}",
        "parent_entry_id": f"{prefix}-e{seq - 1}" if seq > 1 else None,
        "entry_seq": seq,
        "depth": seq - 1,
        "type": "message",
        "message": {"role": "user", "content": f"{prefix} {seq}"},
    }
    return entry_model.objects.create(**{**values, **fields})


@pytest.mark.django_db
def test_no_model_change_is_missing_a_migration():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # makemigrations --check exits 1 when a migration is missing
        pytest.fail(f"models and migrations disagree (exit {exc.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
def test_id_columns_compare_exactly_on_mysql():
    """Migration 0008 gave every id column a binary NO PAD collation (a later
    ``AlterField`` would silently drop it: this is the guard)."""
    from importlib import import_module

    from django.apps import apps
    from django.db import connection

    if connection.vendor != "mysql":
        pytest.skip("SQLite compares text byte for byte already; the collation is MySQL/MariaDB's")
    exact = import_module("sessiontree.migrations.0008_exact_ids")
    later = [
        import_module("sessiontree.migrations.0010_moderation_flags"),
        import_module("sessiontree.migrations.0011_legal_hold_and_retention"),
        import_module("sessiontree.migrations.0013_idempotency_records"),
        import_module("sessiontree.migrations.0014_search_index"),
        import_module("sessiontree.migrations.0016_lineage_and_entry_session_key"),
    ]
    expected = {
        (
            apps.get_model("sessiontree", model)._meta.db_table,
            apps.get_model("sessiontree", model)._meta.get_field(name).column,
        )
        for migration in (exact, *later)
        for model, names in migration.EXACT_COLUMNS.items()
        for name in names
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME, COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND COLLATION_NAME IS NOT NULL"
        )
        collations = {(table, column): collation for table, column, collation in cursor.fetchall()}
    assert expected <= collations.keys()
    wrong = {column: collations[column] for column in expected if collations[column] not in exact.EXACT_COLLATIONS}
    assert not wrong, f"id columns that do not compare exactly: {wrong}"


@pytest.mark.django_db(transaction=True)
def test_0012_fills_the_first_message_preview_of_existing_sessions(tmp_path):
    """Entries in the database: one query; a session file: its first lines."""
    with migrated_from([("sessiontree", "0011_legal_hold_and_retention")]) as apps:
        session_model = apps.get_model("sessiontree", "AgentSession")
        entry_model = apps.get_model("sessiontree", "AgentSessionEntry")

        def row(session_id: str, provider: str, tree_id: int, **fields):
            return session_model.objects.create(
                session_id=session_id, provider=provider, lft=1, rght=2, tree_id=tree_id, level=0, **fields
            )

        in_db = row("db1", "mysql", 1)
        for seq, message in enumerate(
            [{"role": "assistant", "content": "intro"}, {"role": "user", "content": "asked  in the\ndatabase"}], 1
        ):
            entry_model.objects.create(
                session=in_db, entry_id=f"e{seq}", entry_seq=seq, type="message", message=message
            )
        path = tmp_path / "f1.jsonl"
        path.write_text(
            '{"type":"session","version":3,"id":"f1","timestamp":"2026-01-01T00:00:00.000Z","cwd":""}\n'
            "not json\n"
            '{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",'
            '"message":{"role":"user","content":[{"type":"text","text":"asked in a file"}]}}\n',
            encoding="utf-8",
        )
        row("f1", "file", 2, session_file=str(path))
        row("f2", "file", 3, session_file=str(tmp_path / "missing.jsonl"))
        row("empty", "mysql", 4)

    from sessiontree.models import AgentSession

    previews = dict(AgentSession.objects.values_list("session_id", "first_message_preview"))
    assert previews == {"db1": "asked in the database", "f1": "asked in a file", "f2": None, "empty": None}


@pytest.mark.django_db
def test_0014_gives_the_search_text_a_full_text_index_on_each_database():
    """FTS5 over the rows on SQLite (kept by triggers); on MySQL/MariaDB a
    FULLTEXT index whose column folds case and accents."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE name LIKE 'neta_search%' ORDER BY name")
            names = {row[0] for row in cursor.fetchall()}
            assert {
                "neta_search_fts",
                "neta_search_fts_position",
                "neta_search_entry_ai",
                "neta_search_entry_ad",
                "neta_search_entry_au",
            } <= names
        else:
            cursor.execute(
                "SELECT INDEX_TYPE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
                "AND TABLE_NAME = 'neta_search_entry' AND INDEX_NAME = 'search_entry_text_ft'"
            )
            assert cursor.fetchone()[0] == "FULLTEXT"
            cursor.execute(
                "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                "AND TABLE_NAME = 'neta_search_entry' AND COLUMN_NAME = 'text'"
            )
            assert cursor.fetchone()[0] == "utf8mb4_unicode_ci"


@pytest.mark.django_db(transaction=True)
def test_0016_rebuilds_the_lineage_with_each_tree_keyed_by_its_root():
    """Trees numbered MAX + 1 (and two roots sharing a tree id, as the Galera
    race left them) come out keyed by their roots' pks, agreeing with the
    parent links, forks in the order they had."""
    from tests.providers.lineage import assert_valid_lineage

    with migrated_from([("sessiontree", "0013_idempotency_records")]) as apps:
        session_model = apps.get_model("sessiontree", "AgentSession")

        def row(session_id: str, tree_id: int, lft: int, rght: int, level: int, parent=None):
            return session_model.objects.create(
                session_id=session_id, provider="mysql", tree_id=tree_id, lft=lft, rght=rght, level=level, parent=parent
            )

        # Tree 1: src with forks f-b (made first) and f-a, and f-b's fork.
        src = row("src", 1, 1, 8, 0)
        f_b = row("f-b", 1, 2, 5, 1, src)
        row("f-b-1", 1, 3, 4, 2, f_b)
        row("f-a", 1, 6, 7, 1, src)
        # Two roots that share tree id 2 (the race), one with a fork whose lft/rght are wrong.
        r1 = row("race-1", 2, 1, 4, 0)
        row("race-1-fork", 2, 2, 3, 1, r1)
        row("race-2", 2, 1, 2, 0)
        lonely = row("lonely", 7, 1, 2, 0)
    from sessiontree.models import AgentSession

    assert_valid_lineage()
    by_id = {r.session_id: r for r in AgentSession.objects.all()}
    assert by_id["src"].tree_id == src.pk and by_id["race-1"].tree_id == r1.pk
    assert by_id["race-2"].tree_id == by_id["race-2"].pk != r1.pk
    assert by_id["lonely"].tree_id == lonely.pk
    assert [s.session_id for s in by_id["src"].get_descendants()] == ["f-b", "f-b-1", "f-a"]
    assert [s.session_id for s in by_id["race-1"].get_descendants()] == ["race-1-fork"]
    assert list(by_id["race-2"].get_descendants()) == []


@pytest.mark.django_db(transaction=True)
def test_0016_keys_every_entry_by_its_sessions_id():
    """Entries stored under the session row's pk come out under the session's
    id, in the same sessions, with their unique keys and the foreign key."""
    from django.db import IntegrityError, connection, transaction

    with migrated_from([("sessiontree", "0013_idempotency_records")]) as apps:
        session_model = apps.get_model("sessiontree", "AgentSession")
        entry_model = apps.get_model("sessiontree", "AgentSessionEntry")
        for n, session_id in enumerate(["alpha", "12345", "beta"], 1):
            session = session_model.objects.create(
                session_id=session_id,
                provider="mysql",
                tree_id=n,
                lft=1,
                rght=2,
                level=0,
                entry_count=2,
                branch_count=1,
                root_entry_id=f"{session_id}-e1",
                leaf_entry_id=f"{session_id}-e2",
            )
            for seq in (1, 2):
                entry_row(entry_model, session, seq)
    from sessiontree.models import AgentSessionEntry
    from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider

    stored = sorted(AgentSessionEntry.objects.values_list("session_id", "entry_id"))
    assert stored == sorted((s, f"{s}-e{seq}") for s in ("alpha", "12345", "beta") for seq in (1, 2))
    provider = MySQLSessionTreeProvider()
    assert [e["message"]["content"] for e in provider.list_entries("12345")] == ["12345 1", "12345 2"]
    assert provider.append_message("alpha", {"role": "user", "content": "after"})["parentId"] == "alpha-e2"
    with pytest.raises(IntegrityError), transaction.atomic():  # (session, entry_id) is still unique
        AgentSessionEntry.objects.create(session_id="beta", entry_id="beta-e1", entry_seq=9, type="message")
    if connection.vendor == "mysql":  # SQLite checks foreign keys only at the end of a transaction
        with pytest.raises(IntegrityError), transaction.atomic():
            AgentSessionEntry.objects.create(session_id="nobody", entry_id="x", entry_seq=1, type="message")


@pytest.mark.django_db(transaction=True)
def test_0023_marks_the_mysql_sessions_whose_entries_were_stored_in_order():
    """A ``mysql`` session whose rows all have exact path facts is in order; one
    with a row stored before its parent (inexact facts) is not, nor is a
    ``file`` session (its children are read from its own index)."""
    with migrated_from([("sessiontree", "0022_entry_type_seq_idx")]) as apps:
        session_model = apps.get_model("sessiontree", "AgentSession")
        entry_model = apps.get_model("sessiontree", "AgentSessionEntry")
        for n, (session_id, provider, exact) in enumerate(
            [
                ("ordered", "mysql", (True, True)),
                ("copied", "mysql", (True, False)),
                ("empty", "mysql", ()),
                ("onfile", "file", ()),
            ],
            1,
        ):
            session = session_model.objects.create(
                session_id=session_id, provider=provider, tree_id=n, lft=1, rght=2, level=0, entry_count=len(exact)
            )
            for seq, is_exact in enumerate(exact, 1):
                entry_row(entry_model, session, seq, path_exact=is_exact)
    from sessiontree.models import AgentSession

    marked = dict(AgentSession.objects.values_list("session_id", "rows_in_order"))
    assert marked == {"ordered": True, "copied": False, "empty": True, "onfile": False}


@pytest.mark.django_db(transaction=True)
def test_0024_marks_out_of_order_the_sessions_with_an_entry_aimed_forward():
    """A label aimed at an entry stored after it (or at none) leaves a session
    out of order; one aimed backward does not."""
    with migrated_from([("sessiontree", "0023_session_rows_in_order")]) as apps:
        session_model = apps.get_model("sessiontree", "AgentSession")
        entry_model = apps.get_model("sessiontree", "AgentSessionEntry")
        for n, (session_id, target) in enumerate(
            [("back", "back-e1"), ("forward", "forward-e3"), ("nowhere", "zz")], 1
        ):
            session = session_model.objects.create(
                session_id=session_id, provider="mysql", tree_id=n, lft=1, rght=2, level=0, rows_in_order=True
            )
            for seq in (1, 3):
                entry_row(entry_model, session, seq, path_exact=True)
            entry_row(
                entry_model, session, 2, type="label", target_entry_id=target, label="x", message=None, path_exact=True
            )
    from sessiontree.models import AgentSession

    marked = dict(AgentSession.objects.values_list("session_id", "rows_in_order"))
    assert marked == {"back": True, "forward": False, "nowhere": False}
