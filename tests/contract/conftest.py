"""The provider fixture the contract suite runs against: every provider, on
whichever database the run uses (SQLite by default, MySQL with DATABASE_URL)."""

from __future__ import annotations

import importlib.util

import pytest

from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache

PROVIDER_KINDS = ["file"]
if importlib.util.find_spec("sessiontree.providers.mysql_provider") is not None:
    PROVIDER_KINDS.append("mysql")


def make_provider(kind: str, tmp_path):
    if kind == "file":
        clear_index_cache()
        return FileSessionTreeProvider(root=tmp_path / "sessions")
    from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider

    return MySQLSessionTreeProvider()


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)
