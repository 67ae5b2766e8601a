"""Search across sessions: which entries say something (docs/moderation.md,
"Search").

``search_entries`` (also ``services.moderation.search_entries``) reads the
search index the providers keep (``providers/search_index.py``), with the
session list's filters, and answers as the searcher may see: a user who
sees every session (a superuser, or staff with
``sessiontree.view_agentsession``, as in the API and the admin) searches
all of them; any other user only the sessions they own. A system actor (a
management command's ``cli:<user>``, ``sync``) searches everything.

A query is plain words (``core.search.query_terms``): nothing in it is an
operator of the full-text engine, every term must occur, a term of several
words (``bob@example.com``) matches as a phrase. Hits come newest first,
each with a snippet of the entry's text as HTML (escaped, the words in
``<mark>``). Reading is not audited: nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from django.db import transaction

from sessiontree.core.errors import BadInput, SessionNotFound, SessionTreeError
from sessiontree.core.search import MAX_QUERY_LENGTH, query_terms, snippet_html
from sessiontree.models import Agent, AgentSession
from sessiontree.providers import search_index
from sessiontree.providers.factory import check_kind, get_provider
from sessiontree.providers.meta import validate_session_id

from .audit import Actor

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
VIEW_ALL = "sessiontree.view_agentsession"
STATUSES = tuple(AgentSession.Status.values)
# Like the session list: deleted sessions only when asked for.
DEFAULT_STATUSES = (AgentSession.Status.ACTIVE.value, AgentSession.Status.ARCHIVED.value)


class SearchResult(TypedDict):
    session_id: str
    entry_id: str
    type: str
    role: str | None
    snippet: str


def sees_every_session(actor: Any) -> bool:
    """Whether ``actor`` searches every session (else only its own)."""
    if getattr(actor, "is_authenticated", None) is None:
        Actor.of(actor)  # a name or an Actor: a system actor (TypeError/ValueError for anything else)
        return True
    if not (actor.is_authenticated and actor.is_active):
        return False
    return bool(actor.is_superuser or (actor.is_staff and actor.has_perm(VIEW_ALL)))


def _agent_id(agent: Any) -> int | None:
    """An agent's id from its id or its name (``BadInput`` for neither)."""
    if agent is None:
        return None
    if isinstance(agent, Agent):
        return agent.pk
    if isinstance(agent, int) and not isinstance(agent, bool):
        return agent
    if isinstance(agent, str) and agent.strip():
        if agent.isdigit():
            return int(agent)
        found = Agent.objects.filter(name=agent).values_list("pk", flat=True).first()
        if found is None:
            raise BadInput(f"No agent named {agent!r}")
        return int(found)
    raise BadInput(f"An agent is given by its id or its name, not {agent!r}")


