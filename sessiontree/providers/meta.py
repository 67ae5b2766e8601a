"""Session meta rows (``AgentSession``), shared by both providers.

The leaf, status, title and lineage of a session live here whatever stores its
entries. The lineage tree is written by ``providers/lineage.py``: a new
root's tree id is its own key, so creating a session shares nothing with
other sessions (no global lock, no ``MAX(tree_id) + 1``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils.dateparse import parse_datetime

from sessiontree.core.entries import DEFAULT_MAX_ENTRY_DEPTH, json_depth_exceeds
from sessiontree.core.errors import (
    BadInput,
    EntryTooLarge,
    InvalidSessionId,
    SessionAlreadyExists,
    SessionNotFound,
)
from sessiontree.core.ids import new_session_id
from sessiontree.core.path import TreeStats
from sessiontree.core.types import SessionTreeSession
from sessiontree.models import Agent, AgentSession

from . import lineage
from .port import SessionState

# Pi 1.6.0's rule for a session id (``assertValidSessionId``): letters,
# digits, '-', '_' and '.', starting and ending with a letter or digit. Ours
# also caps it at the column's 64 characters. A session id becomes a file
# name; neither rule lets one hold a separator, start with a dot or be "..".
_PI_SESSION_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
# What earlier releases accepted (an id may end in '-', '_' or '.'): such
# sessions stay reachable, but no new one is created with such an id.
_EARLIER_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_SESSION_ID_LENGTH = 64
SESSION_ID_RULE = (
    "letters, digits, '-', '_' or '.', starting and ending with a letter or digit, "
    f"at most {MAX_SESSION_ID_LENGTH} characters"
)

UPDATABLE_FIELDS = {"title", "status", "metadata", "cwd", "user_id", "agent_id"}
STATUSES = {"active", "archived", "deleted"}


def validate_session_id(session_id: Any, *, new: bool = False) -> str:
    """Return ``session_id`` if it is a usable id; raise ``InvalidSessionId`` otherwise.

    ``new``: the id of a session about to be created, which must follow Pi
    1.6.0's rule. Without it (a lookup) ids earlier releases created are
    accepted too. Whole-string matches only: a trailing newline is refused.
    """
    if isinstance(session_id, str) and len(session_id) <= MAX_SESSION_ID_LENGTH:
        if _PI_SESSION_ID.fullmatch(session_id):
            return session_id
        if not new and _EARLIER_SESSION_ID.fullmatch(session_id) and ".." not in session_id:
            return session_id
    raise InvalidSessionId(f"Invalid session id {session_id!r}: use {SESSION_ID_RULE}")


# Text columns without a length of their own, and how long a value may be:
# a working directory is a path (Linux's PATH_MAX).
TEXT_FIELD_LIMITS = {"cwd": 4096}
# Session metadata is operator data beside the tree, not a second store.
DEFAULT_MAX_METADATA_BYTES = 64 * 1024


def _field_max_length(name: str) -> int | None:
    return AgentSession._meta.get_field(name).max_length


def check_meta_fields(fields: dict[str, Any]) -> None:
    """Refuse meta values the columns cannot hold with ``InvalidEntry`` naming
    the field, on every database alike: SQLite would store an over-long title,
    MySQL would raise a bare ``DataError``, and an unknown agent is an
    ``IntegrityError`` on one and silently kept on the other."""
    for name in ("title", "user_id", "cwd", "parent_session_id"):
        value = fields.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadInput(f"Session field {name!r} must be a string, not {type(value).__name__}")
        limit = _field_max_length(name) or TEXT_FIELD_LIMITS.get(name)
        if limit is not None and len(value) > limit:
            raise BadInput(f"Session field {name!r} is longer than {limit} characters")
    if "metadata" in fields and fields["metadata"] is not None:
        metadata = fields["metadata"]
        if not isinstance(metadata, dict):
            raise BadInput("metadata must be a JSON object")
        max_depth = int(getattr(settings, "SESSIONTREE_MAX_ENTRY_DEPTH", DEFAULT_MAX_ENTRY_DEPTH))
        if json_depth_exceeds(metadata, max_depth):
            # MariaDB's JSON columns hold 32 levels; refused here alike on every database.
            raise EntryTooLarge(f"metadata nests deeper than {max_depth} levels (SESSIONTREE_MAX_ENTRY_DEPTH)")
        try:
            encoded = json.dumps(metadata, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise BadInput(f"metadata cannot be stored as JSON ({exc})") from None
        max_bytes = int(getattr(settings, "SESSIONTREE_MAX_METADATA_BYTES", DEFAULT_MAX_METADATA_BYTES))
        if len(encoded.encode("utf-8", "surrogatepass")) > max_bytes:
            raise EntryTooLarge(f"metadata is larger than {max_bytes:,} bytes as JSON (SESSIONTREE_MAX_METADATA_BYTES)")
    agent_id = fields.get("agent_id")
    if agent_id is not None:
        if not isinstance(agent_id, int) or isinstance(agent_id, bool):
            raise BadInput(f"agent_id must be an integer, not {type(agent_id).__name__}")
        if not Agent.objects.filter(pk=agent_id).exists():
            raise BadInput(f"agent_id {agent_id}: no such agent")


def to_session_dict(row: AgentSession) -> SessionTreeSession:
    return {
        "session_id": row.session_id,
        "provider": row.provider,
        "root_entry_id": row.root_entry_id,
        "leaf_entry_id": row.leaf_entry_id,
        "cwd": row.cwd or None,
        "session_file": row.session_file or None,
        "parent_session_id": row.parent_session_id,
        "agent_id": row.agent_id,
        "user_id": row.user_id,
        "title": row.title,
        "status": row.status,  # type: ignore[typeddict-item]
        "metadata": row.metadata or {},
        "entry_count": row.entry_count,
        "branch_count": row.branch_count,
        "compaction_count": row.compaction_count,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


def iso(moment: Any) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment else ""


# --- the meta row read with one prebuilt statement (the hot path) ------------------------
#
# Building an ORM query for the session row costs more than the append it
# serves (its SQL is compiled on every call), so every storage reads the row
# with this statement, plus whatever columns of its own it needs, once per
# operation; ``MetaRow.session`` turns it into the contract's session dict.

_q = connection.ops.quote_name
TABLE = _q(AgentSession._meta.db_table)
META_COLUMNS: tuple[str, ...] = (
    "id",
    "session_id",
    "provider",
    "status",
    "leaf_entry_id",
    "root_entry_id",
    "entry_count",
    "branch_count",
    "compaction_count",
    "cwd",
    "session_file",
    "parent_session_id",
    "agent_id",
    "user_id",
    "title",
    "metadata",
    "first_message_preview",
    "created_at",
    "updated_at",
)


def select_sql(extra: Sequence[str] = (), *, alias: str = "") -> str:
    """``SELECT`` of the meta row (``META_COLUMNS``, then the ``extra``
    expressions a storage needs) by ``session_id``; ``alias`` names the
    table for extra expressions that refer to it."""
    prefix = f"{alias}." if alias else ""
    columns = ", ".join([*(_column_sql(prefix, column) for column in META_COLUMNS), *extra])
    return f"SELECT {columns} FROM {TABLE}{f' {alias}' if alias else ''} WHERE {prefix}{_q('session_id')} = %s"


_TIMES = ("created_at", "updated_at")


def _column_sql(prefix: str, column: str) -> str:
    # SQLite's driver parses a column declared datetime into a datetime on
    # every fetch; as an expression (unary + is a no-op there) it stays the
    # stored text, parsed only when a session dict is built.
    if column in _TIMES and connection.vendor == "sqlite":
        return f"+{prefix}{_q(column)}"
    return f"{prefix}{_q(column)}"


def db_datetime(value: Any) -> dt.datetime | None:
    """A datetime column's value as the ORM returns it (aware under ``USE_TZ``)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value  # one this process wrote (timezone.now()), not read back
    if settings.USE_TZ:
        # Every backend with datetime columns has this converter (the base class does not declare it).
        converted: dt.datetime = connection.ops.convert_datetimefield_value(value, None, connection)  # type: ignore[attr-defined]
        return converted
    return value if isinstance(value, dt.datetime) else parse_datetime(value)


