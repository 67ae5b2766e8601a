"""The branch reducer: state comes only from structured entries on the active path.

Cases follow the roleplay seed (§6 checkpoint isolation, §7 pending review
branches, §9.1 in-place tree, §4 branch summaries are not canon).
"""

from __future__ import annotations

import copy
import json

import orjson
import pytest

from roleplay import schema
from roleplay.reducer import (
    NON_CANON_BOUNDARY_NOTE,
    PatchFailed,
    apply_patch,
    make_checkpoint_data,
    reduce_branch,
    render_character_view,
)
from roleplay.schema import RoleplayValidationError, compute_state_hash

from .entry_tree import EntryTree, review

EMPTY_HASH = compute_state_hash({})


def codes(result):
    return [p["code"] for p in result["problems"]]


def add(path, value):
    return {"op": "add", "path": path, "value": value}


# --- seed §6: checkpoints belong to tree nodes ---


def test_checkpoint_isolation_each_branch_reads_only_its_own_checkpoint():
    # A ─ B ─ X ─ C
    #  \
    #   D ─ Y ─ E
    tree = EntryTree()
    a = tree.turn([add("/hair", "shoulder-length black")], events=["met at the gate"])
    tree.turn([{"op": "replace", "path": "/hair", "value": "ear-length"}])
    x = tree.checkpoint()
    c = tree.turn([add("/location", "royal capital")])
    tree.go_to(a)
    tree.turn([add("/mood", "refused the haircut")])
    y = tree.checkpoint()
    e = tree.turn([add("/location", "south district")])

    on_c = tree.reduce(c)
    assert on_c["checkpoint_entry_id"] == x
    assert on_c["state"] == {"hair": "ear-length", "location": "royal capital"}
    assert on_c["revision"] == 3

    on_e = tree.reduce(e)
    assert on_e["checkpoint_entry_id"] == y
    assert on_e["state"] == {
        "hair": "shoulder-length black",
        "mood": "refused the haircut",
        "location": "south district",
    }
    assert on_e["revision"] == 3
    assert on_c["events"] == on_e["events"] == ["met at the gate"]

    # §6.1: /tree back to A, before checkpoint X: X is not on the new path.
    tree.go_to(a)
    f = tree.user("let's walk instead")
    on_f = tree.reduce(f)
    assert on_f["checkpoint_entry_id"] is None
    assert on_f["state"] == {"hair": "shoulder-length black"} and on_f["revision"] == 1


class ExplodingEntry(dict):
    """An entry that fails the test if the reducer so much as looks at it."""

    def get(self, *args, **kwargs):
        raise AssertionError(f"entry {dict.get(self, 'id')} before the checkpoint was read")

    def __getitem__(self, key):
        raise AssertionError(f"entry {dict.get(self, 'id')} before the checkpoint was read")


@pytest.mark.parametrize("character_id", ["alice", None])
def test_entries_before_the_latest_checkpoint_are_never_read(character_id):
    tree = EntryTree()
    tree.user("hello")
    tree.assistant("hello, traveller")  # the first reply: identity scan stops around here
    tree.turn([add("/hair", "black")])
    for i in range(20):
        tree.turn([add(f"/n{i}", i)])
    tree.checkpoint()
    last = tree.turn([add("/after", True)])
    path = tree.path()
    expected = reduce_branch(path, character_id)
    checkpoint_index = next(i for i, e in enumerate(path) if e.get("customType") == schema.CHECKPOINT_TYPE)
    # Entries between the identity lock and the checkpoint become booby traps.
    guarded = path[:3] + [ExplodingEntry(e) for e in path[3:checkpoint_index]] + path[checkpoint_index:]
    result = reduce_branch(guarded, character_id)
    assert result["state"] == expected["state"] and result["revision"] == 22
    assert result["provenance"]["/after"] == last


# --- seed §7: reviews are branch-local ---


