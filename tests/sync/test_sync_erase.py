"""An erase and the folder sync: a file indexed in place is erased in that
file and the next sync takes the rewrite for what it is; the source of an
import is named as a file outside the store that still holds the text, and a
later sync does not bring the text back; an export is written again from
the erased session; the backups the project wrote (a v1 file's original, a
repair's copy) are erased too."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from sessiontree.core.redaction import ERASED
from sessiontree.models import SyncedFile
from sessiontree.providers.factory import get_provider
from sessiontree.services import moderation, repair

from . import pi_folder as pi
from .test_sync_import import sync, sync_json

CARD = "4111 1111 1111 1111"
WHO = {"actor": "dpo", "channel": "internal"}


def secret_session(session_id: str) -> list[dict]:
    return [
        pi.header(session_id),
        pi.user("c0000001", None, f"my card is {CARD}", 1),
        pi.assistant("c0000002", "c0000001", "noted", 2),
        pi.user("c0000003", "c0000002", "thanks", 3),
    ]


def erase(session_id: str, entry_id: str = "c0000001", **kwargs):
    return moderation.erase_entry(
        session_id=session_id, entry_id=entry_id, reason="data-subject request", **WHO, **kwargs
    )


def test_a_file_indexed_in_place_is_erased_there_and_the_next_sync_sees_no_foreign_rewrite(db, tmp_path):
    folder = tmp_path / "pi"
    path = pi.write(pi.pi_path(folder, "sess-idx"), secret_session("sess-idx"))
    sync(folder, "--mode", "index")
    result = erase("sess-idx")
    assert result == {"changed": [{"session_id": "sess-idx", "entry_id": "c0000001", "kind": "entry"}], "outside": []}
    assert CARD.encode() not in path.read_bytes()  # erased where it lies
    mark = SyncedFile.objects.get(mode="index")
    st = path.stat()
    assert (mark.size, mark.mtime_ns, mark.inode, mark.offset) == (st.st_size, st.st_mtime_ns, st.st_ino, st.st_size)
    report = sync_json(folder, "--mode", "index")
    assert report["summary"]["unchanged"] == 1 and report["summary"]["failed"] == 0
    assert CARD.encode() not in path.read_bytes()
    # Pi goes on appending to its file; the next sync takes the new entries.
    pi.append(path, [pi.assistant("c0000004", "c0000003", "more", 4)])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    report = sync_json(folder, "--mode", "index")
    assert report["summary"]["updated"] == 1
    provider = get_provider("file")
    assert provider.get_session("sess-idx")["leaf_entry_id"] == "c0000004"
    assert provider.get_entry("sess-idx", "c0000001")["message"]["content"] == [{"type": "text", "text": ERASED}]


@pytest.mark.parametrize("target", ["mysql", "file"])
def test_the_source_of_an_import_is_named_and_never_brings_the_text_back(db, tmp_path, target):
    folder = tmp_path / "pi"
    source = pi.write(pi.pi_path(folder, "sess-imp"), secret_session("sess-imp"))
    sync(folder, "--provider", target)
    before = source.read_bytes()
    dry = erase("sess-imp", dry_run=True)
    result = erase("sess-imp")
    assert result == dry and result["outside"] == [str(source)]
    assert source.read_bytes() == before  # not ours: named, never changed
    assert sync_json(folder, "--provider", target)["summary"]["unchanged"] == 1
    stored = get_provider(target).list_entries("sess-imp")
    assert CARD not in orjson.dumps(stored).decode()
    # Pi appends to the source: only the new tail comes in, the erased entry stays erased.
    pi.append(source, [pi.assistant("c0000004", "c0000003", "more", 4)])
    assert sync_json(folder, "--provider", target)["summary"]["updated"] == 1
    stored = get_provider(target).list_entries("sess-imp")
    assert [e["id"] for e in stored][-1] == "c0000004" and CARD not in orjson.dumps(stored).decode()
    # Once the source holds the entry no more (erased there too, or gone), it is no longer named.
    lines = source.read_bytes().splitlines(keepends=True)
    lines[1] = orjson.dumps(get_provider(target).get_entry("sess-imp", "c0000001")) + b"\n"
    source.write_bytes(b"".join(lines))
    assert erase("sess-imp", dry_run=True)["outside"] == []
    source.write_bytes(before)
    assert erase("sess-imp", dry_run=True)["outside"] == [str(source)]
    source.unlink()
    assert erase("sess-imp", dry_run=True)["outside"] == []


def test_an_export_is_named_until_the_next_export_writes_the_erased_session(db, tmp_path):
    folder = tmp_path / "pi"
    pi.write(pi.pi_path(folder, "sess-exp"), secret_session("sess-exp"))
    sync(folder)  # into mysql
    target = tmp_path / "exported"
    sync(target, "--mode", "export", "--layout", "flat")
    exported = target / "sess-exp.jsonl"
    assert CARD.encode() in exported.read_bytes()
    result = erase("sess-exp")
    assert str(exported) in result["outside"]
    report = sync_json(target, "--mode", "export", "--layout", "flat")
    assert report["summary"]["updated"] == 1  # not taken as unchanged: written again
    assert CARD.encode() not in exported.read_bytes()
    assert str(exported) not in erase("sess-exp", dry_run=True)["outside"]


def test_the_original_of_a_migrated_file_is_erased_too(db, tmp_path):
    folder = tmp_path / "pi"
    objs = pi.v1_objs("sess-v1")
    objs[1]["message"]["content"] = f"my card is {CARD}"
    path = pi.write(folder / "v1.jsonl", objs, tail=b"")
    with path.open("ab") as handle:  # a line the migration drops: its original is kept beside the file
        handle.write(b'{"broken": "my card is ' + CARD.encode() + b"\n")
    sync(folder, "--mode", "index", "--migrate")
    backup = path.with_name(path.name + ".pre-v3.bak")
    assert CARD.encode() in backup.read_bytes()
    first = get_provider("file").list_entries("sess-v1")[0]
    erase("sess-v1", first["id"])
    assert CARD.encode() not in path.read_bytes()
    assert CARD.encode() not in backup.read_bytes()
    assert backup.read_bytes().count(b"\n") == 7  # every line kept, its text erased


def test_a_repairs_copy_of_the_file_is_erased_too(db, tmp_path, settings):
    settings.SESSIONTREE_FILE_ROOT = str(tmp_path / "root")
    provider = get_provider("file")
    provider.create_session(session_id="torn")
    secret = provider.append_message("torn", {"role": "user", "content": f"my card is {CARD}"})
    provider.append_message("torn", {"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    path = provider.path_for("torn")
    with path.open("ab") as handle:
        handle.write(b'{"type":"message","id":"zz","message":{"content":"my card is ' + CARD.encode()[:9])
    plan = repair.repair_session(session_id="torn", actor="ops", channel="cli", apply=True)
    backup = Path(plan.backup)
    assert CARD.encode() in backup.read_bytes()
    erase("torn", secret["id"])
    assert CARD.encode() not in backup.read_bytes() and CARD.encode()[:9] not in backup.read_bytes()
    assert CARD.encode() not in path.read_bytes()
    assert not list(path.parent.glob("*.erasing"))
