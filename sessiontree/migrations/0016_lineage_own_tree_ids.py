"""Lineage trees keyed by their roots' own primary keys; no global lineage lock.

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
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import migrations, models

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
    ]
