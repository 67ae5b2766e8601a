"""Input and output shapes of the API.

Input serializers are strict: a field has the JSON type it documents (no
``"1"`` for a boolean, no ``1`` for a string), unknown body fields are
refused, and an absent optional field stays absent (``expected_leaf_id``
absent means "no check", ``null`` means "no leaf yet").

Output serializers describe the answers for the schema. Entries pass through
as the provider returns them (Pi's camelCase dicts, unknown fields kept), so
their serializer only documents the fields every entry has; session meta is
snake_case.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.entries import DEFAULT_MAX_ENTRY_DEPTH, MAX_ENTRY_ID_LENGTH, json_depth_exceeds
from sessiontree.core.errors import InvalidEntry, InvalidSessionId
from sessiontree.core.types import SessionTreeSession
from sessiontree.models import AgentSession
from sessiontree.providers import meta
from sessiontree.providers.factory import provider_kinds
from sessiontree.selectors.export import EXPORT_SCOPES
from sessiontree.selectors.nested_tree import DEFAULT_TREE_DEPTH, MAX_TREE_DEPTH
from sessiontree.services import versions
from sessiontree.services.tree import FORK_POSITIONS

from .entry_schema import NEW_ENTRY_ID_PATTERN, ref, schema_problem

SESSION_ID_MAX_LENGTH = 64
SESSION_STATUSES = tuple(AgentSession.Status.values)  # named StatusEnum in the schema (settings)

# --- strict fields ---------------------------------------------------------------------


# DRF refuses a NUL in any text field: the schema says so.
NO_NUL = RegexValidator(r"^[^\x00]*$", message="Null characters are not allowed.")


# More recent tokens than any context holds: the whole path is kept, nothing to compact.
MAX_KEEP_RECENT_TOKENS = 100_000_000


class StrictCharField(serializers.CharField):
    """A JSON string, nothing else (DRF's own turns numbers into strings)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        if not any(isinstance(v, RegexValidator) for v in kwargs.get("validators", [])):
            kwargs["validators"] = [*kwargs.get("validators", []), NO_NUL]
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """``true`` or ``false`` (DRF's own accepts ``"yes"``, ``1`` …)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer (DRF's own accepts ``"5"`` and ``5.0``)."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class JSONObjectField(serializers.DictField):
    """A JSON object. Entries are checked by the providers (413 ``entry_too_large``
    beyond the limits); ``limit_depth`` refuses other objects (session metadata)
    nested deeper than ``SESSIONTREE_MAX_ENTRY_DEPTH``, which MariaDB's JSON
    columns could not store."""

    default_error_messages = {"too_deep": "Nested deeper than {limit} levels."}

    def __init__(self, *, limit_depth: bool = False, **kwargs: Any) -> None:
        self.limit_depth = limit_depth
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        limit = int(getattr(settings, "SESSIONTREE_MAX_ENTRY_DEPTH", DEFAULT_MAX_ENTRY_DEPTH))
        if self.limit_depth and json_depth_exceeds(value, limit):
            self.fail("too_deep", limit=limit)
        return dict(value)


# The id a client may choose for a new entry (generated ids are 8 hex
# characters, which match it): no '/', no whitespace, so that every new entry
# can be named in a URL path. Entries read from Pi files keep whatever ids they have.
NEW_ENTRY_ID_RULE = "letters, digits, '.', '_', ':' or '-', starting with a letter or digit, at most 64 characters"
_NEW_ENTRY_ID = re.compile(NEW_ENTRY_ID_PATTERN.removeprefix("^").removesuffix("$"))


class TypedObjectField(JSONObjectField):
    """A JSON object that must be the schema's component ``component``
    (``entry_schema``): the edge refuses what the schema refuses, as the
    kernel would (``invalid_entry``: what an entry or message holds is the
    kernel's word; the body's own shape stays ``invalid_input``)."""

    component = ""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        problem = schema_problem(value, self.component)
        if problem is not None:
            raise InvalidEntry(f"{self.field_name}: not a {self.component}: {problem}")
        return value


@extend_schema_field(ref("NewEntry"))
class NewEntryField(TypedObjectField):
    """An entry to be appended: one of Pi's entry types (``NewEntry``), whose
    ``id``, when the client chooses one, follows ``NEW_ENTRY_ID_PATTERN``."""

    component = "NewEntry"

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = JSONObjectField.to_internal_value(self, data)
        entry_id = value.get("id")
        if entry_id is not None and not (isinstance(entry_id, str) and _NEW_ENTRY_ID.fullmatch(entry_id)):
            raise InvalidEntry(f"An entry's id must be {NEW_ENTRY_ID_RULE} (leave it out to get one), not {entry_id!r}")
        return super().to_internal_value(value)


@extend_schema_field(ref("Message"))
class MessageField(TypedObjectField):
    """An agent message (``Message``: typed by role)."""

    component = "Message"


@extend_schema_field(ref("InFlightPatch"))
class InFlightPatchField(TypedObjectField):
    component = "InFlightPatch"


# Pi 1.6.0's rule for a new session id (meta.SESSION_ID_RULE), for the schema.
NEW_SESSION_ID = RegexValidator(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$", message=f"Use {meta.SESSION_ID_RULE}.")


def session_id_field(**kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=SESSION_ID_MAX_LENGTH, validators=[NEW_SESSION_ID, check_session_id], **kwargs)


def check_session_id(value: str) -> None:
    """The id of a session to be created: Pi 1.6.0's rule."""
    try:
        meta.validate_session_id(value, new=True)
    except InvalidSessionId:
        raise serializers.ValidationError(f"Use {meta.SESSION_ID_RULE}.") from None


# A session id to look up: Pi 1.6.0's rule for new sessions, and ids ending
# in '-', '_' or '.' that earlier releases created (never "..").
SESSION_ID_LOOKUP_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9_-]|\.[A-Za-z0-9_-])*\.?$"


