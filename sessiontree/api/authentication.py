"""Token authentication with the token and its user read in one plain query.

DRF's ``TokenAuthentication`` runs on every request and spends most of its
time building the ORM query (a ``select_related`` of the token's user);
this subclass reads the user by the token's key with one raw SQL join and
otherwise behaves the same (same header, same refusals, ``request.auth`` a
``Token``).

Under ``sessions/{session_id}/`` the same query also reads the session's row
(``permissions.SESSION_COLUMNS``, a ``LEFT JOIN``: nothing when it does not
exist), which the access check then uses instead of a query of its own
(``prefetched_session``): one database round trip fewer on every request
under a session. What the user may see is decided as before
(``permissions.visible_session``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from sessiontree.core.errors import SessionTreeError
from sessiontree.providers import meta

from . import permissions

Converter = Callable[[Any, Any, Any], Any]


@functools.cache
def _user_by_token() -> tuple[str, list[str], list[tuple[int, Any, list[Converter]]]]:
    """The SQL that reads a token's user; the user fields it selects, in order;
    and for each column that needs it, the converters the ORM would apply to
    its value (the backend's, then the field's: SQLite's datetimes arrive as text)."""
    quote = connection.ops.quote_name
    user_meta, token_meta = get_user_model()._meta, Token._meta
    users, tokens = quote(user_meta.db_table), quote(token_meta.db_table)
    fields = list(user_meta.concrete_fields)
    columns = ", ".join(f"{users}.{quote(str(field.column))}" for field in fields)
    token_user = quote(str(token_meta.get_field("user").column))
    token_key = quote(str(token_meta.get_field("key").column))
    user_pk = quote(str(user_meta.pk.column)) if user_meta.pk is not None else quote("id")
    sql = (
        f"SELECT {columns} FROM {users} INNER JOIN {tokens} ON {tokens}.{token_user} = {users}.{user_pk} "
        f"WHERE {tokens}.{token_key} = %s"
    )
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(user_meta.db_table)
        found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if found:
            converters.append((index, column, found))
    return sql, [field.attname for field in fields], converters


@functools.cache
def _user_and_session_by_token() -> str:
    """``_user_by_token``'s SQL that also selects the session's columns
    (``NULL`` when there is no such session); parameters: the session id, the key."""
    sql = _user_by_token()[0]
    select, _, rest = sql.partition(" FROM ")
    joined, _, where = rest.partition(" WHERE ")
    session_columns = ", ".join(f"{permissions.SESSION_TABLE}.{column}" for column in permissions.SESSION_COLUMNS)
    return (
        f"{select}, {session_columns} FROM {joined} LEFT JOIN {permissions.SESSION_TABLE} "
        f"ON {permissions.SESSION_TABLE}.{permissions.SESSION_ID_COLUMN} = %s WHERE {where}"
    )


# Where the session row read with the token waits for the access check (on Django's request).
_PREFETCHED = "_sessiontree_prefetched_session"


def prefetched_session(request: Any, session_id: str) -> tuple[bool, Any]:
    """``(True, row)`` if the token's query read the row of ``session_id`` for
    this request (``row`` ``None``-ish when the session does not exist), once;
    ``(False, None)`` otherwise."""
    django_request = getattr(request, "_request", request)
    found = django_request.__dict__.pop(_PREFETCHED, None)
    if found is None or found[0] != session_id:
        return False, None
    return True, found[1]


def _session_id_of(request: Any) -> str | None:
    """The valid ``session_id`` of the URL the request is for, if it has one."""
    kwargs = (getattr(request, "parser_context", None) or {}).get("kwargs") or {}
    session_id = kwargs.get("session_id")
    if session_id is None:
        return None
    try:
        return meta.validate_session_id(session_id)
    except SessionTreeError:
        return None  # the view refuses it, as it did without the join


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token check with the token's user read by one plain query (DRF
    builds an ORM query with ``select_related`` on every request, which cost
    more CPU than the append the request makes).

    ``Authorization: Token <key>`` is the documented form; ``Bearer <key>``
    (what most HTTP clients send for an API key) is accepted as the same."""

    keywords = ("Token", "Bearer")

    def authenticate(self, request: Any) -> tuple[Any, Token] | None:
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() not in {keyword.lower().encode() for keyword in self.keywords}:
            return None
        if len(parts) == 1:
            raise exceptions.AuthenticationFailed(_("Invalid token header. No credentials provided."))
        if len(parts) > 2:
            raise exceptions.AuthenticationFailed(_("Invalid token header. Token string should not contain spaces."))
        try:
            key = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(
                _("Invalid token header. Token string should not contain invalid characters.")
            ) from None
        session_id = _session_id_of(request)
        if session_id is None:
            return self.authenticate_credentials(key)
        user, token, session = self._read(key, session_id)
        # Django's request: DRF's wraps it and may be copied, Django's is the one the view sees.
        getattr(request, "_request", request).__dict__[_PREFETCHED] = (session_id, session)
        return user, token

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        user, token, _session = self._read(key, None)
        return user, token

    def _read(self, key: str, session_id: str | None) -> tuple[Any, Token, Any]:
        """The token's user and, with ``session_id``, that session's row (``None`` if there is none)."""
        sql, field_names, converters = _user_by_token()
        params = [key]
        if session_id is not None:
            sql, params = _user_and_session_by_token(), [session_id, key]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        session = found[len(field_names) :] if session_id is not None else None
        values = list(found[: len(field_names)])
        for index, column, field_converters in converters:
            for convert in field_converters:
                values[index] = convert(values[index], column, connection)
        user = get_user_model().from_db(connection.alias, field_names, values)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return user, Token(key=key, user=user), session
