"""OpenAPI generation (drf-spectacular): every operation lists the error
answers it can give, each in the one error shape (``ErrorSerializer``). A
view may describe a status in its own words (``error_descriptions``, e.g.
the roleplay views' 409s)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema

from .serializers import ErrorSerializer

ERROR_DESCRIPTIONS = {
    400: "Bad input: malformed JSON, wrong types, unknown fields, invalid ids (code invalid_input, parse_error …).",
    401: "Not authenticated (send Authorization: Token <key>, or log in).",
    403: "Authenticated but not allowed (someone else's session, a permission, CSRF).",
    404: "No such session or entry (or a session you may not see).",
    409: "Conflict: the leaf moved (leaf_conflict), the entry is completed, the session is closed or exists.",
    413: "The body or the entry is too large.",
    415: "The body is not application/json.",
    502: "The summarizer failed.",
    503: "Storage unavailable: try again later.",
}
SUMMARIZING_ACTIONS = {"navigate", "compact"}


class SessionTreeAutoSchema(AutoSchema):
    def error_codes(self) -> list[int]:
        codes = [400, 401, 503]
        if "{" in self.path:  # a path parameter names something that may not exist
            codes.append(404)
        if self.method not in ("GET", "HEAD", "OPTIONS"):
            codes += [403, 409, 413, 415]
        if getattr(self.view, "action", None) in SUMMARIZING_ACTIONS:
            codes.append(502)
        return sorted(codes)

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        descriptions = {**ERROR_DESCRIPTIONS, **getattr(self.view, "error_descriptions", {})}
        for code in self.error_codes():
            if str(code) not in responses:
                response = self._get_response_for_code(ErrorSerializer, str(code), direction=direction)
                response["description"] = descriptions[code]
                responses[str(code)] = response
        return responses
