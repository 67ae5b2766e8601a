"""What the file storage refuses to follow or read as a session, typed, losing nothing.

Found by bad-input probes: a folder named ``<id>.jsonl`` gave an untyped
IsADirectoryError (admin tree page 500, rp traceback) and hard delete removed
the row and then failed, leaving the folder; a session file that was a
symbolic link to another session's file was accepted and writes landed in
the other session; registering a v1 file rewrote it and dropped its
malformed lines.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessiontree.core.errors import CorruptSessionTree
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.models import AgentSession
from sessiontree.providers import file_sidecar
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider(tmp_path):
    clear_index_cache()
    return FileSessionTreeProvider(root=tmp_path / "sessions")


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def every_call(provider, session_id):
    return {
        "list_entries": lambda: provider.list_entries(session_id),
        "get_active_path": lambda: provider.get_active_path(session_id),
        "build_context": lambda: provider.build_context(session_id),
        "get_snapshot": lambda: provider.get_snapshot(session_id),
        "get_header": lambda: provider.get_header(session_id),
        "append_message": lambda: provider.append_message(session_id, user("x")),
        "reset_leaf": lambda: provider.reset_leaf(session_id),
        "create_branched_session": lambda: provider.create_branched_session(session_id, None),
    }


def test_a_folder_where_the_file_should_be_is_corrupt_storage_not_a_crash(provider):
    session = provider.create_session(session_id="s1", title="kept")
    path = Path(session["session_file"])
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("keep me")
    for call in every_call(provider, "s1").values():
        with pytest.raises(CorruptSessionTree, match=r"s1\.jsonl .*not a regular file"):
            call()
    assert provider.get_session("s1")["title"] == "kept"  # the meta row stays inspectable
    with pytest.raises(CorruptSessionTree, match="nothing was deleted"):
        provider.delete_session("s1", hard=True)
    assert AgentSession.objects.filter(session_id="s1").exists()  # no half-deleted session
    assert (path / "inside").read_text() == "keep me"


def test_a_symbolic_link_to_another_sessions_file_is_never_followed(provider):
    victim = provider.create_session(session_id="victim")
    provider.append_message("victim", user("mine"))
    before = Path(victim["session_file"]).read_bytes()
    attacker = provider.create_session(session_id="attacker")
    path = Path(attacker["session_file"])
    path.unlink()
    path.symlink_to(victim["session_file"])
    for call in every_call(provider, "attacker").values():
        with pytest.raises(CorruptSessionTree, match="symbolic link"):
            call()
    assert Path(victim["session_file"]).read_bytes() == before  # nothing landed in the other session
    with pytest.raises(CorruptSessionTree, match="not a regular file"):
        provider.delete_session("attacker", hard=True)  # the link is refused, its target untouched
    assert Path(victim["session_file"]).read_bytes() == before


def test_hard_delete_is_all_or_nothing(provider, monkeypatch):
    session = provider.create_session(session_id="s1")
    provider.append_message("s1", user("a"))
    path = Path(session["session_file"])
    from sessiontree.providers import meta

    def failing_delete(row):
        raise RuntimeError("database refused")

    monkeypatch.setattr(meta, "delete_row", failing_delete)
    with pytest.raises(RuntimeError):
        provider.delete_session("s1", hard=True)
    assert path.exists() and AgentSession.objects.filter(session_id="s1").exists()
    assert [e["message"]["content"] for e in provider.list_entries("s1")] == ["a"]
    monkeypatch.undo()
    provider.delete_session("s1", hard=True)
    assert not path.exists() and not AgentSession.objects.filter(session_id="s1").exists()
    assert not list(path.parent.glob("s1.jsonl*"))


def test_registering_a_v1_file_keeps_its_original_bytes_when_the_rewrite_drops_lines(provider):
    path = provider.root / "v1.jsonl"
    lines = [
        serialize_line({"type": "session", "id": "v1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"}),
        serialize_line({"type": "message", "timestamp": "t", "message": user("one")}),
        b"{this line is not json\n",
        serialize_line({"type": "message", "timestamp": "t", "message": user("two")}),
    ]
    original = b"".join(lines)
    path.write_bytes(original)
    provider.register_existing_file("v1")
    assert [e["message"]["content"] for e in provider.list_entries("v1")] == ["one", "two"]
    backup = path.with_name("v1.jsonl.pre-v3.bak")
    assert backup.read_bytes() == original


def test_a_lossless_v1_migration_leaves_no_backup(provider):
    path = provider.root / "v1.jsonl"
    path.write_bytes(
        serialize_line({"type": "session", "id": "v1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"})
        + serialize_line({"type": "message", "timestamp": "t", "message": user("one")})
    )
    provider.register_existing_file("v1")
    assert provider.list_entries("v1")[0]["message"]["content"] == "one"
    assert sorted(os.listdir(provider.root)) == [file_sidecar.FOLDER, "v1.jsonl"]  # the index, no backup
    assert os.listdir(provider.root / file_sidecar.FOLDER) == ["v1.jsonl.idx"]
