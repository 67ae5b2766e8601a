"""Reads cost what they return (issue 23): the context at a leaf, an entry,
read with a fixed number of statements whatever the session's history, on
every provider; the context equals the one built from the whole path."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.core.context_builder import build_context_from_path
from sessiontree.models import AgentSessionEntry
from tests.contract.conftest import PROVIDER_KINDS, make_provider

EVERY = 400  # a compaction every 400 entries, keeping the last ~140


def long_session(count: int) -> list[dict]:
    """A long agent conversation: messages, a thinking level set once at the
    start, a model change now and then, a compaction every ``EVERY``
    entries, a side branch every 50 entries."""
    entries: list[dict] = []
    parent = None
    for i in range(count):
        entry_id = f"{i:08x}"
        base = {"id": entry_id, "parentId": parent, "timestamp": "2026-04-19T00:00:00.000Z"}
        if i == 1:
            entry = {**base, "type": "thinking_level_change", "thinkingLevel": "high"}
        elif i % 100 == 7:
            entry = {**base, "type": "model_change", "provider": "p", "modelId": f"m{i}"}
        elif i and i % EVERY == 0:
            entry = {
                **base,
                "type": "compaction",
                "summary": f"s{i}",
                "firstKeptEntryId": f"{i - 140:08x}",
                "tokensBefore": i,
            }
        elif i % 50 == 25:
            # a side entry off the previous one: not on the main path
            entry = {**base, "parentId": entries[-2]["id"] if len(entries) > 1 else parent, "type": "message"}
            entry["message"] = {"role": "user", "content": f"side {i}"}
            entries.append(entry)
            continue
        else:
            role = "user" if i % 2 else "assistant"
            entry = {**base, "type": "message", "message": {"role": role, "content": f"m{i}", "model": "x"}}
        entries.append(entry)
        parent = entry_id
    return entries


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


def statements(read) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as captured:
        result = read()
    return len(captured.captured_queries), result


def test_context_and_entry_reads_do_not_grow_with_the_history(provider):
    counts = {}
    for size in (50, 2000):
        sid = f"s{size}"
        entries = long_session(size)
        provider.create_session(session_id=sid, entries=entries)
        leaf = provider.get_session(sid)["leaf_entry_id"]
        path = provider.get_active_path(sid)
        context_count, context = statements(lambda sid=sid: provider.build_context(sid))
        assert context == build_context_from_path(path)
        middle = path[len(path) // 2]["id"]
        at_middle_count, at_middle = statements(lambda sid=sid, middle=middle: provider.build_context(sid, middle))
        assert at_middle == build_context_from_path(provider.get_active_path(sid, middle))
        entry_count, entry = statements(lambda sid=sid, leaf=leaf: provider.get_entry(sid, leaf))
        assert entry["id"] == leaf
        # an append (the facts come from the parent's row) and the context after it
        provider.append_message(sid, {"role": "assistant", "content": "more", "provider": "q", "model": "z"})
        after_count, after = statements(lambda sid=sid: provider.build_context(sid))
        assert after == build_context_from_path(provider.get_active_path(sid))
        assert after["model"] == {"provider": "q", "modelId": "z"} and after["thinking_level"] == "high"
        counts[size] = (context_count, at_middle_count, entry_count, after_count)
    assert counts[50] == counts[2000], counts
    if provider.kind == "mysql":
        assert counts[2000][0] == 3  # the session, the leaf with what its facts name, the segment


def test_the_context_reads_only_the_kept_segment(provider, monkeypatch):
    if provider.kind != "mysql":
        pytest.skip("counts the mysql provider's decoded rows")
    from sessiontree.providers import entry_rows

    provider.create_session(session_id="big", entries=long_session(2000))
    decoded = []
    real_decode = entry_rows.decode_row
    monkeypatch.setattr(entry_rows, "decode_row", lambda row: decoded.append(1) or real_decode(row))
    context = provider.build_context("big")
    # The last compaction (1600) keeps from 1460: ~540 path entries, plus the
    # compaction and the thinking change far above, never the whole history.
    assert len(decoded) < 600
    assert context["thinking_level"] == "high"


def test_a_streaming_leaf_and_its_completion_keep_the_facts_right(provider):
    provider.create_session(session_id="s", entries=long_session(450))
    started = provider.begin_in_flight_entry("s", {"type": "message", "message": {"role": "user", "content": "…"}})
    streaming = provider.build_context("s")
    assert streaming == build_context_from_path(provider.get_active_path("s"))
    # It completes as an assistant's message: it sets the model from now on.
    done = {"role": "assistant", "content": "done", "provider": "late", "model": "m"}
    provider.update_in_flight_entry("s", started["id"], {"message": done}, complete=True)
    provider.append_message("s", {"role": "user", "content": "next"})
    context = provider.build_context("s")
    assert context == build_context_from_path(provider.get_active_path("s"))
    assert context["model"] == {"provider": "late", "modelId": "m"}


def test_rows_without_facts_read_the_whole_path(provider):
    if provider.kind != "mysql":
        pytest.skip("rows written without the facts exist only in the database")
    provider.create_session(session_id="s", entries=long_session(900))
    expected = provider.build_context("s")
    AgentSessionEntry.objects.filter(session__session_id="s").update(path_exact=False, path_compaction_id=None)
    count, context = statements(lambda: provider.build_context("s"))
    assert context == expected
    assert count > 3  # the fallback: the skeleton and the path's payloads


def test_the_migration_fills_the_facts_of_existing_rows(db, tmp_path):
    """0018_entry_path_facts gives rows written before it the facts an append would have."""
    from importlib import import_module
    from types import SimpleNamespace

    from django.apps import apps

    provider = make_provider("mysql", tmp_path)
    provider.create_session(session_id="old", entries=long_session(900))
    started = provider.begin_in_flight_entry("old", {"type": "message", "message": {"role": "user", "content": "…"}})
    done = {"role": "assistant", "content": "done", "provider": "late", "model": "m"}
    provider.update_in_flight_entry("old", started["id"], {"message": done}, complete=True)
    provider.append_entry("old", {"type": "thinking_level_change", "thinkingLevel": "low"})
    provider.append_message("old", {"role": "user", "content": "after"})
    columns = ["entry_id", "depth", "path_compaction_id", "path_model_id", "path_thinking_id", "path_exact"]
    rows = AgentSessionEntry.objects.filter(session__session_id="old")
    written = list(rows.order_by("entry_seq").values_list(*columns))
    assert all(row[-1] for row in written)
    rows.update(path_compaction_id=None, path_model_id=None, path_thinking_id=None, path_exact=False)
    import_module("sessiontree.migrations.0018_entry_path_facts").fill_facts(
        apps, SimpleNamespace(connection=connection)
    )
    assert list(rows.order_by("entry_seq").values_list(*columns)) == written


def test_a_segment_longer_than_a_recursive_statement_is_read_by_key(provider, monkeypatch):
    """A context of 2,500 path entries (no compaction): MariaDB stops a
    recursive statement silently after 1,000 steps by default, so the segment
    is walked in several statements, never through the whole skeleton."""
    if provider.kind != "mysql":
        pytest.skip("the mysql provider's statements")
    from sessiontree.providers import mysql_provider

    entries = [e for e in long_session(2500) if e["type"] != "compaction"]
    chain: list[dict] = []
    for entry in entries:  # one line: each entry's parent is the one before it
        chain.append({**entry, "parentId": chain[-1]["id"] if chain else None})
    provider.create_session(session_id="deep", entries=chain)
    expected = build_context_from_path(provider.get_active_path("deep"))

    def no_skeleton(*args, **kwargs):
        raise AssertionError("the whole skeleton was read")

    monkeypatch.setattr(mysql_provider, "_skeleton", no_skeleton)
    count, context = statements(lambda: provider.build_context("deep"))
    assert context == expected and len(context["messages"]) > 2000
    assert count <= 3 + 2500 // mysql_provider.WALK_STEPS


def test_a_window_of_thousands_of_entries_is_read_by_id(provider, monkeypatch):
    """The tree page's window asks for a few thousand payloads of a long
    session (its rows and the first entries of folded branches): they are
    read by id, in statements of at most 2,000, not by reading the whole
    skeleton first (which made the mysql tree page cost the session's
    history once a window wanted more than 2,000). A request for more than a
    tenth of the session still goes through the skeleton."""
    if provider.kind != "mysql":
        pytest.skip("the mysql provider's statements")
    from sessiontree.providers import mysql_provider

    entries = long_session(30_000)
    provider.create_session(session_id="wide", entries=entries)
    wanted = [entry["id"] for entry in entries[-2_500:]]
    loaded = mysql_provider._skeleton

    def no_skeleton(*args, **kwargs):
        raise AssertionError("the whole skeleton was read")

    monkeypatch.setattr(mysql_provider, "_skeleton", no_skeleton)
    with provider.read("wide") as view:
        count, found = statements(lambda: view.entries(wanted))
    assert [entry["id"] for entry in found] == wanted
    assert found == entries[-2_500:]
    assert count == 2  # 2,000 ids, then 500
    monkeypatch.setattr(mysql_provider, "_skeleton", loaded)
    with provider.read("wide") as view:
        many = [entry["id"] for entry in entries[:4_000]]
        assert [entry["id"] for entry in view.entries(many)] == many
