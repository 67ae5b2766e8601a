"""The search index follows Pi files: a file adopted in place (``--mode
index``) is indexed with it, lines Pi appended later are indexed by the
refresh that records them, and by any write of ours that first sees them;
an import indexes the copies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessiontree.models import SearchEntry
from sessiontree.providers.factory import get_provider
from sessiontree.services import entries

from . import pi_folder as pi
from .test_sync_import import sync


def indexed(session_id: str) -> set[str]:
    return set(SearchEntry.objects.filter(session_id=session_id).values_list("entry_id", flat=True))


def with_text(objs) -> set[str]:
    from sessiontree.core.text import entry_text

    return {obj["id"] for obj in objs if obj.get("type") != "session" and entry_text(obj)}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def test_an_indexed_file_and_what_pi_appends_later_are_searchable(db, folder):
    branched = pi.branched_entries()
    path = pi.write(folder / "a.jsonl", [pi.header("sess-a"), *branched[:5]])
    sync(folder, "--mode", "index")
    assert indexed("sess-a") == with_text(branched[:5]) != set()
    pi.append(path, branched[5:])
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10_000_000))
    sync(folder, "--mode", "index")
    assert indexed("sess-a") == with_text(branched)


def test_lines_a_foreign_writer_appended_are_indexed_by_our_next_write(db, folder):
    branched = pi.branched_entries()
    path = pi.write(folder / "b.jsonl", [pi.header("sess-b"), *branched[:3]])
    sync(folder, "--mode", "index")
    pi.append(path, [pi.user("f0000001", branched[2]["id"], "a line pi wrote about a wombat", 40)])
    assert "f0000001" not in indexed("sess-b")
    ours = entries.append_message(
        session_id="sess-b",
        message={"role": "user", "content": "and ours", "timestamp": 1},
        provider=get_provider("file"),
        actor="t",
        channel="internal",
    )
    assert {"f0000001", ours["id"]} <= indexed("sess-b")


def test_an_import_indexes_the_copies(db, folder):
    branched = pi.branched_entries()
    pi.write(folder / "c.jsonl", [pi.header("sess-c"), *branched])
    sync(folder, "--mode", "import", "--provider", "mysql")
    assert indexed("sess-c") == with_text(branched)
