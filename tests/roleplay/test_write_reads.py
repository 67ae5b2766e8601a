"""Roleplay writes read the branch by key (issue 23).

Every write (``correct_state``, ``amend_review``, ``decide_review``,
``repair_turn``, ``create_checkpoint``, ``archive``, and the compaction's
automatic checkpoint) gives exactly what it gave when it read the whole
path (random trees on both providers, Hypothesis: the same entries and
states planned, or the same error), never walks the whole path of a long
session, and sends the same statements at any length.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay import schema
from roleplay.reducer import reduce_branch
from roleplay.services import branch as branch_module
from roleplay.services import history, planning, reads, writes
from sessiontree.core import entry_keys
from sessiontree.core.types import UNSET, Unset
from tests.roleplay.test_reducer_properties import CHARACTER, patch_ops, review_ids, review_ops, turn_ids, values
from tests.roleplay.test_state_reads import build_tree, long_roleplay_session, no_walk, patched, steps

pytestmark = pytest.mark.django_db


# --- the branch as it was read before issue 23 ------------------------------------------------


class WholePath:
    """``branch.BranchPath`` over the whole path: what the writes scanned before."""

    def __init__(self, path: list[dict[str, Any]]) -> None:
        self._path = path

    def entry(self, entry_id: str) -> dict[str, Any] | None:
        return next((e for e in self._path if e.get("id") == entry_id), None)

    def latest(self, match: Any) -> dict[str, Any] | None:
        return next((e for e in reversed(self._path) if match(e)), None)

    def keyed(self, key: str, match: Any) -> list[dict[str, Any]]:
        return [e for e in self._path if entry_keys.entry_key(e) == key and match(e)]

    def keys_complete(self) -> bool:
        return True


@contextlib.contextmanager
def whole_path_branch(provider, session_id: str, leaf_entry_id: str | Unset | None = UNSET):
    if isinstance(leaf_entry_id, Unset):
        leaf_entry_id = provider.get_session(session_id)["leaf_entry_id"]
    path = provider.get_active_path(session_id, leaf_entry_id)
    yield {"leaf_entry_id": leaf_entry_id, "state": reduce_branch(path), "reduced": path, "path": WholePath(path)}


@contextlib.contextmanager
def whole_path_reads():
    with patched(branch_module, "read_branch", whole_path_branch), patched(history, "read_branch", whole_path_branch):
        yield


class NoWholePath:
    """A provider whose whole-path read fails the test; the rest is the real one's."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_active_path(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read the whole path")


@contextlib.contextmanager
def by_key_only():
    """The whole path neither read (``NoWholePath``) nor walked (``reads.walked_path_ids``)."""
    with patched(reads, "walked_path_ids", no_walk):
        yield


# --- the writes ---------------------------------------------------------------------------


def call(provider, session_id: str, write: tuple, leaf: str) -> Any:
    """Run ``write`` as ``plan_write`` (everything but the append)."""
    common = {"session_id": session_id, "actor": "system", "channel": "internal", "provider": provider}
    kind = write[0]
    if kind == "correct":
        return planning.plan_write(writes.correct_state, payload=write[1], **common)
    if kind == "amend":
        return planning.plan_write(writes.amend_review, review_id=write[1], value=write[2], **common)
    if kind == "decide":
        value = UNSET if write[3] is None else write[3]
        return planning.plan_write(writes.decide_review, review_id=write[1], decision=write[2], value=value, **common)
    if kind == "repair":
        return planning.plan_write(writes.repair_turn, proposal=write[1], **common)
    if kind == "checkpoint":
        return planning.plan_write(writes.create_checkpoint, **common)
    if kind == "archive":
        return planning.plan_write(writes.archive, reason=write[1], **common)
    assert kind == "compaction"
    return planning.plan_write(history.checkpoint_after_compaction, compaction={"id": leaf}, **common)


@contextlib.contextmanager
def fixed_commit_ids():
    """The commit ids a write makes up, the same on every run."""
    with patched(schema, "new_commit_id", lambda: "commit-made"):
        yield


def outcome(provider, session_id: str, write: tuple, leaf: str) -> Any:
    """The plan without its clock, or the error raised."""
    try:
        with fixed_commit_ids():
            plan = dict(call(provider, session_id, write, leaf))
    except Exception as exc:  # compared with the whole path's error
        return (type(exc).__name__, str(exc))
    plan["entries"] = [{k: v for k, v in entry.items() if k != "timestamp"} for entry in plan["entries"]]
    return plan


