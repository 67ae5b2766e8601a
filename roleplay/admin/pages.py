"""Roleplay pages of a session's admin: the character's state at any entry,
with the entry behind every value; the state diff of two entries; the review
queue; corrections, checkpoints, turn repairs and archiving the character.

Reads are ``roleplay.service.inspect_state_detail`` and ``diff_states``
(one consistent read each, from the latest checkpoint). Every write is one
``roleplay.service`` call as the signed-in user on the ``admin`` channel
(audited there), carrying the leaf the operator saw (``expected_leaf_id``),
plus Django's ``LogEntry``. Writes that change the character's canon or end
something ask first: ``roleplay.service.plan_write`` runs the write's own
checks without appending, and the confirmation page shows what would be
appended and what would change. Input the reducer refuses is shown on its
form, and nothing is appended.

Permissions as on the tree page: the view permission reads,
``moderate_session`` acts (403 otherwise); archived or deleted sessions, and
a character archived on the branch, show a banner and no action.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.http import urlencode

from sessiontree.admin.entry_display import custom_fields, shorten, to_json
from sessiontree.admin.moderation import CHANNEL, NO_LEAF, ExpectedLeafForm, parse_expected_leaf
from sessiontree.admin.plugins import guarded_page, session_page_url
from sessiontree.core.context_builder import UNSET
from sessiontree.core.errors import SessionTreeError
from sessiontree.core.types import Entry
from sessiontree.models import AgentSession
from sessiontree.providers import keyed_reads
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.selectors import entry_context
from sessiontree.selectors.entry_context import recent_tips
from sessiontree.selectors.tree_window import read_skeleton

from .. import service
from ..inspection import value_at
from ..schema import roleplay_entry_kind
from .display import roleplay_marker, summarize_ops

if TYPE_CHECKING:
    from sessiontree.admin.sessions import AgentSessionAdmin

EVENTS_SHOWN = 50  # the latest events and memories on the panel (the totals are shown)
ARRAY_ITEMS_SHOWN = 50  # the latest items of a longer array in the state tree (``?rows=all`` shows all)
ROWS_SHOWN = 1000  # rows of the state tree at most (``?rows=all`` shows all)
VALUE_CHARS = 300  # a value longer than this is shortened in the state tree (the full JSON is its title)
TIPS_SHOWN = 200
JSON_TEXT_LIMIT = 200_000


def holds_roleplay(entries: Iterable[Entry | None], row: AgentSession) -> bool:
    """Whether to offer the roleplay pages: a structured roleplay entry among
    ``entries`` (what a page has loaded anyway), or a ``characterId`` in the
    session's metadata. Cheap by design: it reads nothing more."""
    metadata = row.metadata if isinstance(row.metadata, dict) else {}
    if isinstance(metadata.get("characterId"), str):
        return True
    return any(entry is not None and roleplay_entry_kind(entry) is not None for entry in entries)


@dataclass
class Tips:
    """The branch tips (suggested entries to look at or compare) and whether
    the entry looked at lies on the active path."""

    leaf_entry_id: str | None
    tips: list[dict[str, Any]]
    at_on_active_path: bool = True


def read_tips(provider: SessionTreeProvider, session_id: str, at: str | None = None) -> Tips:
    """The session's branch tips (``TIPS_SHOWN`` at most, append order) and
    whether ``at`` lies on the active path. A session longer than
    ``TIPS_SCAN`` entries is read by key (issue 23): its latest tips among its
    last ``TIPS_SCAN`` entries, and ``at``'s place by the path facts. A
    shorter one (whose scan would read all of it anyway), or one whose
    storage keeps no path facts, lays out the tree page's skeleton instead
    (its shape kept per process): its first tips."""
    with provider.read(session_id) as view:
        leaf = view.state.leaf_entry_id
        shown = recent_tips(view, TIPS_SHOWN) if view.state.entry_count > entry_context.TIPS_SCAN else None
        at_on_path: bool | None = True if at is None or at == leaf else None
        if at_on_path is None and shown is not None:
            found = keyed_reads.on_path(view, leaf, [at]) if at is not None else None
            at_on_path = None if found is None else at in found
        if shown is None or at_on_path is None:  # what the keys cannot say: the tree page's skeleton
            skeleton = read_skeleton(view)
            shown = skeleton.tips[:TIPS_SHOWN] if shown is None else shown
            at_on_path = at in skeleton.active if at_on_path is None else at_on_path
    return Tips(leaf, [{"id": tip, "is_leaf": tip == leaf} for tip in shown], at_on_path)


