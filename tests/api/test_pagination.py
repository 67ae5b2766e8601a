"""Pages say whether more follow (``has_more``); the entries list starts after
a known entry (``after``); every cursor of the documented form is a page. On
both providers."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from .conftest import Api
from .test_errors import error_of


def query_of(link: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(link).query)


def test_entry_pages_say_whether_more_follow(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    ids = [api.say(sid, f"m{i}")["id"] for i in range(5)]
    first = api.get(f"/api/sessions/{sid}/entries/?page_size=2")
    assert ([e["id"] for e in first["results"]], first["has_more"]) == (ids[:2], True)
    last = api.get(f"/api/sessions/{sid}/entries/?page_size=5")
    assert (last["has_more"], last["next"]) == (False, None)


def test_after_starts_after_a_known_entry(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    ids = [api.say(sid, f"m{i}")["id"] for i in range(5)]
    page = api.get(f"/api/sessions/{sid}/entries/?after={ids[1]}&page_size=2")
    assert [e["id"] for e in page["results"]] == ids[2:4] and page["has_more"] is True
    # The links page on with a cursor, never with after again.
    assert "after" not in query_of(page["next"]) and "after" not in query_of(page["previous"])
    rest = api.get(page["next"].split("testserver", 1)[-1])
    assert [e["id"] for e in rest["results"]] == ids[4:] and rest["has_more"] is False
    back = api.get(page["previous"].split("testserver", 1)[-1])
    assert [e["id"] for e in back["results"]] == ids[:2]
    end = api.get(f"/api/sessions/{sid}/entries/?after={ids[-1]}")
    assert (end["results"], end["has_more"], end["next"]) == ([], False, None)


def test_after_with_a_type_filter_counts_from_the_entrys_place(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "a")
    label = api.post(f"/api/sessions/{sid}/labels/", {"target_id": first["id"], "label": "x"}, expected=201)
    second = api.say(sid, "b")
    later = api.post(f"/api/sessions/{sid}/labels/", {"target_id": second["id"], "label": "y"}, expected=201)
    # after a message (not a label itself): the labels after its place.
    page = api.get(f"/api/sessions/{sid}/entries/?type=label&after={first['id']}")
    assert [e["id"] for e in page["results"]] == [label["id"], later["id"]]
    page = api.get(f"/api/sessions/{sid}/entries/?type=label&after={second['id']}")
    assert [e["id"] for e in page["results"]] == [later["id"]]


def test_after_must_name_an_entry_and_a_cursor_wins_over_it(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "a")
    second = api.say(sid, "b")
    error_of(api.client.get(f"/api/sessions/{sid}/entries/?after=nope"), 404, "entry_not_found")
    error_of(api.client.get(f"/api/sessions/{sid}/entries/?after="), 400, "invalid_input")
    page = api.get(f"/api/sessions/{sid}/entries/?after={second['id']}&cursor=o0")
    assert [e["id"] for e in page["results"]] == [first["id"], second["id"]]  # from the cursor's start


def test_session_pages_say_whether_more_follow(api: Api, kind: str) -> None:
    for _ in range(3):
        api.create_session(kind)
    first = api.get("/api/sessions/?page_size=2")
    assert first["has_more"] is True and len(first["results"]) == 2
    second = api.get(first["next"].split("testserver", 1)[-1])
    assert second["has_more"] is False and len(second["results"]) == 1
    assert api.get("/api/sessions/?page_size=3")["has_more"] is False


def test_every_cursor_of_the_documented_form_is_a_page(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "a")
    for cursor in ("", "n0", "r5", "n0p0", "r12p-9999999999999999", "n999999999p9999999999999999"):
        assert api.client.get(f"/api/sessions/?cursor={cursor}").status_code == 200, cursor
    for cursor in ("", "o0", "o999999999999999", "p0", "p999999999999999", "b0", "b999999999999999"):
        assert api.client.get(f"/api/sessions/{sid}/entries/?cursor={cursor}").status_code == 200, cursor
    for cursor in ("x", "n", "n0p", "n0p99999999999999999", "o-1", "o", "bz0x"):
        error_of(api.client.get(f"/api/sessions/?cursor={cursor}"), 400, "invalid_input")
        error_of(api.client.get(f"/api/sessions/{sid}/entries/?cursor={cursor}"), 400, "invalid_input")


def path_of(link: str) -> str:
    return link.split("testserver", 1)[-1]


def test_typed_pages_follow_their_links_both_ways(api: Api, kind: str) -> None:
    """Pages of one type, read by key from a position: next then previous
    links visit every entry of the type once, in append order."""
    sid = api.create_session(kind)["session_id"]
    labels = []
    for i in range(11):
        said = api.say(sid, f"m{i}")
        if i % 2:
            labels.append(
                api.post(f"/api/sessions/{sid}/labels/", {"target_id": said["id"], "label": f"l{i}"}, expected=201)[
                    "id"
                ]
            )
    page = api.get(f"/api/sessions/{sid}/entries/?type=label&page_size=2")
    assert page["previous"] is None
    seen, pages = [e["id"] for e in page["results"]], [page]
    while page["next"]:
        page = api.get(path_of(page["next"]))
        seen += [e["id"] for e in page["results"]]
        pages.append(page)
    assert seen == labels and page["has_more"] is False
    back = []
    while page["previous"]:
        page = api.get(path_of(page["previous"]))
        back = [e["id"] for e in page["results"]] + back
    assert back == labels[: len(labels) - len(pages[-1]["results"])]


def test_a_cursor_handed_out_before_positions_still_pages_on(api: Api, kind: str) -> None:
    """``o<offset>`` (an offset among the entries of the types asked for)
    still reads the page it named, and its links go on with offsets."""
    sid = api.create_session(kind)["session_id"]
    ids = [api.say(sid, f"m{i}")["id"] for i in range(7)]
    page = api.get(f"/api/sessions/{sid}/entries/?cursor=o2&page_size=2")
    assert [e["id"] for e in page["results"]] == ids[2:4]
    assert query_of(page["next"])["cursor"] == ["o4"] and query_of(page["previous"])["cursor"] == ["o0"]
    rest = api.get(path_of(page["next"]))
    assert [e["id"] for e in rest["results"]] == ids[4:6]
