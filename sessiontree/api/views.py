"""The API's viewsets: sessions (with their tree operations as actions) and entries.

Each handler parses its input with an input serializer, calls one function
of ``sessiontree.services`` (writes: ``channel="api"``, the request's user as
actor) or one provider/selector read, and serializes the result. Access rules
live in ``permissions.py``; errors become JSON in ``errors.py``.

Nested resources under ``sessions/{session_id}/`` subclass
``SessionScopedViewSet``: it finds the session the user may see (404
otherwise), checks writes (403), and hands out the session's provider.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.http import HttpResponse, QueryDict, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from sessiontree import services
from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.context_builder import UNSET
from sessiontree.core.errors import (
    NOT_FOUND,
    LeafConflict,
    PreconditionFailed,
    SessionAlreadyExists,
    SessionNotFound,
    SessionTreeError,
)
from sessiontree.core.pi_session_file import gc_paused
from sessiontree.core.types import Unset
from sessiontree.models import Agent, AgentSession
from sessiontree.providers import meta
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider
from sessiontree.selectors.nested_tree import nested_tree
from sessiontree.selectors.sessions import session_detail
from sessiontree.services import idempotency, versions
from sessiontree.services.versions import ExpectedTags

from . import conditional
from . import serializers as s
from .authentication import prefetched_session
from .filters import SessionFilter
from .pagination import EntryCursorPagination, SessionCursorPagination
from .permissions import (
    SessionAccess,
    SessionRef,
    find_visible_session,
    may_act_for,
    may_hard_delete,
    visible_session,
    visible_sessions,
)
from .renderers import JSONRenderer, NDJSONRenderer, dumps

CHANNEL = "api"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")
ID_PATTERN = "[^/]+"


def large_json(build: Callable[[], Any]) -> HttpResponse:
    """A large read answer (a context, a path, a snapshot of thousands of
    entries), serialized and encoded with the cyclic garbage collector paused,
    its objects freed before the collector resumes: a collection over them,
    which resuming would otherwise start at once, costs a third of the read."""
    with gc_paused():
        body = dumps(build())
    return HttpResponse(body, content_type=JSONRenderer.media_type)


class AgentNotFound(SessionTreeError):
    """A body names an agent that does not exist."""

    code = "agent_not_found"
    category = NOT_FOUND


class SessionIdUnavailable(SessionAlreadyExists):
    """A session id the caller asked for that is taken: the same answer whoever
    holds it, so that it never tells whether another user's session exists."""

    code = "session_id_unavailable"


@contextmanager
def id_unavailable_if_taken() -> Iterator[None]:
    try:
        yield
    except SessionAlreadyExists:
        raise SessionIdUnavailable(
            "This session id cannot be used; choose another, or leave session_id out to get a new one"
        ) from None


def with_session_etag(data: dict[str, Any], *, status_code: int = status.HTTP_200_OK) -> Response:
    """An answer whose body is one session: its tag in ``ETag`` (it is the body's ``etag`` too)."""
    return Response(data, status=status_code, headers={"ETag": data["etag"]})


def with_entry_etag(entry: dict[str, Any], *, status_code: int = status.HTTP_200_OK) -> Response:
    """An answer whose body is one entry: its tag in ``ETag``."""
    return Response(entry, status=status_code, headers={"ETag": versions.entry_etag(entry)})


def not_modified(tag: str) -> Response:
    return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tag})


