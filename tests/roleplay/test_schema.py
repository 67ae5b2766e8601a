"""Roleplay entry shapes: classification, validation with clear errors, builders."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roleplay import schema
from roleplay.schema import RoleplayValidationError
from sessiontree.core import entry_keys
from sessiontree.core.errors import InvalidEntry


def turn_details(**commit_overrides):
    commit = {"commitId": "commit-1", "ops": [{"op": "add", "path": "/hair", "value": "short"}]}
    commit.update(commit_overrides)
    return {"characterId": "alice", "commit": commit}


def commit_data(**overrides):
    data = {"commitId": "commit-7", "characterId": "alice", "source": "turn", "ops": []}
    data.update(overrides)
    return data


def checkpoint_data(state=None, **overrides):
    state = {"hair": "short"} if state is None else state
    data = {
        "characterId": "alice",
        "revision": 2,
        "state": state,
        "events": [],
        "memories": [],
        "reviews": {"pending": [], "decided": []},
        "incompleteTurns": [],
        "provenance": {"/hair": "0000000a"},
        "stateHash": schema.compute_state_hash(state),
    }
    data.update(overrides)
    return data


# --- classification ---


def test_classifies_the_turn_result_and_each_custom_type():
    turn = {
        "type": "message",
        "id": "a",
        "message": {"role": "toolResult", "toolName": "roleplay_finalize_turn", "details": turn_details()},
    }
    assert schema.roleplay_entry_kind(turn) == "turn"
    assert schema.roleplay_payload(turn)["characterId"] == "alice"
    for custom_type, kind in schema.KIND_BY_CUSTOM_TYPE.items():
        entry = {"type": "custom", "id": "b", "customType": custom_type, "data": {"x": 1}}
        assert schema.roleplay_entry_kind(entry) == kind
        assert schema.roleplay_payload(entry) == {"x": 1}


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "message", "message": {"role": "toolResult", "toolName": "bash", "details": turn_details()}},
        {"type": "message", "message": {"role": "assistant", "toolName": "roleplay_finalize_turn"}},
        # A custom *message* is text for the model, never state.
        {"type": "custom_message", "customType": "pi-roleplay-commit", "content": "x", "display": True},
        {"type": "custom", "customType": "pi-something-else", "data": {}},
        {"type": "branch_summary", "fromId": "x", "summary": '{"hair": "short"}'},
        {"type": "message", "message": "not a dict"},
    ],
)
def test_other_entries_are_not_roleplay_entries(entry):
    assert schema.roleplay_entry_kind(entry) is None
    assert schema.validate_roleplay_entry(entry) is None


# --- validation ---


def test_errors_are_typed_invalid_entries_with_their_own_code():
    with pytest.raises(RoleplayValidationError) as info:
        schema.validate_review_decision_data({"reviewId": "review-9", "characterId": "alice", "decision": "maybe"})
    assert isinstance(info.value, InvalidEntry)
    assert info.value.code == "invalid_roleplay_entry"
    assert info.value.http_status == 400
    assert "review-9" in str(info.value) and "'maybe'" in str(info.value)


def test_a_valid_turn_result_passes_unchanged():
    details = turn_details(
        events=[{"summary": "rescue"}], reviews=[{"reviewId": "r1", "op": {"op": "remove", "path": "/x"}}]
    )
    assert schema.validate_turn_result_details(details) is details


@pytest.mark.parametrize(
    ("commit_changes", "message_part"),
    [
        ({"commitId": ""}, "'commitId' is required"),
        ({"ops": "add /hair"}, "'ops' must be a list"),
        ({"ops": [{"op": "increment", "path": "/n"}]}, "unknown or unsupported patch op 'increment'"),
        ({"ops": [{"op": "add", "path": "/n"}]}, "needs a 'value'"),
        ({"ops": [{"op": "add", "path": "hair", "value": 1}]}, "is not a JSON pointer"),
        ({"ops": [{"op": "move", "path": "/a"}]}, "'move' op 'from'"),
        ({"ops": [{"op": "add", "path": "/a", "value": 1}, "remove /b"]}, "op 1"),
        ({"events": {"a": 1}}, "'events' must be a list"),
        ({"reviews": [{"op": {"op": "add", "path": "/a", "value": 1}}]}, "'reviewId' is required"),
        ({"reviews": [{"reviewId": "r1", "op": {"op": "test", "path": "/a", "value": 1}}]}, "review r1"),
        (
            {"reviews": [{"reviewId": "r1", "op": {"op": "remove", "path": "/a"}}] * 2},
            "review r1 is proposed twice",
        ),
    ],
)
def test_a_bad_turn_result_names_the_commit_and_the_problem(commit_changes, message_part):
    with pytest.raises(RoleplayValidationError) as info:
        schema.validate_turn_result_details(turn_details(**commit_changes))
    assert message_part in str(info.value)


def test_turn_result_needs_a_character_and_a_commit():
    with pytest.raises(RoleplayValidationError, match="'characterId' is required"):
        schema.validate_turn_result_details({"commit": turn_details()["commit"]})
    with pytest.raises(RoleplayValidationError, match="the commit must be a JSON object"):
        schema.validate_turn_result_details({"characterId": "alice"})
    with pytest.raises(RoleplayValidationError, match="details must be a JSON object"):
        schema.validate_turn_result_details(None)


def test_a_manual_correction_requires_a_reason_and_an_op():
    ops = [{"op": "replace", "path": "/location", "value": "old town inn"}]
    with pytest.raises(RoleplayValidationError) as info:
        schema.validate_commit_data(commit_data(source="manual-correction", ops=ops))
    assert "commit-7" in str(info.value) and "'reason' is required" in str(info.value)
    with pytest.raises(RoleplayValidationError, match="'reason' is required"):
        schema.validate_commit_data(commit_data(source="manual-correction", ops=ops, reason="   "))
    with pytest.raises(RoleplayValidationError, match="at least one op"):
        schema.validate_commit_data(commit_data(source="manual-correction", ops=[], reason="typo"))
    ok = commit_data(source="manual-correction", ops=ops, reason="wrong place", correctsCommitId="commit-3")
    assert schema.validate_commit_data(ok) is ok


def test_commit_source_and_optional_fields_are_checked():
    with pytest.raises(RoleplayValidationError, match="'source' must be one of turn, manual-correction, repair"):
        schema.validate_commit_data(commit_data(source="revert"))
    with pytest.raises(RoleplayValidationError, match="'correctsCommitId' must be a non-empty string"):
        schema.validate_commit_data(commit_data(correctsCommitId=""))
    with pytest.raises(RoleplayValidationError, match="'characterId' is required"):
        schema.validate_commit_data(commit_data(characterId=None))
    assert schema.validate_commit_data(commit_data(source="repair", reason="fix"))["source"] == "repair"


def test_review_amendment_turn_status_archive_identity():
    with pytest.raises(RoleplayValidationError, match="review-2: 'value'"):
        schema.validate_review_amendment_data({"reviewId": "review-2", "characterId": "alice"})
    assert schema.validate_review_amendment_data({"reviewId": "r", "characterId": "a", "value": None})["value"] is None
    with pytest.raises(RoleplayValidationError, match="turn-4: 'status' must be incomplete or complete"):
        schema.validate_turn_status_data({"characterId": "a", "turnId": "turn-4", "status": "done"})
    with pytest.raises(RoleplayValidationError, match="'reason' must be a string"):
        schema.validate_archive_data({"characterId": "a", "reason": 3})
    with pytest.raises(RoleplayValidationError, match="'characterId'"):
        schema.validate_identity_data({"characterId": ""})


def test_repair_commit_must_be_a_repair_of_the_same_character():
    good = {"characterId": "alice", "turnId": "t1", "commit": {"commitId": "c9", "ops": []}}
    assert schema.validate_repair_data(good) is good
    with pytest.raises(RoleplayValidationError, match="source 'repair'"):
        schema.validate_repair_data({**good, "commit": {"commitId": "c9", "ops": [], "source": "turn"}})
    with pytest.raises(RoleplayValidationError, match="characterId differs"):
        schema.validate_repair_data({**good, "commit": {"commitId": "c9", "ops": [], "characterId": "bob"}})
    with pytest.raises(RoleplayValidationError, match="'turnId' is required"):
        schema.validate_repair_data({"characterId": "alice", "commit": good["commit"]})


def test_state_hash_is_sha256_of_sorted_compact_utf8_json():
    state = {"location": "王都南门", "a": [1, {"z": 1, "b": 2}]}
    expected = hashlib.sha256('{"a":[1,{"b":2,"z":1}],"location":"王都南门"}'.encode()).hexdigest()
    assert schema.compute_state_hash(state) == expected


def test_checkpoint_is_valid_only_with_a_matching_hash():
    assert schema.validate_checkpoint_data(checkpoint_data())["revision"] == 2
    tampered = checkpoint_data()
    tampered["state"] = {"hair": "long"}
    with pytest.raises(RoleplayValidationError, match="does not match the state"):
        schema.validate_checkpoint_data(tampered)


@pytest.mark.parametrize(
    ("overrides", "message_part"),
    [
        ({"revision": -1}, "'revision' must be a non-negative integer"),
        ({"revision": True}, "'revision' must be a non-negative integer"),
        ({"state": [1]}, "'state' must be a JSON object"),
        ({"events": None, "memories": 3}, "'memories' must be a list"),
        ({"reviews": {"pending": [{"reviewId": "r", "op": {"op": "nope", "path": "/a"}}]}}, "review r"),
        ({"reviews": {"decided": [{"reviewId": "r"}]}}, "decided review r"),
        ({"incompleteTurns": [{}]}, "'turnId' is required"),
        ({"provenance": {"/a": 1}}, "'provenance' must map"),
        ({"archived": "yes"}, "'archived' must be true or false"),
        ({"stateHash": None}, "'stateHash' is required"),
    ],
)
def test_checkpoint_structure_errors(overrides, message_part):
    with pytest.raises(RoleplayValidationError) as info:
        schema.validate_checkpoint_data(checkpoint_data(**overrides))
    assert message_part in str(info.value)


def test_validate_roleplay_entry_names_the_entry_id():
    entry = {
        "type": "custom",
        "id": "1a2b3c4d",
        "customType": schema.COMMIT_TYPE,
        "data": commit_data(source="manual-correction", ops=[{"op": "remove", "path": "/x"}]),
    }
    with pytest.raises(RoleplayValidationError) as info:
        schema.validate_roleplay_entry(entry)
    assert "entry 1a2b3c4d" in str(info.value) and "commit-7" in str(info.value)
    entry["data"]["reason"] = "x was never there"
    assert schema.validate_roleplay_entry(entry) == ("commit", entry["data"])


# --- builders for the service ---


def test_correction_payload_from_the_seed_becomes_a_guarded_correction_commit():
    payload = {
        "op": "replace",
        "path": "/location",
        "from": "王都南门",
        "value": "旧城区旅店",
        "reason": "地点记录错误",
        "correctsCommitId": "commit-abc",
    }
    data = schema.correction_commit_data(payload, character_id="alice", commit_id="commit-fix")
    assert data == {
        "commitId": "commit-fix",
        "characterId": "alice",
        "source": "manual-correction",
        "ops": [
            {"op": "test", "path": "/location", "value": "王都南门"},
            {"op": "replace", "path": "/location", "value": "旧城区旅店"},
        ],
        "reason": "地点记录错误",
        "correctsCommitId": "commit-abc",
    }
    generated = schema.correction_commit_data({**payload, "correctsCommitId": None}, character_id="alice")
    assert generated["commitId"].startswith("commit-") and "correctsCommitId" not in generated


@pytest.mark.parametrize(
    ("payload", "message_part"),
    [
        ({"op": "replace", "path": "/location", "value": "inn"}, "'reason' is required"),
        ({"op": "replace", "path": "/location", "value": "inn", "reason": ""}, "'reason' is required"),
        ({"op": "replace", "path": "/l", "value": 1, "reason": "r", "resaon": "x"}, "unknown field(s) resaon"),
        ({"op": "frobnicate", "path": "/l", "reason": "r"}, "unsupported patch op 'frobnicate'"),
        ({"op": "test", "path": "/l", "value": 1, "reason": "r"}, "corrects nothing"),
        ({"op": "add", "path": "/l", "value": 1, "from": 0, "reason": "r"}, "only applies to replace and remove"),
        ({"ops": [], "reason": "r"}, "must not be empty"),
        ({"ops": [{"op": "remove", "path": "/a"}], "op": "remove", "path": "/b", "reason": "r"}, "not both"),
        ({"op": "replace", "path": "/l", "value": {1, 2}, "reason": "r"}, "not plain JSON"),
        ("not json object", "must be a JSON object"),
    ],
)
def test_bad_correction_payloads_are_rejected_clearly(payload, message_part):
    with pytest.raises(RoleplayValidationError) as info:
        schema.correction_commit_data(payload, character_id="alice")
    assert message_part in str(info.value)


def test_correction_with_an_ops_list_and_with_move():
    data = schema.correction_commit_data(
        {"ops": [{"op": "move", "from": "/keys", "path": "/alice/keys"}], "reason": "keys are with Alice"},
        character_id="alice",
    )
    assert data["ops"] == [{"op": "move", "from": "/keys", "path": "/alice/keys"}]
    inline_move = schema.correction_commit_data(
        {"op": "move", "from": "/keys", "path": "/alice/keys", "reason": "keys are with Alice"}, character_id="alice"
    )
    assert inline_move["ops"] == data["ops"]


def test_repair_proposal_and_small_builders():
    data = schema.repair_data_from_proposal(
        {"turnId": "turn-3", "ops": [{"op": "add", "path": "/mood", "value": "calm"}], "reason": "stream cut"},
        character_id="alice",
        commit_id="commit-r",
    )
    assert data == {
        "characterId": "alice",
        "turnId": "turn-3",
        "commit": {
            "commitId": "commit-r",
            "characterId": "alice",
            "source": "repair",
            "ops": [{"op": "add", "path": "/mood", "value": "calm"}],
            "reason": "stream cut",
        },
    }
    with pytest.raises(RoleplayValidationError, match="'turnId' is required"):
        schema.repair_data_from_proposal({"ops": []}, character_id="alice")
    with pytest.raises(RoleplayValidationError, match="unknown field"):
        schema.repair_data_from_proposal({"turnId": "t", "commit": {}}, character_id="alice")

    assert schema.build_review_decision_data(character_id="a", review_id="r", decision="reject")["decision"] == "reject"
    with pytest.raises(RoleplayValidationError):
        schema.build_review_decision_data(character_id="a", review_id="r", decision="later")
    with pytest.raises(RoleplayValidationError, match="not plain JSON"):
        schema.build_review_amendment_data(character_id="a", review_id="r", value=float("nan"))
    assert (
        schema.build_turn_status_data(character_id="a", turn_id="t", status="incomplete", reason="x")["reason"] == "x"
    )
    assert schema.build_archive_data(character_id="a") == {"characterId": "a"}
    assert schema.build_identity_data(character_id="a") == {"characterId": "a"}
    with pytest.raises(RoleplayValidationError, match="'reason' is required"):
        schema.build_commit_data(character_id="a", ops=[{"op": "remove", "path": "/x"}], source="manual-correction")


def test_turn_result_message_has_pi_tool_result_shape():
    commit = {"commitId": "commit-1", "ops": [{"op": "add", "path": "/hair", "value": "short"}]}
    message = schema.build_turn_result_message(tool_call_id="call-1", character_id="alice", commit=commit, turn_id="t1")
    assert message["role"] == "toolResult" and message["toolName"] == "roleplay_finalize_turn"
    assert message["toolCallId"] == "call-1" and message["isError"] is False
    assert message["details"] == {"characterId": "alice", "commit": commit, "turnId": "t1"}
    json.dumps(message)
    with pytest.raises(RoleplayValidationError, match="commitId"):
        schema.build_turn_result_message(tool_call_id="c", character_id="alice", commit={"ops": []})


# --- the commit key rule (sessiontree.core.entry_keys) -------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# Values where a commit id may sit, sometimes in the right shape.
_commit_payload = st.one_of(
    _json,
    st.fixed_dictionaries({"commitId": _json}),
    st.fixed_dictionaries({"commit": st.one_of(_json, st.fixed_dictionaries({"commitId": _json}))}),
)


@given(
    custom_type=st.sampled_from([schema.COMMIT_TYPE, schema.REPAIR_TYPE, schema.CHECKPOINT_TYPE, "x-other"]),
    data=_commit_payload,
    details=_commit_payload,
    message=_json,
    role=st.sampled_from(["toolResult", "assistant", 3]),
)
def test_the_commit_key_rule_never_raises_whatever_an_entry_holds(custom_type, data, details, message, role):
    """The storages ask the rule of every entry of its types as they store or
    read them, written by anyone (a Pi extension too): a rule that raised
    would refuse a write or make a file unreadable. A key only where a
    commit id is a string, in the place its kind keeps it."""
    custom = {"type": "custom", "id": "a", "customType": custom_type, "data": data}
    turn = {
        "type": "message",
        "id": "b",
        "message": {"role": role, "toolName": schema.TURN_TOOL_NAME, "details": details},
    }
    for entry in (custom, turn, {"type": "message", "id": "c", "message": message}):
        found = schema.commit_id_of(entry)
        assert found is None or isinstance(found, str)
        key = entry_keys.entry_key(entry)
        assert key == entry_keys.key_of(schema.COMMIT_KEY, found), entry
    if custom_type == schema.COMMIT_TYPE and isinstance(data, dict) and isinstance(data.get("commitId"), str):
        assert schema.commit_id_of(custom) == data["commitId"]
    if custom_type == schema.CHECKPOINT_TYPE or custom_type == "x-other":
        assert schema.commit_id_of(custom) is None
    if role != "toolResult":
        assert schema.commit_id_of(turn) is None