def test_pending_review_branches_accept_gives_trust_reject_gives_nothing():
    # A rescue event └─ B pending trust review ├─ C accept └─ D reject
    tree = EntryTree()
    tree.turn(events=[{"summary": "Alice pulled the user out of the river"}])
    b = tree.turn(reviews=[review("review-trust", add("/relationship", {"user": {"trust": 0.55}}), "after the rescue")])
    c = tree.decide("review-trust", "accept")
    tree.go_to(b)
    d = tree.decide("review-trust", "reject")

    on_b = tree.reduce(b)
    assert on_b["state"] == {}
    assert [r["reviewId"] for r in on_b["pending_reviews"]] == ["review-trust"]
    assert on_b["pending_reviews"][0]["entryId"] == b and on_b["pending_reviews"][0]["note"] == "after the rescue"

    on_c = tree.reduce(c)
    assert on_c["state"] == {"relationship": {"user": {"trust": 0.55}}}
    assert on_c["pending_reviews"] == []
    assert [(r["reviewId"], r["decision"], r["decisionEntryId"]) for r in on_c["decided_reviews"]] == [
        ("review-trust", "accept", c)
    ]
    assert on_c["provenance"] == {"/relationship": c}
    assert on_c["revision"] == 3  # two turns + the applied review

    on_d = tree.reduce(d)
    assert on_d["state"] == {}
    assert on_d["state_hash"] == EMPTY_HASH
    assert [(r["reviewId"], r["decision"]) for r in on_d["decided_reviews"]] == [("review-trust", "reject")]
    assert on_d["revision"] == 2  # a rejected review changes nothing, not even the revision
    assert on_c["events"] == on_d["events"] == [{"summary": "Alice pulled the user out of the river"}]


def test_amendment_replaces_the_proposed_value_latest_wins():
    tree = EntryTree()
    tree.turn([add("/relationship", {"user": {"trust": 0.4}})])
    tree.turn(reviews=[review("r1", {"op": "replace", "path": "/relationship/user/trust", "value": 0.55})])
    tree.amend("r1", 0.6)
    tree.amend("r1", 0.65)
    pending = tree.reduce()["pending_reviews"][0]
    assert pending["op"]["value"] == 0.55 and pending["amendment"]["value"] == 0.65
    accept = tree.decide("r1", "accept")
    result = tree.reduce()
    assert result["state"]["relationship"]["user"]["trust"] == 0.65
    assert result["decided_reviews"][0]["appliedOp"] == {
        "op": "replace",
        "path": "/relationship/user/trust",
        "value": 0.65,
    }
    assert result["provenance"]["/relationship/user/trust"] == accept
    # After the decision, amending is too late.
    late = tree.amend("r1", 0.9)
    result = tree.reduce()
    assert result["state"]["relationship"]["user"]["trust"] == 0.65
    assert result["problems"][-1]["entryId"] == late and result["problems"][-1]["code"] == "review_already_decided"


def test_amendments_and_decisions_on_unknown_or_valueless_reviews_are_recorded_not_applied():
    tree = EntryTree()
    tree.turn([add("/scar", "left cheek")], reviews=[review("r-remove", {"op": "remove", "path": "/scar"})])
    amend = tree.amend("r-remove", "right cheek")
    ghost = tree.decide("r-ghost", "accept")
    tree.decide("r-remove", "reject")
    twice = tree.decide("r-remove", "accept")
    result = tree.reduce()
    assert result["state"] == {"scar": "left cheek"}
    assert [(p["entryId"], p["code"]) for p in result["problems"]] == [
        (amend, "amendment_not_applicable"),
        (ghost, "unknown_review"),
        (twice, "review_already_decided"),
    ]
    assert result["decided_reviews"][0]["decision"] == "reject"


def test_accept_that_cannot_apply_stays_pending_and_can_be_accepted_later():
    tree = EntryTree()
    tree.turn(reviews=[review("r1", {"op": "replace", "path": "/mood", "value": "warm"})])
    first = tree.decide("r1", "accept")
    result = tree.reduce()
    assert result["state"] == {} and result["revision"] == 1
    assert result["problems"][0]["entryId"] == first and result["problems"][0]["code"] == "patch_failed"
    assert [r["reviewId"] for r in result["pending_reviews"]] == ["r1"]
    tree.commit([add("/mood", "cold")])
    tree.decide("r1", "accept")
    result = tree.reduce()
    assert result["state"] == {"mood": "warm"} and result["revision"] == 3 and result["pending_reviews"] == []


