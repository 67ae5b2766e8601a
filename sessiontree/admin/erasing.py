"""The erase page of the tree (and the queue's bulk erase): the form, the
places an erase changes as rows with links, and what the console says
afterwards. The erase itself is ``services.moderation.erase_entry``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django import forms
from django.contrib import messages
from django.urls import reverse
from django.utils.http import urlencode

from sessiontree.core.errors import BadInput
from sessiontree.models import AgentSession
from sessiontree.services.erasure import MAX_REASON, SCOPES, check_reason

SCOPE_CHOICES = [
    ("all", "this entry, every copy in the lineage, the summaries made from it, the context edits carrying it"),
    ("entry", "this session's entry only"),
]


class EraseForm(forms.Form):
    SCOPES = SCOPES

    reason = forms.CharField(
        max_length=MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Why the text must go (a request, a ticket, a law): kept in the audit record. Required.",
    )
    scope = forms.ChoiceField(choices=SCOPE_CHOICES, initial="all", widget=forms.RadioSelect)

    def clean_reason(self) -> str:
        try:
            return check_reason(self.cleaned_data.get("reason", ""))
        except BadInput as exc:  # said on the form
            raise forms.ValidationError(str(exc)) from None


def _tree_links(session_ids: Iterable[str]) -> dict[str, int]:
    return dict(AgentSession.objects.filter(session_id__in=set(session_ids)).values_list("session_id", "pk"))


def place_rows(places: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The places of an erase result, each with a link to its entry in its session's tree."""
    pks = _tree_links(place["session_id"] for place in places)
    rows = []
    for place in places:
        pk = pks.get(place["session_id"])
        url = None
        if pk is not None:
            url = (
                reverse("admin:sessiontree_agentsession_tree", args=[pk])
                + "?"
                + urlencode({"focus": place["entry_id"]})
            )
        rows.append({**place, "url": url})
    return rows


def _named(places: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{place['session_id']}/{place['entry_id']}" for place in places)


def erase_summary(entry_id: str, result: Mapping[str, Any]) -> str:
    """One line of what an erase did (the session's history keeps it)."""
    changed = result["changed"]
    counts = {kind: sum(1 for place in changed if place["kind"] == kind) for kind in ("entry", "copy", "summary")}
    return (
        f"Erased entry {entry_id}: {counts['entry']} entry, {counts['copy']} cop{'y' if counts['copy'] == 1 else 'ies'}, "
        f"{counts['summary']} summar{'y' if counts['summary'] == 1 else 'ies'}."
    )


def erase_report(result: Mapping[str, Any]) -> list[tuple[int, str]]:
    """What the console says after an erase (message level, text): the
    entry, which copies and which summaries were erased, and the files
    outside the store that still hold it (a warning)."""
    changed = result["changed"]
    lines: list[str] = []
    own = [place for place in changed if place["kind"] == "entry"]
    copies = [place for place in changed if place["kind"] == "copy"]
    summaries = [place for place in changed if place["kind"] == "summary"]
    if own:
        lines.append(f"Erased {_named(own)}.")
    if not changed:
        lines.append("Nothing was left to erase: the entry and its copies were erased already.")
    if copies:
        lines.append(f"Copies erased ({len(copies)}): {_named(copies)}.")
    if summaries:
        lines.append(f"Summaries erased ({len(summaries)}): {_named(summaries)}.")
    said = [(messages.SUCCESS, line) for line in lines]
    if result["outside"]:
        outside = ", ".join(result["outside"])
        said.append((messages.WARNING, f"Outside the store and not changed, these files still hold it: {outside}."))
    return said
