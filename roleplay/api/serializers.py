"""Input and output shapes of the roleplay endpoints.

Inputs are strict like the rest of the API (``sessiontree.api.serializers``):
JSON types as documented, unknown body fields refused (``invalid_input``).
What the roleplay layer checks beyond the JSON types (ops that apply to the
state, a reason that is not blank, a review that is pending …) is the
service's: it answers ``invalid_roleplay_entry`` and the other roleplay codes.

Outputs pass ``roleplay.service``'s answers through unchanged; their
serializers document the shapes for the schema. Reducer records keep their
camelCase keys (``reviewId``, ``entryId``), the service's own views are
snake_case, as ``docs/roleplay.md`` describes them.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from roleplay.inspection import PROVENANCE_KINDS
from roleplay.schema import PATCH_OPS, REVIEW_DECISIONS
from sessiontree.api.serializers import (
    ContextSerializer,
    InputSerializer,
    StrictCharField,
    entry_id_field,
    expected_leaf_field,
)

CHARACTER_ID_MAX_LENGTH = 255
MAX_LISTED = 1_000_000
REVIEW_STATUSES = ("pending", "accepted", "rejected")
# RFC 6901: "/"-separated tokens, "~" only as "~0" or "~1" (or "", the whole document: allow_blank).
JSON_POINTER_PATTERN = r"^(/([^~/\x00]|~[01])*)+$"


class PassThrough(serializers.Serializer):
    """An answer of ``roleplay.service``, as it is; the fields document it."""

    def to_representation(self, instance: Any) -> Any:
        return instance


def character_field() -> StrictCharField:
    return StrictCharField(
        required=False,
        max_length=CHARACTER_ID_MAX_LENGTH,
        help_text="Reduce this character's entries instead of the branch's own character (its identity).",
    )


def pointer_field(**kwargs: Any) -> StrictCharField:
    return StrictCharField(
        allow_blank=True,
        validators=[RegexValidator(JSON_POINTER_PATTERN, message="Not a JSON pointer (e.g. /appearance/hair).")],
        **kwargs,
    )


def json_value(**kwargs: Any) -> serializers.JSONField:
    """Any JSON value (null included)."""
    return serializers.JSONField(allow_null=True, **kwargs)


def _with_from(fields: dict[str, serializers.Field], field: serializers.Field, *, before: str) -> dict[str, Any]:
    """``fields`` with ``field`` named ``from`` (a Python keyword) placed before ``before``."""
    ordered: dict[str, Any] = {}
    for name, value in fields.items():
        if name == before:
            ordered["from"] = field
        ordered[name] = value
    return ordered


# --- queries ---------------------------------------------------------------------------------


class AtEntryQuerySerializer(serializers.Serializer):
    leaf = entry_id_field(required=False, help_text="Any entry of the session (any branch); default: the leaf.")
    character = character_field()


class StateQuerySerializer(AtEntryQuerySerializer):
    max_events = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_LISTED,
        help_text="Only the latest N events (events_total counts all).",
    )
    max_memories = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_LISTED,
        help_text="Only the latest N memories (memories_total counts all).",
    )


class DiffQuerySerializer(serializers.Serializer):
    """``from`` (required) and ``to`` (default: the session's leaf): two entries of the session."""

    to = entry_id_field(required=False, help_text="The entry to compare to; default: the session's leaf.")
    character = character_field()

    def get_fields(self) -> dict[str, Any]:
        return _with_from(
            super().get_fields(),
            entry_id_field(help_text="The entry to compare from (e.g. another branch's leaf)."),
            before="to",
        )


# --- bodies ----------------------------------------------------------------------------------


class DecideSerializer(InputSerializer):
    """Accept or reject a pending review."""

    decision = serializers.ChoiceField(choices=list(REVIEW_DECISIONS))
    value = json_value(
        required=False,
        help_text="Accept only: amend the proposed value first (an amendment entry, then the decision as its child).",
    )
    expected_leaf_id = expected_leaf_field()


class AcceptSerializer(InputSerializer):
    """Accept, optionally amending the proposed value first."""

    decision = serializers.ChoiceField(choices=["accept"])
    value = json_value(
        required=False,
        help_text="Amend the proposed value first (an amendment entry, then the decision as its child).",
    )
    expected_leaf_id = expected_leaf_field()


class RejectSerializer(InputSerializer):
    """Reject: no value (there is nothing to amend)."""

    decision = serializers.ChoiceField(choices=["reject"])
    expected_leaf_id = expected_leaf_field()


# The schema of a decision: accept (with an optional value) or reject (without one).
DECIDE_BODY = PolymorphicProxySerializer(
    component_name="ReviewDecision",
    serializers=[AcceptSerializer, RejectSerializer],
    resource_type_field_name=None,
    many=False,
)


class AmendSerializer(InputSerializer):
    """A new value for a pending add/replace review; it stays pending."""

    value = json_value(help_text="The value accepting will apply instead of the proposed one.")
    expected_leaf_id = expected_leaf_field()


class PatchOpSerializer(serializers.Serializer):
    """An RFC 6902 operation on the state document (a JSON object)."""

    op = serializers.ChoiceField(choices=list(PATCH_OPS))
    path = pointer_field(help_text="A JSON pointer into the state document, e.g. /appearance/hair.")
    value = json_value(required=False, help_text="add, replace, test.")

    def get_fields(self) -> dict[str, Any]:
        return _with_from(
            super().get_fields(),
            pointer_field(required=False, help_text="move, copy: the source pointer."),
            before="value",
        )

    def to_internal_value(self, data: Any) -> Any:
        # Checked as an op by the roleplay layer (invalid_roleplay_entry), kept as it was sent.
        if not isinstance(data, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        return data


class _CorrectionCommon(InputSerializer):
    reason = StrictCharField(help_text="Why the record is corrected (required, not blank).")
    correctsCommitId = StrictCharField(  # the /rp JSON's camelCase key
        required=False, help_text="A commit on this branch that this corrects; default: inferred from provenance."
    )
    expected_leaf_id = expected_leaf_field()


def _inline_from() -> serializers.JSONField:
    return json_value(
        required=False,
        help_text="replace/remove: the value believed recorded (the correction fails if the state holds another); "
        "move/copy: the source pointer.",
    )


def _op_first(fields: dict[str, Any]) -> dict[str, Any]:
    """The op's fields (``op``, ``path``, ``value``, ``from``, ``ops``) before the common ones."""
    fields = _with_from(fields, _inline_from(), before="reason")
    first = [name for name in ("op", "path", "value", "from", "ops") if name in fields]
    return {**{name: fields[name] for name in first}, **fields}


class CorrectionInlineSerializer(_CorrectionCommon):
    """One op inline."""

    op = serializers.ChoiceField(choices=list(PATCH_OPS))
    path = pointer_field(help_text="A JSON pointer into the state document, e.g. /appearance/hair.")
    value = json_value(required=False, help_text="add, replace.")

    def get_fields(self) -> dict[str, Any]:
        return _op_first(super().get_fields())


class CorrectionOpsSerializer(_CorrectionCommon):
    """A list of ops, applied in order, all or none."""

    ops = serializers.ListField(child=PatchOpSerializer(), min_length=1, help_text="RFC 6902 operations, in order.")

    def get_fields(self) -> dict[str, Any]:
        return _op_first(super().get_fields())


class CorrectionSerializer(_CorrectionCommon):
    """The ``rp state correct`` JSON, either form (the schema documents the two
    as ``oneOf``; the roleplay layer refuses a body with both or neither)."""

    op = serializers.ChoiceField(choices=list(PATCH_OPS), required=False)
    path = pointer_field(required=False)
    value = json_value(required=False)
    ops = serializers.ListField(child=PatchOpSerializer(), required=False, min_length=1)

    def get_fields(self) -> dict[str, Any]:
        return _op_first(super().get_fields())


CORRECTION_BODY = PolymorphicProxySerializer(
    component_name="Correction",
    serializers=[CorrectionInlineSerializer, CorrectionOpsSerializer],
    resource_type_field_name=None,
    many=False,
)


class ReviewProposalSerializer(serializers.Serializer):
    """A review a repair proposes: one op that changes something."""

    reviewId = StrictCharField()  # the reducer's camelCase key
    op = PatchOpSerializer()
    note = StrictCharField(required=False, allow_null=True)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        return data


class RepairSerializer(InputSerializer):
    """The ``rp turn repair`` JSON: the missing commit of a turn marked incomplete on this branch."""

    turnId = StrictCharField(help_text="An incomplete turn of this branch (see the state's incomplete_turns).")
    ops = serializers.ListField(child=PatchOpSerializer(), required=False)
    events = serializers.ListField(child=json_value(), required=False)
    memories = serializers.ListField(child=json_value(), required=False)
    reviews = serializers.ListField(child=ReviewProposalSerializer(), required=False)
    reason = StrictCharField(required=False, allow_null=True, allow_blank=True)
    expected_leaf_id = expected_leaf_field()


class CheckpointCreateSerializer(InputSerializer):
    """A checkpoint of the current state, appended as the leaf's child."""

    expected_leaf_id = expected_leaf_field()


class ArchiveSerializer(InputSerializer):
    """Archive the branch's character: its state stays readable, writes are refused after it."""

    reason = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=10_000)
    expected_leaf_id = expected_leaf_field()


# --- answers ---------------------------------------------------------------------------------


class ProvenanceRecordSerializer(PassThrough):
    """The entry behind a value (``roleplay.inspection.ProvenanceRecord``)."""

    pointer = serializers.CharField(read_only=True, help_text="Where it was recorded (an array op: at the array).")
    entry_id = serializers.CharField(read_only=True, help_text="The entry that last set it.")
    kind = serializers.ChoiceField(choices=list(PROVENANCE_KINDS), read_only=True)
    commit_id = serializers.CharField(read_only=True, allow_null=True)
    source = serializers.CharField(read_only=True, allow_null=True, help_text="turn, manual-correction or repair.")  # type: ignore[assignment]  # a field named like a Field attribute
    reason = serializers.CharField(read_only=True, allow_null=True)
    corrects_commit_id = serializers.CharField(read_only=True, allow_null=True)
    review_id = serializers.CharField(read_only=True, allow_null=True)
    note = serializers.CharField(read_only=True, allow_null=True)
    turn_id = serializers.CharField(read_only=True, allow_null=True)
    timestamp = serializers.CharField(read_only=True, allow_null=True)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "integer"}]})
