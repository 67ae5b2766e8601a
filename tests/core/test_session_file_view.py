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


# --- the default leaf's path, read backwards from the last line -----------------
#
# ``context()`` and ``path()`` without a leaf decode only the path's lines: the
# line just before a child is tried as its parent first, the file is searched
# for the parent's id otherwise, and anything unusual goes to the skeleton
# view. Whatever way was taken, the answer is the full loader's.


def full_answer(path):
    entries = split_header(load_entries_from_file(path))[1]
    return entries, build_session_context(entries)


def lines_file(tmp_path, lines, name="s.jsonl", header=None):
    """A session file from raw lines (bytes) or entries (dicts, written compactly)."""
    path = tmp_path / name
    rows = [header or new_session_header("sid"), *lines]
    path.write_bytes(b"".join(row if isinstance(row, bytes) else orjson.dumps(row) + b"\n" for row in rows))
    return path


def chain(count, prefix="e"):
    entries = []
    for index in range(count):
        role = ("user", "assistant", "toolResult")[index % 3]
        message = {"role": role, "content": [{"type": "text", "text": f"{prefix}{index}"}]}
        if role == "assistant":
            message.update(provider="p", model=f"m{index}")
        entries.append(
            {
                "type": "message",
                "id": f"{prefix}{index:04d}",
                "parentId": entries[-1]["id"] if entries else None,
                "timestamp": "2026-11-01T00:00:00.000Z",
                "message": message,
            }
        )
    return entries


def reordered(entry, order):
    """``entry`` with its keys in another order: ``"last"`` puts id and
    parentId at the end (a migrated v1 line), ``"first"`` puts id first."""
    if order == "last":
        rest = {k: v for k, v in entry.items() if k not in ("id", "parentId")}
        return {**rest, "id": entry["id"], "parentId": entry["parentId"]}
    if order == "first":
        return {"id": entry["id"], **{k: v for k, v in entry.items() if k != "id"}}
    if order == "parent-first":
        return {"parentId": entry["parentId"], **{k: v for k, v in entry.items() if k != "parentId"}}
    return entry


def assert_same_as_full_loader(path, *, fast=True):
    """The view's default context and path are the full loader's; ``fast``:
    read without the skeleton view (only the path's lines were decoded)."""
    entries, context = full_answer(path)
    view = open_session_file(path)
    assert view.context() == context
    assert (view._skeleton is None) is fast
    view = open_session_file(path)
    assert view.path() == (get_path_to_leaf(entries, entries[-1]["id"]) if entries else [])
    assert (view._skeleton is None) is fast
    return view, context


@pytest.mark.parametrize("order", ["pi", "last", "first", "parent-first"])
def test_any_key_order_reads_the_same(tmp_path, order):
    entries = chain(30)
    # A branch: the last entries hang off an older one, so the parent is searched for.
    entries += [{**e, "id": f"b{i}", "parentId": "e0010" if i == 0 else f"b{i - 1}"} for i, e in enumerate(chain(5))]
    path = lines_file(tmp_path, [reordered(e, order) for e in entries])
    # The branch's parent is searched for by its ``"id":…,"parentId":`` text;
    # with another key order the skeleton view finds it.
    _, context = assert_same_as_full_loader(path, fast=order in ("pi", "last"))
    assert context["source_entry_ids"] == [*(e["id"] for e in entries[:11]), "b0", "b1", "b2", "b3", "b4"]


def test_ids_with_quotes_backslashes_and_unicode(tmp_path):
    ids = ['a"b', "c\\d", "ü🚀", 'e\\"f', "g\nh", "plain"]
    entries = chain(len(ids))
    for index, entry_id in enumerate(ids):
        entries[index]["id"] = entry_id
        entries[index]["parentId"] = ids[index - 1] if index else None
    # And a branch back to an escaped id: found by searching for its JSON text.
    branch = {**chain(1, "x")[0], "id": "x0", "parentId": 'a"b'}
    for order in ("pi", "last"):
        path = lines_file(tmp_path, [reordered(e, order) for e in [*entries, branch]], name=f"{order}.jsonl")
        _, context = assert_same_as_full_loader(path)
        assert context["source_entry_ids"] == ['a"b', "x0"]


def test_blank_malformed_and_torn_lines_between_path_entries(tmp_path):
    entries = chain(12)
    torn = orjson.dumps({**entries[3], "id": "torn"})[:-7]
    torn_last = orjson.dumps({**entries[3], "id": "torn-last", "parentId": entries[-1]["id"]})[:-7]
    rows = [entries[0], b"\n", b"   \n", entries[1], b"not json\n", torn + b"\n", entries[2], b"[1, 2]\n"]
    rows += [b'"a string"\n', b"null\n", *entries[3:], torn_last]  # a torn last line, no newline
    path = lines_file(tmp_path, rows)
    view, context = assert_same_as_full_loader(path)
    assert context["source_entry_ids"] == [e["id"] for e in entries]
    with pytest.raises(EntryNotFound):
        view.context("torn")


