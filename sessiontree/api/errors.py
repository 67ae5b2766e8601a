"""One error shape for every answer of the API that is not a success.

``{"error": {"code": "...", "message": "...", "details": {...}}}``

- Kernel and provider errors (``SessionTreeError``) keep their ``code`` and
  take their status from the category table (``exc.http_status``): 400 bad
  input, 413 too large, 404 not found, 409 conflict, 503 unavailable, 502 a
  summarizer failed, 500 corrupt stored data.
- DRF's own errors keep their status: validation 400 (``details`` holds the
  field errors), parse errors 400, 401/403, 404, 405, 406, 415, 429.
- A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is 413; a database failure
  is typed (``providers/db_errors.py``): a write that lost a race inside the
  database after its retries is 409 ``storage_conflict`` with ``Retry-After``,
  a database that cannot be reached (or a node not ready) 503
  ``storage_unavailable``, a commit whose outcome is unknown 503
  ``commit_outcome_unknown``, both with ``Retry-After``; a value a database
  column cannot hold (``DataError``) is 400.
- Django's own 400/403/404/500 pages under ``/api/`` answer in the same shape
  (``config/urls.py`` names the handlers below).

Anything else is a bug: Django's 500 (with its traceback in the log).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import DataError, InterfaceError, OperationalError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from sessiontree.core.errors import SessionTreeError, StorageConflict
from sessiontree.providers import db_errors

from .exceptions import RequestTooLarge

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details if details is not None else {}}}


# DRF exception class → our code, where DRF's own default_code is not the one we document.
_DRF_CODES: dict[type[exceptions.APIException], str] = {
    exceptions.ValidationError: "invalid_input",
    exceptions.ParseError: "parse_error",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
}


def _drf_code(exc: exceptions.APIException) -> str:
    for cls in type(exc).__mro__:
        if cls in _DRF_CODES:
            return _DRF_CODES[cls]
    return str(getattr(exc, "default_code", "error"))


def _message(detail: Any, fallback: str) -> str:
    if isinstance(detail, str):
        return str(detail)
    if isinstance(detail, list) and len(detail) == 1 and isinstance(detail[0], str):
        return str(detail[0])
    return fallback


def _api_exception_response(exc: exceptions.APIException) -> Response:
    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = str(exc.auth_header)  # type: ignore[attr-defined]
    details: Any = {}
    if isinstance(exc, exceptions.ValidationError):
        message = _message(exc.detail, "The request has invalid fields; see details.")
        details = {"fields": exc.detail} if isinstance(exc.detail, dict) else {"errors": exc.detail}
    else:
        message = _message(exc.detail, str(exc.default_detail))
    wait = getattr(exc, "wait", None)
    if isinstance(exc, exceptions.Throttled) and wait is not None:
        headers["Retry-After"] = str(int(wait))
        details = {"wait": int(wait)}
    return Response(error_body(_drf_code(exc), message, details), status=exc.status_code, headers=headers)


def _retry_after(status_code: int, exc: Exception | None = None) -> dict[str, str]:
    """``Retry-After`` for a 503 (the storage may answer again in a moment,
    ``SESSIONTREE_RETRY_AFTER_SECONDS``, default 2) and for a write that lost
    a race inside the storage (``storage_conflict``: 1 second)."""
    if isinstance(exc, StorageConflict):
        return {"Retry-After": str(int(getattr(settings, "SESSIONTREE_CONFLICT_RETRY_AFTER_SECONDS", 1)))}
    if status_code != status.HTTP_503_SERVICE_UNAVAILABLE:
        return {}
    return {"Retry-After": str(int(getattr(settings, "SESSIONTREE_RETRY_AFTER_SECONDS", 2)))}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's ``EXCEPTION_HANDLER``: every handled error in the one shape."""
    if isinstance(exc, OperationalError | InterfaceError) and not isinstance(exc, SessionTreeError):
        # A database error that did not come through this project's backends: typed here alike.
        exc = db_errors.typed(exc, connection.vendor)  # type: ignore[assignment]
    if isinstance(exc, SessionTreeError):
        set_rollback()
        if exc.http_status >= 500:
            logger.warning("%s: %s (%r)", exc.code, exc, exc.__cause__ or exc)
        return Response(
            error_body(exc.code, str(exc), {"category": exc.category}),
            status=exc.http_status,
            headers=_retry_after(exc.http_status, exc),
        )
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge("The request body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE allows.")
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DataError):
        set_rollback()
        logger.warning("A value the database refused: %s", exc)
        return Response(
            error_body("invalid_input", "A value is out of range or too long for the database."),
            status=status.HTTP_400_BAD_REQUEST,
        )
    elif isinstance(exc, SuspiciousOperation):
        exc = exceptions.ParseError(str(exc) or "Bad request.")
    if isinstance(exc, exceptions.APIException):
        set_rollback()
        return _api_exception_response(exc)
    return None


# --- Django's own error pages, in the API's shape under /api/ ------------------------


def is_api_request(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def _with_slash(request: HttpRequest) -> str | None:
    """``request``'s path with a final slash, if that is an endpoint (and the path lacks it)."""
    path = request.path_info
    if path.endswith("/"):
        return None
    try:
        resolve(path + "/", getattr(request, "urlconf", None))
    except Resolver404:
        return None
    return request.path + "/"


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return JsonResponse(error_body("bad_request", "Bad request."), status=400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return JsonResponse(error_body("permission_denied", "Permission denied."), status=403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        slashed = _with_slash(request)
        if slashed is not None:
            message = f"No API endpoint at {request.path}: API paths end with '/', use {slashed}"
            return JsonResponse(error_body("not_found", message, {"did_you_mean": slashed}), status=404)
        return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}."), status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        return JsonResponse(error_body("internal_error", "Internal server error."), status=500)
    return defaults.server_error(request)
