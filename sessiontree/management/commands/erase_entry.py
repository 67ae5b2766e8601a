"""Erase an entry in place, with every copy and the summaries made from it.

    manage.py erase_entry SESSION ENTRY --reason "…" [--scope all|entry] [--dry-run] [--json]

Irreversible: the entry's text (and, with ``--scope all``, the default, that
of every copy in the session's lineage, the summaries made from it and the
context edits carrying it) is replaced by the marker ``[erased]``. A reason
is required and kept in the audit record, with the SHA-256 of the erased
bytes, never the content. ``--dry-run`` lists every place that would change
and changes nothing. Files outside the store that still hold the entry (the
sources of a folder import, exports) are named, not changed. One line per
place and a summary line (``--json``: the result); exit 0, or the error
category's exit code (2 bad input, 3 not found, 4 a legal hold or an entry
in flight, …).
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandParser

from sessiontree.management.base import SessionTreeCommand
from sessiontree.services import moderation
from sessiontree.services.erasure import SCOPES


class Command(SessionTreeCommand):
    help = "Erase an entry's text in place, with its copies and the summaries made from it (irreversible, audited)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="the session holding the entry")
        parser.add_argument("entry", help="the entry's id")
        parser.add_argument("--reason", required=True, help="why it must go (kept in the audit record)")
        parser.add_argument(
            "--scope",
            choices=SCOPES,
            default="all",
            help="all (default): with its copies, summaries and context edits; entry: this session's entry only",
        )
        parser.add_argument("--dry-run", action="store_true", help="list every place that would change; change nothing")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        dry_run = options["dry_run"]
        result = moderation.erase_entry(
            session_id=options["session"],
            entry_id=options["entry"],
            reason=options["reason"],
            scope=options["scope"],
            dry_run=dry_run,
            actor=self.actor,
            channel=self.channel,
        )
        if options["json"]:
            self.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
            return
        verb = "would erase" if dry_run else "erased"
        for place in result["changed"]:
            self.stdout.write(f"{verb} {place['kind']} {place['session_id']}/{place['entry_id']}")
        for path in result["outside"]:
            self.stdout.write(f"outside the store, still holding it (not changed): {path}")
        changed = result["changed"]
        kinds = ", ".join(
            _count(sum(1 for p in changed if p["kind"] == kind), kind, plural)
            for kind, plural in (("entry", "entries"), ("copy", "copies"), ("summary", "summaries"))
        )
        sessions = len({place["session_id"] for place in changed})
        self.stdout.write(
            f"erase: {verb} {_count(len(changed), 'entry', 'entries')} in {_count(sessions, 'session', 'sessions')} "
            f"({kinds}); {_count(len(result['outside']), 'file', 'files')} outside the store"
        )


def _count(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"
