"""Search across sessions and the classifiers' cursor (docs/moderation.md).

- ``SearchEntry``: one row per entry that holds text (``core.text.entry_text``),
  kept by the providers' write path. Its ``text`` is indexed by the
  database's own full-text engine:

  - SQLite: an FTS5 table ``neta_search_fts`` over it (external content: the
    text is stored once, in ``neta_search_entry``), tokenized with
    ``unicode61`` (case and diacritics folded, ``_`` part of a word as in
    InnoDB). Like InnoDB's own full-text cache, new rows reach the inverted
    index before it is read rather than in every append: ``neta_search_fts_position``
    says up to which row it holds, a catch-up adds the rest before any
    full-text read, and triggers keep the rows it holds in step when they are
    changed or deleted;
  - MySQL/MariaDB: an InnoDB ``FULLTEXT`` index on ``text``, whose column
    takes the case- and accent-insensitive ``utf8mb4_unicode_ci`` (the
    project's databases default to a binary collation, under which a
    full-text search would be case-sensitive); the id columns compare
    exactly, as every id column does (migration 0008).

  On other databases neither is created (search then finds nothing).
- ``ClassifierCursor``: how far ``moderate_sessions`` has scanned, per classifier.

Existing sessions are indexed by ``manage.py build_search_index``.
"""

from importlib import import_module
from typing import Any

from django.db import migrations, models

EXACT_COLUMNS = {
    "SearchEntry": ("session_id", "entry_id", "entry_type", "role"),
    "ClassifierCursor": ("classifier",),
}
_exact_ids = import_module("sessiontree.migrations.0008_exact_ids")

TABLE = "neta_search_entry"
FTS_TABLE = "neta_search_fts"
POSITION_TABLE = "neta_search_fts_position"
FULLTEXT_INDEX = "search_entry_text_ft"
TEXT_COLLATION = "utf8mb4_unicode_ci"

# The position: rows with an id up to it are in the FTS5 index; rows above
# it are added by the next catch-up (providers/search_index.py, before any
# full-text read), so an append writes its row and not the FTS5 index.
_INDEXED = f"(new.id <= COALESCE((SELECT position FROM {POSITION_TABLE} WHERE id = 1), 0))"
_WAS_INDEXED = f"(old.id <= COALESCE((SELECT position FROM {POSITION_TABLE} WHERE id = 1), 0))"
SQLITE_FORWARDS = [
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5("
    f"text, content='{TABLE}', content_rowid='id', columnsize=0, "
    "tokenize='unicode61 remove_diacritics 2 tokenchars _')",
    f"CREATE TABLE {POSITION_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), position INTEGER NOT NULL)",
    f"INSERT INTO {POSITION_TABLE} (id, position) VALUES (1, 0)",
    # A row below the position (an id used again after a reset of the
    # sequence) goes into the index at once, as the position says it is.
    f"CREATE TRIGGER {TABLE}_ai AFTER INSERT ON {TABLE} WHEN {_INDEXED} BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, text) VALUES (new.id, new.text); END",
    f"CREATE TRIGGER {TABLE}_ad AFTER DELETE ON {TABLE} WHEN {_WAS_INDEXED} BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, text) VALUES ('delete', old.id, old.text); END",
    f"CREATE TRIGGER {TABLE}_au AFTER UPDATE OF text ON {TABLE} WHEN {_WAS_INDEXED} BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, text) VALUES ('delete', old.id, old.text); "
    f"INSERT INTO {FTS_TABLE}(rowid, text) VALUES (new.id, new.text); END",
]
SQLITE_BACKWARDS = [
    f"DROP TRIGGER IF EXISTS {TABLE}_au",
    f"DROP TRIGGER IF EXISTS {TABLE}_ad",
    f"DROP TRIGGER IF EXISTS {TABLE}_ai",
    f"DROP TABLE IF EXISTS {POSITION_TABLE}",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
]


def forwards(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in SQLITE_FORWARDS:
            schema_editor.execute(statement)
    elif vendor == "mysql":
        _exact_ids.set_collations(apps, schema_editor, exact=True, columns_of=EXACT_COLUMNS)
        schema_editor.execute(
            f"ALTER TABLE {TABLE} MODIFY text LONGTEXT CHARACTER SET utf8mb4 COLLATE {TEXT_COLLATION} NOT NULL"
        )
        schema_editor.execute(f"ALTER TABLE {TABLE} ADD FULLTEXT INDEX {FULLTEXT_INDEX} (text)")


def backwards(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in SQLITE_BACKWARDS:
            schema_editor.execute(statement)
    elif vendor == "mysql":
        schema_editor.execute(f"ALTER TABLE {TABLE} DROP INDEX {FULLTEXT_INDEX}")


class Migration(migrations.Migration):
    # DDL: MySQL commits each ALTER itself; it cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("sessiontree", "0013_idempotency_records"),
    ]

    operations = [
        migrations.CreateModel(
            name="ClassifierCursor",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("classifier", models.CharField(max_length=64, unique=True)),
                ("position", models.BigIntegerField(default=0)),
                ("gaps", models.JSONField(blank=True, default=list)),
                ("scanned", models.BigIntegerField(default=0)),
                ("flagged", models.BigIntegerField(default=0)),
                ("lease_owner", models.CharField(blank=True, default="", max_length=191)),
                ("lease_until", models.DateTimeField(blank=True, null=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "db_table": "neta_classifier_cursor",
            },
        ),
        migrations.CreateModel(
            name="SearchEntry",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("session_id", models.CharField(max_length=64)),
                ("entry_id", models.CharField(max_length=64)),
                ("entry_type", models.CharField(max_length=32)),
                ("role", models.CharField(blank=True, max_length=32, null=True)),
                ("text", models.TextField()),
            ],
            options={
                "db_table": TABLE,
                "constraints": [
                    models.UniqueConstraint(fields=("session_id", "entry_id"), name="search_entry_unique_per_session")
                ],
            },
        ),
        migrations.RunPython(forwards, backwards, atomic=False, elidable=False),
    ]