def test_a_review_id_proposed_again_keeps_the_first_proposal():
    tree = EntryTree()
    tree.turn(reviews=[review("r1", add("/a", 1))])
    again = tree.turn([add("/b", 2)], reviews=[review("r1", add("/a", 99))])
    result = tree.reduce()
    assert result["state"] == {"b": 2}  # the rest of the commit still applies
    assert result["pending_reviews"][0]["op"]["value"] == 1
    assert result["problems"] == [
        {"entryId": again, "code": "duplicate_review", "reason": result["problems"][0]["reason"]}
    ]


# --- seed §9.1: in-place tree navigation ---


def test_in_place_tree_revision_returns_to_zero_and_old_branch_still_restores():
    tree = EntryTree()
    tree.user("Describe Alice.")
    before_cut = tree.assistant("Alice has shoulder-length black hair.")
    tree.user("Alice, cut your hair short.")
    tree.assistant("(calls roleplay_finalize_turn)")
    short_hair = tree.turn([add("/appearance", {"hair": "ear-length bob"})])
    old_leaf = tree.assistant("Snip. Her hair now ends below the ears.")
    assert tree.reduce(old_leaf)["revision"] == 1

    # /tree to before the haircut, with a branch summary of the abandoned line.
    tree.go_to(before_cut)
    tree.branch_summary(old_leaf, "In the abandoned branch Alice cut her hair to an ear-length bob.")
    tree.user("Alice refuses the haircut.")
    new_leaf = tree.assistant("She shakes her long hair: no.")

    on_new = tree.reduce(new_leaf)
    assert on_new["revision"] == 0
    assert on_new["state"] == {} and on_new["state_hash"] == EMPTY_HASH
    assert "ear-length" not in json.dumps(on_new, ensure_ascii=False)
    assert "ear-length" not in render_character_view(on_new)

    on_old = tree.reduce(old_leaf)
    assert on_old["revision"] == 1
    assert on_old["state"] == {"appearance": {"hair": "ear-length bob"}}
    assert on_old["provenance"] == {"/appearance": short_hair}


# --- seed §4: only structured entries count ---


def test_summaries_free_text_and_custom_messages_never_change_state():
    tree = EntryTree()
    first = tree.turn([add("/hair", "black")])
    tree.user('Set state {"hair": "short"} please')
    tree.assistant('{"op": "replace", "path": "/hair", "value": "short"}')
    tree.branch_summary(first, "Alice cut her hair short and arrived at the capital.")
    tree.compaction("Summary: Alice has short hair now. revision 9", first)
    tree.append(
        {
            "type": "custom_message",
            "customType": schema.COMMIT_TYPE,
            "content": "replace /hair short",
            "display": True,
            "details": {"characterId": "alice", "commitId": "x", "source": "turn", "ops": [add("/hair", "short")]},
        }
    )
    tree.custom("some-other-extension", {"characterId": "alice", "ops": [add("/hair", "short")]})
    result = tree.reduce()
    assert result["state"] == {"hair": "black"} and result["revision"] == 1
    assert result["problems"] == [] and result["ignored_entries"] == []


def test_entries_of_another_character_are_ignored_including_their_checkpoints():
    tree = EntryTree()
    tree.turn([add("/hair", "black")])
    bob_commit = tree.turn([add("/hair", "red")], character_id="bob")
    bob_checkpoint = tree.checkpoint(character_id="bob")
    tree.decide("r1", "accept", character_id="bob")
    result = tree.reduce()
    assert result["state"] == {"hair": "black"}
    assert result["checkpoint_entry_id"] is None
    assert [(i["entryId"], i["characterId"]) for i in result["ignored_entries"]][:2] == [
        (bob_commit, "bob"),
        (bob_checkpoint, "bob"),
    ]
    assert len(result["ignored_entries"]) == 3 and result["problems"] == []
    assert tree.reduce(character_id="bob")["state"] == {"hair": "red"}


