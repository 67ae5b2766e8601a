"""Moderation: flags beside the tree, hiding a message from the model, and
(``erase_entry``, implemented in ``erasure.py``) removing its text in place
with every copy.

- **Flags** are rows of their own (``ModerationFlag``), never tree entries:
  flagging moves no leaf, changes no context and never makes a live agent's
  append fail. Each opening and resolving is audited.
- **Hide** appends Pi's ``context_edit`` on the active branch: from there on
  the model (ours, and Pi's opening our file) gets a notice instead of the
  message. **Unhide** appends a later ``context_edit`` whose replacement is
  the message's own content (Pi 1.6.0 has no revert edit; the latest edit of
  a target on the path wins).

Every function is keyword-only and needs an ``actor`` and a ``channel``;
docs/moderation.md says what each touches. ``search_entries`` (search
across sessions) lives in ``services/search.py`` and is re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypedDict

from django.conf import settings
from django.utils import timezone

from sessiontree.core.entries import message_of
from sessiontree.core.errors import CONFLICT, BadInput, EntryNotFound, LeafConflict, SessionNotFound, SessionTreeError
from sessiontree.core.types import UNSET, Entry, Unset
from sessiontree.models import ModerationFlag
from sessiontree.providers import db_errors, keyed_reads
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.providers.port import StoredView
from sessiontree.providers.template import SessionWriter, read_path

from .audit import Actor, check_channel, entry_ids, record
from .erasure import EntryInFlight, ErasePlace, EraseResult, erase_entry, reindex_erased_entries
from .idempotency import idempotent
from .operations import Operation
from .search import search_entries

DEFAULT_CATEGORIES = ("pii", "harassment", "hate", "sexual", "violence", "self_harm", "illegal", "spam", "other")
SOURCES = ("operator", "user_report")
CLASSIFIER_SOURCE_PREFIX = "classifier:"
RESOLVED_STATUSES = (ModerationFlag.Status.ACTIONED.value, ModerationFlag.Status.DISMISSED.value)
MAX_NOTE = 2000
DEFAULT_NOTICE = "[removed by a moderator]"

Expected = str | None | Unset


class FlagNotFound(SessionTreeError):
    code = "flag_not_found"
    category = "not_found"


class FlagAlreadyResolved(SessionTreeError):
    code = "flag_already_resolved"
    category = CONFLICT


class NotHidden(SessionTreeError):
    """An unhide of a message the active branch does not hide."""

    code = "not_hidden"
    category = CONFLICT


class NotAMessage(SessionTreeError):
    """Hide/unhide of an entry the model never sees as a message (a label, a
    setting, a custom entry): well-formed, refused by what the entry is."""

    code = "not_a_message"
    category = CONFLICT


MODEL_VISIBLE_ROLES = ("user", "assistant", "toolResult")


def _hideable(target: Entry | None, entry_id: str, session_id: str, get_entry: Any) -> Entry:
    """``target`` (the entry ``entry_id`` when it is on the active path) when it is a message the model sees."""
    if target is None:
        get_entry(entry_id)  # EntryNotFound for an id the session does not hold
        raise EntryNotFound(f"Entry {entry_id} is not on the active path of session {session_id}")
    if target.get("type") == "custom_message":
        return target
    if target.get("type") != "message" or message_of(target).get("role") not in MODEL_VISIBLE_ROLES:
        kind = message_of(target).get("role") if target.get("type") == "message" else target.get("type")
        raise NotAMessage(f"Entry {entry_id} ({kind}) is not a message whose content the model sees")
    return target


def _target_and_edits(
    view: StoredView, leaf: str | None, entry_id: str, whole_path: Callable[[], list[Entry]]
) -> tuple[Entry | None, list[Entry]]:
    """``entry_id``'s entry when it lies on the path to ``leaf`` (else
    ``None``), and the ``context_edit`` entries aimed at it on that path,
    root first: by key (the edits aimed at it, which of them lie on the path
    by the path facts), or from ``whole_path()`` where the facts cannot say."""
    edits = keyed_reads.entries_targeting(view, entry_id, ("context_edit",))
    found = keyed_reads.on_path(view, leaf, [entry_id, *(edit["id"] for edit in edits)])
    if found is None:
        path = whole_path()
        target = next((entry for entry in path if entry.get("id") == entry_id), None)
        return target, [e for e in path if e.get("type") == "context_edit" and e.get("targetId") == entry_id]
    target = view.get(entry_id) if entry_id in found else None
    return target, [edit for edit in edits if edit["id"] in found]


def _check_hideable(writer: SessionWriter, entry_id: str) -> tuple[Entry, bool]:
    """``entry_id`` is on the active path and a message the model sees; whether that path hides it now."""
    target, edits = _target_and_edits(writer.view, writer.leaf_entry_id, entry_id, writer.active_path)
    return _hideable(target, entry_id, writer.session_id, writer.get_entry), _hidden_by(target, edits)


def check_hide(
    *,
    session_id: str,
    entry_id: str,
    unhide: bool = False,
    expected_leaf_id: Expected = UNSET,
    provider: SessionTreeProvider | None = None,
) -> tuple[Entry, bool]:
    """What ``hide_entry`` (``unhide``: ``unhide_entry``) would refuse, checked
    now without writing (a dry run): the same typed errors; else the message
    and whether the active branch hides it now. Nothing is locked: the tree
    may change before a real call."""
    provider = _provider(provider, session_id)
    session = provider.get_session(session_id)
    if session is None:
        raise SessionNotFound(f"Session {session_id} not found")
    leaf = session["leaf_entry_id"]
    if not isinstance(expected_leaf_id, Unset) and expected_leaf_id != leaf:
        raise LeafConflict(f"Leaf of session {session_id} is {leaf!r}, not the expected {expected_leaf_id!r}")
    with provider.read(session_id) as view:
        found, edits = _target_and_edits(view, leaf, entry_id, lambda: read_path(view, leaf))
    target = _hideable(found, entry_id, session_id, lambda entry: provider.get_entry(session_id, entry))
    hidden = _hidden_by(found, edits)
    if unhide and not hidden:
        raise NotHidden(f"Entry {entry_id} is not hidden on the active branch of session {session_id}")
    return target, hidden


class FlagDict(TypedDict):
    id: int
    session_id: str
    entry_id: str
    category: str
    note: str
    source: str
    status: str
    opened_by: str
    opened_at: str
    resolved_by: str | None
    resolved_at: str | None


def categories() -> tuple[str, ...]:
    """The flag categories operators choose from (``SESSIONTREE_MODERATION_CATEGORIES``)."""
    configured = getattr(settings, "SESSIONTREE_MODERATION_CATEGORIES", None) or DEFAULT_CATEGORIES
    return tuple(configured)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def flag_dict(flag: ModerationFlag) -> FlagDict:
    return {
        "id": flag.pk,
        "session_id": flag.session_id,
        "entry_id": flag.entry_id,
        "category": flag.category,
        "note": flag.note,
        "source": flag.source,
        "status": flag.status,
        "opened_by": flag.opened_by,
        "opened_at": _iso(flag.opened_at) or "",
        "resolved_by": flag.resolved_by or None,
        "resolved_at": _iso(flag.resolved_at),
    }


def _who(actor: Any, channel: Any) -> tuple[Actor, str]:
    return Actor.of(actor), check_channel(channel)


def _check_note(note: Any) -> str:
    if note is None:
        return ""
    if not isinstance(note, str):
        raise BadInput(f"A flag's note must be a string, not {type(note).__name__}")
    if len(note) > MAX_NOTE:
        raise BadInput(f"A flag's note is at most {MAX_NOTE} characters")
    return note


def check_source(source: Any) -> str:
    if source in SOURCES:
        return str(source)
    if isinstance(source, str) and source.startswith(CLASSIFIER_SOURCE_PREFIX):
        name = source[len(CLASSIFIER_SOURCE_PREFIX) :]
        if name and len(source) <= 64 and name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            return source
    raise BadInput(f"Unknown flag source {source!r}; use operator, user_report or classifier:<name>")


def _provider(provider: SessionTreeProvider | None, session_id: str) -> SessionTreeProvider:
    return provider if provider is not None else get_provider_for_session(session_id)


# --- flags --------------------------------------------------------------------------------------


def check_flag(
    *,
    session_id: str,
    entry_id: str,
    category: str,
    note: str | None = None,
    source: str = "operator",
    provider: SessionTreeProvider | None = None,
) -> tuple[str, str]:
    """What ``flag_entry`` refuses (bad input, an unknown session or entry),
    checked without writing; the source and note as they would be stored."""
    if category not in categories():
        raise BadInput(f"Unknown flag category {category!r}; use one of {', '.join(categories())}")
    source = check_source(source)
    text = _check_note(note)
    _provider(provider, session_id).get_entry(session_id, entry_id)  # SessionNotFound / EntryNotFound
    return source, text


@idempotent(Operation.FLAG_ENTRY)
def flag_entry(
    *,
    session_id: str,
    entry_id: str,
    category: str,
    actor: Any,
    channel: str,
    note: str | None = None,
    source: str = "operator",
    provider: SessionTreeProvider | None = None,
) -> FlagDict:
    """Open a flag on ``entry_id`` of ``session_id`` (which must exist). The tree is not touched."""
    acting, channel = _who(actor, channel)
    source, text = check_flag(
        session_id=session_id, entry_id=entry_id, category=category, note=note, source=source, provider=provider
    )

    def write() -> ModerationFlag:
        flag = ModerationFlag.objects.create(
            session_id=session_id,
            entry_id=entry_id,
            category=category,
            note=text,
            source=source,
            opened_by=acting.name,
            opened_by_user_id=acting.user_id,
            opened_at=timezone.now(),
        )
        record(
            actor=acting,
            channel=channel,
            operation=Operation.FLAG_ENTRY,
            session_id=session_id,
            entry_ids=[entry_id],
            detail={"flag_id": flag.pk, "category": category, "source": source},
            result=flag_dict(flag),
        )
        return flag

    flag = db_errors.run_in_transaction(write)
    return flag_dict(flag)


def _resolve_input(flag_id: Any, status: Any, note: Any) -> str:
    """The resolution's arguments checked; the note as it would be stored."""
    if status not in RESOLVED_STATUSES:
        raise BadInput(f"A flag is resolved as {' or '.join(RESOLVED_STATUSES)}, not {status!r}")
    text = _check_note(note)
    if not isinstance(flag_id, int) or isinstance(flag_id, bool):
        raise BadInput(f"A flag id is an integer, not {type(flag_id).__name__}")
    return text


