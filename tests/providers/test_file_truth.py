"""The file provider's file is the truth: its leaf cannot drift from it.

Found by killing writers at random moments: a writer killed after its JSONL
line is written but before its meta row is updated left an entry the row had
not seen, and the next append hung from the old leaf (a silent side branch)
while ``entry_count`` disagreed with the file. The same happened when Pi
appended to the file itself. A file holding entries its row has not seen
has its last entry as the leaf, as Pi decides on load, and the counts follow.

Then (issue 20): a killed writer's line was adopted that way, although its
client was never told of it; retrying with its idempotency key stored the
entry a second time. A writer now leaves an intent beside the file while it
writes: the next lock cuts the lines of a writer whose transaction did not
commit, and keeps those of one that did.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from django.db import OperationalError, connections

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.pi_session_file import load_entries_from_file, serialize_line
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers import file_provider as module
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from sessiontree.services import entries as entry_ops
from tests.pi_fixtures import split_header

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def provider(tmp_path):
    clear_index_cache()
    return FileSessionTreeProvider(root=tmp_path / "sessions")


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def pi_context(path):
    """What Pi builds on load: the file's entries, leaf = the last entry."""
    _header, entries = split_header(load_entries_from_file(path))
    return build_session_context(entries)


def killed_in_a_write(provider, session_id, message, *, where="line"):
    """Append in a child process that dies (``os._exit``, no cleanup of any
    kind) ``where``: right after its line reached the file, before its
    database transaction commits (``"line"``: the row update and the audit
    record are lost), or right after the commit, before it removed its
    intent (``"commit"``)."""
    real_append_lines = module.append_lines

    def append_then_die(fd, lines, *, fsync=False):
        real_append_lines(fd, lines, fsync=fsync)
        os._exit(17)

    def die_instead_of_removing(intent):
        os._exit(17)

    pid = os.fork()
    if pid == 0:  # the child: a connection of its own, never the parent's
        try:
            # Keep the parent's connection objects alive: freeing one would
            # send the server a QUIT on the socket the parent still uses.
            _inherited = [conn.connection for conn in connections.all()]
            for conn in connections.all():
                conn.connection = None
            if where == "line":
                module.append_lines = append_then_die
            else:
                module._remove_intent = die_instead_of_removing
            entry_ops.append_message(
                session_id=session_id, message=message, actor="crash", channel="internal", provider=provider
            )
        finally:
            os._exit(3)  # never reached after a write: the child exits with 17 where it was meant to
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 17, "the child did not die where the test meant it to"
    clear_index_cache()


def contents(provider, session_id):
    return [entry["message"]["content"] for entry in provider.list_entries(session_id)]


def test_a_writer_killed_between_its_line_and_its_commit_leaves_nothing_behind(provider):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    before = Path(session["session_file"]).read_bytes()
    killed_in_a_write(provider, "s1", user("written, never acknowledged"))

    row = AgentSession.objects.get(session_id="s1")
    assert (row.leaf_entry_id, row.entry_count) == (a["id"], 1)  # the row never saw it
    assert not AuditRecord.objects.filter(actor="crash").exists()
    assert Path(session["session_file"]).read_bytes() != before  # the line is in the file …
    assert Path(session["session_file"] + ".writing").exists()  # … and so is the writer's intent
    # The next reader cuts the line nobody was told about.
    assert contents(provider, "s1") == ["a"]
    assert Path(session["session_file"]).read_bytes() == before
    assert not Path(session["session_file"] + ".writing").exists()
    assert provider.get_session("s1")["leaf_entry_id"] == a["id"]

    b = provider.append_message("s1", user("b"))
    assert b["parentId"] == a["id"]  # no extra branch
    assert provider.get_session("s1")["branch_count"] == 1
    assert provider.build_context("s1") == pi_context(session["session_file"])
    row.refresh_from_db()
    assert (row.leaf_entry_id, row.entry_count) == (b["id"], 2)


def test_the_next_writer_settles_a_dead_writers_intent_too(provider):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    killed_in_a_write(provider, "s1", user("never acknowledged"))
    b = provider.append_message("s1", user("b"))  # a write, not a read, is the first to lock the file
    assert b["parentId"] == a["id"]
    assert contents(provider, "s1") == ["a", "b"]
    assert provider.build_context("s1") == pi_context(session["session_file"])


def test_a_writer_killed_after_its_commit_keeps_its_line(provider):
    session = provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    killed_in_a_write(provider, "s1", user("committed"), where="commit")
    assert Path(session["session_file"] + ".writing").exists()
    assert AuditRecord.objects.filter(actor="crash").count() == 1  # it committed
    assert contents(provider, "s1") == ["a", "committed"]
    assert not Path(session["session_file"] + ".writing").exists()
    row = AgentSession.objects.get(session_id="s1")
    assert row.entry_count == 2 and provider.get_session("s1")["leaf_entry_id"] == row.leaf_entry_id


