"""``/api/sessions/{session_id}/roleplay/…`` (docs/api.md, "Roleplay")."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from sessiontree.api.urls import SESSION_PREFIX

from .views import CheckpointViewSet, ReviewViewSet, RoleplayViewSet

ROLEPLAY_PREFIX = rf"{SESSION_PREFIX}/roleplay"

router = SimpleRouter()
router.register(rf"{ROLEPLAY_PREFIX}/reviews", ReviewViewSet, basename="session-roleplay-review")
router.register(rf"{ROLEPLAY_PREFIX}/checkpoints", CheckpointViewSet, basename="session-roleplay-checkpoint")
router.register(ROLEPLAY_PREFIX, RoleplayViewSet, basename="session-roleplay")

urlpatterns = router.urls
