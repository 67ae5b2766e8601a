"""Django's ``CommonMiddleware``, minus the slash redirect under ``/api/``.

With ``APPEND_SLASH`` Django answers a request for ``/api/sessions`` (no
final slash) with a 301 to ``/api/sessions/``. Browsers do well with that;
API clients do not: most follow a 301 after a ``POST`` with a ``GET``, so a
create would silently become a list. Under ``/api/`` such a request is a
JSON 404 that names the path with the slash instead (``errors.page_not_found``);
everywhere else (the admin) Django's redirect stays.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware

from .errors import is_api_request


class CommonMiddleware(DjangoCommonMiddleware):
    def should_redirect_with_slash(self, request: HttpRequest) -> bool:
        if is_api_request(request):
            return False
        return bool(super().should_redirect_with_slash(request))
