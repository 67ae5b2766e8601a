"""Run the moderation classifiers over entries stored since the last run.

    manage.py moderate_sessions [--classifier NAME ...] [--dry-run] [--json]
                                [--limit N] [--batch-size N] [--restart]

Each classifier (``SESSIONTREE_MODERATION_CLASSIFIERS``, or those named with
``--classifier``: ``pii``, ``openai_moderation`` or a dotted path) reads the
text of the entries indexed since its cursor and opens a flag (source
``classifier:<name>``, audited ``flag_entry``) for each finding, unless the
entry has an open flag of that category from that classifier already. A
re-run scans nothing twice. ``--dry-run`` classifies and counts, opens
nothing and moves no cursor; ``--restart`` scans from the first entry again;
``--limit`` caps the entries per classifier in this run. A progress bar on a
terminal; one summary line (``--json``: the report). Exit 0; 7 when a
classifier's back end failed (the batches before it are kept), 4 when
another run is scanning with the same classifier.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.management.base import SessionTreeCommand, one_line
from sessiontree.services import classification


class Command(SessionTreeCommand):
    help = "Run the moderation classifiers over new entries (incremental) and open flags for what they find."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--classifier",
            action="append",
            dest="classifiers",
            metavar="NAME",
            help="run this classifier (repeatable; default SESSIONTREE_MODERATION_CLASSIFIERS)",
        )
        parser.add_argument("--dry-run", action="store_true", help="classify and count; open no flag, move no cursor")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--limit", type=int, help="at most this many entries per classifier in this run")
        parser.add_argument(
            "--batch-size", type=int, default=classification.DEFAULT_BATCH, help="entries classified at once"
        )
        parser.add_argument("--restart", action="store_true", help="scan from the first entry again")

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        with self.progress_bars(unit="entry", enabled=not as_json) as progress:
            report = classification.scan_entries(
                classifiers=options["classifiers"],
                dry_run=options["dry_run"],
                limit=options["limit"],
                batch_size=options["batch_size"],
                restart=options["restart"],
                progress=lambda name, total: progress(total, desc=name),
                actor=self.actor,
                channel=self.channel,
            )
        if as_json:
            self.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        else:
            self.stdout.write(classification.summary_line(report))
        failed = [scan for scan in report["classifiers"] if scan["error"] is not None]
        for scan in failed:
            error = scan["error"] or {}
            self.stderr.write(f"{scan['classifier']} stopped: {error.get('code')}: {one_line(error.get('message'))}")
        if failed:
            first = failed[0]["error"] or {}
            raise CommandError(
                one_line(f"{failed[0]['classifier']}: {first.get('code')}: {first.get('message')}"),
                returncode=int(first.get("exit_code", 1)),
            )
