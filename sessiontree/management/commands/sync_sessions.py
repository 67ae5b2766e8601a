"""Sync a folder of Pi session files with the database.

    manage.py sync_sessions PATH [--mode index|import|export] [--provider mysql|file]
                                 [--dry-run] [--json] [--workers N]
                                 [--on-rewrite report|reimport] [--migrate]
                                 [--layout pi|flat] [--checksum]

Writes go through the operations layer as the ``sync`` actor on the ``sync``
channel. One summary line at the end (``--json``: the whole report); exit 0
unless a file failed (the exit code of the first failure's category, each
failure on its own line on stderr) or the folder is being synced by another
run (4, ``sync_busy``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.management.base import SessionTreeCommand, one_line
from sessiontree.providers.factory import provider_kinds
from sessiontree.sync.folder import LAYOUTS, MODES, ON_REWRITE, SyncOptions, sync_folder


class Command(SessionTreeCommand):
    help = (
        "Sync a folder of Pi JSONL session files with the database: index them in place as file sessions, "
        "import their entries (incrementally), or export database sessions into the folder."
    )
    channel = "sync"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="folder of Pi session files (searched recursively), or one file")
        parser.add_argument("--mode", choices=MODES, default="import", help="what to do (default: import)")
        parser.add_argument(
            "--provider",
            choices=provider_kinds(),
            default=None,
            help="import: where entries go (default mysql); export: only this provider's sessions; index: file",
        )
        parser.add_argument("--dry-run", action="store_true", help="change nothing; say what would be done")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--workers", type=int, default=1, help="files synced at once (threads, default 1)")
        parser.add_argument(
            "--on-rewrite",
            choices=ON_REWRITE,
            default="report",
            help="import: a file whose imported part changed is reported (default) or re-imported whole",
        )
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="index: let v1/v2 files be migrated to v3 in place (as Pi does), else they are skipped",
        )
        parser.add_argument(
            "--layout",
            choices=LAYOUTS,
            default="pi",
            help="export: Pi's --<cwd>--/<time>_<id>.jsonl folders (default) or flat <id>.jsonl",
        )
        parser.add_argument(
            "--checksum", action="store_true", help="re-read files even when their size and time did not change"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        sync_options = SyncOptions(
            mode=options["mode"],
            provider=options["provider"],
            dry_run=options["dry_run"],
            workers=options["workers"],
            on_rewrite=options["on_rewrite"],
            migrate=options["migrate"],
            layout=options["layout"],
            checksum=options["checksum"],
        )
        as_json = options["json"]
        unit = "file" if sync_options.mode != "export" else "session"
        with self.progress_bars(unit=unit, enabled=not as_json, empty=True) as progress:
            report = sync_folder(options["path"], sync_options, progress=progress)

        verbosity = options["verbosity"]
        if as_json:
            self.stdout.write(orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode())
        else:
            for result in report.results:
                if result.action == "skipped" and verbosity >= 2:
                    self.stdout.write(f"skipped {result.path}: {result.reason}")
                elif result.action in ("created", "updated") and verbosity >= 2:
                    would = "would be " if report.dry_run else ""
                    note = f" ({result.reason})" if result.reason else ""
                    self.stdout.write(f"{would}{result.action} {result.path}: {result.entries} entries{note}")
                if result.malformed_lines and verbosity >= 1:
                    self.stdout.write(f"{result.path}: {result.malformed_lines} malformed line(s) skipped")
            self.stdout.write(report.summary_line())
        for result in report.failed:
            self.stderr.write(f"failed {result.path}: {result.code}: {result.reason}")
        if report.failed:
            first = report.failed[0]
            raise CommandError(
                one_line(f"{len(report.failed)} file(s) failed; first: {first.path}: {first.reason}"),
                returncode=first.exit_code or 1,
            )
