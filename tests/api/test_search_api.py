"""``GET /api/search/``: on both providers; an owner finds their sessions'
entries only, a viewer every session's; bad queries are 400s with a code."""

from __future__ import annotations

import pytest

from tests.services.test_search import search_table_locked

from .conftest import Api

# InnoDB's full-text index sees committed rows only: these tests commit.
pytestmark = pytest.mark.django_db(transaction=True)


def test_search_finds_entries_with_a_snippet(api: Api, kind: str, users) -> None:
    sid = api.create_session(kind)["session_id"]
    entry = api.say(sid, "the axolotl ate a card 4111 1111 1111 1111")
    api.say(sid, "nothing to see", role="assistant")
    body = api.get("/api/search/?q=axolotl")
    assert body == {
        "results": [
            {
                "session_id": sid,
                "entry_id": entry["id"],
                "type": "message",
                "role": "user",
                "snippet": "the <mark>axolotl</mark> ate a card 4111 1111 1111 1111",
            }
        ]
    }
    assert api.get(f"/api/search/?q=axolotl&session={sid}&provider={kind}")["results"][0]["entry_id"] == entry["id"]
    assert api.get("/api/search/?q=axolotl&status=archived")["results"] == []
    assert api.get("/api/search/?q=nothing+here")["results"] == []


def test_owners_find_their_own_viewers_everything(api_for, users, kind: str) -> None:
    alice, bob, viewer = api_for(users.alice), api_for(users.bob), api_for(users.viewer)
    mine = alice.create_session(kind)["session_id"]
    alice.say(mine, "a quetzal of alice")
    theirs = bob.create_session(kind)["session_id"]
    bob.say(theirs, "a quetzal of bob")

    def sessions(client: Api, query: str = "q=quetzal") -> list[str]:
        return sorted(hit["session_id"] for hit in client.get(f"/api/search/?{query}")["results"])

    assert sessions(alice) == [mine]
    assert sessions(bob) == [theirs]
    assert sessions(viewer) == sorted([mine, theirs])
    assert sessions(alice, f"q=quetzal&session={theirs}") == []  # never another user's, not even by id
    assert sessions(viewer, "q=quetzal&user=bob") == [theirs]


def test_search_needs_a_user_and_a_query(api_for, users) -> None:
    anonymous = api_for(None)
    response = anonymous.client.get("/api/search/?q=x")
    assert response.status_code == 401
    alice = api_for(users.alice)
    for query, field in [
        ("", "q"),
        ("q=", "q"),
        ("q=x&limit=0", "limit"),
        ("q=x&limit=201", "limit"),
        ("q=x&status=gone", "status"),
        ("q=x&agent=abc", "agent"),
        ("q=x&session=..%2Fetc", "session"),
        ("q=x&provider=tape", "provider"),
        ("q=%00", "q"),
        ("q=" + "x" * 501, "q"),
    ]:
        response = alice.client.get(f"/api/search/?{query}")
        assert response.status_code == 400, (query, response.content)
        error = response.json()["error"]
        assert error["code"] == "invalid_input" and field in error["details"]["fields"], (query, error)


def test_operators_are_words_over_http(api: Api, kind: str, users) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "plain ibis words")
    for q in ['"', "ibis*", "NOT ibis", "ibis AND", "(", "NEAR(ibis)", "ibis:x", "+-~<>@"]:
        response = api.client.get("/api/search/", {"q": q})
        assert response.status_code == 200, (q, response.content)


def test_a_search_past_the_time_limit_is_422(api: Api, kind: str, users, settings) -> None:
    """MySQL/MariaDB: a search stopped by SESSIONTREE_SEARCH_TIMEOUT_MS is a
    422 with the code search_too_broad (asking again gives the same answer);
    on SQLite no time limit applies (FTS5 stops at the page's last hit)."""
    from django.db import connection

    sid = api.create_session(kind)["session_id"]
    api.say(sid, "the pangolin slept")
    settings.SESSIONTREE_SEARCH_TIMEOUT_MS = 300
    if connection.vendor != "mysql":
        response = api.client.get("/api/search/?q=pangolin")
        assert response.status_code == 200 and len(response.json()["results"]) == 1
        return
    with search_table_locked():
        response = api.client.get("/api/search/?q=pangolin")
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "search_too_broad" and "add a word" in error["message"]
