"""The kernel plan's table names: ``neta_agent_session`` and
``neta_agent_session_entry`` (a rename; rows, indexes and constraints stay)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("sessiontree", "0004_session_permissions")]

    operations = [
        migrations.AlterModelTable(name="agentsession", table="neta_agent_session"),
        migrations.AlterModelTable(name="agentsessionentry", table="neta_agent_session_entry"),
    ]
