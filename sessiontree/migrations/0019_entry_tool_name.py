"""A message's ``toolName`` as a generated column with an index (issue 23):
the results of one tool are read by key (``keyed_reads.tool_results``; the
roleplay state of a session without roleplay entries reads no path). The
database computes it from ``message`` for existing and new rows alike
(virtual: nothing is stored but the index)."""

import django.db.models.fields.json
import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessiontree', '0018_entry_path_facts'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentsessionentry',
            name='tool_name',
            field=models.GeneratedField(db_persist=False, expression=django.db.models.functions.text.Left(django.db.models.fields.json.KeyTextTransform('toolName', 'message'), 64), output_field=models.CharField(blank=True, max_length=64, null=True)),
        ),
        migrations.AddIndex(
            model_name='agentsessionentry',
            index=models.Index(fields=['session', 'tool_name'], name='entry_tool_name_idx'),
        ),
    ]
