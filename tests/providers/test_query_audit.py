"""Every SQL statement of every entry operation is keyed by one session, by
one key: the session's id.

A session-sharded keyspace (Vitess, say) routes each statement by its
session: none may read or write across sessions, and all of them must name
it by the same key (the session row's lock, the entry rows, the row's
UPDATE and the audit record all say ``session_id = '<id>'``; the row's
integer pk is no key). Only lineage operations (creating, forking or deleting
a session: the lineage tree) may touch several sessions, and they are not
entry operations.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.core.compaction import CompactionSettings
from sessiontree.services import entries, tree
from tests.contract.conftest import PROVIDER_KINDS, make_provider
from tests.roleplay.story import FakeSummarizer

CONTROL = re.compile(r"^\s*(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK|COMMIT|BEGIN|SET )", re.I)
COLUMN = r"[`\"]?(?:[a-z_]+[`\"]?\.[`\"]?)?{}[`\"]?"


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def keyed_by(sql: str, session_id: str) -> bool:
    """Whether the statement names the session by its id: ``session_id`` equal
    to it in a WHERE clause, or in the row it inserts."""
    key = f"'{re.escape(session_id)}'"
    if re.search(COLUMN.format("session_id") + rf"\s*=\s*{key}(?!\w)", sql):
        return True
    # An upsert (the search index's row) ends in ON CONFLICT … / ON DUPLICATE KEY UPDATE ….
    insert = re.match(
        r"\s*INSERT INTO [`\"]?(\w+)[`\"]?\s*\(([^)]*)\)\s*VALUES\s*\((.*)\)\s*"
        r"(?:RETURNING\s[^()]*|ON (?:CONFLICT\b|DUPLICATE KEY UPDATE\b).*)?$",
        sql,
        re.S,
    )
    if insert:
        columns = [c.strip(' `"') for c in insert.group(2).split(",")]
        if "session_id" in columns:
            values = re.findall(r"\s*('(?:[^'\\]|\\.|'')*'|[^,']+)\s*(?:,|$)", insert.group(3))
            value = values[columns.index("session_id")].strip()
            return value == f"'{session_id}'"
    return False


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


def test_every_statement_of_every_entry_operation_names_one_session(provider):
    # A neighbour session with entries: a statement missing its session key would see them.
    provider.create_session(session_id="other")
    for i in range(3):
        provider.append_message("other", user(f"o{i}"))
    provider.create_session(session_id="s1")
    first = provider.append_message("s1", user("first " + "w " * 200))
    for i in range(4):
        provider.append_message("s1", user(f"m{i} " + "w " * 200))
    who = {"actor": "t", "channel": "internal", "provider": provider}
    state: dict[str, str] = {}

    def stream():
        state["streaming"] = provider.begin_in_flight_entry("s1", {"type": "message", "message": user("")})["id"]

    operations = {
        "append_message": lambda: provider.append_message("s1", user("x")),
        "append_label_change": lambda: provider.append_label_change("s1", first["id"], "l"),
        "append_compaction": lambda: provider.append_compaction(
            "s1", summary="s", first_kept_entry_id=first["id"], tokens_before=1
        ),
        "append_context_edit": lambda: provider.append_context_edit("s1", first["id"], None),
        "begin_in_flight_entry": stream,
        "update_in_flight_entry": lambda: provider.update_in_flight_entry("s1", state["streaming"], {"x": 1}),
        "complete_in_flight_entry": lambda: provider.update_in_flight_entry(
            "s1", state["streaming"], {}, complete=True
        ),
        "switch_leaf": lambda: provider.switch_leaf("s1", first["id"]),
        "append_branch_summary": lambda: provider.append_branch_summary(
            "s1", branch_from_entry_id=first["id"], summary="s"
        ),
        "reset_leaf": lambda: provider.reset_leaf("s1"),
        "services.append_entries": lambda: entries.append_entries(
            session_id="s1", entries=[{"type": "message", "message": user("r")}], **who
        ),
        "services.set_label": lambda: tree.set_label(session_id="s1", target_id=first["id"], label="k", **who),
        "services.navigate_tree": lambda: tree.navigate_tree(
            provider=provider,
            session_id="s1",
            target_id=first["id"],
            summarize=True,
            summarizer=FakeSummarizer("s"),
            actor="t",
            channel="internal",
        ),
        "services.compact_session": lambda: tree.compact_session(
            provider=provider,
            session_id="s1",
            summarizer=FakeSummarizer("s"),
            settings=CompactionSettings(keep_recent_tokens=10),
            actor="system",
            channel="internal",
        ),
        "get_session": lambda: provider.get_session("s1"),
        "get_entry": lambda: provider.get_entry("s1", first["id"]),
        "list_entries": lambda: provider.list_entries("s1"),
        "get_active_path": lambda: provider.get_active_path("s1"),
        "build_context": lambda: provider.build_context("s1", first["id"]),
        "get_snapshot": lambda: provider.get_snapshot("s1"),
        "get_header": lambda: provider.get_header("s1"),
    }
    unkeyed: list[tuple[str, str]] = []
    counted = 0
    for name, operation in operations.items():
        with CaptureQueriesContext(connection) as captured:
            operation()
        for query in captured.captured_queries:
            sql = query["sql"]
            if CONTROL.match(sql):
                continue
            counted += 1
            if not keyed_by(sql, "s1"):
                unkeyed.append((name, sql[:300]))
    assert counted > len(operations)  # the capture saw the work
    assert unkeyed == []


def test_the_checker_itself_tells_keyed_from_unkeyed_statements():
    assert keyed_by("SELECT x FROM \"t\" WHERE \"session_id\" = 's1' AND entry_id = 'a'", "s1")
    assert keyed_by("UPDATE `neta_agent_session` SET `leaf_entry_id` = 'x' WHERE `session_id` = 's1'", "s1")
    assert keyed_by("INSERT INTO `t` (`session_id`, `entry_id`) VALUES ('s1', 'a')", "s1")
    assert keyed_by('INSERT INTO "a" ("actor", "session_id") VALUES (\'x, y\', \'s1\')', "s1")
    assert not keyed_by('SELECT x FROM "t" WHERE "entry_id" = \'a\'', "s1")
    assert not keyed_by('SELECT x FROM "t" WHERE "session_id" = \'s2\'', "s1")
    # The row's integer pk is not the session's key (one key for every statement).
    assert not keyed_by('SELECT x FROM "t" WHERE "session_id" = 7', "s1")
    assert not keyed_by("UPDATE `neta_agent_session` SET `leaf_entry_id` = 'x' WHERE `id` = 7", "s1")
    assert not keyed_by("INSERT INTO `t` (`session_id`, `entry_id`) VALUES (7, 'a')", "s1")
    assert not keyed_by('SELECT MAX("tree_id") FROM "neta_agent_session"', "s1")
    assert keyed_by(
        'INSERT INTO "i" ("session_id", "text") VALUES (\'s1\', \'a\') '
        'ON CONFLICT ("session_id", "entry_id") DO UPDATE SET "text" = excluded."text"',
        "s1",
    )
    assert keyed_by(
        "INSERT INTO `i` (`session_id`, `text`) VALUES ('s1', 'a') ON DUPLICATE KEY UPDATE `text` = VALUES(`text`)",
        "s1",
    )
    assert not keyed_by(
        "INSERT INTO `i` (`session_id`, `text`) VALUES ('s2', 'a') ON DUPLICATE KEY UPDATE `text` = VALUES(`text`)",
        "s1",
    )
