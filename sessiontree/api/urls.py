"""``/api/`` routes. Resources nested under a session register a prefix
holding ``session_id``, e.g. ``sessions/(?P<session_id>[^/]+)/roleplay``, with
a ``views.SessionScopedViewSet`` subclass (docs/api.md, "Adding a nested resource")."""

from __future__ import annotations

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from .audit import AuditViewSet
from .moderation import EntryModerationViewSet, FlagViewSet
from .protection import RetentionView, SessionHoldViewSet, UserErasureView
from .search import SearchView
from .views import ID_PATTERN, EntryViewSet, SessionViewSet

SESSION_PREFIX = rf"sessions/(?P<session_id>{ID_PATTERN})"

router = SimpleRouter()
router.register("sessions", SessionViewSet, basename="session")
router.register(rf"{SESSION_PREFIX}/entries", EntryViewSet, basename="session-entry")
router.register(
    rf"{SESSION_PREFIX}/entries/(?P<entry_id>{ID_PATTERN})", EntryModerationViewSet, basename="session-entry-moderation"
)
router.register("flags", FlagViewSet, basename="flag")
router.register("audit", AuditViewSet, basename="audit")

urlpatterns = [
    re_path(
        rf"^{SESSION_PREFIX}/hold/$",
        SessionHoldViewSet.as_view({"post": "place", "delete": "release"}),
        name="session-hold",
    ),
    re_path(r"^users/(?P<username>[^/]{1,150})/erase/$", UserErasureView.as_view(), name="user-erase"),
    path("retention/", RetentionView.as_view(), name="retention"),
    path("search/", SearchView.as_view(), name="search"),
    path("", include(router.urls)),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