@dataclass(slots=True)
class MetaRow:
    """A session's meta row as ``select_sql`` reads it (values as stored)."""

    pk: int
    session_id: str
    provider: str
    status: str
    leaf_entry_id: str | None
    root_entry_id: str | None
    entry_count: int
    branch_count: int
    compaction_count: int
    cwd: str
    session_file: str
    parent_session_id: str | None
    agent_id: int | None
    user_id: str | None
    title: str | None
    metadata: Any  # JSON text (or, on some drivers, already decoded)
    first_message_preview: str | None
    created_at: Any
    updated_at: Any

    def session(self, state: SessionState | None = None, *, updated_at: Any = None) -> SessionTreeSession:
        """The contract's session dict: the row, with the tree (leaf, root,
        counts) as ``state`` says when given, and ``updated_at`` when the
        caller has just written it."""
        metadata = self.metadata
        if isinstance(metadata, str | bytes):
            metadata = json.loads(metadata)  # as the ORM's JSONField decodes it (big integers included)
        tree = state if state is not None else self
        return {
            "session_id": self.session_id,
            "provider": self.provider,
            "root_entry_id": tree.root_entry_id,
            "leaf_entry_id": tree.leaf_entry_id,
            "cwd": self.cwd or None,
            "session_file": self.session_file or None,
            "parent_session_id": self.parent_session_id,
            "agent_id": self.agent_id,
            "user_id": self.user_id,
            "title": self.title,
            "status": self.status,  # type: ignore[typeddict-item]
            "metadata": metadata or {},
            "entry_count": tree.entry_count,
            "branch_count": tree.branch_count,
            "compaction_count": tree.compaction_count,
            "created_at": iso(db_datetime(self.created_at)),
            "updated_at": iso(db_datetime(updated_at if updated_at is not None else self.updated_at)),
        }


