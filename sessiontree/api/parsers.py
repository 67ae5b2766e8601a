"""Strict JSON request bodies, bounded in size and nesting.

DRF's own JSON parser reads the whole stream whatever its size (Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE`` applies only to ``request.body``), accepts
``NaN`` and lone surrogates, and lets a deeply nested document raise
``RecursionError``. This one reads at most ``DATA_UPLOAD_MAX_MEMORY_SIZE``
bytes (more is ``RequestTooLarge``, 413), decodes with orjson (strict JSON:
no ``NaN``/``Infinity``, valid UTF-8 without surrogates) and refuses documents
nested deeper than ``MAX_BODY_DEPTH`` (400).
"""

from __future__ import annotations

from typing import Any

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from sessiontree.core.entries import json_depth_exceeds

from .exceptions import RequestTooLarge
from .wsgi import max_body_bytes

# Entries nest at most SESSIONTREE_MAX_ENTRY_DEPTH (30) levels and are refused
# beyond it with a 413 naming the entry; a body may nest a little deeper than
# that (the entry sits inside {"entry": …}) so that the entry's own limit
# answers, and no deeper than what every JSON library in the chain handles.
MAX_BODY_DEPTH = 64


def read_limited(stream: Any, content_length: Any) -> bytes:
    """The request body, or ``RequestTooLarge`` as soon as it is known to exceed the limit."""
    limit = max_body_bytes()
    try:
        declared = int(content_length) if content_length not in (None, "") else None
    except (TypeError, ValueError):
        declared = None
    if declared is not None and declared > limit:
        raise RequestTooLarge.over(declared, limit)
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise RequestTooLarge.over(None, limit)
    return bytes(data)


def _reason(body: bytes, exc: orjson.JSONDecodeError) -> str:
    """Why ``body`` is not JSON, in words a client can act on (orjson says
    "surrogates not allowed" for any byte sequence that is not UTF-8)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"the body is not valid UTF-8 text (bytes {bad.start}-{bad.end - 1} cannot be decoded)"
    if "surrogate" in str(exc):
        return f"a \\u escape names half of a UTF-16 surrogate pair, which is not Unicode text ({exc})"
    return str(exc)


class JSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        content_length = request.META.get("CONTENT_LENGTH") if request is not None else None
        body = read_limited(stream, content_length) if stream is not None else b""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error: {_reason(body, exc)}") from None
        if json_depth_exceeds(data, MAX_BODY_DEPTH):
            raise ParseError(f"JSON parse error: the document nests deeper than {MAX_BODY_DEPTH} levels")
        return data
