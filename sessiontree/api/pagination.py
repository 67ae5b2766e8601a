"""Cursor pagination: sessions newest first, entries in append order.

Both answer ``{"next", "previous", "results"}`` with ``next``/``previous`` as
full URLs (or ``null``), and both are stable: a session created or an entry
appended while a client pages never shifts what the next page holds.
A cursor that cannot be read is a 400 (``invalid_input``), never a 404.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection
from datetime import UTC
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import BasePagination, Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from sessiontree.core.types import Entry
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.selectors.entries import entry_page

INVALID_CURSOR = "Invalid cursor: use the next or previous link of an earlier page."


def _page_size(request: Request, default: int, maximum: int) -> int:
    raw = request.query_params.get("page_size")
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValidationError({"page_size": ["A whole number is required."]}) from None
    if value < 1:
        raise ValidationError({"page_size": ["Must be at least 1."]})
    return min(value, maximum)


class SessionCursorPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        return _page_size(request, self.page_size, self.max_page_size)

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({"cursor": [INVALID_CURSOR]}) from None
        if cursor is not None and cursor == Cursor(offset=0, reverse=False, position=None):
            raise ValidationError({"cursor": [INVALID_CURSOR]})  # decodes to nothing: never one of ours
        if cursor is not None and cursor.position is not None:
            try:
                moment = parse_datetime(str(cursor.position))
                # The query compares in UTC: a time that has none (year 1 at
                # +01:00) is no time at all, not a 500.
                valid = moment is not None and (moment.tzinfo is None or moment.astimezone(UTC) is not None)
            except (ValueError, OverflowError):
                valid = False
            if not valid:
                raise ValidationError({"cursor": [INVALID_CURSOR]})
        return cursor


class EntryCursorPagination(BasePagination):
    """Entries in append order; the cursor is the position in that order
    (among the entries of the requested types), opaque to clients."""

    page_size = 100
    max_page_size = 1000
    cursor_query_param = "cursor"
    page_size_query_param = "page_size"

    def __init__(self) -> None:
        self.request: Request | None = None
        self.next_offset: int | None = None
        self.previous_offset: int | None = None

    @staticmethod
    def encode(offset: int) -> str:
        return base64.urlsafe_b64encode(f"o={offset}".encode()).decode("ascii").rstrip("=")

    def decode(self, request: Request) -> int:
        raw = request.query_params.get(self.cursor_query_param)
        if raw in (None, ""):
            return 0
        try:
            padded = str(raw) + "=" * (-len(str(raw)) % 4)
            text = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True).decode("ascii")
            key, _, value = text.partition("=")
            offset = int(value) if key == "o" and value.isdigit() and len(value) <= 18 else -1
        except (binascii.Error, UnicodeError, ValueError):
            offset = -1
        if offset < 0:
            raise ValidationError({"cursor": [INVALID_CURSOR]})
        return offset

    def paginate_entries(
        self,
        request: Request,
        provider: SessionTreeProvider,
        session_id: str,
        *,
        types: Collection[str] | None = None,
    ) -> list[Entry]:
        self.request = request
        offset = self.decode(request)
        size = _page_size(request, self.page_size, self.max_page_size)
        page = entry_page(provider, session_id, offset=offset, limit=size, types=types)
        self.next_offset = offset + len(page.entries) if page.has_more else None
        self.previous_offset = max(0, offset - size) if offset > 0 else None
        return page.entries

    def _link(self, offset: int | None) -> str | None:
        if offset is None or self.request is None:
            return None
        return replace_query_param(self.request.build_absolute_uri(), self.cursor_query_param, self.encode(offset))

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {"next": self._link(self.next_offset), "previous": self._link(self.previous_offset), "results": data}
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {"type": "string", "nullable": True, "format": "uri"}
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {"next": link, "previous": link, "results": schema},
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "The pagination cursor value (from next or previous).",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"Entries per page (default {self.page_size}, at most {self.max_page_size}).",
                "schema": {"type": "integer", "minimum": 1},
            },
        ]
