"""A person's data erased (``protection.erase_user_data``), for a data
subject's erasure request.

- **Their sessions** (every session whose ``user_id`` is the person's, on
  every provider) are hard-deleted through ``sessions.delete_session``: the
  rows, the entries, the search index rows, the file and the backups the
  file storage wrote of it. Inside the same transaction the rows kept beside
  the session lose what they said: its audit records keep ids only (see
  ``ids_only``), its flags' notes become the marker, the stored answers of
  its idempotent writes are deleted, the admin's log names it by id.
- **Copies** of their entries in other people's sessions (forks, clones,
  summaries made from them: the lineage, ``selectors/lineage.py``) are
  erased in place by ``moderation.erase_entry`` (scope ``all``) before the
  session goes, and listed. An entry the person's session copied from
  someone else's session (its source) is that person's, and stays.
- **Beside** any session: the notes of the flags the person opened are
  the marker; the audit records the person's account made keep ids only.
- **Audit**: one ``hard_delete_session`` record per session (reason
  ``erase_user_data``, ids only), ``erase_entry`` records for the copies,
  and one ``erase_user_data`` record with the counts.

Every session the erasure would touch is checked for a legal hold first:
one held session refuses the whole erasure (``SessionOnHold``, naming the
hold) and nothing changes. The report lists every session, file and row
touched; ``dry_run`` returns the same report and changes nothing. Each
session is one unit (whole or gone); after a crash, running the erasure
again finishes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import Q

from sessiontree.core.errors import NOT_FOUND, BadInput, SessionNotFound, SessionTreeError
from sessiontree.core.redaction import ERASED
from sessiontree.models import AgentSession, AuditRecord, IdempotencyRecord, ModerationFlag, SearchEntry
from sessiontree.providers import db_errors, meta
from sessiontree.providers.factory import get_provider_for_session
from sessiontree.selectors.lineage import lineage_session_ids

from . import erasure, sessions
from .audit import Actor, who
from .audit import record as audit_record
from .holds import check_not_held
from .idempotency import claimed_when_done, idempotent
from .operations import Operation
from .search import optimize_search_index

REASON = "erase_user_data"

# Audit detail keys whose string values are ids, names of things or digests, never anyone's text.
_KEPT_KEYS = frozenset(
    {
        "id",
        "type",
        "role",
        "provider",
        "operation",
        "scope",
        "kind",
        "status",
        "category",
        "source",
        "reason",
        "position",
        "mode",
        "channel",
        "sha256",
        "targetId",
        "firstKeptEntryId",
        "fromId",
        "customType",
        "placed_by",
        "placed_at",
        "opened_by",
        "resolved_by",
        "fields",
    }
)


class UserNotFound(SessionTreeError):
    """No account of that name, and no session, flag or audit record of it."""

    code = "user_not_found"
    category = NOT_FOUND


def _kept(key: str) -> bool:
    return key in _KEPT_KEYS or key.endswith(("_id", "_ids", "Id", "_at", "sha256"))


def ids_only(value: Any, key: str = "") -> Any:
    """An audit detail without content: numbers, booleans and the strings of
    id-like keys stay; every other string is the marker."""
    if isinstance(value, Mapping):
        return {str(k): ids_only(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [ids_only(v, key) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return value if _kept(key) else ERASED


# --- the plan ------------------------------------------------------------------------------------------


@dataclass
class _Target:
    session_id: str
    provider: str
    entries: int
    files: list[str]
    copied: list[str]  # the person's entries with copies in other people's sessions, append order


@dataclass
class _Plan:
    user_id: str
    account: Any
    targets: list[_Target] = field(default_factory=list)
    copies: list[dict[str, str]] = field(default_factory=list)
    copy_files: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    rows: dict[str, list[Any]] = field(default_factory=dict)

    def report(self, dry_run: bool) -> dict[str, Any]:
        files = [path for target in self.targets for path in target.files]
        return {
            "user_id": self.user_id,
            "dry_run": dry_run,
            "sessions": [
                {"session_id": t.session_id, "provider": t.provider, "entries": t.entries, "files": list(t.files)}
                for t in self.targets
            ],
            "copies": list(self.copies),
            "files": {"deleted": files, "rewritten": list(self.copy_files)},
            "rows": {name: list(ids) for name, ids in self.rows.items()},
            "outside": list(self.outside),
            "counts": {
                "sessions": len(self.targets),
                "entries": sum(t.entries for t in self.targets),
                "copies": len(self.copies),
                "files": len(files) + len(self.copy_files),
                **{f"rows_{name}": len(ids) for name, ids in self.rows.items()},
            },
        }


def _account(user_id: str) -> Any:
    model = get_user_model()
    return model.objects.filter(**{model.USERNAME_FIELD: user_id}).first()


def _ancestors(session_id: str) -> set[str]:
    """Every session ``session_id`` was forked from, up the lineage (those that still exist)."""
    found: set[str] = set()
    row = AgentSession.objects.filter(session_id=session_id).values("parent_id", "parent_session_id").first()
    while row is not None:
        up = None
        if row["parent_id"] is not None:
            up = AgentSession.objects.filter(pk=row["parent_id"]).values("session_id").first()
        elif row["parent_session_id"]:
            ref = row["parent_session_id"]
            named = meta.referenced_session_id(ref) if ("/" in ref or ref.endswith(".jsonl")) else ref
            up = AgentSession.objects.filter(session_id__in={ref, named}).values("session_id").first()
        if up is None or up["session_id"] in found or up["session_id"] == session_id:
            break
        found.add(up["session_id"])
        row = AgentSession.objects.filter(session_id=up["session_id"]).values("parent_id", "parent_session_id").first()
    return found


def _ids(session_id: str) -> list[str]:
    return [entry["id"] for entry in get_provider_for_session(session_id).list_entries(session_id)]


def _files(session_id: str) -> list[str]:
    stored = getattr(get_provider_for_session(session_id), "stored_files", None)
    return list(stored(session_id)) if stored is not None else []


def _beside_rows(session_ids: list[str], account: Any, user_id: str) -> dict[str, list[Any]]:
    """The ids of the rows kept beside the sessions (and of the person's own
    flags and audit records) that the erasure changes or deletes."""
    mine = Q(opened_by=user_id) | (Q(opened_by_user=account) if account is not None else Q(pk__in=[]))
    flags = ModerationFlag.objects.filter(Q(session_id__in=session_ids) | mine).exclude(note="", resolution_note="")
    by_them = Q(actor=user_id) | (Q(user=account) if account is not None else Q(pk__in=[]))
    audit = AuditRecord.objects.filter(Q(session_id__in=session_ids) | by_them)
    rows: dict[str, list[Any]] = {
        "flags": sorted(flags.values_list("pk", flat=True)),
        "audit_records": sorted(audit.values_list("pk", flat=True)),
        "idempotency_records": sorted(
            IdempotencyRecord.objects.filter(session_id__in=session_ids).values_list("pk", flat=True)
        ),
        "search_entries": sorted(SearchEntry.objects.filter(session_id__in=session_ids).values_list("pk", flat=True)),
    }
    if apps.is_installed("django.contrib.admin"):
        from django.contrib.admin.models import LogEntry

        pks = [str(pk) for pk in AgentSession.objects.filter(session_id__in=session_ids).values_list("pk", flat=True)]
        logged = LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(AgentSession), object_id__in=pks
        )
        rows["admin_log_entries"] = sorted(logged.values_list("pk", flat=True))
    return rows


def _plan(user_id: str, actor: Actor, channel: str) -> _Plan:
    account = _account(user_id)
    own = list(
        AgentSession.objects.filter(user_id=user_id).order_by("created_at", "pk").values_list("session_id", "provider")
    )
    if account is None and not own and not AuditRecord.objects.filter(actor=user_id).exists():
        raise UserNotFound(f"No user {user_id!r}: no account, no session and no audit record of that name")
    plan = _Plan(user_id=user_id, account=account)
    own_ids = {session_id for session_id, _ in own}
    seen: set[tuple[str, str]] = set()
    copy_sessions: set[str] = set()
    for session_id, provider in own:
        ids = _ids(session_id)
        others = [sid for sid in lineage_session_ids(session_id)[1:] if sid not in own_ids]
        borrowed: set[str] = set()
        for ancestor in _ancestors(session_id) - own_ids:
            borrowed.update(_ids(ancestor))
        shared: set[str] = set()
        for other in others:
            shared.update(_ids(other))
        copied = [entry_id for entry_id in ids if entry_id in shared and entry_id not in borrowed]
        plan.targets.append(_Target(session_id, provider, len(ids), _files(session_id), copied))
        for entry_id in copied:
            result = erasure.erase_entry(
                session_id=session_id, entry_id=entry_id, reason=REASON, dry_run=True, actor=actor, channel=channel
            )
            for place in result["changed"]:
                key = (place["session_id"], place["entry_id"])
                if place["session_id"] in own_ids or key in seen:
                    continue
                seen.add(key)
                copy_sessions.add(place["session_id"])
                plan.copies.append(
                    {"session_id": place["session_id"], "entry_id": place["entry_id"], "kind": place["kind"]}
                )
            plan.outside += [path for path in result["outside"] if path not in plan.outside]
    for other in sorted(copy_sessions):
        plan.copy_files += _files(other)
    check_not_held([*own_ids, *copy_sessions], what="a user's erasure")
    plan.rows = _beside_rows(sorted(own_ids), account, user_id)
    return plan


# --- the work ---------------------------------------------------------------------------------------


def _scrub_session_rows(session_id: str, pk: int | None) -> None:
    """Inside a session's hard delete: what the rows beside it said, gone."""
    for record in AuditRecord.objects.filter(session_id=session_id).only("pk", "detail").iterator():
        detail = ids_only(record.detail)
        if detail != record.detail:
            AuditRecord.objects.filter(pk=record.pk).update(detail=detail)
    ModerationFlag.objects.filter(session_id=session_id).exclude(note="").update(note=ERASED)
    ModerationFlag.objects.filter(session_id=session_id).exclude(resolution_note="").update(resolution_note=ERASED)
    IdempotencyRecord.objects.filter(session_id=session_id).delete()
    if pk is not None and apps.is_installed("django.contrib.admin"):
        from django.contrib.admin.models import LogEntry

        content_type = ContentType.objects.get_for_model(AgentSession)
        LogEntry.objects.filter(content_type=content_type, object_id=str(pk)).update(
            object_repr=session_id, change_message=""
        )