def check_resolve(*, flag_id: int, status: str, note: str | None = None) -> FlagDict:
    """What ``resolve_flag`` refuses, checked without writing (nothing locked);
    the flag as it is now."""
    _resolve_input(flag_id, status, note)
    flag = ModerationFlag.objects.filter(pk=flag_id).first()
    if flag is None:
        raise FlagNotFound(f"Flag {flag_id} not found")
    if flag.status != ModerationFlag.Status.OPEN:
        raise FlagAlreadyResolved(f"Flag {flag_id} is already {flag.status} (by {flag.resolved_by or 'someone'})")
    return flag_dict(flag)


@idempotent(Operation.RESOLVE_FLAG)
def resolve_flag(*, flag_id: int, status: str, actor: Any, channel: str, note: str | None = None) -> FlagDict:
    """Close an open flag as ``actioned`` or ``dismissed``; a closed one is ``FlagAlreadyResolved``."""
    acting, channel = _who(actor, channel)
    text = _resolve_input(flag_id, status, note)

    def write() -> ModerationFlag:
        flag = ModerationFlag.objects.select_for_update().filter(pk=flag_id).first()
        if flag is None:
            raise FlagNotFound(f"Flag {flag_id} not found")
        if flag.status != ModerationFlag.Status.OPEN:
            raise FlagAlreadyResolved(f"Flag {flag_id} is already {flag.status} (by {flag.resolved_by or 'someone'})")
        flag.status = status
        flag.resolved_by = acting.name
        flag.resolved_by_user_id = acting.user_id
        flag.resolved_at = timezone.now()
        flag.resolution_note = text
        flag.save(update_fields=["status", "resolved_by", "resolved_by_user", "resolved_at", "resolution_note"])
        record(
            actor=acting,
            channel=channel,
            operation=Operation.RESOLVE_FLAG,
            session_id=flag.session_id,
            entry_ids=[flag.entry_id],
            detail={"flag_id": flag.pk, "status": status, "category": flag.category},
            result=flag_dict(flag),
        )
        return flag

    flag = db_errors.run_in_transaction(write)
    return flag_dict(flag)


