"""The mysql storage's leaf cache on the session row (depth, in flight,
children), so locking a session is one plain read. Existing rows start
uncached (``leaf_depth`` NULL): their next write reads the leaf's row."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sessiontree", "0006_synced_files")]

    operations = [
        migrations.AddField(
            model_name="agentsession",
            name="leaf_depth",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="leaf_has_children",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="leaf_in_flight",
            field=models.BooleanField(default=False),
        ),
    ]
