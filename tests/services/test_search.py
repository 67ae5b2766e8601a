"""``moderation.search_entries``: plain words over the text of entries across
sessions, with the session list's filters, as the searcher may see them,
newest first, with a highlighted snippet; no input is an engine operator
or an error. On both providers, on SQLite (FTS5) and MySQL/MariaDB (InnoDB)."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest
from django.contrib.auth.models import Permission, User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.core.errors import BadInput, InvalidSessionId, SearchTooBroad
from sessiontree.models import Agent
from sessiontree.services import entries, moderation, sessions
from tests.contract.conftest import make_provider

# InnoDB's full-text index sees committed rows only: these tests commit.
pytestmark = pytest.mark.django_db(transaction=True)
WHO = {"actor": "t", "channel": "internal"}


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


@pytest.fixture
def corpus(tmp_path):
    """alice's sessions (file and mysql), bob's, one archived, one deleted; an agent."""
    agent = Agent.objects.create(name="helper")
    file = make_provider("file", tmp_path)
    mysql = make_provider("mysql", tmp_path)
    made = {}
    for session_id, provider, owner, text in [
        ("alice-file", file, "alice", "my card is 4111 1111 1111 1111, call me"),
        ("alice-db", mysql, "alice", "the meerkat said hello to Bob@Example.com"),
        ("bob-file", file, "bob", "bob's meerkat has a card too: <script>alert(1)</script>"),
        ("bob-archived", mysql, "bob", "archived meerkat"),
        ("bob-deleted", file, "bob", "deleted meerkat"),
    ]:
        sessions.create_session(
            session_id=session_id,
            provider=provider,
            user_id=owner,
            agent=agent if session_id == "alice-db" else None,
            **WHO,
        )
        made[session_id] = entries.append_message(session_id=session_id, message=user(text), provider=provider, **WHO)
    sessions.archive_session(session_id="bob-archived", **WHO)
    sessions.delete_session(session_id="bob-deleted", **WHO)
    return made, agent


def users():
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_agentsession"))
    return {
        "alice": User.objects.create_user("alice"),
        "bob": User.objects.create_user("bob"),
        "viewer": User.objects.get(pk=viewer.pk),
        "staff_without_view": User.objects.create_user("staffer", is_staff=True),
        "root": User.objects.create_superuser("root"),
        "gone": User.objects.create_user("alice2", is_active=False),
    }


def sessions_found(q, actor="t", **filters):
    return sorted(hit["session_id"] for hit in moderation.search_entries(q=q, actor=actor, **filters))


def test_who_finds_what(corpus):
    people = users()
    assert sessions_found("meerkat", actor=people["alice"]) == ["alice-db"]
    assert sessions_found("meerkat", actor=people["bob"]) == ["bob-archived", "bob-file"]
    assert sessions_found("meerkat", actor=people["viewer"]) == ["alice-db", "bob-archived", "bob-file"]
    assert sessions_found("meerkat", actor=people["root"]) == ["alice-db", "bob-archived", "bob-file"]
    assert sessions_found("meerkat", actor="cli:ops") == ["alice-db", "bob-archived", "bob-file"]
    # Staff without the view permission see their own sessions only (none here); an inactive user nothing.
    assert sessions_found("meerkat", actor=people["staff_without_view"]) == []
    assert sessions_found("meerkat", actor=people["gone"]) == []
    # An owner's filter for another user's sessions finds nothing of theirs.
    assert sessions_found("meerkat", actor=people["alice"], user="bob") == []


def test_the_session_list_filters(corpus):
    _made, agent = corpus
    assert sessions_found("meerkat", user="bob") == ["bob-archived", "bob-file"]
    assert sessions_found("meerkat", agent=agent.pk) == ["alice-db"]
    assert sessions_found("meerkat", agent="helper") == ["alice-db"]
    assert sessions_found("meerkat", provider="mysql") == ["alice-db", "bob-archived"]
    assert sessions_found("meerkat", status="archived") == ["bob-archived"]
    assert sessions_found("meerkat", status="deleted") == ["bob-deleted"]
    assert sessions_found("meerkat", session_id="bob-file") == ["bob-file"]
    assert sessions_found("meerkat", session_id="nobody") == []
    with pytest.raises(BadInput):
        sessions_found("meerkat", agent="no such agent")
    with pytest.raises(BadInput):
        sessions_found("meerkat", status="gone")
    with pytest.raises(InvalidSessionId):
        sessions_found("meerkat", session_id="../x")
    with pytest.raises(BadInput):
        moderation.search_entries(q="meerkat", limit=0, actor="t")


def test_every_word_counts_phrases_and_case(corpus):
    made, _agent = corpus
    assert sessions_found("card meerkat") == ["bob-file"]
    assert sessions_found("CARD") == ["alice-file", "bob-file"]
    assert sessions_found("4111-1111") == ["alice-file"]  # a phrase of its words
    assert sessions_found("bob@example.com") == ["alice-db"]
    assert sessions_found("1111 4111 card") == ["alice-file"]
    assert sessions_found("example.com meerkat hello") == ["alice-db"]
    assert sessions_found("meerkat nothere") == []
    (hit,) = moderation.search_entries(q="4111", actor="t")
    assert hit == {
        "session_id": "alice-file",
        "entry_id": made["alice-file"]["id"],
        "type": "message",
        "role": "user",
        "snippet": "my card is <mark>4111</mark> 1111 1111 1111, call me",
    }


def test_snippets_escape_the_text(corpus):
    (hit,) = moderation.search_entries(q="card meerkat", actor="t")
    assert "<script>" not in hit["snippet"]
    assert "&lt;script&gt;" in hit["snippet"] and "<mark>meerkat</mark>" in hit["snippet"]


def test_newest_first_and_the_limit(tmp_path):
    provider = make_provider("file", tmp_path)
    sessions.create_session(session_id="s1", provider=provider, **WHO)
    written = [
        entries.append_message(session_id="s1", message=user(f"lemur number {i}"), provider=provider, **WHO)
        for i in range(5)
    ]
    hits = moderation.search_entries(q="lemur", actor="t", limit=3)
    assert [hit["entry_id"] for hit in hits] == [e["id"] for e in reversed(written)][:3]


@pytest.mark.parametrize(
    "q",
    [
        "NOT meerkat",
        "meerkat OR card",
        'meerkat AND "card',
        "meer*",
        "NEAR(meerkat card)",
        "text:meerkat",
        "-meerkat +card",
        "(meerkat)",
        "^meerkat",
        '"""',
        "@@@ ~~~ ***",
        "a",
        "the",
        "\x00meerkat",
        "'; DROP TABLE neta_search_entry; --",
    ],
)
def test_operators_are_plain_words_never_errors(corpus, q):
    found = moderation.search_entries(q=q, actor="t")
    assert isinstance(found, list)