class RowKeyField(serializers.Field):
    """A member name, or an index inside an array."""


class StateRowSerializer(PassThrough):
    pointer = serializers.CharField(read_only=True)
    depth = serializers.IntegerField(read_only=True, help_text="0 for the state's top-level keys.")
    key = RowKeyField(read_only=True)
    node = serializers.ChoiceField(choices=["object", "array", "value"], read_only=True)
    value = json_value(read_only=True, help_text="A value row's value; null for an object or array.")
    size = serializers.IntegerField(read_only=True, allow_null=True, help_text="Members or items of a container.")
    provenance = ProvenanceRecordSerializer(read_only=True, allow_null=True)
    inherited = serializers.BooleanField(read_only=True, help_text="The provenance was recorded at an ancestor.")


class AmendmentSerializer(PassThrough):
    value = json_value(read_only=True)
    entryId = serializers.CharField(read_only=True)


class ReviewSerializer(PassThrough):
    """A review record: the reducer's (camelCase) plus its status in the queue."""

    reviewId = serializers.CharField(read_only=True)
    op = serializers.DictField(read_only=True, help_text="The proposed RFC 6902 op.")
    note = serializers.CharField(required=False, allow_null=True)
    commitId = serializers.CharField(required=False, allow_null=True, help_text="The commit that proposed it.")
    entryId = serializers.CharField(required=False, allow_null=True, help_text="The entry that proposed it.")
    amendment = AmendmentSerializer(required=False, help_text="The latest amendment, if any.")
    status = serializers.ChoiceField(choices=list(REVIEW_STATUSES), read_only=True)
    effectiveOp = serializers.DictField(
        read_only=True, help_text="The op accepting applies (with the amended value), or applied."
    )
    amendable = serializers.BooleanField(read_only=True, help_text="Pending, and an add/replace (a value to amend).")
    appliesNow = serializers.BooleanField(
        required=False, help_text="Pending only: whether accepting would apply to the state now."
    )
    applyError = serializers.CharField(required=False, allow_null=True, help_text="Pending only: why not.")
    decision = serializers.ChoiceField(choices=list(REVIEW_DECISIONS), required=False)
    decisionEntryId = serializers.CharField(required=False)
    appliedOp = serializers.DictField(required=False, help_text="Accepted: the op that was applied.")


