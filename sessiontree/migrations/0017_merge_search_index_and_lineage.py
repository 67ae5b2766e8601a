"""0014 (the search index, issue 21) and 0016 (lineage keyed by roots,
issue 24) both follow 0013 and touch different tables: either order works."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sessiontree", "0014_search_index"),
        ("sessiontree", "0016_lineage_and_entry_session_key"),
    ]

    operations: list[migrations.operations.base.Operation] = []
