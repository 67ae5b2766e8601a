"""Django's MySQL/MariaDB backend with typed failures and read retries
(``sessiontree/providers/db_errors.py``), whose transactions start with one
round trip instead of two."""

from __future__ import annotations

import contextlib
from typing import Any

import MySQLdb
from django.db.backends.mysql import base
from django.db.backends.utils import debug_transaction
from django.utils.functional import cached_property

from sessiontree.providers.db_errors import TypedErrorWrapper, read_retry


class CursorWrapper(base.CursorWrapper):
    """The driver's cursor, whose ``close`` never raises: closing the cursor of
    a connection that was lost fails in the driver (MySQLdb reads what is left
    of the result first), and Django closes a cursor after a failed query with
    nothing around it to type that error; it would replace the typed one."""

    def close(self) -> None:
        with contextlib.suppress(MySQLdb.Error):
            self.cursor.close()


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's wrapper, but an outermost ``atomic`` block begins with
    ``START TRANSACTION`` on a session left in autocommit.

    Django turns autocommit off to begin (``SET autocommit=0``, a round
    trip) and on again after the ``COMMIT`` (another). The server ends a
    transaction begun by ``START TRANSACTION`` at its ``COMMIT`` or
    ``ROLLBACK`` and is back in autocommit by itself, so the second trip is
    not sent: every write costs one round trip less. Django's hook for this
    (``_start_transaction_under_autocommit``, SQLite's ``BEGIN``) is used by
    ``atomic`` only; turning autocommit off by hand
    (``transaction.set_autocommit(False)``) still sends
    ``SET autocommit=0``, so work after a ``commit()`` stays in a
    transaction as Django documents."""

    # The open transaction was begun by START TRANSACTION: the session is
    # still in autocommit, and will be again once it ends.
    _began_in_autocommit = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute_wrappers.append(read_retry)

    def get_new_connection(self, conn_params: Any) -> Any:
        self._began_in_autocommit = False
        return super().get_new_connection(conn_params)

    def _start_transaction_under_autocommit(self) -> None:
        # Logged as Django logs the start of a transaction ("BEGIN"), not as a
        # statement: query counts stay what they were.
        with debug_transaction(self, "BEGIN"), self.wrap_database_errors:
            self.connection.query(b"START TRANSACTION")
        self._began_in_autocommit = True

    def _set_autocommit(self, autocommit: bool) -> None:
        if autocommit and self._began_in_autocommit:
            # The COMMIT or ROLLBACK that ended the transaction left the session in autocommit.
            self._began_in_autocommit = False
            return
        self._began_in_autocommit = False
        super()._set_autocommit(autocommit)  # type: ignore[misc]  # Django's, undeclared in the stubs

    @cached_property
    def wrap_database_errors(self) -> TypedErrorWrapper:
        return TypedErrorWrapper(self)

    def create_cursor(self, name: Any = None) -> CursorWrapper:
        return CursorWrapper(self.connection.cursor())
