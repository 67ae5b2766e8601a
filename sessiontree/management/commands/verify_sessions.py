"""Check stored session trees and report every problem, one line each.

    manage.py verify_sessions [--provider KIND] [--session ID] [--json]

Dangling parents, duplicate ids, cycles, a compaction's ``firstKeptEntryId``
off its path, labels of missing entries, tool results without their tool
call, a leaf not in the session, a torn last line, malformed lines, a meta
row whose counts or leaf disagree with the entries. Exit 0 when nothing is
wrong, 5 (corrupt) when anything is.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.management.base import EXIT_CORRUPT, SessionTreeCommand, one_line
from sessiontree.providers.factory import provider_kinds
from sessiontree.selectors.verify import session_ids, verify_session


class Command(SessionTreeCommand):
    help = "Check stored session trees (every provider) and report each problem on its own line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", choices=provider_kinds(), default=None, help="only this provider's sessions")
        parser.add_argument("--session", default=None, help="only this session")
        parser.add_argument("--json", action="store_true", help="print the reports as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        ids = [options["session"]] if options["session"] else session_ids(provider=options["provider"])
        checked = 0
        reports = []
        problems = 0
        for session_id in ids:
            report = verify_session(session_id)
            if options["provider"] and report.provider != options["provider"]:
                raise CommandError(
                    f"session_not_found: Session {session_id} is a {report.provider} session, not {options['provider']}",
                    returncode=3,
                )
            checked += 1
            problems += len(report.problems)
            if options["json"]:
                reports.append(report.as_dict())
                continue
            for problem in report.problems:
                self.stdout.write(f"{report.session_id}: {problem.code}: {one_line(problem.message)}")
        damaged = sum(1 for r in reports if r["problems"]) if options["json"] else None
        if options["json"]:
            self.stdout.write(
                orjson.dumps(
                    {"sessions": checked, "problems": problems, "damaged_sessions": damaged, "reports": reports},
                    option=orjson.OPT_INDENT_2,
                ).decode()
            )
        else:
            self.stdout.write(f"verified {checked} session(s): {problems} problem(s)")
        if problems:
            raise CommandError(f"corrupt_session_tree: {problems} problem(s) found", returncode=EXIT_CORRUPT)
