"""The moderation queue: every flag across sessions, oldest open first.

Filters by category, status, source and by the flagged session's agent, user
and provider; each row opens the session's tree page at the flagged entry.
Bulk actions call the operations layer (``sessiontree.services``) as the
signed-in user on the ``admin`` channel: dismiss, hide the entries from the
model (and mark the flags actioned), erase them in place with their copies
and summaries (after a confirmation page listing every place, with a
reason; likewise), archive their sessions (likewise).
Flags are never added or edited here: they are opened where the entry is
shown, by the API, or by the classifiers.

Who: ``resolve_flag`` to see the queue and act on it (``flag_entry`` holders
see it too); hiding and archiving also need ``moderate_session``, erasing
``erase_entry`` (separate from moderation).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from sessiontree import services
from sessiontree.admin.entry_display import shorten
from sessiontree.core.errors import SessionTreeError
from sessiontree.models import Agent, AgentSession, ModerationFlag
from sessiontree.templatetags.sessiontree_admin import moment

from .erasing import EraseForm, erase_report, place_rows
from .plugins import guarded_page

CHANNEL = "admin"
NOTE_SHOWN = 80


def _session_column(column: str) -> Subquery:
    return Subquery(AgentSession.objects.filter(session_id=OuterRef("session_id")).values(column)[:1])


class _SessionFieldFilter(admin.SimpleListFilter):
    """A filter on a column of the flagged session's meta row."""

    column = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        values = (
            AgentSession.objects.filter(
                session_id__in=ModerationFlag.objects.values("session_id"), **{f"{self.column}__isnull": False}
            )
            .values_list(self.column, flat=True)
            .distinct()
            .order_by(self.column)[:100]
        )
        return [(str(value), str(value)) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() is None:
            return queryset
        sessions = AgentSession.objects.filter(**{self.column: self.value()}).values("session_id")
        return queryset.filter(session_id__in=sessions)


class ProviderFilter(_SessionFieldFilter):
    title = "provider"
    parameter_name = "provider"
    column = "provider"


class UserFilter(_SessionFieldFilter):
    title = "user"
    parameter_name = "user"
    column = "user_id"


class AgentFilter(_SessionFieldFilter):
    title = "agent"
    parameter_name = "agent"
    column = "agent_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        ids = [int(value) for value, _ in super().lookups(request, model_admin)]
        return [(str(agent.pk), agent.name) for agent in Agent.objects.filter(pk__in=ids).order_by("name")]


class StatusFilter(admin.SimpleListFilter):
    """Open flags unless another status is chosen: the queue is what is left to do."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*ModerationFlag.Status.choices, ("all", "All")]

    def choices(self, changelist: Any) -> Any:
        current = self.value() or ModerationFlag.Status.OPEN
        for value, label in self.lookup_choices:
            yield {
                "selected": current == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value() or ModerationFlag.Status.OPEN
        return queryset if value == "all" else queryset.filter(status=value)


@admin.register(ModerationFlag)
class ModerationFlagAdmin(admin.ModelAdmin):
    list_display = (
        "opened",
        "category",
        "status",
        "source",
        "session_link",
        "entry_link",
        "short_note",
        "opened_by",
    )
    list_filter = (StatusFilter, "category", "source", AgentFilter, UserFilter, ProviderFilter)
    search_fields = ("session_id", "entry_id", "note", "opened_by")
    ordering = ("opened_at", "id")
    list_per_page = 100
    actions = ("dismiss_flags", "hide_entries", "erase_entries", "archive_sessions")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ModerationFlag]:
        return (
            super()
            .get_queryset(request)
            .annotate(session_pk=_session_column("pk"), session_title=_session_column("title"))
        )

    # --- who ------------------------------------------------------------------------------------------

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return bool(
            user.has_perm("sessiontree.resolve_flag")
            or user.has_perm("sessiontree.flag_entry")
            or super().has_view_permission(request, obj)
        )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("sessiontree.resolve_flag"))

    def has_moderate_permission(self, request: HttpRequest) -> bool:
        return bool(
            request.user.has_perm("sessiontree.resolve_flag") and request.user.has_perm("sessiontree.moderate_session")
        )

    def has_erase_permission(self, request: HttpRequest) -> bool:
        return bool(
            request.user.has_perm("sessiontree.resolve_flag") and request.user.has_perm("sessiontree.erase_entry")
        )

    # --- columns --------------------------------------------------------------------------------------

    @admin.display(description="opened", ordering="opened_at")
    def opened(self, flag: ModerationFlag) -> str:
        return moment(flag.opened_at)

    @admin.display(description="session")
    def session_link(self, flag: Any) -> str:
        if flag.session_pk is None:
            return format_html("{} <em>(deleted)</em>", flag.session_id)
        url = reverse("admin:sessiontree_agentsession_tree", args=[flag.session_pk])
        return format_html('<a href="{}">{}</a>', url, flag.session_title or flag.session_id)

    @admin.display(description="entry")
    def entry_link(self, flag: Any) -> str:
        if flag.session_pk is None:
            return str(flag.entry_id)
        url = reverse("admin:sessiontree_agentsession_tree", args=[flag.session_pk])
        return format_html('<a href="{}?{}">{}</a>', url, urlencode({"focus": flag.entry_id}), flag.entry_id)

    @admin.display(description="note")
    def short_note(self, flag: ModerationFlag) -> str:
        return shorten(flag.note or "", NOTE_SHOWN)

    # --- bulk actions ------------------------------------------------------------------------------------

    def _resolve(self, request: HttpRequest, flag: ModerationFlag, status: str, note: str) -> None:
        services.moderation.resolve_flag(flag_id=flag.pk, status=status, note=note, actor=request.user, channel=CHANNEL)

    def _each_open(self, request: HttpRequest, queryset: QuerySet[ModerationFlag], verb: str, act: Any) -> None:
        done, failed = 0, []
        for flag in queryset.filter(status=ModerationFlag.Status.OPEN).order_by("opened_at", "id"):
            try:
                act(flag)
                done += 1
            except SessionTreeError as exc:
                failed.append(f"flag {flag.pk}: {exc.code}: {exc}")
        if done:
            messages.success(request, f"{verb} {done} flag(s).")
        for line in failed[:20]:
            messages.error(request, line)
        if not done and not failed:
            messages.info(request, "No open flag was selected: nothing was done.")

    @admin.action(description="Dismiss the selected flags", permissions=["resolve"])
    def dismiss_flags(self, request: HttpRequest, queryset: QuerySet[ModerationFlag]) -> None:
        self._each_open(request, queryset, "Dismissed", lambda flag: self._resolve(request, flag, "dismissed", ""))

    @admin.action(
        description="Hide the flagged entries from the model (and action the flags)", permissions=["moderate"]
    )
    def hide_entries(self, request: HttpRequest, queryset: QuerySet[ModerationFlag]) -> None:
        def act(flag: ModerationFlag) -> None:
            services.moderation.hide_entry(
                session_id=flag.session_id, entry_id=flag.entry_id, actor=request.user, channel=CHANNEL
            )
            self._resolve(request, flag, "actioned", "hidden from the model")

        self._each_open(request, queryset, "Hid the entries of", act)

    @admin.action(description="Archive the flagged sessions (and action the flags)", permissions=["moderate"])
    def archive_sessions(self, request: HttpRequest, queryset: QuerySet[ModerationFlag]) -> None:
        def act(flag: ModerationFlag) -> None:
            services.sessions.archive_session(session_id=flag.session_id, actor=request.user, channel=CHANNEL)
            self._resolve(request, flag, "actioned", "session archived")

        self._each_open(request, queryset, "Archived the sessions of", act)

    @admin.action(
        description="Erase the flagged entries in place, with copies and summaries (and action the flags)…",
        permissions=["erase"],
    )
    def erase_entries(self, request: HttpRequest, queryset: QuerySet[ModerationFlag]) -> TemplateResponse | None:
        """After a confirmation page that lists every place each erase changes
        (dry runs) and asks for a reason and a scope: one
        ``moderation.erase_entry`` per flagged entry, then its open flags are
        actioned."""
        flags = list(queryset.filter(status=ModerationFlag.Status.OPEN).order_by("opened_at", "id"))
        if not flags:
            messages.info(request, "No open flag was selected: nothing was done.")
            return None
        entries: dict[tuple[str, str], list[ModerationFlag]] = {}
        for flag in flags:
            entries.setdefault((flag.session_id, flag.entry_id), []).append(flag)
        form = EraseForm(request.POST) if request.POST.get("post") == "yes" else EraseForm(initial={"scope": "all"})
        if form.is_bound and form.is_valid():
            self._erase_each(request, entries, form.cleaned_data["reason"], form.cleaned_data["scope"])
            return None
        asked = request.POST.get("scope")
        scope = asked if asked in EraseForm.SCOPES else "all"
        previews = []
        for (session_id, entry_id), of_entry in entries.items():
            preview: dict[str, Any] = {"session_id": session_id, "entry_id": entry_id, "flags": of_entry}
            try:
                dry = services.moderation.erase_entry(
                    session_id=session_id,
                    entry_id=entry_id,
                    reason="dry run",
                    scope=scope,
                    dry_run=True,
                    actor=request.user,
                    channel=CHANNEL,
                )
            except SessionTreeError as exc:
                preview["error"] = f"{exc.code}: {exc}"
            else:
                preview.update({"places": place_rows(dry["changed"]), "outside": dry["outside"]})
            previews.append(preview)
        context = {
            **self.admin_site.each_context(request),
            "title": "Erase the flagged entries for good",
            "opts": self.opts,
            "form": form,
            "previews": previews,
            "flags": flags,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return guarded_page(TemplateResponse(request, "admin/sessiontree/moderationflag/erase_selected.html", context))

    def _erase_each(
        self,
        request: HttpRequest,
        entries: dict[tuple[str, str], list[ModerationFlag]],
        reason: str,
        scope: str,
    ) -> None:
        for (session_id, entry_id), of_entry in entries.items():
            try:
                result = services.moderation.erase_entry(
                    session_id=session_id,
                    entry_id=entry_id,
                    reason=reason,
                    scope=scope,
                    actor=request.user,
                    channel=CHANNEL,
                )
                for flag in of_entry:
                    self._resolve(request, flag, "actioned", "erased")
            except SessionTreeError as exc:
                messages.error(request, f"{session_id}/{entry_id} not erased: {exc.code}: {exc}")
                continue
            for level, line in erase_report(result):
                messages.add_message(request, level, line)
