"""Bulk append, the id rule for new entries, a taken id; on both providers."""

from __future__ import annotations

import pytest

from sessiontree.api.serializers import MAX_BULK_ENTRIES

from .conftest import Api, assert_audited, assistant_message, audit_records, user_message
from .test_errors import error_of


def message(text: str, role: str = "user") -> dict:
    return {"type": "message", "message": user_message(text) if role == "user" else assistant_message(text)}


def test_bulk_append_chains_the_entries_and_moves_the_leaf(api: Api, users, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    root = api.say(sid, "hi")
    body = {
        "entries": [message("a"), message("b", "assistant"), {"type": "label", "targetId": root["id"], "label": "x"}],
        "expected_leaf_id": root["id"],
    }
    written = api.post(f"/api/sessions/{sid}/bulk-append/", body, expected=201)["entries"]
    assert [e["parentId"] for e in written] == [root["id"], written[0]["id"], written[1]["id"]]
    assert [e["type"] for e in written] == ["message", "message", "label"]
    session = api.get(f"/api/sessions/{sid}/")
    assert (session["leaf_entry_id"], session["entry_count"]) == (written[-1]["id"], 4)
    record = assert_audited(sid, "append_entries", users.alice)
    assert record.entry_ids == [e["id"] for e in written]


def test_bulk_append_is_all_or_none(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hi")
    bad = {"entries": [message("a"), {"type": "label", "targetId": "nowhere"}]}
    error_of(api.client.post(f"/api/sessions/{sid}/bulk-append/", bad, format="json"), 404, "entry_not_found")
    stale = {"entries": [message("a")], "expected_leaf_id": None}
    error_of(api.client.post(f"/api/sessions/{sid}/bulk-append/", stale, format="json"), 409, "leaf_conflict")
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 1
    assert audit_records(sid, "append_entries") == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"entries": []},
        {"entries": [message("a")] * (MAX_BULK_ENTRIES + 1)},
        {"entries": ["not an object"]},
        {"entries": [message("a")], "extra": 1},
        {"entries": {"type": "message"}},
    ],
    ids=["missing", "empty", "too-many", "not-objects", "unknown-field", "not-a-list"],
)
def test_bulk_append_refuses_bad_bodies(api: Api, kind: str, body: dict) -> None:
    sid = api.create_session(kind)["session_id"]
    error_of(api.client.post(f"/api/sessions/{sid}/bulk-append/", body, format="json"), 400, "invalid_input")
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 0


@pytest.mark.parametrize("entry_id", ["a/b", "a b", "-a", "", "x" * 65, "tab\t", 12])
def test_a_chosen_entry_id_follows_the_rule(api: Api, kind: str, entry_id: object) -> None:
    sid = api.create_session(kind)["session_id"]
    entry = {**message("a"), "id": entry_id}
    for url, body in [
        (f"/api/sessions/{sid}/entries/", {"entry": entry}),
        (f"/api/sessions/{sid}/in-flight/", {"entry": entry}),
        (f"/api/sessions/{sid}/bulk-append/", {"entries": [entry]}),
    ]:
        error_of(api.client.post(url, body, format="json"), 400, "invalid_entry")
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 0


@pytest.mark.parametrize("entry_id", ["a", "turn-7:call.1_b", "A" * 64, "0"])
def test_a_chosen_entry_id_that_follows_the_rule_is_kept(api: Api, kind: str, entry_id: str) -> None:
    sid = api.create_session(kind)["session_id"]
    stored = api.append(sid, entry={**message("a"), "id": entry_id})
    assert stored["id"] == entry_id
    assert api.get(f"/api/sessions/{sid}/entries/{entry_id}/")["id"] == entry_id


