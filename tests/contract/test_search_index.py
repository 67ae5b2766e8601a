"""The search index is kept by the write path of every storage (``file``,
``mysql``, the tests' ``memory``), in the same transaction as the entries:
appends, several at once, in-flight completions, forks' copies, sessions
created with entries, imports, hard deletes; a failed write leaves no row.
``reindex_entries`` (what an erase calls) and ``reindex_search`` (what the
build command calls) make the rows what the entries hold."""

from __future__ import annotations

import pytest

from sessiontree.core.search import query_terms
from sessiontree.models import SearchEntry
from sessiontree.providers import search_index
from sessiontree.services import entries, sessions, tree

WHO = {"actor": "t", "channel": "internal"}
# InnoDB's full-text index sees rows once their transaction committed: the
# writes here commit as they do in production (the test's own transaction
# would hide them from MATCH on MySQL/MariaDB).
pytestmark = pytest.mark.django_db(transaction=True)


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text, *, tool_args=None):
    content = [{"type": "text", "text": text}]
    if tool_args is not None:
        content.append({"type": "toolCall", "id": "c1", "name": "read_file", "arguments": tool_args})
    return {"role": "assistant", "content": content, "provider": "p", "model": "m"}


def rows(session_id):
    return {row.entry_id: row for row in SearchEntry.objects.filter(session_id=session_id)}


def found(q, **scope):
    hits = search_index.search(query_terms(q), search_index.SessionScope(**scope), limit=50)
    return [(hit.session_id, hit.entry_id) for hit in hits]


def test_appends_index_the_text_of_each_entry_that_holds_some(provider):
    provider.create_session(session_id="s1")
    u = entries.append_message(session_id="s1", message=user("my card is 4111 1111"), provider=provider, **WHO)
    a = entries.append_message(
        session_id="s1",
        message=assistant("reading it", tool_args={"path": "/etc/zebrafile"}),
        provider=provider,
        **WHO,
    )
    label = tree.set_label(session_id="s1", target_id=u["id"], label="card", provider=provider, **WHO)
    tool = provider.append_message(
        "s1",
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read_file",
            "content": [{"type": "text", "text": "quokka contents"}],
            "isError": False,
        },
    )
    held = rows("s1")
    assert set(held) == {u["id"], a["id"], tool["id"]}  # the label holds no text
    assert label["id"] not in held
    assert (held[u["id"]].entry_type, held[u["id"]].role) == ("message", "user")
    assert held[tool["id"]].role == "toolResult" and "quokka" in held[tool["id"]].text
    assert found("4111") == [("s1", u["id"])]
    assert found("zebrafile") == [("s1", a["id"])]  # tool-call arguments are text
    assert found("read_file") == [("s1", a["id"])]  # the tool call's name; a result's tool name is no text


def test_bulk_appends_compactions_and_branch_summaries_are_indexed(provider):
    provider.create_session(session_id="s1")
    written = entries.append_entries(
        session_id="s1",
        entries=[{"type": "message", "message": user(f"walrus {i}")} for i in range(3)],
        provider=provider,
        **WHO,
    )
    summary = provider.append_branch_summary("s1", branch_from_entry_id=written[0]["id"], summary="narwhal talk")
    compaction = provider.append_compaction(
        "s1", summary="ocelot summary", first_kept_entry_id=written[0]["id"], tokens_before=5
    )
    assert [entry_id for _, entry_id in found("walrus")] == [e["id"] for e in reversed(written)]
    assert found("narwhal") == [("s1", summary["id"])]
    assert found("ocelot") == [("s1", compaction["id"])]
    assert rows("s1")[compaction["id"]].entry_type == "compaction"


def test_an_in_flight_entry_is_indexed_once_completed(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("start"))
    streaming = entries.begin_in_flight(
        session_id="s1", entry={"type": "message", "message": assistant("")}, provider=provider, **WHO
    )
    entries.update_in_flight(
        session_id="s1",
        entry_id=streaming["id"],
        patch={"message": assistant("half a platypus")},
        provider=provider,
        **WHO,
    )
    assert found("platypus") == []  # still streaming: it may change
    entries.update_in_flight(
        session_id="s1",
        entry_id=streaming["id"],
        patch={"message": assistant("a whole platypus")},
        complete=True,
        provider=provider,
        **WHO,
    )
    assert found("platypus") == [("s1", streaming["id"])]
    assert rows("s1")[streaming["id"]].text == "a whole platypus"
    aborted = provider.begin_in_flight_entry("s1", {"type": "message", "message": assistant("gone axolotl")})
    provider.abort_in_flight_entry("s1", aborted["id"])
    assert found("axolotl") == []


def test_forks_and_sessions_created_with_entries_index_their_copies(provider):
    provider.create_session(session_id="s1")
    first = provider.append_message("s1", user("the pangolin question"))
    provider.append_message("s1", assistant("the pangolin answer"))
    fork = tree.fork_session(
        session_id="s1", entry_id=first["id"], position="at", new_session_id="s1-fork", provider=provider, **WHO
    )
    assert fork["session_id"] == "s1-fork"
    assert sorted(found("pangolin")) == sorted(
        [("s1", first["id"]), ("s1", provider.list_entries("s1")[1]["id"]), ("s1-fork", first["id"])]
    )
    copied = [{**entry} for entry in provider.list_entries("s1")]
    provider.create_session(session_id="s2", entries=copied)
    assert {row for row in rows("s2")} == {entry["id"] for entry in copied}


