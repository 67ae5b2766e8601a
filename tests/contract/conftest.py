"""The provider fixture the contract suite runs against: every provider, on
whichever database the run uses (SQLite by default, MySQL with DATABASE_URL).

Besides the two storages we ship, the suite runs against ``memory``
(``memory_storage.py``): a third storage registered the way any would be,
with one line in the ``SESSIONTREE_PROVIDERS`` registry setting.
"""

from __future__ import annotations

import importlib.util

import pytest

from sessiontree.providers.factory import DEFAULT_PROVIDERS
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache

from . import memory_storage

# The storages we ship (other suites parametrize over these).
PROVIDER_KINDS = ["file"]
if importlib.util.find_spec("sessiontree.providers.mysql_provider") is not None:
    PROVIDER_KINDS.append("mysql")
# The contract suite: those, and a third one that lives in the tests.
CONTRACT_KINDS = [*PROVIDER_KINDS, memory_storage.KIND]


def make_provider(kind: str, tmp_path):
    if kind == "file":
        clear_index_cache()
        return FileSessionTreeProvider(root=tmp_path / "sessions")
    if kind == memory_storage.KIND:
        memory_storage.clear()
        return memory_storage.MemorySessionTreeProvider()
    from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider

    return MySQLSessionTreeProvider()


def register_memory_storage(settings) -> None:
    """The registry line a third storage needs (and nothing else)."""
    settings.SESSIONTREE_PROVIDERS = {**DEFAULT_PROVIDERS, memory_storage.KIND: memory_storage.PROVIDER_PATH}


@pytest.fixture(params=CONTRACT_KINDS)
def provider(request, db, tmp_path, settings):
    register_memory_storage(settings)
    return make_provider(request.param, tmp_path)
