"""Export one session as Pi JSONL.

    manage.py export_session ID [--active-path [--leaf ENTRY] | --subtree ENTRY | --full]
                                [-o FILE [--dry-run] [--json]] [--manifest PATH]

The whole tree by default. Every export starts with the session's header and
lists entries in append order, so Pi's loader opens it with the same context
at every exported entry. Without ``-o`` the lines go to stdout; with it the
file is written atomically (temporary file + rename) and never replaces a
file that holds entries the database lacks, or another session.

An export is audited (``export_session``, as ``cli:<os user>``: scope, entry
count, size, SHA-256). ``--manifest PATH`` also writes its manifest there
(session, scope, entry count, SHA-256 of the JSONL bytes, exporter, time) as
JSON, atomically. ``--dry-run`` exports nothing, so it writes and audits
nothing either.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.core.errors import BadInput
from sessiontree.management.base import EXIT_BAD_INPUT, SessionTreeCommand
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.services import exports
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
        parser.add_argument(
            "--manifest", type=Path, metavar="PATH", help="also write the export's manifest (JSON) to PATH"
        )

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
        manifest_path: Path | None = options["manifest"].expanduser() if options["manifest"] else None
        if manifest_path is not None and manifest_path.is_dir():
            raise BadInput(f"{manifest_path} is a folder")
        target = output.expanduser() if output is not None else None
        existed = target is not None and target.exists()
        if target is not None and existed:
            if target.is_dir():
                raise BadInput(f"{target} is a folder")
            # Entries of the session outside the exported scope may stay out;
            # entries the database does not hold at all may not be lost.
            with provider.read(session_id) as view:
                ids = set(view.parents())
            check_replaceable(target.read_bytes(), session_id, ids)
        manifest: exports.ExportManifest | None = None
        if options["dry_run"]:  # nothing is exported: nothing to audit
            data, entry_count = exports.build_export(provider, session_id, scope=scope, entry_id=entry_id)
        else:
            made = exports.export_session(
                session_id=session_id,
                scope=scope,
                entry_id=entry_id,
                provider=provider,
                actor=self.actor,
                channel=self.channel,
            )
            data, entry_count, manifest = made.data, made.manifest["entry_count"], made.manifest
        if target is None:
            buffer = getattr(self.stdout, "buffer", None)  # bytes as they are on a real stdout
            if buffer is not None:
                buffer.write(data)
                buffer.flush()
            else:
                self.stdout.write(data.decode("utf-8"), ending="")
        elif not options["dry_run"]:
            write_atomically(target, data)
        if manifest_path is not None and manifest is not None:
            write_atomically(manifest_path, orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
        if target is None:
            return
        summary = {
            "session_id": session_id,
            "scope": scope,
            "path": str(target),
            "entries": entry_count,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "manifest": str(manifest_path) if manifest_path is not None and manifest is not None else None,
            "action": ("would replace" if existed else "would create")
            if options["dry_run"]
            else ("replaced" if existed else "created"),
        }
        if options["json"]:
            self.stdout.write(orjson.dumps(summary).decode())
        else:
            verb = summary["action"].capitalize()
            written = f"; manifest {manifest_path}" if summary["manifest"] else ""
            self.stdout.write(
                f"{verb} {target}: {summary['entries']} entries of session {session_id} ({scope}), "
                f"sha256 {summary['sha256']}{written}"
            )
