"""``AgentSession.rows_in_order`` (issue 23): whether every entry row of a
``mysql`` session was stored after its parent, so that a tree window reads
the children of its line from the rows appended after it in one range
instead of probing ``entry_parent_idx`` once per entry.

Existing ``mysql`` sessions get it when none of their rows has inexact path
facts (``path_exact``, filled for every row by 0018: a row stored before its
parent is not exact); the others, and every ``file`` session, keep False
(their children are read by key, as before)."""

from typing import Any

from django.db import migrations, models


def mark_sessions_in_order(apps: Any, schema_editor: Any) -> None:
    Session = apps.get_model("sessiontree", "AgentSession")
    Entry = apps.get_model("sessiontree", "AgentSessionEntry")
    db = schema_editor.connection.alias
    inexact = Entry.objects.using(db).filter(path_exact=False).values("session_id")
    Session.objects.using(db).filter(provider="mysql").exclude(session_id__in=inexact).update(rows_in_order=True)


class Migration(migrations.Migration):
    dependencies = [
        ("sessiontree", "0022_entry_type_seq_idx"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentsession",
            name="rows_in_order",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunPython(mark_sessions_in_order, migrations.RunPython.noop),
    ]