def test_a_taken_entry_id_is_a_conflict(api: Api, kind: str) -> None:
    # Regression: a chosen id the session holds already was a 400, as if the
    # request were malformed; it conflicts with what is stored.
    sid = api.create_session(kind)["session_id"]
    api.append(sid, entry={**message("a"), "id": "mine"})
    for url, body in [
        (f"/api/sessions/{sid}/entries/", {"entry": {**message("b"), "id": "mine"}}),
        (f"/api/sessions/{sid}/in-flight/", {"entry": {**message("b"), "id": "mine"}}),
        (f"/api/sessions/{sid}/bulk-append/", {"entries": [message("b"), {**message("c"), "id": "mine"}]}),
    ]:
        error_of(api.client.post(url, body, format="json"), 409, "entry_id_taken")
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 1


def test_an_integral_number_is_an_integer(api: Api, kind: str) -> None:
    """JSON Schema's ``integer`` (and JavaScript, Pi's language) takes 7.0
    for 7: a compaction whose ``tokensBefore`` is 7.0 matches the schema, so
    the server takes it (Schemathesis found the 400); 7.5 stays refused."""
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "hi")
    compaction = {"type": "compaction", "summary": "s", "firstKeptEntryId": first["id"], "tokensBefore": 7.0}
    written = api.post(f"/api/sessions/{sid}/bulk-append/", {"entries": [compaction]}, expected=201)["entries"]
    assert written[0]["tokensBefore"] == 7
    assert api.get(f"/api/sessions/{sid}/context/")["messages"][0]["role"] == "compactionSummary"
    refused = api.call("post", f"/api/sessions/{sid}/entries/", 400, {"entry": {**compaction, "tokensBefore": 7.5}})
    assert "tokensBefore" in refused["error"]["message"]


def test_an_integer_beyond_64_bits_in_an_integer_field_is_refused(api: Api, kind: str) -> None:
    """A JSON integer longer than 64 bits is read as a float (as JavaScript
    reads it): a message's ``exitCode`` of 2**100 was stored and answered as
    1.2676506002282294e+30, which the schema's integer does not allow
    (Schemathesis). The schema bounds it and the server refuses it; the
    largest 64-bit integer is kept exactly."""
    sid = api.create_session(kind)["session_id"]
    bash = {"role": "bashExecution", "command": "true", "output": "", "timestamp": 1}
    refused = api.call("post", f"/api/sessions/{sid}/entries/", 400, {"message": {**bash, "exitCode": 2**100}})
    assert "exitCode" in refused["error"]["message"]
    kept = api.post(f"/api/sessions/{sid}/entries/", {"message": {**bash, "exitCode": 2**63 - 1}}, expected=201)
    assert kept["message"]["exitCode"] == 2**63 - 1
    assert api.get(f"/api/sessions/{sid}/entries/{kept['id']}/")["message"]["exitCode"] == 2**63 - 1
    assert len(api.get(f"/api/sessions/{sid}/entries/")["results"]) == 1


def test_a_named_parent_must_be_the_leaf_and_an_id(api: Api, kind: str) -> None:
    """Schemathesis sent ``parentId: {}`` (an extra field the schema allowed) and got 400
    for a request the schema called valid: the schema now types parentId, and a parent
    that is not the leaf is a conflict with the tree (409 leaf_conflict), as a stale
    expected_leaf_id is, not bad input."""
    sid = api.create_session(kind)["session_id"]
    root = api.say(sid, "hi")
    url = f"/api/sessions/{sid}/bulk-append/"
    shape = {"entries": [{**message("a"), "parentId": {}}]}
    error_of(api.client.post(url, shape, format="json"), 400, "invalid_entry")
    elsewhere = {"entries": [{**message("a"), "parentId": "elsewhere"}]}
    error_of(api.client.post(url, elsewhere, format="json"), 409, "leaf_conflict")
    second_not_chained = {"entries": [message("a"), {**message("b"), "parentId": root["id"]}]}
    error_of(api.client.post(url, second_not_chained, format="json"), 409, "leaf_conflict")
    error_of(
        api.client.post(f"/api/sessions/{sid}/entries/", {"entry": {**message("a"), "parentId": "x"}}, format="json"),
        409,
        "leaf_conflict",
    )
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 1
    named = api.post(url, {"entries": [{**message("a"), "parentId": root["id"]}]}, expected=201)["entries"]
    assert named[0]["parentId"] == root["id"]
