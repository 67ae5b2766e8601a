"""Lineage trees keyed by their roots' own primary keys, no global lineage
lock; entries keyed by their session's own id.

1. Lineage.

Until now a new lineage root took ``MAX(tree_id) + 1`` under a lock on one
``LineageLock`` row (which Galera's certification ignores, so two creations
on two nodes could share a tree id), and django-mptt's
``order_insertion_by=session_id`` renumbered every tree after a root whose
id sorted earlier. From here on each tree's ``tree_id`` is its root's pk
(``providers/lineage.py``); ``tree_id`` becomes a 64-bit column to hold any pk.

This migration rebuilds every session's ``lft``/``rght``/``level``/
``tree_id`` from the parent links (the truth the nested sets are derived
from), keeping the order of forks under each session. That also repairs
trees damaged by the race above (two roots sharing a tree id): whatever the
nested-set columns said, afterwards they agree with the parent links. Only
rows whose values change are written, in batches. Then the lock table goes.

2. One key per session. ``neta_agent_session_entry.session_id`` held the
session row's integer pk while the session row and the audit name the
session by its id: every statement of an entry operation now names the
session by the same key, its ``session_id`` (what a session-sharded
keyspace routes by; docs/scale-out.md). The column becomes the session's id
(a foreign key to ``neta_agent_session.session_id``, binary NO PAD collation
on MySQL/MariaDB like every id column), its unique constraints and indexes
are rebuilt on it. On MySQL/MariaDB: one added column filled by one UPDATE
… JOIN, then one rebuild of the entry table (as long as a copy of it:
a maintenance window on a large table, docs/mysql-provider.md); elsewhere
Django rebuilds the table.
"""

from __future__ import annotations

from collections import defaultdict
from importlib import import_module
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

_exact_ids = import_module("sessiontree.migrations.0008_exact_ids")
# The entry table's session key compares exactly, as every id column (tests/test_migrations.py).
EXACT_COLUMNS = {"AgentSessionEntry": ("session",)}

BATCH = 500


def rebuild_lineage(apps: Any, schema_editor: Any) -> None:
    session_model = apps.get_model("sessiontree", "AgentSession")
    manager = session_model._base_manager.using(schema_editor.connection.alias)
    rows = {
        pk: (parent_id, tree_id, lft, rght, level)
        for pk, parent_id, tree_id, lft, rght, level in manager.values_list(
            "pk", "parent_id", "tree_id", "lft", "rght", "level"
        ).iterator(chunk_size=2000)
    }
    children: dict[int | None, list[int]] = defaultdict(list)
    for pk, (parent_id, *_rest) in rows.items():
        children[parent_id if parent_id in rows else None].append(pk)
    for siblings in children.values():
        # Forks keep the order they had (old tree, then position in it; pk last).
        siblings.sort(key=lambda pk: (rows[pk][1] or 0, rows[pk][2] or 0, pk))

    placed: dict[int, tuple[int | None, int, int, int, int]] = {}

    def place_tree(root: int, parent_id: int | None) -> None:
        counter = 1
        stack: list[tuple[int, int, bool]] = [(root, 0, False)]
        lefts: dict[int, int] = {}
        while stack:
            pk, level, done = stack.pop()
            if done:
                placed[pk] = (parent_id if pk == root else rows[pk][0], root, lefts[pk], counter, level)
                counter += 1
                continue
            lefts[pk] = counter
            counter += 1
            stack.append((pk, level, True))
            for child in reversed(children.get(pk, [])):
                if child not in placed and child not in lefts:
                    stack.append((child, level + 1, False))

    for root in list(children[None]):
        place_tree(root, None)
    # A cycle of parent links (never written by this project) cannot hang
    # from a root: its smallest pk becomes one, losing only that link.
    for pk in sorted(rows):
        if pk not in placed:
            place_tree(pk, None)

    changed = [
        session_model(pk=pk, parent_id=values[0], tree_id=values[1], lft=values[2], rght=values[3], level=values[4])
        for pk, values in placed.items()
        if values != rows[pk]
    ]
    for start in range(0, len(changed), BATCH):
        manager.bulk_update(changed[start : start + BATCH], ["parent_id", "tree_id", "lft", "rght", "level"])


