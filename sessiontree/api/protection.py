"""Data protection endpoints: a session's legal hold (and, with the erase, a
user's data erased).

- ``POST /api/sessions/{id}/hold/`` with a ``reason`` places the hold,
  ``DELETE`` releases it; both answer the session with its ``legal_hold``
  and need ``sessiontree.place_hold``.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from sessiontree.models import LegalHold
from sessiontree.services import protection

from .serializers import InputSerializer, SessionSerializer, StrictCharField
from .views import CHANNEL, SessionScopedViewSet, parse

PLACE_HOLD = "sessiontree.place_hold"


class LegalHoldSerializer(serializers.Serializer):
    reason = serializers.CharField(read_only=True)
    placed_by = serializers.CharField(read_only=True)
    placed_at = serializers.DateTimeField(read_only=True)


class HeldSessionSerializer(SessionSerializer):
    legal_hold = LegalHoldSerializer(read_only=True, allow_null=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["legal_hold"] = instance.get("legal_hold")
        return data


class HoldSerializer(InputSerializer):
    """Why the session is held."""

    reason = StrictCharField(
        max_length=protection.MAX_REASON,
        # One pattern (the schema shows one): not only blanks, and no NUL.
        validators=[
            RegexValidator(r"^[^\x00]*[^\x00\t\n\x0b\x0c\r ][^\x00]*$", "A reason needs more than blanks (and no NUL).")
        ],
        help_text="Why the session must be kept (not only blanks).",
    )


class SessionHoldViewSet(SessionScopedViewSet):
    """A session's legal hold."""

    queryset = LegalHold.objects.none()
    serializer_class = HoldSerializer

    def check_permissions(self, request: Request) -> None:
        # A hold changes nothing in the session: seeing it (404 otherwise) and
        # the hold permission are what it takes, not moderate_session.
        if not (request.user and request.user.is_authenticated):
            super().check_permissions(request)
        self.session_row()

    def _check(self, request: Request) -> None:
        if not request.user.has_perm(PLACE_HOLD):
            raise PermissionDenied("Legal holds need the sessiontree.place_hold permission.")

    @extend_schema(
        tags=["data protection"],
        summary="Place a legal hold (nothing deletes or erases the session until it is released)",
        request=HoldSerializer,
        responses=HeldSessionSerializer,
    )
    def place(self, request: Request, session_id: str) -> Response:
        self._check(request)
        data = parse(HoldSerializer, request.data)
        session = protection.place_hold(
            session_id=self.session_id, reason=data["reason"], actor=request.user, channel=CHANNEL
        )
        return Response(HeldSessionSerializer(session).data)

    @extend_schema(
        tags=["data protection"],
        summary="Release the legal hold",
        request=None,
        # The session as it is now (a DELETE documents 204 unless told otherwise).
        responses={200: HeldSessionSerializer},
    )
    def release(self, request: Request, session_id: str) -> Response:
        self._check(request)
        session = protection.release_hold(session_id=self.session_id, actor=request.user, channel=CHANNEL)
        return Response(HeldSessionSerializer(session).data)