def session_lookup_field(**kwargs: Any) -> serializers.RegexField:
    """A session id naming an existing session (a filter, a query)."""
    return serializers.RegexField(
        SESSION_ID_LOOKUP_PATTERN, max_length=SESSION_ID_MAX_LENGTH, validators=[check_lookup_id], **kwargs
    )


def check_lookup_id(value: str) -> None:
    """A session id to look up (the rule for new ids, plus older ids' endings)."""
    try:
        meta.validate_session_id(value)
    except InvalidSessionId as exc:
        raise serializers.ValidationError(str(exc)) from None


def entry_id_field(**kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=MAX_ENTRY_ID_LENGTH, **kwargs)


def expected_leaf_field() -> StrictCharField:
    return entry_id_field(
        required=False,
        allow_null=True,
        help_text=(
            "Optimistic concurrency: the leaf the caller saw (null: no leaf yet). "
            "If the leaf moved meanwhile the call is refused with 409 leaf_conflict and nothing is written."
        ),
    )


class InputSerializer(serializers.Serializer):
    """A request body: unknown fields are refused (a typo must not be silently ignored)."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if isinstance(self.initial_data, dict):
            unknown = sorted(set(self.initial_data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


# --- sessions ----------------------------------------------------------------------------

SESSION_FIELDS = (
    "session_id",
    "provider",
    "title",
    "status",
    "agent_id",
    "user_id",
    "cwd",
    "metadata",
    "root_entry_id",
    "leaf_entry_id",
    "entry_count",
    "branch_count",
    "compaction_count",
    "parent_session_id",
    "created_at",
    "updated_at",
)


class ProviderKindField(serializers.ChoiceField):
    """A storage kind: one the provider registry knows when the serializer is
    made (``provider_kinds``), so a storage added there needs no edit here."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=list(provider_kinds()), **kwargs)


class SessionSerializer(serializers.Serializer):
    """A session's meta (snake_case). ``leaf_entry_id`` is the current position."""

    session_id = serializers.CharField(read_only=True)
    provider = ProviderKindField(read_only=True)
    title = serializers.CharField(read_only=True, allow_null=True)
    status = serializers.ChoiceField(choices=list(SESSION_STATUSES), read_only=True)
    agent_id = serializers.IntegerField(read_only=True, allow_null=True)
    user_id = serializers.CharField(read_only=True, allow_null=True)
    cwd = serializers.CharField(read_only=True, allow_null=True)
    metadata = serializers.DictField(read_only=True)
    root_entry_id = serializers.CharField(read_only=True, allow_null=True)
    leaf_entry_id = serializers.CharField(read_only=True, allow_null=True)
    entry_count = serializers.IntegerField(read_only=True)
    branch_count = serializers.IntegerField(read_only=True, help_text="Tips of the tree (1 for a linear session).")
    compaction_count = serializers.IntegerField(read_only=True)
    parent_session_id = serializers.CharField(
        read_only=True, allow_null=True, help_text="The session this one was forked from."
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)
    etag = serializers.CharField(
        read_only=True,
        help_text=(
            "The session's version, as in the ETag header: send it as If-Match to make a write conditional "
            "(412 precondition_failed if the session changed). Opaque: compare, never parse."
        ),
    )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        session: SessionTreeSession = instance
        data: dict[str, Any] = {name: session.get(name) for name in SESSION_FIELDS}
        data["metadata"] = data["metadata"] or {}
        for name in ("entry_count", "branch_count", "compaction_count"):
            data[name] = data[name] or 0
        data["etag"] = versions.session_etag(session)
        return data


