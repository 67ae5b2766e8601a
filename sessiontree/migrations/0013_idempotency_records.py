"""Idempotency records: a write made with a key, and what it answered; the key
columns compare byte for byte on MySQL/MariaDB as every id column does."""


from importlib import import_module

from django.db import migrations, models

EXACT_COLUMNS = {"IdempotencyRecord": ("scope", "key", "session_id")}
_exact_ids = import_module("sessiontree.migrations.0008_exact_ids")


def forwards(apps, schema_editor):
    _exact_ids.set_collations(apps, schema_editor, exact=True, columns_of=EXACT_COLUMNS)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('sessiontree', '0012_first_message_preview'),
    ]

    operations = [
        migrations.CreateModel(
            name='IdempotencyRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(max_length=200)),
                ('key', models.CharField(max_length=255)),
                ('operation', models.CharField(max_length=64)),
                ('fingerprint', models.CharField(max_length=64)),
                ('session_id', models.CharField(blank=True, default='', max_length=64)),
                ('result', models.JSONField(blank=True, null=True)),
                ('created_at', models.DateTimeField(db_index=True)),
            ],
            options={
                'db_table': 'neta_idempotency_record',
                'constraints': [models.UniqueConstraint(fields=('scope', 'key'), name='idempotency_scope_key')],
            },
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop, atomic=False, elidable=False),
    ]
