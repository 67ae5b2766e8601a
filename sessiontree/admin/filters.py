"""List filters of the session list: answered from the meta row's columns
(and, for legal holds, the holds table)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from sessiontree.models import LegalHold


class _YesNoFilter(admin.SimpleListFilter):
    yes: dict[str, Any] = {}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(**self.yes)
        if self.value() == "no":
            return queryset.exclude(**self.yes)
        return queryset


class HasCompactionFilter(_YesNoFilter):
    title = "has compaction"
    parameter_name = "has_compaction"
    yes = {"compaction_count__gt": 0}


class HasBranchesFilter(_YesNoFilter):
    title = "has branches"
    parameter_name = "has_branches"
    yes = {"branch_count__gt": 1}  # tips: a linear session has one


class IsForkFilter(_YesNoFilter):
    title = "is a fork"
    parameter_name = "is_fork"
    yes = {"parent_session_id__isnull": False}


class OnLegalHoldFilter(admin.SimpleListFilter):
    title = "legal hold"
    parameter_name = "on_hold"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        held = LegalHold.objects.values("session_id")
        if self.value() == "yes":
            return queryset.filter(session_id__in=held)
        if self.value() == "no":
            return queryset.exclude(session_id__in=held)
        return queryset
