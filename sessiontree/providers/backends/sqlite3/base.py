"""Django's SQLite backend with typed failures and read retries
(``sessiontree/providers/db_errors.py``)."""

from __future__ import annotations

from typing import Any

from django.db.backends.sqlite3 import base
from django.utils.functional import cached_property

from sessiontree.providers.db_errors import TypedErrorWrapper, read_retry


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute_wrappers.append(read_retry)

    @cached_property
    def wrap_database_errors(self) -> TypedErrorWrapper:
        return TypedErrorWrapper(self)
