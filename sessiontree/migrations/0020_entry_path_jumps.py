"""Each entry row's jump (issue 23; core/path_facts.py): an ancestor and its
depth, chosen as in Myers' skew-binary lists, so the ancestor of an entry at
any depth is found in O(log depth) steps and whether an entry lies on a path
is decided by key. Existing rows are filled from their session's entries in
append order, one session at a time (as 0018 filled the other facts)."""

from importlib import import_module
from typing import Any

from django.db import migrations, models

from sessiontree.core.path_facts import facts_in_order

BATCH = 1000
# Compared with entry_id: byte for byte as every id column (0008).
EXACT_COLUMNS = {"AgentSessionEntry": ("path_jump_id",)}
_exact_ids = import_module("sessiontree.migrations.0008_exact_ids")
_facts = import_module("sessiontree.migrations.0018_entry_path_facts")


def exact_ids(apps: Any, schema_editor: Any) -> None:
    _exact_ids.set_collations(apps, schema_editor, exact=True, columns_of=EXACT_COLUMNS)


def fill_jumps(apps: Any, schema_editor: Any) -> None:
    Entry = apps.get_model("sessiontree", "AgentSessionEntry")
    db = schema_editor.connection.alias
    sessions = Entry.objects.using(db).values_list("session_id", flat=True).distinct().order_by()
    for session_id in list(sessions):
        rows = list(
            Entry.objects.using(db)
            .filter(session_id=session_id)
            .order_by("entry_seq")
            .values_list("pk", "entry_id", "parent_entry_id", "type", "message", "thinking_level", "extra")
        )
        entries = [_facts._entry(*row[1:]) for row in rows]
        updates = [
            Entry(pk=pk, path_jump_id=facts.jump_id, path_jump_depth=facts.jump_depth)
            for (pk, *_rest), facts in zip(rows, facts_in_order(entries), strict=True)
        ]
        Entry.objects.using(db).bulk_update(updates, ["path_jump_id", "path_jump_depth"], batch_size=BATCH)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("sessiontree", "0019_entry_tool_name")]

    operations = [
        migrations.AddField(
            model_name="agentsessionentry",
            name="path_jump_depth",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="agentsessionentry",
            name="path_jump_id",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.RunPython(exact_ids, migrations.RunPython.noop, atomic=False, elidable=False),
        migrations.RunPython(fill_jumps, migrations.RunPython.noop),
    ]