def fetch_row(sql: str, session_id: str, *, provider: str | None) -> tuple[MetaRow, tuple[Any, ...]]:
    """Run a ``select_sql`` statement for ``session_id``: its meta row and the
    storage's extra values. ``SessionNotFound`` for an unknown session or one
    of another ``provider``."""
    validate_session_id(session_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id])
        found = cursor.fetchone()
    if found is None:
        raise SessionNotFound(f"Session {session_id} not found")
    row = MetaRow(*found[: len(META_COLUMNS)])
    if provider is not None and row.provider != provider:
        raise SessionNotFound(
            f"Session {session_id} not found in the {provider} provider (it is a {row.provider} session)"
        )
    return row, tuple(found[len(META_COLUMNS) :])


_SELECT_ROW = select_sql()
_SELECT_KIND = f"SELECT {_q('provider')} FROM {TABLE} WHERE {_q('session_id')} = %s"


def read_row(session_id: str, *, provider: str | None = None) -> MetaRow:
    """The session's meta row (one statement)."""
    return fetch_row(_SELECT_ROW, session_id, provider=provider)[0]


def provider_kind_of(session_id: str) -> str:
    """Which provider stores ``session_id`` (one short statement; ``SessionNotFound``)."""
    validate_session_id(session_id)
    with connection.cursor() as cursor:
        cursor.execute(_SELECT_KIND, [session_id])
        found = cursor.fetchone()
    if found is None:
        raise SessionNotFound(f"Session {session_id} not found")
    return str(found[0])


def set_row_fields(session_id: str, **fields: Any) -> None:
    """Set meta columns of a session's row (``title``, ``created_at``,
    ``updated_at`` …) inside the caller's transaction."""
    if fields:
        AgentSession.objects.filter(session_id=session_id).update(**fields)


def get_row(session_id: str, *, provider: str | None = None, for_update: bool = False) -> AgentSession:
    validate_session_id(session_id)
    queryset = AgentSession.objects.all()
    if for_update:
        queryset = queryset.select_for_update()
    try:
        row = queryset.get(session_id=session_id)
    except AgentSession.DoesNotExist:
        raise SessionNotFound(f"Session {session_id} not found") from None
    if provider is not None and row.provider != provider:
        raise SessionNotFound(
            f"Session {session_id} not found in the {provider} provider (it is a {row.provider} session)"
        )
    return row