def open_flags_of(session_id: str, entry_ids: Sequence[str] | None = None) -> dict[str, list[FlagDict]]:
    """Open flags of a session (of ``entry_ids`` only, when given), by entry id."""
    flags = ModerationFlag.objects.filter(session_id=session_id, status=ModerationFlag.Status.OPEN)
    if entry_ids is not None:
        flags = flags.filter(entry_id__in=list(entry_ids))
    found: dict[str, list[FlagDict]] = {}
    for flag in flags.order_by("opened_at", "id"):
        found.setdefault(flag.entry_id, []).append(flag_dict(flag))
    return found


FLAG_STATUSES = (ModerationFlag.Status.OPEN.value, *RESOLVED_STATUSES)


def list_flags(
    *,
    status: str | None = ModerationFlag.Status.OPEN.value,
    category: str | None = None,
    source: str | None = None,
    session_id: str | None = None,
    limit: int = 100,
) -> list[FlagDict]:
    """Flags across sessions, oldest first (the queue's order); ``status=None``: any."""
    if status is not None and status not in FLAG_STATUSES:
        raise BadInput(f"A flag's status is one of {', '.join(FLAG_STATUSES)}, not {status!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise BadInput("limit is a positive integer")
    flags = ModerationFlag.objects.all()
    for field, value in (("status", status), ("category", category), ("source", source), ("session_id", session_id)):
        if value is not None:
            flags = flags.filter(**{field: value})
    return [flag_dict(flag) for flag in flags.order_by("opened_at", "id")[:limit]]


def flags_of_entry(session_id: str, entry_id: str) -> list[FlagDict]:
    """Every flag of one entry, open or resolved, oldest first (the entry panel shows them)."""
    flags = ModerationFlag.objects.filter(session_id=session_id, entry_id=entry_id)
    return [flag_dict(flag) for flag in flags.order_by("opened_at", "id")]


def open_flag_counts(session_id: str, entry_ids: Sequence[str]) -> dict[str, int]:
    """How many open flags each of ``entry_ids`` has (those without: absent), in one query."""
    if not entry_ids:
        return {}
    counts: dict[str, int] = {}
    for entry_id in ModerationFlag.objects.filter(
        session_id=session_id, status=ModerationFlag.Status.OPEN, entry_id__in=list(entry_ids)
    ).values_list("entry_id", flat=True):
        counts[entry_id] = counts.get(entry_id, 0) + 1
    return counts


# --- hide from the model ---------------------------------------------------------------------------


def _original_content(writer: SessionWriter, entry_id: str) -> Any:
    entry = writer.get_entry(entry_id)
    if entry.get("type") == "custom_message":
        return entry.get("content")
    return message_of(entry).get("content")


def hidden_on_path(path: Sequence[Entry], entry_id: str) -> bool:
    """Whether the latest ``context_edit`` of ``entry_id`` on ``path`` hides it
    (omits it, or replaces its content with something else)."""
    target = next((entry for entry in path if entry.get("id") == entry_id), None)
    edits = [entry for entry in path if entry.get("type") == "context_edit" and entry.get("targetId") == entry_id]
    return _hidden_by(target, edits)


def _hidden_by(target: Entry | None, edits: Sequence[Entry]) -> bool:
    """Whether the last of ``edits`` (the context edits aimed at ``target`` on
    a path, root first) hides it: omits it, or replaces its content."""
    if target is None or not edits:
        return False
    original = target.get("content") if target.get("type") == "custom_message" else message_of(target).get("content")
    replacement = edits[-1].get("replacement")
    if replacement is None:
        return True
    content = replacement.get("content") if isinstance(replacement, dict) else None
    return bool(content != original)


def hiding_on_active_path(
    *, session_id: str, entry_id: str, provider: SessionTreeProvider | None = None
) -> tuple[bool, bool]:
    """(whether ``entry_id`` lies on the active path, whether that path hides
    it now), read by key where the path facts can say (a read, nothing written)."""
    provider = _provider(provider, session_id)
    with provider.read(session_id) as view:
        leaf = view.state.leaf_entry_id
        target, edits = _target_and_edits(view, leaf, entry_id, lambda: read_path(view, leaf))
    return target is not None, _hidden_by(target, edits)


@idempotent(Operation.HIDE_ENTRY)
def hide_entry(
    *,
    session_id: str,
    entry_id: str,
    actor: Any,
    channel: str,
    notice: str | None = None,
    expected_leaf_id: Expected = UNSET,
    provider: SessionTreeProvider | None = None,
) -> Entry:
    """Append a ``context_edit`` replacing the message's content with ``notice``
    (default ``[removed by a moderator]``) on the active branch."""
    acting, channel = _who(actor, channel)
    text = DEFAULT_NOTICE if notice in (None, "") else notice
    if not isinstance(text, str) or len(text) > MAX_NOTE:
        raise BadInput(f"A notice is a string of at most {MAX_NOTE} characters")
    provider = _provider(provider, session_id)

    def audit(writer: SessionWriter) -> None:
        record(
            actor=acting,
            channel=channel,
            operation=Operation.HIDE_ENTRY,
            session_id=session_id,
            entry_ids=[entry_id, *entry_ids(writer.written)],
            leaf_before=writer.leaf_before,
            leaf_after=writer.leaf_entry_id,
            detail={"target_id": entry_id},
            result=writer.result,
        )

    def work(writer: SessionWriter) -> Entry:
        _check_hideable(writer, entry_id)
        return writer.append_context_edit(entry_id, {"content": text})

    return provider.transact(session_id, work, expected_leaf_id=expected_leaf_id, before_commit=audit)


@idempotent(Operation.UNHIDE_ENTRY)
def unhide_entry(
    *,
    session_id: str,
    entry_id: str,
    actor: Any,
    channel: str,
    expected_leaf_id: Expected = UNSET,
    provider: SessionTreeProvider | None = None,
) -> Entry:
    """Append a ``context_edit`` restoring the message's own content on the
    active branch; ``NotHidden`` when that branch does not hide it."""
    acting, channel = _who(actor, channel)
    provider = _provider(provider, session_id)

    def work(writer: SessionWriter) -> Entry:
        _target, hidden = _check_hideable(writer, entry_id)
        if not hidden:
            raise NotHidden(f"Entry {entry_id} is not hidden on the active branch of session {session_id}")
        return writer.append_context_edit(entry_id, {"content": _original_content(writer, entry_id)})

    def audit(writer: SessionWriter) -> None:
        record(
            actor=acting,
            channel=channel,
            operation=Operation.UNHIDE_ENTRY,
            session_id=session_id,
            entry_ids=[entry_id, *entry_ids(writer.written)],
            leaf_before=writer.leaf_before,
            leaf_after=writer.leaf_entry_id,
            detail={"target_id": entry_id},
            result=writer.result,
        )

    return provider.transact(session_id, work, expected_leaf_id=expected_leaf_id, before_commit=audit)


__all__ = [
    "DEFAULT_NOTICE",
    "EntryInFlight",
    "EntryNotFound",
    "ErasePlace",
    "EraseResult",
    "FlagAlreadyResolved",
    "FlagDict",
    "FlagNotFound",
    "NotAMessage",
    "NotHidden",
    "categories",
    "check_flag",
    "check_hide",
    "check_resolve",
    "erase_entry",
    "flag_dict",
    "flag_entry",
    "flags_of_entry",
    "hidden_on_path",
    "hide_entry",
    "hiding_on_active_path",
    "list_flags",
    "open_flag_counts",
    "open_flags_of",
    "reindex_erased_entries",
    "resolve_flag",
    "search_entries",
    "unhide_entry",
]
