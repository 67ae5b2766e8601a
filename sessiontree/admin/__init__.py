"""Admin console: agents, sessions (list, entry tree, moderation), audit records.

- ``sessions``: the session list and a session's pages (tree, entry detail,
  compare, export, moderation actions);
- ``flags``: the moderation queue (every flag across sessions, bulk actions);
- ``moderation``: the tree page's actions, each one call to ``sessiontree.services``;
- ``plugins``: what other apps add to a session's pages (extra pages, links,
  panels, entry markers and renderers); the roleplay layer plugs its state
  panel, diff and actions in from its ``ready()`` (``roleplay/admin/``);
- ``entry_display``: how an entry is shown (custom entries as fields, never a repr);
- ``filters``: the session list's filters.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from sessiontree.models import Agent, AgentSession, AuditRecord

from . import flags
from .sessions import AgentSessionAdmin


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "session_provider", "updated_at")
    list_filter = ("session_provider",)
    search_fields = ("name",)
    readonly_fields = ("created_at", "updated_at")


admin.site.register(AgentSession, AgentSessionAdmin)


@admin.register(AuditRecord)
class AuditRecordAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor", "channel", "operation", "session_id", "leaf_before", "leaf_after")
    list_filter = ("channel", "operation")
    search_fields = ("session_id", "actor", "operation")
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


__all__ = ["AgentAdmin", "AgentSessionAdmin", "AuditRecordAdmin", "flags"]
