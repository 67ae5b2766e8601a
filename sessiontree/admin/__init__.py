"""Admin console: agents, sessions (list, entry tree, moderation), audit records.

- ``sessions``: the session list and a session's pages (tree, entry detail,
  compare, export, moderation actions);
- ``flags``: the moderation queue (every flag across sessions, bulk actions);
- ``moderation``: the tree page's actions, each one call to ``sessiontree.services``;
- ``plugins``: what other apps add to a session's pages (extra pages, links,
  panels, entry markers and renderers); the roleplay layer plugs its state
  panel, diff and actions in from its ``ready()`` (``roleplay/admin/``);
- ``entry_display``: how an entry is shown (custom entries as fields, never a repr);
- ``filters``: the session list's filters;
- ``protection``: a user's data erased (an action on users) and retention
  run by hand (a page of the agents).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from sessiontree.models import Agent, AgentSession, AuditRecord
from sessiontree.templatetags.sessiontree_admin import moment

from . import flags
from .protection import install_user_admin, retention_view
from .sessions import AgentSessionAdmin


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "session_provider", "retention", "updated")
    list_filter = ("session_provider",)
    search_fields = ("name",)
    readonly_fields = ("created", "updated")

    def get_urls(self) -> list[URLPattern]:
        retention = path(
            "retention/", self.admin_site.admin_view(self.retention_page), name="sessiontree_agent_retention"
        )
        return [retention, *super().get_urls()]

    def retention_page(self, request: HttpRequest) -> HttpResponse:
        return retention_view(self, request)

    @admin.display(description="retention", ordering="retention_days")
    def retention(self, agent: Agent) -> str:
        return f"{agent.retention_days} days" if agent.retention_days is not None else "default"

    @admin.display(description="created", ordering="created_at")
    def created(self, agent: Agent) -> str:
        return moment(agent.created_at)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, agent: Agent) -> str:
        return moment(agent.updated_at)


admin.site.register(AgentSession, AgentSessionAdmin)
install_user_admin(admin.site)


class ChannelFilter(admin.SimpleListFilter):
    """Channels by their own names (``admin``, ``api``…), as every page shows them."""

    title = "channel"
    parameter_name = "channel"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, value) for value in AuditRecord.Channel.values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(channel=self.value()) if self.value() else queryset


@admin.register(AuditRecord)
class AuditRecordAdmin(admin.ModelAdmin):
    list_display = ("when", "actor", "channel_name", "operation", "session_link", "leaf_before", "leaf_after")
    list_display_links = ("when",)
    list_filter = (ChannelFilter, "operation")
    search_fields = ("session_id", "actor", "operation")
    date_hierarchy = "created_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditRecord]:
        # The session's primary key, to link its tree page (sessions deleted for good have none).
        session_pk = AgentSession.objects.filter(session_id=OuterRef("session_id")).values("pk")[:1]
        queryset = super().get_queryset(request).annotate(session_pk=Subquery(session_pk))
        match = request.resolver_match
        if match is not None and match.url_name == "sessiontree_auditrecord_changelist":
            # The list shows neither: an import's record lists every id of its batch (55 KB at 5,000).
            queryset = queryset.defer("entry_ids", "detail")
        return queryset

    @admin.display(description="when", ordering="created_at")
    def when(self, record: AuditRecord) -> str:
        return moment(record.created_at)

    @admin.display(description="channel", ordering="channel")
    def channel_name(self, record: AuditRecord) -> str:
        return record.channel

    @admin.display(description="session", ordering="session_id")
    def session_link(self, record: Any) -> str:
        if getattr(record, "session_pk", None) is None:
            return format_html("{} <em>(deleted)</em>", record.session_id) if record.session_id else "—"
        url = reverse("admin:sessiontree_agentsession_tree", args=[record.session_pk])
        return format_html('<a href="{}">{}</a>', url, record.session_id)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


__all__ = ["AgentAdmin", "AgentSessionAdmin", "AuditRecordAdmin", "flags"]
