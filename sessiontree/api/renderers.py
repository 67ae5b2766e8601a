"""JSON out with orjson (the context of a 10,000-entry session is large), and Pi JSONL."""

from __future__ import annotations

import json
from typing import Any

import orjson
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder


def _default(value: Any) -> Any:
    # What DRF's encoder knows beyond JSON (dates, decimals, lazy strings …).
    return JSONEncoder().default(value)


def dumps(data: Any) -> bytes:
    """``data`` as compact UTF-8 JSON. orjson refuses more than 255 nesting
    levels, integers beyond 64 bits and lone surrogates; the standard library
    takes over for those (ASCII with escapes: valid JSON whatever the text)."""
    try:
        return orjson.dumps(data, default=_default)
    except orjson.JSONEncodeError:
        return json.dumps(data, cls=JSONEncoder, separators=(",", ":")).encode("ascii")


class JSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None  # JSON is UTF-8 by definition: no charset parameter

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        return dumps(data)


class NDJSONRenderer(BaseRenderer):
    """Pi JSONL (one JSON value a line). The export streams its lines itself;
    this renderer lets content negotiation accept ``application/x-ndjson``."""

    media_type = "application/x-ndjson"
    format = "jsonl"
    charset = None

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        return dumps(data) + b"\n"
