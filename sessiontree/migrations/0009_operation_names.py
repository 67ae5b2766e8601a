"""Audit operations renamed to one shape, ``<verb>_<object>``
(``sessiontree.services.operations``): records written by earlier releases
take the new names, so one filter finds an operation whenever it was done."""

from django.db import migrations

RENAMED = {
    "navigate": "navigate_tree",
    "fork": "fork_session",
    "compact": "compact_session",
    "export": "export_session",
}


def forward(apps, schema_editor):
    AuditRecord = apps.get_model("sessiontree", "AuditRecord")
    for old, new in RENAMED.items():
        AuditRecord.objects.filter(operation=old).update(operation=new)


def backward(apps, schema_editor):
    AuditRecord = apps.get_model("sessiontree", "AuditRecord")
    for old, new in RENAMED.items():
        AuditRecord.objects.filter(operation=new).update(operation=old)


class Migration(migrations.Migration):
    dependencies = [("sessiontree", "0008_exact_ids")]

    operations = [migrations.RunPython(forward, backward)]
