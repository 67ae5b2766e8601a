"""The roleplay endpoints under ``/api/sessions/{session_id}/roleplay/``.

Each handler parses its input, calls one function of ``roleplay.service``
(writes with ``channel="api"`` and the request's user as actor, so the
operations layer audits them) and returns its answer. Access is the API's
own (``SessionScopedViewSet``): reads need a session the user may see (404
otherwise), writes one they may change (403). Roleplay errors carry their
category (``roleplay/errors.py``): ``review_not_found`` 404,
``review_already_decided``, ``no_roleplay_character``, ``character_archived``
409, ``invalid_roleplay_entry`` 400; ``leaf_conflict`` 409 when
``expected_leaf_id`` is not the leaf.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from roleplay import service
from roleplay.context import build_roleplay_context
from sessiontree.api.serializers import EntrySerializer, LeafQuerySerializer
from sessiontree.api.views import CHANNEL, ID_PATTERN, SessionScopedViewSet, large_json, parse
from sessiontree.core.context_builder import UNSET
from sessiontree.models import AgentSession

from . import serializers as s

ROLEPLAY_TAG = ["roleplay"]

# Shown in the schema instead of the API's generic texts for these statuses.
ERROR_DESCRIPTIONS = {
    400: (
        "Bad input: wrong JSON types or unknown fields (invalid_input), or input the roleplay layer refuses "
        "(invalid_roleplay_entry: malformed ops, ops that do not apply to the state, a blank reason, an unknown "
        "correctsCommitId, a turn that is not incomplete, a diff of two characters)."
    ),
    404: "No such session or entry (or a session you may not see), or no such review on the branch (review_not_found).",
    409: (
        "Conflict: the leaf is not expected_leaf_id (leaf_conflict), the review was decided already "
        "(review_already_decided), the branch has no character (no_roleplay_character), the character is archived "
        "on the branch (character_archived), or the session is closed (session_closed)."
    ),
}

REVIEW_ID_PARAMETER = OpenApiParameter(
    "review_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A review proposed on the branch."
)


def _leaf(query: dict[str, Any]) -> Any:
    return query.get("leaf", UNSET)


def _created(entry: Any) -> Response:
    return Response(entry, status=status.HTTP_201_CREATED)


class RoleplayScopedViewSet(SessionScopedViewSet):
    # Roleplay answers come from the service, never from a queryset; this only tells the schema generator so.
    queryset = AgentSession.objects.none()
    error_descriptions = ERROR_DESCRIPTIONS
    # Each write's body, by action: what an OPTIONS request describes.
    bodies: dict[str, type[serializers.Serializer]] = {}

    def get_serializer_class(self) -> type[serializers.Serializer]:
        action: str | None = self.action
        if action == "metadata":  # OPTIONS: DRF asks once per write method, with the request cloned to it
            action = self.action_map.get(self.request.method.lower()) if self.request.method else None
        return self.bodies.get(str(action), s.PassThrough)

    def caller(self) -> dict[str, Any]:
        """Who writes, for a roleplay write (whose provider and session are positional)."""
        return {"actor": self.request.user, "channel": CHANNEL}


class RoleplayViewSet(RoleplayScopedViewSet):
    """A session's roleplay character: state, diff, the model's context, corrections, repairs, archive."""

    bodies = {"corrections": s.CorrectionSerializer, "repairs": s.RepairSerializer, "archive": s.ArchiveSerializer}

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="The character's state at the leaf (or at ?leaf=), with provenance",
        parameters=[s.StateQuerySerializer],
        responses=s.StateDetailSerializer,
    )
    @action(detail=False, methods=["get"])
    def state(self, request: Request, session_id: str) -> Response:
        """Derived from the structured entries on the path to the entry; reading never moves the leaf."""
        query = parse(s.StateQuerySerializer, request.query_params)
        detail = service.inspect_state_detail(
            self.provider(),
            self.session_id,
            leaf_entry_id=_leaf(query),
            character_id=query.get("character"),
            max_events=query.get("max_events"),
            max_memories=query.get("max_memories"),
        )
        return Response(s.StateDetailSerializer(detail).data)

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="What differs between the state at two entries (e.g. two branches' leaves)",
        parameters=[s.DiffQuerySerializer],
        responses=s.StateDiffSerializer,
    )
    @action(detail=False, methods=["get"])
    def diff(self, request: Request, session_id: str) -> Response:
        """Pointers changed, added and removed from ``from`` to ``to``, with the entries behind each side."""
        query = parse(s.DiffQuerySerializer, request.query_params)
        diff = service.diff_states(
            self.provider(),
            self.session_id,
            query["from"],
            query.get("to", UNSET),
            character_id=query.get("character"),
        )
        return Response(s.StateDiffSerializer(diff).data)

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="The roleplay model's context at the leaf (or at ?leaf=)",
        parameters=[LeafQuerySerializer],
        responses=s.RoleplayContextSerializer,
    )
    @action(detail=False, methods=["get"])
    def context(self, request: Request, session_id: str) -> HttpResponse:
        """The session's context (``context/``) as the roleplay model gets it: branch summaries left
        out of the copy (an abandoned branch is not canon), then a custom message with the Current
        Character View and the non-canon boundary note (source id null). Stored entries never change."""
        leaf = parse(LeafQuerySerializer, request.query_params).get("leaf", UNSET)
        provider, session_id = self.provider(), self.session_id
        return large_json(
            lambda: s.RoleplayContextSerializer(build_roleplay_context(provider, session_id, leaf_entry_id=leaf)).data
        )

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="Correct the state: a manual-correction commit with a reason",
        request=s.CORRECTION_BODY,
        responses={201: EntrySerializer},
    )
    @action(detail=False, methods=["post"])
    def corrections(self, request: Request, session_id: str) -> Response:
        """One op inline (``op``, ``path``, ``value``, ``from``) or ``ops``, and a ``reason``. Appended at
        the leaf; the tree never moves. The ops must apply to the current state."""
        data = parse(s.CorrectionSerializer, request.data)
        expected = self.expected_leaf_id(data)
        entry = service.correct_state(
            provider=self.provider(),
            session_id=self.session_id,
            payload=data,
            expected_leaf_id=expected,
            **self.caller(),
        )
        return _created(entry)

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="Repair an incomplete turn: its missing commit",
        request=s.RepairSerializer,
        responses={201: EntrySerializer},
    )
    @action(detail=False, methods=["post"])
    def repairs(self, request: Request, session_id: str) -> Response:
        """The turn must be marked incomplete on this branch (see the state's ``incomplete_turns``)."""
        data = parse(s.RepairSerializer, request.data)
        expected = self.expected_leaf_id(data)
        entry = service.repair_turn(
            provider=self.provider(),
            session_id=self.session_id,
            proposal=data,
            expected_leaf_id=expected,
            **self.caller(),
        )
        return _created(entry)

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="Archive the branch's character (read-only from here on this branch)",
        request=s.ArchiveSerializer,
        responses={201: EntrySerializer},
    )
    @action(detail=False, methods=["post"])
    def archive(self, request: Request, session_id: str) -> Response:
        """Branch-local: navigating or forking before the archive entry gives a writable character."""
        data = parse(s.ArchiveSerializer, request.data)
        entry = service.archive(
            provider=self.provider(),
            session_id=self.session_id,
            reason=data.get("reason"),
            expected_leaf_id=self.expected_leaf_id(data),
            **self.caller(),
        )
        return _created(entry)


