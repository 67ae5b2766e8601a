"""Property: what the file provider writes, it reads back unchanged, from its
cache and from the disk, and the file follows Pi's format (Hypothesis)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.path import get_path_to_leaf
from sessiontree.core.pi_session_file import (
    load_entries_from_file,
    migrate_to_current_version,
    new_session_header,
)
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from tests.core.test_context_fast_paths import session_trees
from tests.pi_fixtures import split_header

# Whatever JSON can hold: any text (lone surrogates are not text), 64-bit
# integers, finite floats, nested lists and objects.
json_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_text, inner, max_size=3),
    max_leaves=10,
)
BASE_KEYS = {"type", "id", "parentId", "timestamp"}
extra_fields = st.dictionaries(json_text.filter(lambda k: k not in BASE_KEYS), json_values, max_size=3)


@st.composite
def new_entries(draw) -> dict:
    """An entry as a caller hands it to ``append_entry``: one of Pi's types with
    its required fields, plus unknown fields of any JSON shape."""
    kind = draw(st.sampled_from(["message", "custom", "custom_message", "session_info", "thinking_level_change"]))
    entry: dict = {"type": kind}
    if kind == "message":
        entry["message"] = {
            "role": draw(st.sampled_from(["user", "assistant", "toolResult"])),
            "content": draw(json_values),
        }
    elif kind == "custom":
        entry["customType"] = draw(json_text.filter(bool))
        entry["data"] = draw(json_values)
    elif kind == "custom_message":
        entry.update(customType="note", content=draw(json_text), display=draw(st.booleans()))
    elif kind == "session_info":
        entry["name"] = draw(json_text)
    else:
        entry["thinkingLevel"] = draw(st.sampled_from(["off", "low", "high"]))
    for key, value in draw(extra_fields).items():
        entry.setdefault(key, value)
    return entry


# An operation: append an entry, move the leaf to an earlier entry, or reset it.
operations = st.lists(
    st.one_of(
        new_entries().map(lambda e: ("append", e)),
        st.integers(min_value=0).map(lambda n: ("switch", n)),
        st.just(("reset", None)),
    ),
    min_size=1,
    max_size=12,
)
session_numbers = itertools.count()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_write_then_read_a_session_file_is_lossless(db, tmp_path, ops):
    provider = FileSessionTreeProvider(root=tmp_path / "sessions")
    session_id = f"prop-{next(session_numbers)}"
    session = provider.create_session(session_id=session_id, cwd="/w")
    written: list[dict] = []
    for op, arg in ops:
        if op == "append":
            written.append(provider.append_entry(session_id, arg))
        elif op == "switch" and written:
            provider.switch_leaf(session_id, written[arg % len(written)]["id"])
        elif op == "reset":
            provider.reset_leaf(session_id)
    # As Pi writes it: the v3 header first, then one compact line per entry, in
    # append order, each exactly the entry the append returned.
    lines = Path(session["session_file"]).read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line complete
    header = json.loads(lines[0])  # standard JSON, as JSON.parse reads it
    assert (header["type"], header["version"], header["id"], header["cwd"]) == ("session", 3, session_id, "/w")
    assert lines[1:-1] == [orjson.dumps(e) for e in written]  # compact, key order kept
    assert [json.loads(line) for line in lines[1:-1]] == written
    # Pi's reading rules: header first, nothing to migrate, entries unchanged.
    file_entries = load_entries_from_file(session["session_file"])
    assert migrate_to_current_version(file_entries) is False
    assert file_entries[1:] == written
    # The provider: from its cache, then from the disk in a fresh process state.
    assert provider.list_entries(session_id) == written
    clear_index_cache()
    read_back = provider.list_entries(session_id)
    assert [orjson.dumps(e) for e in read_back] == [orjson.dumps(e) for e in written]  # key order too
    leaf_id = provider.get_session(session_id)["leaf_entry_id"]
    path = provider.get_active_path(session_id)
    assert (path[-1]["id"] if path else None) == leaf_id


# Odd files as Pi and other writers leave them: junk lines between entries,
# other key orders, torn lines, a missing final newline, escaped ids.
KEY_ORDERS = st.sampled_from(["pi"] * 12 + ["last"] * 4 + ["first"])
JUNK = st.sampled_from([b"", b"\n", b"  \n", b"not json\n", b"[1]\n", b"null\n", b"torn"])
# Before the header only what Pi skips there: a JSON value that is true would make it no session.
BEFORE_HEADER = st.sampled_from([b"", b"\n", b"  \n", b"not json\n", b"null\n", b"0\n", b'{"type":"sess\n'])


def line(entry: dict, order: str) -> bytes:
    if order == "last":
        rest = {k: v for k, v in entry.items() if k not in ("id", "parentId")}
        entry = {**rest, "id": entry["id"], "parentId": entry["parentId"]}
    elif order == "first":
        entry = {"id": entry["id"], **{k: v for k, v in entry.items() if k != "id"}}
    return orjson.dumps(entry) + b"\n"


@st.composite
def session_files(draw, session_id: str) -> bytes:
    entries = draw(session_trees())
    data = draw(BEFORE_HEADER) + orjson.dumps(new_session_header(session_id)) + b"\n"
    for index, entry in enumerate(entries):
        junk = draw(JUNK)
        if junk == b"torn":
            junk = orjson.dumps({**entry, "id": f"torn{index}"})[: draw(st.integers(1, 40))] + b"\n"
        data += junk + line(entry, draw(KEY_ORDERS))
    ending = draw(st.sampled_from(["newline", "no newline", "torn"]))
    if ending == "no newline":
        data = data[:-1]
    elif ending == "torn":
        data += b'{"type":"message","id":"last-torn","parentId":"x","mess'
    return data


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_odd_files_read_as_the_kernel_reads_them_with_the_kernels_context(db, tmp_path, data):
    """The file storage's reads (the one reader, then ``walk_path``) answer
    what ``load_entries_from_file`` and the kernel's context answer, at the
    default leaf and at other leaves."""
    provider = FileSessionTreeProvider(root=tmp_path / "sessions")
    session_id = f"odd-{next(session_numbers)}"
    path = provider.path_for(session_id)
    path.write_bytes(data.draw(session_files(session_id)))
    entries = split_header(load_entries_from_file(path))[1]
    provider.register_existing_file(session_id)
    assert provider.list_entries(session_id) == entries
    assert provider.build_context(session_id) == build_session_context(entries)
    assert provider.get_active_path(session_id) == get_path_to_leaf(entries, entries[-1]["id"])
    for leaf in entries[::5]:
        assert provider.build_context(session_id, leaf["id"]) == build_session_context(entries, leaf["id"])
