"""Versions over HTTP: ETag on sessions and entries, If-Match on every write
under a session (412 precondition_failed when stale), If-None-Match on reads
(304). On both providers."""

from __future__ import annotations

from typing import Any

import pytest

from sessiontree import services
from sessiontree.core.errors import CATEGORIES, PreconditionFailed

from .conftest import Api, assistant_message, audit_records, user_message
from .test_errors import error_of


def tagged(api: Api, sid: str) -> tuple[dict[str, Any], str]:
    response = api.client.get(f"/api/sessions/{sid}/")
    assert response.status_code == 200
    assert response["ETag"] == response.json()["etag"]
    return response.json(), response["ETag"]


def session_with_two_turns(api: Api, kind: str) -> tuple[str, list[dict[str, Any]]]:
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "hi")
    second = api.say(sid, "hello", role="assistant")
    return sid, [first, second]


def test_precondition_failed_is_412_and_exit_4() -> None:
    category = CATEGORIES[PreconditionFailed.category]
    assert (PreconditionFailed.code, category.http_status, category.exit_code) == ("precondition_failed", 412, 4)


def test_every_answer_with_a_session_carries_its_tag(api: Api, kind: str) -> None:
    created = api.client.post("/api/sessions/", {"provider": kind}, format="json")
    assert created.status_code == 201 and created["ETag"] == created.json()["etag"]
    sid = created.json()["session_id"]
    first = api.say(sid, "hi")
    _, tag = tagged(api, sid)
    assert tag != created["ETag"]  # the append moved the leaf and the version
    listed = api.get("/api/sessions/")["results"][0]
    assert listed["etag"] == tag
    moved = api.client.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": first["id"]}, format="json")
    assert moved.status_code == 200 and moved["ETag"] == moved.json()["etag"] != tag
    assert api.get(f"/api/sessions/{sid}/snapshot/")["session"]["etag"] == moved["ETag"]


