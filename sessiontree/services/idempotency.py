"""Idempotency keys: a write retried with the same key does not happen twice.

Every operation of the layer takes ``idempotency_key=`` (the REST API passes
the ``Idempotency-Key`` header). The first call with a key runs as usual, and
the key, a fingerprint of the call and its result are stored **in the same
transaction as the write and its audit record** (``audit.record`` claims the
key): if the write committed, the key is taken, whatever happened to the
answer on its way back (a client timeout, a connection lost during COMMIT,
a killed worker). A later call with the same key and the same arguments
returns that result and writes nothing (``replayed()`` says so, the API sets
``Idempotency-Replayed: true``); the same key with other arguments is
``IdempotencyKeyReused`` (422). Two calls racing with one key: the unique
key lets one commit, the other's transaction is rolled back and it returns
the first one's result.

Keys belong to who makes the call (the user, or the system actor) and are
kept ``SESSIONTREE_IDEMPOTENCY_TTL_SECONDS`` (24 hours by default); after
that a key is free again.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, cast

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from sessiontree.core.errors import CONFLICT, UNPROCESSABLE, BadInput, CommitOutcomeUnknown, SessionTreeError
from sessiontree.core.types import Unset
from sessiontree.models import IdempotencyRecord
from sessiontree.providers import db_errors

from .audit import Actor

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger(__name__)

KEY_PATTERN = re.compile(r"[\x21-\x7e]{1,255}")
DEFAULT_TTL_SECONDS = 24 * 60 * 60
# Arguments that say who calls and how, not what is asked.
_NOT_THE_REQUEST = frozenset({"actor", "channel", "provider", "idempotency_key", "summarizer", "progress"})


class IdempotencyKeyReused(SessionTreeError):
    """The key was used before for a different request."""

    code = "idempotency_key_reused"
    category = UNPROCESSABLE


class IdempotentAnswerLost(SessionTreeError):
    """The write with this key happened, but the process stopped before its
    answer was kept (a crash between the commit and the record of the
    answer): nothing is written again; read the resource instead."""

    code = "idempotency_key_in_use"
    category = CONFLICT


@dataclass
class _Pending:
    scope: str
    key: str
    operation: str  # the keyed function
    fingerprint: str
    audited_as: frozenset[str] = frozenset()  # the audit operations whose record is the function's own
    claimed: IdempotencyRecord | None = None
    claimed_in: Any = None  # the outermost transaction (Django's Atomic) the claim was made in


_pending: ContextVar[_Pending | None] = ContextVar("sessiontree_idempotency_pending", default=None)
# The key of the request being served (the API's Idempotency-Key header): the
# first keyed operation the request calls takes it, the ones it calls do not.
_request_key: ContextVar[str | None] = ContextVar("sessiontree_idempotency_request_key", default=None)
_replayed: ContextVar[bool] = ContextVar("sessiontree_idempotency_replayed", default=False)


def ttl() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "SESSIONTREE_IDEMPOTENCY_TTL_SECONDS", DEFAULT_TTL_SECONDS)))


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise BadInput("An idempotency key is 1 to 255 printable ASCII characters (no spaces)")
    return key


def scope_of(actor: Any) -> str:
    acting = Actor.of(actor)
    return f"user:{acting.user_id}" if acting.user_id is not None else f"actor:{acting.name}"


def _plain(value: Any) -> Any:
    """Arguments as JSON: an Unset is absent, objects by their repr-free names."""
    if isinstance(value, Unset):
        return "<unset>"
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return f"<{type(value).__name__}>"


def fingerprint(operation: str, arguments: dict[str, Any]) -> str:
    request = {name: _plain(value) for name, value in arguments.items() if name not in _NOT_THE_REQUEST}
    data = orjson.dumps({"operation": operation, "arguments": request}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()


def replayed() -> bool:
    """Whether the last idempotent call of this context returned a stored result."""
    return _replayed.get()


@contextmanager
def keyed_request(key: str | None) -> Iterator[None]:
    """Serve one request: a fresh ``replayed()``, and ``key`` (the
    ``Idempotency-Key`` header, ``None`` without one) for the first keyed
    operation the request calls."""
    replayed_token = _replayed.set(False)
    key_token = _request_key.set(key)
    try:
        yield
    finally:
        _request_key.reset(key_token)
        _replayed.reset(replayed_token)


@contextmanager
def claimed_when_done() -> Iterator[None]:
    """Audit records written inside do not take the pending key: the keyed
    operation takes it, with its answer, once it has returned. For an
    operation made of several units, each with its own record (an erase of
    every copy of an entry, one session at a time), which is safe to run
    again: a unit that failed after others committed leaves the key free,
    and a retry with it finishes the work instead of being told it is done."""
    token = _pending.set(None)
    try:
        yield
    finally:
        _pending.reset(token)


def _to_json(result: Any) -> dict[str, Any]:
    """What is stored of a result: ``{"value": …}`` (so that an operation that
    answered ``None`` is told apart from one whose answer was not kept)."""
    try:
        return {"value": orjson.loads(orjson.dumps(result))}
    except TypeError as exc:  # orjson.JSONEncodeError: a keyed operation must answer JSON
        raise TypeError(f"An idempotent operation's result must be JSON, not {type(result).__name__}: {exc}") from exc


def claim(*, session_id: str, operation: str, result: Any = None) -> None:
    """Take the pending key, if any, inside the current transaction (the
    audit record's). The first record of the write claims it. Its result is
    kept only when the record is the keyed operation's own (an operation
    built on another, a roleplay write on an append, answers with its own
    result, stored once it returns); later records only fill a missing one."""
    pending = _pending.get()
    if pending is None:
        return
    own = operation in pending.audited_as
    stored = _to_json(result) if own and not isinstance(result, Unset) else None
    transaction_now = connection.atomic_blocks[0] if connection.atomic_blocks else None
    if (
        pending.claimed is not None
        and transaction_now is not pending.claimed_in
        and not IdempotencyRecord.objects.filter(pk=pending.claimed.pk).exists()
    ):
        # The transaction that took the key was rolled back (a deadlock or a
        # certification conflict, run again): take it in this one.
        pending.claimed = None
    if pending.claimed is not None:
        if stored is not None and pending.claimed.result is None:
            pending.claimed.result = stored
            pending.claimed.save(update_fields=["result"])
        return
    pending.claimed = IdempotencyRecord.objects.create(
        scope=pending.scope,
        key=pending.key,
        operation=pending.operation,
        fingerprint=pending.fingerprint,
        session_id=session_id,
        result=stored,
        created_at=timezone.now(),
    )
    pending.claimed_in = transaction_now


def _existing(scope: str, key: str) -> IdempotencyRecord | None:
    found = IdempotencyRecord.objects.filter(scope=scope, key=key).first()
    if found is not None and found.created_at < timezone.now() - ttl():
        found.delete()  # expired: the key is free again
        return None
    return found


def _replay(record: IdempotencyRecord, print_: str) -> Any:
    if record.fingerprint != print_:
        raise IdempotencyKeyReused(
            f"Idempotency key {record.key!r} was used for another request ({record.operation}); use a new key"
        )
    _replayed.set(True)
    if not isinstance(record.result, dict) or "value" not in record.result:
        raise IdempotentAnswerLost(
            f"The {record.operation} made with idempotency key {record.key!r} happened, but its answer was not "
            "kept; nothing was written again: read the resource for its state"
        )
    return record.result["value"]


def _again_if_commit_unknown(call: Callable[[], Any]) -> Any:
    """``call()``, once more (with a new connection) when its COMMIT lost the
    connection: the key says whether the first one was stored (then its
    answer is replayed) or not (then it runs again), so nothing is stored
    twice. Bounded by ``SESSIONTREE_DB_RETRY_SECONDS``; inside a caller's
    transaction the caller decides."""
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return call()
        except CommitOutcomeUnknown:
            attempt += 1
            if connection.in_atomic_block or time.monotonic() - started > db_errors.retry_seconds():
                raise
            logger.info("A keyed write lost its connection during COMMIT; asking the key (attempt %d)", attempt)
            db_errors.reset_connection()
            time.sleep(min(0.05 * 2 ** (attempt - 1), 1.0))


def idempotent(*audited_as: str) -> Callable[[F], F]:
    """Give an operation of the layer an ``idempotency_key=`` keyword (see the
    module docstring). ``audited_as``: the audit operations its own record is
    written as, whose result is stored in the write's transaction."""

    def decorate(function: F) -> F:
        signature = inspect.signature(function)
        operation = f"{function.__module__.rsplit('.', 1)[-1]}.{function.__name__}"

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            explicit = kwargs.pop("idempotency_key", None)
            key = explicit if explicit is not None else _request_key.get()
            if key is None:
                return function(*args, **kwargs)
            request_token = _request_key.set(None)  # the operations this one calls are not keyed
            try:
                return _again_if_commit_unknown(lambda: keyed(key, args, kwargs))
            finally:
                _request_key.reset(request_token)

        def keyed(key: str, args: Any, kwargs: dict[str, Any]) -> Any:
            check_key(key)
            scope = scope_of(kwargs.get("actor"))
            print_ = fingerprint(operation, kwargs)
            found = _existing(scope, key)
            if found is not None:
                return _replay(found, print_)
            _replayed.set(False)
            pending = _Pending(scope, key, operation, print_, frozenset(audited_as))
            token = _pending.set(pending)
            try:
                result = function(*args, **kwargs)
            except IntegrityError:
                # Another call with this key committed while this one ran: its
                # write stands, this one's was rolled back whole.
                found = _existing(scope, key)
                if found is None:
                    raise
                return _replay(found, print_)
            finally:
                _pending.reset(token)
            if pending.claimed is None:
                # Nothing was written (an unchanged update, a move to where the
                # leaf already is): the key still answers the same next time.
                try:
                    with transaction.atomic():
                        claim_now = _Pending(scope, key, operation, print_, frozenset([operation]))
                        inner = _pending.set(claim_now)
                        try:
                            claim(session_id=str(kwargs.get("session_id") or ""), operation=operation, result=result)
                        finally:
                            _pending.reset(inner)
                except IntegrityError:
                    pass
            elif pending.claimed.result is None:
                IdempotencyRecord.objects.filter(pk=pending.claimed.pk).update(result=_to_json(result))
            return result

        parameters = [*signature.parameters.values()]
        if "idempotency_key" not in signature.parameters:
            key = inspect.Parameter(
                "idempotency_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="str | None"
            )
            variadic = [p for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
            parameters = [p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD] + [key, *variadic]
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate


def purge_expired(*, batch: int = 1000) -> int:
    """Delete expired keys (``apply_retention`` calls this); how many went."""
    cutoff = timezone.now() - ttl()
    ids = list(IdempotencyRecord.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)[:batch])
    if ids:
        IdempotencyRecord.objects.filter(pk__in=ids).delete()
    return len(ids)