class IncompleteTurnSerializer(PassThrough):
    turnId = serializers.CharField(read_only=True)
    entryId = serializers.CharField(required=False, allow_null=True, help_text="The turn-status entry.")
    reason = serializers.CharField(required=False, allow_null=True)
    markedAt = serializers.CharField(required=False, allow_null=True, help_text="The status entry's timestamp.")
    repairTemplate = serializers.DictField(
        required=False, help_text="A repairs/ body to fill in (turnId, ops, events, memories, reason)."
    )


class IdentitySerializer(PassThrough):
    """How the branch's character was chosen."""

    character_id = serializers.CharField(read_only=True, allow_null=True)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field named like a Field attribute
        choices=["argument", "identity-entry", "structured-entry"], read_only=True, allow_null=True
    )
    entry_id = serializers.CharField(read_only=True, allow_null=True)
    locked = serializers.BooleanField(read_only=True)
    locked_at_entry_id = serializers.CharField(read_only=True, allow_null=True)


class ArchiveInfoSerializer(PassThrough):
    entryId = serializers.CharField(read_only=True)
    reason = serializers.CharField(read_only=True, allow_null=True)


class StateDetailSerializer(PassThrough):
    """The character's state at an entry (``roleplay.service.inspect_state_detail``):
    the reducer's ``RoleplayState`` with provenance made readable, the state as
    rows, reviews as queue records and incomplete turns with a repair template."""

    session_id = serializers.CharField(read_only=True)
    leaf_entry_id = serializers.CharField(read_only=True, allow_null=True, help_text="The entry reduced at.")
    session_leaf_entry_id = serializers.CharField(
        read_only=True, allow_null=True, help_text="The session's leaf when read (pass it as expected_leaf_id)."
    )
    at_session_leaf = serializers.BooleanField(read_only=True)
    path_length = serializers.IntegerField(read_only=True)
    character_id = serializers.CharField(read_only=True, allow_null=True)
    identity = IdentitySerializer(read_only=True)
    revision = serializers.IntegerField(read_only=True, help_text="Applied commits + applied accepted reviews.")
    state_hash = serializers.CharField(read_only=True)
    state = serializers.DictField(read_only=True, help_text="The state document.")
    rows = StateRowSerializer(many=True, read_only=True, help_text="The state in document order, one row a pointer.")
    provenance = serializers.DictField(
        child=ProvenanceRecordSerializer(), read_only=True, help_text="JSON pointer → the entry that last set it."
    )
    events = serializers.ListField(child=json_value(), read_only=True)
    events_total = serializers.IntegerField(read_only=True)
    memories = serializers.ListField(child=json_value(), read_only=True)
    memories_total = serializers.IntegerField(read_only=True)
    pending_reviews = ReviewSerializer(many=True, read_only=True)
    decided_reviews = ReviewSerializer(many=True, read_only=True)
    incomplete_turns = IncompleteTurnSerializer(many=True, read_only=True)
    archived = serializers.BooleanField(read_only=True)
    archive = ArchiveInfoSerializer(read_only=True, allow_null=True)
    last_commit_id = serializers.CharField(read_only=True, allow_null=True)
    checkpoint_entry_id = serializers.CharField(
        read_only=True, allow_null=True, help_text="The checkpoint the reduction started from."
    )
    problems = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="Entries that could not be used (entryId, code, reason).",
    )
    ignored_entries = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="Entries ignored on purpose (entryId, characterId, reason).",
    )