def test_operator_words_are_words(corpus):
    # "NOT" is a word the text does not hold: nothing, not "everything but meerkat".
    assert sessions_found("NOT meerkat") == []
    assert sessions_found("meer*") == []  # no prefix search: "meer" is no word of the text
    assert sessions_found("(meerkat)") == ["alice-db", "bob-archived", "bob-file"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.text(max_size=60))
def test_any_text_is_a_query(corpus, q):
    assert isinstance(moderation.search_entries(q=q, actor="t"), list)


def test_a_query_that_is_too_long_is_bad_input(corpus):
    with pytest.raises(BadInput):
        moderation.search_entries(q="x" * 501, actor="t")
    assert moderation.search_entries(q="   ", actor="t") == []


@contextmanager
def search_table_locked():
    """MySQL/MariaDB: another connection holds the search table for writing,
    so a search waits on it until its time limit stops it (a slow search,
    made deterministic)."""
    from django.db import connection

    other = connection.copy()
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@SESSION.lock_wait_timeout")
        (wait,) = cursor.fetchone()
        # Without a time limit the search would wait the server's default (a year).
        cursor.execute("SET SESSION lock_wait_timeout = 3")
    try:
        with other.cursor() as cursor:
            cursor.execute("LOCK TABLES neta_search_entry WRITE")
        yield
    finally:
        with other.cursor() as cursor:
            cursor.execute("UNLOCK TABLES")
        other.close()
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION lock_wait_timeout = %s", [wait])


def test_a_search_over_the_time_limit_is_too_broad(corpus, settings):
    """MySQL/MariaDB: InnoDB computes every match of a word before it can
    order them, so a search is a statement with a time limit
    (SESSIONTREE_SEARCH_TIMEOUT_MS); past it the searcher is told to narrow
    the query (search_too_broad, 422), not kept waiting. SQLite's FTS5 stops
    at the limit of hits by itself: no time limit applies there."""
    from django.db import connection

    settings.SESSIONTREE_SEARCH_TIMEOUT_MS = 300
    if connection.vendor != "mysql":
        assert sessions_found("meerkat") == ["alice-db", "bob-archived", "bob-file"]
        return
    started = time.monotonic()
    with search_table_locked(), pytest.raises(SearchTooBroad) as caught:
        moderation.search_entries(q="meerkat", actor="t")
    assert 0.25 < time.monotonic() - started < 5
    assert caught.value.code == "search_too_broad"
    assert caught.value.http_status == 422
    assert "meerkat" in str(caught.value) and "add a word" in str(caught.value)
    assert sessions_found("meerkat") == ["alice-db", "bob-archived", "bob-file"]
    settings.SESSIONTREE_SEARCH_TIMEOUT_MS = 0  # no limit
    assert sessions_found("meerkat") == ["alice-db", "bob-archived", "bob-file"]