def test_a_last_line_without_its_newline_is_the_leaf_when_whole(tmp_path):
    entries = chain(4)
    path = lines_file(tmp_path, [*entries[:3], orjson.dumps(entries[3])])
    _, context = assert_same_as_full_loader(path)
    assert context["source_entry_ids"][-1] == entries[3]["id"]


def test_a_torn_line_just_before_a_parent_line(tmp_path):
    # The line before the leaf is torn: it is not the parent, the parent is
    # found further back by its id.
    entries = chain(6)
    torn = orjson.dumps({**entries[5], "id": "torn"})[:-3]
    path = lines_file(tmp_path, [*entries[:5], torn + b"\n", entries[5]])
    assert_same_as_full_loader(path)


def test_session_lines_and_a_header_id_as_parent(tmp_path):
    entries = chain(5)
    second_header = new_session_header("e0001")  # a header whose id is a parent's id
    path = lines_file(tmp_path, [*entries[:2], second_header, *entries[2:]])
    _, context = assert_same_as_full_loader(path, fast=False)
    assert len(context["messages"]) == 5
    # A parent id that names only the header: its child is a root, as for Pi.
    orphan = {**chain(1, "o")[0], "parentId": "sid"}
    path = lines_file(tmp_path, [*entries, orphan], name="orphan.jsonl")
    entries_read, context = full_answer(path)
    view = open_session_file(path)
    assert view.context() == context
    assert view.path() == [entries_read[-1]]


def test_a_parent_written_after_its_child_and_a_missing_parent(tmp_path):
    entries = chain(5)
    moved = [entries[0], entries[2], entries[1], entries[3], entries[4]]  # e0002 before its parent e0001
    path = lines_file(tmp_path, moved)
    view = open_session_file(path)
    assert view.context() == full_answer(path)[1]
    assert view._skeleton is not None
    missing = [*entries[:3], {**entries[3], "parentId": "nowhere"}, entries[4]]
    path = lines_file(tmp_path, missing, name="missing.jsonl")
    view = open_session_file(path)
    assert view.context() == full_answer(path)[1]
    assert [m["content"][0]["text"] for m in view.context()["messages"]] == ["e3", "e4"]


def test_odd_ids_and_parents_go_to_the_skeleton_view(tmp_path):
    entries = chain(4)
    # A parentId that is not a string: no such parent, the entry is a root.
    path = lines_file(tmp_path, [*entries[:3], {**entries[3], "parentId": 7}])
    assert open_session_file(path).context() == full_answer(path)[1]
    # A leaf without a string id is no valid entry: every reader refuses the file.
    path = lines_file(tmp_path, [*entries, {**chain(1, "z")[0], "id": 5}], name="bad-id.jsonl")
    with pytest.raises(CorruptSessionTree, match="string id"):
        open_session_file(path).context()
    with pytest.raises(CorruptSessionTree, match="string id"):
        build_session_context(split_header(load_entries_from_file(path))[1])


def test_a_duplicate_id_on_the_default_path_is_named(tmp_path):
    entries = chain(4)
    # e0003's parent is e0002; the nearest e0002 line before it is a second
    # e0002 whose parent is e0001, whose parent is ... the first e0002's line.
    duplicate = {**entries[2], "parentId": "e0001"}
    path = lines_file(tmp_path, [*entries[:3], {**entries[1], "parentId": "e0002"}, duplicate, entries[3]])
    with pytest.raises(CorruptSessionTree, match="Duplicate"):
        open_session_file(path).context()
    with pytest.raises(CorruptSessionTree, match="Duplicate"):
        open_session_file(path).path()


def test_v1_and_v2_files_read_like_the_full_loader(tmp_path):
    v1 = {"type": "session", "id": "v1", "timestamp": "2026-11-01T00:00:00.000Z", "cwd": ""}
    rows = [
        {"type": "message", "timestamp": "2026-11-01T00:00:00.000Z", "message": {"role": "user", "content": "hi"}},
        {"type": "thinking_level_change", "timestamp": "2026-11-01T00:00:00.000Z", "thinkingLevel": "high"},
        {"type": "message", "timestamp": "t", "message": {"role": "hookMessage", "content": "h"}},
    ]
    path = lines_file(tmp_path, rows, header=v1)
    view = open_session_file(path)
    context = view.context()
    assert [m["role"] for m in context["messages"]] == ["user", "custom"]
    assert context["thinking_level"] == "high"
    v2 = {**v1, "version": 2}
    entries = [{**e, "type": "message"} for e in chain(3)]
    entries[1]["message"] = {"role": "hookMessage", "content": "h"}
    path = lines_file(tmp_path, entries, name="v2.jsonl", header=v2)
    assert [m["role"] for m in open_session_file(path).context()["messages"]] == ["user", "custom", "toolResult"]