def test_an_imported_session_is_indexed_with_its_entries(provider):
    header = {"type": "session", "version": 3, "id": "imported-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": ""}
    copied = [
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": user("capybara"),
        },
        {
            "type": "message",
            "id": "a2",
            "parentId": "a1",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": user("more"),
        },
    ]
    sessions.import_session(header=header, entries=copied, provider=provider, actor="sync", channel="sync")
    assert found("capybara") == [("imported-1", "a1")]


def test_a_hard_delete_removes_the_rows_a_soft_delete_keeps_them(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("armadillo"))
    sessions.delete_session(session_id="s1", provider=provider, **WHO)
    assert rows("s1")  # soft: restorable, still indexed (searches leave deleted sessions out by default)
    assert found("armadillo", statuses=["active", "archived"]) == []
    assert found("armadillo", statuses=["deleted"]) != []
    sessions.delete_session(session_id="s1", hard=True, provider=provider, **WHO)
    assert rows("s1") == {}


def test_a_write_that_fails_leaves_no_row(provider):
    provider.create_session(session_id="s1")

    def failing_audit(writer):
        raise RuntimeError("the audit insert failed")

    with pytest.raises(RuntimeError):
        provider.transact(
            "s1", lambda w: w.append({"type": "message", "message": user("tapir")}), before_commit=failing_audit
        )
    assert rows("s1") == {} and provider.list_entries("s1") == []


def test_reindex_entries_makes_the_rows_what_rewritten_entries_hold(provider):
    provider.create_session(session_id="s1")
    card = provider.append_message("s1", user("card 4111 1111 1111 1111"))
    other = provider.append_message("s1", user("other words"))
    before = rows("s1")[card["id"]].pk
    erased = {**card, "message": {**card["message"], "content": "[erased]"}}
    emptied = {**other, "message": {**other["message"], "content": ""}}
    from django.db import transaction

    with transaction.atomic():
        done = search_index.reindex_entries("s1", [erased, emptied], purge=True)
    assert done == {"updated": 1, "removed": 1}
    assert found("4111") == [] and found("other") == []
    assert found("erased") == [("s1", card["id"])]
    held = rows("s1")
    assert set(held) == {card["id"]} and held[card["id"]].pk == before  # the row keeps its place
    assert "4111" not in held[card["id"]].text


def test_reindex_search_builds_what_is_missing_and_is_idempotent(provider):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("gecko one"))
    b = provider.append_message("s1", user("gecko two"))
    SearchEntry.objects.filter(session_id="s1").delete()  # as before the index existed
    SearchEntry.objects.create(session_id="s1", entry_id="stale", entry_type="message", text="gecko stale")
    planned = provider.reindex_search("s1", dry_run=True)
    assert (planned.added, planned.updated, planned.removed) == (2, 0, 1)
    assert set(rows("s1")) == {"stale"}  # a dry run writes nothing
    done = provider.reindex_search("s1")
    assert (done.added, done.updated, done.removed) == (2, 0, 1)
    assert set(rows("s1")) == {a["id"], b["id"]}
    again = provider.reindex_search("s1")
    assert not again.changed


def test_index_rows_cap_the_text(settings):
    settings.SESSIONTREE_SEARCH_MAX_TEXT = 10
    row = search_index.index_row({"type": "message", "id": "x1", "message": user("0123456789abcdef")})
    assert row is not None and row.text == "0123456789"
    assert search_index.index_row({"type": "label", "id": "x2", "targetId": "x1", "label": "l"}) is None


def test_a_purge_leaves_no_byte_of_erased_text_in_the_fts5_tables(provider):
    from django.db import connection, transaction

    if connection.vendor != "sqlite":
        pytest.skip("FTS5 is SQLite's; InnoDB keeps deleted words until OPTIMIZE TABLE (docs/moderation.md)")
    provider.create_session(session_id="s1")
    for word in ("alpha", "beta", "gamma"):  # no digits: the card number's term is stored whole
        provider.append_message("s1", user(f"filler words {word}"))
    card = provider.append_message("s1", user("my card is 4111111111111111 ok"))

    def fts_holds_it() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT block FROM neta_search_fts_data")
            return any(b"4111111111111111" in bytes(row[0] or b"") for row in cursor.fetchall())

    assert found("4111111111111111") == [("s1", card["id"])]  # a search brings FTS5 up to the newest row
    assert fts_holds_it()
    erased = {**card, "message": {**card["message"], "content": "[erased]"}}
    with transaction.atomic():
        search_index.reindex_entries("s1", [erased])
    assert found("4111111111111111") == []  # gone from every query (the b-tree may keep it until a merge)
    with transaction.atomic():
        search_index.reindex_entries("s1", [erased], purge=True)
    assert not fts_holds_it()
