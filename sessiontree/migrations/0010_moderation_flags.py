"""Moderation flags (``ModerationFlag``), whose session and entry ids compare
byte for byte on MySQL/MariaDB as every other id column does (0008)."""

from importlib import import_module

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


EXACT_COLUMNS = {"ModerationFlag": ("session_id", "entry_id", "category", "source")}
_exact_ids = import_module("sessiontree.migrations.0008_exact_ids")


def forwards(apps, schema_editor):
    _exact_ids.set_collations(apps, schema_editor, exact=True, columns_of=EXACT_COLUMNS)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('sessiontree', '0009_operation_names'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ModerationFlag',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('session_id', models.CharField(db_index=True, max_length=64)),
                ('entry_id', models.CharField(max_length=64)),
                ('category', models.CharField(db_index=True, max_length=32)),
                ('note', models.TextField(blank=True, default='')),
                ('source', models.CharField(db_index=True, max_length=64)),
                ('status', models.CharField(choices=[('open', 'Open'), ('actioned', 'Actioned'), ('dismissed', 'Dismissed')], db_index=True, default='open', max_length=16)),
                ('opened_by', models.CharField(max_length=191)),
                ('opened_at', models.DateTimeField(db_index=True)),
                ('resolved_by', models.CharField(blank=True, default='', max_length=191)),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
                ('resolution_note', models.TextField(blank=True, default='')),
                ('opened_by_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('resolved_by_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'neta_moderation_flag',
                'ordering': ['opened_at', 'id'],
                'permissions': [('flag_entry', 'Can flag entries of any session for moderation'), ('resolve_flag', 'Can resolve moderation flags (action or dismiss them)'), ('erase_entry', 'Can erase entries in place, with every copy (irreversible)')],
                'indexes': [models.Index(fields=['status', 'opened_at'], name='flag_queue_idx'), models.Index(fields=['session_id', 'entry_id'], name='flag_entry_idx')],
            },
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop, atomic=False, elidable=False),
    ]