def test_a_thinking_level_change_without_a_level_changes_nothing(tmp_path):
    # Found by the property test: with a compaction whose kept range starts
    # off the path, the skeleton view reads the settings from the whole path,
    # and took the latest change even without a level.
    entries = chain(2)
    entries[1]["parentId"] = None
    entries += [
        {"type": "thinking_level_change", "id": "t1", "parentId": entries[1]["id"], "thinkingLevel": "low"},
        {"type": "compaction", "id": "c1", "parentId": "t1", "summary": "s", "firstKeptEntryId": entries[0]["id"]},
        {"type": "thinking_level_change", "id": "t2", "parentId": "c1"},
        *[{**e, "id": f"x{i}", "parentId": "t2" if i == 0 else f"x{i - 1}"} for i, e in enumerate(chain(2))],
    ]
    path = lines_file(tmp_path, entries)
    expected = build_session_context(entries)
    assert expected["thinking_level"] == "low"
    view = open_session_file(path)
    assert view.context() == expected  # the backward walk
    assert view.context("x1") == expected  # the skeleton view


@pytest.mark.parametrize("kept", ["e0002", "e0000", "c1", "nowhere", None])
def test_compactions_on_the_default_path(tmp_path, kept):
    # Before, inside and after the kept range: a system message, which only
    # the kept range leaves out; an older compaction inside it says nothing.
    entries = chain(6)
    system = {"role": "system", "content": "rules"}
    entries[1]["message"] = entries[3]["message"] = system
    older = {"type": "compaction", "id": "c0", "summary": "old", "firstKeptEntryId": "e0000", "tokensBefore": 1}
    latest = {"type": "compaction", "id": "c1", "summary": "new", "firstKeptEntryId": kept, "tokensBefore": 2}
    latest["systemMessage"] = {"role": "system", "content": "checkpoint"}
    rows = [*entries[:4], {**older, "parentId": "e0003"}, {**entries[4], "parentId": "c0"}]
    rows += [{**latest, "parentId": "e0004"}, {**entries[5], "parentId": "c1"}]
    rows += [{**chain(1, "s")[0], "id": "s1", "parentId": "e0005", "message": system}]
    _, context = assert_same_as_full_loader(lines_file(tmp_path, rows))
    expected_kept = {"e0002": ["e0002", "c0", "e0004"], "e0000": ["e0000", "e0002", "c0", "e0004"]}.get(kept, [])
    assert context["source_entry_ids"] == ["c1", "c1", *(e for e in expected_kept if e != "c0"), "e0005", "s1"]


def test_context_edits_and_filled_in_content_on_the_default_path(tmp_path):
    entries = chain(6)
    entries[2]["message"] = {"role": "user"}  # no content: filled in with []
    edit = {"type": "context_edit", "timestamp": "2026-11-01T00:00:00.000Z"}
    compaction = {"type": "compaction", "summary": "s", "firstKeptEntryId": "e0001", "tokensBefore": 1}
    rows = [*entries[:4], {**compaction, "id": "c1", "parentId": "e0003"}]
    rows += [{**edit, "id": "x1", "parentId": "c1", "targetId": "e0001", "replacement": {"content": "first"}}]
    rows += [{**edit, "id": "x2", "parentId": "x1", "targetId": "e0001", "replacement": {"content": "latest"}}]
    rows += [{**edit, "id": "x3", "parentId": "x2", "targetId": "e0003", "replacement": None}]
    rows += [{**edit, "id": "x4", "parentId": "x3", "targetId": "c1", "replacement": None}]
    rows += [{**entries[4], "parentId": "x4"}, entries[5]]
    rows += [{**edit, "id": "x5", "parentId": "e0005", "targetId": "e0005", "replacement": {"content": "now"}}]
    _, context = assert_same_as_full_loader(lines_file(tmp_path, rows))
    # The compaction's own messages omitted, e0001 edited by its latest edit, e0003 omitted.
    assert context["source_entry_ids"] == ["e0001", "e0002", "e0004", "e0005"]
    assert [m["content"] for m in context["messages"]][:2] == [[{"type": "text", "text": "latest"}], []]
    assert context["messages"][3]["content"] == [{"type": "text", "text": "now"}]


def test_a_context_edit_before_its_target_on_the_path(tmp_path):
    # Never written so (a target exists before its edit), but a file can say
    # it: the edit still applies, through build_context_from_path.
    entries = chain(3)
    edit = {"type": "context_edit", "id": "x1", "parentId": "e0000", "targetId": "e0002", "replacement": None}
    rows = [entries[0], edit, {**entries[1], "parentId": "x1"}, entries[2]]
    path = lines_file(tmp_path, rows)
    _, context = assert_same_as_full_loader(path)
    assert context["source_entry_ids"] == ["e0000", "e0001"]