class DiffEndSerializer(PassThrough):
    entry_id = serializers.CharField(read_only=True, allow_null=True)
    character_id = serializers.CharField(read_only=True, allow_null=True)
    revision = serializers.IntegerField(read_only=True)
    state_hash = serializers.CharField(read_only=True)
    path_length = serializers.IntegerField(read_only=True)


class DiffItemSerializer(PassThrough):
    pointer = serializers.CharField(read_only=True)
    old_value = json_value(required=False, help_text="changed and removed items.")
    new_value = json_value(required=False, help_text="changed and added items.")
    from_provenance = ProvenanceRecordSerializer(many=True, read_only=True)
    to_provenance = ProvenanceRecordSerializer(many=True, read_only=True)
    from_removed_by = ProvenanceRecordSerializer(
        required=False, allow_null=True, help_text="Added items: the entry after the common ancestor that removed it."
    )
    to_removed_by = ProvenanceRecordSerializer(
        required=False, allow_null=True, help_text="Removed items: the entry after the common ancestor that removed it."
    )


class StateDiffSerializer(PassThrough):
    """What differs between the state at two entries (``roleplay.service.diff_states``)."""

    session_id = serializers.CharField(read_only=True)
    character_id = serializers.CharField(read_only=True, allow_null=True)
    common_ancestor_entry_id = serializers.CharField(read_only=True, allow_null=True)
    to = DiffEndSerializer(read_only=True)
    changed = DiffItemSerializer(many=True, read_only=True)
    added = DiffItemSerializer(many=True, read_only=True)
    removed = DiffItemSerializer(many=True, read_only=True)

    def get_fields(self) -> dict[str, Any]:
        return _with_from(super().get_fields(), DiffEndSerializer(read_only=True), before="to")


