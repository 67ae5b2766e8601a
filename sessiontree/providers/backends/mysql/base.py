"""Django's MySQL/MariaDB backend with typed failures and read retries
(``sessiontree/providers/db_errors.py``)."""

from __future__ import annotations

import contextlib
from typing import Any

import MySQLdb
from django.db.backends.mysql import base
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
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute_wrappers.append(read_retry)

    @cached_property
    def wrap_database_errors(self) -> TypedErrorWrapper:
        return TypedErrorWrapper(self)

    def create_cursor(self, name: Any = None) -> CursorWrapper:
        return CursorWrapper(self.connection.cursor())
