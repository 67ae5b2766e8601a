"""Entries: list (append order, cursor pagination stable under appends, type
filter), retrieve, append (entry or message, expected_leaf_id), and in-flight
entries begun, patched and completed, on every provider."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from .conftest import assert_audited, assistant_message, audit_records, user_message


def ids(entries: list[dict]) -> list[str]:
    return [entry["id"] for entry in entries]


def test_append_an_entry_or_a_message_fills_id_parent_and_timestamp(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    first = api.append(sid, message=user_message("hello"))
    assert first["type"] == "message" and first["parentId"] is None
    assert len(first["id"]) == 8 and first["timestamp"].endswith("Z")
    assert_audited(sid, "append_entry", users.alice)
    second = api.append(sid, entry={"type": "model_change", "provider": "openai", "modelId": "gpt-5", "extra": [1]})
    assert second["parentId"] == first["id"] and second["extra"] == [1]  # unknown fields survive
    own = api.append(sid, entry={"type": "custom", "id": "cafe0001", "customType": "note", "data": {"k": "v"}})
    assert own["id"] == "cafe0001"
    assert api.get(f"/api/sessions/{sid}/")["leaf_entry_id"] == "cafe0001"
    assert api.get(f"/api/sessions/{sid}/entries/cafe0001/") == own
    assert len(audit_records(sid, "append_entry")) == 3


def test_append_refusals(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    body_errors = [
        {},  # neither entry nor message
        {"entry": {"type": "custom", "customType": "x"}, "message": user_message("x")},  # both
        {"entry": [1]},
        {"message": "hi"},
        {"entry": {"type": "custom", "customType": "x"}, "color": "red"},  # unknown field
        {"entry": {"type": "custom", "customType": "x"}, "expected_leaf_id": 5},
    ]
    for body in body_errors:
        assert api.append(sid, expected=400, **body)["error"]["code"] == "invalid_input", body
    assert api.append(sid, expected=400, entry={"type": "mystery"})["error"]["code"] == "invalid_entry"
    assert api.append(sid, expected=400, entry={"type": "message", "message": {}})["error"]["code"] == "invalid_entry"
    error = api.append(sid, expected=404, entry={"type": "label", "targetId": "nothere1", "label": "x"})["error"]
    assert error["code"] == "entry_not_found"
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 1  # nothing refused was stored


def test_expected_leaf_id_conflict_is_409_and_writes_nothing(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    assert api.append(sid, message=user_message("a"), expected_leaf_id=None)["parentId"] is None
    leaf = api.get(f"/api/sessions/{sid}/")["leaf_entry_id"]
    api.append(sid, message=user_message("b"), expected_leaf_id=leaf)
    error = api.append(sid, expected=409, message=user_message("c"), expected_leaf_id=leaf)["error"]
    assert error["code"] == "leaf_conflict" and error["details"] == {"category": "conflict"}
    error = api.append(sid, expected=409, message=user_message("c"), expected_leaf_id=None)["error"]
    assert error["code"] == "leaf_conflict"
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 2


def test_list_in_append_order_with_cursor_pages_stable_under_appends(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    appended = [api.say(sid, f"m{i}", role="user" if i % 2 == 0 else "assistant")["id"] for i in range(7)]
    api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": appended[2]})
    appended.append(api.say(sid, "branch")["id"])  # a branch: append order is not path order
    page = api.get(f"/api/sessions/{sid}/entries/?page_size=3")
    assert ids(page["results"]) == appended[:3] and page["previous"] is None
    api.say(sid, "appended while paging")
    second = api.get(page["next"])
    assert ids(second["results"]) == appended[3:6]
    assert ids(api.get(second["previous"])["results"]) == appended[:3]
    third = api.get(second["next"])
    assert ids(third["results"])[:2] == appended[6:8] and len(third["results"]) == 3 and third["next"] is None
    everything = api.get(f"/api/sessions/{sid}/entries/")
    assert ids(everything["results"])[:8] == appended and everything["next"] is None
    cursor = parse_qs(urlsplit(page["next"]).query)["cursor"][0]
    assert api.get(f"/api/sessions/{sid}/entries/?cursor={cursor}!!", expected=400)["error"]["code"] == "invalid_input"
    api.get(f"/api/sessions/{sid}/entries/?cursor=bz0tMQ", expected=400)  # "o=-1"
    api.get(f"/api/sessions/{sid}/entries/?page_size=0", expected=400)
    api.get(f"/api/sessions/{sid}/entries/?page_size=lots", expected=400)


def test_list_filters_by_type(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "hello")
    label = api.post(f"/api/sessions/{sid}/labels/", {"target_id": first["id"], "label": "start"}, expected=201)
    model = api.append(sid, entry={"type": "model_change", "provider": "p", "modelId": "m"})
    api.say(sid, "bye")
    assert ids(api.get(f"/api/sessions/{sid}/entries/?type=label")["results"]) == [label["id"]]
    both = api.get(f"/api/sessions/{sid}/entries/?type=label,model_change&page_size=1")
    assert ids(both["results"]) == [label["id"]]
    assert ids(api.get(both["next"])["results"]) == [model["id"]]
    assert ids(api.get(f"/api/sessions/{sid}/entries/?type=label&type=model_change")["results"]) == [
        label["id"],
        model["id"],
    ]
    assert api.get(f"/api/sessions/{sid}/entries/?type=nonesuch")["results"] == []


def test_retrieve_unknown_entry_is_404(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    assert api.get(f"/api/sessions/{sid}/entries/deadbeef/", expected=404)["error"]["code"] == "entry_not_found"


def test_in_flight_entry_streams_then_completes_then_is_immutable(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    question = api.say(sid, "write a poem")
    partial = {**assistant_message(""), "content": []}
    started = api.post(f"/api/sessions/{sid}/in-flight/", {"entry": {"type": "message", "message": partial}}, 201)
    entry_id = started["id"]
    assert started["parentId"] == question["id"]
    assert_audited(sid, "begin_in_flight", users.alice)
    detail = api.get(f"/api/sessions/{sid}/")
    assert detail["in_flight_entry_id"] == entry_id and detail["leaf_entry_id"] == entry_id
    # Nothing else may be appended while it streams.
    assert api.append(sid, expected=409, message=user_message("wait"))["error"]["code"] == "leaf_conflict"
    url = f"/api/sessions/{sid}/entries/{entry_id}/"
    for text in ("Roses", "Roses are red"):
        message = {**partial, "content": [{"type": "text", "text": text}]}
        patched = api.patch(url, {"patch": {"message": message}})
        assert patched["message"]["content"][0]["text"] == text
    assert api.get(url)["message"]["content"][0]["text"] == "Roses are red"
    assert api.get(f"/api/sessions/{sid}/context/")["messages"][-1]["content"][0]["text"] == "Roses are red"
    assert_audited(sid, "update_in_flight", users.alice)
    done = api.patch(
        url, {"patch": {"message": assistant_message("Roses are red, violets are blue")}, "complete": True}
    )
    assert done["message"]["content"][0]["text"].endswith("blue")
    assert_audited(sid, "complete_in_flight", users.alice)
    assert api.get(f"/api/sessions/{sid}/")["in_flight_entry_id"] is None
    error = api.patch(url, {"patch": {"message": assistant_message("rewrite")}}, expected=409)["error"]
    assert error["code"] == "immutable_entry"
    assert api.patch(f"/api/sessions/{sid}/entries/{question['id']}/", {"complete": True}, 409)["error"]["code"] == (
        "immutable_entry"
    )
    assert api.get(url)["message"]["content"][0]["text"].endswith("blue")
    after = api.say(sid, "thanks")
    assert after["parentId"] == entry_id


def test_in_flight_refusals(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    api.post(f"/api/sessions/{sid}/in-flight/", {}, expected=400)
    api.post(f"/api/sessions/{sid}/in-flight/", {"entry": {"type": "message", "message": {}}}, expected=400)
    started = api.post(
        f"/api/sessions/{sid}/in-flight/", {"entry": {"type": "message", "message": assistant_message("")}}, 201
    )
    url = f"/api/sessions/{sid}/entries/{started['id']}/"
    assert api.patch(url, {"patch": {"id": "other123"}}, expected=400)["error"]["code"] == "invalid_entry"
    api.patch(url, {"patch": [1]}, expected=400)
    api.patch(url, {"complete": "yes"}, expected=400)
    api.patch(f"/api/sessions/{sid}/entries/nothere1/", {"complete": True}, expected=404)
    second = {"entry": {"type": "message", "message": assistant_message("")}}
    assert api.post(f"/api/sessions/{sid}/in-flight/", second, expected=409)["error"]["code"] == "leaf_conflict"
