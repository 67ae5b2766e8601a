"""Property: what the file provider writes, it reads back unchanged, from its
cache and from the disk, and the file follows Pi's format (Hypothesis)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.core.pi_session_file import load_entries_from_file, migrate_to_current_version
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache

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