class SessionDetailSerializer(SessionSerializer):
    in_flight_entry_id = serializers.CharField(
        read_only=True, allow_null=True, help_text="The entry being streamed, if any (it is the leaf)."
    )
    children = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Sessions forked from this one that you may see, oldest first.",
    )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["in_flight_entry_id"] = instance.get("in_flight_entry_id")
        data["children"] = list(instance.get("children", []))
        return data


class SessionCreateSerializer(InputSerializer):
    """A new, empty session. Every field is optional."""

    session_id = session_id_field(required=False, help_text="Your own id (letters, digits, '-', '_', '.').")
    provider = ProviderKindField(
        required=False,
        help_text="Where the entries live. Default: the agent's session_provider, else SESSIONTREE_DEFAULT_PROVIDER.",
    )
    agent = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**63 - 1, help_text="The agent's id."
    )
    title = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=255)
    cwd = StrictCharField(required=False, allow_null=True, allow_blank=True)
    user_id = StrictCharField(
        required=False,
        max_length=191,
        help_text="Whose session it is; default you. Another user's needs the moderate_session permission.",
    )
    metadata = JSONObjectField(required=False, limit_depth=True)


class SessionUpdateSerializer(InputSerializer):
    """Fields left out stay as they are."""

    title = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=255)
    metadata = JSONObjectField(required=False, limit_depth=True, help_text="Replaces the whole metadata object.")


class HardDeleteQuerySerializer(serializers.Serializer):
    hard = serializers.ChoiceField(
        choices=["true", "false", "1", "0"],
        required=False,
        help_text="true: remove the session and its entries for good (needs the hard_delete_session permission).",
    )


# --- entries -----------------------------------------------------------------------------


class EntrySerializer(serializers.Serializer):
    """A Pi entry, exactly as stored: the fields below plus those of its type
    (``message``, ``summary``, ``targetId`` …), camelCase, unknown ones kept."""

    type = serializers.CharField(read_only=True)
    id = serializers.CharField(read_only=True)
    parentId = serializers.CharField(read_only=True, allow_null=True)  # Pi's camelCase key
    timestamp = serializers.CharField(required=False, help_text="ISO-8601 UTC with milliseconds and Z.")

    def to_representation(self, instance: Any) -> Any:
        return instance


class EntryAppendSerializer(InputSerializer):
    """Exactly one of ``entry`` or ``message`` (the schema: ``APPEND_BODY``)."""

    entry = NewEntryField(
        required=False, help_text="Any Pi entry; id, parentId and timestamp are filled in when absent."
    )
    message = MessageField(required=False, help_text="An agent message; appended as a message entry.")
    expected_leaf_id = expected_leaf_field()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if ("entry" in attrs) == ("message" in attrs):
            raise serializers.ValidationError("Give exactly one of 'entry' or 'message'.")
        return attrs


class AppendEntrySerializer(InputSerializer):
    """An entry of any of Pi's types."""

    entry = NewEntryField(help_text="id, parentId and timestamp are filled in when absent.")
    expected_leaf_id = expected_leaf_field()


class AppendMessageSerializer(InputSerializer):
    """An agent message, stored as a message entry."""

    message = MessageField()
    expected_leaf_id = expected_leaf_field()


APPEND_BODY = PolymorphicProxySerializer(
    component_name="EntryAppend",
    serializers=[AppendEntrySerializer, AppendMessageSerializer],
    resource_type_field_name=None,
    many=False,
)


MAX_BULK_ENTRIES = 1000


class BulkAppendSerializer(InputSerializer):
    """Several entries at once: all stored or none, each a child of the one before."""

    entries = serializers.ListField(
        child=NewEntryField(),
        min_length=1,
        max_length=MAX_BULK_ENTRIES,
        help_text=(
            f"Entries in order (at most {MAX_BULK_ENTRIES}): the first is a child of the leaf, each next one a "
            'child of the one before; the last becomes the leaf. A message is {"type": "message", "message": …}.'
        ),
    )
    expected_leaf_id = expected_leaf_field()


class BulkAppendResultSerializer(serializers.Serializer):
    entries = EntrySerializer(many=True, read_only=True, help_text="As stored, in order.")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return {"entries": instance}


class InFlightBeginSerializer(InputSerializer):
    """A streaming entry: the leaf until completed; nothing else may be appended meanwhile."""

    entry = NewEntryField(help_text="The entry as far as it is known (e.g. an assistant message, empty content).")
    expected_leaf_id = expected_leaf_field()


