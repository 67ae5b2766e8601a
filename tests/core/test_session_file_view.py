"""``open_session_file`` answers what the full loader answers, decoding less."""

from __future__ import annotations

import random

import orjson
import pytest

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.errors import CorruptSessionTree, EntryNotFound
from sessiontree.core.path import get_path_to_leaf
from sessiontree.core.pi_session_file import load_entries_from_file, new_session_header, serialize_file, split_header
from sessiontree.core.session_file_view import open_session_file


def branched_session(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    entries: list[dict] = []
    path: list[str] = []
    for index in range(count):
        if len(path) > 3 and rng.random() < 0.2:
            del path[len(path) - rng.randint(1, 3) :]
        entry_id = f"e{index:07d}"
        base = {
            "type": "message",
            "id": entry_id,
            "parentId": path[-1] if path else None,
            "timestamp": "2026-11-01T00:00:00.000Z",
        }
        kind = rng.random()
        if kind < 0.1:
            # Pi writes custom entries with their own keys first.
            entry = {
                "type": "custom",
                "customType": "x",
                "data": {"id": "nested", "parentId": None},
                **{k: base[k] for k in ("id", "parentId", "timestamp")},
            }
        elif kind < 0.15:
            entry = {**base, "type": "thinking_level_change", "thinkingLevel": rng.choice(["low", "high"])}
        elif kind < 0.2 and path:
            entry = {
                **base,
                "type": "compaction",
                "summary": "s",
                "firstKeptEntryId": rng.choice([*path, entry_id]),
                "tokensBefore": 1,
            }
        elif kind < 0.25:
            entry = {**base, "type": "model_change", "provider": "p", "modelId": f"m{index}"}
        else:
            role = rng.choice(["user", "assistant", "toolResult"])
            message = {"role": role, "content": [{"type": "text", "text": f"t{index} ünï 🚀"}]}
            if role == "assistant":
                message.update(provider="p", model=f"a{index}")
            entry = {**base, "message": message}
        entries.append(entry)
        path.append(entry_id)
    return entries


def write(tmp_path, entries, name="s.jsonl", header=None):
    path = tmp_path / name
    path.write_bytes(serialize_file([header or new_session_header("sid"), *entries]))
    return path


@pytest.mark.parametrize("seed", range(6))
def test_paths_and_contexts_equal_the_full_loader(tmp_path, seed):
    entries = branched_session(300, seed)
    view = open_session_file(write(tmp_path, entries))
    assert view.leaf_id == entries[-1]["id"] and view.entry_count == len(entries)
    for leaf in [e["id"] for e in entries][::7]:
        assert view.path(leaf) == get_path_to_leaf(entries, leaf)
        assert view.context(leaf) == build_session_context(entries, leaf)
    assert view.context() == build_session_context(entries)
    assert view.context(None) == build_session_context(entries, None)
    with pytest.raises(EntryNotFound):
        view.context("missing")


def test_v1_files_are_migrated_in_full(tmp_path):
    lines = [
        {"type": "session", "id": "v1", "timestamp": "t", "cwd": ""},
        {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "hi"}},
    ]
    path = tmp_path / "v1.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    view = open_session_file(path)
    assert [m["content"] for m in view.context()["messages"]] == ["hi"]


def test_torn_lines_and_a_missing_final_newline(tmp_path):
    entries = branched_session(40, 1)
    data = serialize_file([new_session_header("sid"), *entries])
    torn = orjson.dumps({**entries[10], "id": "torn0001"})[:-5]  # looks whole up to its skeleton
    path = tmp_path / "torn.jsonl"
    path.write_bytes(data + torn + b"\n" + orjson.dumps({**entries[-1], "id": "last0001"}))
    full = split_header(load_entries_from_file(path))[1]
    view = open_session_file(path)
    assert view.leaf_id == "last0001" == full[-1]["id"]
    assert view.context() == build_session_context(full)
    with pytest.raises(EntryNotFound):
        view.context("torn0001")  # a torn line is no entry, as for every reader


def test_not_a_session_and_duplicates(tmp_path):
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b'{"hello": 1}\n')
    with pytest.raises(CorruptSessionTree, match="not a Pi session file"):
        open_session_file(junk)
    entries = branched_session(5, 2)
    view = open_session_file(write(tmp_path, [*entries, entries[0]], "dup.jsonl"))
    # The default leaf's context reads only its path; any other read checks every id.
    with pytest.raises(CorruptSessionTree, match="Duplicate"):
        view.context(entries[1]["id"])