def shown_rows(rows: list[Any], *, everything: bool = False) -> list[dict[str, Any]]:
    """The state rows the panel shows, as dicts it can decorate: an array
    longer than ``ARRAY_ITEMS_SHOWN`` shows its latest items after one
    ``hidden`` row counting the earlier ones, and the tree stops after
    ``ROWS_SHOWN`` rows, so a state holding a long list stays one readable
    page. ``everything`` shows every row."""
    if everything:
        return [dict(row) for row in rows]
    shown: list[dict[str, Any]] = []
    first_shown: list[tuple[int, int]] = []  # (depth of an array's items, first index shown), innermost last
    skip_below: int | None = None  # skip rows deeper than this (a hidden item's subtree)
    for row in rows:
        depth = row["depth"]
        if skip_below is not None:
            if depth > skip_below:
                continue
            skip_below = None
        while first_shown and depth < first_shown[-1][0]:
            first_shown.pop()
        inner = first_shown[-1] if first_shown else None
        if inner is not None and depth == inner[0] and isinstance(row["key"], int) and row["key"] < inner[1]:
            if row["key"] == 0:
                shown.append({"node": "hidden", "depth": depth, "size": inner[1], "pointer": row["pointer"]})
            skip_below = depth
            continue
        if len(shown) >= ROWS_SHOWN:
            shown.append({"node": "hidden", "depth": 0, "size": None, "pointer": ""})
            break
        shown.append(dict(row))
        if row["node"] == "array" and row["size"] > ARRAY_ITEMS_SHOWN:
            first_shown.append((depth + 1, row["size"] - ARRAY_ITEMS_SHOWN))
    return shown


# --- forms ---------------------------------------------------------------------------------------


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise forms.ValidationError(
            f'{what} is not JSON. Text goes in double quotes ("chin-length"); numbers, true, false, null, '
            "[lists] and {objects} as they are."
        ) from None


def _json_area(label: str, rows: int, help_text: str = "", *, required: bool = False) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=required,
        max_length=JSON_TEXT_LIMIT,
        strip=True,
        widget=forms.Textarea(attrs={"rows": rows, "cols": 60, "class": "json-input", "spellcheck": "false"}),
        help_text=help_text,
    )


CORRECTION_OPS = (
    ("replace", "replace the value"),
    ("add", "add a value (or a new key)"),
    ("remove", "remove it"),
    ("patch", "several ops (JSON Patch below)"),
)


