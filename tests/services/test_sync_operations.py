"""The operations the sync command builds on, on every provider:
import_session, import_entries (branches, all-or-none, optimistic count),
refresh_session and register_file."""

from __future__ import annotations

import pytest

from sessiontree import services
from sessiontree.core.errors import InvalidTree, LeafConflict, SessionClosed
from sessiontree.models import AgentSession, AuditRecord
from tests.sync import pi_folder as pi


def import_first(provider, count: int, session_id: str = "sess-i"):
    entries = pi.branched_entries()
    services.sessions.import_session(
        header=pi.header(session_id, extra_field="kept"),
        entries=entries[:count],
        actor=services.SYNC_ACTOR,
        channel="sync",
        provider=provider,
        title="t",
    )
    return entries


def test_a_branched_tail_keeps_every_parent(provider):
    entries = import_first(provider, 5)
    counts: list[int] = []
    written = services.entries.import_entries(
        session_id="sess-i",
        entries=entries[5:],
        actor=services.SYNC_ACTOR,
        channel="sync",
        provider=provider,
        expected_entry_count=5,
        also=counts.append,
    )
    assert written == entries[5:]
    assert provider.list_entries("sess-i") == entries  # the usage entry (a type we do not model) too
    session = provider.get_session("sess-i")
    assert session["leaf_entry_id"] == "s0000002"
    assert (session["entry_count"], session["branch_count"]) == (11, 2)
    assert counts == [11]
    assert provider.get_header("sess-i")["extra_field"] == "kept"
    assert provider.get_header("sess-i")["timestamp"] == pi.T0
    record = AuditRecord.objects.get(operation="import_entries")
    assert (record.actor, record.channel, record.leaf_after) == ("sync", "sync", "s0000002")
    assert record.entry_ids == [e["id"] for e in entries[5:]]


def test_an_import_is_all_or_nothing(provider):
    entries = import_first(provider, 5)
    bad = [*entries[5:8], {**entries[8], "id": "u0000001"}]  # a duplicate id at the end
    with pytest.raises(InvalidTree):
        services.entries.import_entries(
            session_id="sess-i", entries=bad, actor="sync", channel="sync", provider=provider
        )
    assert provider.list_entries("sess-i") == entries[:5]
    with pytest.raises(LeafConflict):
        services.entries.import_entries(
            session_id="sess-i",
            entries=entries[5:],
            actor="sync",
            channel="sync",
            provider=provider,
            expected_entry_count=4,
        )
    assert provider.list_entries("sess-i") == entries[:5]
    assert not AuditRecord.objects.filter(operation="import_entries").exists()
    services.sessions.archive_session(session_id="sess-i", actor="x", channel="cli", provider=provider)
    with pytest.raises(SessionClosed):
        services.entries.import_entries(
            session_id="sess-i", entries=entries[5:], actor="sync", channel="sync", provider=provider
        )


def test_refresh_recomputes_the_meta_row_once(provider):
    import_first(provider, 11)
    AgentSession.objects.filter(session_id="sess-i").update(entry_count=11, branch_count=9, compaction_count=3)
    changes = services.sessions.refresh_session(session_id="sess-i", actor="sync", channel="sync", provider=provider)
    assert changes == {"branch_count": (9, 2), "compaction_count": (3, 0)}
    row = AgentSession.objects.get(session_id="sess-i")
    assert (row.branch_count, row.compaction_count, row.leaf_entry_id) == (2, 0, "s0000002")
    assert AuditRecord.objects.filter(operation="refresh_session").count() == 1
    assert services.sessions.refresh_session(session_id="sess-i", actor="sync", channel="sync", provider=provider) == {}
    assert AuditRecord.objects.filter(operation="refresh_session").count() == 1
    # A leaf that is not an entry becomes the last entry; a dry run only says so.
    AgentSession.objects.filter(session_id="sess-i").update(leaf_entry_id="gone0001")
    changes = services.sessions.refresh_session(
        session_id="sess-i", actor="sync", channel="sync", provider=provider, dry_run=True
    )
    assert changes == {"leaf_entry_id": ("gone0001", "s0000002")}
    assert AgentSession.objects.get(session_id="sess-i").leaf_entry_id == "gone0001"
    services.sessions.refresh_session(session_id="sess-i", actor="sync", channel="sync", provider=provider)
    assert AgentSession.objects.get(session_id="sess-i").leaf_entry_id == "s0000002"


def test_refresh_keeps_a_leaf_that_is_an_entry(provider):
    import_first(provider, 11)
    services.tree.switch_leaf(session_id="sess-i", entry_id="a0000002", actor="x", channel="cli", provider=provider)
    assert services.sessions.refresh_session(session_id="sess-i", actor="sync", channel="sync", provider=provider) == {}
    assert AgentSession.objects.get(session_id="sess-i").leaf_entry_id == "a0000002"


def test_register_file_and_refresh_after_pi_appends(db, tmp_path):
    from sessiontree.providers.factory import get_provider

    entries = pi.branched_entries()
    path = pi.write(tmp_path / "pi" / "x.jsonl", [pi.header("sess-f"), *entries[:5]])
    session = services.sessions.register_file(
        session_id="sess-f", path=path, actor="sync", channel="sync", title="named"
    )
    assert (session["entry_count"], session["leaf_entry_id"], session["title"]) == (5, "a0000002", "named")
    pi.append(path, entries[5:])
    changes = services.sessions.refresh_session(session_id="sess-f", actor="sync", channel="sync", title="Second try")
    assert changes["entry_count"] == (5, 11) and changes["leaf_entry_id"] == ("a0000002", "s0000002")
    assert changes["title"] == ("named", "Second try")
    row = AgentSession.objects.get(session_id="sess-f")
    assert (row.entry_count, row.branch_count, row.leaf_entry_id, row.title) == (11, 2, "s0000002", "Second try")
    assert get_provider("file").list_entries("sess-f") == entries