def create_row(
    *,
    provider: str,
    session_id: str | None,
    cwd: str | None,
    agent_id: int | None,
    user_id: str | None,
    title: str | None,
    parent_session_id: str | None,
    metadata: dict[str, Any] | None,
    session_file: str = "",
    header: dict[str, Any] | None = None,
    stats: TreeStats | None = None,
    leaf_entry_id: str | None = None,
    leaf_depth: int | None = None,
    first_message_preview: str | None = None,
    rows_in_order: bool = False,
) -> AgentSession:
    """Insert the meta row (inside the caller's transaction or its own), with
    the tree ``stats``, leaf and first user message (``core.entries.
    first_message_preview``) of the entries it starts with."""
    session_id = validate_session_id(session_id, new=True) if session_id is not None else new_session_id()
    check_meta_fields(
        {
            "cwd": cwd,
            "agent_id": agent_id,
            "user_id": user_id,
            "title": title,
            "parent_session_id": parent_session_id,
            "metadata": metadata,
        }
    )
    with transaction.atomic():
        if AgentSession.objects.filter(session_id=session_id).exists():
            raise SessionAlreadyExists(f"Session {session_id} already exists")
        parent = resolve_parent(parent_session_id)
        row = AgentSession(
            session_id=session_id,
            provider=provider,
            cwd=cwd or "",
            agent_id=agent_id,
            user_id=user_id,
            title=title,
            parent_session_id=parent_session_id,
            parent=parent,
            metadata=metadata or {},
            session_file=session_file,
            header=header or {},
            leaf_entry_id=leaf_entry_id,
            leaf_depth=leaf_depth,
            first_message_preview=first_message_preview,
            rows_in_order=rows_in_order,
        )
        if stats is not None:
            row.entry_count = stats.entry_count
            row.branch_count = stats.branch_count
            row.compaction_count = stats.compaction_count
            row.root_entry_id = stats.root_entry_id
        try:
            lineage.insert(row)
        except IntegrityError as exc:
            raise SessionAlreadyExists(f"Session {session_id} already exists") from exc
    return row


def fork_fields(source: SessionTreeSession, overrides: dict[str, Any]) -> dict[str, Any]:
    """``create_session`` arguments for a fork of ``source``: its cwd, agent
    and user unless overridden, and ``source`` as the parent."""
    unknown = set(overrides) - {"cwd", "agent_id", "user_id", "title", "metadata"}
    if unknown:
        raise BadInput(f"Unknown fork option(s): {', '.join(sorted(unknown))}")
    return {
        "cwd": overrides.get("cwd", source["cwd"] or None),
        "agent_id": overrides.get("agent_id", source["agent_id"]),
        "user_id": overrides.get("user_id", source["user_id"]),
        "title": overrides.get("title"),
        "metadata": overrides.get("metadata"),
        "parent_session_id": source["session_id"],
    }


def referenced_session_id(parent_session_id: str) -> str:
    """The session id a ``parentSession`` reference names: the reference
    itself, or the id a Pi file path ends in (``<time>_<id>.jsonl``)."""
    stem = parent_session_id.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".jsonl")
    return stem.rsplit("_", 1)[-1]


def resolve_parent(parent_session_id: str | None) -> AgentSession | None:
    """The lineage parent for a header's ``parentSession``: a session id, or a
    Pi file path whose file name ends in the session id."""
    if not parent_session_id:
        return None
    parent = AgentSession.objects.filter(session_id=parent_session_id).first()
    if parent is None:
        parent = AgentSession.objects.filter(session_id=referenced_session_id(parent_session_id)).first()
    return parent


def update_row_fields(row: AgentSession, fields: dict[str, Any]) -> AgentSession:
    unknown = set(fields) - UPDATABLE_FIELDS
    if unknown:
        raise BadInput(f"Cannot update session field(s): {', '.join(sorted(unknown))}")
    if "status" in fields and fields["status"] not in STATUSES:
        raise BadInput(f"Invalid status {fields['status']!r}: use one of {', '.join(sorted(STATUSES))}")
    if "metadata" in fields and not isinstance(fields["metadata"], dict):
        raise BadInput("metadata must be a JSON object")
    check_meta_fields(fields)
    for name, value in fields.items():
        if name in {"cwd"}:
            value = value or ""
        setattr(row, name, value)
    row.save(update_fields=[*fields.keys(), "updated_at"])
    return row


def delete_row(row: AgentSession) -> None:
    """Delete a meta row for good (a ``mysql`` session's entries cascade).

    Its forks become lineage roots of their own trees first (``lineage.remove``):
    django-mptt deletes a node by closing the gap of its whole subtree, so
    children that merely lost their parent (``on_delete=SET_NULL``) would be
    left with ``lft``/``rght`` values that overlap other nodes. A fork keeps
    its ``parent_session_id`` (the header's reference).
    """
    with transaction.atomic():
        lineage.remove(row.pk)


class SessionMetaMethods:
    """The contract methods that touch only the meta row, alike for every
    provider (``kind`` names the provider whose sessions it may see)."""

    kind: str

    def _row(self, session_id: str) -> AgentSession:
        return get_row(session_id, provider=self.kind)

    def get_session(self, session_id: str) -> SessionTreeSession | None:
        try:
            return to_session_dict(self._row(session_id))
        except SessionNotFound:
            return None

    def update_session(self, session_id: str, **fields: Any) -> SessionTreeSession:
        return to_session_dict(update_row_fields(self._row(session_id), fields))
