"""Property: reducing a path whole equals reducing it through checkpoints.

Random sequences of roleplay entries (commits that may fail, reviews with
decisions and amendments, turn markers, repairs, entries of another character,
free text) are reduced once whole, and once with checkpoints of the prefix
inserted at random points (each checkpoint stored through a JSON round trip).
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay import schema
from roleplay.reducer import make_checkpoint_data, reduce_branch, reduce_branch_from_ids

CHARACTER = "alice"
KEYS = ["/a", "/b", "/c"]
values = st.integers(min_value=0, max_value=5)
keys = st.sampled_from(KEYS)

patch_ops = st.one_of(
    st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, keys, values),
    st.builds(lambda p, v: {"op": "replace", "path": p, "value": v}, keys, values),
    st.builds(lambda p: {"op": "remove", "path": p}, keys),
    st.builds(lambda p, v: {"op": "test", "path": p, "value": v}, keys, values),
    st.builds(lambda f, p: {"op": "move", "from": f, "path": p}, keys, keys),
    st.builds(lambda f, p: {"op": "copy", "from": f, "path": p}, keys, keys),
    st.just({"op": "add", "path": "/n", "value": {}}),
    st.builds(lambda v: {"op": "add", "path": "/n/x", "value": v}, values),
    st.just({"op": "add", "path": "/l", "value": []}),
    st.builds(lambda v: {"op": "add", "path": "/l/-", "value": v}, values),
    st.just({"op": "remove", "path": "/l/0"}),
)
review_ops = st.one_of(
    st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, keys, values),
    st.builds(lambda p, v: {"op": "replace", "path": p, "value": v}, keys, values),
    st.builds(lambda p: {"op": "remove", "path": p}, keys),
)
review_ids = st.sampled_from(["r0", "r1", "r2", "r3"])
turn_ids = st.sampled_from(["t0", "t1", "t2"])
characters = st.sampled_from([CHARACTER, CHARACTER, CHARACTER, "bob"])

actions = st.one_of(
    st.tuples(
        st.just("turn"),
        characters,
        st.lists(patch_ops, max_size=3),
        st.lists(values, max_size=2),
        st.lists(st.tuples(review_ids, review_ops), max_size=2, unique_by=lambda r: r[0]),
    ),
    st.tuples(st.just("commit"), characters, st.lists(patch_ops, min_size=1, max_size=3)),
    st.tuples(st.just("decide"), review_ids, st.sampled_from(["accept", "reject"])),
    st.tuples(st.just("amend"), review_ids, values),
    st.tuples(st.just("status"), turn_ids, st.sampled_from(["incomplete", "complete"])),
    st.tuples(st.just("repair"), turn_ids, st.lists(patch_ops, max_size=2)),
    st.tuples(st.just("archive")),
    st.tuples(st.just("text")),
    st.tuples(st.just("summary")),
    st.tuples(st.just("identity"), characters),
)


def custom(custom_type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "custom", "customType": custom_type, "data": data}


def entry_for(action: tuple, index: int) -> dict[str, Any]:
    kind = action[0]
    commit_id = f"commit-{index}"
    if kind == "turn":
        _, character, ops, events, reviews = action
        commit = {
            "commitId": commit_id,
            "ops": ops,
            "events": [{"summary": f"event {v}"} for v in events],
            "reviews": [{"reviewId": rid, "op": op, "note": ""} for rid, op in reviews],
        }
        body = {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": f"call-{index}",
                "toolName": schema.TURN_TOOL_NAME,
                "content": [],
                "details": {"characterId": character, "commit": commit},
                "isError": False,
            },
        }
    elif kind == "commit":
        body = custom(
            schema.COMMIT_TYPE, {"commitId": commit_id, "characterId": action[1], "source": "turn", "ops": action[2]}
        )
    elif kind == "decide":
        body = custom(
            schema.REVIEW_DECISION_TYPE, {"reviewId": action[1], "characterId": CHARACTER, "decision": action[2]}
        )
    elif kind == "amend":
        body = custom(
            schema.REVIEW_AMENDMENT_TYPE, {"reviewId": action[1], "characterId": CHARACTER, "value": action[2]}
        )
    elif kind == "status":
        body = custom(schema.TURN_STATUS_TYPE, {"characterId": CHARACTER, "turnId": action[1], "status": action[2]})
    elif kind == "repair":
        repair_commit = {"commitId": commit_id, "source": "repair", "ops": action[2]}
        body = custom(schema.REPAIR_TYPE, {"characterId": CHARACTER, "turnId": action[1], "commit": repair_commit})
    elif kind == "archive":
        body = custom(schema.ARCHIVE_TYPE, {"characterId": CHARACTER})
    elif kind == "text":
        body = {"type": "message", "message": {"role": "user", "content": '{"op":"add","path":"/a","value":9}'}}
    elif kind == "summary":
        body = {"type": "branch_summary", "fromId": "e0000", "summary": "Alice has a=9 in another timeline."}
    else:
        body = custom(schema.IDENTITY_TYPE, {"characterId": action[1]})
    return {"id": f"e{index:04d}", "timestamp": "2026-04-19T00:00:00.000Z", **body}


def with_checkpoints(entries: list[dict[str, Any]], split_points: list[int]) -> list[dict[str, Any]]:
    """``entries`` with a checkpoint of everything before each split point inserted there."""
    path: list[dict[str, Any]] = []
    previous = 0
    for number, point in enumerate(sorted(set(split_points))):
        path.extend(entries[previous:point])
        data = make_checkpoint_data(reduce_branch(path, CHARACTER))
        stored = orjson.loads(orjson.dumps(data))  # as a provider would store and load it
        path.append(
            {"id": f"cp{number:04d}", "timestamp": "2026-04-19T00:00:00.000Z", **custom(schema.CHECKPOINT_TYPE, stored)}
        )
        previous = point
    path.extend(entries[previous:])
    return path


def without(result: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in keys}


@settings(max_examples=100, deadline=None)
@given(data=st.data(), action_list=st.lists(actions, max_size=30))
def test_reducing_through_checkpoints_equals_reducing_whole(data, action_list):
    entries = [entry_for(action, index) for index, action in enumerate(action_list)]
    split_points = data.draw(st.lists(st.integers(min_value=0, max_value=len(entries)), min_size=1, max_size=3))

    whole = reduce_branch(entries, CHARACTER)
    split_path = with_checkpoints(entries, split_points)
    split = reduce_branch(split_path, CHARACTER)

    assert split["checkpoint_entry_id"] == f"cp{len(set(split_points)) - 1:04d}"
    assert without(split, "checkpoint_entry_id") == without(whole, "checkpoint_entry_id")
    assert whole["state_hash"] == schema.compute_state_hash(whole["state"])


@settings(max_examples=50, deadline=None)
@given(data=st.data(), action_list=st.lists(actions.filter(lambda a: a[0] != "identity"), max_size=20))
def test_resolved_identity_reduces_the_same_through_checkpoints(data, action_list):
    # The first entry fixes Alice as the session's role, as a first turn would.
    action_list = [("turn", CHARACTER, [], [], []), *action_list]
    entries = [entry_for(action, index) for index, action in enumerate(action_list)]
    split_points = data.draw(st.lists(st.integers(min_value=1, max_value=len(entries)), min_size=1, max_size=2))

    whole = reduce_branch(entries, None)
    split = reduce_branch(with_checkpoints(entries, split_points), None)
    assert whole["character_id"] == split["character_id"] == CHARACTER
    assert without(split, "checkpoint_entry_id") == without(whole, "checkpoint_entry_id")


def loader_of(path: list[dict[str, Any]]):
    """A ``load(ids)`` over ``path`` that records every id it was asked for."""
    by_id = {e["id"]: e for e in path}
    asked: list[str] = []

    def load(ids):
        asked.extend(ids)
        return [by_id[i] for i in ids]

    return load, asked


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    action_list=st.lists(actions, max_size=30),
    chunk=st.integers(min_value=1, max_value=8),
    resolve=st.booleans(),
)
def test_reducing_from_ids_loads_part_of_the_path_and_equals_reducing_it_whole(data, action_list, chunk, resolve):
    entries = [entry_for(action, index) for index, action in enumerate(action_list)]
    split_points = data.draw(st.lists(st.integers(min_value=0, max_value=len(entries)), max_size=3))
    path = with_checkpoints(entries, split_points) if split_points else entries
    character_id = None if resolve else CHARACTER

    load, asked = loader_of(path)
    lazy, cache = reduce_branch_from_ids([e["id"] for e in path], load, character_id, chunk=chunk)
    assert lazy == reduce_branch(path, character_id)
    assert len(asked) == len(set(asked)) == len(cache)  # nothing loaded twice
    if not resolve and split_points and lazy["checkpoint_entry_id"] is not None:
        # Backwards in doubling chunks: at most about twice the tail from the checkpoint is read.
        start = next(i for i, e in enumerate(path) if e["id"] == lazy["checkpoint_entry_id"])
        assert len(asked) <= 2 * (len(path) - 1 - start) + chunk


def test_reducing_from_ids_reads_only_the_head_and_the_tail_of_a_long_path():
    # identity + 1,000 turns, a checkpoint after turn 900: the head (to the lock) and the tail only.
    entries = [entry_for(("identity", CHARACTER), 0)]
    entries += [
        entry_for(("turn", CHARACTER, [{"op": "add", "path": "/a", "value": i % 5}], [], []), i) for i in range(1, 1001)
    ]
    path = with_checkpoints(entries, [901])
    load, asked = loader_of(path)
    state, _ = reduce_branch_from_ids([e["id"] for e in path], load, None, chunk=64)
    assert state == reduce_branch(path, None)
    assert state["checkpoint_entry_id"] == "cp0000" and state["revision"] == 1000
    # Head: the identity and the first turn (which locks it), loaded with their chunk of 64.
    assert "e0000" in asked and "e0001" in asked
    assert len(asked) <= 64 + 64 + 128  # head chunk, then the tail chunks back to the checkpoint
    assert "e0500" not in asked
