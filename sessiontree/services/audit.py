"""Who did it, from where: actors, channels and the audit record.

Every operation of this package takes an ``actor`` (a user, or a named system
actor such as ``cli:alice``, ``sync`` or ``SYSTEM_ACTOR``) and a ``channel``
(``admin``, ``api``, ``cli``, ``sync``, or ``internal`` for plain Python
callers); both are required: there is no default actor. The
record is written inside the same database transaction as the change (the
providers' ``before_commit``), so it exists if and only if the change happened.
"""

from __future__ import annotations

import functools
import getpass
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from django.db import connection
from django.utils import timezone

from sessiontree.core.types import UNSET, Entry
from sessiontree.models import AuditRecord
from sessiontree.providers.template import SessionWriter

from .operations import check_operation

CHANNELS: tuple[str, ...] = tuple(AuditRecord.Channel.values)
SYSTEM = "system"
MAX_DETAIL_TEXT = 200


@dataclass(frozen=True)
class Actor:
    """Who acts: ``name`` is stored on every record; ``user_id`` links an account."""

    name: str
    user_id: int | None = None

    @classmethod
    def of(cls, actor: Any) -> Actor:
        """An ``Actor`` from an ``Actor``, a Django user or a name. ``None`` is
        refused: a write says who makes it (``SYSTEM_ACTOR`` for the system)."""
        if isinstance(actor, Actor):
            return actor
        if actor is None:
            raise TypeError("An operation needs an actor (a user, a name, or an Actor such as SYSTEM_ACTOR)")
        if isinstance(actor, str):
            name = actor.strip()
            if not name:
                raise ValueError("An actor name must not be empty")
            return cls(name[:191])
        if getattr(actor, "is_authenticated", False) and hasattr(actor, "get_username"):
            return cls(actor.get_username(), actor.pk)
        if getattr(actor, "is_anonymous", False):
            raise ValueError("An anonymous user cannot act on sessions")
        raise TypeError(f"Not an actor: {actor!r} (give a user, a name, or an Actor)")


def cli_actor() -> Actor:
    """``cli:<os user>``: the operator running a management command."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = str(os.getuid())
    return Actor(f"cli:{user}")


SYNC_ACTOR = Actor("sync")
SYSTEM_ACTOR = Actor(SYSTEM)


def check_channel(channel: Any) -> str:
    if channel not in CHANNELS:
        raise ValueError(f"Unknown channel {channel!r}; use one of {', '.join(CHANNELS)}")
    return str(channel)


def who(actor: Any, channel: Any) -> tuple[Actor, str]:
    """The ``Actor`` and checked channel of an operation, before anything is read or written."""
    return Actor.of(actor), check_channel(channel)


def _short(value: Any) -> Any:
    """Detail values stay short: long text is cut, nested data summarized."""
    if isinstance(value, str):
        return value if len(value) <= MAX_DETAIL_TEXT else value[: MAX_DETAIL_TEXT - 1] + "…"
    if isinstance(value, Mapping):
        return {str(k): _short(v) for k, v in list(value.items())[:20]}
    if isinstance(value, list | tuple):
        return [_short(v) for v in list(value)[:20]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _short(str(value))


def describe_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What an audit detail says about an appended entry (never its content)."""
    detail: dict[str, Any] = {"type": entry.get("type")}
    message = entry.get("message")
    if isinstance(message, Mapping) and isinstance(message.get("role"), str):
        detail["role"] = message["role"]
    for key in ("customType", "targetId", "label", "firstKeptEntryId", "fromId"):
        if isinstance(entry.get(key), str):
            detail[key] = entry[key]
    return detail


# The fields an audit record's INSERT sets, in the order of ``record``'s values.
_RECORD_FIELDS: tuple[str, ...] = (
    "created_at",
    "actor",
    "user",
    "channel",
    "operation",
    "session_id",
    "entry_ids",
    "leaf_before",
    "leaf_after",
    "detail",
)


@functools.cache
def _record_sql() -> str:
    quote = connection.ops.quote_name
    opts = AuditRecord._meta
    fields = {field.name: field for field in opts.concrete_fields}
    columns = ", ".join(quote(str(fields[name].column)) for name in _RECORD_FIELDS)
    values = ", ".join(["%s"] * len(_RECORD_FIELDS))
    return f"INSERT INTO {quote(opts.db_table)} ({columns}) VALUES ({values})"


def record(
    *,
    actor: Actor,
    channel: str,
    operation: str,
    session_id: str,
    entry_ids: Iterable[str] = (),
    leaf_before: str | None = None,
    leaf_after: str | None = None,
    detail: Mapping[str, Any] | None = None,
    result: Any = UNSET,
) -> None:
    """Insert one audit record (inside the caller's transaction). A call made
    with an idempotency key takes the key here, in the same transaction,
    with the operation's ``result`` (``services/idempotency.py``).

    One plain ``INSERT``: this runs on every write of every face, and building
    and saving a model instance cost as much CPU as the provider's own append.
    The row reads back as ``AuditRecord.objects.create`` would have stored it."""
    check_operation(operation)
    ops = connection.ops
    values = [
        ops.adapt_datetimefield_value(timezone.now()),
        actor.name,
        actor.user_id,
        channel,
        operation,
        session_id,
        orjson.dumps(list(entry_ids)).decode(),
        leaf_before,
        leaf_after,
        orjson.dumps(_short(dict(detail or {}))).decode(),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_record_sql(), values)
    from .idempotency import claim  # here: idempotency builds on this module

    claim(session_id=session_id, operation=operation, result=result)


def entry_ids(entries: Iterable[Entry]) -> list[str]:
    return [entry["id"] for entry in entries]


def audit_writer(
    actor: Actor,
    channel: str,
    operation: str,
    *,
    detail: Mapping[str, Any] | Callable[[SessionWriter], Mapping[str, Any]] | None = None,
) -> Callable[[SessionWriter], None]:
    """A ``before_commit`` for ``provider.transact``: one audit record with the
    entries the operation wrote and the leaf before and after it."""

    def before_commit(writer: SessionWriter) -> None:
        record(
            actor=actor,
            channel=channel,
            operation=operation,
            session_id=writer.session_id,
            entry_ids=entry_ids(writer.written),
            leaf_before=writer.leaf_before,
            leaf_after=writer.leaf_entry_id,
            detail=detail(writer) if callable(detail) else detail,
            result=writer.result,
        )

    return before_commit
