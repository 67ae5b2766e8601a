"""Tree stats on the session row; audit records of the operations layer.

Existing audit rows are kept: the user link moves to ``user``, ``actor``
becomes that user's username (``system`` when none), ``action`` becomes
``operation``, ``entry_id`` becomes the one-item ``entry_ids`` list, and the
old ``command`` channel is now ``cli``. Branch and compaction counts of
``mysql`` sessions are counted here; a ``file`` session's are read from its
file, and stored in its row by its next write (or ``sync_sessions``).
An agent without an explicit provider now follows SESSIONTREE_DEFAULT_PROVIDER.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def forwards(apps, schema_editor):
    AuditRecord = apps.get_model("sessiontree", "AuditRecord")
    for record in AuditRecord.objects.select_related("user").iterator():
        record.actor = record.user.get_username() if record.user_id else "system"
        record.entry_ids = [record.entry_id] if record.entry_id else []
        if record.channel == "command":
            record.channel = "cli"
        record.save(update_fields=["actor", "entry_ids", "channel"])
    AgentSession = apps.get_model("sessiontree", "AgentSession")
    AgentSessionEntry = apps.get_model("sessiontree", "AgentSessionEntry")
    for session in AgentSession.objects.filter(provider="mysql").iterator():
        entries = AgentSessionEntry.objects.filter(session_id=session.pk)
        ids = set(entries.values_list("entry_id", flat=True))
        parents = set(entries.exclude(parent_entry_id=None).values_list("parent_entry_id", flat=True)) & ids
        session.branch_count = len(ids) - len(parents)
        session.compaction_count = entries.filter(type="compaction").count()
        session.save(update_fields=["branch_count", "compaction_count"])


def backwards(apps, schema_editor):
    AuditRecord = apps.get_model("sessiontree", "AuditRecord")
    for record in AuditRecord.objects.iterator():
        record.entry_id = record.entry_ids[0] if record.entry_ids else None
        record.save(update_fields=["entry_id"])


class Migration(migrations.Migration):
    dependencies = [
        ("sessiontree", "0002_entry_skeleton_index"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="agent",
            name="session_provider",
            field=models.CharField(
                blank=True,
                choices=[("file", "file"), ("mysql", "mysql")],
                default="",
                help_text=(
                    "Storage of this agent's session trees: a JSONL file per session, or database tables. "
                    "Empty: SESSIONTREE_DEFAULT_PROVIDER."
                ),
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="branch_count",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="compaction_count",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RenameField(model_name="auditrecord", old_name="actor", new_name="user"),
        migrations.AlterField(
            model_name="auditrecord",
            name="user",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="audit_records",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="actor",
            field=models.CharField(db_index=True, default="system", max_length=191),
            preserve_default=False,
        ),
        migrations.RenameField(model_name="auditrecord", old_name="action", new_name="operation"),
        migrations.AlterField(
            model_name="auditrecord",
            name="operation",
            field=models.CharField(db_index=True, max_length=64),
        ),
        migrations.RenameField(model_name="auditrecord", old_name="details", new_name="detail"),
        migrations.AddField(
            model_name="auditrecord",
            name="entry_ids",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="leaf_before",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="leaf_after",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AlterField(
            model_name="auditrecord",
            name="channel",
            field=models.CharField(
                choices=[
                    ("admin", "Admin"),
                    ("api", "Api"),
                    ("cli", "Cli"),
                    ("sync", "Sync"),
                    ("internal", "Internal"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveField(model_name="auditrecord", name="entry_id"),
        migrations.AlterModelOptions(name="auditrecord", options={"ordering": ["-created_at", "-id"]}),
        migrations.AddIndex(
            model_name="auditrecord",
            index=models.Index(fields=["session_id", "-created_at"], name="audit_session_time_idx"),
        ),
    ]