class InFlightPatchSerializer(InputSerializer):
    """Changes to the in-flight entry, and whether it is now complete."""

    patch = InFlightPatchField(
        required=False, help_text="Top-level fields merged into the in-flight entry (id, parentId, type are fixed)."
    )
    complete = StrictBooleanField(required=False, default=False, help_text="true: store it for good.")


# At most MAX_TYPES comma-separated names, none blank.
TYPE_FILTER_PATTERN = r"^[ \t]*[^ \t,\x00][^,\x00]*(,[ \t]*[^ \t,\x00][^,\x00]*){0,19}$"


class EntryListQuerySerializer(serializers.Serializer):
    type = StrictCharField(
        required=False,
        validators=[
            RegexValidator(TYPE_FILTER_PATTERN, message="Entry types, comma-separated (at most 20, none blank).")
        ],
        help_text="Only entries of these types (comma-separated, at most 20; or repeat the parameter).",
    )


# --- tree operations -----------------------------------------------------------------------


class SwitchLeafSerializer(InputSerializer):
    """The entry that becomes the leaf."""

    entry_id = entry_id_field()
    expected_leaf_id = expected_leaf_field()


class ResetLeafSerializer(InputSerializer):
    """The next entry will be a new root."""

    expected_leaf_id = expected_leaf_field()


class NavigateSerializer(InputSerializer):
    """Where to go, and whether to summarize the branch left behind."""

    target_id = entry_id_field()
    summarize = StrictBooleanField(
        required=False, default=False, help_text="Summarize the branch being left into a branch_summary entry."
    )
    custom_instructions = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=10_000)
    label = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=255)  # type: ignore[assignment]  # a field named like a Field attribute
    expected_leaf_id = expected_leaf_field()


class NavigateResultSerializer(serializers.Serializer):
    leaf_entry_id = serializers.CharField(allow_null=True, read_only=True)
    editor_text = serializers.CharField(
        allow_null=True, read_only=True, help_text="The text of the user message navigated to, to edit and send again."
    )
    summary_entry = EntrySerializer(allow_null=True, read_only=True)
    label_entry = EntrySerializer(allow_null=True, read_only=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return {name: instance.get(name) for name in ("leaf_entry_id", "editor_text", "summary_entry", "label_entry")}


class ForkSerializer(InputSerializer):
    """Where to fork; the new session copies the path up to there."""

    entry_id = entry_id_field()
    position = serializers.ChoiceField(
        choices=list(FORK_POSITIONS),
        required=False,
        default="before",
        help_text="before: fork at the parent of a user message (to write it again); at: up to and including the entry.",
    )
    new_session_id = session_id_field(required=False, help_text="The new session's id; default: a new UUIDv7.")
    title = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=255)
    expected_leaf_id = expected_leaf_field()


class CompactSerializer(InputSerializer):
    """Compact the active path: its older part becomes a summary (Pi's /compact)."""

    custom_instructions = StrictCharField(
        required=False, allow_null=True, allow_blank=True, max_length=10_000, help_text="Added to the summary prompt."
    )
    keep_recent_tokens = StrictIntegerField(
        required=False,
        min_value=0,
        max_value=MAX_KEEP_RECENT_TOKENS,
        help_text=(
            "Tokens of recent conversation kept verbatim (the rest is summarized); "
            f"default {CompactionSettings().keep_recent_tokens}, Pi's. The admin's compact form sets the same."
        ),
    )
    expected_leaf_id = expected_leaf_field()


class NotCompactedSerializer(serializers.Serializer):
    compacted = serializers.BooleanField(read_only=True, help_text="false: there was nothing to compact.")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return {"compacted": False}


class LabelSerializer(InputSerializer):
    """A label entry is appended at the leaf; the target is never changed."""

    target_id = entry_id_field()
    label = StrictCharField(allow_null=True, allow_blank=True, max_length=255, help_text="null or '' clears it.")  # type: ignore[assignment]  # a field named like a Field attribute
    expected_leaf_id = expected_leaf_field()


