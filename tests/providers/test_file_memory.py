"""What a process keeps of a ``file`` session: its skeleton and where each
line lies, payloads read again from the file within a bounded cache, and a
bounded number of sessions' indexes (issue 23)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from sessiontree.core.pi_session_file import load_entries_from_file, serialize_line
from sessiontree.providers import file_provider
from sessiontree.providers.file_provider import FileSessionTreeProvider, cache_usage, clear_index_cache


@pytest.fixture
def provider(db, tmp_path):
    clear_index_cache()
    yield FileSessionTreeProvider(root=tmp_path / "sessions")
    clear_index_cache()


def fill(provider, session_id: str, count: int, *, text: str = "x" * 200) -> list[dict]:
    provider.create_session(session_id=session_id)
    return [provider.append_message(session_id, {"role": "user", "content": f"{i} {text}"}) for i in range(count)]


def as_read_by_pi(path: str | Path) -> list[dict]:
    return load_entries_from_file(path)[1:]


def test_payloads_kept_stay_within_the_byte_budget(provider, settings):
    settings.SESSIONTREE_FILE_CACHE_BYTES = 4096
    fill(provider, "s1", 60)
    clear_index_cache()
    entries = provider.list_entries("s1")
    assert len(entries) == 60
    usage = cache_usage()
    assert usage["entries"] == 60
    assert 0 < usage["payload_bytes"] <= 4096
    assert usage["payloads"] < 60


@pytest.mark.parametrize("budget", [0, 1, 1500, 4096, 10**9])
def test_a_full_pass_keeps_the_entries_of_the_file_s_last_budget_bytes(provider, settings, budget):
    """What the first open of a file leaves in the payload cache: the entries
    whose lines start in its last ``SESSIONTREE_FILE_CACHE_BYTES`` bytes,
    decoded as Pi reads them, and no older one."""
    settings.SESSIONTREE_FILE_INDEX_SIDECAR = False  # the full pass, every time
    written = fill(provider, "s1", 40)
    path = Path(provider.get_session("s1")["session_file"])
    data = path.read_bytes()
    starts, at = [], data.index(b"\n") + 1  # after the header
    for _ in written:
        starts.append(at)
        at = data.index(b"\n", at) + 1
    clear_index_cache()
    settings.SESSIONTREE_FILE_CACHE_BYTES = budget
    with provider.read("s1"):
        pass
    kept = sorted((at, entry) for (_token, at), (entry, _length) in file_provider._payloads._entries.items())
    expected = [i for i, start in enumerate(starts) if budget > 0 and start >= len(data) - budget]
    assert [at for at, _ in kept] == expected
    assert (
        [entry for _, entry in kept]
        == [written[i] for i in expected]
        == as_read_by_pi(path)[len(written) - len(expected) :]
    )
    assert cache_usage()["payload_bytes"] <= budget


def test_without_a_payload_cache_every_read_comes_from_the_file_as_pi_reads_it(provider, settings):
    settings.SESSIONTREE_FILE_CACHE_BYTES = 0
    written = fill(provider, "s1", 30)
    path = provider.get_session("s1")["session_file"]
    clear_index_cache()
    assert provider.list_entries("s1") == written == as_read_by_pi(path)
    assert cache_usage()["payloads"] == 0
    assert provider.get_active_path("s1") == written
    assert provider.get_entry("s1", written[7]["id"]) == written[7]
    context = provider.build_context("s1")
    assert [m["content"] for m in context["messages"]] == [e["message"]["content"] for e in written]


def test_lines_found_where_pi_puts_them_among_blank_crlf_malformed_and_stray_lines(provider, settings):
    """The offsets of entries in a file with lines the reader skips or that
    hold multi-byte text: each entry read again by itself is the entry Pi reads."""
    settings.SESSIONTREE_FILE_CACHE_BYTES = 0
    written = fill(provider, "s1", 3)
    path = Path(provider.get_session("s1")["session_file"])
    last = written[-1]["id"]
    foreign = [
        b"\n",
        b"not json at all\n",
        b'{"type":"session","version":3,"id":"stray","timestamp":"2026-01-01T00:00:00.000Z","cwd":""}\n',
        serialize_line(
            {
                "type": "message",
                "id": "f0000001",
                "parentId": last,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": "héllo ✓ 𝄞", "timestamp": 1},
            }
        ).rstrip(b"\n")
        + b"\r\n",
        b"   \n",
        serialize_line(
            {
                "type": "message",
                "id": "f0000002",
                "parentId": "f0000001",
                "timestamp": "2026-01-01T00:00:02.000Z",
                "message": {"role": "user", "content": "after", "timestamp": 2},
            }
        ),
    ]
    with path.open("ab") as f:
        f.write(b"".join(foreign))
    expected = as_read_by_pi(path)
    assert [e["id"] for e in expected][-2:] == ["f0000001", "f0000002"]
    for fresh in (False, True):  # read from the tail of a known index, then cold
        if fresh:
            clear_index_cache()
        assert provider.list_entries("s1") == expected
        assert [provider.get_entry("s1", e["id"]) for e in reversed(expected)] == list(reversed(expected))
        assert provider.get_active_path("s1")[-1]["message"]["content"] == "after"


def test_an_append_after_a_cold_open_finds_its_parent_and_reads_back(provider, settings):
    settings.SESSIONTREE_FILE_CACHE_BYTES = 0
    written = fill(provider, "s1", 5)
    clear_index_cache()
    added = provider.append_message("s1", {"role": "assistant", "content": "reply"})
    assert added["parentId"] == written[-1]["id"]
    assert provider.get_entry("s1", added["id"]) == added
    assert provider.list_entries("s1") == [*written, added]


def test_the_number_of_indexes_kept_is_bounded(provider, settings):
    settings.SESSIONTREE_FILE_CACHE_SESSIONS = 2
    for name in ("s1", "s2", "s3"):
        fill(provider, name, 2)
    clear_index_cache()
    for name in ("s1", "s2", "s3"):
        assert len(provider.list_entries(name)) == 2
    assert cache_usage()["sessions"] == 2
    assert len(provider.list_entries("s1")) == 2  # dropped, read again


def test_the_index_keeps_no_payload(provider, settings):
    settings.SESSIONTREE_FILE_CACHE_BYTES = 0
    fill(provider, "s1", 4)
    clear_index_cache()
    provider.build_context("s1")
    (index,) = list(file_provider._cache.values())
    kept = [getattr(index, name) for name in index.__slots__]
    assert not any(isinstance(value, dict) and "message" in value for value in kept)
    assert not any(isinstance(value, list) and any(isinstance(item, dict) for item in value) for value in kept)


def test_an_entry_changed_in_place_under_a_known_offset_is_refused_not_misread(provider, settings):
    """A line overwritten in place (same size, same inode: no writer of this
    storage or Pi does that) is refused, never handed on as another entry."""
    from sessiontree.core.errors import CorruptSessionTree

    settings.SESSIONTREE_FILE_CACHE_BYTES = 0
    written = fill(provider, "s1", 3)
    path = Path(provider.get_session("s1")["session_file"])
    assert provider.list_entries("s1") == written
    data = path.read_bytes()
    old = orjson.dumps(written[1]["id"])
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, old[:-2] + b'Z"', data.index(old))
    finally:
        os.close(fd)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, file_provider._cache[str(path)].mtime_ns))  # the index looks current
    with pytest.raises(CorruptSessionTree):
        provider.get_entry("s1", written[1]["id"])


def test_the_entries_of_the_indexes_kept_are_bounded_but_the_last_one_stays(provider, settings):
    settings.SESSIONTREE_FILE_CACHE_ENTRIES = 5
    for name in ("s1", "s2"):
        fill(provider, name, 4)
    clear_index_cache()
    provider.list_entries("s1")
    provider.list_entries("s2")
    assert cache_usage() == {**cache_usage(), "sessions": 1, "entries": 4}
    settings.SESSIONTREE_FILE_CACHE_ENTRIES = 2
    clear_index_cache()
    assert len(provider.list_entries("s1")) == 4
    assert cache_usage()["sessions"] == 1


def test_an_erase_leaves_no_decoded_copy_of_the_old_content_in_the_process(provider):
    from sessiontree.services import moderation

    written = fill(provider, "s1", 3, text="secret-text")
    assert provider.list_entries("s1") == written  # decoded, cached
    moderation.erase_entry(
        session_id="s1", entry_id=written[1]["id"], reason="pii: test", actor="system", channel="cli", provider=provider
    )
    assert "1 secret-text" not in orjson.dumps(provider.list_entries("s1")).decode()
    kept = [entry for entry, _ in file_provider._payloads._entries.values()]
    assert len(kept) == 3  # the new index's entries only
    assert not any("1 secret-text" in orjson.dumps(entry).decode() for entry in kept)
