"""Data protection endpoints: a session's legal hold, and a user's data erased.

- ``POST /api/sessions/{id}/hold/`` with a ``reason`` places the hold,
  ``DELETE`` releases it; both answer the session with its ``legal_hold``
  and need ``sessiontree.place_hold``.
- ``POST /api/users/{username}/erase/`` (``dry_run``?) erases everything of
  the user (``protection.erase_user_data``) and answers the report;
  superusers only (403 for anyone else, 404 for a user nobody knows).
- ``POST /api/retention/`` (``dry_run``?) applies retention now
  (``protection.apply_retention``, what cron runs) and answers its report;
  needs ``sessiontree.hard_delete_session``.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessiontree.models import LegalHold
from sessiontree.services import protection

from .serializers import InputSerializer, SessionSerializer, StrictBooleanField, StrictCharField
from .views import CHANNEL, IdempotentWrites, SessionScopedViewSet, parse

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


# --- a user's data erased ------------------------------------------------------------------------------


class UserEraseSerializer(InputSerializer):
    dry_run = StrictBooleanField(required=False, help_text="List everything that would be touched; change nothing.")


class ErasedSessionSerializer(serializers.Serializer):
    session_id = serializers.CharField(read_only=True)
    provider = serializers.CharField(read_only=True)
    entries = serializers.IntegerField(read_only=True, help_text="Its entries, deleted with it.")
    files = serializers.ListField(child=serializers.CharField(), read_only=True, help_text="Its file and backups.")


class ErasedCopySerializer(serializers.Serializer):
    session_id = serializers.CharField(read_only=True, help_text="Another user's session (a fork, a clone).")
    entry_id = serializers.CharField(read_only=True)
    kind = serializers.ChoiceField(choices=["entry", "copy", "summary"], read_only=True)


class ErasedFilesSerializer(serializers.Serializer):
    deleted = serializers.ListField(child=serializers.CharField(), read_only=True)
    rewritten = serializers.ListField(child=serializers.CharField(), read_only=True)


class UserErasureReportSerializer(serializers.Serializer):
    user_id = serializers.CharField(read_only=True)
    dry_run = serializers.BooleanField(read_only=True)
    sessions = ErasedSessionSerializer(many=True, read_only=True, help_text="The user's sessions, deleted for good.")
    copies = ErasedCopySerializer(many=True, read_only=True, help_text="Copies in other users' sessions, erased.")
    files = ErasedFilesSerializer(read_only=True)
    rows = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField()),
        read_only=True,
        help_text="Ids of the rows changed or deleted beside the sessions, by table.",
    )
    outside = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="Files outside the store still holding copies."
    )
    counts = serializers.DictField(child=serializers.IntegerField(), read_only=True)


class UserErasureView(IdempotentWrites, APIView):
    """One answer object: the erasure's report."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["data protection"],
        summary="Erase everything of a user (superusers only; irreversible, audited)",
        description=(
            "Every session whose user_id is the user is deleted for good on every provider (its files too); "
            "copies of its entries in other users' forks are erased in place; the flags the user opened keep "
            "no note; audit records keep ids, never content. dry_run answers the same report and changes "
            "nothing. 409 session_on_hold when a session it would touch is under a legal hold (nothing changes); "
            "404 user_not_found for a user with no account and no session."
        ),
        request=UserEraseSerializer,
        responses=UserErasureReportSerializer,
    )
    def post(self, request: Request, username: str) -> Response:
        if not request.user.is_superuser:
            raise PermissionDenied("Erasing a user's data is for superusers.")
        data = parse(UserEraseSerializer, request.data)
        report = protection.erase_user_data(
            user_id=username, dry_run=data.get("dry_run", False), actor=request.user, channel=CHANNEL
        )
        return Response(UserErasureReportSerializer(report).data)


# --- retention ------------------------------------------------------------------------------------------

HARD_DELETE = "sessiontree.hard_delete_session"


class RetentionRunSerializer(InputSerializer):
    dry_run = StrictBooleanField(required=False, help_text="List what would be deleted and skipped; delete nothing.")


class RetentionSkippedSerializer(serializers.Serializer):
    legal_hold = serializers.ListField(child=serializers.CharField(), read_only=True)
    open_flags = serializers.ListField(child=serializers.CharField(), read_only=True)
    fork_inside_its_period = serializers.ListField(child=serializers.CharField(), read_only=True)


class RetentionFailureSerializer(serializers.Serializer):
    session_id = serializers.CharField(read_only=True)
    code = serializers.CharField(read_only=True)
    message = serializers.CharField(read_only=True)
    exit_code = serializers.IntegerField(read_only=True)


class RetentionReportSerializer(serializers.Serializer):
    now = serializers.CharField(read_only=True, help_text="The moment idleness was measured against (UTC).")
    dry_run = serializers.BooleanField(read_only=True)
    considered = serializers.IntegerField(read_only=True, help_text="Sessions idle longer than their period.")
    deleted = serializers.ListField(child=serializers.CharField(), read_only=True)
    skipped = RetentionSkippedSerializer(read_only=True)
    failed = RetentionFailureSerializer(many=True, read_only=True)
    idempotency_keys_purged = serializers.IntegerField(read_only=True)
    counts = serializers.DictField(child=serializers.IntegerField(), read_only=True)


class RetentionView(IdempotentWrites, APIView):
    """One answer object: the retention run's report."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["data protection"],
        summary="Apply retention now: delete for good the sessions idle longer than their period",
        description=(
            "What manage.py apply_retention does (for cron): a session idle longer than its agent's "
            "retention_days (else SESSIONTREE_RETENTION_DAYS; unset: kept) is deleted for good with its file. "
            "Skipped, and listed with the reason: held sessions, sessions with open flags, sessions with a fork "
            "still inside its period. dry_run answers the same report and deletes nothing. Needs "
            "sessiontree.hard_delete_session."
        ),
        request=RetentionRunSerializer,
        responses=RetentionReportSerializer,
    )
    def post(self, request: Request) -> Response:
        if not request.user.has_perm(HARD_DELETE):
            raise PermissionDenied("Retention deletes sessions for good: it needs sessiontree.hard_delete_session.")
        data = parse(RetentionRunSerializer, request.data)
        report = protection.apply_retention(dry_run=data.get("dry_run", False), actor=request.user, channel=CHANNEL)
        return Response(RetentionReportSerializer(report).data)
