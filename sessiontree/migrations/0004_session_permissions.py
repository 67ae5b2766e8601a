from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("sessiontree", "0003_tree_stats_and_audit")]

    operations = [
        migrations.AlterModelOptions(
            name="agentsession",
            options={
                "ordering": ["-created_at"],
                "permissions": [
                    (
                        "moderate_session",
                        "Can moderate sessions (move the leaf, label, fork, compact, archive, delete)",
                    ),
                    ("hard_delete_session", "Can delete sessions and their entries for good"),
                ],
            },
        ),
    ]
