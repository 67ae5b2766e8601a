"""OpenAPI generation (drf-spectacular): the schema states what the server does.

- Every operation lists the error answers it can give, each in the one error
  shape (``ErrorSerializer``) and as JSON (an export's errors too). A view
  may describe a status in its own words (``error_descriptions``, e.g. the
  roleplay views' 409s).
- Request bodies refuse unknown fields (``additionalProperties: false``).
- Entries, messages and content blocks are typed (``entry_schema``).
- Headers: ``If-Match`` on every write under a session, ``If-None-Match``
  on the reads that answer ``304``, ``Idempotency-Key`` on every write,
  ``ETag`` on answers that carry one, ``Retry-After`` on ``503``.
- Path parameters carry the patterns their lookups accept; links between
  operations (create a session → append → read the entry …) let a client,
  and Schemathesis' stateful tests, follow one answer into the next call.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import PolymorphicProxySerializer

from .entry_schema import COMPONENTS
from .serializers import SESSION_ID_LOOKUP_PATTERN, ErrorSerializer, InputSerializer

ERROR_DESCRIPTIONS = {
    400: "Bad input: malformed JSON, wrong types, unknown fields, invalid ids (code invalid_input, parse_error …).",
    401: "Not authenticated (send Authorization: Token <key>, or log in).",
    403: "Authenticated but not allowed (someone else's session, a permission, CSRF).",
    404: "No such session or entry (or a session you may not see).",
    405: "The method is not one this path offers (see the Allow header).",
    406: "The Accept header names no media type this operation answers in.",
    409: (
        "Conflict: the leaf moved (leaf_conflict), the entry is completed, the session is closed or exists, "
        "an entry id is taken, or the write made with this Idempotency-Key happened but its answer was not kept (idempotency_key_in_use: read the resource); "
        "or the write lost a race inside the database on every retry and nothing was stored (storage_conflict, with Retry-After: send it again)."
    ),
    412: "If-Match names a version that is not the current one (precondition_failed): read it again.",
    413: "The body or the entry is too large.",
    414: "The request line is too long (the HTTP server's answer).",
    415: "The body is not application/json.",
    422: (
        "The Idempotency-Key was used before with a different request (idempotency_key_reused); "
        "or a search's words are in too many entries to answer within the search time limit "
        "(search_too_broad): add a word or narrow the sessions searched."
    ),
    431: "The request's header fields are too large (the HTTP server's answer).",
    502: "The summarizer failed.",
    503: (
        "Storage unavailable: try again later (after Retry-After seconds); commit_outcome_unknown: the write may "
        "or may not be stored, send it again with the same Idempotency-Key."
    ),
}
SUMMARIZING_ACTIONS = {"navigate", "compact"}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
JSON = "application/json"
# Entity tags ("…", W/"…", comma-separated) or *; a value naming none matches nothing.
TAG_HEADER = {"type": "string"}
ETAG_HEADER = {
    "schema": {"type": "string"},
    "description": "The version of the session or entry in the body (send it as If-Match or If-None-Match).",
}
CONFLICT_RETRY_AFTER_HEADER = {
    "schema": {"type": "integer", "minimum": 0},
    "description": "With storage_conflict only: seconds to wait before sending the same request again.",
}
RETRY_AFTER_HEADER = {
    "schema": {"type": "integer", "minimum": 0},
    "description": "Seconds to wait before trying again.",
}

# Lookups accept ids of every release: Pi 1.6.0's rule for new sessions, and
# ids ending in '-', '_' or '.' that earlier releases created (never "..").
SESSION_ID_LOOKUP = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "pattern": SESSION_ID_LOOKUP_PATTERN,
}
# Any entry id a session can hold but '/', which no path segment can carry:
# new entries follow NEW_ENTRY_ID_PATTERN; entries read from Pi files keep theirs.
ENTRY_ID_LOOKUP = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"^[^/]+$"}
PATH_PARAMETERS = {
    "session_id": (SESSION_ID_LOOKUP, "The session's id."),
    "entry_id": (
        ENTRY_ID_LOOKUP,
        "The entry's id (new entries: 8 hex characters or your own, see NewEntry.id; "
        "entries read from Pi files may hold other characters: percent-encode them).",
    ),
    "review_id": ({"type": "string", "minLength": 1, "pattern": r"^[^/]+$"}, "A review proposed on the branch."),
}


class SessionTreeAutoSchema(AutoSchema):
    def error_codes(self) -> list[int]:
        codes = [400, 401, 405, 406, 414, 431, 503]
        under_session = "{session_id}" in self.path
        writes = self.method not in SAFE_METHODS
        if "{" in self.path or (self.method == "POST" and self.path == "/api/sessions/"):
            codes.append(404)  # a session, an entry, a flag, or (create) an agent that does not exist
        if writes:
            codes += [403, 409, 413, 415, 422]
            if under_session:
                codes.append(412)
        if self.path == "/api/search/":
            codes.append(422)  # search_too_broad
        if getattr(self.view, "action", None) in SUMMARIZING_ACTIONS:
            codes.append(502)
        return sorted(codes)

    def _get_format_parameters(self) -> list[dict[str, Any]]:
        # DRF's ?format= only picks a renderer that the export, which streams
        # Pi JSONL itself, ignores: it changes nothing, so it is not offered.
        return []

    def _map_serializer(self, serializer: Any, direction: Any, bypass_extensions: bool = False) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and isinstance(serializer, InputSerializer):
            schema["additionalProperties"] = False  # InputSerializer refuses unknown fields
        return schema

    def _get_request_body(self, direction: Any = "request") -> dict[str, Any] | None:
        body: dict[str, Any] | None = super()._get_request_body(direction)
        if body is not None and (
            (getattr(self.view, "action", None) == "create" and self.path.endswith("/entries/"))
            or isinstance(self.get_request_serializer(), PolymorphicProxySerializer)
        ):
            body["required"] = True  # a oneOf of bodies (drf-spectacular cannot tell it is needed)
        return body

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        descriptions = {**ERROR_DESCRIPTIONS, **getattr(self.view, "error_descriptions", {})}
        for code in self.error_codes():
            if str(code) not in responses:
                # Errors are JSON whatever the success is (an export's Pi JSONL included).
                response = self._get_response_for_code(ErrorSerializer, str(code), [JSON], direction=direction)
                response["description"] = descriptions[code]
                if code == 503:
                    response["headers"] = {"Retry-After": RETRY_AFTER_HEADER}
                elif code == 409:
                    response["headers"] = {"Retry-After": CONFLICT_RETRY_AFTER_HEADER}
                responses[str(code)] = response
        return responses


class EntrySerializerExtension(OpenApiSerializerExtension):
    """An entry in an answer is the typed union ``Entry`` (``entry_schema``)."""

    target_class = "sessiontree.api.serializers.EntrySerializer"

    def get_name(self, auto_schema: Any, direction: Any) -> str:
        return "Entry"

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return dict(COMPONENTS["Entry"])


# --- the whole schema, once generated ------------------------------------------------------

# Answers whose body is one session or one entry, and so carry its ETag.
SESSION_ANSWERS = {
    ("post", "/api/sessions/"),
    ("get", "/api/sessions/{session_id}/"),
    ("patch", "/api/sessions/{session_id}/"),
    ("post", "/api/sessions/{session_id}/archive/"),
    ("post", "/api/sessions/{session_id}/restore/"),
    ("post", "/api/sessions/{session_id}/switch-leaf/"),
    ("post", "/api/sessions/{session_id}/reset-leaf/"),
    ("post", "/api/sessions/{session_id}/fork/"),
}
ENTRY_ANSWERS = {
    ("get", "/api/sessions/{session_id}/entries/{entry_id}/"),
    ("patch", "/api/sessions/{session_id}/entries/{entry_id}/"),
    ("post", "/api/sessions/{session_id}/in-flight/"),
}
CONDITIONAL_READS = {
    "/api/sessions/{session_id}/": "the session",
    "/api/sessions/{session_id}/entries/{entry_id}/": "the entry",
}
IF_MATCH_ON_TAG = {
    ("patch", "/api/sessions/{session_id}/"),
    ("delete", "/api/sessions/{session_id}/"),
    ("post", "/api/sessions/{session_id}/archive/"),
    ("post", "/api/sessions/{session_id}/restore/"),
    ("patch", "/api/sessions/{session_id}/entries/{entry_id}/"),
    ("post", "/api/sessions/{session_id}/entries/{entry_id}/erase/"),
}

# Query parameters whose schema says more than django-filter's extension can.
QUERY_SCHEMAS = {
    ("get", "/api/sessions/"): {
        "agent": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        # Django refuses a NUL in a text filter: the schema says so.
        "user_id": {"type": "string", "minLength": 1, "maxLength": 191, "pattern": "^[^\\u0000]*$"},
        "search": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^\\u0000]*$"},
    },
}


def _links() -> dict[tuple[str, str, str], dict[str, Any]]:
    """(method, path, status) → the links of that answer."""
    session = {"session_id": "$response.body#/session_id"}
    same_session = {"session_id": "$request.path.session_id"}
    entry = {"session_id": "$request.path.session_id", "entry_id": "$response.body#/id"}
    from_session = {
        "GetSession": ("sessions_retrieve", session),
        "ListEntries": ("sessions_entries_list", session),
        "AppendEntry": ("sessions_entries_create", session),
        "BulkAppend": ("sessions_bulk_append_create", session),
        "BeginInFlight": ("sessions_in_flight_create", session),
        "GetContext": ("sessions_context_retrieve", session),
        "GetTree": ("sessions_tree_retrieve", session),
        "GetPath": ("sessions_path_retrieve", session),
        "Export": ("sessions_export_retrieve", session),
        "UpdateSession": ("sessions_partial_update", session),
    }
    from_entry = {
        "GetEntry": ("sessions_entries_retrieve", entry),
        "PatchInFlight": ("sessions_entries_partial_update", entry),
        "SwitchLeaf": ("sessions_switch_leaf_create", {**same_session}),
        "EntriesAfter": ("sessions_entries_list", {**same_session, "after": "$response.body#/id"}),
        "ContextAtEntry": ("sessions_context_retrieve", {**same_session, "leaf": "$response.body#/id"}),
        "PathToEntry": ("sessions_path_retrieve", {**same_session, "leaf": "$response.body#/id"}),
    }
    return {
        ("post", "/api/sessions/", "201"): from_session,
        ("post", "/api/sessions/{session_id}/fork/", "201"): from_session,
        ("post", "/api/sessions/{session_id}/entries/", "201"): from_entry,
        ("post", "/api/sessions/{session_id}/in-flight/", "201"): {
            "GetEntry": from_entry["GetEntry"],
            "PatchInFlight": from_entry["PatchInFlight"],
        },
    }


def postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular's last hook: the typed components, headers, path
    patterns and links, where every operation's view has had its say."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(COMPONENTS)
    result["components"]["schemas"] = dict(sorted(schemas.items()))
    _one_blank_branch(result)
    links = _links()
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            _parameters(path, method, operation)
            _response_headers(path, method, operation)
            for (link_method, link_path, status), named in links.items():
                if (link_method, link_path) == (method, path) and status in operation["responses"]:
                    operation["responses"][status]["links"] = {
                        name: {"operationId": operation_id, "parameters": dict(parameters)}
                        for name, (operation_id, parameters) in named.items()
                    }
    return result


BLANK = {"type": "string", "maxLength": 0}


def _admits_blank(schema: dict[str, Any]) -> bool:
    if schema.get("type") != "string" or schema.get("minLength", 0) > 0:
        return False
    pattern = schema.get("pattern")
    return pattern is None or re.search(pattern, "") is not None


def _one_blank_branch(node: Any) -> None:
    """drf-spectacular writes a blank-allowing string with a pattern as
    ``oneOf: [the string, {maxLength: 0}]``. When the first branch admits
    the empty string too, ``""`` matches both and so violates the ``oneOf``
    (a validator refuses what the server accepts): that first branch alone
    says it."""
    if isinstance(node, list):
        for item in node:
            _one_blank_branch(item)
        return
    if not isinstance(node, dict):
        return
    branches = node.get("oneOf")
    if isinstance(branches, list) and len(branches) == 2 and branches[1] == BLANK and _admits_blank(branches[0]):
        del node["oneOf"]
        node.update(branches[0])
    for value in node.values():
        _one_blank_branch(value)


def _parameters(path: str, method: str, operation: dict[str, Any]) -> None:
    parameters = operation.setdefault("parameters", [])
    for parameter in parameters:
        if parameter["in"] == "path" and parameter["name"] in PATH_PARAMETERS:
            schema, description = PATH_PARAMETERS[parameter["name"]]
            parameter["schema"] = dict(schema)
            parameter.setdefault("description", description)
    for parameter in parameters:
        override = QUERY_SCHEMAS.get((method, path), {}).get(parameter["name"])
        if parameter["in"] == "query" and override is not None:
            parameter["schema"] = dict(override)
    writes = method not in ("get", "head", "options")
    if writes and "{session_id}" in path:
        whole = (method, path) in IF_MATCH_ON_TAG
        parameters.append(
            {
                "in": "header",
                "name": "If-Match",
                "schema": dict(TAG_HEADER),
                "description": (
                    "Write only if the version is still this one (an ETag you read; * for any): otherwise 412. "
                    + (
                        "Compares the whole tag."
                        if whole
                        else "A tree write compares the leaf the session's tag names (as expected_leaf_id does; "
                        "if both are given they must agree)."
                    )
                ),
            }
        )
    if writes:
        parameters.append(
            {
                "in": "header",
                "name": "Idempotency-Key",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"},
                "description": (
                    "Makes a retried write safe: the same key with the same request answers what the first one "
                    "did (with Idempotency-Replayed: true) instead of writing again."
                ),
            }
        )
    if method == "get" and path in CONDITIONAL_READS:
        parameters.append(
            {
                "in": "header",
                "name": "If-None-Match",
                "schema": dict(TAG_HEADER),
                "description": f"304 (no body) when {CONDITIONAL_READS[path]} is still at one of these versions.",
            }
        )
        operation["responses"]["304"] = {
            "description": f"Not modified: {CONDITIONAL_READS[path]} is still at the version If-None-Match names.",
            "headers": {"ETag": ETAG_HEADER},
        }
    operation["parameters"] = sorted(parameters, key=lambda p: (p["in"] != "path", p["in"], p["name"]))


def _response_headers(path: str, method: str, operation: dict[str, Any]) -> None:
    if (method, path) in SESSION_ANSWERS | ENTRY_ANSWERS:
        for status, response in operation["responses"].items():
            if status in ("200", "201"):
                response.setdefault("headers", {})["ETag"] = ETAG_HEADER
    if method not in ("get", "head", "options"):
        for status, response in operation["responses"].items():
            if status.startswith("2"):
                response.setdefault("headers", {})["Idempotency-Replayed"] = {
                    "schema": {"type": "string", "enum": ["true"]},
                    "description": "Present when this answer is the replay of an earlier request with the same key.",
                }