# A commit named by how far before the leaf it was made (``commit-{index}``, see
# ``entry_for``; on the branch or not, of the character or not), or none such.
commit_ids = st.one_of(st.just(0), st.integers(min_value=0, max_value=6), st.just("commit-none"))
corrections = st.one_of(
    st.builds(
        lambda op, path, value, corrects: {
            "op": op,
            "path": path,
            "value": value,
            "reason": "r",
            **({} if corrects is None else {"correctsCommitId": corrects}),
        },
        st.sampled_from(["add", "replace"]),
        st.sampled_from(["/a", "/b", "/c", "/n/x", "/l"]),
        values,
        st.one_of(st.none(), commit_ids),
    ),
    st.builds(lambda ops: {"ops": ops, "reason": "r"}, st.lists(patch_ops, min_size=1, max_size=3)),
)
repairs = st.builds(
    lambda turn, ops, reviews: {
        "turnId": turn,
        "ops": ops,
        "reason": "r",
        "reviews": [{"reviewId": r, "op": op, "note": ""} for r, op in reviews],
    },
    turn_ids,
    st.lists(patch_ops, max_size=2),
    st.lists(st.tuples(review_ids, review_ops), max_size=2, unique_by=lambda r: r[0]),
)
write_calls = st.one_of(
    st.tuples(st.just("correct"), corrections),
    st.tuples(st.just("amend"), review_ids, values),
    st.tuples(st.just("decide"), review_ids, st.sampled_from(["accept", "reject"]), st.one_of(st.none(), values)),
    st.tuples(st.just("repair"), repairs),
    st.just(("checkpoint",)),
    st.tuples(st.just("archive"), st.one_of(st.none(), st.just("done"))),
    st.just(("compaction",)),
)
_sessions = itertools.count()


def _step(action: tuple) -> tuple:
    return (("roleplay", action), 1, 0)  # a child of the entry before


# Every tree starts with a character whose state has values, reviews and incomplete turns to write against.
OPENING = [
    _step(("identity", CHARACTER)),
    _step(
        (
            "turn",
            CHARACTER,
            [
                {"op": "add", "path": "/a", "value": 1},
                {"op": "add", "path": "/b", "value": 2},
                {"op": "add", "path": "/n", "value": {}},
                {"op": "add", "path": "/l", "value": [1]},
            ],
            [],
            [("r0", {"op": "add", "path": "/c", "value": 3}), ("r1", {"op": "replace", "path": "/a", "value": 4})],
        )
    ),
    _step(("status", "t0", "incomplete")),
    _step(("status", "t1", "incomplete")),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(steps, min_size=1, max_size=30),
    at=st.integers(min_value=0, max_value=1 << 30),
    calls=st.lists(write_calls, min_size=1, max_size=4),
    chunk=st.sampled_from([1, 2, 3, 256]),
)
def test_every_write_gives_what_it_gave_reading_the_whole_path(provider, plan, at, calls, chunk):
    """Small chunks make the keyed path read slices far from the leaf (by the jumps)."""
    entries = build_tree([*OPENING, *plan], "all")
    session_id = f"rw-{next(_sessions)}"
    provider.create_session(session_id=session_id, entries=entries)
    index = len(OPENING) - 1 + at % (len(entries) - len(OPENING) + 1)  # the opening's last entry or later
    leaf = entries[index]["id"]
    provider.switch_leaf(session_id, leaf)
    for write in calls:
        if write[0] == "correct" and isinstance(write[1].get("correctsCommitId"), int):
            write = ("correct", {**write[1], "correctsCommitId": f"commit-{index - write[1]['correctsCommitId']}"})
        with whole_path_reads():
            expected = outcome(provider, session_id, write, leaf)
        with by_key_only(), patched(reads, "CHUNK", chunk):
            assert outcome(NoWholePath(provider), session_id, write, leaf) == expected, write


# --- a long session: by key, and the same statements at any length ------------------------------

REVIEW = "long-review"
TURN = "long-turn"


def long_session(provider, session_id: str, count: int) -> dict[str, Any]:
    """``long_roleplay_session`` with a turn proposing a review and a turn
    marked incomplete at the leaf; its leaf and its first and last commits."""
    entries = long_roleplay_session(count, every=100)
    provider.create_session(session_id=session_id, entries=entries)
    review = {"reviewId": REVIEW, "op": {"op": "add", "path": "/trust", "value": 1}, "note": ""}
    commit = {"commitId": "long-last", "ops": [{"op": "add", "path": "/mood", "value": "calm"}], "reviews": [review]}
    message = schema.build_turn_result_message(tool_call_id="long", character_id=CHARACTER, commit=commit)
    provider.append_message(session_id, message)
    data = schema.build_turn_status_data(character_id=CHARACTER, turn_id=TURN, status="incomplete")
    leaf = provider.append_custom_entry(session_id, schema.TURN_STATUS_TYPE, data)["id"]
    first = next(e for e in entries if schema.roleplay_entry_kind(e) == "turn")
    return {"leaf": leaf, "first": first["message"]["details"]["commit"]["commitId"], "last": "long-last"}