def search_entries(
    *,
    q: str,
    actor: Any,
    user: str | None = None,
    agent: Any = None,
    session_id: str | None = None,
    provider: str | None = None,
    status: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[SearchResult]:
    """Entries whose text holds every word of ``q``, newest first, at most
    ``limit``: ``{"session_id", "entry_id", "type", "role", "snippet"}``.

    ``user`` (the sessions' ``user_id``), ``agent`` (id or name),
    ``session_id``, ``provider`` and ``status`` narrow the sessions searched
    (default: active and archived ones); ``actor`` decides which sessions
    may be searched at all (see the module docstring)."""
    if not isinstance(q, str):
        raise BadInput(f"A search query is a string, not {type(q).__name__}")
    if len(q) > MAX_QUERY_LENGTH:
        raise BadInput(f"A search query is at most {MAX_QUERY_LENGTH} characters")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit is a whole number from 1 to {MAX_LIMIT}")
    if status is not None and status not in STATUSES:
        raise BadInput(f"Unknown session status {status!r}; use one of {', '.join(STATUSES)}")
    if user is not None and not isinstance(user, str):
        raise BadInput("user is a user id (a string)")
    if provider is not None and not isinstance(provider, str):
        raise BadInput("provider is a provider kind (a string)")
    if session_id is not None:
        validate_session_id(session_id)
    owner = None
    if not sees_every_session(actor):
        owner = actor.get_username() if getattr(actor, "is_authenticated", False) else None
        if owner is None:
            return []
    scope = search_index.SessionScope(
        session_ids=[session_id] if session_id is not None else None,
        user_id=user,
        owner=owner,
        agent_id=_agent_id(agent),
        provider=provider,
        statuses=[status] if status is not None else list(DEFAULT_STATUSES),
    )
    terms = query_terms(q)
    hits = search_index.search(terms, scope, limit=limit)
    return [
        {
            "session_id": hit.session_id,
            "entry_id": hit.entry_id,
            "type": hit.entry_type,
            "role": hit.role,
            "snippet": snippet_html(hit.text, terms),
        }
        for hit in hits
    ]


# --- building the index for sessions stored before it existed ------------------------------------


class IndexFailure(TypedDict):
    session_id: str
    code: str
    message: str
    exit_code: int


class IndexReport(TypedDict):
    dry_run: bool
    sessions: int
    changed_sessions: int
    added: int
    updated: int
    removed: int
    orphans_removed: int
    failed: list[IndexFailure]


def build_search_index(
    *,
    session_ids: Sequence[str] | None = None,
    provider: str | None = None,
    dry_run: bool = False,
    progress: Callable[[int], Callable[[int], Any] | None] | None = None,
) -> IndexReport:
    """Make the search index hold exactly what every session (or those
    ``session_ids``, or those of ``provider``) stores: rows added for
    entries stored before the index existed, changed ones replaced, rows of
    entries or sessions that are gone removed. Each session is done under
    its write lock, in its own transaction; a session that cannot be read is
    reported and the rest go on. Idempotent: a second run changes nothing.

    Not audited: the index is derived from the entries (the audit trail
    records changes of sessions, and this changes none). ``dry_run`` counts
    what would change and writes nothing. ``progress(total)`` may return a
    callable advanced by one per session."""
    report: IndexReport = {
        "dry_run": dry_run,
        "sessions": 0,
        "changed_sessions": 0,
        "added": 0,
        "updated": 0,
        "removed": 0,
        "orphans_removed": 0,
        "failed": [],
    }
    rows = AgentSession.objects.order_by("pk")
    if session_ids is not None:
        for session_id in session_ids:
            validate_session_id(session_id)
        rows = rows.filter(session_id__in=list(session_ids))
        missing = set(session_ids) - set(rows.values_list("session_id", flat=True))
        if missing:
            raise SessionNotFound(f"Session {sorted(missing)[0]} not found")
    if provider is not None:
        rows = rows.filter(provider=check_kind(provider))
    targets = list(rows.values_list("session_id", "provider"))
    advance = progress(len(targets)) if progress is not None else None
    for session_id, kind in targets:
        try:
            changes = get_provider(kind).reindex_search(session_id, dry_run=dry_run)
        except SessionTreeError as exc:
            report["failed"].append(
                {"session_id": session_id, "code": exc.code, "message": str(exc), "exit_code": exc.exit_code}
            )
        else:
            report["sessions"] += 1
            report["changed_sessions"] += int(changes.changed)
            report["added"] += changes.added
            report["updated"] += changes.updated
            report["removed"] += changes.removed
        if advance is not None:
            advance(1)
    if session_ids is None and provider is None:
        orphans = search_index.orphan_session_ids()
        report["orphans_removed"] = len(orphans)
        if not dry_run:
            for session_id in orphans:
                with transaction.atomic():
                    search_index.remove_session(session_id)
    if not dry_run:
        search_index.catch_up()  # the engine's index takes the new rows now, not at the first search
    return report


def index_summary_line(report: IndexReport) -> str:
    """One line: what a build did (or would do)."""
    would = "would be " if report["dry_run"] else ""
    line = (
        f"search index: {report['sessions']} session(s) checked, {report['changed_sessions']} {would}changed; "
        f"entries {would}added {report['added']}, {would}updated {report['updated']}, "
        f"{would}removed {report['removed']}"
    )
    if report["orphans_removed"]:
        line += f"; rows of {report['orphans_removed']} deleted session(s) {would}removed"
    if report["failed"]:
        line += f"; {len(report['failed'])} failed"
    return line


def optimize_search_index() -> str:
    """Merge the full-text index (deleted text leaves the engine's own
    structures); see ``providers.search_index.optimize_index``."""
    return search_index.optimize_index()


__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "IndexReport",
    "SearchResult",
    "build_search_index",
    "index_summary_line",
    "optimize_search_index",
    "search_entries",
    "sees_every_session",
]
