"""Build the search index for sessions stored before it existed (and check it).

    manage.py build_search_index [SESSION ...] [--provider KIND] [--dry-run] [--json] [--optimize]

The write path keeps the index of every new entry; this command makes it
hold exactly what each session stores: rows added for older entries,
changed ones replaced, rows of entries or sessions that are gone removed.
Each session is done under its write lock. Idempotent (a second run
changes nothing), ``--dry-run`` counts and writes nothing, a progress bar
on a terminal, one summary line (``--json``: the report). ``--optimize``
then merges the full-text index so deleted text leaves the engine's own
structures too (FTS5 ``optimize``; ``OPTIMIZE TABLE`` on MySQL/MariaDB, a
table copy: appends wait meanwhile). Exit 0, or the category's exit code
of the first session that failed.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.management.base import SessionTreeCommand, one_line
from sessiontree.services import search


class Command(SessionTreeCommand):
    help = "Build (or check, with --dry-run) the search index of stored sessions; idempotent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_ids", nargs="*", metavar="SESSION", help="only these sessions (default: all)")
        parser.add_argument("--provider", help="only the sessions of this provider kind")
        parser.add_argument("--dry-run", action="store_true", help="count what would change; write nothing")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument(
            "--optimize", action="store_true", help="then merge the full-text index (deleted text leaves it)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        with self.progress_bars(unit="session", enabled=not as_json) as progress:
            report = search.build_search_index(
                session_ids=options["session_ids"] or None,
                provider=options["provider"],
                dry_run=options["dry_run"],
                progress=progress,
            )
        optimized = None
        if options["optimize"] and not options["dry_run"]:
            optimized = search.optimize_search_index()
        if as_json:
            self.stdout.write(orjson.dumps({**report, "optimized": optimized}, option=orjson.OPT_INDENT_2).decode())
        else:
            self.stdout.write(search.index_summary_line(report) + (f"; {optimized}" if optimized else ""))
        for failure in report["failed"]:
            self.stderr.write(f"failed {failure['session_id']}: {failure['code']}: {one_line(failure['message'])}")
        if report["failed"]:
            first = report["failed"][0]
            raise CommandError(
                one_line(f"{len(report['failed'])} session(s) failed; first: {first['session_id']}: {first['code']}"),
                returncode=int(first["exit_code"]),
            )
