"""The storage port's erase (``SessionStorage.erase``, ``TreeProvider.erase_entries``)
on every storage: the one rewrite of completed entries, in place, with the
caller's database writes in the same unit."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest

from sessiontree.core.errors import EntryNotFound, ImmutableEntry, SessionNotFound
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.core.redaction import ERASED, erase_entry
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.file_provider import clear_index_cache
from sessiontree.services.audit import SYSTEM_ACTOR, record

from .erasing import EraseIds

SECRET = "4111 1111 1111 1111"


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text):
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": "m"}


@pytest.fixture
def chat(provider):
    provider.create_session(session_id="s1")
    first = provider.append_message("s1", user(f"my card is {SECRET}"))
    answer = provider.append_message("s1", assistant("noted"))
    side = provider.append_message("s1", user("and another thing"))
    provider.switch_leaf("s1", answer["id"])
    tip = provider.append_message("s1", user("back on the main line"))
    return provider, first, answer, side, tip


def test_an_erase_rewrites_the_entry_in_place_and_keeps_the_tree(chat):
    provider, first, answer, side, tip = chat
    before = provider.get_session("s1")
    paths = {leaf: [e["id"] for e in provider.get_active_path("s1", leaf)] for leaf in (side["id"], tip["id"])}
    seen = []
    done = provider.erase_entries("s1", EraseIds(first["id"]), before_commit=seen.append)
    assert [erased.entry_id for erased in done.erased] == [first["id"]]
    assert done.erased[0].entry == erase_entry(first)
    assert seen == [done]
    entries = provider.list_entries("s1")
    assert entries[0] == {**first, "message": {"role": "user", "content": ERASED, "timestamp": 1}}
    assert entries[1:] == [answer, side, tip]
    after = provider.get_session("s1")
    for field in ("leaf_entry_id", "root_entry_id", "entry_count", "branch_count", "compaction_count"):
        assert after[field] == before[field]
    assert after["updated_at"] > before["updated_at"]  # a write: versions (ETags) move
    for leaf, ids in paths.items():
        assert [e["id"] for e in provider.get_active_path("s1", leaf)] == ids
    context = provider.build_context("s1")
    assert context["messages"][0]["content"] == ERASED
    assert SECRET not in orjson.dumps(provider.get_snapshot("s1")).decode()
    assert AgentSession.objects.get(session_id="s1").first_message_preview == ERASED
    # Appends go on as before, on the rewritten storage.
    provider.append_message("s1", user("after the erase"))
    assert [e["id"] for e in provider.list_entries("s1")][:4] == [first["id"], answer["id"], side["id"], tip["id"]]


def test_the_hash_is_of_the_bytes_before(chat):
    provider, first, *_ = chat
    done = provider.erase_entries("s1", EraseIds(first["id"]))
    expected = hashlib.sha256(serialize_line(first).rstrip(b"\n")).hexdigest()
    assert done.erased[0].sha256 == expected


def test_the_callers_writes_and_the_erase_are_one_unit(chat):
    provider, first, *_ = chat
    entries = provider.list_entries("s1")
    stamp = provider.get_session("s1")["updated_at"]

    def fail(done):
        record(actor=SYSTEM_ACTOR, channel="internal", operation="erase_entry", session_id="s1")
        raise RuntimeError("the audit failed")

    with pytest.raises(RuntimeError):
        provider.erase_entries("s1", EraseIds(first["id"]), before_commit=fail)
    clear_index_cache()
    assert provider.list_entries("s1") == entries
    assert provider.get_session("s1")["updated_at"] == stamp
    assert not AuditRecord.objects.filter(operation="erase_entry").exists()


def test_nothing_to_erase_changes_nothing_and_calls_nothing(chat):
    provider, first, *_ = chat
    provider.erase_entries("s1", EraseIds(first["id"]))
    stamp = provider.get_session("s1")["updated_at"]
    calls = []
    done = provider.erase_entries("s1", EraseIds(first["id"]), before_commit=calls.append)  # erased already
    assert not done.changed and calls == []
    assert provider.get_session("s1")["updated_at"] == stamp


def test_unknown_and_in_flight_entries_are_refused(chat):
    provider, first, *_ = chat
    entries = provider.list_entries("s1")
    with pytest.raises(EntryNotFound):
        provider.erase_entries("s1", EraseIds("nothere"))
    streaming = provider.begin_in_flight_entry("s1", {"type": "message", "message": user(SECRET)})
    with pytest.raises(ImmutableEntry):
        provider.erase_entries("s1", EraseIds(streaming["id"]))
    with pytest.raises(SessionNotFound):
        provider.erase_entries("nope", EraseIds(first["id"]))
    assert provider.list_entries("s1")[: len(entries)] == entries


def test_every_kind_of_entry_keeps_what_pi_needs(provider):
    provider.create_session(session_id="s1")
    q = provider.append_message("s1", user(f"card {SECRET}"))
    call = provider.append_message(
        "s1",
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "c1", "name": "charge", "arguments": {"card": SECRET}}],
            "provider": "p",
            "model": "m",
        },
    )
    result = provider.append_message(
        "s1",
        {"role": "toolResult", "toolCallId": "c1", "toolName": "charge", "content": [{"type": "text", "text": SECRET}]},
    )
    note = provider.append_custom_message("s1", "note", f"about {SECRET}")
    custom = provider.append_custom_entry("s1", "ext", {"card": SECRET})
    summary = provider.append_compaction(
        "s1", summary=f"they gave {SECRET}", first_kept_entry_id=result["id"], tokens_before=9
    )
    ids = [q["id"], call["id"], result["id"], note["id"], custom["id"], summary["id"]]
    before = provider.build_context("s1")
    done = provider.erase_entries("s1", EraseIds(*ids))
    assert [erased.entry_id for erased in done.erased] == ids
    stored = provider.list_entries("s1")
    assert SECRET not in orjson.dumps(stored).decode()
    for old, new in zip([q, call, result, note, custom, summary], stored, strict=True):
        assert {k: new[k] for k in ("type", "id", "parentId", "timestamp")} == {
            k: old[k] for k in ("type", "id", "parentId", "timestamp")
        }
    after = provider.build_context("s1")
    assert [m["role"] for m in after["messages"]] == [m["role"] for m in before["messages"]]
    assert after["source_entry_ids"] == before["source_entry_ids"]


# --- the file storage's bytes ---------------------------------------------------------------


@pytest.fixture
def file_chat(chat):
    provider = chat[0]
    if provider.kind != "file":
        pytest.skip("the file storage's own bytes")
    return chat


def test_the_file_is_replaced_whole_and_other_lines_keep_their_bytes(file_chat):
    provider, first, *_ = file_chat
    path = provider.path_for("s1")
    # A line Pi wrote (spaces after colons are still JSON) and a malformed line quoting the secret.
    foreign = b'{"type": "custom", "id": "pi000001", "parentId": null, "timestamp": "2026-01-01T00:00:00.000Z", "customType": "pi"}\n'
    with open(path, "ab") as handle:
        handle.write(foreign)
        handle.write(f'{{"type":"message","id":"torn","message":{{"content":"my card is {SECRET}\n'.encode())
    clear_index_cache()
    provider.list_entries("s1")  # the process has the file parsed
    before = path.read_bytes()
    inode = os.stat(path).st_ino
    done = provider.erase_entries("s1", EraseIds(first["id"], text=f"my card is {SECRET}"))
    data = path.read_bytes()
    assert SECRET.encode() not in data
    assert os.stat(path).st_ino != inode  # renamed over, never written in place
    assert done.file is not None and done.file.inode == os.stat(path).st_ino and done.file.size == len(data)
    assert done.lines_cleaned == 1
    old_lines, new_lines = before.splitlines(keepends=True), data.splitlines(keepends=True)
    assert len(old_lines) == len(new_lines)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert changed == [1, len(old_lines) - 1]  # the entry's line and the malformed one; the header is line 0
    assert foreign in new_lines
    assert not list(path.parent.glob("*.erasing"))
    # This process reads the new file (its parsed copy was dropped), and so does a fresh one.
    assert provider.get_entry("s1", first["id"])["message"]["content"] == ERASED
    clear_index_cache()
    assert provider.get_entry("s1", first["id"])["message"]["content"] == ERASED
    assert provider.get_entry("s1", "pi000001")["customType"] == "pi"


def test_the_storages_backups_of_the_file_are_erased_too(file_chat):
    provider, first, *_ = file_chat
    path = provider.path_for("s1")
    original = path.read_bytes()
    pre_v3 = path.with_name(path.name + ".pre-v3.bak")
    torn = path.with_name(path.name + ".torn-20260101T000000000000Z.bak")
    unrelated = path.with_name("other.jsonl.torn-20260101T000000000000Z.bak")
    # A v1 original (no ids: the message is found by its text) and a copy before a cut.
    v1 = (
        b'{"type":"session","id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        + orjson.dumps(
            {"type": "message", "timestamp": "2026-01-01T00:00:01.000Z", "message": user(f"my card is {SECRET}")}
        )
        + b"\nnot json "
        + SECRET.encode()
        + b"\n"
    )
    pre_v3.write_bytes(v1)
    torn.write_bytes(original + b'{"type":"message","id":"x"')
    unrelated.write_bytes(original)
    done = provider.erase_entries("s1", EraseIds(first["id"], text=f"my card is {SECRET}"))
    assert sorted(done.backups) == sorted([str(pre_v3), str(torn)])
    assert SECRET.encode() not in pre_v3.read_bytes() and SECRET.encode() not in torn.read_bytes()
    assert pre_v3.read_bytes().startswith(b'{"type":"session"')  # the rest of the backup is kept
    assert unrelated.read_bytes() == original  # another file's backup is not this session's


def test_a_failed_commit_leaves_the_file_and_its_backups_as_they_were(file_chat):
    provider, first, *_ = file_chat
    path = provider.path_for("s1")
    backup = path.with_name(path.name + ".pre-v3.bak")
    backup.write_bytes(path.read_bytes())
    before = (path.read_bytes(), backup.read_bytes())

    def fail(done):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        provider.erase_entries("s1", EraseIds(first["id"]), before_commit=fail)
    assert (path.read_bytes(), backup.read_bytes()) == before
    assert not list(path.parent.glob("*.erasing"))


def test_an_index_in_place_file_keeps_its_path(provider, tmp_path):
    if provider.kind != "file":
        pytest.skip("registering a Pi file in place is the file storage's")
    folder = tmp_path / "pi"
    folder.mkdir()
    path = folder / "2026-01-01T00-00-00-000Z_pi-session.jsonl"
    path.write_bytes(
        b'{"type":"session","version":3,"id":"pi-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
        + orjson.dumps(
            {
                "type": "message",
                "id": "aa000001",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": user(SECRET),
            }
        )
        + b"\n"
    )
    provider.register_existing_file("pi-session", path=path)
    done = provider.erase_entries("pi-session", EraseIds("aa000001"))
    assert done.file is not None and Path(done.file.path) == path
    assert SECRET.encode() not in path.read_bytes()
    assert not (provider.root / "pi-session.jsonl").exists()
