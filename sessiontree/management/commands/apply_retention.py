"""Delete sessions kept longer than their retention period (for cron).

    manage.py apply_retention [--dry-run] [--json] [--batch-size N]

A session's period is its agent's ``retention_days``, else
``SESSIONTREE_RETENTION_DAYS`` (unset: kept). Sessions idle longer than their
period are hard-deleted with their files, one whole session at a time; held
sessions, sessions with open moderation flags and parents of forks still
inside their own period are skipped and counted. ``--dry-run`` prints the
same report and deletes nothing. One summary line (``--json``: the report);
exit 0, or the category's exit code when a deletion failed.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.management.base import SessionTreeCommand, one_line
from sessiontree.services import protection


class Command(SessionTreeCommand):
    help = "Hard-delete sessions idle longer than their retention period (Agent.retention_days, SESSIONTREE_RETENTION_DAYS)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="delete nothing; list what would be deleted")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument(
            "--batch-size", type=int, default=protection.RETENTION_BATCH, help="sessions checked per batch"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        with self.progress_bars(unit="session", enabled=not as_json) as progress:
            report = protection.apply_retention(
                dry_run=options["dry_run"],
                batch_size=options["batch_size"],
                progress=progress,
                actor=self.actor,
                channel=self.channel,
            )
        if as_json:
            self.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        else:
            if options["verbosity"] >= 2:
                verb = "would delete" if report["dry_run"] else "deleted"
                for session_id in report["deleted"]:
                    self.stdout.write(f"{verb} {session_id}")
                for reason, ids in report["skipped"].items():
                    for session_id in ids:
                        self.stdout.write(f"skipped {session_id}: {reason}")
            self.stdout.write(protection.summary_line(report))
        for failure in report["failed"]:
            self.stderr.write(f"failed {failure['session_id']}: {failure['code']}: {one_line(failure['message'])}")
        if report["failed"]:
            first = report["failed"][0]
            raise CommandError(
                one_line(f"{len(report['failed'])} session(s) failed; first: {first['session_id']}: {first['code']}"),
                returncode=int(first["exit_code"]),
            )
