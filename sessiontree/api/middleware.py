"""Django's ``CommonMiddleware``, minus the slash redirect under ``/api/``;
and storage failures answered as such on every page.

With ``APPEND_SLASH`` Django answers a request for ``/api/sessions`` (no
final slash) with a 301 to ``/api/sessions/``. Browsers do well with that;
API clients do not: most follow a 301 after a ``POST`` with a ``GET``, so a
create would silently become a list. Under ``/api/`` such a request is a
JSON 404 that names the path with the slash instead (``errors.page_not_found``);
everywhere else (the admin) Django's redirect stays.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware
from django.utils.html import format_html

from sessiontree.core.errors import SessionTreeError, StorageConflict, StorageUnavailable
from sessiontree.providers import db_errors

from .errors import error_body, is_api_request

logger = logging.getLogger(__name__)


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