def test_lines_of_someone_else_after_a_dead_writers_stay(provider):
    """Pi appended after the dead writer's line: nothing is cut (the file
    cannot lose Pi's lines); Pi's rule applies to the whole file."""
    session = provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    killed_in_a_write(provider, "s1", user("dead writer's"))
    with open(session["session_file"], "rb") as f:
        dead = orjson.loads(f.read().splitlines()[-1])
    pi_line = {"type": "message", "id": "pi000001", "parentId": dead["id"], "timestamp": "t", "message": user("pi")}
    with open(session["session_file"], "ab") as f:
        f.write(serialize_line(pi_line))
    assert contents(provider, "s1") == ["a", "dead writer's", "pi"]
    assert provider.get_session("s1")["leaf_entry_id"] == "pi000001"
    assert not Path(session["session_file"] + ".writing").exists()


def test_a_foreign_writer_moves_the_leaf_as_pi_would(provider):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    provider.append_message("s1", user("b"))
    provider.switch_leaf("s1", a["id"])  # the row's leaf is a, by choice
    foreign = [
        {"type": "message", "id": "pi000001", "parentId": a["id"], "timestamp": "t", "message": user("pi 1")},
        {"type": "message", "id": "pi000002", "parentId": "pi000001", "timestamp": "t", "message": user("pi 2")},
    ]
    with open(session["session_file"], "ab") as f:
        f.write(b"".join(serialize_line(entry) for entry in foreign))
    after = provider.get_session("s1")
    assert after["leaf_entry_id"] == "pi000002"
    assert (after["entry_count"], after["branch_count"]) == (4, 2)
    assert provider.build_context("s1") == pi_context(session["session_file"])
    # While the file holds nothing new, a chosen leaf stays where it was put.
    provider.switch_leaf("s1", a["id"])
    assert provider.get_session("s1")["leaf_entry_id"] == a["id"]


def test_a_failing_audit_record_writes_nothing(provider, monkeypatch):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    before = Path(session["session_file"]).read_bytes()

    def failing_audit(**kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr("sessiontree.services.audit.record", failing_audit)
    with pytest.raises(RuntimeError):
        entry_ops.append_message(session_id="s1", message=user("x"), actor="t", channel="internal", provider=provider)
    assert Path(session["session_file"]).read_bytes() == before
    assert provider.list_entries("s1") == [a]
    assert provider.get_session("s1")["leaf_entry_id"] == a["id"]
    assert not AuditRecord.objects.exists()


def test_a_commit_that_fails_after_the_line_was_written_leaves_the_file_as_it_was(provider, monkeypatch):
    connection = connections["default"]
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    before = Path(session["session_file"]).read_bytes()
    real_commit = type(connection).commit
    calls = []

    def commit_fails_once(self):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("lost the database at COMMIT")
        return real_commit(self)

    monkeypatch.setattr(type(connection), "commit", commit_fails_once)
    with pytest.raises(OperationalError):
        entry_ops.append_message(session_id="s1", message=user("x"), actor="t", channel="internal", provider=provider)
    monkeypatch.setattr(type(connection), "commit", real_commit)
    assert Path(session["session_file"]).read_bytes() == before  # the line was written, then cut off
    assert provider.list_entries("s1") == [a]
    assert provider.get_session("s1")["leaf_entry_id"] == a["id"]
    assert not AuditRecord.objects.exists()
    provider.append_message("s1", user("after"))  # the session goes on normally
    assert [e["message"]["content"] for e in provider.list_entries("s1")] == ["a", "after"]


def test_a_commit_that_happened_although_it_failed_keeps_its_line(provider, monkeypatch):
    """The connection was lost during COMMIT but the server committed (issue
    24's ambiguous commit): the line stays, the row and the file agree, and
    the retry with the same idempotency key returns the first entry instead
    of storing it again."""
    connection = connections["default"]
    session = provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    real_commit = type(connection).commit
    calls = []

    def commit_then_fail_once(self):
        real_commit(self)
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("lost the connection while the server committed")

    monkeypatch.setattr(type(connection), "commit", commit_then_fail_once)
    with pytest.raises(OperationalError):
        entry_ops.append_message(
            session_id="s1", message=user("x"), actor="t", channel="internal", provider=provider, idempotency_key="k1"
        )
    monkeypatch.setattr(type(connection), "commit", real_commit)
    assert contents(provider, "s1") == ["a", "x"]
    assert not Path(session["session_file"] + ".writing").exists()
    first = provider.list_entries("s1")[-1]
    again = entry_ops.append_message(
        session_id="s1", message=user("x"), actor="t", channel="internal", provider=provider, idempotency_key="k1"
    )
    assert again == first
    assert contents(provider, "s1") == ["a", "x"]
    assert AgentSession.objects.get(session_id="s1").entry_count == 2