def test_an_invalid_checkpoint_is_ignored_and_the_earlier_valid_one_used():
    tree = EntryTree()
    tree.turn([add("/hair", "black")])
    good = tree.checkpoint()
    tree.turn([add("/location", "inn")])
    bad = tree.checkpoint()
    bad_entry = tree.entries[-1]
    bad_entry["data"]["state"]["location"] = "palace"  # edited after hashing
    leaf = tree.turn([add("/mood", "tired")])

    result = tree.reduce()
    assert result["checkpoint_entry_id"] == good
    assert result["state"] == {"hair": "black", "location": "inn", "mood": "tired"}
    assert result["problems"][0]["entryId"] == bad and result["problems"][0]["code"] == "invalid_checkpoint"
    assert "does not match the state" in result["problems"][0]["reason"]

    # The same path without any checkpoint gives the same state.
    bare = [e for e in tree.path(leaf) if e.get("customType") != schema.CHECKPOINT_TYPE]
    assert reduce_branch(bare, "alice")["state"] == result["state"]


def test_checkpoint_survives_a_json_round_trip_and_reduces_identically():
    tree = EntryTree()
    tree.turn([add("/hair", "black"), add("/bag", [])], events=["e1"], memories=[{"text": "likes tea"}])
    tree.turn(reviews=[review("r1", add("/trust", 0.5))])
    tree.amend("r1", 0.6)
    tree.turn_status("turn-9", "incomplete")
    tree.commit([{"op": "replace", "path": "/nope", "value": 1}])  # a problem to carry along
    before = tree.reduce()
    data = orjson.loads(orjson.dumps(make_checkpoint_data(before)))
    cp = tree.custom(schema.CHECKPOINT_TYPE, data)
    after = tree.reduce()
    assert after["checkpoint_entry_id"] == cp
    assert {k: v for k, v in after.items() if k != "checkpoint_entry_id"} == {
        k: v for k, v in before.items() if k != "checkpoint_entry_id"
    }
    tree.decide("r1", "accept")
    assert tree.reduce()["state"]["trust"] == 0.6


def test_make_checkpoint_data_needs_a_character_and_is_a_copy():
    with pytest.raises(RoleplayValidationError, match="no character identity"):
        make_checkpoint_data(reduce_branch([]))
    tree = EntryTree()
    tree.turn([add("/bag", ["key"])])
    state = tree.reduce()
    data = make_checkpoint_data(state)
    state["state"]["bag"].append("sword")
    assert data["state"] == {"bag": ["key"]}
    assert data["stateHash"] == compute_state_hash({"bag": ["key"]})
    schema.validate_checkpoint_data(data)


# --- commits, corrections and failures ---


def test_a_failing_commit_is_skipped_whole_and_reported():
    tree = EntryTree()
    tree.turn([add("/hair", "black")])
    bad = tree.turn(
        [add("/location", "inn"), {"op": "replace", "path": "/missing", "value": 1}],
        events=["should not appear"],
        reviews=[review("r1", add("/x", 1))],
    )
    tree.commit([{"op": "test", "path": "/hair", "value": "blond"}, {"op": "replace", "path": "/hair", "value": "red"}])
    result = tree.reduce()
    assert result["state"] == {"hair": "black"}
    assert result["revision"] == 1 and result["events"] == [] and result["pending_reviews"] == []
    assert codes(result) == ["patch_failed", "patch_failed"]
    assert result["problems"][0]["entryId"] == bad and "op 1" in result["problems"][0]["reason"]


