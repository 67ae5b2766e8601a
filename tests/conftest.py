"""Checks and fixtures shared by the whole suite.

The database is SQLite unless ``DATABASE_URL`` is set. ``REQUIRE_MYSQL=1``
(``make test-mysql``, CI) stops the run at once, non-zero, unless the
configured database is MySQL/MariaDB and answers: a MySQL leg must never pass
by skipping. ``SESSIONTREE_DB_TESTS_ONLY=1`` keeps only database-backed tests
(the MySQL leg: pure-kernel tests behave the same on any database).
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings

# any_provider / provider: one test on several storages.
pytest_plugins = ["tests.storage_fixtures"]

MYSQL_ENGINES = {"django.db.backends.mysql", "sessiontree.providers.backends.mysql"}
# pytest-django's fixture behind `db`, `transactional_db`, `client`, `admin_client`…
DB_FIXTURE = "_django_db_helper"


def is_mysql() -> bool:
    return settings.DATABASES["default"]["ENGINE"] in MYSQL_ENGINES


def mysql_unreachable_reason() -> str | None:
    """Why the configured MySQL server cannot be reached, or ``None`` if it answers."""
    import MySQLdb

    db = settings.DATABASES["default"]
    try:
        # No database name: pytest-django creates its own test database.
        connection = MySQLdb.connect(
            host=db.get("HOST") or "127.0.0.1",
            port=int(db.get("PORT") or 3306),
            user=db.get("USER") or "root",
            password=db.get("PASSWORD") or "",
            connect_timeout=5,
        )
    except MySQLdb.Error as exc:
        return f"{type(exc).__name__}: {exc}"
    connection.close()
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("REQUIRE_MYSQL") != "1":
        return
    engine = settings.DATABASES["default"]["ENGINE"]
    if engine not in MYSQL_ENGINES:
        pytest.exit(
            f"REQUIRE_MYSQL=1 but the configured database is {engine}; "
            "set DATABASE_URL=mysql://root@127.0.0.1:3306/test (or run `make test-mysql`)",
            returncode=3,
        )
    reason = mysql_unreachable_reason()
    if reason is not None:
        db = settings.DATABASES["default"]
        pytest.exit(
            f"REQUIRE_MYSQL=1 but MySQL at {db.get('HOST')}:{db.get('PORT')} does not answer ({reason}); "
            "start it with `make mysql-up`",
            returncode=3,
        )


def uses_database(item: pytest.Item) -> bool:
    return DB_FIXTURE in getattr(item, "fixturenames", ()) or item.get_closest_marker("django_db") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not is_mysql():
        skip_mysql = pytest.mark.skip(reason="needs MySQL/MariaDB (DATABASE_URL=mysql://…); run `make test-mysql`")
        for item in items:
            if item.get_closest_marker("mysql"):
                item.add_marker(skip_mysql)
    if os.environ.get("SESSIONTREE_DB_TESTS_ONLY") == "1":
        kept = [item for item in items if uses_database(item)]
        deselected = [item for item in items if not uses_database(item)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = kept


@pytest.fixture(autouse=True)
def _test_settings(settings, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test's file provider writes under a fresh temporary folder, never
    ``var/``; passwords hash fast (the default hasher costs ~0.3 s a user);
    the admin's per-process tree shapes start empty."""
    settings.SESSIONTREE_FILE_ROOT = str(tmp_path_factory.mktemp("sessions"))
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Rolled-back tests reuse primary keys: no tree shape may outlive its test.
    from sessiontree.selectors.tree_window import clear_shape_cache

    clear_shape_cache()
