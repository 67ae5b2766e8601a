"""Search the text of entries across sessions.

    manage.py search_sessions Q [--user USER] [--agent ID|NAME] [--session ID]
                                [--provider KIND] [--status STATUS] [--limit N] [--json]

Plain words, all required, newest entries first (docs/moderation.md,
"Search"); every session is searched (the operator runs it). One line per
entry: session, entry, type (role), and the words in context with the
matches between ``**``; then a summary line. ``--json``: the results as the
API answers them (snippets as HTML). Exit 0 (also when nothing is found).
"""

from __future__ import annotations

import html
import re
from typing import Any

import orjson
from django.core.management.base import CommandParser

from sessiontree.management.base import SessionTreeCommand
from sessiontree.models import AgentSession
from sessiontree.services import moderation
from sessiontree.services.search import DEFAULT_LIMIT, MAX_LIMIT

_MARK = re.compile(r"</?mark>")


def plain_snippet(snippet: str) -> str:
    """The HTML snippet as terminal text: matches between ``**``."""
    return html.unescape(_MARK.sub("**", snippet))


class Command(SessionTreeCommand):
    help = "Search the text of entries across sessions (plain words, all required, newest first)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("q", metavar="Q", help="the words to find (quote them as one argument)")
        parser.add_argument("--user", help="only sessions of this user id")
        parser.add_argument("--agent", help="only sessions of this agent (id or name)")
        parser.add_argument("--session", dest="session_id", help="only this session")
        parser.add_argument("--provider", help="only sessions of this provider kind")
        parser.add_argument("--status", choices=AgentSession.Status.values, help="default: active and archived")
        parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"at most this many (1 to {MAX_LIMIT})")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        results = moderation.search_entries(
            q=options["q"],
            user=options["user"],
            agent=options["agent"],
            session_id=options["session_id"],
            provider=options["provider"],
            status=options["status"],
            limit=options["limit"],
            actor=self.actor,
        )
        if options["json"]:
            self.stdout.write(
                orjson.dumps({"q": options["q"], "results": results}, option=orjson.OPT_INDENT_2).decode()
            )
            return
        for hit in results:
            kind = hit["type"] + (f" ({hit['role']})" if hit["role"] else "")
            self.stdout.write(f"{hit['session_id']} {hit['entry_id']} {kind}: {plain_snippet(hit['snippet'])}")
        more = " (the limit: there may be more)" if len(results) == options["limit"] else ""
        self.stdout.write(f"{len(results)} entr{'y' if len(results) == 1 else 'ies'} found, newest first{more}")
