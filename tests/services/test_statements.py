"""SQL statements per write operation, on both storages: guarded, and the
session's meta row read once per operation (twice where a summarizer or a
hook must run between reading and writing: once to read, once under the
lock). docs/mysql-provider.md ("Queries per call") lists the same figures.

Counted as the services run them with the provider given (the API and the
admin pass it): ``provider=None`` adds the one statement that finds it.
SAVEPOINT/RELEASE (a transaction inside the test's own) are not counted;
neither are after hooks (the roleplay layer's checkpoint after a compaction
reads the path again, for its own work).
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.core.compaction import CompactionSettings
from sessiontree.models import AgentSession
from sessiontree.services import entries, hooks, tree
from tests.contract.conftest import PROVIDER_KINDS, make_provider
from tests.roleplay.story import FakeSummarizer

CONTROL = re.compile(r"^\s*(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK|COMMIT|BEGIN|SET )", re.I)
SESSION_TABLE = AgentSession._meta.db_table
# A read of one session's meta row by its id (the routing read, a view's read, the lock).
ROW_READ = re.compile(rf"^\s*SELECT .* FROM [`\"]?{SESSION_TABLE}[`\"]? .*session_id[`\"]? = ", re.S | re.I)

# operation → (statements, reads of the session's meta row), per storage.
# An entry that holds text (a message, a summary; not a label or a leaf
# move) adds its search index row: one INSERT in the same transaction.
EXPECTED = {
    "file": {
        "append": (4, 1),  # the row under the file's lock, its UPDATE, the search row, the audit record
        "label": (3, 1),
        "navigate": (3, 1),
        "navigate with a summary": (5, 2),  # + the read the summarizer works from, the summary's search row
        "compact": (5, 2),  # + the read the summarizer works from, the summary's search row
    },
    "mysql": {
        "append": (5, 1),  # lock (the row + its leaf), INSERT, UPDATE, the search row, the audit record
        "label": (5, 1),  # + the label's target
        "navigate": (5, 1),  # lock, the target, where it sits, UPDATE, audit
        # read: row, target, skeleton, the two paths' payloads; write: lock, place, INSERT, UPDATE, search row, audit
        "navigate with a summary": (11, 2),
        # read: row, skeleton, payloads; write: lock, first kept entry, INSERT, UPDATE, search row, audit
        "compact": (9, 2),
    },
}
# A fork creates a session: the source's row and path are read once, then
# the lineage insert (the parent row, its tree locked by the tree's root row,
# the two shifts of that tree's intervals), the copies and their search index
# rows (one statement).
FORK_EXPECTED = {"file": 10, "mysql": 15}


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text):
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": "m"}


def counted(captured: CaptureQueriesContext) -> list[str]:
    return [query["sql"] for query in captured.captured_queries if not CONTROL.match(query["sql"])]


@pytest.fixture
def no_hooks(monkeypatch):
    monkeypatch.setattr(hooks, "_hooks", {event: [] for event in hooks.EVENTS})


@pytest.fixture(params=PROVIDER_KINDS)
def session(request, db, tmp_path, no_hooks):
    provider = make_provider(request.param, tmp_path)
    provider.create_session(session_id="s1")
    ids = {}
    for i in range(3):
        ids[f"u{i}"] = provider.append_message("s1", user(f"question {i} " + "w " * 300))["id"]
        ids[f"a{i}"] = provider.append_message("s1", assistant(f"answer {i} " + "w " * 300))["id"]
    return provider, ids


def operations(provider, ids):
    who = {"actor": "t", "channel": "internal", "provider": provider}
    return {
        "append": lambda: entries.append_message(session_id="s1", message=user("more"), **who),
        "label": lambda: tree.set_label(session_id="s1", target_id=ids["u0"], label="start", **who),
        "navigate": lambda: tree.navigate_tree(session_id="s1", target_id=ids["a1"], **who),
        "navigate with a summary": lambda: tree.navigate_tree(
            session_id="s1", target_id=ids["a0"], summarize=True, summarizer=FakeSummarizer("left"), **who
        ),
        "compact": lambda: tree.compact_session(
            session_id="s1", summarizer=FakeSummarizer("s"), settings=CompactionSettings(keep_recent_tokens=10), **who
        ),
    }


def test_statements_and_meta_row_reads_per_write(session):
    provider, ids = session
    found = {}
    for name, operation in operations(provider, ids).items():
        with CaptureQueriesContext(connection) as captured:
            result = operation()
        assert result is not None and (name != "navigate with a summary" or result["summary_entry"] is not None)
        statements = counted(captured)
        found[name] = (len(statements), sum(1 for sql in statements if ROW_READ.match(sql)))
    assert found == EXPECTED[provider.kind]


def test_a_fork_reads_its_source_once(session):
    provider, ids = session
    with CaptureQueriesContext(connection) as captured:
        tree.fork_session(
            session_id="s1", entry_id=ids["a1"], position="at", actor="t", channel="internal", provider=provider
        )
    statements = counted(captured)
    source_reads = [sql for sql in statements if ROW_READ.match(sql) and "'s1'" in sql]
    # Once by the fork's read; once more by the lineage insert, which
    # takes the parent as a model instance (its tree id says which root to lock).
    assert len(source_reads) == 2 and "tree_id" in source_reads[1]
    assert len(statements) == FORK_EXPECTED[provider.kind]


def test_finding_the_provider_costs_one_statement(session):
    provider, ids = session
    with CaptureQueriesContext(connection) as given:
        tree.navigate_tree(session_id="s1", target_id=ids["a1"], actor="t", channel="internal", provider=provider)
    with CaptureQueriesContext(connection) as found:
        tree.navigate_tree(session_id="s1", target_id=ids["a0"], actor="t", channel="internal")
    assert len(counted(found)) == len(counted(given)) + 1


def test_a_navigate_to_the_leaf_writes_nothing(session):
    provider, _ids = session
    leaf = provider.get_session("s1")["leaf_entry_id"]
    with CaptureQueriesContext(connection) as captured:
        result = tree.navigate_tree(session_id="s1", target_id=leaf, actor="t", channel="internal", provider=provider)
    assert result["leaf_entry_id"] == leaf
    assert [sql for sql in counted(captured) if not sql.lstrip().upper().startswith("SELECT")] == []
