"""The request body, whatever its framing, before Django reads it.

A WSGI server hands a ``Transfer-Encoding: chunked`` body over without a
``CONTENT_LENGTH`` (gunicorn does). Django reads ``CONTENT_LENGTH`` bytes of
``wsgi.input``, so such a body arrives empty: a chunked create lost its
fields, a chunked ``reset-leaf`` lost its ``expected_leaf_id`` and moved the
leaf anyway. This middleware reads a chunked body whole (at most
``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes: more is a 413 before the application
runs) and gives it to Django as a body of known length. Bodies with a
``Content-Length`` pass untouched.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from django.conf import settings

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def max_body_bytes() -> int:
    """The largest request body accepted (``DATA_UPLOAD_MAX_MEMORY_SIZE``; 2.5 MiB when unset)."""
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0) or 2_621_440


def is_chunked(environ: dict[str, Any]) -> bool:
    coding = str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower()
    return "chunked" in coding and environ.get("CONTENT_LENGTH") in (None, "")


def _too_large(limit: int, start_response: StartResponse) -> list[bytes]:
    body = orjson.dumps(
        {
            "error": {
                "code": "request_too_large",
                "message": f"The request body is more than the limit of {limit:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE).",
                "details": {"limit": limit},
            }
        }
    )
    start_response(
        "413 Request Entity Too Large",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")],
    )
    return [body]


class WholeRequestBody:
    """WSGI middleware: a chunked request body becomes one of known length."""

    def __init__(self, app: WSGIApp, limit: Callable[[], int] = max_body_bytes) -> None:
        self.app = app
        self.limit = limit

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if is_chunked(environ):
            limit = self.limit()
            stream = environ["wsgi.input"]
            chunks: list[bytes] = []
            size = 0
            while size <= limit:
                chunk = stream.read(min(64 * 1024, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:
                return _too_large(limit, start_response)
            data = b"".join(chunks)
            environ["wsgi.input"] = io.BytesIO(data)
            environ["CONTENT_LENGTH"] = str(len(data))
            environ.pop("HTTP_TRANSFER_ENCODING", None)
        return self.app(environ, start_response)