def test_a_correction_made_from_the_seed_payload_applies_on_the_current_branch():
    tree = EntryTree()
    tree.turn([add("/location", "王都南门")])
    payload = {
        "op": "replace",
        "path": "/location",
        "from": "王都南门",
        "value": "旧城区旅店",
        "reason": "地点记录错误",
    }
    data = schema.correction_commit_data(payload, character_id="alice", commit_id="commit-fix")
    fix = tree.custom(schema.COMMIT_TYPE, data)
    result = tree.reduce()
    assert result["state"] == {"location": "旧城区旅店"}
    assert result["provenance"]["/location"] == fix and result["last_commit_id"] == "commit-fix"
    assert result["revision"] == 2
    # A second correction with a stale "from" fails instead of overwriting.
    stale = schema.correction_commit_data(payload, character_id="alice")
    tree.custom(schema.COMMIT_TYPE, stale)
    assert tree.reduce()["state"] == {"location": "旧城区旅店"}
    assert codes(tree.reduce()) == ["patch_failed"]


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "message", "message": {"role": "toolResult", "toolName": "roleplay_finalize_turn"}},
        {"type": "message", "message": {"role": "toolResult", "toolName": "roleplay_finalize_turn", "details": []}},
        {"type": "custom", "customType": schema.COMMIT_TYPE, "data": "garbage"},
        {"type": "custom", "customType": schema.COMMIT_TYPE, "data": {"characterId": "alice", "ops": "x"}},
        {"type": "custom", "customType": schema.REVIEW_DECISION_TYPE, "data": {"characterId": "alice"}},
        {"type": "custom", "customType": schema.CHECKPOINT_TYPE, "data": {"characterId": "alice"}},
        {"type": "custom", "customType": schema.REPAIR_TYPE, "data": {"characterId": "alice", "turnId": "t"}},
        {"type": "custom", "customType": schema.TURN_STATUS_TYPE, "data": None},
        {
            "type": "custom",
            "customType": schema.COMMIT_TYPE,
            "data": {"characterId": "alice", "commitId": "c", "source": "manual-correction", "ops": [add("/a", 1)]},
        },
    ],
)
def test_malformed_stored_entries_are_skipped_never_raised(entry):
    tree = EntryTree()
    tree.turn([add("/hair", "black")])
    bad = tree.append(entry)
    tree.turn([add("/mood", "ok")])
    result = tree.reduce()
    assert result["state"] == {"hair": "black", "mood": "ok"} and result["revision"] == 2
    assert [p["entryId"] for p in result["problems"]] == [bad]
    assert result["problems"][0]["code"] in ("malformed", "invalid_checkpoint")


def test_an_error_tool_result_is_ignored():
    tree = EntryTree()
    failed = tree.turn([add("/hair", "short")], is_error=True)
    result = tree.reduce()
    assert result["state"] == {} and result["revision"] == 0
    assert result["ignored_entries"][0]["entryId"] == failed


def test_the_reducer_never_modifies_entries():
    tree = EntryTree()
    tree.turn([add("/bag", {"items": []}), add("/bag/items/-", "key")])
    tree.turn([add("/bag/items/-", "map")], reviews=[review("r1", add("/bag/owner", {"name": "A"}))])
    tree.amend("r1", {"name": "B"})
    tree.decide("r1", "accept")
    tree.checkpoint()
    tree.turn([{"op": "replace", "path": "/bag/owner/name", "value": "C"}])
    snapshot = copy.deepcopy(tree.entries)
    result = tree.reduce()
    result["state"]["bag"]["items"].append("mutated by caller")
    tree.reduce()
    assert tree.entries == snapshot
    assert tree.reduce()["state"] == {"bag": {"items": ["key", "map"], "owner": {"name": "C"}}}


# --- provenance ---


def test_provenance_tracks_the_entry_that_last_set_each_pointer():
    tree = EntryTree()
    first = tree.turn([add("/appearance", {"hair": "black", "eyes": "grey"}), add("/bag", [])])
    hair = tree.commit([{"op": "replace", "path": "/appearance/hair", "value": "short"}])
    bag = tree.turn([add("/bag/-", "key")])
    assert tree.reduce()["provenance"] == {"/appearance": first, "/appearance/hair": hair, "/bag": bag}
    # Replacing a parent drops what was recorded under it; removing drops the pointer.
    whole = tree.turn([add("/appearance", {"hair": "long"}), {"op": "remove", "path": "/bag"}])
    assert tree.reduce()["provenance"] == {"/appearance": whole}
    moved = tree.turn([{"op": "move", "from": "/appearance", "path": "/look"}])
    assert tree.reduce()["provenance"] == {"/look": moved}
    root = tree.turn([{"op": "replace", "path": "", "value": {"fresh": True}}])
    assert tree.reduce()["provenance"] == {"": root}


def test_state_must_stay_an_object():
    tree = EntryTree()
    tree.turn([add("/a", 1)])
    tree.turn([{"op": "replace", "path": "", "value": [1, 2]}])
    result = tree.reduce()
    assert result["state"] == {"a": 1} and codes(result) == ["patch_failed"]
    with pytest.raises(PatchFailed, match="op 0"):
        apply_patch({}, [{"op": "remove", "path": "/x"}])
    new_state, changes = apply_patch({"a": 1}, [{"op": "replace", "path": "/a", "value": 2}])
    assert new_state == {"a": 2} and changes == [("set", "/a")]


# --- turns, repairs, archive ---


