"""gunicorn's settings for this project (read from the working directory:
``gunicorn config.wsgi:application`` picks this file up by itself).

gunicorn refuses some requests before the application sees them (a request
line over ``limit_request_line``: 414; headers over ``limit_request_fields``
or ``limit_request_field_size``: 431; a malformed request: 400) and answers
those with an HTML page. API clients get JSON for every error, so the page
written here is the API's error shape:
``{"error": {"code", "message", "details"}}``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from gunicorn import util

# gunicorn's own limits, kept explicit (its defaults): a request line of at
# most 8190 bytes, 100 header fields of at most 8190 bytes each.
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

_CODES = {
    400: "bad_request",
    403: "permission_denied",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "request_header_fields_too_large",
    500: "internal_error",
    501: "not_implemented",
}


def _json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """What gunicorn writes for a request it refuses, as JSON."""
    code = _CODES.get(status_int) or re.sub(r"[^a-z0-9]+", "_", reason.lower()).strip("_") or "error"
    message = f"{reason}: {mesg}" if mesg else reason
    body = json.dumps({"error": {"code": code, "message": message, "details": {"status": status_int}}}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    util.write_nonblock(sock, head + body)


util.write_error = _json_error


def on_starting(server: Any) -> None:
    """Load the settings before any worker starts: a missing production setting
    (``DJANGO_SECRET_KEY``, ``DJANGO_ALLOWED_HOSTS`` with DEBUG off) is said in
    one line and gunicorn stops with exit code 2, as ``manage.py`` does,
    instead of every worker printing the same traceback."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        settings.INSTALLED_APPS  # noqa: B018 - loads the settings, which check the environment
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"gunicorn: improperly_configured: {exc}\n")
        sys.exit(2)