class KeyEntriesBySessionId(migrations.AlterField):
    """``AgentSessionEntry.session`` from the session row's pk to its
    ``session_id``, the stored values converted (Django's ``AlterField``
    would keep the old values and, on MySQL/MariaDB, the table's collation)."""

    def __init__(self) -> None:
        super().__init__(
            model_name="agentsessionentry",
            name="session",
            field=models.ForeignKey(
                db_column="session_id",
                on_delete=django.db.models.deletion.CASCADE,
                related_name="entries",
                to="sessiontree.agentsession",
                to_field="session_id",
            ),
        )

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return self.__class__.__name__, [], {}

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._convert(app_label, schema_editor, from_state, to_state, to_key="session_id", from_key="id")

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._convert(app_label, schema_editor, from_state, to_state, to_key="id", from_key="session_id")

    def _convert(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any, *, to_key: str, from_key: str
    ) -> None:
        entries = from_state.apps.get_model(app_label, "AgentSessionEntry")
        sessions = from_state.apps.get_model(app_label, "AgentSession")
        table, session_table = entries._meta.db_table, sessions._meta.db_table
        q = schema_editor.quote_name
        if schema_editor.connection.vendor == "mysql":
            _mysql_rekey(schema_editor, table, session_table, to_key=to_key, from_key=from_key)
            return
        # Elsewhere: the values first (SQLite stores any type in any column),
        # then Django rebuilds the table with the column's new type and key.
        schema_editor.execute(
            f"UPDATE {q(table)} SET {q('session_id')} = (SELECT s.{q(to_key)} FROM {q(session_table)} s "
            f"WHERE s.{q(from_key)} = {q(table)}.{q('session_id')})"
        )
        if to_key == "session_id":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            super().database_backwards(app_label, schema_editor, from_state, to_state)


def _mysql_rekey(schema_editor: Any, table: str, session_table: str, *, to_key: str, from_key: str) -> None:
    """The entry table's ``session_id`` column from the session's ``from_key`` to its
    ``to_key``, keeping the names of its foreign key, unique constraints and indexes."""
    connection = schema_editor.connection
    q = schema_editor.quote_name
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    on_session = {name: info for name, info in constraints.items() if "session_id" in info["columns"]}
    foreign_keys = [name for name, info in on_session.items() if info["foreign_key"]]
    indexes = [
        (name, info["columns"], info["unique"])
        for name, info in on_session.items()
        if not info["foreign_key"] and not info["primary_key"] and (info["index"] or info["unique"])
    ]
    if to_key == "session_id":
        column_type = f"varchar(64) CHARACTER SET utf8mb4 COLLATE {_exact_ids.exact_collation(connection)}"
    else:
        column_type = "bigint"
    schema_editor.execute(f"ALTER TABLE {q(table)} ADD COLUMN {q('session_key')} {column_type} NULL")
    schema_editor.execute(
        f"UPDATE {q(table)} e JOIN {q(session_table)} s ON s.{q(from_key)} = e.{q('session_id')} "
        f"SET e.{q('session_key')} = s.{q(to_key)}"
    )
    for name in foreign_keys:
        schema_editor.execute(f"ALTER TABLE {q(table)} DROP FOREIGN KEY {q(name)}")
    drops = [*(f"DROP INDEX {q(name)}" for name, _columns, _unique in indexes), f"DROP COLUMN {q('session_id')}"]
    schema_editor.execute(f"ALTER TABLE {q(table)} {', '.join(drops)}")
    adds = [f"CHANGE {q('session_key')} {q('session_id')} {column_type} NOT NULL"]
    for name, columns, unique in indexes:
        listed = ", ".join(q(column) for column in columns)
        adds.append(f"ADD CONSTRAINT {q(name)} UNIQUE ({listed})" if unique else f"ADD INDEX {q(name)} ({listed})")
    for name in foreign_keys:
        adds.append(
            f"ADD CONSTRAINT {q(name)} FOREIGN KEY ({q('session_id')}) REFERENCES {q(session_table)} ({q(to_key)})"
        )
    schema_editor.execute(f"ALTER TABLE {q(table)} {', '.join(adds)}")


class Migration(migrations.Migration):
    dependencies = [
        ("sessiontree", "0013_idempotency_records"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agentsession",
            name="tree_id",
            field=models.PositiveBigIntegerField(db_index=True, editable=False),
        ),
        migrations.RunPython(rebuild_lineage, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel(
            name="LineageLock",
        ),
        KeyEntriesBySessionId(),
    ]
