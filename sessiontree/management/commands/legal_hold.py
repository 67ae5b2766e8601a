"""Place, release and list legal holds.

    manage.py legal_hold SESSION --reason "…"     place a hold
    manage.py legal_hold SESSION --release        release it
    manage.py legal_hold --list                   every hold in force

While a session is held, nothing deletes or erases it (hard delete, erase,
user erasure, retention: each refuses, exit 4); appends, moves and reads go
on. Placing and releasing are audited (``place_hold``/``release_hold``, as
``cli:<os user>``). ``--dry-run`` checks and says what would be done;
``--json`` prints the session with its ``legal_hold`` (or the list).
"""

from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessiontree.core.errors import SessionNotFound
from sessiontree.management.base import EXIT_BAD_INPUT, EXIT_CONFLICT, SessionTreeCommand
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.services import holds, protection


class Command(SessionTreeCommand):
    help = "Place (--reason), release (--release) or list (--list) legal holds on sessions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", nargs="?", help="the session's id")
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--reason", help="place a hold, for this reason")
        action.add_argument("--release", action="store_true", help="release the session's hold")
        action.add_argument("--list", action="store_true", help="list every hold in force")
        parser.add_argument("--dry-run", action="store_true", help="check and say what would be done; change nothing")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        session_id = options["session"]
        if options["list"]:
            if session_id is not None:
                raise CommandError("--list takes no session", returncode=EXIT_BAD_INPUT)
            self._list(as_json=options["json"])
            return
        if session_id is None:
            raise CommandError("name the session to hold or release", returncode=EXIT_BAD_INPUT)
        if options["dry_run"]:
            self._dry_run(session_id, options)
            return
        if options["release"]:
            session = protection.release_hold(session_id=session_id, actor=self.actor, channel=self.channel)
            message = f"released the hold on {session_id}"
        else:
            session = protection.place_hold(
                session_id=session_id, reason=options["reason"], actor=self.actor, channel=self.channel
            )
            message = f"placed a hold on {session_id}"
        self._report(session, message, as_json=options["json"])

    def _dry_run(self, session_id: str, options: dict[str, Any]) -> None:
        if get_provider_for_session(session_id).get_session(session_id) is None:
            raise SessionNotFound(f"Session {session_id} not found")
        hold = holds.hold_of(session_id)
        if options["release"]:
            if hold is None:
                raise CommandError(f"not_on_hold: Session {session_id} is not on hold", returncode=EXIT_CONFLICT)
            message = f"would release the hold on {session_id} (placed by {hold['placed_by']})"
        else:
            if hold is not None:
                raise CommandError(
                    f"hold_exists: Session {session_id} is already on hold (placed by {hold['placed_by']})",
                    returncode=EXIT_CONFLICT,
                )
            if not options["reason"].strip():
                raise CommandError("invalid_input: A legal hold needs a reason", returncode=EXIT_BAD_INPUT)
            message = f"would place a hold on {session_id}"
        if options["json"]:
            self.stdout.write(orjson.dumps({"dry_run": True, "session_id": session_id, "legal_hold": hold}).decode())
        else:
            self.stdout.write(message)

    def _report(self, session: dict[str, Any], message: str, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(orjson.dumps(session, default=str, option=orjson.OPT_INDENT_2).decode())
        else:
            self.stdout.write(message)

    def _list(self, *, as_json: bool) -> None:
        found = holds.list_holds()
        if as_json:
            self.stdout.write(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
            return
        for hold in found:
            self.stdout.write(f"{hold['session_id']}  {hold['placed_at']}  {hold['placed_by']}  {hold['reason']}")
        self.stdout.write(f"{len(found)} session(s) on hold")
