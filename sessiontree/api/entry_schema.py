"""Typed entries, messages and content blocks for the OpenAPI schema, and the
validator that holds new entries to the same shapes at the API edge.

- **Stored entries** (``Entry``): one component per entry type of Pi 1.6.0,
  discriminated by ``type``, plus ``OtherEntry`` for any other type (entries
  read from Pi files may have any). Every entry keeps unknown fields
  (``additionalProperties`` stays open).
- **Messages** (``Message``): one component per role, discriminated by
  ``role``, plus ``OtherMessage``; **content blocks** (``ContentBlock``):
  text, image, thinking, toolCall, plus ``OtherContent``. Only ``role`` (and
  a block's ``type``) is required: an in-flight assistant message starts
  empty; the fields a message has must have their types.
- **New entries** (``NewEntry``): what an append accepts, the kernel's rules
  (``sessiontree.core.entries.validate_entry_shape``) written down: one of
  the eleven types (no other), ``id`` optional (``NEW_ENTRY_ID_PATTERN``),
  ``parentId`` optional (it can only be the leaf), ``timestamp`` optional.

The schema dicts are OpenAPI 3.0 (``nullable``); ``validate_new_entry``
reads them as JSON Schema, so the edge refuses exactly what the schema does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from sessiontree.core.types import ENTRY_TYPES

NEW_ENTRY_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    if "$ref" in schema:
        return {"nullable": True, "oneOf": [schema]}
    return {**schema, "nullable": True}


STRING: Schema = {"type": "string"}
NON_EMPTY: Schema = {"type": "string", "minLength": 1}
ANY: Schema = {"description": "Any JSON value."}
OBJECT: Schema = {"type": "object", "additionalProperties": {}}
EPOCH_MS: Schema = {"type": "number", "description": "Milliseconds since 1970 (JavaScript's Date.now())."}
# JSON integers the server keeps exactly: 64 bits. A longer integer is read as
# a float (as JavaScript, Pi's language, reads it), which an integer field
# would then not be: the schema bounds them, so such a value is refused.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _tagged(
    tag: str, value: str, properties: Schema, required: list[str], description: str, *, optional_null: bool = False
) -> Schema:
    """An object whose ``tag`` is ``value``. ``optional_null``: the fields it
    may leave out may also be null (a message being streamed holds
    ``"stopReason": null`` until it ends)."""
    if optional_null:
        properties = {
            name: field if name in required or field.get("nullable") else nullable(field)
            for name, field in properties.items()
        }
    return {
        "type": "object",
        "description": description,
        "properties": {tag: {"type": "string", "enum": [value]}, **properties},
        "required": [tag, *required],
        "additionalProperties": {},
    }


def _union(tag: str, variants: dict[str, str], other: str, description: str) -> Schema:
    return {
        "description": description,
        "oneOf": [*(ref(name) for name in variants.values()), ref(other)],
        "discriminator": {
            "propertyName": tag,
            "mapping": {value: f"#/components/schemas/{name}" for value, name in variants.items()},
        },
    }


def _other(tag: str, known: list[str], description: str, base: Schema | None = None) -> Schema:
    properties = dict((base or {}).get("properties", {}))
    properties[tag] = {"type": "string", "minLength": 1, "not": {"enum": sorted(known)}}
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": [tag, *(base or {}).get("required", [])],
        "additionalProperties": {},
    }


# --- content blocks ------------------------------------------------------------------

CONTENT_BLOCKS = {
    "text": "TextContent",
    "image": "ImageContent",
    "thinking": "ThinkingContent",
    "toolCall": "ToolCallContent",
}
CONTENT: dict[str, Schema] = {
    "TextContent": _tagged(
        "type", "text", {"text": STRING, "textSignature": STRING}, ["text"], "Text.", optional_null=True
    ),
    "ImageContent": _tagged(
        "type",
        "image",
        {"data": {**STRING, "description": "Base64."}, "mimeType": STRING},
        ["data", "mimeType"],
        "An image.",
        optional_null=True,
    ),
    "ThinkingContent": _tagged(
        "type",
        "thinking",
        {"thinking": STRING, "thinkingSignature": STRING, "redacted": {"type": "boolean"}},
        ["thinking"],
        "The model's reasoning.",
        optional_null=True,
    ),
    "ToolCallContent": _tagged(
        "type",
        "toolCall",
        {"id": STRING, "name": STRING, "arguments": OBJECT, "thoughtSignature": STRING},
        ["id", "name"],
        "A tool call the model asks for (arguments may still be streaming).",
        optional_null=True,
    ),
    "OtherContent": _other("type", list(CONTENT_BLOCKS), "A content block of another type, kept as it is."),
    "ContentBlock": _union("type", CONTENT_BLOCKS, "OtherContent", "A content block, by type."),
    "MessageContent": {
        "description": "A string, or a list of content blocks.",
        "oneOf": [STRING, {"type": "array", "items": ref("ContentBlock")}],
    },
}

# --- messages --------------------------------------------------------------------------

MESSAGE_ROLES = {
    "user": "UserMessage",
    "assistant": "AssistantMessage",
    "toolResult": "ToolResultMessage",
    "bashExecution": "BashExecutionMessage",
    "custom": "CustomMessage",
    "system": "SystemMessage",
    "branchSummary": "BranchSummaryMessage",
    "compactionSummary": "CompactionSummaryMessage",
}
USAGE: Schema = {
    "type": "object",
    "description": "Token counts (and costs) of a model call.",
    "properties": {name: {"type": "number"} for name in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")}
    | {"cost": OBJECT},
    "additionalProperties": {},
}
CONTENT_FIELD = ref("MessageContent")
MESSAGES: dict[str, Schema] = {
    "Usage": USAGE,
    "UserMessage": _tagged(
        "role", "user", {"content": CONTENT_FIELD, "timestamp": EPOCH_MS}, [], "What the user said.", optional_null=True
    ),
    "AssistantMessage": _tagged(
        "role",
        "assistant",
        {
            "content": CONTENT_FIELD,
            "api": STRING,
            "provider": STRING,
            "model": STRING,
            "usage": ref("Usage"),
            "stopReason": STRING,
            "errorMessage": STRING,
            "timestamp": EPOCH_MS,
        },
        [],
        "The model's answer: text, thinking and tool calls.",
        optional_null=True,
    ),
    "ToolResultMessage": _tagged(
        "role",
        "toolResult",
        {
            "toolCallId": STRING,
            "toolName": STRING,
            "content": CONTENT_FIELD,
            "details": ANY,
            "isError": {"type": "boolean"},
            "timestamp": EPOCH_MS,
        },
        [],
        "A tool's result for a tool call.",
        optional_null=True,
    ),
    "BashExecutionMessage": _tagged(
        "role",
        "bashExecution",
        {
            "command": STRING,
            "output": STRING,
            "exitCode": {"type": "integer", "nullable": True, "minimum": INT64_MIN, "maximum": INT64_MAX},
            "cancelled": {"type": "boolean"},
            "truncated": {"type": "boolean"},
            "fullOutputPath": STRING,
            "excludeFromContext": {"type": "boolean"},
            "timestamp": EPOCH_MS,
        },
        [],
        "A shell command the user ran (Pi's !command).",
        optional_null=True,
    ),
    "CustomMessage": _tagged(
        "role",
        "custom",
        {
            "customType": STRING,
            "content": CONTENT_FIELD,
            "display": {"type": "boolean"},
            "details": ANY,
            "timestamp": EPOCH_MS,
        },
        [],
        "An extension's message (a custom_message entry in a context).",
        optional_null=True,
    ),
    "SystemMessage": _tagged(
        "role",
        "system",
        {"content": CONTENT_FIELD, "timestamp": EPOCH_MS},
        [],
        "A system prompt (a compaction's checkpoint).",
        optional_null=True,
    ),
    "BranchSummaryMessage": _tagged(
        "role",
        "branchSummary",
        {"summary": STRING, "fromId": STRING, "timestamp": EPOCH_MS},
        [],
        "A branch summary as a message of a context.",
        optional_null=True,
    ),
    "CompactionSummaryMessage": _tagged(
        "role",
        "compactionSummary",
        {"summary": STRING, "tokensBefore": {"type": "number"}, "timestamp": EPOCH_MS},
        [],
        "A compaction's summary as the first message of a context.",
        optional_null=True,
    ),
    "OtherMessage": _other("role", list(MESSAGE_ROLES), "A message of another role, kept as it is."),
    "Message": _union("role", MESSAGE_ROLES, "OtherMessage", "An agent message, by role."),
}

# --- entries -----------------------------------------------------------------------------

ENTRY_TYPE_NAMES = {
    "message": "MessageEntry",
    "thinking_level_change": "ThinkingLevelChangeEntry",
    "model_change": "ModelChangeEntry",
    "compaction": "CompactionEntry",
    "branch_summary": "BranchSummaryEntry",
    "custom": "CustomEntry",
    "custom_message": "CustomMessageEntry",
    "label": "LabelEntry",
    "session_info": "SessionInfoEntry",
    "context_edit": "ContextEditEntry",
    "usage": "UsageEntry",
}
assert set(ENTRY_TYPE_NAMES) == ENTRY_TYPES  # one component per entry type of the kernel

REPLACEMENT: Schema = {
    "type": "object",
    "properties": {"content": CONTENT_FIELD},
    "required": ["content"],
    "additionalProperties": {},
}
# Each type's own fields, and which of them the kernel requires.
TYPED_FIELDS: dict[str, tuple[Schema, list[str], str]] = {
    "message": ({"message": ref("Message")}, ["message"], "An agent message."),
    "thinking_level_change": ({"thinkingLevel": NON_EMPTY}, ["thinkingLevel"], "The thinking level from here on."),
    "model_change": (
        {"provider": NON_EMPTY, "modelId": NON_EMPTY},
        ["provider", "modelId"],
        "The model from here on.",
    ),
    "compaction": (
        {
            "summary": STRING,
            "firstKeptEntryId": nullable(
                {**NON_EMPTY, "description": "The first entry kept; its own id (or null) keeps none."}
            ),
            "tokensBefore": {"type": "integer", "minimum": 0, "maximum": INT64_MAX},
            "details": ANY,
            "fromHook": ANY,
            "usage": nullable(OBJECT),
            "systemMessage": nullable(ref("SystemMessage")),
        },
        ["summary", "firstKeptEntryId", "tokensBefore"],
        "The older part of the path, summarized.",
    ),
    "branch_summary": (
        {"fromId": NON_EMPTY, "summary": STRING, "details": ANY, "fromHook": ANY},
        ["fromId", "summary"],
        "A summary of the branch left behind by a navigation.",
    ),
    "custom": ({"customType": NON_EMPTY, "data": ANY}, ["customType"], "An extension's data; never part of a context."),
    "custom_message": (
        {"customType": NON_EMPTY, "content": CONTENT_FIELD, "display": {"type": "boolean"}, "details": ANY},
        ["customType", "content", "display"],
        "An extension's message; part of the context.",
    ),
    "label": (
        {"targetId": NON_EMPTY, "label": nullable({**STRING, "description": "null or empty: clears the label."})},
        ["targetId"],
        "A label for the entry targetId (the latest one wins).",
    ),
    "session_info": ({"name": nullable(STRING)}, [], "The session's name (empty clears it)."),
    "context_edit": (
        {"targetId": NON_EMPTY, "replacement": nullable(ref("ContextReplacement"))},
        ["targetId", "replacement"],
        "Replaces (or, null, omits) an earlier message in the context.",
    ),
    "usage": (
        {"kind": STRING, "provider": STRING, "model": STRING, "usage": OBJECT, "note": STRING},
        ["kind", "provider", "model", "usage"],
        "A model call's usage that is not a message (a summary, a title).",
    ),
}
STORED_BASE: Schema = {
    "properties": {
        "id": STRING,
        "parentId": nullable({**STRING, "description": "null for a root."}),
        "timestamp": {**STRING, "description": "ISO-8601 UTC with milliseconds and Z."},
    },
    "required": ["id", "parentId", "timestamp"],
}
NEW_BASE: Schema = {
    "properties": {
        "id": {
            **STRING,
            "pattern": NEW_ENTRY_ID_PATTERN,
            "description": "Your own id for the entry; default: 8 hex characters, unique in the session.",
        },
        "timestamp": {**STRING, "description": "Default: now (ISO-8601 UTC with milliseconds and Z)."},
        "parentId": nullable(
            {
                **STRING,
                "description": "Optional: the leaf (in a bulk append, the entry before); any other is "
                "409 leaf_conflict, as a stale expected_leaf_id is.",
            }
        ),
    },
    "required": [],
}


def _entry(entry_type: str, base: Schema) -> Schema:
    fields, required, description = TYPED_FIELDS[entry_type]
    return _tagged("type", entry_type, {**base["properties"], **fields}, [*base["required"], *required], description)


ENTRIES: dict[str, Schema] = {
    "ContextReplacement": REPLACEMENT,
    **{name: _entry(entry_type, STORED_BASE) for entry_type, name in ENTRY_TYPE_NAMES.items()},
    "OtherEntry": _other(
        "type",
        list(ENTRY_TYPE_NAMES),
        "An entry of a type this server does not know (read from a Pi file).",
        STORED_BASE,
    ),
    "Entry": _union("type", ENTRY_TYPE_NAMES, "OtherEntry", "A Pi entry as stored, by type; unknown fields are kept."),
}
NEW_ENTRY_NAMES = {entry_type: f"New{name}" for entry_type, name in ENTRY_TYPE_NAMES.items()}
NEW_ENTRIES: dict[str, Schema] = {
    **{NEW_ENTRY_NAMES[entry_type]: _entry(entry_type, NEW_BASE) for entry_type in ENTRY_TYPE_NAMES},
    "NewEntry": {
        "description": "An entry to append, by type: id and timestamp are filled in when absent, parentId is the leaf.",
        "oneOf": [ref(name) for name in NEW_ENTRY_NAMES.values()],
        "discriminator": {
            "propertyName": "type",
            "mapping": {value: f"#/components/schemas/{name}" for value, name in NEW_ENTRY_NAMES.items()},
        },
    },
}

IN_FLIGHT_PATCH: Schema = {
    "type": "object",
    "description": "Top-level fields to merge into the in-flight entry; id, parentId and type cannot change.",
    "properties": {"message": ref("Message"), "content": CONTENT_FIELD, "timestamp": STRING},
    "additionalProperties": {},
}

COMPONENTS: dict[str, Schema] = {**CONTENT, **MESSAGES, **ENTRIES, **NEW_ENTRIES, "InFlightPatch": IN_FLIGHT_PATCH}


# --- the edge's validator ---------------------------------------------------------------------


def _json_schema(schema: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema: ``nullable`` becomes a null alternative."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _json_schema(value) for key, value in schema.items() if key not in ("nullable", "discriminator")}
    if schema.get("nullable"):
        if "type" in converted:
            converted["type"] = [converted["type"], "null"]
            if "enum" in converted:
                converted["enum"] = [*converted["enum"], None]
        elif converted.keys() - {"description"}:
            return {"anyOf": [{"type": "null"}, converted]}
    return converted


@cache
def _validator(name: str) -> Draft202012Validator:
    text = json.dumps({"$defs": _json_schema(COMPONENTS), "$ref": f"#/$defs/{name}"})
    return Draft202012Validator(json.loads(text.replace("#/components/schemas/", "#/$defs/")))


def _target(reference: str) -> str:
    return reference.rsplit("/", 1)[-1]


def _tag_is(schema: Schema | None, tag: str, allowed: Schema) -> bool:
    """``schema`` is an object that requires ``tag``, whose schema is ``allowed``."""
    return bool(
        schema is not None
        and schema.get("type") == "object"
        and tag in schema.get("required", [])
        and schema.get("properties", {}).get(tag) == allowed
    )


def _by_tag(union: Schema, components: dict[str, Schema]) -> Schema:
    """A union (``oneOf`` with a ``discriminator``) as ``if``/``then``/``else``
    on its tag, which the compiled check runs without trying every variant
    (a tried variant that fails raises inside fastjsonschema's code: most of
    the check's time on a message). The same values pass: each variant is an
    object that requires the tag with its one value, the other (when there is
    one) requires a tag that is none of them, so at most one variant can match
    and the tag names it. The tags are halved at each level (nested ``if``s
    become nested Python blocks, of which Python allows 20). A union that is
    not so stays as it is."""
    discriminator, members = union.get("discriminator"), union.get("oneOf")
    if not discriminator or not members:
        return union
    tag, mapping = discriminator["propertyName"], discriminator["mapping"]
    others = [member["$ref"] for member in members if member.get("$ref") not in mapping.values()]
    if len(members) != len(mapping) + len(others) or len(others) > 1:
        return union
    for value, reference in mapping.items():
        if not _tag_is(components.get(_target(reference)), tag, {"type": "string", "enum": [value]}):
            return union
    otherwise: Schema = {"not": {}}
    if others:
        other = components.get(_target(others[0]))
        if not _tag_is(other, tag, {"type": "string", "minLength": 1, "not": {"enum": sorted(mapping)}}):
            return union
        otherwise = {"$ref": others[0]}

    def one_of(tags: Iterable[str]) -> Schema:
        return {"properties": {tag: {"enum": list(tags)}}, "required": [tag]}

    def pick(variants: list[tuple[str, str]]) -> Schema:
        # The tag is one of ``variants``' (or the value is no object, which every variant refuses).
        if len(variants) == 1:
            return {"$ref": variants[0][1]}
        half = len(variants) // 2
        return {
            "if": one_of(value for value, _ in variants[:half]),
            "then": pick(variants[:half]),
            "else": pick(variants[half:]),
        }

    rest = {key: value for key, value in union.items() if key not in ("oneOf", "discriminator")}
    dispatch = {"if": one_of(mapping), "then": pick(list(mapping.items())), "else": otherwise}
    return {**rest, "allOf": [dispatch]}


@cache
def _fast_check(name: str) -> Callable[[Any], Any]:
    """``name``'s schema compiled to Python by fastjsonschema (draft 7: every
    keyword the components use means the same there, and nothing is filled
    in): about ten times quicker than walking the schema, but its errors do
    not say what is wrong as well as jsonschema's. Unions dispatch on their
    tag (``_by_tag``)."""
    return compiled_check(name, by_tag=True)


def compiled_check(name: str, *, by_tag: bool) -> Callable[[Any], Any]:
    """``name``'s compiled check, with its unions as ``oneOf`` or dispatched on their tag."""
    components = {key: _by_tag(schema, COMPONENTS) for key, schema in COMPONENTS.items()} if by_tag else COMPONENTS
    schema = json.loads(json.dumps(_json_schema(components)).replace("#/components/schemas/", "#/definitions/"))
    return fastjsonschema.compile(
        {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": schema, "$ref": f"#/definitions/{name}"},
        use_default=False,
        use_formats=False,
    )


def schema_problem(value: Any, name: str) -> str | None:
    """Why ``value`` is not a ``name`` (a component above), or ``None`` when it is one.

    The compiled check answers for a valid value (every request that is
    accepted); only a value it refuses is walked by jsonschema, which has
    the last word and names the problem (tests/api/test_entry_schema_check.py:
    the compiled check never accepts what jsonschema refuses)."""
    try:
        _fast_check(name)(value)
    except fastjsonschema.JsonSchemaException:
        pass
    else:
        return None
    error = best_match(_validator(name).iter_errors(value))
    if error is None:
        return None
    where = "".join(f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    return f"{where.lstrip('.') or 'the value'}: {error.message}"
