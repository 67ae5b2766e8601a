"""Export one session as Pi JSONL.

    manage.py export_session ID [--active-path [--leaf ENTRY] | --subtree ENTRY | --full]
                                [-o FILE [--dry-run] [--json]]

The whole tree by default. Every export starts with the session's header and
lists entries in append order, so Pi's loader opens it with the same context
at every exported entry. Without ``-o`` the lines go to stdout; with it the
file is written atomically (temporary file + rename) and never replaces a
file that holds entries the database lacks, or another session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.core.errors import BadInput
from sessiontree.management.base import EXIT_BAD_INPUT, SessionTreeCommand
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.selectors.export import export_jsonl
from sessiontree.sync.pi_files import check_replaceable, write_atomically


class Command(SessionTreeCommand):
    help = "Export a session (whole tree, active path or a subtree) as Pi JSONL to stdout or a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_id")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--full", action="store_true", help="every entry (the default)")
        scope.add_argument("--active-path", action="store_true", help="the root → leaf path only")
        scope.add_argument("--subtree", metavar="ENTRY", help="ENTRY, everything below it and the path above it")
        parser.add_argument("--leaf", metavar="ENTRY", help="with --active-path: the path to ENTRY, not the leaf")
        parser.add_argument("-o", "--output", type=Path, help="write to this file (atomically) instead of stdout")
        parser.add_argument("--dry-run", action="store_true", help="with -o: say what would be written, write nothing")
        parser.add_argument("--json", action="store_true", help="with -o: print what was written as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        session_id = options["session_id"]
        output: Path | None = options["output"]
        if output is None and (options["dry_run"] or options["json"]):
            raise CommandError(
                "bad_input: --dry-run and --json describe a written file; give -o FILE", returncode=EXIT_BAD_INPUT
            )
        if options["leaf"] and not options["active_path"]:
            raise CommandError("bad_input: --leaf goes with --active-path", returncode=EXIT_BAD_INPUT)
        if options["subtree"]:
            scope, entry_id = "subtree", options["subtree"]
        elif options["active_path"]:
            scope, entry_id = "active", options["leaf"]
        else:
            scope, entry_id = "full", None
        provider = get_provider_for_session(session_id)
        lines = list(export_jsonl(provider, session_id, scope=scope, entry_id=entry_id))
        data = b"".join(lines)
        if output is None:
            buffer = getattr(self.stdout, "buffer", None)  # bytes as they are on a real stdout
            if buffer is not None:
                buffer.write(data)
                buffer.flush()
            else:
                self.stdout.write(data.decode("utf-8"), ending="")
            return
        target = output.expanduser()
        existed = target.exists()
        if existed:
            if target.is_dir():
                raise BadInput(f"{target} is a folder")
            # Entries of the session outside the exported scope may stay out;
            # entries the database does not hold at all may not be lost.
            with provider.read(session_id) as view:
                ids = set(view.parents())
            check_replaceable(target.read_bytes(), session_id, ids)
        if not options["dry_run"]:
            write_atomically(target, data)
        summary = {
            "session_id": session_id,
            "scope": scope,
            "path": str(target),
            "entries": len(lines) - 1,
            "bytes": len(data),
            "action": ("would replace" if existed else "would create")
            if options["dry_run"]
            else ("replaced" if existed else "created"),
        }
        if options["json"]:
            self.stdout.write(orjson.dumps(summary).decode())
        else:
            verb = summary["action"].capitalize()
            self.stdout.write(f"{verb} {target}: {summary['entries']} entries of session {session_id} ({scope})")