def long_writes(facts: dict[str, Any]) -> dict[str, tuple]:
    def correction(**extra: Any) -> dict[str, Any]:
        return {"op": "replace", "path": "/a", "value": -1, "reason": "r", **extra}

    repair = {"turnId": TURN, "ops": [{"op": "add", "path": "/repaired", "value": True}], "reason": "r"}
    return {
        "correct": ("correct", correction()),
        "correct_recent": ("correct", correction(correctsCommitId=facts["last"])),
        "correct_old": ("correct", correction(correctsCommitId=facts["first"])),
        "correct_unknown": ("correct", correction(correctsCommitId="commit-none")),
        "amend": ("amend", REVIEW, 2),
        "accept": ("decide", REVIEW, "accept", None),
        "reject": ("decide", REVIEW, "reject", None),
        "repair": ("repair", repair),
        "checkpoint": ("checkpoint",),
        "archive": ("archive", None),
        "compaction": ("compaction",),
    }


def test_every_write_on_a_long_session_reads_by_key(provider):
    facts = long_session(provider, "long-writes", 1500)
    leaf = facts["leaf"]
    for name, write in long_writes(facts).items():
        with whole_path_reads():
            expected = outcome(provider, "long-writes", write, leaf)
        with by_key_only():
            assert outcome(NoWholePath(provider), "long-writes", write, leaf) == expected, name
    # For real: appended by key, each one what its plan said.
    for name in ("correct", "correct_recent", "amend", "accept", "repair", "checkpoint", "archive", "compaction"):
        write = long_writes(facts)[name]
        planned = outcome(provider, "long-writes", write, leaf)["entries"][-1]
        with by_key_only(), fixed_commit_ids():
            written = real_write(NoWholePath(provider), "long-writes", write, leaf)
        assert written["parentId"] == leaf, name
        assert {k: written.get(k) for k in ("type", "customType", "data")} == {
            k: planned.get(k) for k in ("type", "customType", "data")
        }, name
    # A commit near the root, named: read back from the leaf by slices, never walked.
    old = ("correct", {"op": "replace", "path": "/a", "value": -1, "reason": "r", "correctsCommitId": facts["first"]})
    with whole_path_reads():
        expected = outcome(provider, "long-writes", old, leaf)
    with by_key_only():
        assert outcome(NoWholePath(provider), "long-writes", old, leaf) == expected
    assert expected["entries"][0]["data"]["correctsCommitId"] == facts["first"]
    # The commit named is the leaf's own.
    turn = provider.get_entry("long-writes", leaf)["parentId"]
    provider.switch_leaf("long-writes", turn)
    named = ("correct", {"op": "replace", "path": "/a", "value": -1, "reason": "r", "correctsCommitId": "long-last"})
    with whole_path_reads():
        expected = outcome(provider, "long-writes", named, turn)
    with by_key_only():
        assert outcome(NoWholePath(provider), "long-writes", named, turn) == expected
    assert expected["entries"][0]["data"]["correctsCommitId"] == "long-last"


def real_write(provider, session_id: str, write: tuple, leaf: str) -> dict[str, Any]:
    """Run ``write`` for real (appending), then move the leaf back; the last entry it appended."""
    common = {"session_id": session_id, "actor": "system", "channel": "internal", "provider": provider}
    kind = write[0]
    if kind == "correct":
        entry = writes.correct_state(payload=write[1], **common)
    elif kind == "amend":
        entry = writes.amend_review(review_id=write[1], value=write[2], **common)
    elif kind == "decide":
        entry = writes.decide_review(review_id=write[1], decision=write[2], **common)
    elif kind == "repair":
        entry = writes.repair_turn(proposal=write[1], **common)
    elif kind == "checkpoint":
        entry = writes.create_checkpoint(**common)
    elif kind == "archive":
        entry = writes.archive(reason=write[1], **common)
    else:
        found = history.checkpoint_after_compaction(compaction={"id": leaf}, **common)
        assert found is not None
        entry = found
    provider.switch_leaf(session_id, leaf)
    return dict(entry)