class LeafQuerySerializer(serializers.Serializer):
    leaf = entry_id_field(
        required=False,
        allow_blank=True,
        min_length=1,  # in the schema, an id or the empty string (never both branches of its oneOf)
        help_text="Any entry of the session; absent or empty: the session's leaf.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("leaf") == "":
            del attrs["leaf"]  # ``?leaf=`` asks for the session's leaf, as no leaf at all does
        return attrs


class PathSerializer(serializers.Serializer):
    entries = EntrySerializer(many=True, read_only=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return {"entries": instance}


class ModelRefSerializer(serializers.Serializer):
    """The model the context was last set to. Either part is null when the
    entry that set it did not say (an assistant message without ``provider``)."""

    provider = serializers.CharField(read_only=True, allow_null=True)
    modelId = serializers.CharField(read_only=True, allow_null=True)  # Pi's camelCase key


class ContextSerializer(serializers.Serializer):
    """What goes to the LLM at a leaf: Pi's messages, thinking level and model."""

    messages = serializers.ListField(child=MessageField(), read_only=True)
    thinking_level = serializers.CharField(read_only=True)
    model = ModelRefSerializer(allow_null=True, read_only=True)
    source_entry_ids = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="The entry each message came from, in order."
    )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return dict(instance)


class TreeQuerySerializer(serializers.Serializer):
    root = entry_id_field(required=False, help_text="Start at this entry instead of the roots.")  # type: ignore[assignment]  # a field named like a Field attribute
    depth = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_TREE_DEPTH,
        default=DEFAULT_TREE_DEPTH,
        help_text="Levels below the start to include; deeper nodes are left out (see child_count).",
    )


class TreeNodeSerializer(serializers.Serializer):
    id = serializers.CharField(read_only=True)
    type = serializers.CharField(read_only=True)
    role = serializers.CharField(required=False, help_text="A message's role.")
    label = serializers.CharField(required=False, help_text="The entry's current label, if it has one.")  # type: ignore[assignment]  # a field named like a Field attribute
    child_count = serializers.IntegerField(
        read_only=True, help_text="Children in the session; more than listed at the window's edge."
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["children"] = TreeNodeSerializer(many=True, read_only=True)
        return fields

    def to_representation(self, instance: Any) -> Any:
        return instance


class TreeSerializer(serializers.Serializer):
    leaf_entry_id = serializers.CharField(allow_null=True, read_only=True)
    root = serializers.CharField(allow_null=True, read_only=True)  # type: ignore[assignment]  # a field named like a Field attribute
    depth = serializers.IntegerField(read_only=True)
    roots = TreeNodeSerializer(many=True, read_only=True)

    def to_representation(self, instance: Any) -> Any:
        return dict(instance)


class LabelInfoSerializer(serializers.Serializer):
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]  # a field named like a Field attribute
    label_entry_id = serializers.CharField(read_only=True)
    timestamp = serializers.CharField(read_only=True)


class SnapshotSerializer(serializers.Serializer):
    session = SessionSerializer(read_only=True)
    entries = EntrySerializer(many=True, read_only=True)
    active_path = serializers.ListField(child=serializers.CharField(), read_only=True, help_text="Ids, root first.")
    root_entry_ids = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="Entries without a parent, in append order."
    )
    children_by_parent_id = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        read_only=True,
        help_text="Parent id → children in append order.",
    )
    labels_by_entry_id = serializers.DictField(child=LabelInfoSerializer(), read_only=True)
    runtime_context = ContextSerializer(read_only=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = dict(instance)
        data["session"] = SessionSerializer(instance["session"]).data
        return data


class ExportQuerySerializer(serializers.Serializer):
    scope = serializers.ChoiceField(
        choices=list(EXPORT_SCOPES),
        required=False,
        default="full",
        help_text="full: every entry; active: the path to the leaf (or to entry); subtree: entry, below it and above it.",
    )
    entry = entry_id_field(required=False)


class ExportManifestSerializer(serializers.Serializer):
    """What an export handed out: check a downloaded file against ``sha256`` and ``entry_count``."""

    format = serializers.CharField(read_only=True, help_text="pi-jsonl: Pi's session file format.")
    session_id = serializers.CharField(read_only=True)
    scope = serializers.ChoiceField(choices=list(EXPORT_SCOPES), read_only=True)
    entry_id = serializers.CharField(read_only=True, allow_null=True)
    entry_count = serializers.IntegerField(read_only=True, help_text="Entry lines after the header line.")
    bytes = serializers.IntegerField(read_only=True)
    sha256 = serializers.CharField(read_only=True, help_text="SHA-256 (hex) of the JSONL bytes.")
    exporter = serializers.CharField(read_only=True, help_text="Who exported (the audit record's actor).")
    channel = serializers.CharField(read_only=True)
    exported_at = serializers.DateTimeField(read_only=True)

    def to_representation(self, instance: Any) -> Any:
        return dict(instance)


# --- errors ------------------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(read_only=True, help_text="Stable, machine-readable (docs/api.md lists them).")
    message = serializers.CharField(read_only=True)
    details = serializers.DictField(read_only=True)


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer(read_only=True)
