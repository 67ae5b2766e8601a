"""``manage.py moderate …``: flags and hiding from the model, from the command line.

    moderate flag SESSION ENTRY --category CATEGORY [--note TEXT] [--source operator|user_report]
    moderate flags [--status open|actioned|dismissed|all] [--category C] [--source S] [--session ID] [--limit N]
    moderate resolve FLAG --status actioned|dismissed [--note TEXT]
    moderate hide SESSION ENTRY [--notice TEXT] [--expected-leaf ENTRY]
    moderate unhide SESSION ENTRY [--expected-leaf ENTRY]

Every write goes through ``sessiontree.services.moderation`` as
``cli:<os user>`` on the ``cli`` channel (audited) and takes ``--dry-run``
(check it and say what would be done; change nothing) and
``--json``. A flag is a row beside the tree (the leaf does not move);
hiding appends Pi's ``context_edit`` on the active branch, unhiding a later
one restoring the message (docs/moderation.md). ``--expected-leaf`` refuses
the write when the leaf moved (``-``: no leaf). Erasing is ``erase_entry``.
Failures are one line with the exit code of their category: 2 bad input,
3 unknown session, entry or flag, 4 conflict (leaf moved, flag already
resolved, not hidden, not a message), 6 storage unavailable.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandParser

from sessiontree.core.types import UNSET
from sessiontree.management.base import SessionTreeCommand
from sessiontree.services import moderation

NO_LEAF = "-"


def _expected(value: str | None) -> Any:
    if value is None:
        return UNSET
    return None if value == NO_LEAF else value


class Command(SessionTreeCommand):
    help = "Flag entries, list and resolve flags, hide messages from the model and show them again (audited)."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", metavar="flag|flags|resolve|hide|unhide", required=True)

        def sub(name: str, help_text: str, *, writes: bool = True) -> Any:
            found = commands.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
            if writes:
                found.add_argument(
                    "--dry-run", action="store_true", help="check it and say what would be done; change nothing"
                )
            found.add_argument("--json", action="store_true", help="print the result as JSON")
            return found

        flag = sub("flag", "open a moderation flag on an entry (the tree is not touched)")
        flag.add_argument("session", help="the session holding the entry")
        flag.add_argument("entry", help="the entry's id")
        flag.add_argument("--category", required=True, help="one of the configured categories (e.g. pii, spam)")
        flag.add_argument("--note", help="why (kept with the flag)")
        flag.add_argument("--source", default="operator", choices=moderation.SOURCES, help="default: operator")

        flags = sub("flags", "list flags across sessions, oldest first", writes=False)
        flags.add_argument("--status", default="open", choices=[*moderation.FLAG_STATUSES, "all"])
        flags.add_argument("--category")
        flags.add_argument("--source")
        flags.add_argument("--session", help="one session's flags only")
        flags.add_argument("--limit", type=int, default=100)

        resolve = sub("resolve", "resolve an open flag as actioned or dismissed")
        resolve.add_argument("flag", type=int, help="the flag's id")
        resolve.add_argument("--status", required=True, choices=moderation.RESOLVED_STATUSES)
        resolve.add_argument("--note", help="a resolution note")

        for name, text in (
            ("hide", "hide a message from the model on the active branch (a context_edit)"),
            ("unhide", "show a hidden message to the model again (a later context_edit)"),
        ):
            found = sub(name, text)
            found.add_argument("session", help="the session holding the message")
            found.add_argument("entry", help="the message's entry id (on the active branch)")
            found.add_argument("--expected-leaf", dest="expected_leaf", help="refuse if the leaf moved ('-': no leaf)")
            if name == "hide":
                found.add_argument(
                    "--notice", help=f"what the model gets instead (default {moderation.DEFAULT_NOTICE})"
                )

    def handle(self, *args: Any, **options: Any) -> None:
        handler = getattr(self, f"_{options['command']}")
        result, line = handler(options)
        if options["json"]:
            self.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        else:
            self.stdout.write(line)

    def _flag(self, options: dict[str, Any]) -> tuple[Any, str]:
        where = f"{options['entry']} of {options['session']}"
        if options["dry_run"]:
            moderation.check_flag(
                session_id=options["session"],
                entry_id=options["entry"],
                category=options["category"],
                note=options["note"],
                source=options["source"],
            )
            result = {"dry_run": True, "would": "flag", "session_id": options["session"], "entry_id": options["entry"]}
            return result, f"would flag {where} as {options['category']} (dry run: nothing changed)"
        flag = moderation.flag_entry(
            session_id=options["session"],
            entry_id=options["entry"],
            category=options["category"],
            note=options["note"],
            source=options["source"],
            actor=self.actor,
            channel=self.channel,
        )
        return flag, f"flag {flag['id']}: {where} flagged as {flag['category']} (open)"

    def _flags(self, options: dict[str, Any]) -> tuple[Any, str]:
        found = moderation.list_flags(
            status=None if options["status"] == "all" else options["status"],
            category=options["category"],
            source=options["source"],
            session_id=options["session"],
            limit=options["limit"],
        )
        lines = [
            f"{flag['id']}\t{flag['status']}\t{flag['category']}\t{flag['session_id']}\t{flag['entry_id']}\t"
            f"{flag['source']}\t{flag['opened_by']}\t{flag['opened_at']}"
            for flag in found
        ]
        lines.append(f"{len(found)} flag{'s' if len(found) != 1 else ''}")
        return {"results": found}, "\n".join(lines)

    def _resolve(self, options: dict[str, Any]) -> tuple[Any, str]:
        if options["dry_run"]:
            flag = moderation.check_resolve(flag_id=options["flag"], status=options["status"], note=options["note"])
            line = f"would resolve flag {flag['id']} as {options['status']} (dry run: nothing changed)"
            return {"dry_run": True, "would": "resolve", "flag": flag}, line
        flag = moderation.resolve_flag(
            flag_id=options["flag"],
            status=options["status"],
            note=options["note"],
            actor=self.actor,
            channel=self.channel,
        )
        return flag, f"flag {flag['id']}: {flag['status']}"

    def _hide(self, options: dict[str, Any]) -> tuple[Any, str]:
        return self._hiding(options, unhide=False)

    def _unhide(self, options: dict[str, Any]) -> tuple[Any, str]:
        return self._hiding(options, unhide=True)

    def _hiding(self, options: dict[str, Any], *, unhide: bool) -> tuple[Any, str]:
        verb = "unhide" if unhide else "hide"
        session_id, entry_id = options["session"], options["entry"]
        expected = _expected(options["expected_leaf"])
        if options["dry_run"]:
            _target, hidden = moderation.check_hide(
                session_id=session_id, entry_id=entry_id, unhide=unhide, expected_leaf_id=expected
            )
            result = {"dry_run": True, "would": verb, "session_id": session_id, "entry_id": entry_id, "hidden": hidden}
            state = "hidden" if hidden else "shown"
            return result, f"would {verb} {entry_id} of {session_id} (now {state} on the active branch; dry run)"
        if unhide:
            entry = moderation.unhide_entry(
                session_id=session_id,
                entry_id=entry_id,
                expected_leaf_id=expected,
                actor=self.actor,
                channel=self.channel,
            )
            return entry, f"{entry_id} of {session_id} is shown to the model again (context edit {entry['id']})"
        entry = moderation.hide_entry(
            session_id=session_id,
            entry_id=entry_id,
            notice=options["notice"],
            expected_leaf_id=expected,
            actor=self.actor,
            channel=self.channel,
        )
        return entry, f"{entry_id} of {session_id} is hidden from the model (context edit {entry['id']})"
