"""Models and migrations agree: a model change without its migration fails the suite."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


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
