"""The read endpoints use a fixed number of queries, whatever the number of
sessions or entries (authentication and permission lookups included)."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.providers.factory import get_provider_for_session
from tests.providers.test_history_reads import long_session

from .conftest import Api
from .roleplay_story import ApiStory, add, review

# The token with the session row (one query under a session), the user's
# permissions (staff), the provider's reads.
MAX_QUERIES = 7


def count_queries(api: Api, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        api.get(url)
    return len(captured.captured_queries)


def grow(api: Api, sid: str, entries: int) -> None:
    """A branched tree of ``entries`` more entries, with labels."""
    for i in range(entries):
        entry = api.say(sid, f"m{i}", role="user" if i % 2 == 0 else "assistant")
        if i % 10 == 5:
            api.post(f"/api/sessions/{sid}/labels/", {"target_id": entry["id"], "label": f"l{i}"}, expected=201)
        if i % 15 == 14:
            api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": entry["parentId"]})


def test_session_list_and_retrieve(api_for, kind, users, django_assert_max_num_queries):
    for user in (users.alice, users.viewer):  # a plain owner, and staff who see every session
        api = api_for(user)
        sid = api.create_session(kind)["session_id"]
        api.say(sid, "hello")
        api.post(f"/api/sessions/{sid}/fork/", {"entry_id": api.say(sid, "fork me")["id"]}, expected=201)
        small = (count_queries(api, "/api/sessions/"), count_queries(api, f"/api/sessions/{sid}/"))
        for i in range(30):
            api.create_session(kind, title=f"more {i}")
        grow(api, sid, 40)
        for i in range(3):
            api.post(f"/api/sessions/{sid}/fork/", {"entry_id": api.say(sid, f"fork {i}")["id"]}, expected=201)
        with django_assert_max_num_queries(MAX_QUERIES):
            listed = api.get("/api/sessions/?page_size=100")
        assert len(listed["results"]) >= 35
        with django_assert_max_num_queries(MAX_QUERIES):
            assert len(api.get(f"/api/sessions/{sid}/")["children"]) == 4
        large = (count_queries(api, "/api/sessions/"), count_queries(api, f"/api/sessions/{sid}/"))
        assert small == large, user


def test_context_tree_path_and_entry_pages(api, kind, users, django_assert_max_num_queries):
    sid = api.create_session(kind)["session_id"]
    grow(api, sid, 5)
    urls = [
        f"/api/sessions/{sid}/context/",
        f"/api/sessions/{sid}/tree/",
        f"/api/sessions/{sid}/path/",
        f"/api/sessions/{sid}/entries/?page_size=3",
        f"/api/sessions/{sid}/entries/?type=label",
    ]
    small = [count_queries(api, url) for url in urls]
    grow(api, sid, 120)
    for url in urls:
        with django_assert_max_num_queries(MAX_QUERIES):
            api.get(url)
    large = [count_queries(api, url) for url in urls]
    assert small == large
    assert len(api.get(f"/api/sessions/{sid}/path/")["entries"]) > 50


def test_roleplay_reads_stay_bounded_on_a_long_branch(api, kind, django_assert_max_num_queries):
    story = ApiStory(api, kind)
    ids = story.haircut_story()
    story.turn(reviews=[review("review-a", add("/a", 1))])
    urls = [
        f"{story.base}/state/",
        f"{story.base}/reviews/",
        f"{story.base}/checkpoints/",
        f"{story.base}/diff/?from={ids['cut']}",
    ]
    small = [count_queries(api, url) for url in urls]
    for n in range(300):
        story.assistant(f"line {n}")
        if n % 10 == 9:
            story.turn([add(f"/n{n}", n)])
        if n % 100 == 99:
            story.checkpoint()
    for url in urls:
        with django_assert_max_num_queries(MAX_QUERIES):
            api.get(url)
    large = [count_queries(api, url) for url in urls]
    # At most one read more on the long branch: the head (the identity) and the tail
    # (from the latest checkpoint) are read apart once they no longer fit in one chunk.
    assert all(after - before <= 1 for before, after in zip(small, large, strict=True)), (small, large)
    assert story.state()["revision"] == 32


# Writes: the token and the session the user may see (which names its
# provider), read in one query, then the operation's own statements (tests/services/test_statements.py),
# whatever the session's size. SAVEPOINT/RELEASE not counted. An append of
# a message adds its search index row.
WRITE_QUERIES = {
    "file": {"append": 5, "label": 4, "navigate": 4, "switch-leaf": 4},
    "mysql": {"append": 6, "label": 6, "navigate": 6, "switch-leaf": 5},
}


def count_statements(api: Api, method: str, url: str, body: dict, expected: int) -> int:
    with CaptureQueriesContext(connection) as captured:
        api.call(method, url, expected, body)
    return sum(1 for query in captured.captured_queries if "SAVEPOINT" not in query["sql"])


def test_writes_cost_a_fixed_number_of_statements(api, kind):
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "hello")
    second = api.say(sid, "again", role="assistant")

    def writes() -> dict[str, int]:
        base = f"/api/sessions/{sid}"
        return {
            "append": count_statements(
                api, "post", f"{base}/entries/", {"message": {"role": "user", "content": "x"}}, 201
            ),
            "label": count_statements(api, "post", f"{base}/labels/", {"target_id": first["id"], "label": "l"}, 201),
            "navigate": count_statements(api, "post", f"{base}/navigate/", {"target_id": second["id"]}, 200),
            "switch-leaf": count_statements(api, "post", f"{base}/switch-leaf/", {"entry_id": first["id"]}, 200),
        }

    small = writes()
    grow(api, sid, 60)
    assert writes() == small == WRITE_QUERIES[kind]


def test_context_and_entry_endpoints_do_not_grow_with_a_compacted_history(api, kind):
    """Issue 23: the context at the leaf (a compaction every 400 entries) and
    one entry cost the same statements at 50 and at 2,000 entries."""
    counts = []
    for size in (50, 2000):
        sid = api.create_session(kind)["session_id"]
        provider = get_provider_for_session(sid)

        entries = long_session(size)

        def fill(writer, entries=entries):
            for entry in entries:
                if entry["parentId"] != writer.leaf_entry_id:
                    writer.switch_leaf(entry["parentId"])
                writer.append({k: v for k, v in entry.items() if k != "parentId"})

        provider.transact(sid, fill)
        leaf = provider.get_session(sid)["leaf_entry_id"]
        context = api.get(f"/api/sessions/{sid}/context/")
        assert context["messages"]
        counts.append(
            (
                count_queries(api, f"/api/sessions/{sid}/context/"),
                count_queries(api, f"/api/sessions/{sid}/entries/{leaf}/"),
            )
        )
    assert counts[0] == counts[1], counts
