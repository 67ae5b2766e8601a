"""Cursor pagination: sessions newest first, entries in append order.

Both answer ``{"next", "previous", "has_more", "results"}`` with
``next``/``previous`` as full URLs (or ``null``) and ``has_more`` telling
whether entries or sessions follow this page; both are stable: a session
created or an entry appended while a client pages never shifts what the
next page holds. The entries list also starts after a known entry
(``?after=<entry_id>``, as a conversation's items are paged elsewhere).

Cursors are opaque, short tokens whose form the schema states exactly
(``SESSION_CURSOR_PATTERN``, ``ENTRY_CURSOR_PATTERN``): every token of that
form is a page (perhaps an empty one), any other is a 400
(``invalid_input``), never a 404. An empty ``cursor`` is the first page.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination, Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from sessiontree.core.types import Entry
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.selectors.entries import entry_page, entry_page_at

INVALID_CURSOR = "Invalid cursor: use the next or previous link of an earlier page."
MAX_PAGE_SIZE_DIGITS = 18
# n|r (forward, reverse), the offset, and the position: creation time in
# microseconds since 1970 (16 digits: years 1653 to 2286, every one a datetime).
SESSION_CURSOR_PATTERN = r"^([nr][0-9]{1,9}(p-?[0-9]{1,16})?)?$"
# p: from a position on; b: the page before a position (positions are the
# storage's, ``keyed_reads.ids_in_order``); o: an offset among the entries of
# the types asked for (the form handed out before positions; still read).
ENTRY_CURSOR_PATTERN = r"^([opb][0-9]{1,15})?$"
_SESSION_CURSOR = re.compile(r"([nr])([0-9]{1,9})(?:p(-?[0-9]{1,16}))?")
_ENTRY_CURSOR = re.compile(r"([opb])([0-9]{1,15})")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _page_size(request: Request, default: int, maximum: int) -> int:
    raw = request.query_params.get("page_size")
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_PAGE_SIZE_DIGITS:
        raise ValidationError({"page_size": ["A whole number is required."]})
    value = int(raw)
    if value < 1:
        raise ValidationError({"page_size": ["Must be at least 1."]})
    return min(value, maximum)


def page_size_parameter(default: int, maximum: int, what: str) -> dict[str, Any]:
    return {
        "name": "page_size",
        "required": False,
        "in": "query",
        "description": f"{what} per page (default {default}; more than {maximum} gives {maximum}).",
        "schema": {"type": "integer", "minimum": 1, "maximum": 10**MAX_PAGE_SIZE_DIGITS - 1},
    }


def cursor_parameter(pattern: str) -> dict[str, Any]:
    return {
        "name": "cursor",
        "required": False,
        "in": "query",
        "description": "The pagination cursor value (from next or previous); empty: the first page.",
        "schema": {"type": "string", "pattern": pattern},
    }


def paginated_schema(schema: dict[str, Any]) -> dict[str, Any]:
    link = {"type": "string", "nullable": True, "format": "uri"}
    return {
        "type": "object",
        "required": ["next", "previous", "has_more", "results"],
        "properties": {
            "next": link,
            "previous": link,
            "has_more": {"type": "boolean", "description": "Whether more follow this page (next is not null)."},
            "results": schema,
        },
    }


class SessionCursorPagination(CursorPagination):
    # Newest first by creation time; ties by the session's id (never by the
    # row's pk, which several nodes of a cluster allocate out of time order).
    ordering = ("-created_at", "-session_id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        return _page_size(request, self.page_size, self.max_page_size)

    def decode_cursor(self, request: Request) -> Cursor | None:
        raw = request.query_params.get(self.cursor_query_param)
        if raw in (None, ""):
            return None
        found = _SESSION_CURSOR.fullmatch(raw)
        if found is None:
            raise ValidationError({"cursor": [INVALID_CURSOR]})
        direction, offset, micros = found.groups()
        position = None if micros is None else str(_EPOCH + timedelta(microseconds=int(micros)))
        # DRF's Cursor holds the position as the text of the ordering field's value.
        return Cursor(offset=min(int(offset), self.offset_cutoff), reverse=direction == "r", position=position)  # type: ignore[arg-type]

    def encode_cursor(self, cursor: Cursor) -> str:
        token = f"{'r' if cursor.reverse else 'n'}{cursor.offset}"
        if cursor.position is not None:
            moment = parse_datetime(str(cursor.position))
            assert moment is not None, cursor.position  # a creation time of ours
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            token += f"p{(moment - _EPOCH) // timedelta(microseconds=1)}"
        return str(replace_query_param(str(self.base_url), self.cursor_query_param, token))

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "has_more": bool(self.has_next),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return paginated_schema(schema)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            cursor_parameter(SESSION_CURSOR_PATTERN),
            page_size_parameter(self.page_size, self.max_page_size, "Sessions"),
        ]


class EntryCursorPagination(BasePagination):
    """Entries in append order; the cursor is a position in that order
    (the storage's), opaque to clients: ``p<position>`` the page from there
    on, ``b<position>`` the page that ends before it. ``o<offset>`` (an
    offset among the entries of the requested types: cursors handed out
    before) is still read, and pages on with offsets. ``after`` starts the
    first page after a known entry instead."""

    page_size = 100
    max_page_size = 1000
    cursor_query_param = "cursor"
    after_query_param = "after"
    page_size_query_param = "page_size"

    def __init__(self) -> None:
        self.request: Request | None = None
        self.next_cursor: str | None = None
        self.previous_cursor: str | None = None

    @staticmethod
    def encode(offset: int) -> str:
        return f"o{offset}"

    def decode_cursor(self, request: Request) -> tuple[str, int]:
        """(form, number): ``("p", 0)`` for the first page."""
        raw = request.query_params.get(self.cursor_query_param)
        if raw in (None, ""):
            return "p", 0
        found = _ENTRY_CURSOR.fullmatch(raw)
        if found is None:
            raise ValidationError({"cursor": [INVALID_CURSOR]})
        return found.group(1), int(found.group(2))

    def after(self, request: Request) -> str | None:
        raw = request.query_params.get(self.after_query_param)
        if raw is None:
            return None
        if not raw:
            raise ValidationError({self.after_query_param: ["An entry id is required."]})
        if request.query_params.get(self.cursor_query_param):
            # A cursor already says where the page starts (the next and previous
            # links carry one): it wins, as a rule no schema could tell a
            # client that one parameter forbids another.
            return None
        return str(raw)

    def paginate_entries(
        self,
        request: Request,
        provider: SessionTreeProvider,
        session_id: str,
        *,
        types: Collection[str] | None = None,
    ) -> list[Entry]:
        self.request = request
        after = self.after(request)
        form, number = self.decode_cursor(request)
        size = _page_size(request, self.page_size, self.max_page_size)
        if form == "o":
            page = entry_page(provider, session_id, offset=number, limit=size, types=types, after=after)
            offset = page.offset
            self.next_cursor = self.encode(offset + len(page.entries)) if page.has_more else None
            self.previous_cursor = self.encode(max(0, offset - size)) if offset > 0 else None
            return page.entries
        at = entry_page_at(
            provider, session_id, position=number, before=form == "b", limit=size, types=types, after=after
        )
        self.next_cursor = f"p{at.next_position}" if at.next_position is not None else None
        self.previous_cursor = f"b{at.previous_position}" if at.previous_position is not None else None
        return at.entries

    def _link(self, cursor: str | None) -> str | None:
        if cursor is None or self.request is None:
            return None
        # A link is a cursor from here on: ``after`` has done its part.
        url = remove_query_param(self.request.build_absolute_uri(), self.after_query_param)
        return str(replace_query_param(url, self.cursor_query_param, cursor))

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "next": self._link(self.next_cursor),
                "previous": self._link(self.previous_cursor),
                "has_more": self.next_cursor is not None,
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return paginated_schema(schema)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            cursor_parameter(ENTRY_CURSOR_PATTERN),
            {
                "name": self.after_query_param,
                "required": False,
                "in": "query",
                "description": (
                    "Start after this entry in append order (404 if the session has no such entry); "
                    "with a cursor, the cursor says where the page starts."
                ),
                "schema": {"type": "string", "minLength": 1, "maxLength": 64},
            },
            page_size_parameter(self.page_size, self.max_page_size, "Entries"),
        ]