def test_if_none_match_answers_304_until_the_session_changes(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    _, tag = tagged(api, sid)
    same = api.client.get(f"/api/sessions/{sid}/", HTTP_IF_NONE_MATCH=tag)
    assert same.status_code == 304 and same["ETag"] == tag and same.content == b""
    assert api.client.get(f"/api/sessions/{sid}/", HTTP_IF_NONE_MATCH=f'"x", W/{tag}').status_code == 304
    assert api.client.get(f"/api/sessions/{sid}/", HTTP_IF_NONE_MATCH="*").status_code == 304
    api.say(sid, "hi")
    assert api.client.get(f"/api/sessions/{sid}/", HTTP_IF_NONE_MATCH=tag).status_code == 200


def test_patch_with_a_stale_tag_is_412_and_changes_nothing(api: Api, kind: str) -> None:
    # Regression: PATCH of a session was last-writer-wins; two editors who read
    # the same version both wrote.
    sid = api.create_session(kind, title="first")["session_id"]
    _, tag = tagged(api, sid)
    one = api.client.patch(f"/api/sessions/{sid}/", {"title": "mine"}, format="json", HTTP_IF_MATCH=tag)
    assert one.status_code == 200 and one["ETag"] != tag
    other = api.client.patch(f"/api/sessions/{sid}/", {"title": "theirs"}, format="json", HTTP_IF_MATCH=tag)
    error_of(other, 412, "precondition_failed")
    assert api.get(f"/api/sessions/{sid}/")["title"] == "mine"
    assert len(audit_records(sid, "update_session")) == 1
    again = api.client.patch(f"/api/sessions/{sid}/", {"title": "theirs"}, format="json", HTTP_IF_MATCH=one["ETag"])
    assert again.status_code == 200 and again.json()["title"] == "theirs"
    star = api.client.patch(f"/api/sessions/{sid}/", {"title": "any"}, format="json", HTTP_IF_MATCH="*")
    assert star.status_code == 200


def test_a_weak_or_foreign_tag_never_matches_a_write(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    _, tag = tagged(api, sid)
    weak = api.client.patch(f"/api/sessions/{sid}/", {"title": "x"}, format="json", HTTP_IF_MATCH=f"W/{tag}")
    error_of(weak, 412, "precondition_failed")
    foreign = api.client.post(
        f"/api/sessions/{sid}/entries/", {"message": user_message("hi")}, format="json", HTTP_IF_MATCH='"abc"'
    )
    error_of(foreign, 412, "precondition_failed")
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == 0


@pytest.mark.parametrize("header", ["abc", '"a', "", "W/", "0"])
def test_an_if_match_that_names_no_tag_matches_nothing(api: Api, kind: str, header: str) -> None:
    sid = api.create_session(kind)["session_id"]
    response = api.client.patch(f"/api/sessions/{sid}/", {"title": "x"}, format="json", HTTP_IF_MATCH=header)
    error_of(response, 412, "precondition_failed")
    url = f"/api/sessions/{sid}/entries/"
    error_of(api.client.post(url, {"message": user_message("x")}, format="json", HTTP_IF_MATCH=header), 412)
    assert api.get(f"/api/sessions/{sid}/")["title"] is None
    assert api.client.get(f"/api/sessions/{sid}/", HTTP_IF_NONE_MATCH=header).status_code == 200


def test_status_changes_compare_the_whole_tag(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    _, tag = tagged(api, sid)
    api.patch(f"/api/sessions/{sid}/", {"title": "moved the version, not the leaf"})
    for action in ("archive", "restore"):
        error_of(api.client.post(f"/api/sessions/{sid}/{action}/", HTTP_IF_MATCH=tag), 412, "precondition_failed")
    error_of(api.client.delete(f"/api/sessions/{sid}/", HTTP_IF_MATCH=tag), 412, "precondition_failed")
    assert api.get(f"/api/sessions/{sid}/")["status"] == "active"
    _, tag = tagged(api, sid)
    archived = api.client.post(f"/api/sessions/{sid}/archive/", HTTP_IF_MATCH=tag)
    assert archived.status_code == 200 and archived.json()["status"] == "archived"
    restored = api.client.post(f"/api/sessions/{sid}/restore/", HTTP_IF_MATCH=archived["ETag"])
    assert restored.status_code == 200 and restored.json()["status"] == "active"
    assert api.client.delete(f"/api/sessions/{sid}/", HTTP_IF_MATCH=restored["ETag"]).status_code == 204


def test_a_hard_delete_checks_the_tag(api_for: Any, users: Any, kind: str) -> None:
    janitor = api_for(users.janitor)
    sid = janitor.create_session(kind)["session_id"]
    _, tag = tagged(janitor, sid)
    janitor.say(sid, "hi")
    error_of(janitor.client.delete(f"/api/sessions/{sid}/?hard=true", HTTP_IF_MATCH=tag), 412)
    _, tag = tagged(janitor, sid)
    assert janitor.client.delete(f"/api/sessions/{sid}/?hard=true", HTTP_IF_MATCH=tag).status_code == 204
    janitor.get(f"/api/sessions/{sid}/", expected=404)


def test_tree_writes_compare_the_tags_leaf(api: Api, kind: str) -> None:
    sid, (first, _second) = session_with_two_turns(api, kind)
    _, tag = tagged(api, sid)
    url = f"/api/sessions/{sid}/entries/"
    appended = api.client.post(url, {"message": user_message("more")}, format="json", HTTP_IF_MATCH=tag)
    assert appended.status_code == 201
    stale = api.client.post(url, {"message": user_message("again")}, format="json", HTTP_IF_MATCH=tag)
    error_of(stale, 412, "precondition_failed")
    # Only the leaf counts for a tree write: a title change in between does not refuse it.
    _, tag = tagged(api, sid)
    api.patch(f"/api/sessions/{sid}/", {"title": "renamed"})
    assert api.client.post(url, {"message": user_message("ok")}, format="json", HTTP_IF_MATCH=tag).status_code == 201
    writes = [
        ("switch-leaf", {"entry_id": first["id"]}),
        ("reset-leaf", {}),
        ("labels", {"target_id": first["id"], "label": "x"}),
        ("navigate", {"target_id": first["id"]}),
        ("fork", {"entry_id": first["id"], "position": "at"}),
        ("compact", {}),
        ("in-flight", {"entry": {"type": "message", "message": assistant_message("…")}}),
    ]
    before = api.get(f"/api/sessions/{sid}/")["entry_count"]
    for action, body in writes:
        response = api.client.post(f"/api/sessions/{sid}/{action}/", body, format="json", HTTP_IF_MATCH=tag)
        error_of(response, 412, "precondition_failed")
    assert api.get(f"/api/sessions/{sid}/")["entry_count"] == before
    _, tag = tagged(api, sid)
    bulk = {"entries": [{"type": "message", "message": user_message("a")}]}
    for action, body in [*writes[:5], ("bulk-append", bulk)]:
        response = api.client.post(f"/api/sessions/{sid}/{action}/", body, format="json", HTTP_IF_MATCH="*")
        assert response.status_code in (200, 201), (action, response.content)


def test_if_match_and_expected_leaf_id_must_agree(api: Api, kind: str) -> None:
    sid, (first, second) = session_with_two_turns(api, kind)
    _, tag = tagged(api, sid)
    url = f"/api/sessions/{sid}/entries/"
    disagree = {"message": user_message("x"), "expected_leaf_id": first["id"]}
    error_of(api.client.post(url, disagree, format="json", HTTP_IF_MATCH=tag), 412, "precondition_failed")
    agree = {"message": user_message("x"), "expected_leaf_id": second["id"]}
    assert api.client.post(url, agree, format="json", HTTP_IF_MATCH=tag).status_code == 201
    # The body's own check stays a 409, as before.
    error_of(api.client.post(url, agree, format="json"), 409, "leaf_conflict")


def test_a_stream_at_the_tags_leaf_is_still_a_conflict(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hi")
    begun = api.post(
        f"/api/sessions/{sid}/in-flight/",
        {"entry": {"type": "message", "message": assistant_message("")}},
        expected=201,
    )
    _, tag = tagged(api, sid)
    response = api.client.post(
        f"/api/sessions/{sid}/entries/", {"message": user_message("x")}, format="json", HTTP_IF_MATCH=tag
    )
    error_of(response, 409, "leaf_conflict")  # the tag is current; the session is busy streaming
    assert begun["id"] == api.get(f"/api/sessions/{sid}/")["in_flight_entry_id"]


def test_the_in_flight_entry_has_a_tag_that_every_patch_moves(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hi")
    begun = api.client.post(
        f"/api/sessions/{sid}/in-flight/",
        {"entry": {"type": "message", "message": assistant_message("")}},
        format="json",
    )
    assert begun.status_code == 201
    eid, tag = begun.json()["id"], begun["ETag"]
    url = f"/api/sessions/{sid}/entries/{eid}/"
    got = api.client.get(url)
    assert got["ETag"] == tag
    assert api.client.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 304
    patch = {"patch": {"message": assistant_message("It looks")}}
    one = api.client.patch(url, patch, format="json", HTTP_IF_MATCH=tag)
    assert one.status_code == 200 and one["ETag"] != tag
    error_of(api.client.patch(url, patch, format="json", HTTP_IF_MATCH=tag), 412, "precondition_failed")
    assert api.get(url)["message"]["content"][0]["text"] == "It looks"
    done = api.client.patch(url, {**patch, "complete": True}, format="json", HTTP_IF_MATCH=one["ETag"])
    assert done.status_code == 200 and done["ETag"] == one["ETag"]  # same content, now stored for good
    assert api.client.get(url)["ETag"] == done["ETag"]
    error_of(api.client.patch(url, patch, format="json", HTTP_IF_MATCH=done["ETag"]), 409, "immutable_entry")


def test_a_completed_entry_answers_304_to_its_tag(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    entry = api.say(sid, "hi")
    url = f"/api/sessions/{sid}/entries/{entry['id']}/"
    tag = api.client.get(url)["ETag"]
    api.say(sid, "more")
    assert api.client.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 304
    assert api.client.get(url, HTTP_IF_NONE_MATCH='"other"').status_code == 200


def test_update_session_checks_the_tag_in_the_service(users: Any, kind: str) -> None:
    session = services.sessions.create_session(actor=users.alice, channel="api", kind=kind, title="a")
    sid = session["session_id"]
    stale = services.versions.session_etag(session)
    services.sessions.update_session(session_id=sid, actor=users.alice, channel="api", title="b", expected_etag=stale)
    with pytest.raises(PreconditionFailed):
        services.sessions.update_session(
            session_id=sid, actor=users.alice, channel="api", title="c", expected_etag=stale
        )
    assert services.sessions.update_session(session_id=sid, actor=users.alice, channel="api")["title"] == "b"
