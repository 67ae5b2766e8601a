"""Who sees and changes which session through the API.

- Every endpoint needs an authenticated user (401 otherwise). The schema and
  its Swagger UI are public: they describe the API and hold no data.
- A user **owns** the sessions whose ``user_id`` is their username. They see
  and change their own sessions, and only those.
- Staff users with ``sessiontree.view_agentsession`` (and superusers) see
  every session: list, retrieve, entries, path, context, tree, snapshot, export.
- Changing a session one does not own (appending, in-flight entries, leaf
  moves, navigate, labels, forks, compaction, title/metadata, archive,
  restore, delete) needs ``sessiontree.moderate_session``. A view-only staff
  member therefore reads everything and changes only their own sessions.
- Creating a session for another user (``user_id`` not one's own username)
  needs ``sessiontree.moderate_session`` too.
- A hard delete (``?hard=true``) needs ``sessiontree.hard_delete_session``,
  even on one's own session.
- A session one may not see is 404, exactly like one that does not exist, so
  ids do not leak; one that is seen but may not be changed is 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from sessiontree.models import AgentSession

VIEW_ALL = "sessiontree.view_agentsession"
MODERATE = "sessiontree.moderate_session"
HARD_DELETE = "sessiontree.hard_delete_session"


def sees_all_sessions(user: Any) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return bool(user.is_superuser or (user.is_staff and user.has_perm(VIEW_ALL)))


def visible_sessions(user: Any) -> QuerySet[AgentSession]:
    """The sessions ``user`` may see (not yet filtered by status)."""
    sessions = AgentSession.objects.all()
    if sees_all_sessions(user):
        return sessions
    if not (user and user.is_authenticated):
        return sessions.none()
    return sessions.filter(user_id=user.get_username())


@dataclass(frozen=True)
class SessionRef:
    """What access checks and routing need of a session's meta row."""

    pk: int
    session_id: str
    provider: str
    user_id: str | None


_quote = connection.ops.quote_name
_FIND_SQL = (
    f"SELECT {_quote('id')}, {_quote('provider')}, {_quote('user_id')} "
    f"FROM {_quote(AgentSession._meta.db_table)} WHERE {_quote('session_id')} = %s"
)


# The same three columns, read with the request's token (``authentication.py``):
# one query for the user and the session on every request under a session.
SESSION_COLUMNS = (_quote("id"), _quote("provider"), _quote("user_id"))
SESSION_TABLE = _quote(AgentSession._meta.db_table)
SESSION_ID_COLUMN = _quote("session_id")


def find_visible_session(user: Any, session_id: str) -> SessionRef | None:
    """The session ``session_id`` if ``user`` may see it, else ``None`` (as if
    it did not exist). One plain query: this runs on every request under a session."""
    with connection.cursor() as cursor:
        cursor.execute(_FIND_SQL, [session_id])
        found = cursor.fetchone()
    return visible_session(user, session_id, found)


def visible_session(user: Any, session_id: str, found: Any) -> SessionRef | None:
    """``found`` (the session's ``SESSION_COLUMNS``, ``None`` if it does not
    exist) as a ``SessionRef`` if ``user`` may see it, else ``None``."""
    if found is None or found[0] is None:
        return None
    session = SessionRef(pk=found[0], session_id=session_id, provider=found[1], user_id=found[2])
    if owns(user, session.user_id) or sees_all_sessions(user):
        return session
    return None


def owns(user: Any, user_id: str | None) -> bool:
    return bool(user and user.is_authenticated and user_id is not None and user_id == user.get_username())


def may_change(user: Any, session: SessionRef) -> bool:
    """Any write to ``session``: its owner, or a moderator."""
    return owns(user, session.user_id) or bool(user and user.is_active and user.has_perm(MODERATE))


def may_act_for(user: Any, user_id: str | None) -> bool:
    """May ``user`` create a session that belongs to ``user_id``?"""
    if user_id is None or user_id == user.get_username():
        return True
    return bool(user.is_active and user.has_perm(MODERATE))


def may_hard_delete(user: Any) -> bool:
    return bool(user and user.is_active and user.has_perm(HARD_DELETE))


class SessionAccess(BasePermission):
    """Authenticated users; under ``sessions/{session_id}/`` the session must be
    visible (else 404) and, for anything but a read, changeable (else 403)."""

    message = (
        "This session belongs to another user: you may read it but not change it "
        "(that needs the sessiontree.moderate_session permission)."
    )

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if "session_id" not in view.kwargs:
            return True
        session = view.session_row()  # raises NotFound for a session this user cannot see
        return request.method in SAFE_METHODS or may_change(request.user, session)
