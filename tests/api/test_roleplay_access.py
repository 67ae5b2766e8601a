"""Who may read and change a session's roleplay: the API's own rules
(docs/api.md, "Who may do what") on every roleplay endpoint."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from sessiontree.models import AgentSession, AuditRecord

from .conftest import Api
from .roleplay_story import ApiStory, add, review
from .test_access import send


def roleplay_session(api: Api, kind: str) -> ApiStory:
    """alice's session: the haircut, an incomplete turn, two pending reviews."""
    story = ApiStory(api, kind)
    story.haircut_story()
    story.mark_incomplete("turn-9")
    story.turn(reviews=[review("review-a", add("/a", 1)), review("review-b", add("/b", 2))])
    return story


def reads(story: ApiStory) -> list[tuple[str, str]]:
    base = story.base
    cut = story.entries()[-3]["id"]
    return [
        ("get", f"{base}/state/"),
        ("get", f"{base}/state/?leaf={cut}"),
        ("get", f"{base}/diff/?from={cut}"),
        ("get", f"{base}/reviews/"),
        ("get", f"{base}/reviews/review-a/"),
        ("get", f"{base}/checkpoints/"),
        ("get", f"{base}/context/"),
        ("get", f"{base}/context/?leaf={cut}"),
    ]


def writes(story: ApiStory) -> list[tuple[str, str, dict[str, Any]]]:
    """Every roleplay write with a body it accepts, in an order that works from ``roleplay_session``."""
    base = story.base
    return [
        ("post", f"{base}/corrections/", {"op": "add", "path": "/c", "value": 3, "reason": "r"}),
        ("post", f"{base}/reviews/review-a/amend/", {"value": 5}),
        ("post", f"{base}/reviews/review-a/decide/", {"decision": "accept"}),
        ("post", f"{base}/reviews/review-b/decide/", {"decision": "reject"}),
        ("post", f"{base}/checkpoints/", {}),
        ("post", f"{base}/repairs/", {"turnId": "turn-9", "ops": []}),
        ("post", f"{base}/archive/", {}),
    ]


def unchanged(sid: str) -> tuple[Any, ...]:
    row = AgentSession.objects.get(session_id=sid)
    return row.leaf_entry_id, row.entry_count, AuditRecord.objects.filter(session_id=sid).count()


@pytest.fixture
def story(api, kind) -> ApiStory:
    return roleplay_session(api, kind)


def test_anonymous_and_bad_tokens_get_401(story):
    before = unchanged(story.sid)
    bad_token = APIClient()
    bad_token.credentials(HTTP_AUTHORIZATION="Token nosuchkey")
    for client, code in ((APIClient(), "not_authenticated"), (bad_token, "authentication_failed")):
        for method, url, *_ in [*reads(story), *writes(story)]:
            response = send(client, method, url, {})
            assert response.status_code == 401, (method, url)
            assert response.json()["error"]["code"] == code
    assert unchanged(story.sid) == before


def test_another_user_gets_404_as_if_the_session_did_not_exist(story, api_for, users):
    bob = api_for(users.bob).client
    before = unchanged(story.sid)
    for method, url, *rest in [*reads(story), *writes(story)]:
        response = send(bob, method, url, rest[0] if rest else None)
        assert response.status_code == 404, (method, url)
        assert response.json()["error"]["code"] == "session_not_found"
    assert unchanged(story.sid) == before


def test_view_only_staff_read_everything_and_change_nothing(story, api_for, users):
    viewer = api_for(users.viewer)
    for method, url in reads(story):
        assert send(viewer.client, method, url).status_code == 200, url
    assert viewer.get(f"{story.base}/state/") == story.state()
    before = unchanged(story.sid)
    for method, url, body in writes(story):
        response = send(viewer.client, method, url, body)
        assert response.status_code == 403, (method, url)
        assert response.json()["error"]["code"] == "permission_denied"
    assert unchanged(story.sid) == before


def test_view_only_staff_change_their_own_roleplay_sessions(api_for, kind, users):
    own = roleplay_session(api_for(users.viewer), kind)
    for method, url, body in writes(own):
        assert send(own.api.client, method, url, body).status_code == 201, url
    assert {r.actor for r in AuditRecord.objects.filter(session_id=own.sid, operation__startswith="roleplay_")} == {
        "viewer"
    }


def test_moderators_read_and_change_others_sessions_audited_as_themselves(story, api_for, users):
    moderator = api_for(users.moderator)
    for method, url in reads(story):
        assert send(moderator.client, method, url).status_code == 200, url
    for method, url, body in writes(story):
        response = send(moderator.client, method, url, body)
        assert response.status_code == 201, (url, response.content[:300])
    records = AuditRecord.objects.filter(session_id=story.sid, operation__startswith="roleplay_")
    assert {(r.actor, r.channel, r.user_id) for r in records} == {("moderator", "api", users.moderator.pk)}
    assert records.count() == len(writes(story))  # one record a write


def test_the_owner_reads_and_writes(story):
    for method, url in reads(story):
        assert send(story.api.client, method, url).status_code == 200, url
    for method, url, body in writes(story):
        assert send(story.api.client, method, url, body).status_code == 201, url


def test_session_authentication_needs_the_csrf_token_to_write(story):
    browser = APIClient(enforce_csrf_checks=True)
    assert browser.login(username="alice", password="pw")
    assert browser.get(f"{story.base}/state/").status_code == 200
    body = {"op": "add", "path": "/c", "value": 3, "reason": "r"}
    refused = browser.post(f"{story.base}/corrections/", body, format="json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    browser.get("/admin/login/")  # sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    accepted = browser.post(f"{story.base}/corrections/", body, format="json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201
