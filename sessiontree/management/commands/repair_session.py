"""Repair what is safe to repair in one session, plan first.

    manage.py repair_session ID (--dry-run | --apply) [--json]

Safe repairs: a torn last line of a file session is cut after the file is
copied to ``<file>.torn-<time>.bak``; the meta row's counts, root and leaf
are recomputed from the entries. Orphans and every other problem are listed
and left alone. Exit 0 when nothing is left for an operator, 5 when
something is (the plan says what), other codes for errors.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.management.base import EXIT_CORRUPT, SessionTreeCommand, one_line
from sessiontree.services.repair import repair_session


class Command(SessionTreeCommand):
    help = "Plan, and with --apply make, the safe repairs of a session (torn last line, meta row)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_id", help="the session to repair")
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        mode.add_argument("--apply", action="store_true", help="print the plan, then carry it out")
        parser.add_argument("--json", action="store_true", help="print the plan (and what was done) as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        session_id = options["session_id"]
        plan = repair_session(session_id=session_id, actor=self.actor, channel=self.channel, apply=options["apply"])
        if options["json"]:
            self.stdout.write(orjson.dumps(plan.as_dict(), option=orjson.OPT_INDENT_2).decode())
        else:
            self.stdout.write(f"Plan for session {session_id}:")
            if not plan.steps and not plan.unrepaired:
                self.stdout.write("  nothing to repair")
            for step in plan.steps:
                self.stdout.write(f"  repair: {one_line(step.description)}")
            for problem in plan.unrepaired:
                self.stdout.write(f"  left for an operator: {problem.code}: {one_line(problem.message)}")
            if plan.applied:
                done = sum(1 for step in plan.steps if step.done)
                backup = f"; backup {plan.backup}" if plan.backup else ""
                self.stdout.write(f"Applied {done} repair(s){backup}.")
            elif plan.steps:
                self.stdout.write("Dry run: nothing changed (use --apply).")
        if plan.unrepaired:
            raise CommandError(
                f"corrupt_session_tree: {len(plan.unrepaired)} problem(s) of session {session_id} need an operator",
                returncode=EXIT_CORRUPT,
            )
