"""``SESSIONTREE_DB_SESSION_VARIABLES``: MySQL/MariaDB session variables
every new connection sets (on Galera ``wsrep_sync_wait=1``: read-your-writes
on any node; docs/scale-out.md). The Galera leg checks the effect
(tests/galera/test_multi_primary.py); here: the setting itself, on any
database, and a real connection on MySQL/MariaDB."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from config.settings import ENGINES, init_command
from tests.test_settings import settings_namespace

MYSQL_URL = "mysql://root@127.0.0.1:3306/test"


def test_the_variables_join_the_init_command_of_mysql_connections(monkeypatch):
    namespace = settings_namespace(
        monkeypatch,
        DJANGO_DEBUG="1",
        DATABASE_URL=MYSQL_URL,
        SESSIONTREE_DB_SESSION_VARIABLES="wsrep_sync_wait=1, innodb_lock_wait_timeout=20",
    )
    assert namespace["SESSIONTREE_DB_SESSION_VARIABLES"] == {"wsrep_sync_wait": "1", "innodb_lock_wait_timeout": "20"}
    database = namespace["DATABASES"]["default"]
    assert database["ENGINE"] == ENGINES["django.db.backends.mysql"]
    assert database["OPTIONS"]["init_command"] == (
        "SET sql_mode='STRICT_TRANS_TABLES', SESSION wsrep_sync_wait = 1, SESSION innodb_lock_wait_timeout = 20"
    )


def test_without_the_setting_nothing_is_added(monkeypatch):
    namespace = settings_namespace(monkeypatch, DJANGO_DEBUG="1", DATABASE_URL=MYSQL_URL)
    assert namespace["SESSIONTREE_DB_SESSION_VARIABLES"] == {}
    assert namespace["DATABASES"]["default"]["OPTIONS"]["init_command"] == "SET sql_mode='STRICT_TRANS_TABLES'"


@pytest.mark.parametrize(
    "value",
    ["wsrep_sync_wait", "wsrep sync wait=1", "x=1; DROP TABLE t", "x=a b", "1x=2", "x='it''s'"],
)
def test_anything_but_name_equals_value_is_refused(monkeypatch, value):
    with pytest.raises(ImproperlyConfigured, match="SESSIONTREE_DB_SESSION_VARIABLES"):
        settings_namespace(
            monkeypatch, DJANGO_DEBUG="1", DATABASE_URL=MYSQL_URL, SESSIONTREE_DB_SESSION_VARIABLES=value
        )


def test_values_may_be_numbers_words_or_quoted():
    assert (
        init_command("", {"a": "1", "b": "OFF", "c": "'x,y'"})
        == "SET SESSION a = 1, SESSION b = OFF, SESSION c = 'x,y'"
    )
    with pytest.raises(ImproperlyConfigured):
        init_command("SET a=1; SET b=2", {"c": "1"})


@pytest.mark.mysql
def test_a_new_connection_has_the_variables_set(transactional_db):
    """What the setting builds, on a real connection (a variable every
    MySQL/MariaDB has; the Galera leg checks wsrep_sync_wait itself)."""
    db = connection
    original = db.settings_dict
    options = dict(original.get("OPTIONS", {}))
    options["init_command"] = init_command(options.get("init_command", ""), {"innodb_lock_wait_timeout": "17"})
    db.close()
    db.settings_dict = {**original, "OPTIONS": options}
    try:
        with db.cursor() as cursor:
            cursor.execute("SELECT @@SESSION.innodb_lock_wait_timeout, @@SESSION.sql_mode")
            timeout, sql_mode = cursor.fetchone()
    finally:
        db.close()
        db.settings_dict = original
    assert int(timeout) == 17 and "STRICT_TRANS_TABLES" in sql_mode


@pytest.mark.parametrize("value", ["soon", "-1", "1e9"])
def test_a_retry_budget_that_is_no_number_of_seconds_is_refused(monkeypatch, value):
    with pytest.raises(ImproperlyConfigured, match="SESSIONTREE_DB_RETRY_SECONDS"):
        settings_namespace(monkeypatch, DJANGO_DEBUG="1", SESSIONTREE_DB_RETRY_SECONDS=value)


def test_the_retry_budget_is_read(monkeypatch):
    assert (
        settings_namespace(monkeypatch, DJANGO_DEBUG="1", SESSIONTREE_DB_RETRY_SECONDS="0.5")[
            "SESSIONTREE_DB_RETRY_SECONDS"
        ]
        == 0.5
    )
