"""Token authentication with the token and its user read in one plain query.

DRF's ``TokenAuthentication`` runs on every request and spends most of its
time building the ORM query (a ``select_related`` of the token's user);
this subclass reads the user by the token's key with one raw SQL join and
otherwise behaves the same (same header, same refusals, ``request.auth`` a
``Token``).
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
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        sql, field_names, converters = _user_by_token()
        with connection.cursor() as cursor:
            cursor.execute(sql, [key])
            found = cursor.fetchone()
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        values = list(found)
        for index, column, field_converters in converters:
            for convert in field_converters:
                values[index] = convert(values[index], column, connection)
        user = get_user_model().from_db(connection.alias, field_names, values)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return user, Token(key=key, user=user)
