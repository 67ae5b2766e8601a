"""The API's own exception classes.

Kept apart from ``errors.py`` (the exception handler and error pages), which
imports ``rest_framework.views``: loading that module reads DRF's settings
and so imports our parser, which raises these. A parser that imported
``errors.py`` would close an import cycle that breaks whichever of the two
modules is imported first (gunicorn imports the middleware, then ``errors``,
first).
"""

from __future__ import annotations

from rest_framework import exceptions, status


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"
    default_detail = "The request body is too large."

    @classmethod
    def over(cls, size: int | None, limit: int) -> RequestTooLarge:
        told = f"{size:,} bytes" if size is not None else "more than the limit"
        return cls(f"The request body is {told}; the limit is {limit:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE).")