def test_incomplete_turns_are_cleared_by_complete_or_by_a_repair():
    tree = EntryTree()
    tree.turn_status("turn-1", "incomplete")
    tree.turn_status("turn-2", "incomplete")
    tree.turn_status("turn-3", "incomplete")
    assert [t["turnId"] for t in tree.reduce()["incomplete_turns"]] == ["turn-1", "turn-2", "turn-3"]
    tree.turn_status("turn-1", "complete")
    fix = tree.repair("turn-2", [add("/mood", "calm")])
    failed = tree.repair("turn-3", [{"op": "remove", "path": "/nothing"}])
    result = tree.reduce()
    assert [t["turnId"] for t in result["incomplete_turns"]] == ["turn-3"]
    assert result["state"] == {"mood": "calm"} and result["provenance"] == {"/mood": fix}
    assert result["revision"] == 1
    assert [(p["entryId"], p["code"]) for p in result["problems"]] == [(failed, "patch_failed")]


def test_archive_marks_archived_and_keeps_state_readable():
    tree = EntryTree()
    tree.turn([add("/hair", "black")])
    archived = tree.archive("story finished")
    result = tree.reduce()
    assert result["archived"] is True
    assert result["archive"] == {"entryId": archived, "reason": "story finished"}
    assert result["state"] == {"hair": "black"}
    tree.go_to(tree.entries[0]["id"])
    assert tree.reduce()["archived"] is False  # branch-local, like everything else


# --- session role identity ---


def test_identity_from_the_first_structured_entry_and_locked_after_it():
    tree = EntryTree()
    tree.user("hi")
    first = tree.turn([add("/hair", "black")])
    tree.identity("bob")  # too late: locked by the first structured state
    bob = tree.turn([add("/hair", "red")], character_id="bob")
    result = tree.reduce(character_id=None)
    assert result["character_id"] == "alice"
    assert result["identity"] == {
        "character_id": "alice",
        "source": "structured-entry",
        "entry_id": first,
        "locked": True,
        "locked_at_entry_id": first,
    }
    assert result["state"] == {"hair": "black"}
    assert [i["entryId"] for i in result["ignored_entries"]][-1] == bob
    assert "locked" in result["ignored_entries"][0]["reason"]


def test_identity_selection_may_change_until_the_first_reply():
    tree = EntryTree()
    tree.identity("bob")
    chosen = tree.identity("alice")
    tree.user("hello")
    reply = tree.assistant("Alice waves.")
    tree.identity("bob")
    tree.turn([add("/hair", "red")], character_id="bob")
    tree.turn([add("/hair", "black")])
    result = tree.reduce(character_id=None)
    assert result["identity"]["entry_id"] == chosen and result["identity"]["locked_at_entry_id"] == reply
    assert result["state"] == {"hair": "black"}
    assert [i["characterId"] for i in result["ignored_entries"]] == ["bob", "bob"]

    # Before any reply the selection is still open.
    open_tree = EntryTree()
    open_tree.identity("alice")
    unlocked = open_tree.reduce(character_id=None)
    assert unlocked["character_id"] == "alice" and unlocked["identity"]["locked"] is False


def test_no_identity_on_the_path_gives_an_empty_state():
    tree = EntryTree()
    tree.user("hi")
    tree.assistant("hello")
    result = tree.reduce(character_id=None)
    assert result["character_id"] is None and result["state"] == {} and result["revision"] == 0
    assert result["state_hash"] == EMPTY_HASH


# --- the model's view ---


def test_character_view_shows_canon_only():
    tree = EntryTree()
    tree.turn(
        [add("/appearance", {"hair": "black"})],
        events=[{"summary": "rescued the user"}, "shared bread"],
        memories=[{"text": "the user fears water"}],
        reviews=[review("r1", add("/trust", 0.99))],
    )
    view = render_character_view(tree.reduce())
    assert view.startswith("## Current Character View\nCharacter: alice\nRevision: 1")
    assert '"hair": "black"' in view
    assert "- rescued the user" in view and "- shared bread" in view and "- the user fears water" in view
    assert "0.99" not in view  # a pending proposal is not canon
    assert "abandoned alternate timeline" in NON_CANON_BOUNDARY_NOTE
    assert "Current Character View" in NON_CANON_BOUNDARY_NOTE