def write_statements(provider, session_id: str, write: tuple, leaf: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        real_write(provider, session_id, write, leaf)
    return len(queries)


def test_each_write_sends_the_same_statements_at_any_length(provider):
    """``correct_old`` names the session's first commit: found by its key,
    not by reading the path back to it (which grew with the session)."""
    facts = {size: long_session(provider, f"rw-{size}", size) for size in (1000, 5000)}
    for name in (
        "correct",
        "correct_recent",
        "correct_old",
        "amend",
        "accept",
        "repair",
        "checkpoint",
        "archive",
        "compaction",
    ):
        counts = []
        for size, found in facts.items():
            write = long_writes(found)[name]
            real_write(provider, f"rw-{size}", write, found["leaf"])  # warm (the file index)
            counts.append(write_statements(provider, f"rw-{size}", write, found["leaf"]))
        assert counts[0] == counts[1] <= 20, (name, counts)


def test_where_the_path_facts_cannot_say_the_writes_walk_the_path(provider):
    """Facts that are not exact (``reduce_keyed`` gives up), or rows that
    disagree with them met by a check after the reduction (``PathUnclear``):
    the walked path, and the same results as reading it whole."""
    facts = long_session(provider, "unclear", 700)
    leaf = facts["leaf"]
    named_old = (
        "correct",
        {"op": "replace", "path": "/a", "value": -1, "reason": "r", "correctsCommitId": facts["first"]},
    )
    cases = {**long_writes(facts), "correct_old": named_old}
    keyed_read = reads.KeyedPath._read
    walks = []

    def unclear_after_reducing(self, low: int, bottom: int) -> None:
        if not self.reducing:
            raise reads.PathUnclear
        keyed_read(self, low, bottom)

    def unclear(self, ids):
        raise reads.PathUnclear

    def counted_walk(view, session_id, leaf_entry_id):
        walks.append(leaf_entry_id)
        return walked(view, session_id, leaf_entry_id)

    walked = reads.walked_path_ids
    for name, write in cases.items():
        with whole_path_reads():
            expected = outcome(provider, "unclear", write, leaf)
        with patched(reads, "reduce_keyed", lambda *args: None):
            assert outcome(NoWholePath(provider), "unclear", write, leaf) == expected, name
        with (
            patched(reads.KeyedPath, "_read", unclear_after_reducing),
            patched(reads.KeyedPath, "on_path", unclear),
            patched(reads, "walked_path_ids", counted_walk),
        ):
            assert outcome(NoWholePath(provider), "unclear", write, leaf) == expected, name
    assert walks  # the named commits far from the leaf, the unknown one


@contextlib.contextmanager
def counted_file_reads():
    """The entries the ``file`` storage's reads decode or take from its cache
    (``FileIndex.read``), one count a call, while the block runs."""
    from sessiontree.providers import file_provider

    counted: list[int] = []
    index_read = file_provider.FileIndex.read

    def counting_read(self, fd, positions):
        counted.append(len(positions))
        return index_read(self, fd, positions)

    with patched(file_provider.FileIndex, "read", counting_read):
        yield counted


def test_a_correction_naming_the_first_commit_reads_as_many_entries_at_any_length(provider):
    """The ``file`` storage sends no statements for a read: the entries its
    reads decode (or take from its cache) are counted, and on ``mysql`` the
    statements it sends. Naming the first commit of the session reads the
    same at 1,000 and at 5,000 entries (by key: reading the path back to it
    read every entry in between)."""
    reads_by_size = []
    for size in (1000, 5000):
        found = long_session(provider, f"old-{size}", size)
        write = long_writes(found)["correct_old"]
        real_write(provider, f"old-{size}", write, found["leaf"])  # warm (the file index)
        with counted_file_reads() as counted, CaptureQueriesContext(connection) as queries:
            written = real_write(provider, f"old-{size}", write, found["leaf"])
        assert written["data"]["correctsCommitId"] == found["first"]
        reads_by_size.append((sum(counted), len(queries)))
    assert reads_by_size[0] == reads_by_size[1], reads_by_size


def test_on_file_a_correction_naming_no_commit_of_the_branch_reads_as_many_entries_at_any_length(tmp_path, db):
    """The error path: a commit that is on no branch, and one on another
    branch. The ``file`` index knows every entry's key (``keys_complete``),
    so finding none on the path proves there is none: the same entries read
    at 1,000 and 5,000 entries (reading the path back read them all). On
    ``mysql`` a key is only a hint (a row stored by a process without the
    rule has none): the path is still read back there."""
    from tests.contract.conftest import make_provider

    provider = make_provider("file", tmp_path)
    reads_by_size = []
    for size in (1000, 5000):
        found = long_session(provider, f"none-{size}", size)
        # Above the turn that made "long-last": that commit is on another branch.
        turn = provider.get_entry(f"none-{size}", found["leaf"])["parentId"]
        leaf = provider.get_entry(f"none-{size}", turn)["parentId"]
        provider.switch_leaf(f"none-{size}", leaf)
        counts = []
        for commit in ("commit-none", "long-last"):
            write = ("correct", {"op": "replace", "path": "/a", "value": -1, "reason": "r", "correctsCommitId": commit})
            with whole_path_reads():
                expected = outcome(provider, f"none-{size}", write, leaf)
            assert expected[0] == "RoleplayValidationError" and commit in expected[1], expected
            with counted_file_reads() as counted:
                assert outcome(provider, f"none-{size}", write, leaf) == expected
            counts.append(sum(counted))
        reads_by_size.append(counts)
    assert reads_by_size[0] == reads_by_size[1], reads_by_size
