"""Erase a person's data, for a data subject's erasure request.

    manage.py erase_user_data USER [--dry-run] [--json]

Every session whose ``user_id`` is USER is hard-deleted on every provider
(files and backups too); copies of its entries in other people's forks are
erased in place and listed; the flags USER opened keep no note, audit
records keep ids, never content (docs/data-protection.md). A legal hold on
any session it would touch refuses it (exit 4), and nothing changes.
``--dry-run`` prints the same list and changes nothing. One line per
session, copy and file, then one summary line (``--json``: the report).
Running it again after a crash finishes it.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandParser

from sessiontree.management.base import SessionTreeCommand
from sessiontree.services import protection


def summary_line(report: dict[str, Any]) -> str:
    counts = report["counts"]
    verb = "would erase" if report["dry_run"] else "erased"
    rows = sum(value for name, value in counts.items() if name.startswith("rows_"))
    return (
        f"user {report['user_id']}: {verb} {counts['sessions']} session(s) ({counts['entries']} entries), "
        f"{counts['copies']} copy/copies in other people's sessions, {counts['files']} file(s), {rows} row(s)"
    )


class Command(SessionTreeCommand):
    help = "Erase a person's data: their sessions hard-deleted, copies in others' forks erased (data protection)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("user", help="the user (a session's user_id, an account's username)")
        parser.add_argument("--dry-run", action="store_true", help="change nothing; list what would be touched")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        with self.progress_bars(unit="session", enabled=not as_json) as progress:
            report = protection.erase_user_data(
                user_id=options["user"],
                dry_run=options["dry_run"],
                progress=progress,
                actor=self.actor,
                channel=self.channel,
            )
        if as_json:
            self.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
            return
        verb = "would" if report["dry_run"] else ""
        for session in report["sessions"]:
            self.stdout.write(f"{verb or 'deleted'}{' delete' if verb else ''} session {session['session_id']}")
        for place in report["copies"]:
            self.stdout.write(
                f"{verb or 'erased'}{' erase' if verb else ''} {place['kind']} {place['entry_id']} "
                f"in session {place['session_id']}"
            )
        for path in report["files"]["deleted"]:
            self.stdout.write(f"{verb or 'deleted'}{' delete' if verb else ''} file {path}")
        for path in report["files"]["rewritten"]:
            self.stdout.write(f"{verb or 'rewrote'}{' rewrite' if verb else ''} file {path}")
        for name, ids in report["rows"].items():
            if ids:
                self.stdout.write(f"{name}: {', '.join(str(pk) for pk in ids)}")
        for path in report["outside"]:
            self.stdout.write(f"outside the store, still holding copies: {path}")
        self.stdout.write(summary_line(report))