@extend_schema_serializer(many=False)  # a list action's answer, one object
class ReviewQueueSerializer(PassThrough):
    session_id = serializers.CharField(read_only=True)
    leaf_entry_id = serializers.CharField(read_only=True, allow_null=True, help_text="The entry read at.")
    session_leaf_entry_id = serializers.CharField(
        read_only=True, allow_null=True, help_text="The session's leaf when read (pass it as expected_leaf_id)."
    )
    at_session_leaf = serializers.BooleanField(read_only=True)
    character_id = serializers.CharField(read_only=True, allow_null=True)
    pending = ReviewSerializer(many=True, read_only=True, help_text="In proposal order.")
    decided = ReviewSerializer(many=True, read_only=True, help_text="In decision order.")


class CheckpointRecordSerializer(PassThrough):
    entry_id = serializers.CharField(read_only=True)
    parent_id = serializers.CharField(read_only=True, allow_null=True)
    timestamp = serializers.CharField(read_only=True, allow_null=True)
    character_id = serializers.CharField(read_only=True, allow_null=True)
    revision = serializers.IntegerField(read_only=True, allow_null=True)
    state_hash = serializers.CharField(read_only=True, allow_null=True)
    trigger = serializers.CharField(
        read_only=True, allow_null=True, help_text="compaction: appended after a compaction; null: on demand."
    )
    compaction_entry_id = serializers.CharField(read_only=True, allow_null=True)
    valid = serializers.BooleanField(read_only=True, help_text="Complete, with a hash that matches its state.")
    problem = serializers.CharField(read_only=True, allow_null=True, help_text="Why it is not valid.")


@extend_schema_serializer(many=False)  # a list action's answer, one object
class CheckpointListSerializer(PassThrough):
    session_id = serializers.CharField(read_only=True)
    leaf_entry_id = serializers.CharField(read_only=True, allow_null=True)
    session_leaf_entry_id = serializers.CharField(read_only=True, allow_null=True)
    at_session_leaf = serializers.BooleanField(read_only=True)
    checkpoints = CheckpointRecordSerializer(many=True, read_only=True, help_text="Root first.")


class RoleplayContextInfoSerializer(serializers.Serializer):
    character_id = serializers.CharField(read_only=True, allow_null=True)
    revision = serializers.IntegerField(read_only=True)
    state_hash = serializers.CharField(read_only=True)
    removed_branch_summary_entry_ids = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The branch summaries left out of the copy sent to the model (abandoned branches are not canon).",
    )
    character_view = serializers.CharField(read_only=True, help_text="The Current Character View block.")
    boundary_note = serializers.CharField(read_only=True, help_text="The non-canon boundary note after it.")


class RoleplayContextSerializer(ContextSerializer):
    """What goes to the roleplay model at a leaf (``roleplay.context.build_roleplay_context``):
    the session context's shape, without its branch-summary messages, and one
    custom message last (``customType`` ``pi-roleplay-character-view``) holding
    the character view and the boundary note, which comes from no entry."""

    source_entry_ids = serializers.ListField(
        child=serializers.CharField(allow_null=True),
        read_only=True,
        help_text="The entry each message came from, in order; null for the character view message.",
    )
    roleplay = RoleplayContextInfoSerializer(read_only=True)