def _erase_session(target: _Target, user_id: str, acting: Actor, channel: str) -> None:
    """One session: its copies elsewhere erased, then the session hard-deleted with its rows' text."""
    for entry_id in target.copied:
        try:
            erasure.erase_entry(
                session_id=target.session_id, entry_id=entry_id, reason=REASON, actor=acting, channel=channel
            )
        except SessionNotFound:
            return  # deleted meanwhile
    pk = AgentSession.objects.filter(session_id=target.session_id).values_list("pk", flat=True).first()
    try:
        sessions.delete_session(
            session_id=target.session_id,
            hard=True,
            reason=REASON,
            actor=acting,
            channel=channel,
            before_commit=lambda: _scrub_session_rows(target.session_id, pk),
        )
    except SessionNotFound:
        return


def _scrub_their_rows(plan: _Plan, acting: Actor, channel: str, report: dict[str, Any]) -> None:
    account, user_id = plan.account, plan.user_id

    def write() -> None:
        mine = Q(opened_by=user_id) | (Q(opened_by_user=account) if account is not None else Q(pk__in=[]))
        ModerationFlag.objects.filter(mine).exclude(note="").update(note=ERASED)
        by_them = Q(actor=user_id) | (Q(user=account) if account is not None else Q(pk__in=[]))
        for record in AuditRecord.objects.filter(by_them).only("pk", "detail").iterator():
            detail = ids_only(record.detail)
            if detail != record.detail:
                AuditRecord.objects.filter(pk=record.pk).update(detail=detail)
        audit_record(
            actor=acting,
            channel=channel,
            operation=Operation.ERASE_USER_DATA,
            session_id="",
            detail={
                "user_id": user_id,
                "session_ids": [t.session_id for t in plan.targets],
                "counts": report["counts"],
            },
        )

    db_errors.run_in_transaction(write)


