"""``GET /api/audit/``: the audit trail, read-only, for moderators.

Who: users with ``sessiontree.view_auditrecord`` (and superusers); anyone
else gets 403. Newest first, cursor-paginated on the record's time (then its
id), filtered by ``session``, ``actor``, ``operation`` (one of the
registered operation names, ``services.operations``), ``channel`` and the
time range ``since`` (inclusive) .. ``until`` (exclusive), ISO-8601.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from sessiontree.models import AuditRecord
from sessiontree.services.operations import known_operations

from .pagination import SessionCursorPagination
from .serializers import StrictCharField, session_lookup_field
from .views import parse

VIEW_AUDIT = "sessiontree.view_auditrecord"


class AuditRecordSerializer(serializers.Serializer):
    """One state change: who, from which face, what, where."""

    id = serializers.IntegerField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    actor = serializers.CharField(read_only=True)
    channel = serializers.ChoiceField(choices=list(AuditRecord.Channel.values), read_only=True)
    operation = serializers.CharField(read_only=True)
    session_id = serializers.CharField(read_only=True)
    entry_ids = serializers.ListField(child=serializers.CharField(), read_only=True)
    leaf_before = serializers.CharField(read_only=True, allow_null=True)
    leaf_after = serializers.CharField(read_only=True, allow_null=True)
    detail = serializers.DictField(read_only=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        record: AuditRecord = instance
        return {
            "id": record.pk,
            "created_at": record.created_at.isoformat().replace("+00:00", "Z"),
            "actor": record.actor,
            "channel": record.channel,
            "operation": record.operation,
            "session_id": record.session_id,
            "entry_ids": list(record.entry_ids or []),
            "leaf_before": record.leaf_before,
            "leaf_after": record.leaf_after,
            "detail": dict(record.detail or {}),
        }


class AuditQuerySerializer(serializers.Serializer):
    session = session_lookup_field(required=False)
    actor = StrictCharField(required=False, min_length=1, max_length=191)
    operation = serializers.ChoiceField(choices=[], required=False)
    channel = serializers.ChoiceField(choices=list(AuditRecord.Channel.values), required=False)
    since = serializers.DateTimeField(required=False, help_text="Records at or after this time (ISO-8601).")
    until = serializers.DateTimeField(required=False, help_text="Records before this time (ISO-8601).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Operations are registered by the apps (roleplay adds its own): read when used.
        self.fields["operation"].choices = known_operations()  # type: ignore[attr-defined]


class AuditPagination(SessionCursorPagination):
    # Newest first by the time each record was written; the pk only orders
    # records of the same microsecond (it says nothing about time on a cluster).
    ordering = ("-created_at", "-id")


class AuditViewSet(GenericViewSet):
    queryset = AuditRecord.objects.all()
    serializer_class = AuditRecordSerializer
    permission_classes = [IsAuthenticated]
    pagination_class = AuditPagination

    def get_queryset(self) -> QuerySet[AuditRecord]:
        return AuditRecord.objects.all()

    @extend_schema(
        tags=["moderation"],
        summary="The audit trail, newest first (needs view_auditrecord)",
        parameters=[AuditQuerySerializer],
        responses=AuditRecordSerializer(many=True),
    )
    def list(self, request: Request) -> Response:
        if not request.user.has_perm(VIEW_AUDIT):
            raise PermissionDenied("Reading the audit trail needs the sessiontree.view_auditrecord permission.")
        query = parse(AuditQuerySerializer, request.query_params)
        records = self.get_queryset()
        for name, field in (
            ("session", "session_id"),
            ("actor", "actor"),
            ("operation", "operation"),
            ("channel", "channel"),
        ):
            if name in query:
                records = records.filter(**{field: query[name]})
        if "since" in query:
            records = records.filter(created_at__gte=query["since"])
        if "until" in query:
            records = records.filter(created_at__lt=query["until"])
        page = self.paginate_queryset(records)
        return self.get_paginated_response(AuditRecordSerializer(page, many=True).data)
