"""An entry's key (``core/entry_keys.py``) as a column with an index (issue
23): entries that carry an id of their own (a roleplay commit) are read by
key (``keyed_reads.entries_with_key``) instead of by reading the path back
to them. The provider writes the key with every row from now on; the rows
stored before get theirs here, under the rules registered when the
migration runs (the apps' ``ready``: the roleplay app's commit ids). A rule
registered later keys the rows written after it; readers take a key as a
hint and fall back where it finds nothing (``core/entry_keys.py``)."""

from typing import Any

import orjson
from django.db import migrations, models

from sessiontree.core import entry_keys

BATCH = 1000


def _entry(entry_type: str, custom_type: Any, data: Any, message: Any) -> dict[str, Any]:
    """What a key rule reads of a stored row: its type, ``customType`` and ``data`` or ``message``."""

    def decoded(value: Any) -> Any:
        if value is None or not isinstance(value, (str, bytes)):
            return value
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None

    if entry_type == "custom":
        return {"type": entry_type, "customType": custom_type, "data": decoded(data)}
    return {"type": entry_type, "message": decoded(message)}


def key_stored_rows(apps: Any, schema_editor: Any) -> None:
    customs, tools = sorted(entry_keys.keyed_custom_types()), sorted(entry_keys.keyed_tool_names())
    if not customs and not tools:
        return
    Entry = apps.get_model("sessiontree", "AgentSessionEntry")
    q = schema_editor.quote_name
    table = q(Entry._meta.db_table)
    where = []
    params: list[Any] = []
    if customs:
        where.append(f"({q('type')} = 'custom' AND {q('custom_type')} IN ({', '.join(['%s'] * len(customs))}))")
        params += customs
    if tools:
        where.append(f"({q('type')} = 'message' AND {q('tool_name')} IN ({', '.join(['%s'] * len(tools))}))")
        params += [name[:64] for name in tools]
    last = 0
    with schema_editor.connection.cursor() as cursor:
        while True:
            cursor.execute(
                f"SELECT {q('id')}, {q('type')}, {q('custom_type')}, {q('data')}, {q('message')} FROM {table} "
                f"WHERE {q('id')} > %s AND ({' OR '.join(where)}) ORDER BY {q('id')} LIMIT {BATCH}",
                [last, *params],
            )
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            updates = [
                (key, row[0]) for row in rows if (key := entry_keys.entry_key(_entry(row[1], row[2], row[3], row[4])))
            ]
            if updates:
                cursor.executemany(f"UPDATE {table} SET {q('entry_key')} = %s WHERE {q('id')} = %s", updates)


class Migration(migrations.Migration):
    dependencies = [
        ("sessiontree", "0024_session_rows_in_order_targets"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentsessionentry",
            name="entry_key",
            field=models.CharField(blank=True, max_length=128, null=True),
        ),
        migrations.AddIndex(
            model_name="agentsessionentry",
            index=models.Index(fields=["session", "entry_key"], name="entry_key_idx"),
        ),
        migrations.RunPython(key_stored_rows, migrations.RunPython.noop),
    ]
