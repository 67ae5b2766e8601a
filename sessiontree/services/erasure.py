"""Erase in place: an entry's text removed for good, with every copy.

For PII, illegal content and data-subject requests the append-only rule
yields, once per entry and audited. ``erase_entry`` replaces the entry's
text-bearing fields with the marker (``core/redaction.py``) and keeps
``type``, ``id``, ``parentId``, ``timestamp`` and the role, so every path,
Pi's loader and context building still work.

- **Scope** ``entry``: that entry of that session. ``all`` (the default):
  also every copy of it in the session's lineage (forks, clones, forks of
  forks, also after their source was hard-deleted: ``selectors/lineage.py``),
  every compaction and branch summary whose summarized range held it or a
  summary derived from it (``core/erasure.py``), and the content of every
  ``context_edit`` that replaced or restored it. Each place is reported as
  ``entry`` (the one named), ``copy`` (a copy, or a context edit carrying its
  content) or ``summary``.
- **Storage**: each session is rewritten by its storage (``erase_entries``,
  the port's ``erase``): a ``file`` session atomically under its lock, with
  the backups the storage wrote of it; a ``mysql`` session's rows in the
  transaction of the audit record.
- **Beside the tree**, in the same transaction as each session's rewrite:
  the notes of flags on an erased entry; the erased text wherever the
  session's other rows quote it (its title and metadata, flag notes, legal
  hold reasons, audit details, admin log messages, stored answers of
  idempotent writes: erased entries in them are replaced by their erased
  form); the search index (``reindex_erased_entries``); what sync
  remembers of the file (``sync.marks.after_erase``). The meta row's
  first-message preview is recomputed by the storage.
- **Outside the store**: files sync copied the session from or to that
  still hold the text are named in ``outside`` (never changed: they are not
  ours).
- **Audit**: one ``erase_entry`` record per session changed: who, the
  reason, the scope, the entry named, each erased entry's id, kind and the
  SHA-256 of its bytes before (and one over all of them), never its content.

A ``dry_run`` lists every place that would change and changes nothing; it
is refused like the erase (a legal hold). Each session is its own unit: a
failure after some sessions were erased leaves those erased and audited;
running the erase again finishes it (erasing twice changes nothing), also
with the same idempotency key, which is taken only once the erase is done.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from django.apps import apps
from django.contrib.contenttypes.models import ContentType

from sessiontree.core.erasure import SUMMARY, TARGET, ErasedText, ErasureRule, Signature, select_for_erasure, signature
from sessiontree.core.erasure import target_pieces as text_pieces
from sessiontree.core.errors import CONFLICT, BadInput, SessionTreeError
from sessiontree.core.redaction import ERASED
from sessiontree.core.redaction import erase_entry as erased_form
from sessiontree.core.types import Entry
from sessiontree.models import AgentSession, AuditRecord, IdempotencyRecord, LegalHold, ModerationFlag
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.providers.port import ErasureDone, StoredView
from sessiontree.selectors.lineage import lineage_session_ids
from sessiontree.sync import marks

from .audit import Actor, who
from .audit import record as audit_record
from .holds import check_not_held, held_session_ids
from .idempotency import claimed_when_done, idempotent
from .operations import Operation

SCOPES = ("all", "entry")
KINDS = ("entry", "copy", "summary")
# The audit keeps a reason whole up to this length (``audit.MAX_DETAIL_TEXT``).
MAX_REASON = 200
# What counts as blank in a reason: the characters the API's pattern refuses alone.
_BLANKS = " \t\n\x0b\x0c\r"
SEARCH_INDEX_MODULE = "sessiontree.services.search_index"

Kind = Literal["entry", "copy", "summary"]


class ErasePlace(TypedDict):
    session_id: str
    entry_id: str
    kind: Kind


class EraseResult(TypedDict):
    changed: list[ErasePlace]
    outside: list[str]


class EntryInFlight(SessionTreeError):
    """The entry is still streaming: complete or abort it, then erase it."""

    code = "entry_in_flight"
    category = CONFLICT


def check_reason(reason: Any) -> str:
    """A reason is required: a string of at most ``MAX_REASON`` characters, not only blanks, no NUL."""
    if not isinstance(reason, str):
        raise BadInput(f"An erase needs a reason (a string), not {type(reason).__name__}")
    text = reason.strip(_BLANKS)
    if not text:
        raise BadInput("An erase needs a reason: why this text must go (a request, a ticket, a law)")
    if len(text) > MAX_REASON:
        raise BadInput(f"An erase's reason is at most {MAX_REASON} characters (the audit keeps it whole)")
    if "\x00" in text:
        raise BadInput("An erase's reason must not hold a NUL character")
    return text


# --- the search index's one door ------------------------------------------------------------------


def reindex_erased_entries(*, session_id: str, entries: list[Entry]) -> None:
    """THE place erased entries are passed on to the search index: called
    inside each session's erase transaction with the entries as they are
    stored now (their text replaced by the marker), so that the index keeps
    nothing of the old text. Calls ``sessiontree.services.search_index.
    reindex(session_id=…, entries=…)`` when that module exists; until the
    index is built there is nothing to update."""
    if importlib.util.find_spec(SEARCH_INDEX_MODULE) is None:
        return
    search_index = importlib.import_module(SEARCH_INDEX_MODULE)
    search_index.reindex(session_id=session_id, entries=entries)


# --- the plan: what changes where ------------------------------------------------------------------


@dataclass
class _Session:
    session_id: str
    provider: SessionTreeProvider
    entries: list[Entry]  # completed entries, append order


@dataclass
class _Plan:
    session_id: str
    entry_id: str
    scope: str
    tainted: dict[str, Signature]
    text: ErasedText
    sessions: list[_Session]
    places: dict[str, list[ErasePlace]] = field(default_factory=dict)  # session id → places, append order
    holders: set[str] = field(default_factory=set)  # sessions holding a copy (erased already, or not)
    reason: str = ""

    @property
    def derived(self) -> bool:
        return self.scope == "all"

    def kind(self, session_id: str, entry: Entry, role: str) -> Kind:
        entry_id = entry.get("id")
        if entry_id == self.entry_id and role == TARGET:
            return "entry" if session_id == self.session_id else "copy"
        if role == SUMMARY or (role == TARGET and entry_id in self.tainted):
            return "summary"  # derived here, or a copy of a summary derived elsewhere
        return "copy"  # a context edit carrying its content

    def selection(self, session_id: str, entries: list[Entry]) -> list[tuple[Entry, Entry, Kind]]:
        """(entry, its erased form, kind) of each entry of ``session_id`` the erase changes."""
        chosen = []
        for entry, role in select_for_erasure(entries, self.tainted, derived=self.derived):
            new = erased_form(entry)
            if new != entry:
                chosen.append((entry, new, self.kind(session_id, entry, role)))
        return chosen

    def changed(self) -> list[ErasePlace]:
        return [place for session in self.sessions for place in self.places.get(session.session_id, [])]


def _completed_entries(view: StoredView) -> list[Entry]:
    in_flight = view.state.in_flight_entry_id
    return [entry for entry in view.all_entries() if entry.get("id") != in_flight]


def _read(session_id: str, provider: SessionTreeProvider | None = None) -> _Session:
    provider = provider if provider is not None else get_provider_for_session(session_id)
    with provider.read(session_id) as view:
        return _Session(session_id, provider, _completed_entries(view))


def _plan(session_id: str, entry_id: str, scope: str, provider: SessionTreeProvider | None) -> _Plan:
    provider = provider if provider is not None else get_provider_for_session(session_id)
    with provider.read(session_id) as view:
        if not isinstance(entry_id, str) or view.get(entry_id) is None:
            provider.get_entry(session_id, entry_id)  # EntryNotFound, as every face words it
        if entry_id == view.state.in_flight_entry_id:
            raise EntryInFlight(f"Entry {entry_id} of session {session_id} is in flight: complete or abort it first")
        target = view.get(entry_id)
        assert target is not None
        first = _Session(session_id, provider, _completed_entries(view))
    sessions = [first]
    if scope == "all":
        sessions += [_read(other) for other in lineage_session_ids(session_id)[1:]]
    tainted = {entry_id: signature(target)}
    if scope == "all":
        # Summaries derived in one session may have been copied to another: to a fixed point.
        grown = True
        while grown:
            grown = False
            for session in sessions:
                for entry, _role in select_for_erasure(session.entries, tainted, derived=True):
                    if entry["id"] not in tainted and entry.get("type") != "context_edit":
                        tainted[entry["id"]] = signature(entry)
                        grown = True
    # The erased entry's own text (from any copy still holding it), to find it where no id says so.
    originals = [
        e for s in sessions for e in s.entries if e.get("id") == entry_id and tainted[entry_id] == signature(e)
    ]
    plan = _Plan(session_id, entry_id, scope, tainted, ErasedText(text_pieces(originals)), sessions)
    for session in sessions:
        if select_for_erasure(session.entries, tainted, derived=plan.derived):
            plan.holders.add(session.session_id)
        places = [
            ErasePlace(session_id=session.session_id, entry_id=entry["id"], kind=kind)
            for entry, _new, kind in plan.selection(session.session_id, session.entries)
        ]
        if places:
            plan.places[session.session_id] = places
    return plan


def _outside(plan: _Plan) -> list[str]:
    """Files sync copied these sessions from or to that still hold the erased entries."""
    rule = ErasureRule(plan.tainted, plan.text)
    ids = [session.session_id for session in plan.sessions]
    return [
        path
        for path in marks.synced_copies(ids)
        if marks.file_holds(path, lambda line: rule.erase_line(line) is not None)
    ]


# --- one session's unit ------------------------------------------------------------------------------


class _SessionErasure:
    """What the storage asks while it holds the session (``EntryErasure``)."""

    def __init__(self, plan: _Plan, session_id: str) -> None:
        self.plan = plan
        self.session_id = session_id
        self.rule = ErasureRule(plan.tainted, plan.text)
        self.kinds: dict[str, Kind] = {}
        self.matched: set[str] = set()

    def select(self, view: StoredView) -> Mapping[str, Entry]:
        entries = _completed_entries(view)  # read again under the lock: the session may have grown
        self.matched = {
            entry["id"] for entry, _role in select_for_erasure(entries, self.plan.tainted, derived=self.plan.derived)
        }
        chosen = self.plan.selection(self.session_id, entries)
        self.kinds = {entry["id"]: kind for entry, _new, kind in chosen}
        return {entry["id"]: new for entry, new, _kind in chosen}

    def erase_line(self, line: bytes) -> bytes | None:
        return self.rule.erase_line(line)


def _scrub_beside(session_id: str, erasure: _SessionErasure, done: ErasureDone) -> dict[str, int]:
    """The erased text out of what the database keeps beside the session's
    tree; how many rows of each kind changed."""
    rule = erasure.rule
    erased = {eid: sig for eid, sig in erasure.plan.tainted.items() if eid in erasure.matched}
    counts = {
        "session": 0,
        "flags": 0,
        "legal_holds": 0,
        "audit_records": 0,
        "idempotency_records": 0,
        "admin_log_entries": 0,
    }
    # The session's own title and metadata (operator data, but a title may quote the first message).
    session_row = AgentSession.objects.filter(session_id=session_id).values("pk", "title", "metadata").first()
    if session_row is not None:
        title = rule.text.scrub(session_row["title"]) if session_row["title"] else session_row["title"]
        metadata = rule.scrub_value(session_row["metadata"], {})
        if title != session_row["title"] or metadata is not session_row["metadata"]:
            AgentSession.objects.filter(pk=session_row["pk"]).update(title=title, metadata=metadata)
            counts["session"] += 1
    for flag in ModerationFlag.objects.filter(session_id=session_id).only("pk", "entry_id", "note", "resolution_note"):
        on_erased = flag.entry_id in erasure.matched
        note = ERASED if on_erased and flag.note else rule.text.scrub(flag.note)
        resolution = ERASED if on_erased and flag.resolution_note else rule.text.scrub(flag.resolution_note)
        if (note, resolution) != (flag.note, flag.resolution_note):
            ModerationFlag.objects.filter(pk=flag.pk).update(note=note, resolution_note=resolution)
            counts["flags"] += 1
    for hold in LegalHold.objects.filter(session_id=session_id).only("pk", "reason"):
        reason = rule.text.scrub(hold.reason)
        if reason != hold.reason:
            LegalHold.objects.filter(pk=hold.pk).update(reason=reason)
            counts["legal_holds"] += 1
    for record in AuditRecord.objects.filter(session_id=session_id).only("pk", "detail").iterator():
        detail = rule.scrub_value(record.detail, erased)
        if detail is not record.detail:
            AuditRecord.objects.filter(pk=record.pk).update(detail=detail)
            counts["audit_records"] += 1
    for kept in IdempotencyRecord.objects.filter(session_id=session_id, result__isnull=False).only("pk", "result"):
        result = rule.scrub_value(kept.result, erased)
        if result is not kept.result:
            IdempotencyRecord.objects.filter(pk=kept.pk).update(result=result)
            counts["idempotency_records"] += 1
    if apps.is_installed("django.contrib.admin") and rule.text:
        from django.contrib.admin.models import LogEntry

        content_type = ContentType.objects.get_for_model(AgentSession)
        pk = session_row["pk"] if session_row is not None else None
        logged = LogEntry.objects.filter(content_type=content_type, object_id=str(pk))
        for entry in logged.only("pk", "change_message", "object_repr"):
            message = rule.text.scrub(entry.change_message)
            shown = rule.text.scrub(entry.object_repr)
            if (message, shown) != (entry.change_message, entry.object_repr):
                LogEntry.objects.filter(pk=entry.pk).update(change_message=message, object_repr=shown)
                counts["admin_log_entries"] += 1
    return counts


def _erase_session(plan: _Plan, session: _Session, acting: Actor, channel: str) -> list[ErasePlace]:
    erasure = _SessionErasure(plan, session.session_id)

    def before_commit(done: ErasureDone) -> None:
        # Inside the unit: a hold placed since the plan refuses it too.
        check_not_held([session.session_id], what="an erase")
        scrubbed = _scrub_beside(session.session_id, erasure, done)
        marks.after_erase(session.session_id, done.file)
        reindex_erased_entries(session_id=session.session_id, entries=[erased.entry for erased in done.erased])
        erased = [
            {"entry_id": e.entry_id, "kind": erasure.kinds.get(e.entry_id, "copy"), "sha256": e.sha256}
            for e in done.erased
        ]
        overall = hashlib.sha256("\n".join(e.sha256 for e in done.erased).encode()).hexdigest()
        audit_record(
            actor=acting,
            channel=channel,
            operation=Operation.ERASE_ENTRY,
            session_id=session.session_id,
            entry_ids=[e.entry_id for e in done.erased],
            detail={
                "reason": plan.reason,
                "scope": plan.scope,
                "session_id": plan.session_id,
                "entry_id": plan.entry_id,
                "erased": erased,
                "sha256": overall,
                **({"backups": [path.rsplit("/", 1)[-1] for path in done.backups]} if done.backups else {}),
                **({"lines_cleaned": done.lines_cleaned} if done.lines_cleaned else {}),
                "cleaned_beside": {name: count for name, count in scrubbed.items() if count},
            },
        )

    done = session.provider.erase_entries(session.session_id, erasure, before_commit=before_commit)
    return [
        ErasePlace(session_id=session.session_id, entry_id=e.entry_id, kind=erasure.kinds.get(e.entry_id, "copy"))
        for e in done.erased
    ]


# --- the operation ------------------------------------------------------------------------------------


@idempotent(Operation.ERASE_ENTRY)
def erase_entry(
    *,
    session_id: str,
    entry_id: str,
    reason: str,
    actor: Any,
    channel: str,
    scope: str = "all",
    dry_run: bool = False,
    provider: SessionTreeProvider | None = None,
) -> EraseResult:
    """Erase ``entry_id`` of ``session_id`` in place, with its copies and the
    summaries made from it under scope ``all`` (see the module docstring).
    Returns every place changed (``dry_run``: that would change) and the
    files outside the store that still hold it."""
    acting, channel = who(actor, channel)
    text = check_reason(reason)
    if scope not in SCOPES:
        raise BadInput(f"Unknown erase scope {scope!r}; use all or entry")
    if not isinstance(dry_run, bool):
        raise BadInput("dry_run is true or false")
    plan = _plan(session_id, entry_id, scope, provider)
    check_not_held([session_id, *plan.places], what="an erase")
    outside = _outside(plan)
    if dry_run:
        return EraseResult(changed=plan.changed(), outside=outside)
    plan.reason = text
    # Sessions whose copies are erased already are visited too (the storage's
    # backups of them may still hold the text), unless a hold keeps them.
    held = held_session_ids(plan.holders - set(plan.places))
    changed: list[ErasePlace] = []
    with claimed_when_done():
        for session in plan.sessions:
            if session.session_id in plan.places or (
                session.session_id in plan.holders and session.session_id not in held
            ):
                changed += _erase_session(plan, session, acting, channel)
    return EraseResult(changed=changed, outside=outside)


__all__ = [
    "KINDS",
    "MAX_REASON",
    "SCOPES",
    "EntryInFlight",
    "ErasePlace",
    "EraseResult",
    "check_reason",
    "erase_entry",
    "reindex_erased_entries",
]
