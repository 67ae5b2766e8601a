"""Path facts on every entry row (issue 23; core/path_facts.py): the
nearest compaction, model and thinking entries on the entry's path and
whether they are exact, so the context at a leaf reads only the rows it
needs. Existing rows are filled from their session's entries in append
order, one session at a time."""

from importlib import import_module
from typing import Any

from django.db import migrations, models

from sessiontree.core.path_facts import facts_in_order

BATCH = 1000
# They hold ids, compared with entry_id: byte for byte as every id column (0008).
EXACT_COLUMNS = {"AgentSessionEntry": ("path_compaction_id", "path_model_id", "path_thinking_id")}
_exact_ids = import_module("sessiontree.migrations.0008_exact_ids")


def exact_ids(apps: Any, schema_editor: Any) -> None:
    _exact_ids.set_collations(apps, schema_editor, exact=True, columns_of=EXACT_COLUMNS)


def _entry(entry_id: str, parent_id: Any, kind: str, message: Any, thinking_level: Any, extra: Any) -> dict[str, Any]:
    """What the facts read of a row (JSON columns come decoded): its id,
    parent, type, message and whether it names a thinking level."""
    extra = extra if isinstance(extra, dict) else {}
    fields = extra.get("fields") or {}
    keys = extra.get("keys")
    entry: dict[str, Any] = {"id": entry_id, "parentId": parent_id, "type": fields.get("type", kind)}
    entry["message"] = fields["message"] if "message" in fields else message
    if (keys is not None and "thinkingLevel" in keys) or (keys is None and thinking_level is not None):
        entry["thinkingLevel"] = fields.get("thinkingLevel", thinking_level)
    return entry


def fill_facts(apps: Any, schema_editor: Any) -> None:
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
        entries = [_entry(*row[1:]) for row in rows]
        updates = []
        for (pk, *_rest), facts in zip(rows, facts_in_order(entries), strict=True):
            updates.append(
                Entry(
                    pk=pk,
                    path_compaction_id=facts.compaction_id,
                    path_model_id=facts.model_id,
                    path_thinking_id=facts.thinking_id,
                    path_exact=facts.exact,
                )
            )
        Entry.objects.using(db).bulk_update(
            updates, ["path_compaction_id", "path_model_id", "path_thinking_id", "path_exact"], batch_size=BATCH
        )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("sessiontree", "0017_merge_search_index_and_lineage")]

    operations = [
        migrations.AddField(
            model_name="agentsessionentry",
            name="path_compaction_id",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="agentsessionentry",
            name="path_model_id",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="agentsessionentry",
            name="path_thinking_id",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="agentsessionentry",
            name="path_exact",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunPython(exact_ids, migrations.RunPython.noop, atomic=False, elidable=False),
        migrations.RunPython(fill_facts, migrations.RunPython.noop),
    ]
