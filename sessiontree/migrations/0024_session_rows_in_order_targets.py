"""``AgentSession.rows_in_order`` says too that every label and context edit
of the session was stored after the entry it aims at (issue 23): a tree
window then finds the labels aimed at its line among the rows it read
around it. A session marked by 0023 with an entry aimed at one stored after
it (or at none) is marked out of order."""

from typing import Any

from django.db import migrations


def unmark_sessions_aiming_forward(apps: Any, schema_editor: Any) -> None:
    Session = apps.get_model("sessiontree", "AgentSession")
    Entry = apps.get_model("sessiontree", "AgentSessionEntry")
    q = schema_editor.quote_name
    sessions, entries = q(Session._meta.db_table), q(Entry._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {sessions} SET {q('rows_in_order')} = %s WHERE {q('rows_in_order')} = %s "
            f"AND {q('session_id')} IN (SELECT l.{q('session_id')} FROM {entries} l LEFT JOIN {entries} t "
            f"ON t.{q('session_id')} = l.{q('session_id')} AND t.{q('entry_id')} = l.{q('target_entry_id')} "
            f"WHERE l.{q('target_entry_id')} IS NOT NULL "
            f"AND (t.{q('entry_id')} IS NULL OR t.{q('entry_seq')} > l.{q('entry_seq')}))",
            [False, True],
        )


class Migration(migrations.Migration):
    dependencies = [
        ("sessiontree", "0023_session_rows_in_order"),
    ]

    operations = [migrations.RunPython(unmark_sessions_aiming_forward, migrations.RunPython.noop)]