class CorrectionForm(ExpectedLeafForm):
    """``/rp state correct``: one op inline, or JSON Patch ops; a reason always."""

    op = forms.ChoiceField(choices=CORRECTION_OPS, initial="replace", label="Change")
    path = forms.CharField(
        required=False, max_length=2000, label="Path", help_text="A JSON pointer into the state, e.g. /appearance/hair"
    )
    value = _json_area("New value", 2, "JSON: text in double quotes.")
    expected = _json_area(
        "Recorded value",
        2,
        "Optional, for replace and remove: the value you believe is recorded. If the state holds another one, "
        "nothing is appended.",
    )
    ops = _json_area("JSON Patch ops", 4, 'For several ops: [{"op": "replace", "path": "/hair", "value": "long"}, …]')
    reason = forms.CharField(max_length=2000, label="Reason", help_text="Required: why the record was wrong.")
    corrects_commit_id = forms.CharField(
        required=False,
        max_length=200,
        label="Corrects commit",
        help_text="Optional: the commit this corrects (found from the value's provenance when empty).",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        op = data.get("op")
        payload: dict[str, Any] = {}
        if op == "patch":
            if not data.get("ops"):
                self.add_error("ops", "Give the JSON Patch ops, or choose a single change above.")
            else:
                try:
                    payload["ops"] = parse_json(data["ops"], "The ops")
                except forms.ValidationError as exc:
                    self.add_error("ops", exc)
            for name in ("path", "value", "expected"):
                if data.get(name):
                    self.add_error(name, "Leave this empty with several ops (JSON Patch): they say everything.")
        elif op:
            if not data.get("path"):
                self.add_error("path", "Which value? A JSON pointer such as /appearance/hair.")
            payload.update({"op": op, "path": data.get("path", "")})
            if op in ("add", "replace"):
                if not data.get("value"):
                    self.add_error("value", f"'{op}' needs the new value (JSON).")
                else:
                    try:
                        payload["value"] = parse_json(data["value"], "The new value")
                    except forms.ValidationError as exc:
                        self.add_error("value", exc)
            elif data.get("value"):
                self.add_error("value", "'remove' takes no new value.")
            if data.get("expected"):
                if op == "add":
                    self.add_error("expected", "Only replace and remove check the recorded value.")
                else:
                    try:
                        payload["from"] = parse_json(data["expected"], "The recorded value")
                    except forms.ValidationError as exc:
                        self.add_error("expected", exc)
        if data.get("reason"):
            payload["reason"] = data["reason"]
        if data.get("corrects_commit_id"):
            payload["correctsCommitId"] = data["corrects_commit_id"]
        data["payload"] = payload
        return data


class ReviewForm(ExpectedLeafForm):
    review_id = forms.CharField(max_length=200, widget=forms.HiddenInput)
    value = _json_area("Value", 2, "JSON: replaces the proposed value.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("value"):
            try:
                data["parsed_value"] = parse_json(data["value"], "The value")
            except forms.ValidationError as exc:
                self.add_error("value", exc)
        return data


class AmendForm(ReviewForm):
    value = _json_area("Value", 2, "JSON: replaces the proposed value.", required=True)


class RepairForm(ExpectedLeafForm):
    turn_id = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)  # the form it came from
    proposal = _json_area("Repair", 6, required=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("proposal"):
            try:
                data["parsed_proposal"] = parse_json(data["proposal"], "The repair")
            except forms.ValidationError as exc:
                self.add_error("proposal", exc)
        return data


class ArchiveCharacterForm(ExpectedLeafForm):
    reason = forms.CharField(required=False, max_length=2000, label="Reason")


# --- actions ---------------------------------------------------------------------------------------


Call = dict[str, Any]  # the write's keyword arguments (besides session, actor and channel)


@dataclass(frozen=True)
class RoleplayAction:
    name: str
    title: str
    form_class: type[forms.Form]
    write: Callable[..., Entry]
    arguments: Callable[[dict[str, Any]], Call]
    report: Callable[[Entry, dict[str, Any]], str]  # what was appended, for the message and the LogEntry
    confirm: bool  # ask first (the plan of the write), or act at once
    form_key: Callable[[dict[str, Any]], str]  # which form on the state page shows this action's errors
    destructive: bool = False


def _review_key(data: Mapping[str, Any]) -> str:
    return f"review:{data.get('review_id', '')}"


def _turn_key(data: Mapping[str, Any]) -> str:
    return f"turn:{data.get('turn_id', '')}"


def _decision(decision: str) -> Callable[[dict[str, Any]], Call]:
    def arguments(data: dict[str, Any]) -> Call:
        kwargs: dict[str, Any] = {"review_id": data["review_id"], "decision": decision}
        if decision == "accept" and "parsed_value" in data:
            kwargs["value"] = data["parsed_value"]
        return kwargs

    return arguments


def _report_correction(entry: Entry, data: dict[str, Any]) -> str:
    commit = entry.get("data") or {}
    corrects = f", correcting {commit['correctsCommitId']}" if commit.get("correctsCommitId") else ""
    return (
        f"Appended correction commit {commit.get('commitId')} as entry {entry['id']}{corrects} "
        f"({summarize_ops(commit.get('ops'))}; reason: {commit.get('reason')})."
    )


def _report_decision(entry: Entry, data: dict[str, Any]) -> str:
    payload = entry.get("data") or {}
    verb = "acceptance" if payload.get("decision") == "accept" else "rejection"
    amended = (
        f" with the value {shorten(data['value'], 80)} (amendment {entry['parentId']})" if data.get("value") else ""
    )
    return f"Appended {verb} of review {payload.get('reviewId')} as entry {entry['id']}{amended}."


def _report_amendment(entry: Entry, data: dict[str, Any]) -> str:
    payload = entry.get("data") or {}
    return (
        f"Appended amendment of review {payload.get('reviewId')} as entry {entry['id']} "
        f"(value {shorten(to_json(payload.get('value')), 80)}); the review stays pending."
    )


def _report_checkpoint(entry: Entry, data: dict[str, Any]) -> str:
    payload = entry.get("data") or {}
    return f"Appended checkpoint {entry['id']} of {payload.get('characterId')} at revision {payload.get('revision')}."


def _report_repair(entry: Entry, data: dict[str, Any]) -> str:
    payload = entry.get("data") or {}
    commit = payload.get("commit") or {}
    return (
        f"Appended repair of turn {payload.get('turnId')} as entry {entry['id']} "
        f"(commit {commit.get('commitId')}: {summarize_ops(commit.get('ops'))})."
    )


def _report_archive(entry: Entry, data: dict[str, Any]) -> str:
    payload = entry.get("data") or {}
    reason = f" (reason: {payload['reason']})" if payload.get("reason") else ""
    return (
        f"Appended archive entry {entry['id']}: character {payload.get('characterId')} is archived on this "
        f"branch{reason}."
    )


ACTIONS: dict[str, RoleplayAction] = {
    action.name: action
    for action in (
        RoleplayAction(
            "correct",
            "Correct the state",
            CorrectionForm,
            service.correct_state,
            lambda data: {"payload": data["payload"]},
            _report_correction,
            confirm=True,
            form_key=lambda data: "correction",
        ),
        RoleplayAction(
            "accept_review",
            "Accept a review",
            ReviewForm,
            service.decide_review,
            _decision("accept"),
            _report_decision,
            confirm=True,
            form_key=_review_key,
        ),
        RoleplayAction(
            "reject_review",
            "Reject a review",
            ReviewForm,
            service.decide_review,
            _decision("reject"),
            _report_decision,
            confirm=True,
            form_key=_review_key,
            destructive=True,
        ),
        RoleplayAction(
            "amend_review",
            "Amend a review",
            AmendForm,
            service.amend_review,
            lambda data: {"review_id": data["review_id"], "value": data["parsed_value"]},
            _report_amendment,
            confirm=False,
            form_key=_review_key,
        ),
        RoleplayAction(
            "checkpoint",
            "Checkpoint now",
            ExpectedLeafForm,
            service.create_checkpoint,
            lambda data: {},
            _report_checkpoint,
            confirm=False,
            form_key=lambda data: "checkpoint",
        ),
        RoleplayAction(
            "repair",
            "Repair a turn",
            RepairForm,
            service.repair_turn,
            lambda data: {"proposal": data["parsed_proposal"]},
            _report_repair,
            confirm=True,
            form_key=_turn_key,
        ),
        RoleplayAction(
            "archive_character",
            "Archive the character",
            ArchiveCharacterForm,
            service.archive,
            lambda data: {"reason": data.get("reason") or None},
            _report_archive,
            confirm=True,
            form_key=lambda data: "archive",
            destructive=True,
        ),
    )
}


# --- what the templates show ---------------------------------------------------------------------


def _json_text(value: Any, limit: int = VALUE_CHARS) -> str:
    return shorten(to_json(value), limit)


def item_text(item: Any) -> str:
    """An event or memory as a line: a string, an object's summary or text, else its JSON."""
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in ("summary", "text", "description"):
            if isinstance(item.get(key), str):
                return item[key]
    return to_json(item)


def _review_row(review: dict[str, Any]) -> dict[str, Any]:
    op = review.get("effectiveOp") or review.get("op") or {}
    return {
        "id": review.get("reviewId"),
        "status": review.get("status"),
        "op": summarize_ops([op]),
        "note": review.get("note") or "",
        "commit_id": review.get("commitId"),
        "entry_id": review.get("entryId"),
        "amendment": review.get("amendment"),
        "amendment_json": _json_text((review.get("amendment") or {}).get("value"), 120),
        "amendable": bool(review.get("amendable")),
        "applies_now": review.get("appliesNow"),
        "apply_error": review.get("applyError"),
        "decision_entry_id": review.get("decisionEntryId"),
        "value_json": to_json(op["value"]) if isinstance(op, Mapping) and "value" in op else "",
        "key": f"review:{review.get('reviewId')}",
        "errors": [],
    }


def _plan_view(plan: service.WritePlan) -> dict[str, Any]:
    before, after = plan["before"], plan["after"]
    changes = plan["changes"]
    rows = [
        {"kind": "changed", "pointer": c["pointer"], "old": to_json(c["old_value"]), "new": to_json(c["new_value"])}
        for c in changes["changed"]
    ]
    rows += [
        {"kind": "added", "pointer": c["pointer"], "old": "", "new": to_json(c["new_value"])} for c in changes["added"]
    ]
    rows += [
        {"kind": "removed", "pointer": c["pointer"], "old": to_json(c["old_value"]), "new": ""}
        for c in changes["removed"]
    ]
    rows.sort(key=lambda row: row["pointer"])
    return {
        "leaf_entry_id": plan["leaf_entry_id"],
        "entries": [
            {"marker": roleplay_marker(entry) or entry.get("customType"), "fields": custom_fields(entry)}
            for entry in plan["entries"]
        ],
        "changes": rows,
        "character_id": after["character_id"],
        "revision": (before["revision"], after["revision"]),
        "state_hash": (before["state_hash"], after["state_hash"]),
        "pending": (len(before["pending_reviews"]), len(after["pending_reviews"])),
        "incomplete": (len(before["incomplete_turns"]), len(after["incomplete_turns"])),
        "archived": (before["archived"], after["archived"]),
        "problems": after["problems"][len(before["problems"]) :],
    }


@dataclass
class FormErrors:
    """Errors of one posted form, to show where the operator typed: the state page re-rendered."""

    key: str
    form: forms.Form
    messages: list[str] = field(default_factory=list)


class RoleplayPages:
    """The roleplay views of ``AgentSessionAdmin`` (its ``get_urls`` routes them)."""

    def __init__(self, model_admin: AgentSessionAdmin) -> None:
        self.model_admin = model_admin

    # --- urls ---------------------------------------------------------------------------------------

    def state_url(self, row: AgentSession, **query: Any) -> str:
        return session_page_url("roleplay", row, query=query)

    def _page_context(self, request: HttpRequest, row: AgentSession, title: str) -> dict[str, Any]:
        """The session pages' context, with the roleplay pages' own URLs beside the session's."""
        context = self.model_admin.page_context(request, row, title)
        context["urls"] = {
            **context["urls"],
            "roleplay": session_page_url("roleplay", row),
            "roleplay_diff": session_page_url("roleplay_diff", row),
        }
        return context

    # --- the state panel ------------------------------------------------------------------------------

    def state_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        row = self.model_admin.session_for(request, object_id)
        return self._state_page(request, row)

    def _state_page(self, request: HttpRequest, row: AgentSession, posted: FormErrors | None = None) -> HttpResponse:
        at_text = "" if posted is not None else request.GET.get("at", "").strip()
        character = (request.GET.get("character") or "").strip() or None if posted is None else None
        at: Any = UNSET if not at_text else (None if at_text == NO_LEAF else at_text)
        context = self._page_context(request, row, f"Roleplay state of {row}")
        context.update({"at": at_text, "character": character or ""})
        provider = get_provider_for_session(row.session_id)
        try:
            detail = service.inspect_state_detail(
                provider,
                row.session_id,
                leaf_entry_id=at,
                character_id=character,
                max_events=EVENTS_SHOWN,
                max_memories=EVENTS_SHOWN,
            )
            tips = read_tips(provider, row.session_id, at=detail["leaf_entry_id"])
        except SessionTreeError as exc:
            if exc.http_status == 404:
                raise Http404(str(exc)) from exc
            context["error"] = f"{exc.code}: {exc}"
            return guarded_page(TemplateResponse(request, "roleplay/admin/state.html", context))
        prefill = "" if posted is not None else request.GET.get("path", "")
        everything = request.GET.get("rows") == "all"
        context.update(
            self._state_context(
                row, detail, tips, posted, can_act=context["can_act"], prefill=prefill, all_rows=everything
            )
        )
        if character is not None:  # another character's view of the path: writes target the branch's own
            context.update({"acting": False, "writable": False})
        return guarded_page(TemplateResponse(request, "roleplay/admin/state.html", context))

    def _state_context(
        self,
        row: AgentSession,
        detail: service.StateDetail,
        tips: Tips,
        posted: FormErrors | None,
        *,
        can_act: bool,
        prefill: str = "",
        all_rows: bool = False,
    ) -> dict[str, Any]:
        at_leaf = detail["at_session_leaf"]
        has_character = detail["character_id"] is not None
        acting = can_act and at_leaf and has_character
        writable = acting and not detail["archived"]
        expected_leaf = detail["session_leaf_entry_id"] or NO_LEAF

        rows = shown_rows(detail["rows"], everything=all_rows)
        base = self.state_url(row)
        for state_row in rows:
            if state_row["node"] == "value":
                state_row["value_json"] = _json_text(state_row["value"])
                state_row["value_title"] = to_json(state_row["value"])
            state_row["indent"] = 0.4 + state_row["depth"] * 1.4
            state_row["correct_url"] = f"{base}?{urlencode({'path': state_row['pointer']})}#correction"

        pending = [_review_row(review) for review in detail["pending_reviews"]]
        decided = [_review_row(review) for review in detail["decided_reviews"]]
        turns = [
            {
                **turn,
                "key": f"turn:{turn['turnId']}",
                "template": to_json(turn["repairTemplate"], pretty=True),
                "errors": [],
            }
            for turn in detail["incomplete_turns"]
        ]

        correction_form: forms.Form = self._correction_form(prefill, detail, expected_leaf)
        if posted is not None:
            if posted.key == "correction":
                correction_form = posted.form
            for review in pending:
                if review["key"] == posted.key:
                    review["errors"] = posted.messages
                    review["value_json"] = posted.form.data.get("value") or review["value_json"]
            for turn in turns:
                if turn["key"] == posted.key:
                    turn["errors"] = posted.messages
                    turn["template"] = posted.form.data.get("proposal") or turn["template"]
        return {
            "detail": detail,
            "rows": rows,
            "all_rows_url": self.state_url(row, at=detail["leaf_entry_id"] if not at_leaf else None, rows="all"),
            "events": [item_text(event) for event in detail["events"]],
            "memories": [item_text(memory) for memory in detail["memories"]],
            "pending": pending,
            "decided": decided,
            "turns": turns,
            "identity": detail["identity"],
            "tips": tips.tips,
            "on_active_path": tips.at_on_active_path,
            "acting": acting,
            "writable": writable,
            "expected_leaf": expected_leaf,
            "correction_form": correction_form,
            "archive_form": ArchiveCharacterForm(initial={"expected_leaf": expected_leaf}),
            "posted_errors": posted.messages if posted is not None else [],
            "leaf_state_url": self.state_url(row),
            "diff_url": session_page_url("roleplay_diff", row),
            "action_url": session_page_url("roleplay_action", row, "ACTION").replace("ACTION/", ""),
        }

    @staticmethod
    def _correction_form(pointer: str, detail: service.StateDetail, expected_leaf: str) -> CorrectionForm:
        """An empty correction form, or one prefilled for ``pointer`` (``?path=``, a value's "correct" link)."""
        initial: dict[str, Any] = {"expected_leaf": expected_leaf, "op": "replace"}
        if pointer.startswith("/"):
            initial["path"] = pointer
            try:
                current = to_json(value_at(detail["state"], pointer))
            except (KeyError, IndexError, ValueError, TypeError):
                initial["op"] = "add"
            else:
                initial.update({"value": current, "expected": current})
        return CorrectionForm(initial=initial)

    # --- the diff --------------------------------------------------------------------------------------

    def diff_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        row = self.model_admin.session_for(request, object_id)
        from_text = request.GET.get("from", "").strip()
        to_text = request.GET.get("to", "").strip()
        character = (request.GET.get("character") or "").strip() or None
        context = self._page_context(request, row, f"Roleplay state diff of {row}")
        context.update({"from": from_text, "to": to_text, "character": character or ""})
        provider = get_provider_for_session(row.session_id)
        try:
            tips = read_tips(provider, row.session_id)
            context["tips"] = tips.tips
            context["leaf_entry_id"] = tips.leaf_entry_id
            if to_text:
                diff = service.diff_states(
                    provider,
                    row.session_id,
                    from_text or UNSET,
                    to_text,
                    character_id=character,
                )
                context["diff"] = diff
                context["sections"] = [
                    ("changed", "Changed", [self._diff_item(item) for item in diff["changed"]]),
                    ("added", f"Only at {to_text}", [self._diff_item(item) for item in diff["added"]]),
                    (
                        "removed",
                        f"Only at {diff['from']['entry_id']}",
                        [self._diff_item(item) for item in diff["removed"]],
                    ),
                ]
                context["differences"] = sum(len(diff[key]) for key in ("changed", "added", "removed"))
        except SessionTreeError as exc:
            context["error"] = f"{exc.code}: {exc}"
        return guarded_page(TemplateResponse(request, "roleplay/admin/diff.html", context))

    @staticmethod
    def _diff_item(item: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "pointer": item["pointer"],
            "old": to_json(item["old_value"]) if "old_value" in item else None,
            "new": to_json(item["new_value"]) if "new_value" in item else None,
            "from_provenance": item["from_provenance"],
            "to_provenance": item["to_provenance"],
            "from_removed_by": item.get("from_removed_by"),
            "to_removed_by": item.get("to_removed_by"),
            "added": "new_value" in item and "old_value" not in item,
            "removed": "old_value" in item and "new_value" not in item,
        }

    # --- actions ------------------------------------------------------------------------------------------

    def action_view(self, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        row = self.model_admin.session_for(request, object_id)
        if not self.model_admin.has_moderate_permission(request, row):
            raise PermissionDenied
        spec = ACTIONS.get(action)
        if spec is None:
            raise Http404(f"No roleplay action {action!r}")
        back = self.state_url(row)
        if row.status in (AgentSession.Status.ARCHIVED, AgentSession.Status.DELETED):
            messages.error(request, f"{spec.title}: session {row.session_id} is {row.status}; restore it first.")
            return HttpResponseRedirect(back)
        form = spec.form_class(request.POST)
        if not form.is_valid():
            data = dict(getattr(form, "cleaned_data", {}))
            lines = [
                f"{'' if name == '__all__' else form[name].label + ': '}{error}"
                for name, errs in form.errors.items()
                for error in errs
            ]
            return self._refused(request, row, spec, form, data, lines)
        data = dict(form.cleaned_data)
        kwargs = spec.arguments(data)
        kwargs.update(
            provider=get_provider_for_session(row.session_id),
            session_id=row.session_id,
            actor=request.user,
            channel=CHANNEL,
            expected_leaf_id=parse_expected_leaf(data.get("expected_leaf")),
        )
        provider = kwargs["provider"]
        try:
            if spec.confirm and request.POST.get("confirmed") != "yes":
                plan = service.plan_write(spec.write, **kwargs)
                context = self._page_context(request, row, f"{spec.title}: are you sure?")
                fields = [(k, v) for k, v in request.POST.items() if k not in ("csrfmiddlewaretoken", "confirmed")]
                context.update({"action": spec, "plan": _plan_view(plan), "fields": fields, "state_url": back})
                return guarded_page(TemplateResponse(request, "roleplay/admin/confirm.html", context))
            entry = spec.write(**kwargs)
        except SessionTreeError as exc:
            return self._refused(request, row, spec, form, data, [f"{exc.code}: {exc}"])
        message = spec.report(entry, data)
        try:
            now = service.inspect_state(provider, row.session_id)
        except SessionTreeError:
            now = None
        if now is not None:
            message += (
                f" Now: character {now['character_id']}, revision {now['revision']}, "
                f"state hash {now['state_hash'][:12]}."
            )
        self.model_admin.log_change(request, row, message)
        messages.success(request, message)
        return HttpResponseRedirect(back)

    def _refused(
        self,
        request: HttpRequest,
        row: AgentSession,
        spec: RoleplayAction,
        form: forms.Form,
        data: dict[str, Any],
        lines: list[str],
    ) -> HttpResponse:
        """Nothing was appended. Input typed on a form (a correction, a value, a
        repair) comes back on that form with the reason; the rest is a message."""
        typed = spec.name in ("correct", "amend_review", "repair") or bool(request.POST.get("value"))
        if typed:
            if isinstance(form, CorrectionForm) and not form.errors:
                form.add_error(None, lines[0])
            key = spec.form_key(data or dict(request.POST.items()))
            return self._state_page(request, row, FormErrors(key, form, [f"{spec.title}: {line}" for line in lines]))
        messages.error(request, f"{spec.title} refused, nothing was appended: {'; '.join(lines)}")
        return HttpResponseRedirect(self.state_url(row))
