"""Moderation actions of the tree page: a form, a preview for the
confirmation page, and one call to the operations layer each.

Every action runs as the signed-in user on the ``admin`` channel, so the
operations layer writes its audit record; the admin adds Django's
``LogEntry`` with the message returned here. None edits a completed entry:
they move the leaf, append entries (a hide or unhide is a ``context_edit``),
create a session, change the status or open a flag (a row beside the tree).
Each names the permission it needs (``moderate_session`` unless said).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import HttpRequest

from sessiontree import services
from sessiontree.core.compaction import CompactionSettings, estimate_context_tokens, prepare_compaction
from sessiontree.core.context_builder import UNSET
from sessiontree.core.entries import message_of
from sessiontree.models import AgentSession
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.selectors.hidden import hidden_on_branches
from sessiontree.services.tree import FORK_POSITIONS

from .entry_display import describe_entry, shorten

CHANNEL = "admin"
NO_LEAF = "-"  # the expected leaf "before the root" in a form


def parse_expected_leaf(value: str | None) -> Any:
    """The form's expected leaf: absent → don't check; ``-`` → no leaf; else the id."""
    if value in (None, ""):
        return UNSET
    return None if value == NO_LEAF else value


class ExpectedLeafForm(forms.Form):
    # The leaf the operator saw: if it moved meanwhile the action is refused (LeafConflict).
    expected_leaf = forms.CharField(required=False, widget=forms.HiddenInput)


class EntryForm(ExpectedLeafForm):
    entry_id = forms.CharField(max_length=64, widget=forms.HiddenInput)


class NavigateForm(EntryForm):
    summarize = forms.BooleanField(required=False, label="Summarize the branch being left")
    label = forms.CharField(required=False, max_length=200, label="Label")
    instructions = forms.CharField(required=False, max_length=2000, label="Summary instructions")


class LabelForm(forms.Form):
    entry_id = forms.CharField(max_length=64, widget=forms.HiddenInput)
    label = forms.CharField(required=False, max_length=200, help_text="Empty clears the label.")


class ForkForm(forms.Form):
    entry_id = forms.CharField(max_length=64, widget=forms.HiddenInput)
    position = forms.ChoiceField(choices=[(p, p) for p in FORK_POSITIONS], initial="at")
    title = forms.CharField(required=False, max_length=255)


class CompactForm(ExpectedLeafForm):
    keep_recent_tokens = forms.IntegerField(
        min_value=0,
        initial=CompactionSettings().keep_recent_tokens,
        help_text="Tokens of recent conversation kept verbatim; the rest is summarized.",
    )
    instructions = forms.CharField(required=False, max_length=2000, label="Summary instructions")


class StatusForm(forms.Form):
    pass


class FlagForm(forms.Form):
    entry_id = forms.CharField(max_length=64, widget=forms.HiddenInput)
    category = forms.ChoiceField(choices=())
    note = forms.CharField(required=False, max_length=services.moderation.MAX_NOTE, widget=forms.Textarea)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The configured categories, read when the form is made (settings may change in tests).
        category = self.fields["category"]
        assert isinstance(category, forms.ChoiceField)
        category.choices = [(c, c.replace("_", " ")) for c in services.moderation.categories()]


class HideForm(EntryForm):
    notice = forms.CharField(
        required=False,
        max_length=services.moderation.MAX_NOTE,
        help_text=f"What the model gets instead; empty: {services.moderation.DEFAULT_NOTICE}",
    )


@dataclass
class Outcome:
    message: str
    focus_entry_id: str | None = None
    session: AgentSession | None = None  # a session the action created (fork)


@dataclass
class Preview:
    lines: list[str]
    possible: bool = True  # False: nothing would happen, offer no confirm button


@dataclass(frozen=True)
class ModerationAction:
    name: str
    title: str
    form_class: type[forms.Form]
    run: Callable[[HttpRequest, AgentSession, dict[str, Any]], Outcome]
    preview: Callable[[AgentSession, dict[str, Any]], Preview] | None = None  # None: no confirmation
    on_closed: bool = False  # allowed on an archived or deleted session
    destructive: bool = False
    permission: str = "sessiontree.moderate_session"  # what the signed-in user needs


def _provider(row: AgentSession) -> SessionTreeProvider:
    return get_provider_for_session(row.session_id)


def _leaf(provider: SessionTreeProvider, row: AgentSession) -> str | None:
    """The leaf as the storage says (for ``file`` the file, not the row: Pi may
    have appended to it since the row was written)."""
    session = provider.get_session(row.session_id)
    return session["leaf_entry_id"] if session is not None else row.leaf_entry_id


def _entry_name(provider: SessionTreeProvider, row: AgentSession, entry_id: str | None) -> str:
    if entry_id is None:
        return "nothing (before the root)"
    marker, preview = describe_entry(provider.get_entry(row.session_id, entry_id))
    return f"{entry_id} ({marker}: {shorten(preview, 80)})"


def _context_line(provider: SessionTreeProvider, row: AgentSession, leaf_entry_id: str | None, what: str) -> str:
    messages = provider.build_context(row.session_id, leaf_entry_id)["messages"]
    tokens = estimate_context_tokens(messages).tokens
    return f"{what}: {len(messages)} message{'s' if len(messages) != 1 else ''}, about {tokens:,} tokens."


# --- leaf moves -------------------------------------------------------------------------------


def preview_switch(row: AgentSession, data: dict[str, Any]) -> Preview:
    provider = _provider(row)
    leaf = _leaf(provider, row)
    return Preview(
        [
            f"The leaf moves from {_entry_name(provider, row, leaf)} to {_entry_name(provider, row, data['entry_id'])}.",
            _context_line(provider, row, leaf, "The model's context now"),
            _context_line(provider, row, data["entry_id"], "The model's context after the move"),
            "No entry is changed or removed; the old branch stays in the tree.",
        ]
    )


def run_switch(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    provider = _provider(row)
    before = _leaf(provider, row)
    session = services.tree.switch_leaf(
        provider=provider,
        session_id=row.session_id,
        entry_id=data["entry_id"],
        actor=request.user,
        channel=CHANNEL,
        expected_leaf_id=parse_expected_leaf(data.get("expected_leaf")),
    )
    return Outcome(
        f"Leaf moved from {before or 'nothing'} to {session['leaf_entry_id']}.", focus_entry_id=session["leaf_entry_id"]
    )


def preview_reset(row: AgentSession, data: dict[str, Any]) -> Preview:
    provider = _provider(row)
    leaf = _leaf(provider, row)
    return Preview(
        [
            f"The leaf moves from {_entry_name(provider, row, leaf)} to before the root.",
            "The model's context becomes empty; the next entry starts a new root.",
            "No entry is changed or removed.",
        ],
        possible=leaf is not None,
    )


def run_reset(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    provider = _provider(row)
    before = _leaf(provider, row)
    services.tree.reset_leaf(
        provider=provider,
        session_id=row.session_id,
        actor=request.user,
        channel=CHANNEL,
        expected_leaf_id=parse_expected_leaf(data.get("expected_leaf")),
    )
    return Outcome(f"Leaf reset (was {before or 'nothing'}): the next entry starts a new root.")


def preview_navigate(row: AgentSession, data: dict[str, Any]) -> Preview:
    provider = _provider(row)
    leaf = _leaf(provider, row)
    target = provider.get_entry(row.session_id, data["entry_id"])
    role = message_of(target).get("role") if target.get("type") == "message" else None
    lines = [f"Navigate from {_entry_name(provider, row, leaf)} to {_entry_name(provider, row, data['entry_id'])}."]
    if role == "user" or target.get("type") == "custom_message":
        lines.append("It is a user message: as in Pi, the leaf goes to its parent and its text is shown to re-send.")
    if data.get("summarize"):
        lines.append("The branch being left is summarized (summarizer from settings) into a branch summary entry.")
    if data.get("label"):
        lines.append(f'A label "{data["label"]}" is appended.')
    lines.append(_context_line(provider, row, leaf, "The model's context now"))
    return Preview(lines, possible=data["entry_id"] != leaf)


def run_navigate(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    provider = _provider(row)
    before = _leaf(provider, row)
    result = services.tree.navigate_tree(
        provider=provider,
        session_id=row.session_id,
        target_id=data["entry_id"],
        summarize=bool(data.get("summarize")),
        label=data.get("label") or None,
        custom_instructions=data.get("instructions") or None,
        actor=request.user,
        channel=CHANNEL,
        expected_leaf_id=parse_expected_leaf(data.get("expected_leaf")),
    )
    parts = [f"Navigated: leaf moved from {before or 'nothing'} to {result['leaf_entry_id'] or 'before the root'}."]
    if result["summary_entry"] is not None:
        parts.append(f"Branch summary {result['summary_entry']['id']} appended.")
    if result["label_entry"] is not None:
        parts.append(f'Label "{data.get("label")}" appended as {result["label_entry"]["id"]}.')
    if result["editor_text"]:
        parts.append(f"Text to re-send: {shorten(result['editor_text'], 300)}")
    return Outcome(" ".join(parts), focus_entry_id=result["leaf_entry_id"])


# --- labels ---------------------------------------------------------------------------------------


def run_label(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    label = (data.get("label") or "").strip()
    entry = services.tree.set_label(
        session_id=row.session_id, target_id=data["entry_id"], label=label or None, actor=request.user, channel=CHANNEL
    )
    if label:
        return Outcome(f'Labelled {data["entry_id"]} "{label}" (label entry {entry["id"]}).', data["entry_id"])
    return Outcome(f"Cleared the label of {data['entry_id']} (label entry {entry['id']}).", data["entry_id"])


# --- fork ---------------------------------------------------------------------------------------------


def preview_fork(row: AgentSession, data: dict[str, Any]) -> Preview:
    provider = _provider(row)
    where = "up to and including" if data["position"] == "at" else "up to the parent of"
    return Preview(
        [
            f"A new session is created holding the path {where} {_entry_name(provider, row, data['entry_id'])}.",
            f"Its parent (lineage) is {row.session_id}; labels on the path are copied; this session is unchanged.",
        ]
    )


def run_fork(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    new = services.tree.fork_session(
        provider=_provider(row),
        session_id=row.session_id,
        entry_id=data["entry_id"],
        position=data["position"],
        title=data.get("title") or None,
        actor=request.user,
        channel=CHANNEL,
    )
    created = AgentSession.objects.get(session_id=new["session_id"])
    return Outcome(
        f"Forked {row.session_id} {data['position']} {data['entry_id']} into {new['session_id']} "
        f"({new['entry_count']} entries).",
        session=created,
    )


# --- compaction ---------------------------------------------------------------------------------------


def _settings(data: dict[str, Any]) -> CompactionSettings:
    return CompactionSettings(keep_recent_tokens=int(data["keep_recent_tokens"]))


def preview_compact(row: AgentSession, data: dict[str, Any]) -> Preview:
    provider = _provider(row)
    path = provider.get_active_path(row.session_id)
    preparation = prepare_compaction(path, _settings(data))
    if preparation is None or not preparation.has_content:
        return Preview(
            ["Nothing to compact: the active path is empty, ends in a compaction, or all of it is recent."],
            possible=False,
        )
    return Preview(
        [
            f"The active path ({len(path)} entries, about {preparation.tokens_before:,} tokens) is compacted.",
            f"Entries before {_entry_name(provider, row, preparation.first_kept_entry_id)} are summarized "
            "(summarizer from settings) and left out of the model's context.",
            "A compaction entry is appended at the leaf; no entry is changed or removed.",
        ]
    )


def run_compact(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    entry = services.tree.compact_session(
        provider=_provider(row),
        session_id=row.session_id,
        settings=_settings(data),
        custom_instructions=data.get("instructions") or None,
        actor=request.user,
        channel=CHANNEL,
        expected_leaf_id=parse_expected_leaf(data.get("expected_leaf")),
    )
    if entry is None:
        return Outcome("Nothing to compact: nothing was appended.")
    return Outcome(
        f"Compacted: compaction {entry['id']} appended; the context keeps from {entry['firstKeptEntryId']} "
        f"({entry['tokensBefore']:,} tokens before).",
        focus_entry_id=entry["id"],
    )


# --- status -----------------------------------------------------------------------------------------------


def run_archive(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    services.sessions.archive_session(session_id=row.session_id, actor=request.user, channel=CHANNEL)
    return Outcome(f"Archived {row.session_id}: it is read-only until restored.")


def run_restore(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    services.sessions.restore_session(session_id=row.session_id, actor=request.user, channel=CHANNEL)
    return Outcome(f"Restored {row.session_id} (was {row.status}): it is active again.")


def preview_delete(row: AgentSession, data: dict[str, Any]) -> Preview:
    return Preview(
        [
            f"{row.session_id} is marked deleted: it stays readable here, refuses every write, and can be restored.",
            "Nothing is removed from storage (deleting for good is the list's hard-delete action).",
        ]
    )


def run_delete(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    services.sessions.delete_session(session_id=row.session_id, actor=request.user, channel=CHANNEL)
    return Outcome(f"Deleted {row.session_id} (soft): restore it to write again.")


# --- flags and hiding from the model -------------------------------------------------------------------


def run_flag(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    flag = services.moderation.flag_entry(
        session_id=row.session_id,
        entry_id=data["entry_id"],
        category=data["category"],
        note=data.get("note") or None,
        source="operator",
        actor=request.user,
        channel=CHANNEL,
    )
    return Outcome(
        f"Flagged {data['entry_id']} as {flag['category']} (flag {flag['id']}, open in the moderation queue).",
        focus_entry_id=data["entry_id"],
    )


def _hiding_lines(row: AgentSession, entry_id: str) -> list[str]:
    provider = _provider(row)
    hiding = hidden_on_branches(provider, row.session_id, entry_id)
    if not hiding.branches:
        return []
    hidden = [branch for branch in hiding.branches if branch.hidden]
    checked = len(hiding.branches) + hiding.more
    return [f"Hidden now on {len(hidden)} of the {checked} branch{'es' if checked != 1 else ''} through it."]


def preview_hide(row: AgentSession, data: dict[str, Any]) -> Preview:
    provider = _provider(row)
    notice = data.get("notice") or services.moderation.DEFAULT_NOTICE
    on_path, hidden = services.moderation.hiding_on_active_path(
        session_id=row.session_id, entry_id=data["entry_id"], provider=provider
    )
    if not on_path:
        return Preview(
            [f"{data['entry_id']} is not on the active branch: switch the leaf to a branch through it first."],
            possible=False,
        )
    if hidden:
        return Preview([f"{data['entry_id']} is already hidden from the model on the active branch."], possible=False)
    return Preview(
        [
            f"{_entry_name(provider, row, data['entry_id'])} is hidden from the model on the active branch: "
            f"a context_edit is appended at the leaf, and the model (ours, and Pi opening the file) gets “{notice}” instead.",
            *_hiding_lines(row, data["entry_id"]),
            "Reversible (Unhide appends a later edit restoring it); the text stays stored — Erase removes it.",
        ]
    )


def run_hide(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    entry = services.moderation.hide_entry(
        session_id=row.session_id,
        entry_id=data["entry_id"],
        notice=data.get("notice") or None,
        actor=request.user,
        channel=CHANNEL,
        expected_leaf_id=parse_expected_leaf(data.get("expected_leaf")),
    )
    return Outcome(
        f"Hid {data['entry_id']} from the model on the active branch (context edit {entry['id']}).",
        focus_entry_id=data["entry_id"],
    )


def preview_unhide(row: AgentSession, data: dict[str, Any]) -> Preview:
    provider = _provider(row)
    _on_path, hidden = services.moderation.hiding_on_active_path(
        session_id=row.session_id, entry_id=data["entry_id"], provider=provider
    )
    if not hidden:
        return Preview([f"{data['entry_id']} is not hidden from the model on the active branch."], possible=False)
    return Preview(
        [
            f"{_entry_name(provider, row, data['entry_id'])} is shown to the model again on the active branch: "
            "a context_edit restoring its own content is appended at the leaf.",
            *_hiding_lines(row, data["entry_id"]),
        ]
    )


def run_unhide(request: HttpRequest, row: AgentSession, data: dict[str, Any]) -> Outcome:
    entry = services.moderation.unhide_entry(
        session_id=row.session_id,
        entry_id=data["entry_id"],
        actor=request.user,
        channel=CHANNEL,
        expected_leaf_id=parse_expected_leaf(data.get("expected_leaf")),
    )
    return Outcome(
        f"{data['entry_id']} is shown to the model again on the active branch (context edit {entry['id']}).",
        focus_entry_id=data["entry_id"],
    )


ACTIONS: dict[str, ModerationAction] = {
    action.name: action
    for action in (
        ModerationAction("switch_leaf", "Switch the leaf", EntryForm, run_switch, preview_switch, destructive=True),
        ModerationAction("reset_leaf", "Reset the leaf", ExpectedLeafForm, run_reset, preview_reset, destructive=True),
        ModerationAction("navigate", "Navigate", NavigateForm, run_navigate, preview_navigate, destructive=True),
        ModerationAction("set_label", "Set or clear a label", LabelForm, run_label),
        ModerationAction("fork", "Fork into a new session", ForkForm, run_fork, preview_fork),
        ModerationAction("compact", "Compact now", CompactForm, run_compact, preview_compact, destructive=True),
        ModerationAction("archive", "Archive", StatusForm, run_archive),
        ModerationAction("restore", "Restore", StatusForm, run_restore, on_closed=True),
        ModerationAction("delete", "Delete (soft)", StatusForm, run_delete, preview_delete, destructive=True),
        ModerationAction(
            "flag", "Flag for moderation", FlagForm, run_flag, on_closed=True, permission="sessiontree.flag_entry"
        ),
        ModerationAction("hide", "Hide from the model", HideForm, run_hide, preview_hide),
        ModerationAction("unhide", "Show to the model again", EntryForm, run_unhide, preview_unhide),
    )
}
