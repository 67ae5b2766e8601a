"""Every database failure typed, and retried where a retry is safe.

The database backends of this project (``providers/backends/``: Django's
MySQL/MariaDB and SQLite backends with this module's error wrapper; settings
select them) raise no bare ``OperationalError``/``InterfaceError``. Each is
also one of the kernel's typed errors, so every face answers it by its
category (docs/scale-out.md, "What the errors mean"):

- ``DatabaseConflict`` (``storage_conflict``, a conflict: HTTP 409 with
  ``Retry-After``, exit 4): a deadlock or a lock-wait timeout (MySQL 1213,
  1205; a Galera certification failure is reported as 1213 at COMMIT),
  SQLite's "database is locked". The transaction was rolled back whole.
- ``DatabaseUnavailable`` (``storage_unavailable``, 503, exit 6): the server
  cannot be reached or cannot serve now (2002/2003 cannot connect, 2006/2013
  connection lost, 1047 a Galera node not ready or not in the primary
  component, 1040 too many connections, 1053 shutting down …), and any other
  operational failure of the database.
- ``CommitOutcomeUnknown`` (``commit_outcome_unknown``, 503, exit 6): the
  connection was lost *during* COMMIT, so the write may or may not be stored.
  A write made with an idempotency key is retried by the operations layer
  (the key tells whether it happened); without one the caller must look.

What is retried here, bounded (``retrying``, ``read_retry``):

- a transaction that hit a conflict: run again, up to ``CONFLICT_ATTEMPTS``
  times with jittered exponential backoff (the server rolled it back);
- a transaction whose connection failed *before* COMMIT (nothing of it can
  have been stored): reconnected and run again within
  ``SESSIONTREE_DB_RETRY_SECONDS``;
- a lone ``SELECT`` outside a transaction (autocommit): reconnected and sent
  again within the same budget; it is its own transaction, so nothing is
  lost by asking again.

Never retried here: anything inside a caller's own transaction (the server
rolled all of it back: the caller decides), and a failure during COMMIT.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.utils import DatabaseErrorWrapper

from sessiontree.core.errors import CommitOutcomeUnknown, StorageConflict, StorageUnavailable

T = TypeVar("T")

logger = logging.getLogger(__name__)

# MySQL/MariaDB: ER_LOCK_DEADLOCK (Galera's certification failures too), ER_LOCK_WAIT_TIMEOUT.
CONFLICT_CODES = frozenset({1213, 1205})
# The server cannot serve this connection now; asking again (elsewhere) may work.
CONNECTION_CODES = frozenset(
    {
        1040,  # too many connections
        1047,  # WSREP has not yet prepared node for application use (Galera: joining, or not primary)
        1053,  # server shutdown in progress
        1927,  # connection was killed
        2002,  # cannot connect (socket)
        2003,  # cannot connect (TCP)
        2006,  # server has gone away
        2013,  # lost connection during query
        2055,  # lost connection at reading initial communication packet / system error
        4031,  # disconnected by the server (inactivity)
    }
)
SQLITE_CONFLICTS = ("database is locked", "database table is locked")
CONFLICT_ATTEMPTS = 8
CONFLICT_BASE_SECONDS = 0.005
DEFAULT_RETRY_SECONDS = 3.0
RECONNECT_BASE_SECONDS = 0.05


def _mysql_code(exc: BaseException) -> int | None:
    code = exc.args[0] if exc.args else None
    return code if isinstance(code, int) else None


class _Typed:
    """What the typed database errors share: the server's error number (if
    any) and a message that says what happened without the server's words
    (host names, statements), which go to the log."""

    db_code: int | None = None
    what = "The database failed"

    def __str__(self) -> str:
        code = f" (database error {self.db_code})" if self.db_code is not None else ""
        return f"{self.what}{code}"


class DatabaseConflict(_Typed, StorageConflict, OperationalError):
    what = (
        "The write lost a race with another one (a deadlock, a lock wait or a certification conflict) "
        "and was not stored; try again"
    )


class DatabaseUnavailable(_Typed, StorageUnavailable, OperationalError):
    what = "The database cannot be used right now; try again later"

    @property
    def connection_lost(self) -> bool:
        return self.db_code in CONNECTION_CODES


class DatabaseUnusable(_Typed, StorageUnavailable, InterfaceError):
    """The connection is closed or broken (the driver's ``InterfaceError``)."""

    what = "The database connection was lost; try again later"
    connection_lost = True


class DatabaseCommitUnknown(_Typed, CommitOutcomeUnknown, OperationalError):
    connection_lost = True
    what = (
        "The connection to the database was lost while the write was being committed: it may or may "
        "not have been stored. Retry with the same idempotency key, or read the session first"
    )


def typed(exc: BaseException, vendor: str) -> BaseException:
    """The typed counterpart of Django's ``OperationalError``/``InterfaceError``
    ``exc``: by the server's error number (MySQL/MariaDB), else by SQLite's words."""
    if isinstance(exc, _Typed):
        return exc
    args = exc.args
    if isinstance(exc, InterfaceError):
        return DatabaseUnusable(*args)
    code = _mysql_code(exc)
    found: _Typed
    if code is not None:
        found = DatabaseConflict(*args) if code in CONFLICT_CODES else DatabaseUnavailable(*args)
        found.db_code = code
    else:
        text = str(args[0]) if args else ""
        found = DatabaseConflict(*args) if any(m in text for m in SQLITE_CONFLICTS) else DatabaseUnavailable(*args)
    return found


class TypedErrorWrapper(DatabaseErrorWrapper):
    """Django's error wrapper, whose ``OperationalError``/``InterfaceError``
    are the typed errors above (still instances of Django's classes, so
    Django's own transaction handling treats them as it always did)."""

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        try:
            super().__exit__(exc_type, exc_value, traceback)
        except (OperationalError, InterfaceError) as exc:
            vendor = self.wrapper.vendor  # type: ignore[attr-defined]  # set by the base class, undeclared in the stubs
            raise typed(exc, vendor).with_traceback(traceback) from exc_value


def retry_seconds() -> float:
    return float(getattr(settings, "SESSIONTREE_DB_RETRY_SECONDS", DEFAULT_RETRY_SECONDS))


def _reconnect_pause(attempt: int) -> float:
    return RECONNECT_BASE_SECONDS * (2 ** (attempt - 1)) * random.uniform(0.5, 1.5)


def reset_connection(db: Any = None) -> None:
    """Drop a connection that failed (outside a transaction): the next
    statement connects again, perhaps to another node behind a proxy."""
    db = db if db is not None else connection
    if db.in_atomic_block:
        return
    try:
        db.close()
    except Exception:  # closing a broken connection may fail; it is dropped anyway
        db.connection = None


def _is_read(sql: Any) -> bool:
    text = sql.decode("utf-8", "replace") if isinstance(sql, bytes) else str(sql)
    head = text.lstrip()[:16].upper()
    return head.startswith(("SELECT", "SHOW")) and "FOR UPDATE" not in text.upper()


def read_retry(execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """An execute wrapper (installed by this project's backends): a lone
    ``SELECT`` in autocommit whose connection failed is sent again on a new
    connection, within ``SESSIONTREE_DB_RETRY_SECONDS``."""
    started = time.monotonic()
    attempt = 0
    db = context["connection"]
    while True:
        try:
            return execute(sql, params, many, context)
        except (OperationalError, InterfaceError) as raw:
            exc = typed(raw, db.vendor)
            attempt += 1
            if (
                many
                or not lost_connection(exc)
                or db.in_atomic_block
                or not db.get_autocommit()
                or not _is_read(sql)
                or time.monotonic() - started + _reconnect_pause(attempt) > retry_seconds()
            ):
                _raise(exc, raw)
            logger.info("A read lost its connection (%r); connecting again (attempt %d)", exc, attempt)
            time.sleep(_reconnect_pause(attempt))
            reset_connection(db)
            try:
                db.ensure_connection()
                context["cursor"].cursor = db.create_cursor()
            except (OperationalError, InterfaceError) as failed:
                if time.monotonic() - started > retry_seconds():
                    _raise(typed(failed, db.vendor), failed)


def lost_connection(exc: BaseException) -> bool:
    """A failure of the connection (or of an unready node), not of the statement."""
    return bool(getattr(exc, "connection_lost", False))


def _raise(exc: BaseException, raw: BaseException) -> None:
    if exc is raw:
        raise raw
    raise exc.with_traceback(raw.__traceback__) from raw


@contextmanager
def atomic_unit() -> Iterator[None]:
    """``transaction.atomic()`` that tells a failure of its COMMIT apart: a
    lost connection there is ``CommitOutcomeUnknown`` (the write may or may
    not be stored), never a plain unavailability that a retry could repeat."""
    body_done = False
    try:
        with transaction.atomic():
            yield
            body_done = True
    except (OperationalError, InterfaceError) as raw:
        exc = typed(raw, connection.vendor)
        if body_done and not connection.in_atomic_block and lost_connection(exc):
            unknown = DatabaseCommitUnknown(*exc.args)
            unknown.db_code = getattr(exc, "db_code", None)
            raise unknown from raw
        _raise(exc, raw)


def not_committed(exc: BaseException) -> DatabaseUnavailable:
    """A commit found, after its answer was lost, not to have happened: a
    plain lost connection (which ``retrying`` runs again)."""
    found = DatabaseUnavailable(*exc.args)
    found.db_code = getattr(exc, "db_code", None) or 2013
    return found


def retrying(
    unit: Callable[[], T],
    *,
    what: str = "Transaction",
    attempts: int | None = None,
    base_seconds: float | None = None,
    log: logging.Logger | None = None,
) -> T:
    """Run ``unit`` (which opens its own transaction, ``atomic_unit``) again
    after a conflict (up to ``attempts`` runs, backoff from ``base_seconds``),
    or after a connection failure before its COMMIT (within
    ``SESSIONTREE_DB_RETRY_SECONDS``). Inside a caller's transaction nothing
    is retried."""
    attempts = CONFLICT_ATTEMPTS if attempts is None else attempts
    base_seconds = CONFLICT_BASE_SECONDS if base_seconds is None else base_seconds
    log = logger if log is None else log
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return unit()
        except CommitOutcomeUnknown:
            raise
        except (OperationalError, InterfaceError) as raw:
            exc = typed(raw, connection.vendor)
            if isinstance(exc, StorageConflict):
                if connection.in_atomic_block or attempt >= attempts:
                    _raise(exc, raw)
                log.info("%s attempt %d hit a lock conflict (%s); retrying", what, attempt, exc)
                pause = base_seconds * (2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
            else:
                pause = _reconnect_pause(attempt)
                if (
                    connection.in_atomic_block
                    or not lost_connection(exc)
                    or time.monotonic() - started + pause > retry_seconds()
                ):
                    _raise(exc, raw)
                log.info("%s attempt %d lost its connection (%s); connecting again", what, attempt, exc)
                reset_connection()
        time.sleep(pause)


def run_in_transaction(work: Callable[[], T], **retry: Any) -> T:
    """``work()`` in a transaction, retried as ``retrying`` says (``retry``: its options)."""

    def unit() -> T:
        with atomic_unit():
            return work()

    return retrying(unit, **retry)
