"""The session list and a session's pages: the entry tree, entry detail with
the model's context, leaves compared, export, moderation.

Tree semantics come from the providers (through ``sessiontree.selectors``),
never from the ORM, so a ``file`` and a ``mysql`` session look and act the
same. Every change goes through ``sessiontree.services`` as the signed-in
user on the ``admin`` channel (audit record), and leaves a ``LogEntry``.

Permissions: ``view_agentsession`` (or change) inspects; ``moderate_session``
acts (tree moves, labels, forks, compaction, archive/restore/soft delete);
``hard_delete_session`` deletes for good. View-only staff see no action and
get 403 on a forged POST.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import model_ngettext
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from sessiontree import services
from sessiontree.core.context_builder import UNSET
from sessiontree.core.entries import message_of
from sessiontree.core.errors import LeafConflict, SessionTreeError
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.selectors.entry_context import (
    ENTRY_FILTERS,
    MAX_STEPS,
    BranchTip,
    branch_tips,
    compare_leaves,
    entry_context,
    find_entries,
)
from sessiontree.selectors.export import EXPORT_SCOPES
from sessiontree.selectors.hidden import hidden_on_branches
from sessiontree.selectors.tree_window import TreeWindow, branch_window, run_window, tree_window
from sessiontree.templatetags.sessiontree_admin import moment

from . import plugins
from .entry_display import body_marker, describe_entry, entry_fields, message_text, shorten, to_json
from .erasing import EraseForm, erase_report, erase_summary, place_rows
from .filters import HasBranchesFilter, HasCompactionFilter, IsForkFilter, OnLegalHoldFilter
from .moderation import (
    ACTIONS,
    CHANNEL,
    NO_LEAF,
    CompactForm,
    FlagForm,
    ForkForm,
    LabelForm,
    NavigateForm,
    parse_expected_leaf,
)
from .plugins import guarded_page
from .rendering import entry_body_html, image_blocks, image_bytes, row_body_html, word_diff_html
from .search import search_view
from .tree_rows import rows_html

CLOSED = (AgentSession.Status.ARCHIVED, AgentSession.Status.DELETED)
ERASE_PERMISSION = "sessiontree.erase_entry"
FLAG_PERMISSION = "sessiontree.flag_entry"
AUDIT_ROWS = 50


class AgentSessionForm(forms.ModelForm):
    class Meta:
        model = AgentSession
        fields = ("title", "agent", "user_id", "metadata")

    def clean_metadata(self) -> Any:
        # The provider refuses anything but an object; say so on the form
        # instead of failing the save.
        metadata = self.cleaned_data.get("metadata")
        if not isinstance(metadata, dict):
            raise forms.ValidationError('Metadata must be a JSON object, e.g. {} or {"team": "billing"}.')
        return metadata


def header_time(row: AgentSession) -> dt.datetime | None:
    """When the session began, as its Pi header says (not when it was imported)."""
    stamp = (row.header or {}).get("timestamp") if isinstance(row.header, dict) else None
    if isinstance(stamp, str):
        try:
            parsed = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return None


class AgentSessionAdmin(admin.ModelAdmin):
    form = AgentSessionForm
    list_display = (
        "title_or_first_message",
        "tree_link",
        "agent",
        "user_id",
        "provider",
        "status",
        "entries",
        "branches",
        "leaf",
        "started",
        "last_activity",
        "parent_link",
    )
    list_display_links = ("title_or_first_message",)
    list_filter = (
        "provider",
        "status",
        "agent",
        HasCompactionFilter,
        HasBranchesFilter,
        IsForkFilter,
        OnLegalHoldFilter,
    )
    search_fields = ("session_id", "title", "user_id", "agent__name")
    list_select_related = ("agent", "parent")
    list_per_page = 50
    actions = ("archive_selected", "restore_selected", "soft_delete_selected", "delete_selected")

    class Media:
        css = {"all": ("sessiontree/tree.css",)}

    # The tree and its storage are the provider's: never edited from a form.
    # Status changes (archive, delete) are moderation actions of their own.
    readonly_fields = (
        "session_id",
        "provider",
        "status",
        "root_entry_id",
        "leaf_entry_id",
        "entry_count",
        "branch_count",
        "compaction_count",
        "parent",
        "parent_session_id",
        "cwd",
        "session_file",
        "header",
        "in_flight_entry",
        "created",
        "updated",
    )
    fieldsets = (
        (None, {"fields": ("session_id", "title", "provider", "status", "agent", "user_id")}),
        (
            "Tree",
            {"fields": ("root_entry_id", "leaf_entry_id", "entry_count", "branch_count", "compaction_count")},
        ),
        (
            "Storage",
            {"fields": ("cwd", "session_file", "header", "metadata", "in_flight_entry"), "classes": ("collapse",)},
        ),
        ("Times", {"fields": ("created", "updated")}),
    )

    # --- permissions ------------------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # sessions are created by agents, the API or the sync command

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting a bare row would orphan its file: deletion is the
        # hard-delete action, through the operations layer.
        return False

    def has_moderate_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("sessiontree.moderate_session")

    def has_hard_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("sessiontree.hard_delete_session")

    # --- the list -------------------------------------------------------------------------------

    @admin.display(description="title", ordering=Coalesce("title", "session_id"))
    def title_or_first_message(self, row: AgentSession) -> str:
        # Untitled sessions show their first user message's preview: a meta
        # column every storage keeps, so no entry is read for the list.
        if row.title:
            return row.title
        text = shorten(row.first_message_preview or "", 80)
        if text:
            return format_html("<em>“{}”</em>", text)
        return format_html("<em>untitled</em> <code>{}</code>", row.session_id)

    @admin.display(description="entries", ordering="entry_count")
    def entries(self, row: AgentSession) -> int:
        return row.entry_count

    @admin.display(description="branches", ordering="branch_count")
    def branches(self, row: AgentSession) -> int:
        return row.branch_count

    @admin.display(description="last activity", ordering="updated_at")
    def last_activity(self, row: AgentSession) -> str:
        return _short_time(row.updated_at)

    @admin.display(description="leaf", ordering="leaf_entry_id")
    def leaf(self, row: AgentSession) -> str:
        return format_html("<code>{}</code>", row.leaf_entry_id or "—")

    @admin.display(description="created", ordering="created_at")
    def started(self, row: AgentSession) -> str:
        return _short_time(header_time(row) or row.created_at)

    @admin.display(description="created")
    def created(self, row: AgentSession) -> str:
        return _short_time(row.created_at)

    @admin.display(description="updated")
    def updated(self, row: AgentSession) -> str:
        return _short_time(row.updated_at)

    @admin.display(description="parent", ordering="parent__session_id")
    def parent_link(self, row: AgentSession) -> str:
        if row.parent is not None:
            return format_html('<a href="{}">{}</a>', self._tree_url(row.parent.pk), row.parent.session_id)
        if row.parent_session_id:
            return format_html('<span title="{}">{}</span>', row.parent_session_id, shorten(row.parent_session_id, 30))
        return "—"

    @admin.display(description="tree")
    def tree_link(self, row: AgentSession) -> str:
        return format_html('<a href="{}">tree</a>', self._tree_url(row.pk))

    def _tree_url(self, pk: Any, **query: Any) -> str:
        url = reverse("admin:sessiontree_agentsession_tree", args=[pk], current_app=self.admin_site.name)
        return f"{url}?{urlencode(query)}" if query else url

    # --- bulk actions ------------------------------------------------------------------------------

    def _bulk(self, request: HttpRequest, queryset: QuerySet[AgentSession], verb: str, operation: Any) -> None:
        done: list[str] = []
        refused: list[str] = []
        for row in queryset:
            before = row.status
            try:
                after = operation(session_id=row.session_id, actor=request.user, channel=CHANNEL)
            except SessionTreeError as exc:
                refused.append(f"{row.session_id} ({exc.code}: {exc})")
                continue
            if after["status"] == before:
                refused.append(f"{row.session_id} (already {before})")
                continue
            done.append(row.session_id)
            self.log_change(request, row, f"{verb.capitalize()} (was {before}).")
        if done:
            self.message_user(request, f"{verb.capitalize()} {len(done)}: {', '.join(done)}.", messages.SUCCESS)
        if refused:
            self.message_user(request, f"Not {verb}: {'; '.join(refused)}.", messages.WARNING)

    @admin.action(permissions=["moderate"], description="Archive selected sessions (read-only until restored)")
    def archive_selected(self, request: HttpRequest, queryset: QuerySet[AgentSession]) -> None:
        self._bulk(request, queryset, "archived", services.sessions.archive_session)

    @admin.action(permissions=["moderate"], description="Restore selected sessions (active again)")
    def restore_selected(self, request: HttpRequest, queryset: QuerySet[AgentSession]) -> None:
        self._bulk(request, queryset, "restored", services.sessions.restore_session)

    @admin.action(permissions=["moderate"], description="Delete selected sessions (soft: restorable)")
    def soft_delete_selected(self, request: HttpRequest, queryset: QuerySet[AgentSession]) -> None:
        self._bulk(request, queryset, "deleted", services.sessions.delete_session)

    @admin.action(permissions=["hard_delete"], description="Delete selected sessions for good (entries too)")
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[AgentSession]) -> TemplateResponse | None:
        """Hard delete, after Django's confirmation page (named as Django's own
        action, whose confirmation form posts back to ``delete_selected``)."""
        rows = list(queryset.select_related("agent"))
        if request.POST.get("post"):
            deleted: list[str] = []
            failed: list[str] = []
            for row in rows:
                try:
                    services.sessions.delete_session(
                        session_id=row.session_id, actor=request.user, channel=CHANNEL, hard=True
                    )
                except SessionTreeError as exc:
                    failed.append(f"{row.session_id} ({exc.code}: {exc})")
                    continue
                # Logged once it is gone (from the row still in memory): a refused
                # deletion leaves no "deleted" entry in the history.
                self.log_deletions(request, cast(Any, [row]))
                deleted.append(row.session_id)
            if deleted:
                self.message_user(request, f"Deleted for good {len(deleted)}: {', '.join(deleted)}.", messages.SUCCESS)
            if failed:
                self.message_user(request, f"Not deleted: {'; '.join(failed)}.", messages.ERROR)
            return None
        forks = AgentSession.objects.filter(parent__in=rows).exclude(pk__in=[row.pk for row in rows]).count()
        entries = sum(row.entry_count for row in rows)
        deletable = [
            f"{row.session_id}: {row.title or 'untitled'} ({row.provider}, {row.entry_count} entries"
            + (f", file {row.session_file}" if row.session_file else "")
            + ")"
            for row in rows
        ]
        if forks:
            deletable.append(f"{forks} fork(s) of these sessions stay, detached from the lineage")
        context = {
            **self.admin_site.each_context(request),
            "title": "Delete sessions for good",
            "subtitle": None,
            "objects_name": str(model_ngettext(queryset)),
            "deletable_objects": [deletable],
            "model_count": {"sessions": len(rows), "entries": entries}.items(),
            "queryset": rows,
            "perms_lacking": False,
            "protected": False,
            "opts": self.opts,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/delete_selected_confirmation.html", context)

    # --- editing the meta goes through the operations layer ---------------------------------------

    def save_model(self, request: HttpRequest, obj: AgentSession, form: Any, change: bool) -> None:
        # The form edits the in-memory row; the operations layer writes it
        # (and may refuse), with the audit record.
        names = ["agent_id" if name == "agent" else name for name in form.changed_data]
        fields = {name: getattr(obj, name) for name in names}
        if fields:
            services.sessions.update_session(session_id=obj.session_id, actor=request.user, channel=CHANNEL, **fields)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        row = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if row is not None:
            extra.update(self._session_panels(row))
            extra["tree_url"] = self._tree_url(row.pk)
            extra.update(self._plugin_context(plugins.PageContext("change", request, row)))
        return super().change_view(request, object_id, form_url, extra)

    # --- pages of one session ------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name

        def route(pattern: str, view: Any, name: str) -> URLPattern:
            return path(pattern, self.admin_site.admin_view(view), name="{}_{}_{}".format(*info, name))

        return [
            # Before "<path:object_id>/", which would take "search/" for an object id.
            route("search/", self.search_view, "search"),
            # Plug-ins' pages (plugins.py) before the admin's own, whose "<path:object_id>/" would take them.
            *(
                route(f"<path:object_id>/{page.route}", page.view(self), page.name)
                for page in plugins.registry().pages()
            ),
            route("<path:object_id>/tree/", self.tree_view, "tree"),
            route("<path:object_id>/tree/branch/<str:entry_id>/", self.branch_view, "tree_branch"),
            route("<path:object_id>/tree/run/<str:entry_id>/", self.run_view, "tree_run"),
            route("<path:object_id>/tree/entry/<str:entry_id>/", self.entry_view, "tree_entry"),
            route("<path:object_id>/tree/entry/<str:entry_id>/image/<int:index>/", self.image_view, "tree_image"),
            route("<path:object_id>/tree/compare/", self.compare_view, "tree_compare"),
            route("<path:object_id>/tree/export/", self.export_view, "tree_export"),
            route("<path:object_id>/tree/action/<str:action>/", self.action_view, "tree_action"),
            route("<path:object_id>/tree/erase/<str:entry_id>/", self.erase_view, "tree_erase"),
            route("<path:object_id>/hold/", self.hold_view, "hold"),
            *super().get_urls(),
        ]

    def search_view(self, request: HttpRequest) -> HttpResponse:
        """Search entries across sessions (``admin/search.py``)."""
        return search_view(self, request)

    def _session(self, request: HttpRequest, object_id: str) -> AgentSession:
        row = self.get_object(request, object_id)
        if row is None:
            raise Http404(f"No session with primary key {object_id!r}")
        if not self.has_view_or_change_permission(request, row):
            raise PermissionDenied
        return row

    def _urls(self, row: AgentSession) -> dict[str, str]:
        """URL prefixes the templates append an entry id to (reversing per row is slow at scale)."""
        marker = "ENTRY"
        names = {"branch": "tree_branch", "run": "tree_run", "entry": "tree_entry"}
        urls = {
            key: reverse(f"admin:sessiontree_agentsession_{name}", args=[row.pk, marker]).replace(f"{marker}/", "")
            for key, name in names.items()
        }
        urls["tree"] = self._tree_url(row.pk)
        urls["compare"] = reverse("admin:sessiontree_agentsession_tree_compare", args=[row.pk])
        urls["export"] = reverse("admin:sessiontree_agentsession_tree_export", args=[row.pk])
        urls["hold"] = reverse("admin:sessiontree_agentsession_hold", args=[row.pk])
        urls["erase"] = reverse("admin:sessiontree_agentsession_tree_erase", args=[row.pk, marker]).replace(
            f"{marker}/", ""
        )
        urls["action"] = reverse("admin:sessiontree_agentsession_tree_action", args=[row.pk, "ACTION"]).replace(
            "ACTION/", ""
        )
        urls["change"] = reverse("admin:sessiontree_agentsession_change", args=[row.pk])
        urls["history"] = reverse("admin:sessiontree_agentsession_history", args=[row.pk])
        # The tree page with its main line through an entry (the alternatives pager): + "<id>&focus=<id>".
        urls["line"] = f"{urls['tree']}?line="
        return urls

    # --- what plug-ins' pages use (plugins.py) -------------------------------------------------------

    def session_for(self, request: HttpRequest, object_id: str) -> AgentSession:
        """The session ``object_id`` names: 404 when unknown, 403 without the view permission."""
        return self._session(request, object_id)

    def page_context(self, request: HttpRequest, row: AgentSession, title: str) -> dict[str, Any]:
        """The context the session page templates expect (``urls``, ``can_act``, ``closed``…)."""
        return self._page_context(request, row, title)

    @staticmethod
    def _plugin_context(page: plugins.PageContext) -> dict[str, Any]:
        registry = plugins.registry()
        return {"plugin_links": registry.links(page), "plugin_panels": registry.panels(page)}

    def _session_panels(self, row: AgentSession) -> dict[str, Any]:
        """Lineage (ancestors, forks of forks) and the audit trail: three queries."""
        ancestors = list(row.get_ancestors())
        descendants = list(row.get_descendants())
        base_level = row.level
        forks = [
            {"row": fork, "depth": fork.level - base_level, "indent": (fork.level - base_level - 1) * 1.5}
            for fork in descendants
        ]
        # ``entry_ids`` is not shown, and an import's record lists every id of its batch (55 KB at 5,000).
        audit = list(AuditRecord.objects.filter(session_id=row.session_id).defer("entry_ids")[:AUDIT_ROWS])
        for record in audit:
            detail = record.detail if isinstance(record.detail, dict) else {"detail": record.detail}
            record.detail_items = [  # type: ignore[attr-defined]
                (key, value if isinstance(value, str) else to_json(value)) for key, value in detail.items()
            ]
        return {"ancestors": ancestors, "forks": forks, "audit_records": audit, "audit_limit": AUDIT_ROWS}

    def _page_context(self, request: HttpRequest, row: AgentSession, title: str) -> dict[str, Any]:
        can_moderate = self.has_moderate_permission(request, row)
        closed = row.status in CLOSED
        return {
            "legal_hold": services.holds.hold_of(row.session_id),
            "can_hold": request.user.has_perm("sessiontree.place_hold"),
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": row,
            "title": title,
            "urls": self._urls(row),
            "can_moderate": can_moderate,
            "can_act": can_moderate and not closed,
            "can_erase": request.user.has_perm(ERASE_PERMISSION),
            "closed": closed,
            "no_leaf": NO_LEAF,
        }

    def tree_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        row = self._session(request, object_id)
        show = request.GET.get("show", "all")
        show = show if show in ENTRY_FILTERS else "all"
        text = request.GET.get("q", "").strip()
        focus = request.GET.get("focus") or None
        line = request.GET.get("line") or None
        context = self._page_context(request, row, f"Entry tree of {row}")
        context.update(self._session_panels(row))
        context.update({"show": show, "q": text, "filters": ENTRY_FILTERS, "focus": focus, "line": line})
        keep = {key: value for key, value in (("show", show if show != "all" else ""), ("q", text)) if value}
        if keep:  # the pager keeps the filters and the find
            context["urls"]["line"] = f"{context['urls']['tree']}?{urlencode(keep)}&line="
        provider = get_provider_for_session(row.session_id)
        try:
            if show != "all" or text:
                page = _int(request.GET.get("page"), 1)
                matches = find_entries(provider, row.session_id, show=show, text=text, page=page)
                context["matches"] = matches
                context["match_rows"] = [_match_row(entry, matches) for entry in matches.entries]
            window = tree_window(provider, row.session_id, focus_entry_id=focus, line_entry_id=line)
        except SessionTreeError as exc:
            context["error"] = f"{exc.code}: {exc}"
            return guarded_page(TemplateResponse(request, "admin/sessiontree/tree/page.html", context))
        # A deep link to an entry the session does not hold says so instead of silently showing the leaf.
        unknown = [(what, value) for what, value, used in (("focus", focus, window.focus_entry_id),
                                                            ("line", line, window.line_entry_id)) if value and not used]  # fmt: skip
        context["unknown_ids"] = unknown
        context["line"] = window.line_entry_id
        self._decorate(window, context["urls"])
        skeleton = window.skeleton
        context.update(
            {
                "window": window,
                "rows": window.rows,
                "rows_html": rows_html(
                    window.rows, context["urls"], window.line_entry_id, flags=self._open_flags(row, window)
                ),
                "skeleton": skeleton,
                "leaf_entry_id": skeleton.leaf_entry_id,
                "expected_leaf": skeleton.leaf_entry_id or NO_LEAF,
                "compacted_count": skeleton.compacted_count,
                "compact_form": CompactForm(auto_id="compact-%s"),
            }
        )
        loaded = [r.entry for r in window.iter_rows() if r.entry is not None]
        on_page = plugins.PageContext(
            "tree", request, row, loaded, leaf_entry_id=skeleton.leaf_entry_id, can_act=context["can_act"]
        )
        context.update(self._plugin_context(on_page))
        return guarded_page(TemplateResponse(request, "admin/sessiontree/tree/page.html", context))

    def _decorate(self, window: TreeWindow, urls: dict[str, str]) -> None:
        """Marker, preview and readable body of every loaded entry (display is the admin's business)."""
        entry_url = urls["entry"]
        registry = plugins.registry()
        for row in window.iter_rows():
            if row.kind == "entry" and row.entry is not None:
                # A message reads as its rendered body (no preview needed); a plug-in's entry, or
                # any other, as its marker and one-line preview.
                marker = body_marker(row.entry)
                if marker is not None and registry.marker(row.entry) is None:
                    body = row_body_html(row.entry, image_base=f"{entry_url}{row.entry_id}/image/")
                    if body is not None:
                        row.marker, row.body = marker, body
                        continue
                row.marker, row.preview = describe_entry(row.entry)
            elif row.kind == "branch" and row.name_entry is not None:
                row.marker, row.preview = describe_entry(row.name_entry)

    @staticmethod
    def _open_flags(row: AgentSession, window: TreeWindow) -> dict[str, int]:
        """Open moderation flags of the entries the window shows (one query), marked on their rows."""
        ids = [r.entry_id for r in window.iter_rows() if r.kind == "entry"]
        return services.moderation.open_flag_counts(row.session_id, ids)

    def _fragment(self, request: HttpRequest, row: AgentSession, window: TreeWindow, line: str | None) -> HttpResponse:
        urls = self._urls(row)
        self._decorate(window, urls)
        flags = self._open_flags(row, window)
        context = {
            "rows": window.rows,
            "rows_html": rows_html(window.rows, urls, window.line_entry_id or line, flags=flags),
        }
        return guarded_page(TemplateResponse(request, "admin/sessiontree/tree/_rows.html", context))

    def branch_view(self, request: HttpRequest, object_id: str, entry_id: str) -> HttpResponse:
        row = self._session(request, object_id)
        level = _int(request.GET.get("level"), 1)
        window = self._read(
            lambda: branch_window(get_provider_for_session(row.session_id), row.session_id, entry_id, level=level)
        )
        return self._fragment(request, row, window, None)

    def run_view(self, request: HttpRequest, object_id: str, entry_id: str) -> HttpResponse:
        row = self._session(request, object_id)
        count = _int(request.GET.get("count"), 1)
        level = _int(request.GET.get("level"), 0)
        line = request.GET.get("line") or None
        window = self._read(
            lambda: run_window(
                get_provider_for_session(row.session_id),
                row.session_id,
                entry_id,
                count,
                level=level,
                line_entry_id=line,
            )
        )
        return self._fragment(request, row, window, line)

    @staticmethod
    def _read(read: Any) -> Any:
        try:
            return read()
        except SessionTreeError as exc:
            if exc.http_status == 404:
                raise Http404(str(exc)) from exc
            raise

    def entry_view(self, request: HttpRequest, object_id: str, entry_id: str) -> HttpResponse:
        row = self._session(request, object_id)
        detail = self._read(lambda: entry_context(get_provider_for_session(row.session_id), row.session_id, entry_id))
        context = self._page_context(request, row, f"Entry {entry_id}")
        marker, preview = describe_entry(detail.entry)
        on_page = plugins.PageContext(
            "entry",
            request,
            row,
            [detail.entry, *(step.entry for step in detail.steps)],
            entry_id=entry_id,
            leaf_entry_id=detail.leaf_entry_id,
            can_act=context["can_act"],
        )
        context.update(self._plugin_context(on_page))
        urls = context["urls"]
        body = None
        if plugins.registry().marker(detail.entry) is None:
            body = entry_body_html(detail.entry, image_base=f"{urls['entry']}{entry_id}/image/")
        usage = detail.usage
        hiding = self._read(
            lambda: hidden_on_branches(
                get_provider_for_session(row.session_id), row.session_id, entry_id, branches_when_unedited=False
            )
        )
        step_tokens = sum(step.tokens for step in detail.steps if step.status in ("sent", "summary"))
        context.update(
            {
                "detail": detail,
                "entry_id": entry_id,
                "entry_json": to_json(detail.entry, pretty=True),
                "marker": marker,
                "preview": preview,
                "body": body,
                "custom_fields": entry_fields(detail.entry) or [],
                "custom_caption": _fields_caption(detail.entry),
                "steps": [_step_view(step) for step in detail.steps],
                "hidden_after": MAX_STEPS // 4,
                "path_depth": detail.depth,
                # The end of the path (read by parent from the entry), and how many entries are above it.
                "path_tail": detail.path_tail,
                "path_hidden": detail.path_length - len(detail.path_tail),
                "tokens": {
                    "total": usage.tokens,
                    "reported": usage.usage_tokens,
                    "estimated": usage.trailing_tokens,
                    "reported_at": _usage_entry(detail, usage.last_usage_index),
                    "after": len(detail.context["messages"]) - (usage.last_usage_index + 1)
                    if usage.last_usage_index is not None
                    else len(detail.context["messages"]),
                    "rows": step_tokens,
                    "rows_partial": bool(detail.hidden_steps),
                },
                "expected_leaf": detail.leaf_entry_id or NO_LEAF,
                "is_user_message": detail.entry.get("type") == "message"
                and message_of(detail.entry).get("role") == "user",
                "navigate_form": NavigateForm(auto_id="navigate-%s", initial={"entry_id": entry_id}),
                "label_form": LabelForm(
                    auto_id="label-%s", initial={"entry_id": entry_id, "label": (detail.label or {}).get("label", "")}
                ),
                "fork_form": ForkForm(auto_id="fork-%s", initial={"entry_id": entry_id}),
                "flags": services.moderation.flags_of_entry(row.session_id, entry_id),
                "can_flag": request.user.has_perm(FLAG_PERMISSION),
                "flag_form": FlagForm(auto_id="flag-%s", initial={"entry_id": entry_id}),
                "hiding": hiding,
                # Hidden on the active branch: what Unhide undoes (the leaf is a tip under an entry on its path).
                "hidden_here": any(branch.is_leaf and branch.hidden for branch in hiding.branches),
            }
        )
        return guarded_page(TemplateResponse(request, "admin/sessiontree/tree/_entry.html", context))

    def image_view(self, request: HttpRequest, object_id: str, entry_id: str, index: int) -> HttpResponse:
        """The ``index``-th image of an entry's message, when it is a raster image in base64 (else 404)."""
        row = self._session(request, object_id)
        entry = self._read(lambda: get_provider_for_session(row.session_id).get_entry(row.session_id, entry_id))
        blocks = image_blocks(entry)
        decoded = image_bytes(blocks[index]) if index < len(blocks) else None
        if decoded is None:
            raise Http404(f"Entry {entry_id} has no image {index} that can be shown")
        data, mime = decoded
        response = HttpResponse(data, content_type=mime)
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "default-src 'none'; sandbox"
        response["Cache-Control"] = "private, max-age=300"
        return response

    def compare_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        row = self._session(request, object_id)
        context = self._page_context(request, row, f"Compare two branches of {row}")
        provider = get_provider_for_session(row.session_id)
        a = request.GET.get("a", "").strip()
        b = request.GET.get("b", "").strip()
        try:
            tips = branch_tips(provider, row.session_id)
            # Opened without a choice: the leaf against the latest other branch.
            a = a or (tips[0].entry_id if tips else "")
            b = b or next((tip.entry_id for tip in tips if tip.entry_id != a), "")
            context["tips"] = [_tip_view(tip) for tip in tips]
            known = {tip.entry_id for tip in tips}
            context["extra_choices"] = [value for value in dict.fromkeys([a, b]) if value and value not in known]
            context.update({"a": a, "b": b})
            if a and b:
                comparison = compare_leaves(provider, row.session_id, a, b)
                context["comparison"] = comparison
                context["compare_rows"] = [_aligned_view(aligned) for aligned in comparison.rows]
                context["common"] = _brief(comparison.common_ancestor) if comparison.common_ancestor else None
                context["tips_by_id"] = {tip["id"]: tip for tip in context["tips"]}
        except SessionTreeError as exc:
            context["error"] = f"{exc.code}: {exc}"
        return guarded_page(TemplateResponse(request, "admin/sessiontree/tree/compare.html", context))

    def export_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The export as a download (``?manifest=1``: its manifest as JSON), audited by the service."""
        row = self._session(request, object_id)
        scope = request.GET.get("scope", "full")
        entry_id = request.GET.get("entry") or None
        if scope not in EXPORT_SCOPES:
            messages.error(request, f"Unknown export scope {scope!r}; use one of {', '.join(EXPORT_SCOPES)}.")
            return HttpResponseRedirect(self._tree_url(row.pk))
        manifest_only = request.GET.get("manifest") == "1"
        try:
            made = services.exports.export_session(
                session_id=row.session_id,
                scope=scope,
                entry_id=entry_id,
                manifest_only=manifest_only,
                actor=request.user,
                channel=CHANNEL,
            )
        except SessionTreeError as exc:
            messages.error(request, f"Export failed: {exc.code}: {exc}")
            return HttpResponseRedirect(self._tree_url(row.pk))
        if manifest_only:
            response: HttpResponseBase = HttpResponse(
                json.dumps(made.manifest, indent=2) + "\n", content_type="application/json"
            )
            response["Content-Disposition"] = f'attachment; filename="{made.manifest_filename}"'
            return response
        response = StreamingHttpResponse(iter([made.data]), content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="{made.filename}"'
        return response

    def hold_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Place (``reason``) or release (``release``) the session's legal hold: ``place_hold``."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        row = self._session(request, object_id)
        if not request.user.has_perm("sessiontree.place_hold"):
            raise PermissionDenied
        back = self._tree_url(row.pk)
        try:
            if request.POST.get("release") == "yes":
                services.protection.release_hold(session_id=row.session_id, actor=request.user, channel=CHANNEL)
                message = f"Released the legal hold on {row.session_id}."
            else:
                reason = (request.POST.get("reason") or "").strip()
                services.protection.place_hold(
                    session_id=row.session_id, reason=reason, actor=request.user, channel=CHANNEL
                )
                message = f"Placed a legal hold on {row.session_id}: {reason}"
        except SessionTreeError as exc:
            messages.error(request, f"Legal hold refused: {exc.code}: {exc}")
            return HttpResponseRedirect(back)
        self.log_change(request, row, message)
        messages.success(request, message)
        return HttpResponseRedirect(back)

    def erase_view(self, request: HttpRequest, object_id: str, entry_id: str) -> HttpResponse:
        """Erase an entry in place (``moderation.erase_entry``): a page that
        lists every place the erase would change (a dry run), asks for a
        reason and the scope, and after the erase says what was erased. Needs
        ``erase_entry`` (not moderation's permission); archived and deleted
        sessions too."""
        row = self._session(request, object_id)
        if not request.user.has_perm(ERASE_PERMISSION):
            raise PermissionDenied
        provider = get_provider_for_session(row.session_id)
        entry = self._read(lambda: provider.get_entry(row.session_id, entry_id))
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        asked = (request.POST if request.method == "POST" else request.GET).get("scope")
        scope = asked if asked in EraseForm.SCOPES else "all"
        form = EraseForm(request.POST) if request.method == "POST" else EraseForm(initial={"scope": scope})
        context = self._page_context(request, row, f"Erase entry {entry_id}")
        marker, preview = describe_entry(entry)
        context.update({"entry_id": entry_id, "marker": marker, "preview": preview, "scope": scope})
        if request.method == "POST" and form.is_valid():
            try:
                result = services.moderation.erase_entry(
                    session_id=row.session_id,
                    entry_id=entry_id,
                    reason=form.cleaned_data["reason"],
                    scope=form.cleaned_data["scope"],
                    provider=provider,
                    actor=request.user,
                    channel=CHANNEL,
                )
            except SessionTreeError as exc:
                context["error"] = f"{exc.code}: {exc}"
            else:
                summary = erase_summary(entry_id, result)
                self.log_change(request, row, f"{summary} Reason: {form.cleaned_data['reason']}")
                for level, line in erase_report(result):
                    messages.add_message(request, level, line)
                return HttpResponseRedirect(self._tree_url(row.pk, focus=entry_id))
        try:
            dry_run = services.moderation.erase_entry(
                session_id=row.session_id,
                entry_id=entry_id,
                reason="dry run",
                scope=scope,
                dry_run=True,
                provider=provider,
                actor=request.user,
                channel=CHANNEL,
            )
        except SessionTreeError as exc:
            context.setdefault("error", f"{exc.code}: {exc}")
            dry_run = None
        context.update(
            {
                "form": form,
                "dry_run": dry_run,
                "places": place_rows(dry_run["changed"]) if dry_run else [],
            }
        )
        return guarded_page(TemplateResponse(request, "admin/sessiontree/tree/erase.html", context))

    def action_view(self, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        row = self._session(request, object_id)
        spec = ACTIONS.get(action)
        if spec is None:
            raise Http404(f"No moderation action {action!r}")
        if not request.user.has_perm(spec.permission):
            raise PermissionDenied
        form = spec.form_class(request.POST)
        back = self._tree_url(row.pk)
        if not form.is_valid():
            errors = "; ".join(f"{name}: {' '.join(str(e) for e in errs)}" for name, errs in form.errors.items())
            messages.error(request, f"{spec.title}: {errors}")
            return HttpResponseRedirect(back)
        data = dict(form.cleaned_data)
        if row.status in CLOSED and not spec.on_closed:
            messages.error(request, f"{spec.title}: session {row.session_id} is {row.status}; restore it first.")
            return HttpResponseRedirect(back)
        try:
            if spec.preview is not None and request.POST.get("confirmed") != "yes":
                return self._confirm(request, row, spec, data)
            outcome = spec.run(request, row, data)
        except LeafConflict as exc:
            if spec.preview is None:
                messages.error(request, f"{spec.title} refused: {exc.code}: {exc}")
                return HttpResponseRedirect(back)
            # The page confirmed was stale (an agent appended meanwhile): nothing was done;
            # show the confirmation again, as the tree is now.
            messages.error(request, f"{spec.title} refused, nothing was done: {exc.code}: {exc}")
            try:
                return self._confirm(request, row, spec, data)
            except SessionTreeError as again:
                messages.error(request, f"{spec.title} refused: {again.code}: {again}")
                return HttpResponseRedirect(back)
        except SessionTreeError as exc:
            messages.error(request, f"{spec.title} refused: {exc.code}: {exc}")
            return HttpResponseRedirect(back)
        self.log_change(request, row, outcome.message)
        if outcome.session is not None:
            self.log_addition(request, outcome.session, f"Forked from {row.session_id}. {outcome.message}")
            messages.success(request, outcome.message)
            return HttpResponseRedirect(self._tree_url(outcome.session.pk))
        messages.success(request, outcome.message)
        query = {"focus": outcome.focus_entry_id} if outcome.focus_entry_id else {}
        return HttpResponseRedirect(self._tree_url(row.pk, **query))

    def _confirm(
        self,
        request: HttpRequest,
        row: AgentSession,
        spec: Any,
        data: dict[str, Any],
    ) -> HttpResponse:
        """The confirmation page of ``spec``, as the tree is now. When the leaf
        moved since the operator's page was read (the form's ``expected_leaf``),
        the page says so and confirming acts on the tree it shows: it is never
        a preview of a leaf the operator did not see."""
        provider = get_provider_for_session(row.session_id)
        session = provider.get_session(row.session_id)
        current = session["leaf_entry_id"] if session is not None else row.leaf_entry_id
        seen = parse_expected_leaf(data.get("expected_leaf"))
        moved = "expected_leaf" in data and seen is not UNSET and seen != current
        fields = {k: v for k, v in request.POST.items() if k not in ("csrfmiddlewaretoken", "confirmed")}
        if moved:
            data = {**data, "expected_leaf": current or NO_LEAF}
            fields["expected_leaf"] = current or NO_LEAF
        preview = spec.preview(row, data)
        title = f"{spec.title}: are you sure?" if preview.possible else f"{spec.title}: nothing to do"
        context = self._page_context(request, row, title)
        context.update(
            {
                "action": spec,
                "preview": preview,
                "fields": list(fields.items()),
                "moved": moved,
                "seen_leaf": seen if moved else None,
                "current_leaf": current,
            }
        )
        return guarded_page(TemplateResponse(request, "admin/sessiontree/tree/confirm.html", context))


# --- helpers for the templates ---------------------------------------------------------------


def _short_time(value: dt.datetime | None) -> str:
    return moment(value)


def _int(value: Any, default: int) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return default


def _fields_caption(entry: Any) -> str:
    """What the entry panel's fields are of: a custom type, a tool's result, else the entry type."""
    message = entry.get("message") if entry.get("type") == "message" else None
    if entry.get("customType"):
        return str(entry["customType"])
    if isinstance(message, dict) and message.get("role") == "toolResult":
        return f"{message.get('toolName')} result"
    return str(entry.get("type"))


def _brief(entry: Any) -> dict[str, Any]:
    marker, preview = describe_entry(entry)
    message = entry.get("message") if entry.get("type") == "message" else None
    text = message_text(message) if isinstance(message, dict) else ""
    return {
        "id": entry["id"],
        "type": entry.get("type"),
        "marker": marker,
        "preview": preview,
        "text": shorten(text, 2000) if text else "",
        "time": entry.get("timestamp"),
    }


def _usage_entry(detail: Any, index: int | None) -> str | None:
    """The entry whose provider-reported usage the context's size starts from."""
    if index is None:
        return None
    source = detail.context["source_entry_ids"]
    return source[index] if index < len(source) else None


def _tip_view(tip: BranchTip) -> dict[str, Any]:
    """A branch tip as the compare page offers it: a name an operator recognizes."""
    name = ""
    if tip.name_entry is not None:
        marker, preview = describe_entry(tip.name_entry)
        name = f"{marker}: {shorten(preview, 70)}"
    if tip.is_leaf:
        where = "the leaf (active path)"
    elif tip.fork_id is not None:
        where = f"branch from {tip.fork_id}, {tip.size} entr{'y' if tip.size == 1 else 'ies'}"
    else:
        where = "a branch tip"
    title = " — ".join(part for part in (f"“{tip.label}”" if tip.label else "", name) if part)
    return {
        "id": tip.entry_id,
        "is_leaf": tip.is_leaf,
        "label": tip.label,
        "where": where,
        "name": name,
        "text": f"{tip.entry_id} · {where}" + (f" · {title}" if title else ""),
        "depth": tip.depth,
        "time": (tip.tip_entry or {}).get("timestamp"),
    }


def _aligned_view(aligned: Any) -> dict[str, Any]:
    left = _brief(aligned.a) if aligned.a is not None else None
    right = _brief(aligned.b) if aligned.b is not None else None
    if aligned.kind == "changed" and left and right:
        diff = word_diff_html(left["text"], right["text"]) if left["text"] and right["text"] else None
        if diff is not None:
            left["diff"], right["diff"] = diff
    return {"kind": aligned.kind, "a": left, "b": right, "a_depth": aligned.a_depth, "b_depth": aligned.b_depth}


def _match_row(entry: Any, matches: Any) -> dict[str, Any]:
    marker, preview = describe_entry(entry)
    label = matches.labels.get(entry["id"])
    return {
        "id": entry["id"],
        "marker": marker,
        "preview": preview,
        "label": label["label"] if label else "",
        "active": entry["id"] in matches.active,
        "leaf": entry["id"] == matches.leaf_entry_id,
    }


def _step_view(step: Any) -> dict[str, Any]:
    marker, preview = describe_entry(step.entry)
    text = message_text(step.message) if step.message is not None else ""
    return {
        "id": step.entry["id"],
        "status": step.status,
        "marker": marker,
        "role": (step.message or {}).get("role", ""),
        "text": shorten(text, 400) if text else preview,
        "tokens": step.tokens,
        "compacted_by": step.compacted_by,
    }
