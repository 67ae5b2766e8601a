"""The admin's search page: entries across sessions whose text holds some
words, with the session list's filters, each row a highlighted snippet
linking into the session's tree page at that entry.

Who: whoever may view sessions in the admin (``view_agentsession`` or
``change_agentsession``); what they find is what
``services.moderation.search_entries`` lets them see (staff with
``view_agentsession`` and superusers: every session). A read: nothing is
written or audited.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from sessiontree import services
from sessiontree.core.errors import SessionTreeError
from sessiontree.core.search import MAX_QUERY_LENGTH
from sessiontree.models import Agent, AgentSession
from sessiontree.providers.factory import provider_choices
from sessiontree.services.search import DEFAULT_LIMIT

from .plugins import guarded_page

MAX_ADMIN_LIMIT = 200


class SearchForm(forms.Form):
    q = forms.CharField(
        label="Words",
        max_length=MAX_QUERY_LENGTH,
        required=False,
        widget=forms.TextInput(attrs={"size": 40, "placeholder": "every word must occur", "autofocus": True}),
    )
    user = forms.CharField(label="User", max_length=191, required=False)
    agent = forms.ModelChoiceField(Agent.objects.all(), required=False, empty_label="any agent")
    provider = forms.ChoiceField(required=False)
    status = forms.ChoiceField(
        required=False, choices=[("", "active and archived"), *AgentSession.Status.choices], label="Status"
    )
    session = forms.CharField(label="Session id", max_length=64, required=False)
    limit = forms.IntegerField(min_value=1, max_value=MAX_ADMIN_LIMIT, initial=DEFAULT_LIMIT, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The registry's kinds, read when the page is built.
        self.fields["provider"].choices = [("", "any provider"), *provider_choices()]  # type: ignore[attr-defined]


def search_view(model_admin: Any, request: HttpRequest) -> HttpResponse:
    if not model_admin.has_view_or_change_permission(request):
        raise PermissionDenied
    form = SearchForm(request.GET if request.GET else None)
    rows: list[dict[str, Any]] = []
    error = None
    searched = False
    if form.is_valid() and form.cleaned_data["q"].strip():
        data = form.cleaned_data
        searched = True
        try:
            results = services.moderation.search_entries(
                q=data["q"],
                user=data["user"] or None,
                agent=data["agent"].pk if data["agent"] is not None else None,
                session_id=data["session"] or None,
                provider=data["provider"] or None,
                status=data["status"] or None,
                limit=data["limit"] or DEFAULT_LIMIT,
                actor=request.user,
            )
        except SessionTreeError as exc:
            error = f"{exc.code}: {exc}"
            results = []
        sessions = {
            session_id: (pk, title)
            for session_id, pk, title in AgentSession.objects.filter(
                session_id__in={result["session_id"] for result in results}
            ).values_list("session_id", "pk", "title")
        }
        for result in results:
            pk, title = sessions.get(result["session_id"], (None, None))
            tree = reverse("admin:sessiontree_agentsession_tree", args=[pk]) if pk is not None else None
            rows.append(
                {
                    **result,
                    "session_title": title or result["session_id"],
                    "session_url": tree,
                    "entry_url": f"{tree}?{urlencode({'focus': result['entry_id']})}#entry-{result['entry_id']}"
                    if tree is not None
                    else None,
                    # Built by core.search.snippet_html: the text escaped, only <mark> added.
                    "snippet": mark_safe(result["snippet"]),
                }
            )
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": "Search entries across sessions",
        "form": form,
        "rows": rows,
        "searched": searched,
        "error": error,
        "sees_all": services.search.sees_every_session(request.user),
    }
    return guarded_page(TemplateResponse(request, "admin/sessiontree/search.html", context))


__all__ = ["SearchForm", "search_view"]
