"""Filters of the session list (django-filter). A value that cannot be read
(an unknown status, a date that is not ISO-8601) is a 400 naming the field."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.db.models.functions import Lower
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField

from sessiontree.models import AgentSession
from sessiontree.providers.factory import ProviderChoices


class IdFilter(filters.Filter):
    """A primary key: a whole number the database can hold (a larger one would
    overflow SQLite's integers instead of matching nothing)."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(*args, **kwargs)


class UTCDateTimeField(IsoDateTimeField):
    """ISO-8601, and a moment that exists in UTC (0001-01-01T00:00+05:00 does not)."""

    def to_python(self, value: Any) -> Any:
        moment = super().to_python(value)
        if moment is not None:
            try:
                moment.astimezone(UTC)
            except OverflowError:
                raise forms.ValidationError("This moment is out of range.", code="invalid") from None
        return moment


class MomentFilter(filters.IsoDateTimeFilter):
    field_class = UTCDateTimeField


class SessionFilter(filters.FilterSet):
    agent = IdFilter(field_name="agent_id", help_text="The agent's id.")
    user_id = filters.CharFilter(field_name="user_id", max_length=191)
    provider = filters.ChoiceFilter(field_name="provider", choices=ProviderChoices())
    status = filters.ChoiceFilter(
        field_name="status",
        choices=AgentSession.Status.choices,
        help_text="Default: active and archived sessions (deleted ones only when asked for).",
    )
    search = filters.CharFilter(
        method="search_title", max_length=255, help_text="Part of the title, whatever its case."
    )
    created_after = MomentFilter(field_name="created_at", lookup_expr="gte")
    created_before = MomentFilter(field_name="created_at", lookup_expr="lt")
    updated_after = MomentFilter(field_name="updated_at", lookup_expr="gte")
    updated_before = MomentFilter(field_name="updated_at", lookup_expr="lt")

    class Meta:
        model = AgentSession
        fields: list[str] = []

    def search_title(self, queryset: QuerySet[AgentSession], name: str, value: str) -> QuerySet[AgentSession]:
        # Not icontains: under MySQL's binary collation (utf8mb4_bin) LIKE is case-sensitive.
        return queryset.annotate(title_lower=Lower("title")).filter(title_lower__contains=value.lower())

    def is_valid(self) -> bool:
        # An empty value filters nothing: refused like any other unreadable one.
        for name in self.filters:
            if name in self.data and self.data.get(name) == "":
                self.form.add_error(
                    name if name in self.form.fields else None, "A value is required (or leave it out)."
                )
        return bool(super().is_valid())

    def filter_queryset(self, queryset: QuerySet[AgentSession]) -> QuerySet[AgentSession]:
        queryset = super().filter_queryset(queryset)
        if not self.form.cleaned_data.get("status"):
            queryset = queryset.exclude(status=AgentSession.Status.DELETED)
        return queryset
