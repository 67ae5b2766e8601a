"""Data protection in the admin: a user's data erased (an action on users,
superusers only, after a page listing everything it will touch) and
retention run by hand (a page of the agents, with its dry run first; needs
``sessiontree.hard_delete_session``). Each is one call to
``services.protection``; docs/data-protection.md says what they delete."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from sessiontree.core.errors import SessionTreeError
from sessiontree.services import protection

from .erasing import place_rows

CHANNEL = "admin"
RETENTION_PERMISSION = "sessiontree.hard_delete_session"


class DataProtectionUserAdmin(UserAdmin):
    """Django's user admin, with the erasure of a user's data as an action."""

    actions = ["erase_user_data"]

    def has_superuser_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    @admin.action(description="Erase these users' data for good (sessions, copies, notes)", permissions=["superuser"])
    def erase_user_data(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        if not self.has_superuser_permission(request):  # the action is hidden from others; a forged POST too
            raise PermissionDenied
        users = list(queryset.order_by("pk"))
        if request.POST.get("post") == "yes":
            for user in users:
                name = user.get_username()
                try:
                    report = protection.erase_user_data(user_id=name, actor=request.user, channel=CHANNEL)
                except SessionTreeError as exc:
                    messages.error(request, f"{name}: nothing erased: {exc.code}: {exc}")
                    continue
                counts = report["counts"]
                messages.success(
                    request,
                    f"{name}: erased {counts['sessions']} session(s), {counts['copies']} copy/copies in other "
                    f"users' sessions, {counts['files']} file(s).",
                )
                for path in report["outside"]:
                    messages.warning(request, f"{name}: outside the store, not changed, still holding a copy: {path}")
            return None
        previews = []
        for user in users:
            name = user.get_username()
            preview: dict[str, Any] = {"user": name}
            try:
                report = protection.erase_user_data(user_id=name, dry_run=True, actor=request.user, channel=CHANNEL)
            except SessionTreeError as exc:
                preview["error"] = f"{exc.code}: {exc}"
            else:
                preview["report"] = report
                preview["copies"] = place_rows(report["copies"])
                preview["rows"] = [(table, ids) for table, ids in report["rows"].items() if ids]
            previews.append(preview)
        context = {
            **self.admin_site.each_context(request),
            "title": "Erase these users' data for good",
            "opts": self.opts,
            "previews": previews,
            "users": users,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/sessiontree/user_erase.html", context)


def install_user_admin(site: admin.AdminSite) -> None:
    """Django's own user admin, replaced by the one with the erase action."""
    model = get_user_model()
    if site.is_registered(model):
        site.unregister(model)
    site.register(model, DataProtectionUserAdmin)


def retention_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The agents' retention page: what ``apply_retention`` would delete and
    skip now (a dry run), and a button that runs it."""
    if not (request.user.is_active and request.user.is_staff and request.user.has_perm(RETENTION_PERMISSION)):
        raise PermissionDenied
    if request.method == "POST":
        try:
            report = protection.apply_retention(actor=request.user, channel=CHANNEL)
        except SessionTreeError as exc:
            messages.error(request, f"Retention not applied: {exc.code}: {exc}")
        else:
            messages.success(request, protection.summary_line(report))
            for failure in report["failed"]:
                messages.error(request, f"{failure['session_id']}: {failure['code']}: {failure['message']}")
        return HttpResponseRedirect(reverse("admin:sessiontree_agent_retention"))
    report = protection.apply_retention(dry_run=True, actor=request.user, channel=CHANNEL)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Retention",
        "opts": model_admin.opts,
        "report": report,
        "summary": protection.summary_line(report),
        "skipped": [(reason.replace("_", " "), ids) for reason, ids in report["skipped"].items()],
        "default_days": protection.default_retention_days(),
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/sessiontree/agent/retention.html", context)
