"""Django's ``CommonMiddleware``, minus the slash redirect under ``/api/``;
and storage failures answered as such on every page.

With ``APPEND_SLASH`` Django answers a request for ``/api/sessions`` (no
final slash) with a 301 to ``/api/sessions/``. Browsers do well with that;
API clients do not: most follow a 301 after a ``POST`` with a ``GET``, so a
create would silently become a list. Under ``/api/`` such a request is a
JSON 404 that names the path with the slash instead (``errors.page_not_found``);
everywhere else (the admin) Django's redirect stays.

A request under ``/api/`` whose ``Authorization`` header names a token
(``Token …`` or ``Bearer …``: the token authentication answers it, 401 when
the token is wrong, and never falls back to the session) passes Django's
authentication and messages middleware by: neither is used on such a request
(the user is the token's, set by DRF; no message is stored), and together
they cost about a tenth of a millisecond of every API call. Every other
request (the admin, the API used with the session cookie and its CSRF
check) goes through them as before. Django's session middleware stays for
every request (``manage.py check --deploy`` looks for it by its path); it
reads nothing unless the session is used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware
from django.utils.html import format_html

from sessiontree.core.errors import SessionTreeError, StorageConflict, StorageUnavailable
from sessiontree.providers import db_errors

from .authentication import TokenAuthentication
from .errors import API_PREFIX, error_body, is_api_request

logger = logging.getLogger(__name__)


_TOKEN_KEYWORDS = frozenset(keyword.lower() for keyword in TokenAuthentication.keywords)


def is_token_api_request(request: HttpRequest) -> bool:
    """An API request the token authentication answers (its header names a
    token scheme, as ``TokenAuthentication.authenticate`` reads it)."""
    if not request.path.startswith(API_PREFIX):
        return False
    words = request.META.get("HTTP_AUTHORIZATION", "").split(None, 1)
    return bool(words) and words[0].lower() in _TOKEN_KEYWORDS


class _NotForTokenAPI:
    """A Django middleware that a token-authenticated API request passes by."""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        middleware: Any = self
        if not middleware.async_mode and is_token_api_request(request):
            return middleware.get_response(request)
        return super().__call__(request)  # type: ignore[misc]


class AuthenticationMiddleware(_NotForTokenAPI, DjangoAuthenticationMiddleware):
    pass


class MessageMiddleware(_NotForTokenAPI, DjangoMessageMiddleware):
    pass


class CommonMiddleware(DjangoCommonMiddleware):
    def should_redirect_with_slash(self, request: HttpRequest) -> bool:
        if is_api_request(request):
            return False
        return bool(super().should_redirect_with_slash(request))


class StorageErrorMiddleware:
    """A storage failure that reaches a view outside DRF (the admin's pages):
    503 (or 409 for a write that lost a race inside the database) with
    ``Retry-After`` and one line saying so, in the API's JSON shape under
    ``/api/``, never Django's 500 page. DRF views answer through the API's
    exception handler before this sees anything."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, OperationalError | InterfaceError) and not isinstance(exception, SessionTreeError):
            exception = db_errors.typed(exception, connection.vendor)  # type: ignore[assignment]
        if not isinstance(exception, StorageConflict | StorageUnavailable):
            return None
        logger.warning("%s on %s: %s (%r)", exception.code, request.path, exception, exception.__cause__)
        retry = "1" if isinstance(exception, StorageConflict) else str(int(settings.SESSIONTREE_RETRY_AFTER_SECONDS))
        if is_api_request(request):
            body = error_body(exception.code, str(exception), {"category": exception.category})
            response: HttpResponse = JsonResponse(body, status=exception.http_status)
        else:
            response = HttpResponse(
                format_html("<h1>{}</h1><p>{}</p>", exception.code.replace("_", " ").capitalize(), str(exception)),
                status=exception.http_status,
            )
        response["Retry-After"] = retry
        return response
