"""What only the file provider promises: Pi's JSONL protocol on disk."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pytest
from django.db import connections

from sessiontree.core.errors import CorruptSessionTree, InvalidSessionId, SessionAlreadyExists
from sessiontree.core.path import get_path_to_leaf
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.providers import file_sidecar
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache


@pytest.fixture
def provider(db, tmp_path):
    clear_index_cache()
    return FileSessionTreeProvider(root=tmp_path / "sessions")


def read_lines(path):
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]


def test_one_jsonl_file_with_the_header_first(provider):
    session = provider.create_session(session_id="s1", cwd="C:/workspace")
    provider.append_message("s1", {"role": "user", "content": "hello"})
    lines = read_lines(session["session_file"])
    assert lines[0]["type"] == "session" and lines[0]["version"] == 3
    assert lines[0]["id"] == "s1" and lines[0]["cwd"] == "C:/workspace"
    assert lines[1]["type"] == "message" and lines[1]["parentId"] is None
    assert sorted(os.listdir(provider.root)) == [file_sidecar.FOLDER, "s1.jsonl"]  # never a second file
    assert os.listdir(provider.root / file_sidecar.FOLDER) == ["s1.jsonl.idx"]  # but the file's index


def test_an_append_adds_exactly_one_line_and_rewrites_nothing(provider):
    session = provider.create_session(session_id="s1")
    for i in range(5):
        provider.append_message("s1", {"role": "user", "content": f"m{i}"})
    path = session["session_file"]
    before = Path(path).read_bytes()
    inode = os.stat(path).st_ino
    entry = provider.append_message("s1", {"role": "user", "content": "last"})
    after = Path(path).read_bytes()
    assert after.startswith(before)
    assert after[len(before) :] == serialize_line(entry)
    assert os.stat(path).st_ino == inode


def test_a_torn_last_line_never_swallows_the_next_entry(provider):
    session = provider.create_session(session_id="s1")
    first = provider.append_message("s1", {"role": "user", "content": "first"})
    with open(session["session_file"], "ab") as f:
        f.write(b'{"type":"message","id":"torn0001","parentId":')  # a writer died here
    clear_index_cache()
    assert provider.list_entries("s1") == [first]
    second = provider.append_message("s1", {"role": "user", "content": "second"})
    clear_index_cache()
    assert provider.list_entries("s1") == [first, second]
    assert second["parentId"] == first["id"]


def test_appends_from_elsewhere_are_read_from_the_tail(provider):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", {"role": "user", "content": "a"})
    assert provider.list_entries("s1") == [a]  # cached now
    foreign = {
        "type": "custom",
        "id": "ext00001",
        "parentId": a["id"],
        "timestamp": "2026-01-01T00:00:00.000Z",
        "customType": "x",
    }
    with open(session["session_file"], "ab") as f:
        f.write(serialize_line(foreign))
    assert provider.list_entries("s1") == [a, foreign]
    # The file is the truth: a foreign writer's entry (Pi's own append) is the
    # leaf now, as Pi decides on load, and the next append hangs from it.
    assert provider.get_session("s1")["leaf_entry_id"] == foreign["id"]
    assert provider.get_session("s1")["entry_count"] == 2
    b = provider.append_message("s1", {"role": "user", "content": "b"})
    assert b["parentId"] == foreign["id"]


def test_v1_pi_file_is_migrated_once_and_ids_stay_stable(provider):
    path = provider.root / "pi1.jsonl"
    lines = [
        {"type": "session", "id": "pi1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w", "provider": "anthropic"},
        {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": {"role": "user", "content": "a"}},
        {
            "type": "message",
            "timestamp": "2025-01-01T00:00:02.000Z",
            "message": {"role": "hookMessage", "content": "h"},
        },
        {
            "type": "compaction",
            "timestamp": "2025-01-01T00:00:03.000Z",
            "summary": "s",
            "firstKeptEntryIndex": 2,
            "tokensBefore": 9,
        },
    ]
    path.write_bytes(b"".join(serialize_line(x) for x in lines))
    session = provider.register_existing_file("pi1")
    entries = provider.list_entries("pi1")
    assert [e["type"] for e in entries] == ["message", "message", "compaction"]
    assert entries[1]["message"]["role"] == "custom"
    assert entries[2]["firstKeptEntryId"] == entries[1]["id"]
    assert session["leaf_entry_id"] == entries[-1]["id"]
    assert get_path_to_leaf(entries, entries[-1]["id"]) == entries
    header = read_lines(path)[0]
    assert header["version"] == 3 and header["provider"] == "anthropic"
    clear_index_cache()
    assert provider.list_entries("pi1") == entries  # rewritten once: same ids after a reload


def test_a_file_without_header_is_not_a_session(provider):
    (provider.root / "bad.jsonl").write_bytes(b'{"type":"message","id":"x"}\n')
    with pytest.raises(CorruptSessionTree, match="not a Pi session file"):
        provider.register_existing_file("bad")
    assert (provider.root / "bad.jsonl").read_bytes() == b'{"type":"message","id":"x"}\n'


def test_duplicate_ids_in_a_file_are_reported_not_merged(provider):
    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", {"role": "user", "content": "a"})
    with open(session["session_file"], "ab") as f:
        f.write(serialize_line({**a, "message": {"role": "user", "content": "evil twin"}}))
    clear_index_cache()
    with pytest.raises(CorruptSessionTree, match=a["id"]):
        provider.list_entries("s1")


def test_existing_file_blocks_creation(provider):
    (provider.root / "taken.jsonl").write_bytes(b"precious\n")
    with pytest.raises(SessionAlreadyExists):
        provider.create_session(session_id="taken")
    assert (provider.root / "taken.jsonl").read_bytes() == b"precious\n"


def test_path_traversal_is_impossible(provider, tmp_path):
    with pytest.raises(InvalidSessionId):
        provider.path_for("../../etc/passwd")
    with pytest.raises(InvalidSessionId):
        provider.create_session(session_id="../outside")
    assert not (tmp_path / "outside.jsonl").exists()
    assert provider.path_for("ok-id_1.2").parent == provider.root.resolve()


def test_in_flight_entry_stays_out_of_the_file_until_completed(provider):
    session = provider.create_session(session_id="s1")
    provider.append_message("s1", {"role": "user", "content": "q"})
    size = os.path.getsize(session["session_file"])
    streaming = provider.begin_in_flight_entry(
        "s1", {"type": "message", "message": {"role": "assistant", "content": ""}}
    )
    for part in ["a", "ab", "abc"]:
        provider.update_in_flight_entry("s1", streaming["id"], {"message": {"role": "assistant", "content": part}})
    assert os.path.getsize(session["session_file"]) == size
    provider.update_in_flight_entry("s1", streaming["id"], {}, complete=True)
    last = read_lines(session["session_file"])[-1]
    assert last["id"] == streaming["id"] and last["message"]["content"] == "abc"


def test_fsync_setting(provider, settings, tmp_path):
    settings.SESSIONTREE_FSYNC = "always"
    assert FileSessionTreeProvider(root=tmp_path / "x").fsync is True
    settings.SESSIONTREE_FSYNC = "never"
    assert FileSessionTreeProvider(root=tmp_path / "x").fsync is False


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_form_one_chain(tmp_path):
    clear_index_cache()
    provider = FileSessionTreeProvider(root=tmp_path / "sessions")
    provider.create_session(session_id="busy")
    errors: list[BaseException] = []

    def worker(n):
        try:
            for i in range(25):
                provider.append_message("busy", {"role": "user", "content": f"{n}-{i}"})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    clear_index_cache()
    entries = provider.list_entries("busy")
    assert len(entries) == 100
    # serialized: every entry hangs from the one appended just before it
    assert [e["parentId"] for e in entries] == [None] + [e["id"] for e in entries[:-1]]
    assert provider.get_session("busy")["leaf_entry_id"] == entries[-1]["id"]


def test_hard_delete_removes_the_file_even_when_it_is_corrupt(provider):
    session = provider.create_session(session_id="s1")
    fork = provider.create_branched_session("s1", None, new_session_id="child")
    with open(session["session_file"], "wb") as f:
        f.write(b"garbage, not a session\n")
    provider.delete_session("s1", hard=True)
    assert provider.get_session("s1") is None
    assert not os.path.exists(session["session_file"])
    # the fork survives, detached from the lineage tree but still naming its source
    assert provider.get_session("child")["parent_session_id"] == "s1"
    assert provider.list_entries(fork["session_id"]) == []


def test_growth_is_read_from_the_tail_only_and_an_append_reads_nothing(provider, monkeypatch):
    from sessiontree.core.session_reader import SessionReader

    session = provider.create_session(session_id="s1")
    for i in range(20):
        provider.append_message("s1", {"role": "user", "content": f"m{i}"})
    assert len(provider.list_entries("s1")) == 20  # cached now
    parsed: list[bytes] = []
    real_feed = SessionReader.feed

    def feed(reader, data, **options):
        parsed.append(bytes(data))
        return real_feed(reader, data, **options)

    # Every read of a session file's bytes goes through the one reader.
    monkeypatch.setattr(SessionReader, "feed", feed)
    # O(1) appends: no re-read of the file, whatever its length
    provider.append_message("s1", {"role": "user", "content": "mine"})
    assert parsed == []
    foreign = {"type": "custom", "id": "ext00001", "parentId": None, "timestamp": "t", "customType": "x"}
    with open(session["session_file"], "ab") as f:
        f.write(serialize_line(foreign))
    assert provider.list_entries("s1")[-1] == foreign
    assert parsed == [serialize_line(foreign)]  # just the appended tail


def test_a_cold_context_read_moves_the_loaded_index_to_the_oldest_generation(provider):
    """Regression: ``build_context`` pauses the collector around the storage's
    load, and the load's own promotion of what it decoded was dropped, so the
    first collection afterwards walked the whole new index (200 ms of a
    fresh process's 700 at 100,000 entries, bench/bench_vs_pi.py)."""
    import gc

    provider.create_session(session_id="s1")
    for i in range(5):
        provider.append_message("s1", {"role": "user", "content": f"m{i}"})
    clear_index_cache()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    provider.build_context("s1")
    entry = provider.list_entries("s1")[0]  # the cached index's own entry
    assert any(obj is entry for obj in gc.get_objects(generation=2))


def test_a_line_written_without_our_lock_between_refresh_and_append_is_not_lost(provider, monkeypatch):
    """Pi appends without taking our lock: a line it writes after our refresh
    and before our own line must still be read afterwards."""
    from sessiontree.providers import template as module  # encodes every entry before the write

    session = provider.create_session(session_id="s1")
    a = provider.append_message("s1", {"role": "user", "content": "a"})
    foreign = {
        "type": "custom",
        "id": "pi000001",
        "parentId": a["id"],
        "timestamp": "2026-01-01T00:00:00.000Z",
        "customType": "pi",
    }
    real_encode = module.encode_entry_line

    def racing_encode(entry):
        with open(session["session_file"], "ab") as f:  # the foreign writer gets in after our refresh
            f.write(serialize_line(foreign))
        return real_encode(entry)

    monkeypatch.setattr(module, "encode_entry_line", racing_encode)
    b = provider.append_message("s1", {"role": "user", "content": "b"})
    monkeypatch.setattr(module, "encode_entry_line", real_encode)
    assert provider.list_entries("s1") == [a, foreign, b]


# --- where a session's file is: remembered, confirmed by the row under the lock ---


def test_a_write_locks_the_remembered_file_and_reads_the_row_once(provider, django_assert_num_queries):
    provider.create_session(session_id="s1")
    provider.append_message("s1", {"role": "user", "content": "one"})
    # the row under the lock, SAVEPOINT, UPDATE, the search index row, RELEASE
    with django_assert_num_queries(5):
        provider.append_message("s1", {"role": "user", "content": "two"})


def test_a_stale_remembered_file_is_never_written(provider, tmp_path):
    """The row read under the lock names the session's file; a write that
    locked another one starts again on it (a session re-created elsewhere)."""
    from sessiontree.providers import file_provider

    session = provider.create_session(session_id="s1")
    stray = tmp_path / "elsewhere" / "s1.jsonl"
    stray.parent.mkdir()
    stray.write_bytes(Path(session["session_file"]).read_bytes())
    file_provider._remember_path("s1", stray)
    before = stray.read_bytes()

    entry = provider.append_message("s1", {"role": "user", "content": "hello"})

    assert stray.read_bytes() == before
    assert read_lines(session["session_file"])[-1]["id"] == entry["id"]
    assert file_provider._known_path("s1") == Path(session["session_file"])


def test_a_remembered_file_that_is_gone_is_looked_up_again(provider, tmp_path):
    from sessiontree.core.errors import SessionNotFound
    from sessiontree.providers import file_provider

    session = provider.create_session(session_id="s1")
    file_provider._remember_path("s1", tmp_path / "gone" / "s1.jsonl")
    entry = provider.append_message("s1", {"role": "user", "content": "hello"})
    assert read_lines(session["session_file"])[-1]["id"] == entry["id"]
    file_provider._remember_path("nope", tmp_path / "gone" / "nope.jsonl")
    with pytest.raises(SessionNotFound, match="Session nope not found"):
        provider.append_message("nope", {"role": "user", "content": "x"})


# --- cutting a torn last line (the repair's storage step) -----------------------------


def tear(provider, session_id: str) -> Path:
    path = Path(provider.get_session(session_id)["session_file"])
    with path.open("ab") as handle:
        handle.write(b'{"type":"message","id":"tor')
    return path


def test_a_torn_tail_is_cut_after_a_backup_with_the_callers_writes_in_the_same_unit(provider):
    from sessiontree.providers import file_provider

    provider.create_session(session_id="s1")
    kept = provider.append_message("s1", {"role": "user", "content": "kept"})
    provider.create_session(session_id="s2")
    provider.list_entries("s2")  # parsed and cached
    path = tear(provider, "s1")
    torn = path.read_bytes()
    seen = []

    cut = provider.cut_torn_tail("s1", before_commit=seen.append)

    assert seen == [cut] and cut.cut_bytes == len(b'{"type":"message","id":"tor')
    assert Path(cut.backup).read_bytes() == torn and Path(cut.backup).name == cut.backup_name
    assert path.read_bytes() == torn[: -cut.cut_bytes]
    assert str(path) not in file_provider._cache  # this file's parse is dropped, the others' kept
    assert str(path.with_name("s2.jsonl")) in file_provider._cache
    assert provider.list_entries("s1") == [kept]
    assert provider.cut_torn_tail("s1") is None  # nothing torn any more


def test_a_failing_before_commit_leaves_the_torn_file_as_it_was(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", {"role": "user", "content": "kept"})
    path = tear(provider, "s1")
    torn = path.read_bytes()

    def refuse(_cut):
        raise RuntimeError("audit failed")

    with pytest.raises(RuntimeError):
        provider.cut_torn_tail("s1", before_commit=refuse)
    assert path.read_bytes() == torn


@pytest.mark.parametrize("odd_parent", [["e1"], {"id": "e1"}, 7, True])
def test_a_parent_id_that_is_not_a_string_makes_a_root_as_in_pi(provider, odd_parent):
    """Pi 1.6.0 looks a ``parentId`` up as a key: a list, an object, a number
    names no entry, so that entry starts a tree of its own (Pi's context at
    ``e3`` of this file holds e2 and e3). Every read of ours used to fail
    with an untyped ``TypeError`` (an unhashable parent looked up in the
    index), leaving the cached index half extended."""
    header = {"type": "session", "version": 3, "id": "odd1", "timestamp": "2026-04-19T00:00:00.000Z", "cwd": "/"}
    lines = [
        header,
        {
            "type": "message",
            "id": "e1",
            "parentId": None,
            "timestamp": header["timestamp"],
            "message": {"role": "user", "content": "one", "timestamp": 1},
        },
        {
            "type": "message",
            "id": "e2",
            "parentId": odd_parent,
            "timestamp": header["timestamp"],
            "message": {"role": "user", "content": "two", "timestamp": 1},
        },
        {
            "type": "message",
            "id": "e3",
            "parentId": "e2",
            "timestamp": header["timestamp"],
            "message": {"role": "user", "content": "three", "timestamp": 1},
        },
    ]
    (provider.root / "odd1.jsonl").write_bytes(b"".join(serialize_line(x) for x in lines))
    for attempt in range(2):  # a second read finds the index as the first left it
        session = provider.register_existing_file("odd1") if attempt == 0 else provider.get_session("odd1")
        assert session["leaf_entry_id"] == "e3"
        context = provider.build_context("odd1")
        assert [m["content"] for m in context["messages"]] == ["two", "three"]
        assert [e["id"] for e in provider.get_active_path("odd1")] == ["e2", "e3"]
        assert [e["id"] for e in provider.list_entries("odd1")] == ["e1", "e2", "e3"]
        assert provider.get_entry("odd1", "e2")["parentId"] == odd_parent
    from sessiontree.core.path import build_tree, entry_depths, get_path_to_leaf, tree_stats
    from sessiontree.selectors.export import export_entries

    stored = provider.list_entries("odd1")
    assert [node["entry"]["id"] for node in build_tree(stored)] == ["e1", "e2"]
    assert entry_depths(stored) == {"e1": 0, "e2": 0, "e3": 1}
    assert tree_stats(stored).branch_count == 2
    with pytest.raises(CorruptSessionTree, match="e2 has missing parent"):
        get_path_to_leaf(stored, "e3")  # the kernel plan's strict walk: a typed error
    for scope, start, want in (
        ("active", None, ["e2", "e3"]),
        ("subtree", "e2", ["e2", "e3"]),
        ("full", None, ["e1", "e2", "e3"]),
    ):
        _header, exported = export_entries(provider, "odd1", scope=scope, entry_id=start)
        assert [e["id"] for e in exported] == want, scope
    appended = provider.append_message("odd1", {"role": "user", "content": "four"})
    assert [m["content"] for m in provider.build_context("odd1")["messages"]] == ["two", "three", "four"]
    assert appended["parentId"] == "e3"
