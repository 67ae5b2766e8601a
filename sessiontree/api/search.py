"""``GET /api/search/``: search the text of entries across sessions.

Who finds what: users who see every session (superusers, staff with
``sessiontree.view_agentsession``) search all of them; everyone else only
their own sessions (as in the session list). One call to
``services.moderation.search_entries``; nothing is written.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessiontree.core.search import MAX_QUERY_LENGTH
from sessiontree.models import AgentSession
from sessiontree.services import moderation
from sessiontree.services.search import DEFAULT_LIMIT

from .serializers import ProviderKindField, StrictCharField, session_lookup_field
from .views import parse

MAX_API_LIMIT = 200


class SearchQuerySerializer(serializers.Serializer):
    q = StrictCharField(
        min_length=1,
        max_length=MAX_QUERY_LENGTH,
        help_text=(
            "Plain words, all required; a word with punctuation inside (an e-mail address, "
            "4111-1111) matches as a phrase. Nothing is an operator."
        ),
    )
    user = StrictCharField(required=False, min_length=1, max_length=191, help_text="The sessions' user id.")
    agent = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1, help_text="The agent's id.")
    session = session_lookup_field(required=False, help_text="Only this session.")
    provider = ProviderKindField(required=False)
    status = serializers.ChoiceField(
        choices=list(AgentSession.Status.values),
        required=False,
        help_text="Default: active and archived sessions (deleted ones only when asked for).",
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_API_LIMIT, default=DEFAULT_LIMIT)


class SearchResultSerializer(serializers.Serializer):
    session_id = serializers.CharField(read_only=True)
    entry_id = serializers.CharField(read_only=True)
    type = serializers.CharField(read_only=True, help_text="The entry's type (message, compaction …).")
    role = serializers.CharField(read_only=True, allow_null=True, help_text="A message's role; null otherwise.")
    snippet = serializers.CharField(
        read_only=True,
        help_text="Where the words are, as HTML: the text escaped, the words in <mark>, cut ends as ….",
    )


class SearchResultsSerializer(serializers.Serializer):
    results = SearchResultSerializer(many=True, read_only=True)


class SearchView(APIView):
    """One answer object (``{"results": [...]}``), not a page of a model."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["moderation"],
        summary="Search the text of entries across the sessions you may see, newest first",
        parameters=[SearchQuerySerializer],
        responses=SearchResultsSerializer,
    )
    def get(self, request: Request) -> Response:
        query: dict[str, Any] = parse(SearchQuerySerializer, request.query_params)
        results = moderation.search_entries(
            q=query["q"],
            user=query.get("user"),
            agent=query.get("agent"),
            session_id=query.get("session"),
            provider=query.get("provider"),
            status=query.get("status"),
            limit=query["limit"],
            actor=request.user,
        )
        return Response({"results": results})


__all__ = ["SearchView"]