@idempotent(Operation.ERASE_USER_DATA)
def erase_user_data(
    *,
    user_id: str,
    actor: Any,
    channel: str,
    dry_run: bool = False,
    progress: Callable[[int], Callable[[int], object] | None] | None = None,
) -> dict[str, Any]:
    """Erase everything of ``user_id`` (see the module docstring); returns the
    report of every session, file and row touched (``dry_run``: the same
    report, nothing changed). ``progress(total)`` may return a function told
    of each session done."""
    acting, channel = who(actor, channel)
    if not isinstance(user_id, str):
        raise BadInput("Name the user whose data is to be erased")
    if not user_id.strip():
        # A name of blanks names nobody: the answer to any name no one has.
        raise UserNotFound(f"No user {user_id!r}: no account, session, flag or audit record of that name")
    if not isinstance(dry_run, bool):
        raise BadInput("dry_run is true or false")
    plan = _plan(user_id, acting, channel)
    report = plan.report(dry_run)
    if dry_run:
        return report
    advance = progress(len(plan.targets)) if progress is not None else None
    # The key (if any) is taken once everything is done: a retry after a crash finishes the work.
    with claimed_when_done():
        for target in plan.targets:
            _erase_session(target, user_id, acting, channel)
            if advance is not None:
                advance(1)
        _scrub_their_rows(plan, acting, channel, report)
    _merge_search_index()
    return report


def _merge_search_index() -> None:
    """The deleted text out of the full-text engine's own structures now, not
    at a later merge: FTS5 ``optimize`` on SQLite; on MySQL/MariaDB
    ``OPTIMIZE TABLE``, which cannot run inside a transaction (a caller
    holding one runs ``build_search_index --optimize`` after it)."""
    if connection.vendor == "sqlite" or not connection.in_atomic_block:
        optimize_search_index()


__all__ = ["REASON", "UserNotFound", "erase_user_data", "ids_only"]
