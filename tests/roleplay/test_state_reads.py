"""The roleplay state at an entry reads what it returns (issue 23).

``inspect_state`` gives exactly ``reduce_branch`` of the whole path (random
trees on both providers, Hypothesis, without ever walking the whole path);
on a session without roleplay entries it reads no path at all, and on a
roleplay session the head to the identity's lock and the tail from the
latest checkpoint by key: its statements do not grow with the session. The
reads by key it relies on (``keyed_reads.tool_results`` and
``custom_entries`` with a limit) are checked against the whole session on
every storage, the memory one included (its generic fallbacks).
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay import schema
from roleplay.reducer import make_checkpoint_data, reduce_branch
from roleplay.services import reads
from roleplay.services.reads import inspect_state, inspect_state_detail, review_queue
from sessiontree.core.errors import EntryNotFound
from sessiontree.core.path import get_path_to_leaf
from sessiontree.providers import keyed_reads
from tests.providers.test_history_reads import long_session
from tests.roleplay.test_reducer_properties import CHARACTER, actions, entry_for

pytestmark = pytest.mark.django_db

STAMP = "2026-04-19T00:00:00.000Z"


def tool_message(entry_id: str, parent: str | None, tool: Any, role: str = "toolResult") -> dict[str, Any]:
    message = {"role": role, "toolCallId": f"call-{entry_id}", "toolName": tool, "content": [], "isError": False}
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": STAMP, "message": message}


# --- the reads by key ----------------------------------------------------------------------


def test_tool_results_are_the_messages_naming_the_tool(any_provider):
    provider = any_provider
    entries = long_session(120)
    last = entries[-1]["id"]
    long_name = "t" * 70
    tools: list[tuple[Any, str]] = [
        ("read", "toolResult"),
        (schema.TURN_TOOL_NAME, "toolResult"),
        ("bash", "toolResult"),
        (long_name, "toolResult"),
        (long_name[:64], "toolResult"),  # what a 64-character column holds of the longer one
        (["read"], "toolResult"),  # not a string: names no tool
        ("read", "assistant"),  # any message naming the tool: callers check the role
        (schema.TURN_TOOL_NAME, "toolResult"),
    ]
    for i, (tool, role) in enumerate(tools):
        entries.append(tool_message(f"t{i:07x}", last, tool, role))
        last = entries[-1]["id"]
    provider.create_session(session_id="tools", entries=entries)
    with provider.read("tools") as view:
        messages = view.all_entries(types=("message",))
        for wanted in (("read",), (schema.TURN_TOOL_NAME, "bash"), (long_name,), (long_name[:64],), ("none",), ()):
            expected = [
                e
                for e in messages
                if isinstance(e["message"].get("toolName"), str) and e["message"]["toolName"] in wanted
            ]
            assert keyed_reads.tool_results(view, wanted) == expected, wanted
            for limit in (0, 1, 2):
                assert keyed_reads.tool_results(view, wanted, limit=limit) == expected[:limit], (wanted, limit)
                some = keyed_reads.tool_results(view, wanted, limit=limit, ordered=False)
                assert len(some) == min(limit, len(expected)) and all(e in expected for e in some), (wanted, limit)
    assert [e["id"] for e in keyed_reads_expected(entries, "read")] == ["t0000000", "t0000006"]


def keyed_reads_expected(entries: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("type") == "message" and e["message"].get("toolName") == tool]


def test_custom_entries_stop_at_the_limit(any_provider):
    provider = any_provider
    entries = long_session(60)
    last = entries[-1]["id"]
    for i, custom_type in enumerate(["x-a", "x-b", "x-a", "x-c", "x-a"]):
        entries.append(
            {"type": "custom", "id": f"c{i:07x}", "parentId": last, "timestamp": STAMP, "customType": custom_type}
            | {"data": {"n": i}}
        )
        last = entries[-1]["id"]
    provider.create_session(session_id="customs", entries=entries)
    with provider.read("customs") as view:
        for wanted in (("x-a",), ("x-c", "x-b"), ("x-none",)):
            every = keyed_reads.custom_entries(view, wanted)
            assert every == [e for e in entries if e.get("type") == "custom" and e["customType"] in wanted]
            for limit in (0, 1, 2, 10):
                assert keyed_reads.custom_entries(view, wanted, limit=limit) == every[:limit]
                some = keyed_reads.custom_entries(view, wanted, limit=limit, ordered=False)
                assert len(some) == min(limit, len(every)) and all(e in every for e in some)


def test_an_entry_in_flight_is_found_by_its_tool(provider):
    entries = long_session(20)
    provider.create_session(session_id="streaming", entries=entries)
    started = provider.begin_in_flight_entry(
        "streaming", tool_message("f0000000", entries[-1]["id"], schema.TURN_TOOL_NAME)
    )
    with provider.read("streaming") as view:
        assert [e["id"] for e in keyed_reads.tool_results(view, (schema.TURN_TOOL_NAME,))] == [started["id"]]
        assert keyed_reads.tool_results(view, ("other",)) == []


# --- the state equals the whole path's reduction --------------------------------------------

other_entries = st.sampled_from(["assistant", "user", "tool", "custom-other"])


def _other(kind: str) -> dict[str, Any]:
    if kind == "assistant":
        return {"type": "message", "message": {"role": "assistant", "content": [], "model": "m"}}
    if kind == "user":
        return {"type": "message", "message": {"role": "user", "content": "hello"}}
    if kind == "tool":
        return tool_message("x", None, "read")
    return {"type": "custom", "customType": "x-other", "data": {"characterId": CHARACTER}}


steps = st.tuples(
    st.one_of(
        st.tuples(st.just("roleplay"), actions),
        st.tuples(st.just("other"), other_entries),
        st.tuples(st.just("checkpoint"), st.sampled_from([CHARACTER, CHARACTER, "bob", "broken"])),
    ),
    st.integers(min_value=0, max_value=7),  # 0: the parent is an earlier entry (a branch); else the last one
    st.integers(min_value=0, max_value=1 << 30),
)
_sessions = itertools.count()


def build_tree(plan: list[tuple], roleplay: str) -> list[dict[str, Any]]:
    """The entries of ``plan``: with every kind of roleplay entry (``roleplay="all"``),
    with turn results only (``"turns"``: no roleplay ``custom`` entry), or
    with none (``"none"``: every roleplay step becomes a user message)."""
    entries: list[dict[str, Any]] = []
    for index, ((kind, what), jump, pick) in enumerate(plan):
        parent = entries[-1]["id"] if entries else None
        if entries and jump == 0:
            parent = entries[pick % len(entries)]["id"]
        if kind == "roleplay" and (roleplay == "all" or (roleplay == "turns" and what[0] == "turn")):
            body = entry_for(what, index)
        elif kind == "checkpoint" and roleplay == "all":
            path = get_path_to_leaf(entries, parent) if parent is not None else []
            data = make_checkpoint_data(reduce_branch(path, CHARACTER if what == "broken" else what))
            if what == "broken":
                data["stateHash"] = "0" * 64
            body = {"type": "custom", "customType": schema.CHECKPOINT_TYPE, "data": orjson.loads(orjson.dumps(data))}
        else:
            body = _other(what if kind == "other" else "user")
        entries.append({**body, "id": f"n{index:05d}", "parentId": parent, "timestamp": STAMP})
    return entries


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(steps, min_size=1, max_size=30),
    roleplay=st.sampled_from(["all", "turns", "none"]),
    at=st.integers(min_value=0, max_value=1 << 30),
    character=st.sampled_from([None, None, CHARACTER, "bob"]),
    chunk=st.sampled_from([1, 2, 3, 5, 256]),
    created=st.integers(min_value=1, max_value=30),
)
def test_the_state_at_any_entry_is_the_whole_paths_reduction(provider, plan, roleplay, at, character, chunk, created):
    """Small chunks make the keyed path read slices far from the leaf (by the
    jumps). The first ``created`` entries are stored with the session, the
    others appended one by one (each storage's two ways of writing facts)."""
    entries = build_tree(plan, roleplay)
    session_id = f"rp-{next(_sessions)}"
    provider.create_session(session_id=session_id, entries=entries[:created])
    for entry in entries[created:]:
        if provider.get_session(session_id)["leaf_entry_id"] != entry["parentId"]:
            provider.switch_leaf(session_id, entry["parentId"])
        assert provider.append_entry(session_id, dict(entry)) == entry
    leaf = entries[at % len(entries)]["id"]
    walked = walked_detail(provider, session_id, leaf, character)
    other = entries[(at // 7) % len(entries)]["id"]
    walked_diff = walked_diffs(provider, session_id, [(leaf, other), (other, leaf)], character)
    with patched(reads, "CHUNK", chunk), patched(reads, "walked_path_ids", no_walk):
        check_states(provider, session_id, entries, leaf, character)
        assert inspect_state_detail(provider, session_id, leaf_entry_id=leaf, character_id=character) == walked
        assert keyed_diffs(provider, session_id, [(leaf, other), (other, leaf)], character) == walked_diff


def keyed_diffs(provider, session_id: str, pairs: list[tuple[str, str]], character: str | None) -> list[Any]:
    """``diff_states`` of each pair, or the error it raised."""
    out: list[Any] = []
    for a, b in pairs:
        try:
            out.append(reads.diff_states(provider, session_id, a, b, character_id=character))
        except Exception as exc:  # compared with the walked reads' error
            out.append((type(exc).__name__, str(exc)))
    return out


def walked_diffs(provider, session_id: str, pairs: list[tuple[str, str]], character: str | None) -> list[Any]:
    """``keyed_diffs`` as read before issue 23: both whole paths walked and compared from the root."""

    def linear(a, b):
        n = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            n += 1
        return n

    with patched(reads, "reduce_keyed", lambda *args: None), patched(reads, "_common_prefix_length", linear):
        return keyed_diffs(provider, session_id, pairs, character)


def walked_detail(provider, session_id: str, leaf: str, character: str | None) -> dict[str, Any]:
    """The state panel's detail as it was read before issue 23: the whole path walked."""
    with patched(reads, "reduce_keyed", lambda *args: None):
        return dict(inspect_state_detail(provider, session_id, leaf_entry_id=leaf, character_id=character))


def no_walk(view: Any, session_id: str, leaf_entry_id: str | None) -> list[str]:
    """The whole-path walk, refused: every stored leaf has exact facts here."""
    assert leaf_entry_id is None, "walked the whole path"
    return []


@contextlib.contextmanager
def patched(module: Any, name: str, value: Any):
    before = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, before)


def check_states(provider, session_id: str, entries: list[dict[str, Any]], leaf: str, character: str | None) -> None:
    expected = reduce_branch(get_path_to_leaf(entries, leaf), character)
    assert inspect_state(provider, session_id, leaf_entry_id=leaf, character_id=character) == expected
    queue = review_queue(provider, session_id, leaf_entry_id=leaf, character_id=character)
    assert queue["character_id"] == expected["character_id"]
    # The session's own leaf (its last entry) and the empty path.
    assert inspect_state(provider, session_id, character_id=character) == reduce_branch(
        get_path_to_leaf(entries, entries[-1]["id"]), character
    )
    assert inspect_state(provider, session_id, leaf_entry_id=None, character_id=character) == reduce_branch(
        [], character
    )


def test_an_unknown_entry_is_not_found_in_a_session_without_roleplay(provider):
    provider.create_session(session_id="plain", entries=long_session(30))
    with pytest.raises(EntryNotFound):
        inspect_state(provider, "plain", leaf_entry_id="nope")


# --- what it reads ---------------------------------------------------------------------------


def statements(provider, session_id: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        state = inspect_state(provider, session_id)
    assert state["character_id"] is None and state["revision"] == 0
    return len(queries)


def test_a_session_without_roleplay_costs_the_same_statements_at_any_length(provider):
    """One slice of the path (the head), then the two reads by key that find
    no roleplay entry: the same at 1,000 and 5,000 entries (a path shorter
    than a slice is read whole in one, fewer)."""
    provider.create_session(session_id="tiny", entries=long_session(200))
    provider.create_session(session_id="short", entries=long_session(1000))
    provider.create_session(session_id="long", entries=long_session(5000))
    for session_id in ("tiny", "short", "long"):
        inspect_state(provider, session_id)  # warm (the file index)
    tiny, short, long = (statements(provider, session_id) for session_id in ("tiny", "short", "long"))
    assert short == long, (short, long)
    assert tiny <= long <= 6, (tiny, long)


def long_roleplay_session(count: int, *, lock_at: int = 40, every: int = 300) -> list[dict[str, Any]]:
    """``count`` entries: plain messages, an identity selection and a turn
    result near the root (the lock), turn results now and then, a side
    branch with a checkpoint of another character every 97 entries, and a
    checkpoint of the character every ``every`` entries of the main path
    (the last ~``every/2`` before the leaf)."""
    entries: list[dict[str, Any]] = []
    path: list[dict[str, Any]] = []

    def add(body: dict[str, Any], parent: str | None, *, on_path: bool = True) -> None:
        entry = {**body, "id": f"r{len(entries):07x}", "parentId": parent, "timestamp": STAMP}
        entries.append(entry)
        if on_path:
            path.append(entry)

    turn = 0
    while len(entries) < count:
        at = len(entries)
        leaf = path[-1]["id"] if path else None
        if at == lock_at - 1:
            add({"type": "custom", "customType": schema.IDENTITY_TYPE, "data": {"characterId": CHARACTER}}, leaf)
        elif at > lock_at and at % every == every // 2 + 1:
            data = orjson.loads(orjson.dumps(make_checkpoint_data(reduce_branch(path, None))))
            add({"type": "custom", "customType": schema.CHECKPOINT_TYPE, "data": data}, leaf)
        elif at >= lock_at and at % 10 == 0:
            turn += 1
            add(entry_for(("turn", CHARACTER, [{"op": "add", "path": "/a", "value": turn % 5}], [turn], []), at), leaf)
        elif at > lock_at and at % 97 == 0:
            data = make_checkpoint_data(reduce_branch(path, "bob"))
            add({"type": "custom", "customType": schema.CHECKPOINT_TYPE, "data": data}, leaf, on_path=False)
        else:
            add(_other("assistant" if at % 2 else "user"), leaf)
    return entries


def test_a_long_roleplay_path_is_read_by_key_and_reduces_as_whole(provider):
    entries = long_roleplay_session(1500)
    provider.create_session(session_id="long-rp", entries=entries)
    leaves = [entries[-1]["id"], entries[-1 - 150]["id"], entries[700]["id"], entries[45]["id"], entries[3]["id"]]
    for leaf in leaves:
        for character in (None, CHARACTER, "bob"):
            expected = reduce_branch(get_path_to_leaf(entries, leaf), character)
            walked = walked_detail(provider, "long-rp", leaf, character)
            assert walked["revision"] == expected["revision"]
            with patched(reads, "walked_path_ids", no_walk):
                assert inspect_state(provider, "long-rp", leaf_entry_id=leaf, character_id=character) == expected
                detail = inspect_state_detail(provider, "long-rp", leaf_entry_id=leaf, character_id=character)
            assert detail == walked
    # Diffs between branches far apart and close together: read by key, as walked.
    pairs = [(leaves[0], leaves[1]), (leaves[2], leaves[0]), (leaves[3], leaves[4]), (leaves[0], leaves[0])]
    side = next(
        e["id"]
        for e in entries
        if e.get("customType") == schema.CHECKPOINT_TYPE
        and e["id"] not in {p["id"] for p in get_path_to_leaf(entries, entries[-1]["id"])}
    )
    pairs.append((side, leaves[2]))
    for character in (None, CHARACTER, "bob"):
        walked = walked_diffs(provider, "long-rp", pairs, character)
        with patched(reads, "walked_path_ids", no_walk):
            assert keyed_diffs(provider, "long-rp", pairs, character) == walked
    # Far from the leaf by small slices: the jumps find each one's bottom.
    with patched(reads, "walked_path_ids", no_walk), patched(reads, "CHUNK", 3):
        for leaf in leaves:
            expected = reduce_branch(get_path_to_leaf(entries, leaf), None)
            assert inspect_state(provider, "long-rp", leaf_entry_id=leaf) == expected
    state = inspect_state(provider, "long-rp")
    assert state["character_id"] == CHARACTER and state["checkpoint_entry_id"] is not None
    assert state["identity"]["locked_at_entry_id"] is not None


def roleplay_statements(provider, session_id: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        state = inspect_state(provider, session_id)
    assert state["character_id"] == CHARACTER and state["checkpoint_entry_id"] is not None
    return len(queries)


def test_a_roleplay_session_costs_the_same_statements_at_any_length(provider):
    provider.create_session(session_id="rp-short", entries=long_roleplay_session(1000, every=100))
    provider.create_session(session_id="rp-long", entries=long_roleplay_session(5000, every=100))
    inspect_state(provider, "rp-short")
    inspect_state(provider, "rp-long")  # warm (the file index)
    short, long = roleplay_statements(provider, "rp-short"), roleplay_statements(provider, "rp-long")
    assert short == long, (short, long)
    assert long <= 12, long
    # The state panel's detail (the admin's and the API's state view) reads the same way.
    counts = []
    for session_id in ("rp-short", "rp-long"):
        with CaptureQueriesContext(connection) as queries:
            detail = inspect_state_detail(provider, session_id)
        assert detail["character_id"] == CHARACTER and detail["provenance"]
        counts.append(len(queries))
    assert counts[0] == counts[1] <= 14, counts


def test_turn_results_far_from_the_root_are_found_without_custom_entries(provider):
    """No roleplay ``custom`` entry anywhere, the first turn result 600 entries
    down: the session has roleplay entries (found by its tool name), so the
    state is the turns' (not the empty path's)."""
    entries = long_session(1000)
    last = entries[-1]["id"]
    for i in range(3):
        turn = entry_for(("turn", CHARACTER, [{"op": "add", "path": "/a", "value": i}], [i], []), i)
        entries.append({**turn, "id": f"t{i:07x}", "parentId": last})
        last = entries[-1]["id"]
    provider.create_session(session_id="late-turns", entries=entries)
    with patched(reads, "walked_path_ids", no_walk):
        for character in (None, CHARACTER, "bob"):
            expected = reduce_branch(get_path_to_leaf(entries, last), character)
            assert inspect_state(provider, "late-turns", character_id=character) == expected
    assert inspect_state(provider, "late-turns")["revision"] == 3


def test_the_state_pages_tips_are_read_by_key(provider, monkeypatch):
    """The roleplay state and diff pages' suggested tips of a session longer
    than ``TIPS_SCAN`` entries: the branch tips among its last ``TIPS_SCAN``
    entries (append order; the latest ``TIPS_SHOWN`` of them), read by key,
    and whether the entry looked at lies on the active path by the path
    facts: what the whole shape says of those entries."""
    from roleplay.admin import pages
    from sessiontree.selectors import entry_context
    from sessiontree.selectors.tree_window import clear_shape_cache, read_skeleton
    from tests.whole_reads import whole_reads_refused

    monkeypatch.setattr(entry_context, "TIPS_SCAN", 1000)  # the session is longer: read by key
    entries = long_roleplay_session(1500)
    provider.create_session(session_id="tips", entries=entries)
    path_ids = {e["id"] for e in get_path_to_leaf(entries, entries[-1]["id"])}
    off_path = next(e["id"] for e in entries if e["id"] not in path_ids)
    clear_shape_cache()
    with provider.read("tips") as view:
        skeleton = read_skeleton(view)
    assert pages.read_tips(provider, "tips").tips[-1]["is_leaf"]
    with whole_reads_refused(provider, monkeypatch):
        for at in (None, entries[-1]["id"], entries[700]["id"], off_path, "nope"):
            tips = pages.read_tips(provider, "tips", at=at)
            assert [tip["id"] for tip in tips.tips] == [
                t for t in skeleton.tips if t in {e["id"] for e in entries[-1000:]}
            ]
            assert tips.at_on_active_path == (at in skeleton.active if at is not None else True)
            assert tips.tips[-1] == {"id": entries[-1]["id"], "is_leaf": True}
    # More tips than shown, or a scan that stops early: the latest of those read.
    monkeypatch.setattr(pages, "TIPS_SHOWN", 3)
    with whole_reads_refused(provider, monkeypatch):
        assert [tip["id"] for tip in pages.read_tips(provider, "tips").tips] == skeleton.tips[-3:]
        with provider.read("tips") as view:
            assert entry_context.recent_tips(view, 50, scan=200) == [
                tip for tip in skeleton.tips if tip in {e["id"] for e in entries[-200:]}
            ]


def test_the_state_pages_tips_cost_the_same_statements_past_the_scan(provider, monkeypatch):
    from roleplay.admin import pages
    from sessiontree.selectors import entry_context

    monkeypatch.setattr(entry_context, "TIPS_SCAN", 500)
    provider.create_session(session_id="short", entries=long_roleplay_session(1000))
    provider.create_session(session_id="long", entries=long_roleplay_session(4000))
    counts = []
    for session_id, at in (("short", "r00003e8"), ("long", "r0000fa0")):
        pages.read_tips(provider, session_id)  # warm: the file index
        with CaptureQueriesContext(connection) as queries:
            tips = pages.read_tips(provider, session_id, at=at)
        assert tips.tips and tips.at_on_active_path is False
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
