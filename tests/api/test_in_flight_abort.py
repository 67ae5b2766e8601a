"""Aborting the in-flight entry (issue 20 #4): a failed stream no longer
wedges its session, whatever the entry's id."""

from __future__ import annotations

from sessiontree.models import AuditRecord
from sessiontree.services import entries

from .conftest import Api, assert_audited, assistant_message, user_message


def begin(api: Api, sid: str, **entry) -> dict:
    body = {"entry": {"type": "message", "message": assistant_message("Hel"), **entry}}
    return api.post(f"/api/sessions/{sid}/in-flight/", body, expected=201)  # type: ignore[no-any-return]


def test_delete_of_the_in_flight_entry_gives_the_leaf_back(api: Api, users, kind):
    sid = api.create_session(kind)["session_id"]
    question = api.say(sid, "q")
    streaming = begin(api, sid)
    api.append(sid, expected=409, message=user_message("too early"))
    api.delete(f"/api/sessions/{sid}/entries/{streaming['id']}/")
    session = api.get(f"/api/sessions/{sid}/")
    assert session["leaf_entry_id"] == question["id"] and session["entry_count"] == 1
    api.get(f"/api/sessions/{sid}/entries/{streaming['id']}/", expected=404)
    answer = api.append(sid, message=assistant_message("Hello"))
    assert answer["parentId"] == question["id"]
    record = assert_audited(sid, "abort_in_flight", users.alice)
    assert record.detail["entry_id"] == streaming["id"] and "Hel" not in str(record.detail)


def test_a_completed_entry_is_never_deleted(api: Api, kind):
    sid = api.create_session(kind)["session_id"]
    question = api.say(sid, "q")
    refused = api.call("delete", f"/api/sessions/{sid}/entries/{question['id']}/", 409)
    assert refused["error"]["code"] == "immutable_entry"
    api.call("delete", f"/api/sessions/{sid}/entries/nope/", 404)
    nothing = api.call("delete", f"/api/sessions/{sid}/in-flight/", 409)
    assert nothing["error"]["code"] == "nothing_in_flight"
    assert len(api.get(f"/api/sessions/{sid}/entries/")["results"]) == 1


def test_an_unaddressable_in_flight_entry_is_aborted_through_the_session(api: Api, kind):
    """An id with a slash (stored before ids had a pattern, or imported) can
    never be named in a URL: DELETE …/in-flight/ aborts whatever streams."""
    sid = api.create_session(kind)["session_id"]
    question = api.say(sid, "q")
    entries.begin_in_flight(
        session_id=sid,
        entry={"type": "message", "id": "bad/id", "message": assistant_message("x")},
        actor="legacy-client",
        channel="internal",
    )
    api.append(sid, expected=409, message=user_message("wedged"))
    api.delete(f"/api/sessions/{sid}/in-flight/")
    assert api.get(f"/api/sessions/{sid}/")["leaf_entry_id"] == question["id"]
    api.append(sid, message=user_message("unwedged"))


def test_if_match_guards_an_abort(api: Api, kind):
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "q")
    streaming = begin(api, sid)
    url = f"/api/sessions/{sid}/entries/{streaming['id']}/"
    stale = api.client.get(url)["ETag"]
    api.client.patch(url, {"patch": {"message": assistant_message("Hello")}}, format="json")
    api.call("delete", url, 412, HTTP_IF_MATCH=stale)
    api.delete(url)  # unconditional: aborted
    assert AuditRecord.objects.filter(session_id=sid, operation="abort_in_flight").count() == 1
    # On the session's route the tag must name the in-flight entry as its leaf.
    before = api.client.get(f"/api/sessions/{sid}/")["ETag"]
    begin(api, sid)
    api.call("delete", f"/api/sessions/{sid}/in-flight/", 412, HTTP_IF_MATCH=before)
    current = api.client.get(f"/api/sessions/{sid}/")["ETag"]
    api.call("delete", f"/api/sessions/{sid}/in-flight/", 204, HTTP_IF_MATCH=current)