def parse(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """``data`` validated by ``serializer_class`` (400 with the field errors otherwise).

    A query parameter given empty (``?leaf=``) is refused unless its field
    allows blanks: DRF reads an empty form value of an optional field as
    "absent", which would quietly answer for the default instead."""
    serializer = serializer_class(data=data)
    if isinstance(data, QueryDict):
        blank = {
            name: ["May not be empty."]
            for name, field in serializer.fields.items()
            if name in data and data.get(name) == "" and not getattr(field, "allow_blank", False)
        }
        if blank:
            raise ValidationError(blank)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class IdempotentWrites:
    """Writes of a viewset take the ``Idempotency-Key`` header (docs/api.md,
    "Idempotency"): the operation the request calls is keyed with it, and an
    answer replayed from an earlier request with the key says so
    (``Idempotency-Replayed: true``)."""

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        key = request.headers.get("Idempotency-Key") if request.method not in SAFE_METHODS else None
        usable = key if key is not None and IDEMPOTENCY_KEY.fullmatch(key) else None
        with idempotency.keyed_request(usable):
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        key = request.headers.get("Idempotency-Key")
        if request.method not in SAFE_METHODS and key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
            raise ValidationError({"Idempotency-Key": ["1 to 255 printable ASCII characters (no spaces)."]})

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if idempotency.replayed() and getattr(response, "status_code", 500) < 300:
            response["Idempotency-Replayed"] = "true"
        return response


class SessionScopedViewSet(IdempotentWrites, GenericViewSet):
    """A viewset whose URLs hold ``session_id``: the session is looked up once
    among those the user may see (``SessionNotFound``, 404, otherwise: an
    unseen session looks exactly like a missing one)."""

    permission_classes = [SessionAccess]

    def session_row(self) -> SessionRef:
        cached: SessionRef | None = getattr(self, "_session_row", None)
        if cached is not None:
            return cached
        session_id = meta.validate_session_id(self.kwargs["session_id"])
        # Read with the request's token when it was one (authentication.py), else here.
        prefetched, found = prefetched_session(self.request, session_id)
        if prefetched:
            row = visible_session(self.request.user, session_id, found)
        else:
            row = find_visible_session(self.request.user, session_id)
        if row is None:
            raise SessionNotFound(f"Session {session_id} not found")
        self._session_row = row
        return row

    @property
    def session_id(self) -> str:
        return self.session_row().session_id

    def provider(self) -> SessionTreeProvider:
        return get_provider(self.session_row().provider)

    def writing(self) -> dict[str, Any]:
        """The keyword arguments every service call of this request takes."""
        return {
            "session_id": self.session_id,
            "provider": self.provider(),
            "actor": self.request.user,
            "channel": CHANNEL,
        }

    # --- conditional requests (If-Match, If-None-Match; docs/api.md "Versions") -------------

    def if_match(self) -> ExpectedTags | None:
        """What the request's ``If-Match`` expects, ``None`` without one."""
        if not hasattr(self, "_if_match"):
            self._if_match = conditional.if_match(self.request)
        return self._if_match

    def expected_leaf_id(self, data: dict[str, Any]) -> str | None | Unset:
        """A tree write's expected leaf: the body's ``expected_leaf_id``, the
        leaf of the ``If-Match`` tag, or both when they agree (400 otherwise).
        ``data`` loses ``expected_leaf_id`` (roleplay payloads go on as they are)."""
        body = data.pop("expected_leaf_id", UNSET)
        tags = self.if_match()
        if tags is None:
            return body
        tag_leaf = tags.expected_leaf_id()
        self._leaf_from_tag = tag_leaf
        return versions.check_leaf_agrees(body, tag_leaf)

    def expected_etag(self) -> ExpectedTags | Unset:
        """A write to the session itself (or to one entry) compares the whole tag."""
        tags = self.if_match()
        return UNSET if tags is None else tags

    def handle_exception(self, exc: Exception) -> Response:
        # The leaf of an If-Match tag was checked as expected_leaf_id: a leaf
        # that moved is a stale tag (412); a conflict at the expected leaf
        # (an entry still streaming there) stays a conflict (409).
        tag_leaf = getattr(self, "_leaf_from_tag", UNSET)
        if isinstance(exc, LeafConflict) and not isinstance(tag_leaf, Unset):
            session = self.provider().get_session(self.session_id)
            if session is None or session["leaf_entry_id"] != tag_leaf:
                exc = PreconditionFailed(
                    f"Session {self.session_id} is no longer at the version If-Match names (its leaf moved); "
                    "read it again for its ETag"
                )
        return super().handle_exception(exc)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # An error is JSON even where the success would have been Pi JSONL.
        if getattr(response, "status_code", 200) >= 400 and not isinstance(
            getattr(request, "accepted_renderer", None), JSONRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


SESSION_TAG = ["sessions"]
TREE_TAG = ["tree"]
ENTRY_TAG = ["entries"]


@extend_schema_view(
    list=extend_schema(
        tags=SESSION_TAG, summary="List the sessions you may see (newest first)", responses=s.SessionSerializer
    ),
    create=extend_schema(
        tags=SESSION_TAG, summary="Create a session", request=s.SessionCreateSerializer, responses=s.SessionSerializer
    ),
    retrieve=extend_schema(tags=SESSION_TAG, summary="A session with its lineage", responses=s.SessionDetailSerializer),
    partial_update=extend_schema(
        tags=SESSION_TAG,
        summary="Change title or metadata",
        request=s.SessionUpdateSerializer,
        responses=s.SessionSerializer,
    ),
    destroy=extend_schema(
        tags=SESSION_TAG,
        summary="Delete a session (soft; ?hard=true for good)",
        parameters=[s.HardDeleteQuerySerializer],
        responses={204: None},
    ),
)
class SessionViewSet(SessionScopedViewSet):
    """Sessions and the operations on their tree."""

    queryset = AgentSession.objects.all()
    serializer_class = s.SessionSerializer
    lookup_field = "session_id"
    lookup_value_regex = ID_PATTERN
    filterset_class = SessionFilter
    pagination_class = SessionCursorPagination

    def get_queryset(self) -> Any:
        return visible_sessions(self.request.user)

    # --- the session resource ---------------------------------------------------------

    def list(self, request: Request) -> Response:
        """Newest first, cursor-paginated. Deleted sessions only with ``status=deleted``."""
        rows = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        sessions = [meta.to_session_dict(row) for row in rows or []]
        return self.get_paginated_response(s.SessionSerializer(sessions, many=True).data)

    def create(self, request: Request) -> Response:
        """The provider is ``provider`` if given, else the agent's ``session_provider``,
        else ``SESSIONTREE_DEFAULT_PROVIDER``. The session is yours unless ``user_id`` says
        otherwise (which needs the moderate_session permission)."""
        data = parse(s.SessionCreateSerializer, request.data)
        user_id = data.pop("user_id", request.user.get_username())
        if not may_act_for(request.user, user_id):
            raise PermissionDenied("Creating a session for another user needs the moderate_session permission.")
        agent_id = data.pop("agent", None)
        agent = Agent.objects.filter(pk=agent_id).first() if agent_id is not None else None
        if agent_id is not None and agent is None:
            raise AgentNotFound(f"No agent with id {agent_id}")
        with id_unavailable_if_taken():
            session = services.sessions.create_session(
                actor=request.user,
                channel=CHANNEL,
                kind=data.pop("provider", None),
                agent=agent,
                user_id=user_id,
                **data,
            )
        return with_session_etag(s.SessionSerializer(session).data, status_code=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, session_id: str) -> Response:
        """Meta, leaf, counts, the in-flight entry, the parent session and the forks (``children``)."""
        session = session_detail(self.provider(), self.session_id)
        tag = versions.session_etag(session)
        if conditional.none_match(request, tag):
            return not_modified(tag)
        session["children"] = list(
            visible_sessions(request.user)
            .filter(parent_id=self.session_row().pk)
            .order_by("created_at", "session_id")
            .values_list("session_id", flat=True)
        )
        return with_session_etag(s.SessionDetailSerializer(session).data)

    def partial_update(self, request: Request, session_id: str) -> Response:
        """Only ``title`` and ``metadata`` can change; the tree never does through this."""
        data = parse(s.SessionUpdateSerializer, request.data)
        session = services.sessions.update_session(**self.writing(), expected_etag=self.expected_etag(), **data)
        return with_session_etag(s.SessionSerializer(session).data)

    def destroy(self, request: Request, session_id: str) -> Response:
        """Soft by default (status ``deleted``: readable, closed to writes, restorable).
        ``?hard=true`` removes the session and its entries for good."""
        hard = parse(s.HardDeleteQuerySerializer, request.query_params).get("hard") in ("true", "1")
        if hard and not may_hard_delete(request.user):
            raise PermissionDenied("A hard delete needs the hard_delete_session permission.")
        services.sessions.delete_session(**self.writing(), hard=hard, expected_etag=self.expected_etag())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(tags=SESSION_TAG, summary="Archive (read-only until restored)", request=None)
    @action(detail=True, methods=["post"])
    def archive(self, request: Request, session_id: str) -> Response:
        """Readable, closed to writes until restored."""
        session = services.sessions.archive_session(**self.writing(), expected_etag=self.expected_etag())
        return with_session_etag(s.SessionSerializer(session).data)

    @extend_schema(tags=SESSION_TAG, summary="Restore an archived or deleted session", request=None)
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, session_id: str) -> Response:
        """Back to ``active`` from ``archived`` or (soft) ``deleted``."""
        session = services.sessions.restore_session(**self.writing(), expected_etag=self.expected_etag())
        return with_session_etag(s.SessionSerializer(session).data)

    # --- entries that are not plain appends ----------------------------------------------

    @extend_schema(
        tags=ENTRY_TAG,
        summary="Begin an in-flight (streaming) entry",
        request=s.InFlightBeginSerializer,
        responses={201: s.EntrySerializer},
    )
    @action(detail=True, methods=["post"], url_path="in-flight")
    def in_flight(self, request: Request, session_id: str) -> Response:
        """The entry becomes the leaf and is visible to reads; PATCH it under
        ``entries/{entry_id}/`` as it streams and complete it there."""
        data = parse(s.InFlightBeginSerializer, request.data)
        entry = services.entries.begin_in_flight(
            **self.writing(), entry=data["entry"], expected_leaf_id=self.expected_leaf_id(data)
        )
        return with_entry_etag(entry, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        tags=ENTRY_TAG,
        summary="Abort the in-flight entry, whatever its id",
        request=None,
        responses={204: None},
    )
    @in_flight.mapping.delete
    def abort_in_flight(self, request: Request, session_id: str) -> Response:
        """The stream failed or was cancelled: its entry is dropped and the leaf goes back to
        its parent (as if it had never begun). Nothing in flight is 409 ``nothing_in_flight``.
        With ``If-Match``, the session's tag must name the in-flight entry as its leaf."""
        services.entries.abort_in_flight(**self.writing(), expected_leaf_id=self.expected_leaf_id({}))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        tags=ENTRY_TAG,
        summary="Append several entries at once (all or none)",
        request=s.BulkAppendSerializer,
        responses={201: s.BulkAppendResultSerializer},
    )
    @action(detail=True, methods=["post"], url_path="bulk-append")
    def bulk_append(self, request: Request, session_id: str) -> Response:
        """Each entry is a child of the one before (the first of the leaf); the last becomes the
        leaf. One refused entry refuses them all: nothing is stored."""
        data = parse(s.BulkAppendSerializer, request.data)
        entries = services.entries.append_entries(
            **self.writing(), entries=data["entries"], expected_leaf_id=self.expected_leaf_id(data)
        )
        return Response(s.BulkAppendResultSerializer(entries).data, status=status.HTTP_201_CREATED)

    # --- moving in the tree --------------------------------------------------------------

    @extend_schema(
        tags=TREE_TAG,
        summary="Move the leaf to an entry",
        request=s.SwitchLeafSerializer,
        responses=s.SessionSerializer,
    )
    @action(detail=True, methods=["post"], url_path="switch-leaf")
    def switch_leaf(self, request: Request, session_id: str) -> Response:
        """History is never rewritten: the next entry becomes a child of ``entry_id``."""
        data = parse(s.SwitchLeafSerializer, request.data)
        session = services.tree.switch_leaf(
            **self.writing(), entry_id=data["entry_id"], expected_leaf_id=self.expected_leaf_id(data)
        )
        return with_session_etag(s.SessionSerializer(session).data)

    @extend_schema(
        tags=TREE_TAG,
        summary="Move the leaf before the root (the next entry is a new root)",
        request=s.ResetLeafSerializer,
        responses=s.SessionSerializer,
    )
    @action(detail=True, methods=["post"], url_path="reset-leaf")
    def reset_leaf(self, request: Request, session_id: str) -> Response:
        """The next entry starts a new root."""
        data = parse(s.ResetLeafSerializer, request.data)
        session = services.tree.reset_leaf(**self.writing(), expected_leaf_id=self.expected_leaf_id(data))
        return with_session_etag(s.SessionSerializer(session).data)

    @extend_schema(
        tags=TREE_TAG,
        summary="Navigate as Pi's /tree (optional branch summary and label)",
        request=s.NavigateSerializer,
        responses=s.NavigateResultSerializer,
    )
    @action(detail=True, methods=["post"])
    def navigate(self, request: Request, session_id: str) -> Response:
        """A user (or custom) message: the leaf goes to its parent and its text comes back
        as ``editor_text``; any other entry becomes the leaf. ``summarize`` appends a
        branch summary of what was left behind; ``label`` labels it (or the target)."""
        data = parse(s.NavigateSerializer, request.data)
        result = services.navigate_tree(
            provider=self.provider(),
            session_id=self.session_id,
            target_id=data["target_id"],
            summarize=data["summarize"],
            label=data.get("label"),
            custom_instructions=data.get("custom_instructions"),
            expected_leaf_id=self.expected_leaf_id(data),
            actor=request.user,
            channel=CHANNEL,
        )
        return Response(s.NavigateResultSerializer(result).data)

    @extend_schema(
        tags=TREE_TAG,
        summary="Fork into a new session (before a user message, or at any entry)",
        request=s.ForkSerializer,
        responses={201: s.SessionSerializer},
    )
    @action(detail=True, methods=["post"])
    def fork(self, request: Request, session_id: str) -> Response:
        """``before`` (default) needs a user message and copies the path up to its parent;
        ``at`` copies the path up to and including any entry. Labels on the path come along."""
        data = parse(s.ForkSerializer, request.data)
        with id_unavailable_if_taken():
            session = services.fork_session(
                provider=self.provider(),
                session_id=self.session_id,
                entry_id=data["entry_id"],
                position=data["position"],
                new_session_id=data.get("new_session_id"),
                title=data.get("title"),
                expected_leaf_id=self.expected_leaf_id(data),
                actor=request.user,
                channel=CHANNEL,
            )
        return with_session_etag(s.SessionSerializer(session).data, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        tags=TREE_TAG,
        summary="Compact the active path",
        request=s.CompactSerializer,
        responses={201: s.EntrySerializer, 200: s.NotCompactedSerializer},
    )
    @action(detail=True, methods=["post"])
    def compact(self, request: Request, session_id: str) -> Response:
        """201 with the compaction entry, or 200 ``{"compacted": false}`` when there is nothing to compact."""
        data = parse(s.CompactSerializer, request.data)
        keep = data.get("keep_recent_tokens")
        entry = services.compact_session(
            provider=self.provider(),
            session_id=self.session_id,
            settings=CompactionSettings(keep_recent_tokens=keep) if keep is not None else None,
            custom_instructions=data.get("custom_instructions"),
            expected_leaf_id=self.expected_leaf_id(data),
            actor=request.user,
            channel=CHANNEL,
        )
        if entry is None:
            return Response(s.NotCompactedSerializer({}).data)
        return Response(entry, status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=TREE_TAG,
        summary="Set or clear an entry's label",
        request=s.LabelSerializer,
        responses={201: s.EntrySerializer},
    )
    @action(detail=True, methods=["post"])
    def labels(self, request: Request, session_id: str) -> Response:
        """A ``label`` entry is appended at the leaf; ``null`` or ``""`` clears the label."""
        data = parse(s.LabelSerializer, request.data)
        entry = services.tree.set_label(
            **self.writing(),
            target_id=data["target_id"],
            label=data["label"],
            expected_leaf_id=self.expected_leaf_id(data),
        )
        return Response(entry, status=status.HTTP_201_CREATED)

    # --- reads -------------------------------------------------------------------------------

    @extend_schema(
        tags=TREE_TAG,
        summary="The path root → leaf (or → ?leaf=)",
        parameters=[s.LeafQuerySerializer],
        responses=s.PathSerializer,
    )
    @action(detail=True, methods=["get"])
    def path(self, request: Request, session_id: str) -> HttpResponse:
        """Entries root first, as stored."""
        leaf = parse(s.LeafQuerySerializer, request.query_params).get("leaf", UNSET)
        provider, session_id = self.provider(), self.session_id
        return large_json(lambda: s.PathSerializer(provider.get_active_path(session_id, leaf)).data)

    @extend_schema(
        tags=TREE_TAG,
        summary="The LLM context at the leaf (or at ?leaf=)",
        parameters=[s.LeafQuerySerializer],
        responses=s.ContextSerializer,
    )
    @action(detail=True, methods=["get"])
    def context(self, request: Request, session_id: str) -> HttpResponse:
        """Pi's context rules: compaction summary first, branch summaries and custom messages
        as messages, the latest thinking level and model."""
        leaf = parse(s.LeafQuerySerializer, request.query_params).get("leaf", UNSET)
        provider, session_id = self.provider(), self.session_id
        return large_json(lambda: s.ContextSerializer(provider.build_context(session_id, leaf)).data)

    @extend_schema(
        tags=TREE_TAG,
        summary="The entry tree, one window (root, depth) at a time",
        parameters=[s.TreeQuerySerializer],
        responses=s.TreeSerializer,
    )
    @action(detail=True, methods=["get"])
    def tree(self, request: Request, session_id: str) -> Response:
        """Nested nodes, children in append order, with current labels. A node at the
        window's edge has ``children: []`` and its ``child_count``: ask again with ``root``."""
        query = parse(s.TreeQuerySerializer, request.query_params)
        window = nested_tree(self.provider(), self.session_id, root=query.get("root"), depth=query["depth"])
        return Response(s.TreeSerializer(window).data)

    @extend_schema(tags=TREE_TAG, summary="Everything about the session at once", responses=s.SnapshotSerializer)
    @action(detail=True, methods=["get"])
    def snapshot(self, request: Request, session_id: str) -> HttpResponse:
        """Meta, every entry, the active path, children per parent, labels and the context."""
        provider, session_id = self.provider(), self.session_id
        return large_json(lambda: s.SnapshotSerializer(provider.get_snapshot(session_id)).data)

    @extend_schema(
        tags=TREE_TAG,
        summary="Export as Pi JSONL (streamed)",
        parameters=[s.ExportQuerySerializer],
        responses={
            (200, NDJSONRenderer.media_type): OpenApiResponse(
                OpenApiTypes.STR, description="The session header line, then one entry a line."
            )
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[NDJSONRenderer, JSONRenderer])
    def export(self, request: Request, session_id: str) -> StreamingHttpResponse:
        """Pi's own file format: Pi opens it as it is. ``full``: every entry; ``active``: the path
        to the leaf (or to ``entry``); ``subtree``: ``entry``, what is below it and the path above it.
        Audited (``export_session``); ``Repr-Digest`` holds the SHA-256 of the body, as the
        export's manifest (``…/export/manifest/``) does."""
        query = parse(s.ExportQuerySerializer, request.query_params)
        made = services.exports.export_session(
            session_id=self.session_id,
            scope=query["scope"],
            entry_id=query.get("entry"),
            provider=self.provider(),
            actor=request.user,
            channel=CHANNEL,
        )
        response = StreamingHttpResponse(iter([made.data]), content_type=NDJSONRenderer.media_type)
        response["Content-Disposition"] = f'attachment; filename="{self.session_id}.jsonl"'
        response["Repr-Digest"] = repr_digest(made.data)
        return response

    @extend_schema(
        tags=TREE_TAG,
        summary="The manifest of an export: entry count, SHA-256 of the JSONL, exporter, time (audited)",
        parameters=[s.ExportQuerySerializer],
        responses=s.ExportManifestSerializer,
    )
    @action(detail=True, methods=["get"], url_path="export/manifest")
    def export_manifest(self, request: Request, session_id: str) -> Response:
        """The export with the same query is made (and audited) and described: what a
        downloaded file is checked against (its SHA-256 and entry count)."""
        query = parse(s.ExportQuerySerializer, request.query_params)
        made = services.exports.export_session(
            session_id=self.session_id,
            scope=query["scope"],
            entry_id=query.get("entry"),
            manifest_only=True,
            provider=self.provider(),
            actor=request.user,
            channel=CHANNEL,
        )
        response = Response(s.ExportManifestSerializer(made.manifest).data)
        response["Content-Disposition"] = f'attachment; filename="{made.manifest_filename}"'
        return response


def repr_digest(data: bytes) -> str:
    """RFC 9530's ``Repr-Digest`` of a body: its SHA-256, base64 between colons."""
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


MAX_TYPES = 20


def _types(request: Request) -> list[str]:
    """The ``type`` filter: comma-separated and/or repeated, at most ``MAX_TYPES`` names."""
    raws = request.query_params.getlist("type")
    for raw in raws:
        parse(s.EntryListQuerySerializer, {"type": raw})  # none blank, at most MAX_TYPES in one
    kinds = {kind.strip(" \t") for raw in raws for kind in raw.split(",")}
    if len(kinds) > MAX_TYPES:
        raise ValidationError({"type": [f"At most {MAX_TYPES} entry types."]})
    return sorted(kinds)


ENTRY_PATH_PARAMETERS = [
    OpenApiParameter("session_id", OpenApiTypes.STR, OpenApiParameter.PATH),
]
ENTRY_ID_PARAMETER = OpenApiParameter("entry_id", OpenApiTypes.STR, OpenApiParameter.PATH)


@extend_schema_view(
    list=extend_schema(
        tags=ENTRY_TAG,
        summary="Entries in append order",
        parameters=[*ENTRY_PATH_PARAMETERS, s.EntryListQuerySerializer],
        responses=s.EntrySerializer(many=True),
    ),
    retrieve=extend_schema(
        tags=ENTRY_TAG,
        summary="One entry",
        parameters=[*ENTRY_PATH_PARAMETERS, ENTRY_ID_PARAMETER],
        responses=s.EntrySerializer,
    ),
    create=extend_schema(
        tags=ENTRY_TAG,
        summary="Append an entry (or a message) at the leaf",
        parameters=ENTRY_PATH_PARAMETERS,
        request=s.APPEND_BODY,
        responses={201: s.EntrySerializer},
    ),
    partial_update=extend_schema(
        tags=ENTRY_TAG,
        summary="Update or complete the in-flight entry (a completed entry is 409)",
        parameters=[*ENTRY_PATH_PARAMETERS, ENTRY_ID_PARAMETER],
        request=s.InFlightPatchSerializer,
        responses=s.EntrySerializer,
    ),
    destroy=extend_schema(
        tags=ENTRY_TAG,
        summary="Abort the in-flight entry (a completed entry is 409)",
        parameters=[*ENTRY_PATH_PARAMETERS, ENTRY_ID_PARAMETER],
        request=None,
        responses={204: None},
    ),
)
class EntryViewSet(SessionScopedViewSet):
    """A session's entries."""

    # Entries are the provider's, never a queryset; this only tells the schema generator so.
    queryset = AgentSession.objects.none()
    serializer_class = s.EntrySerializer
    lookup_field = "entry_id"
    lookup_value_regex = ID_PATTERN
    pagination_class = EntryCursorPagination

    def list(self, request: Request, session_id: str) -> Response:
        """Cursor-paginated and stable: entries appended meanwhile never shift a page."""
        paginator = EntryCursorPagination()
        entries = paginator.paginate_entries(request, self.provider(), self.session_id, types=_types(request))
        return paginator.get_paginated_response(entries)

    def retrieve(self, request: Request, session_id: str, entry_id: str) -> Response:
        """The entry as stored (Pi's camelCase fields)."""
        entry = self.provider().get_entry(self.session_id, entry_id)
        tag = versions.entry_etag(entry)
        if conditional.none_match(request, tag):
            return not_modified(tag)
        return with_entry_etag(entry)

    def create(self, request: Request, session_id: str) -> Response:
        """The new entry is a child of the leaf and becomes the leaf; ``id``, ``parentId`` and
        ``timestamp`` are filled in. ``expected_leaf_id`` makes it conditional (409 if the leaf moved)."""
        data = parse(s.EntryAppendSerializer, request.data)
        expected = self.expected_leaf_id(data)
        if "message" in data:
            entry = services.entries.append_message(
                **self.writing(), message=data["message"], expected_leaf_id=expected
            )
        else:
            entry = services.entries.append_entry(**self.writing(), entry=data["entry"], expected_leaf_id=expected)
        return Response(entry, status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, session_id: str, entry_id: str) -> Response:
        """Only the in-flight entry changes; a completed one answers 409 ``immutable_entry``."""
        data = parse(s.InFlightPatchSerializer, request.data)
        entry = services.entries.update_in_flight(
            **self.writing(),
            entry_id=entry_id,
            patch=data.get("patch", {}),
            complete=data["complete"],
            expected_etag=self.expected_etag(),
        )
        return with_entry_etag(entry)

    def destroy(self, request: Request, session_id: str, entry_id: str) -> Response:
        """Abort the in-flight entry: it is dropped and the leaf goes back to its parent. A
        completed entry is never deleted (409 ``immutable_entry``; moderation erases in place)."""
        services.entries.abort_in_flight(**self.writing(), entry_id=entry_id, expected_etag=self.expected_etag())
        return Response(status=status.HTTP_204_NO_CONTENT)
