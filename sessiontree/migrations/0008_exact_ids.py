"""Ids compare byte for byte on MySQL/MariaDB, as they do in Pi, in the
``file`` provider and on SQLite.

A database created with the server's defaults (``utf8mb4_general_ci`` on
MariaDB 10.11) compares ``'ab12'`` equal to ``'AB12'``, and every PAD SPACE
collation, ``utf8mb4_bin`` included, compares ``'ab12'`` equal to
``'ab12 '``. On such columns a leaf move to ``AB12`` found the entry
``ab12`` and stored a leaf no entry has (every later read of the session
failed), and an entry whose id differed from another only by case or
trailing spaces was refused by the unique key with an untyped database error
while the ``file`` provider stored it.

This migration gives the columns that hold ids, types and user names a
binary NO PAD collation (``utf8mb4_nopad_bin`` on MariaDB,
``utf8mb4_0900_bin`` on MySQL 8), whatever the database's default. On
other databases it does nothing. Each table is rebuilt once (one ``ALTER
TABLE``); on a large existing ``neta_agent_session_entry`` that takes a
while, see docs/mysql-provider.md. No data changes: values that were
distinct stay distinct, so no unique key can break.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

# Preferred first: MariaDB's, then MySQL 8's.
EXACT_COLLATIONS = ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")

# model → its columns that must compare exactly.
EXACT_COLUMNS: dict[str, tuple[str, ...]] = {
    "AgentSession": ("session_id", "root_entry_id", "leaf_entry_id", "parent_session_id", "user_id"),
    "AgentSessionEntry": (
        "entry_id",
        "parent_entry_id",
        "first_kept_entry_id",
        "target_entry_id",
        "from_id",
        "type",
        "custom_type",
    ),
    "AuditRecord": ("session_id", "leaf_before", "leaf_after"),
    "SyncedFile": ("session_id", "last_entry_id"),
}


def exact_collation(connection: Any) -> str:
    """The binary NO PAD utf8mb4 collation this server has."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COLLATION_NAME FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN (%s, %s)",
            list(EXACT_COLLATIONS),
        )
        available = {row[0] for row in cursor.fetchall()}
    for name in EXACT_COLLATIONS:
        if name in available:
            return name
    raise RuntimeError(
        f"This MySQL/MariaDB server has none of the collations {', '.join(EXACT_COLLATIONS)}; "
        "session trees need MariaDB 10.2+ or MySQL 8.0.17+"
    )


def table_collation(connection: Any, table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            [table],
        )
        return str(cursor.fetchone()[0])


def set_collations(
    apps: Any, schema_editor: Any, *, exact: bool, columns_of: dict[str, tuple[str, ...]] | None = None
) -> None:
    """Give ``columns_of`` (model → columns; default this migration's) the exact
    collation, or back the table's own (``exact=False``). Later migrations
    that add id columns call this with theirs."""
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    quote = schema_editor.quote_name
    for model_name, columns in (columns_of if columns_of is not None else EXACT_COLUMNS).items():
        model = apps.get_model("sessiontree", model_name)
        table = model._meta.db_table
        collation = exact_collation(connection) if exact else table_collation(connection, table)
        clauses = []
        for name in columns:
            field = model._meta.get_field(name)
            null = "NULL" if field.null else "NOT NULL"
            clauses.append(
                f"MODIFY {quote(field.column)} {field.db_type(connection)} "
                f"CHARACTER SET utf8mb4 COLLATE {collation} {null}"
            )
        schema_editor.execute(f"ALTER TABLE {quote(table)} {', '.join(clauses)}")


def forwards(apps: Any, schema_editor: Any) -> None:
    set_collations(apps, schema_editor, exact=True)


def backwards(apps: Any, schema_editor: Any) -> None:
    set_collations(apps, schema_editor, exact=False)


class Migration(migrations.Migration):
    dependencies = [("sessiontree", "0007_session_leaf_cache")]

    # DDL: MySQL commits each ALTER itself; it cannot run inside a transaction.
    atomic = False
    operations = [migrations.RunPython(forwards, backwards, atomic=False, elidable=False)]