@extend_schema_view(
    list=extend_schema(
        tags=ROLEPLAY_TAG,
        summary="The checkpoints on the path to the leaf (or to ?leaf=), root first",
        parameters=[s.AtEntryQuerySerializer],
        responses=s.CheckpointListSerializer,
    ),
    create=extend_schema(
        tags=ROLEPLAY_TAG,
        summary="Checkpoint the current state (a child of the leaf)",
        request=s.CheckpointCreateSerializer,
        responses={201: EntrySerializer},
    ),
)
class CheckpointViewSet(RoleplayScopedViewSet):
    """Checkpoints: the reducer starts from the latest valid one on the path."""

    bodies = {"create": s.CheckpointCreateSerializer}

    def list(self, request: Request, session_id: str) -> Response:
        """Each with its character, revision, state hash and whether the reducer may use it;
        read an entry under ``entries/`` for its stored state."""
        query = parse(s.AtEntryQuerySerializer, request.query_params)
        listed = service.list_checkpoints(
            self.provider(), self.session_id, leaf_entry_id=_leaf(query), character_id=query.get("character")
        )
        return Response(s.CheckpointListSerializer(listed).data)

    def create(self, request: Request, session_id: str) -> Response:
        """Changes nothing in the state; allowed for an archived character too."""
        data = parse(s.CheckpointCreateSerializer, request.data)
        entry = service.create_checkpoint(
            provider=self.provider(),
            session_id=self.session_id,
            expected_leaf_id=self.expected_leaf_id(data),
            **self.caller(),
        )
        return _created(entry)


