"""What only the mysql provider promises: rows, columns, queries, lineage.

Runs on whichever database the run uses (SQLite by default, MariaDB/MySQL
with ``DATABASE_URL``).
"""

from __future__ import annotations

import orjson
import pytest
from django.db import IntegrityError, OperationalError, connection, transaction

from sessiontree.core.errors import (
    CorruptSessionTree,
    EntryNotFound,
    ImmutableEntry,
    InvalidEntry,
    InvalidTree,
    SessionNotFound,
)
from sessiontree.core.path import get_path_to_leaf
from sessiontree.models import AgentSession, AgentSessionEntry
from sessiontree.providers import entry_rows, mysql_provider
from sessiontree.providers.file_provider import FileSessionTreeProvider
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider

from .lineage import assert_valid_lineage


@pytest.fixture
def provider(db):
    return MySQLSessionTreeProvider()


def user(text):
    return {"role": "user", "content": text}


def rows_of(session_id):
    return list(AgentSessionEntry.objects.filter(session__session_id=session_id).order_by("entry_seq"))


def as_json(entries):
    """Entries as the bytes Pi would write: equal only if keys, order and values are."""
    return [orjson.dumps(e) for e in entries]


# --- codec ----------------------------------------------------------------------


def test_known_keys_go_to_typed_columns_and_nothing_to_extra(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("hi"))
    provider.append_thinking_level_change("s1", "high")
    provider.append_model_change("s1", "openai", "gpt-x")
    provider.append_compaction("s1", summary="S", first_kept_entry_id=u["id"], tokens_before=12, details={"a": 1})
    provider.append_custom_entry("s1", "ext", {"k": 1})
    provider.append_custom_message("s1", "note", "shown", display=False)
    provider.append_label_change("s1", u["id"], "start")
    provider.append_session_info("s1", "Name")
    provider.append_branch_summary("s1", branch_from_entry_id=u["id"], summary="B", from_hook=True)
    message, thinking, model, compaction, custom, custom_message, label, info, summary = rows_of("s1")
    assert message.message == user("hi") and message.type == "message"
    assert thinking.thinking_level == "high"
    assert (model.provider, model.model_id) == ("openai", "gpt-x")
    assert (compaction.summary, compaction.first_kept_entry_id, compaction.tokens_before) == ("S", u["id"], 12)
    assert compaction.details == {"a": 1}
    assert (custom.custom_type, custom.data) == ("ext", {"k": 1})
    assert (custom_message.content, custom_message.display) == ("shown", False)
    assert (label.target_entry_id, label.label) == (u["id"], "start")
    assert info.name == "Name"
    # fromId: the leaf that was left, here the session_info entry
    assert (summary.from_id, summary.summary, summary.from_hook) == (info.entry_id, "B", True)
    for row in rows_of("s1"):
        assert row.extra["fields"] == {}, row.type  # every key has a column
        assert row.status == "completed"


