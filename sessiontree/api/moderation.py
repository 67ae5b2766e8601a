"""Moderation endpoints: flags (on an entry, the queue, resolving), hide and unhide.

- ``POST /api/sessions/{id}/entries/{entry_id}/flags/``: anyone who may see
  the session reports an entry (``source`` ``user_report``); moderators with
  ``flag_entry`` flag as ``operator`` (their default).
- ``GET /api/flags/``: moderators (``flag_entry``, ``resolve_flag`` or the
  view-all permission) see every flag; everyone else the flags of their own
  sessions. Oldest first, cursor-paginated.
- ``POST /api/flags/{flag_id}/resolve/``: ``resolve_flag``.
- ``POST /api/sessions/{id}/entries/{entry_id}/hide/`` and ``…/unhide/``:
  whoever may change the session (its owner, or ``moderate_session``).
- ``POST /api/sessions/{id}/entries/{entry_id}/erase/``: ``erase_entry``
  (separate from moderation; an owner needs it too, since an erase reaches
  every copy in the lineage), on a session the user may see.

Each write is one call to ``sessiontree.services.moderation`` on the ``api``
channel, audited there.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from sessiontree.core.types import UNSET, Unset
from sessiontree.models import ModerationFlag
from sessiontree.services import erasure, moderation, versions

from .pagination import SessionCursorPagination
from .permissions import VIEW_ALL, sees_all_sessions, visible_sessions
from .serializers import (
    EntrySerializer,
    InputSerializer,
    StrictBooleanField,
    StrictCharField,
    entry_id_field,
    session_lookup_field,
)
from .views import CHANNEL, IdempotentWrites, SessionScopedViewSet, parse

FLAG_ENTRY = "sessiontree.flag_entry"
RESOLVE_FLAG = "sessiontree.resolve_flag"
ERASE_ENTRY = "sessiontree.erase_entry"
MODERATION_TAG = ["moderation"]


def is_moderator(user: Any) -> bool:
    """Sees and works the whole flag queue."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    return bool(user.has_perm(FLAG_ENTRY) or user.has_perm(RESOLVE_FLAG) or sees_all_sessions(user))


# --- serializers ------------------------------------------------------------------------------------


class FlagSerializer(serializers.Serializer):
    """A moderation flag (operator data beside the tree)."""

    id = serializers.IntegerField(read_only=True)
    session_id = serializers.CharField(read_only=True)
    entry_id = serializers.CharField(read_only=True)
    category = serializers.CharField(read_only=True)
    note = serializers.CharField(read_only=True, allow_blank=True)
    source = serializers.CharField(read_only=True, help_text="operator, user_report or classifier:<name>.")  # type: ignore[assignment]  # a field named like a Field attribute
    status = serializers.ChoiceField(choices=list(ModerationFlag.Status.values), read_only=True)
    opened_by = serializers.CharField(read_only=True)
    opened_at = serializers.DateTimeField(read_only=True)
    resolved_by = serializers.CharField(read_only=True, allow_null=True)
    resolved_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def to_representation(self, instance: Any) -> Any:
        return instance if isinstance(instance, dict) else moderation.flag_dict(instance)


class FlagCreateSerializer(InputSerializer):
    category = serializers.ChoiceField(choices=[], help_text="One of SESSIONTREE_MODERATION_CATEGORIES.")
    note = StrictCharField(required=False, allow_blank=True, max_length=moderation.MAX_NOTE)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field named like a Field attribute
        choices=list(moderation.SOURCES),
        required=False,
        help_text="user_report (anyone who sees the session) or operator (needs flag_entry; its default).",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The categories are a setting: read when the request (or the schema) is built.
        self.fields["category"].choices = list(moderation.categories())  # type: ignore[attr-defined]


class FlagResolveSerializer(InputSerializer):
    status = serializers.ChoiceField(choices=list(moderation.RESOLVED_STATUSES))
    note = StrictCharField(required=False, allow_blank=True, max_length=moderation.MAX_NOTE)


class FlagQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=list(ModerationFlag.Status.values), required=False)
    category = serializers.ChoiceField(choices=[], required=False)
    source = StrictCharField(required=False, min_length=1, max_length=64)  # type: ignore[assignment]  # a field named like a Field attribute
    session = session_lookup_field(required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["category"].choices = list(moderation.categories())  # type: ignore[attr-defined]


class HideSerializer(InputSerializer):
    notice = StrictCharField(
        required=False, allow_blank=True, max_length=moderation.MAX_NOTE, help_text="Default: [removed by a moderator]."
    )
    expected_leaf_id = entry_id_field(required=False, allow_null=True)


class UnhideSerializer(InputSerializer):
    expected_leaf_id = entry_id_field(required=False, allow_null=True)


class EraseSerializer(InputSerializer):
    """Why, how far, and whether only to list what would change."""

    reason = StrictCharField(
        max_length=erasure.MAX_REASON,
        # One pattern (the schema shows one): not only blanks, and no NUL.
        validators=[
            RegexValidator(r"^[^\x00]*[^\x00\t\n\x0b\x0c\r ][^\x00]*$", "A reason needs more than blanks (and no NUL).")
        ],
        help_text="Why the text must go (a request, a ticket, a law): kept whole in the audit record.",
    )
    scope = serializers.ChoiceField(
        choices=list(erasure.SCOPES),
        required=False,
        help_text=(
            "all (default): the entry, every copy of it in the session's lineage, the summaries made from it "
            "and the content of context edits that hid or restored it; entry: this session's entry only."
        ),
    )
    dry_run = StrictBooleanField(required=False, help_text="List every place that would change; change nothing.")


class ErasePlaceSerializer(serializers.Serializer):
    session_id = serializers.CharField(read_only=True)
    entry_id = serializers.CharField(read_only=True)
    kind = serializers.ChoiceField(
        choices=list(erasure.KINDS),
        read_only=True,
        help_text="entry (the one named), copy (a copy of it, or a context edit carrying its content), summary.",
    )


class EraseResultSerializer(serializers.Serializer):
    """Every place an erase changed (a dry run: would change), and the files
    outside the store that still hold the entry (sync's sources and exports)."""

    changed = ErasePlaceSerializer(many=True, read_only=True)
    outside = serializers.ListField(child=serializers.CharField(), read_only=True)


# --- on one entry -------------------------------------------------------------------------------------


class EntryModerationViewSet(SessionScopedViewSet):
    """Flag, hide, unhide and erase one entry of a session."""

    queryset = ModerationFlag.objects.none()
    bodies: dict[str, type[serializers.Serializer]] = {
        "flags": FlagCreateSerializer,
        "hide": HideSerializer,
        "unhide": UnhideSerializer,
        "erase": EraseSerializer,
    }

    def get_serializer_class(self) -> type[serializers.Serializer]:
        action_name: str | None = self.action
        if action_name == "metadata":  # OPTIONS: DRF asks once per write method
            action_name = self.action_map.get(self.request.method.lower()) if self.request.method else None
        return self.bodies.get(str(action_name), HideSerializer)

    @extend_schema(
        tags=MODERATION_TAG,
        summary="Flag an entry for moderation (nothing in the tree changes)",
        request=FlagCreateSerializer,
        responses={201: FlagSerializer},
    )
    @action(detail=False, methods=["post"], url_path="flags")
    def flags(self, request: Request, session_id: str, entry_id: str) -> Response:
        data = parse(FlagCreateSerializer, request.data)
        source = data.get("source") or ("operator" if request.user.has_perm(FLAG_ENTRY) else "user_report")
        if source == "operator" and not request.user.has_perm(FLAG_ENTRY):
            raise PermissionDenied("Flagging as an operator needs the sessiontree.flag_entry permission.")
        flag = moderation.flag_entry(
            session_id=self.session_id,
            entry_id=entry_id,
            category=data["category"],
            note=data.get("note"),
            source=source,
            provider=self.provider(),
            actor=request.user,
            channel=CHANNEL,
        )
        return Response(flag, status=status.HTTP_201_CREATED)

    def check_permissions(self, request: Request) -> None:
        # Reporting an entry is not changing the session: whoever sees it may report.
        if getattr(self, "action", None) == "flags":
            if not (request.user and request.user.is_authenticated):
                super().check_permissions(request)
            self.session_row()
            return
        # Erasing is its own permission, not moderation's: seeing the session
        # (404 otherwise, as if it did not exist) and erase_entry.
        if getattr(self, "action", None) == "erase":
            if not (request.user and request.user.is_authenticated):
                super().check_permissions(request)
            self.session_row()
            if not (request.user.is_active and request.user.has_perm(ERASE_ENTRY)):
                raise PermissionDenied("Erasing entries needs the sessiontree.erase_entry permission.")
            return
        super().check_permissions(request)

    @extend_schema(
        tags=MODERATION_TAG,
        summary="Hide a message from the model on the active branch (a context_edit)",
        request=HideSerializer,
        responses={201: EntrySerializer},
    )
    @action(detail=False, methods=["post"], url_path="hide")
    def hide(self, request: Request, session_id: str, entry_id: str) -> Response:
        data = parse(HideSerializer, request.data)
        entry = moderation.hide_entry(
            **self.writing(),
            entry_id=entry_id,
            notice=data.get("notice"),
            expected_leaf_id=data.get("expected_leaf_id", UNSET),
        )
        return Response(entry, status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=MODERATION_TAG,
        summary="Show a hidden message to the model again (a later context_edit restoring it)",
        request=UnhideSerializer,
        responses={201: EntrySerializer},
    )
    @action(detail=False, methods=["post"], url_path="unhide")
    def unhide(self, request: Request, session_id: str, entry_id: str) -> Response:
        data = parse(UnhideSerializer, request.data)
        entry = moderation.unhide_entry(
            **self.writing(), entry_id=entry_id, expected_leaf_id=data.get("expected_leaf_id", UNSET)
        )
        return Response(entry, status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=MODERATION_TAG,
        summary=(
            "Erase an entry in place with every copy and the summaries made from it "
            "(irreversible, audited; needs erase_entry)"
        ),
        description=(
            "Replaces the text of the entry (message content, tool-call arguments, tool results, details, custom "
            'data, summary text) with the marker "[erased]" and keeps type, id, parentId, timestamp and the role, '
            "so every path and context still works. Scope all (the default) also erases every copy of it in the "
            "session's lineage (forks, clones, also after their source was deleted for good), every compaction and "
            "branch summary made from it, and the content of context edits that hid or restored it. Files the "
            "folder sync copied the session from or to that still hold it are named in outside, not changed. "
            "dry_run lists every place that would change and changes nothing. Audited (who, the reason, the "
            "entries, a SHA-256 of their bytes, never the content). 409 session_on_hold when the session or a "
            "session holding a copy is under a legal hold, entry_in_flight for an entry still streaming."
        ),
        request=EraseSerializer,
        responses=EraseResultSerializer,
    )
    @action(detail=False, methods=["post"], url_path="erase")
    def erase(self, request: Request, session_id: str, entry_id: str) -> Response:
        data = parse(EraseSerializer, request.data)
        provider = self.provider()
        expected = self.expected_etag()
        if not isinstance(expected, Unset):
            current = provider.get_session(self.session_id)
            versions.check(expected, versions.session_etag(current or {}), f"Session {self.session_id}")
        result = moderation.erase_entry(
            session_id=self.session_id,
            entry_id=entry_id,
            reason=data["reason"],
            scope=data.get("scope", "all"),
            dry_run=data.get("dry_run", False),
            provider=provider,
            actor=request.user,
            channel=CHANNEL,
        )
        return Response(EraseResultSerializer(result).data)


# --- the queue ----------------------------------------------------------------------------------------


class FlagPagination(SessionCursorPagination):
    """Oldest first; a cursor that cannot be read is a 400, as for sessions."""

    ordering = ("opened_at", "id")


class FlagViewSet(IdempotentWrites, GenericViewSet):
    """The moderation queue across sessions."""

    queryset = ModerationFlag.objects.all()
    serializer_class = FlagSerializer
    permission_classes = [IsAuthenticated]
    pagination_class = FlagPagination
    lookup_field = "pk"
    lookup_url_kwarg = "flag_id"
    lookup_value_regex = r"[0-9]{1,18}"

    def get_queryset(self) -> QuerySet[ModerationFlag]:
        flags = ModerationFlag.objects.all()
        user = self.request.user
        if is_moderator(user):
            return flags
        owned = visible_sessions(user).values_list("session_id", flat=True)
        return flags.filter(session_id__in=owned)

    @extend_schema(
        tags=MODERATION_TAG,
        summary="Moderation flags, oldest first (moderators: all; others: their sessions')",
        parameters=[FlagQuerySerializer],
        responses=FlagSerializer(many=True),
    )
    def list(self, request: Request) -> Response:
        query = parse(FlagQuerySerializer, request.query_params)
        flags = self.get_queryset()
        for name, field in (
            ("status", "status"),
            ("category", "category"),
            ("source", "source"),
            ("session", "session_id"),
        ):
            if name in query:
                flags = flags.filter(**{field: query[name]})
        page = self.paginate_queryset(flags)
        return self.get_paginated_response(FlagSerializer(page, many=True).data)

    @extend_schema(
        tags=MODERATION_TAG,
        summary="Resolve a flag: actioned or dismissed (needs resolve_flag)",
        parameters=[OpenApiParameter("flag_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        request=FlagResolveSerializer,
        responses=FlagSerializer,
    )
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, flag_id: str) -> Response:
        if not request.user.has_perm(RESOLVE_FLAG):
            raise PermissionDenied("Resolving a flag needs the sessiontree.resolve_flag permission.")
        data = parse(FlagResolveSerializer, request.data)
        flag = moderation.resolve_flag(
            flag_id=int(flag_id), status=data["status"], note=data.get("note"), actor=request.user, channel=CHANNEL
        )
        return Response(flag)


__all__ = ["ERASE_ENTRY", "VIEW_ALL", "EntryModerationViewSet", "FlagViewSet", "is_moderator"]
