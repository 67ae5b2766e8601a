"""Provider kinds from the registry, and a preview of each session's first
user message on its meta row.

- The ``provider`` columns take their choices from
  ``sessiontree.providers.factory.provider_choices`` (the
  ``SESSIONTREE_PROVIDERS`` registry) instead of a list: a storage added to
  the registry needs no model change. Choices and Python-side defaults are
  not stored in the database, so this changes no table.
- ``AgentSession.first_message_preview`` lets the session list show untitled
  sessions by their first user message whichever storage holds the entries.
  Existing rows are filled where that is cheap: for entries in the database,
  one query; for a session file, its first lines up to the first user
  message (at most 1 MiB of it; a file that cannot be read is left alone).
"""

import json
from pathlib import Path

from django.conf import settings
from django.db import migrations, models
from django.db.models import OuterRef, Subquery

import sessiontree.providers.factory
from sessiontree.core.entries import first_message_preview

HEAD_BYTES = 1024 * 1024
BATCH = 500


def _preview_from_file(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    for line in head.split(b"\n"):
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # blank, malformed or cut at the 1 MiB mark
        if isinstance(obj, dict):
            preview = first_message_preview([obj])
            if preview is not None:
                return preview
    return None


def backfill(apps, schema_editor):
    AgentSession = apps.get_model("sessiontree", "AgentSession")
    AgentSessionEntry = apps.get_model("sessiontree", "AgentSessionEntry")
    first_user_message = (
        AgentSessionEntry.objects.filter(session=OuterRef("pk"), type="message", message__role="user")
        .order_by("entry_seq")
        .values("message")[:1]
    )
    root = Path(getattr(settings, "SESSIONTREE_FILE_ROOT", "") or ".")
    rows = (
        AgentSession.objects.filter(first_message_preview__isnull=True)
        .annotate(first_user_message=Subquery(first_user_message))
        .only("pk", "session_id", "session_file")
    )
    changed = []
    for row in rows.iterator(chunk_size=BATCH):
        message = row.first_user_message
        if message is not None:
            if isinstance(message, str):
                message = json.loads(message)
            preview = first_message_preview([{"type": "message", "message": message}])
        else:
            path = Path(row.session_file) if row.session_file else root / f"{row.session_id}.jsonl"
            preview = _preview_from_file(path)
        if preview is not None:
            row.first_message_preview = preview
            changed.append(row)
        if len(changed) >= BATCH:
            AgentSession.objects.bulk_update(changed, ["first_message_preview"])
            changed = []
    if changed:
        AgentSession.objects.bulk_update(changed, ["first_message_preview"])


class Migration(migrations.Migration):
    dependencies = [("sessiontree", "0011_legal_hold_and_retention")]

    operations = [
        migrations.AddField(
            model_name="agentsession",
            name="first_message_preview",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AlterField(
            model_name="agent",
            name="session_provider",
            field=models.CharField(
                blank=True,
                choices=sessiontree.providers.factory.provider_choices,
                default="",
                help_text=(
                    "Storage of this agent's session trees: a JSONL file per session, or database tables. "
                    "Empty: SESSIONTREE_DEFAULT_PROVIDER."
                ),
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="agentsession",
            name="provider",
            field=models.CharField(
                choices=sessiontree.providers.factory.provider_choices,
                db_index=True,
                default=sessiontree.providers.factory.default_provider_kind,
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="syncedfile",
            name="provider",
            field=models.CharField(choices=sessiontree.providers.factory.provider_choices, max_length=16),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