def test_pi_1x_entries_round_trip_through_columns_and_extra(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", {"role": "user", "content": None})
    edit = provider.append_context_edit("s1", u["id"], {"content": [{"type": "text", "text": "é"}]})
    usage = provider.append_usage("s1", "cache_warm", "anthropic", "m", {"input": 1, "cost": {"total": 0.5}})
    system = {"role": "system", "content": "", "toolsAdded": [{"name": "read", "parameters": {}}], "timestamp": 3}
    compaction = provider.append_compaction(
        "s1", summary="S", first_kept_entry_id=None, tokens_before=2, usage={"input": 9}, system_message=system
    )
    rows = {row.entry_id: row for row in rows_of("s1")}
    assert rows[edit["id"]].target_entry_id == u["id"]
    assert rows[edit["id"]].extra["fields"] == {"replacement": {"content": [{"type": "text", "text": "é"}]}}
    assert (rows[usage["id"]].provider, rows[usage["id"]].model_id) == ("anthropic", "m")
    assert rows[compaction["id"]].first_kept_entry_id == compaction["id"]
    assert set(rows[compaction["id"]].extra["fields"]) == {"usage", "systemMessage"}
    assert provider.list_entries("s1") == [u, edit, usage, compaction]


def test_unknown_keys_key_order_and_absent_versus_null_survive(provider):
    provider.create_session(session_id="s1")
    u = provider.append_entry(
        "s1",
        {
            "type": "message",
            "message": {"z": 1, "role": "user", "a": {"y": None, "b": [3, 2]}, "content": "x"},
            "zeta": None,
            "sourceRuntime": "pi-0.58",
            "alpha": {"nested": True},
        },
    )
    custom_null = provider.append_entry("s1", {"type": "custom", "customType": "c", "data": None})
    custom_absent = provider.append_custom_entry("s1", "c")
    cleared = provider.append_label_change("s1", u["id"], None)
    info_null = provider.append_entry("s1", {"type": "session_info", "name": None})
    stored = provider.list_entries("s1")
    assert as_json(stored) == as_json([u, custom_null, custom_absent, cleared, info_null])
    assert list(stored[0]) == ["type", "id", "parentId", "timestamp", "message", "zeta", "sourceRuntime", "alpha"]
    assert list(stored[0]["message"]) == ["z", "role", "a", "content"]  # nested order too
    assert "data" in stored[1] and stored[1]["data"] is None
    assert "data" not in stored[2]
    assert "label" not in stored[3]
    assert "name" in stored[4] and stored[4]["name"] is None
    row = rows_of("s1")[0]
    assert row.extra["fields"] == {"zeta": None, "alpha": {"nested": True}}
    assert row.source_runtime == "pi-0.58"


def test_values_that_do_not_fit_their_column_are_kept_verbatim(provider):
    long_label = "l" * 300  # the column holds 255
    entries = [
        {"type": "message", "id": "a0000001", "parentId": None, "timestamp": "t", "message": user("x")},
        {"type": "label", "id": "a0000002", "parentId": "a0000001", "timestamp": 5, "targetId": "a0000001", "label": long_label},
        {"type": "compaction", "id": "a0000003", "parentId": "a0000002", "timestamp": "t", "summary": ["not", "text"],
         "firstKeptEntryId": "a0000001", "tokensBefore": 2**63, "fromHook": 1},
        {"type": "custom_message", "id": "a0000004", "parentId": "a0000003", "customType": "c", "content": "c",
         "display": "yes"},
        {"type": 7, "id": "a0000005", "parentId": "a0000004", "message": "odd"},
        {"type": "future_type", "id": "a0000006", "parentId": "a0000005", "payload": {"k": [1]}},
    ]  # fmt: skip
    provider.create_session(session_id="s1", entries=entries)
    assert as_json(provider.list_entries("s1")) == as_json(entries)
    label_row = rows_of("s1")[1]
    assert label_row.label is None and label_row.extra["fields"]["label"] == long_label
    assert rows_of("s1")[2].tokens_before is None


def test_codec_round_trip_without_a_database():
    entry = {"type": "custom_message", "id": "e1", "parentId": None, "customType": "t", "content": [{"x": 1}],
             "display": True, "details": None, "other": "kept"}  # fmt: skip
    values = entry_rows.encode_entry(entry)
    row = [values[name] for name in (*entry_rows.PAYLOAD_COLUMN_NAMES, "extra")]
    assert orjson.dumps(entry_rows.decode_row(row)) == orjson.dumps(entry)
    assert orjson.dumps(entry_rows.decode_row(row)) == orjson.dumps(entry)  # second time: the cached plan
    assert values["display"] is True and values["custom_type"] == "t"


def test_rows_written_without_the_codec_are_read_with_pi_key_order(provider):
    provider.create_session(session_id="s1")
    session = AgentSession.objects.get(session_id="s1")
    AgentSessionEntry.objects.create(
        session=session, entry_id="hand0001", entry_seq=1, type="model_change", timestamp="2026-01-01T00:00:00.000Z",
        provider="p", model_id="m", extra={},
    )  # fmt: skip
    assert provider.list_entries("s1") == [
        {"type": "model_change", "id": "hand0001", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "provider": "p", "modelId": "m"}
    ]  # fmt: skip


def test_a_value_that_is_not_json_is_refused_and_nothing_stored(provider):
    provider.create_session(session_id="s1")
    with pytest.raises(InvalidEntry, match="message"):
        provider.append_message("s1", {"role": "user", "content": {1, 2}})
    with pytest.raises(InvalidEntry, match="Unicode"):
        provider.append_session_info("s1", "bad \ud800 surrogate")
    assert provider.list_entries("s1") == []
    assert AgentSession.objects.get(session_id="s1").entry_count == 0


# --- entry_seq, depth, in-flight ------------------------------------------------


def test_entry_seq_is_gap_free_even_after_refused_appends(provider):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    with pytest.raises(InvalidEntry):
        provider.append_entry("s1", {"type": "message", "id": a["id"], "message": user("dup")})
    with pytest.raises(EntryNotFound):
        provider.append_label_change("s1", "missing", "x")
    provider.append_message("s1", user("b"))
    streaming = provider.begin_in_flight_entry(
        "s1", {"type": "message", "message": {"role": "assistant", "content": ""}}
    )
    provider.update_in_flight_entry(
        "s1", streaming["id"], {"message": {"role": "assistant", "content": "ok"}}, complete=True
    )
    provider.append_message("s1", user("c"))
    assert [r.entry_seq for r in rows_of("s1")] == [1, 2, 3, 4]
    assert AgentSession.objects.get(session_id="s1").entry_count == 4


def test_depth_is_stored_on_insert(provider):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    b = provider.append_message("s1", user("b"))
    provider.append_message("s1", user("c"))
    provider.switch_leaf("s1", b["id"])
    provider.append_message("s1", user("c2"))
    provider.reset_leaf("s1")
    provider.append_message("s1", user("new root"))
    provider.create_branched_session("s1", b["id"], new_session_id="fork")
    entries = provider.list_entries("s1")
    for row in rows_of("s1") + rows_of("fork"):
        session_entries = entries if row.session.session_id == "s1" else provider.list_entries("fork")
        assert row.depth == len(get_path_to_leaf(session_entries, row.entry_id)) - 1
    assert [r.depth for r in rows_of("s1")] == [0, 1, 2, 2, 0]
    assert a["id"] == rows_of("s1")[0].entry_id


def test_only_in_flight_rows_can_be_updated_even_by_sql(provider):
    provider.create_session(session_id="s1")
    done = provider.append_message("s1", user("done"))
    streaming = provider.begin_in_flight_entry(
        "s1", {"type": "message", "message": {"role": "assistant", "content": ""}}
    )
    assert [r.status for r in rows_of("s1")] == ["completed", "in_flight"]
    completed_row = rows_of("s1")[0]
    with connection.cursor() as cursor:
        cursor.execute(
            entry_rows.UPDATE_IN_FLIGHT_SQL,
            entry_rows.update_in_flight_params(completed_row.session_id, {**done, "message": user("rewritten")},
                                               status="completed", in_flight_status="in_flight"),
        )  # fmt: skip
        assert cursor.rowcount == 0
    assert provider.get_entry("s1", done["id"]) == done
    final = provider.update_in_flight_entry(
        "s1", streaming["id"], {"message": {"role": "assistant", "content": "x"}}, complete=True
    )
    with pytest.raises(ImmutableEntry):
        provider.update_in_flight_entry("s1", final["id"], {"message": {"role": "assistant", "content": "y"}})
    assert provider.list_entries("s1") == [done, final]
    assert [r.status for r in rows_of("s1")] == ["completed", "completed"]


def test_an_in_flight_root_becomes_the_root_when_completed(provider):
    provider.create_session(session_id="s1")
    streaming = provider.begin_in_flight_entry(
        "s1", {"type": "message", "message": {"role": "assistant", "content": ""}}
    )
    assert provider.get_session("s1")["root_entry_id"] is None
    provider.update_in_flight_entry("s1", streaming["id"], {}, complete=True)
    assert provider.get_session("s1")["root_entry_id"] == streaming["id"]


# --- bad input --------------------------------------------------------------------


def test_entries_of_another_session_are_never_reachable(provider):
    provider.create_session(session_id="s1")
    provider.create_session(session_id="s2")
    other = provider.append_message("s1", user("in s1"))
    mine = provider.append_message("s2", user("in s2"))
    before = (provider.list_entries("s2"), provider.get_session("s2"))
    with pytest.raises(InvalidEntry, match=other["id"]):
        provider.append_entry("s2", {"type": "message", "parentId": other["id"], "message": user("x")})
    with pytest.raises(EntryNotFound, match=other["id"]):
        provider.switch_leaf("s2", other["id"])
    with pytest.raises(EntryNotFound, match=other["id"]):
        provider.append_label_change("s2", other["id"], "x")
    with pytest.raises(EntryNotFound, match=other["id"]):
        provider.append_compaction("s2", summary="s", first_kept_entry_id=other["id"], tokens_before=1)
    with pytest.raises(EntryNotFound, match=other["id"]):
        provider.get_active_path("s2", other["id"])
    with pytest.raises(EntryNotFound, match=other["id"]):
        provider.get_entry("s2", other["id"])
    with pytest.raises(EntryNotFound, match=other["id"]):
        provider.update_in_flight_entry("s2", other["id"], {})
    with pytest.raises(EntryNotFound, match=other["id"]):
        provider.create_branched_session("s2", other["id"])
    assert (provider.list_entries("s2"), provider.get_session("s2")) == before
    assert provider.list_entries("s2") == [mine]


def test_sessions_of_the_other_provider_are_not_found(provider, tmp_path):
    file_provider = FileSessionTreeProvider(root=tmp_path / "files")
    file_provider.create_session(session_id="f1")
    provider.create_session(session_id="m1")
    with pytest.raises(SessionNotFound, match="file session"):
        provider.append_message("f1", user("x"))
    with pytest.raises(SessionNotFound):
        provider.list_entries("f1")
    assert provider.get_session("f1") is None
    assert file_provider.get_session("m1") is None


def test_copied_entries_need_unique_usable_ids_and_nothing_is_created_otherwise(provider):
    with pytest.raises(InvalidTree, match="dup00001"):
        provider.create_session(
            session_id="s1",
            entries=[
                {"type": "message", "id": "dup00001", "parentId": None, "message": user("a")},
                {"type": "message", "id": "dup00001", "parentId": None, "message": user("b")},
            ],
        )
    with pytest.raises(InvalidEntry):
        provider.create_session(session_id="s1", entries=[{"type": "message", "id": 5, "message": user("a")}])
    with pytest.raises(InvalidEntry):
        provider.create_session(session_id="s1", entries=["not an entry"])
    assert not AgentSession.objects.filter(session_id="s1").exists()
    assert not AgentSessionEntry.objects.exists()


def test_copied_orphans_act_as_roots_as_in_pi_files(provider):
    entries = [
        {"type": "message", "id": "a0000001", "parentId": None, "message": user("a")},
        {"type": "message", "id": "a0000002", "parentId": "gone0000", "message": user("orphan")},
        {"type": "message", "id": "a0000003", "parentId": "a0000002", "message": user("child")},
    ]
    provider.create_session(session_id="s1", entries=entries)
    assert [e["id"] for e in provider.get_active_path("s1")] == ["a0000002", "a0000003"]
    assert [r.depth for r in rows_of("s1")] == [0, 0, 1]


def test_a_cycle_in_stored_rows_is_corrupt_for_path_reads_and_never_hangs(provider):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    b = provider.append_message("s1", user("b"))
    c = provider.append_message("s1", user("c"))
    # Damage written behind the provider's back: a now hangs from b, b from a.
    AgentSessionEntry.objects.filter(session__session_id="s1", entry_id=a["id"]).update(parent_entry_id=b["id"])
    for read in [provider.get_active_path, provider.build_context, provider.get_snapshot]:
        with pytest.raises(CorruptSessionTree, match="Cycle detected"):
            read("s1")
    with pytest.raises(CorruptSessionTree, match="Cycle detected"):
        provider.create_branched_session("s1", c["id"])
    assert [e["id"] for e in provider.list_entries("s1")] == [a["id"], b["id"], c["id"]]  # still inspectable
    assert provider.get_session("s1")["leaf_entry_id"] == c["id"]


def test_a_generated_id_that_collides_is_replaced_silently(provider, monkeypatch):
    provider.create_session(session_id="s1")
    taken = provider.append_entry("s1", {"type": "message", "id": "aaaaaaaa", "message": user("a")})
    fresh = iter(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(mysql_provider, "new_entry_id", lambda *args: next(fresh))
    entry = provider.append_message("s1", user("b"))
    assert entry["id"] == "bbbbbbbb" and entry["parentId"] == taken["id"]
    assert provider.list_entries("s1") == [taken, entry]
    assert [r.entry_seq for r in rows_of("s1")] == [1, 2]


# --- queries per call -------------------------------------------------------------


def interleaved_entries(path_length):
    """A path whose entries are never adjacent in append order: each path
    entry is followed by a side entry hanging off it."""
    entries = []
    parent = None
    for i in range(path_length):
        entries.append({"type": "message", "id": f"p{i:07d}", "parentId": parent, "message": user(f"p{i}")})
        entries.append({"type": "message", "id": f"s{i:07d}", "parentId": f"p{i:07d}", "message": user(f"s{i}")})
        parent = f"p{i:07d}"
    return entries, parent


# Under the test's own transaction every provider write adds SAVEPOINT and
# RELEASE SAVEPOINT to its count.
SAVEPOINT = 2


def test_queries_per_call_do_not_grow_with_the_session(provider, django_assert_num_queries):
    provider.create_session(session_id="small")
    for i in range(10):
        provider.append_message("small", user(f"m{i}"))
    entries, leaf = interleaved_entries(900)  # 1,800 entries, path of 900
    provider.create_session(session_id="big", entries=entries)
    provider.switch_leaf("big", leaf)
    for session_id in ["small", "big"]:
        with django_assert_num_queries(4 + SAVEPOINT):  # lock (+ leaf), INSERT, UPDATE, the search index row
            provider.append_message(session_id, user("more"))
        leaf_id = provider.get_session(session_id)["leaf_entry_id"]
        with django_assert_num_queries(4 + SAVEPOINT):  # + the label's target (a label holds no text)
            provider.append_label_change(session_id, leaf_id, "l")
        with django_assert_num_queries(5 + SAVEPOINT):  # + the first kept entry, the summary's search row
            provider.append_compaction(session_id, summary="s", first_kept_entry_id=leaf_id, tokens_before=1)
        with django_assert_num_queries(3):  # session, skeleton, path payloads
            provider.get_active_path(session_id)
        with django_assert_num_queries(3):
            provider.build_context(session_id)
        with django_assert_num_queries(2):
            provider.list_entries(session_id)
        with django_assert_num_queries(2):
            provider.get_snapshot(session_id)
        with django_assert_num_queries(3 + SAVEPOINT):  # lock, target, UPDATE (the session: from the writer)
            provider.switch_leaf(session_id, leaf_id)


def test_a_path_read_decodes_only_the_path(provider, monkeypatch, django_assert_max_num_queries):
    entries, leaf = interleaved_entries(1500)  # 3,000 entries; path seqs 1, 3, 5…: no runs
    provider.create_session(session_id="big", entries=entries)
    provider.switch_leaf("big", leaf)
    decoded = []
    real_decode = entry_rows.decode_row
    monkeypatch.setattr(entry_rows, "decode_row", lambda row: decoded.append(1) or real_decode(row))
    with django_assert_max_num_queries(4):  # session, skeleton, two payload chunks of ≤1,000 ids
        path = provider.get_active_path("big")
    assert [e["id"] for e in path] == [f"p{i:07d}" for i in range(1500)]
    assert len(decoded) == 1500
    decoded.clear()
    context = provider.build_context("big", "p0000009")
    assert len(decoded) == 10 and len(context["messages"]) == 10


# --- transactions -------------------------------------------------------------------


def test_transient_lock_errors_are_retried(transactional_db, monkeypatch):
    provider = MySQLSessionTreeProvider()
    provider.create_session(session_id="s1")
    real_lock = mysql_provider._lock
    failures = iter([OperationalError(1213, "Deadlock found"), OperationalError(1205, "Lock wait timeout")])

    def flaky_lock(session_id):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real_lock(session_id)

    monkeypatch.setattr(mysql_provider, "_lock", flaky_lock)
    monkeypatch.setattr(mysql_provider, "RETRY_BASE_SECONDS", 0)
    entry = provider.append_message("s1", user("after two retries"))
    assert provider.list_entries("s1") == [entry]


def test_other_errors_and_errors_inside_a_caller_transaction_are_not_retried(transactional_db, monkeypatch):
    provider = MySQLSessionTreeProvider()
    provider.create_session(session_id="s1")
    calls = []

    def failing_lock(session_id):
        calls.append(session_id)
        raise OperationalError(1213, "Deadlock found")

    monkeypatch.setattr(mysql_provider, "_lock", failing_lock)
    monkeypatch.setattr(mysql_provider, "RETRY_BASE_SECONDS", 0)
    with pytest.raises(OperationalError), transaction.atomic():
        provider.append_message("s1", user("x"))
    assert len(calls) == 1  # the caller's transaction is gone: only the caller can retry
    calls.clear()
    with pytest.raises(OperationalError):
        provider.append_message("s1", user("x"))
    assert len(calls) == mysql_provider.RETRY_ATTEMPTS
    calls.clear()
    monkeypatch.setattr(
        mysql_provider, "_lock", lambda sid: calls.append(sid) or (_ for _ in ()).throw(
            IntegrityError("not a lock conflict"))
    )  # fmt: skip
    with pytest.raises(IntegrityError):
        provider.append_message("s1", user("x"))
    assert len(calls) == 1


# --- lineage --------------------------------------------------------------------------


def test_forks_form_a_lineage_tree(provider):
    provider.create_session(session_id="src")
    a = provider.append_message("src", user("a"))
    provider.append_message("src", user("b"))
    provider.create_branched_session("src", a["id"], new_session_id="f1")
    provider.create_branched_session("f1", a["id"], new_session_id="f1a")
    provider.create_branched_session("src", None, new_session_id="f2")
    provider.create_session(session_id="other")
    src = AgentSession.objects.get(session_id="src")
    assert {s.session_id for s in src.get_descendants()} == {"f1", "f1a", "f2"}
    assert [s.session_id for s in AgentSession.objects.get(session_id="f1a").get_ancestors()] == ["src", "f1"]
    assert provider.get_session("f1a")["parent_session_id"] == "f1"
    assert_valid_lineage()


def test_hard_delete_cascades_entries_and_keeps_the_lineage_valid(provider):
    provider.create_session(session_id="src")
    a = provider.append_message("src", user("a"))
    provider.create_session(session_id="before")
    provider.create_branched_session("src", a["id"], new_session_id="f1")
    provider.create_branched_session("f1", a["id"], new_session_id="f1a")
    provider.create_branched_session("src", a["id"], new_session_id="f2")
    provider.create_session(session_id="after")
    provider.delete_session("src")  # soft: everything stays
    assert len(rows_of("src")) == 1
    provider.delete_session("src", hard=True)
    assert provider.get_session("src") is None
    assert not AgentSessionEntry.objects.filter(session__session_id="src").exists()
    assert len(rows_of("f1")) == 1  # forks keep their own copies
    f1 = AgentSession.objects.get(session_id="f1")
    assert f1.parent is None and f1.parent_session_id == "src"
    assert [s.session_id for s in f1.get_descendants()] == ["f1a"]
    assert AgentSession.objects.get(session_id="f2").is_root_node()
    assert_valid_lineage()
    provider.delete_session("f1", hard=True)
    assert AgentSession.objects.get(session_id="f1a").is_root_node()
    assert_valid_lineage()


def test_header_is_kept_whole(provider):
    session = provider.create_session(session_id="s1", cwd="/w", header_extra={"provider": "anthropic", "x": [1]})
    header = provider.get_header("s1")
    assert header["type"] == "session" and header["version"] == 3 and header["id"] == "s1"
    assert header["cwd"] == "/w" and header["provider"] == "anthropic" and header["x"] == [1]
    assert header["timestamp"].endswith("Z")
    provider.create_branched_session("s1", None, new_session_id="s2")
    assert provider.get_header("s2")["parentSession"] == "s1"
    assert session["provider"] == "mysql"


# --- the leaf cache on the session row ------------------------------------------------


def assert_leaf_cache_is_true(session_id):
    """The row's cached leaf facts equal what the leaf's own row says."""
    row = AgentSession.objects.get(session_id=session_id)
    if row.leaf_entry_id is None:
        assert row.leaf_depth is None
        return
    leaf = AgentSessionEntry.objects.get(session=row, entry_id=row.leaf_entry_id)
    has_children = AgentSessionEntry.objects.filter(session=row, parent_entry_id=row.leaf_entry_id).exists()
    assert (row.leaf_depth, row.leaf_in_flight, row.leaf_has_children) == (
        leaf.depth,
        leaf.status == "in_flight",
        has_children,
    )


def test_the_leaf_cache_follows_every_kind_of_write(provider):
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    assert_leaf_cache_is_true("s1")
    provider.append_message("s1", user("b"))
    provider.switch_leaf("s1", a["id"])  # a leaf with children
    assert_leaf_cache_is_true("s1")
    provider.append_message("s1", user("sibling"))
    assert_leaf_cache_is_true("s1")
    provider.reset_leaf("s1")
    assert_leaf_cache_is_true("s1")
    streaming = provider.begin_in_flight_entry("s1", {"type": "message", "message": user("")})
    assert_leaf_cache_is_true("s1")
    provider.update_in_flight_entry("s1", streaming["id"], {}, complete=True)
    assert_leaf_cache_is_true("s1")
    provider.append_branch_summary("s1", branch_from_entry_id=a["id"], summary="s")
    assert_leaf_cache_is_true("s1")
    fork = provider.create_branched_session("s1", a["id"])
    assert_leaf_cache_is_true(fork["session_id"])
    assert provider.get_session("s1")["branch_count"] == len(
        [r for r in rows_of("s1") if not AgentSessionEntry.objects.filter(parent_entry_id=r.entry_id).exists()]
    )


def test_a_leaf_moved_outside_the_storage_is_read_from_its_row(provider):
    """An uncached leaf (``leaf_depth`` NULL: set by anything that moves the
    leaf outside the storage, e.g. refresh_session) is read from the leaf's
    own row by the next write, which caches it again."""
    provider.create_session(session_id="s1")
    a = provider.append_message("s1", user("a"))
    b = provider.append_message("s1", user("b"))
    provider.append_message("s1", user("c"))
    AgentSession.objects.filter(session_id="s1").update(leaf_entry_id=b["id"], leaf_depth=None)
    d = provider.append_message("s1", user("d, a sibling of c"))
    assert d["parentId"] == b["id"]
    assert rows_of("s1")[-1].depth == 2
    assert provider.get_session("s1")["branch_count"] == 2  # b had a child already
    assert_leaf_cache_is_true("s1")
    assert a["parentId"] is None


def test_a_path_of_many_separate_runs_is_read_on_every_database(provider):
    """A long path broken into more than 1,000 runs of entry_seq (a side entry
    after every second path entry) is read in full: SQLite refused the one
    statement of 1,000 ORed ranges ("Expression tree is too large")."""
    entries = []
    parent = None
    for i in range(1200):
        for half in ("a", "b"):
            entry_id = f"{half}{i:07d}"
            entries.append({"type": "message", "id": entry_id, "parentId": parent, "message": user(entry_id)})
            parent = entry_id
        entries.append({"type": "message", "id": f"s{i:07d}", "parentId": parent, "message": user("side")})
    provider.create_session(session_id="runs", entries=entries)
    provider.switch_leaf("runs", parent)
    path = provider.get_active_path("runs")
    assert len(path) == 2400 and path[-1]["id"] == parent