@extend_schema_view(
    list=extend_schema(
        tags=ROLEPLAY_TAG,
        summary="The review queue at the leaf (or at ?leaf=): pending and decided",
        parameters=[s.AtEntryQuerySerializer],
        responses=s.ReviewQueueSerializer,
    ),
    retrieve=extend_schema(
        tags=ROLEPLAY_TAG,
        summary="One review of the branch, pending or decided",
        parameters=[REVIEW_ID_PARAMETER, s.AtEntryQuerySerializer],
        responses=s.ReviewSerializer,
    ),
)
class ReviewViewSet(RoleplayScopedViewSet):
    """Reviews: proposed changes that take effect only when accepted."""

    lookup_field = "review_id"
    lookup_value_regex = ID_PATTERN
    bodies = {"decide": s.DecideSerializer, "amend": s.AmendSerializer}

    def list(self, request: Request, session_id: str) -> Response:
        """Pending reviews in proposal order (with whether accepting would apply now), decided ones in decision order."""
        query = parse(s.AtEntryQuerySerializer, request.query_params)
        queue = service.review_queue(
            self.provider(), self.session_id, leaf_entry_id=_leaf(query), character_id=query.get("character")
        )
        return Response(s.ReviewQueueSerializer(queue).data)

    def retrieve(self, request: Request, session_id: str, review_id: str) -> Response:
        """404 review_not_found when no review with this id was proposed on the branch."""
        query = parse(s.AtEntryQuerySerializer, request.query_params)
        review = service.get_review(
            self.provider(), self.session_id, review_id, leaf_entry_id=_leaf(query), character_id=query.get("character")
        )
        return Response(s.ReviewSerializer(review).data)

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="Accept (optionally with a new value) or reject a pending review",
        parameters=[REVIEW_ID_PARAMETER],
        request=s.DECIDE_BODY,
        responses={201: EntrySerializer},
    )
    @action(detail=True, methods=["post"])
    def decide(self, request: Request, session_id: str, review_id: str) -> Response:
        """Answers the decision entry. With ``value``, an amendment is appended first and the
        decision is its child (both or neither). An accept whose op does not apply is refused."""
        data = parse(s.DecideSerializer, request.data)
        entry = service.decide_review(
            provider=self.provider(),
            session_id=self.session_id,
            review_id=review_id,
            decision=data["decision"],
            value=data.get("value", UNSET),
            expected_leaf_id=self.expected_leaf_id(data),
            **self.caller(),
        )
        return _created(entry)

    @extend_schema(
        tags=ROLEPLAY_TAG,
        summary="Amend a pending review's value (it stays pending)",
        parameters=[REVIEW_ID_PARAMETER],
        request=s.AmendSerializer,
        responses={201: EntrySerializer},
    )
    @action(detail=True, methods=["post"])
    def amend(self, request: Request, session_id: str, review_id: str) -> Response:
        """Only an add or replace review has a value to amend."""
        data = parse(s.AmendSerializer, request.data)
        entry = service.amend_review(
            provider=self.provider(),
            session_id=self.session_id,
            review_id=review_id,
            value=data["value"],
            expected_leaf_id=self.expected_leaf_id(data),
            **self.caller(),
        )
        return _created(entry)
