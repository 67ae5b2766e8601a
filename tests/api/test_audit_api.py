"""``GET /api/audit/``: the read-only audit trail for moderators."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from .conftest import Api, grant, token_client
from .test_errors import error_of


def auditor() -> User:
    return grant(User.objects.create_user("auditor", is_staff=True), "view_auditrecord")


def test_only_auditors_read_the_trail(api: Api, users: Any, kind: str) -> None:
    api.create_session(kind)
    error_of(api.client.get("/api/audit/"), 403, "permission_denied")
    error_of(token_client(users.moderator).get("/api/audit/"), 403)
    error_of(token_client(None).get("/api/audit/"), 401)
    records = Api(token_client(auditor())).get("/api/audit/")["results"]
    assert [r["operation"] for r in records] == ["create_session"]
    assert set(records[0]) == {
        "id",
        "created_at",
        "actor",
        "channel",
        "operation",
        "session_id",
        "entry_ids",
        "leaf_before",
        "leaf_after",
        "detail",
    }


def test_filters_and_pages_newest_first(api: Api, kind: str) -> None:
    sid = api.create_session(kind)["session_id"]
    other = api.create_session(kind)["session_id"]
    for n in range(7):
        api.say(sid, f"m{n}")
    reader = Api(token_client(auditor()))
    page = reader.get(f"/api/audit/?session={sid}&operation=append_entry&page_size=3")
    seen = [r["id"] for r in page["results"]]
    while page["next"]:
        page = reader.get(page["next"])
        seen += [r["id"] for r in page["results"]]
    assert len(seen) == 7 and seen == sorted(seen, reverse=True)  # newest first, each once
    assert {r["session_id"] for r in reader.get(f"/api/audit/?session={other}")["results"]} == {other}
    assert reader.get("/api/audit/?actor=alice&operation=create_session")["results"][0]["actor"] == "alice"
    assert reader.get("/api/audit/?since=2999-01-01T00:00:00Z")["results"] == []
    error_of(reader.client.get("/api/audit/?operation=append"), 400, "invalid_input")
    error_of(reader.client.get("/api/audit/?since=yesterday"), 400, "invalid_input")
    error_of(reader.client.get("/api/audit/?cursor=bogus"), 400, "invalid_input")


def test_channel_and_time_range_filters(api: Api, kind: str) -> None:
    from django.utils import timezone

    from sessiontree.services import moderation

    sid = api.create_session(kind)["session_id"]
    entry = api.say(sid, "hello")
    moderation.flag_entry(session_id=sid, entry_id=entry["id"], category="spam", actor="cli:ops", channel="cli")
    reader = Api(token_client(auditor()))
    assert [r["operation"] for r in reader.get(f"/api/audit/?session={sid}&channel=cli")["results"]] == ["flag_entry"]
    everything = reader.get(f"/api/audit/?session={sid}")["results"]
    assert {r["channel"] for r in everything} == {"api", "cli"}
    now = timezone.now().isoformat().replace("+00:00", "Z")
    assert reader.get(f"/api/audit/?session={sid}&until=2000-01-01T00:00:00Z")["results"] == []
    assert len(reader.get(f"/api/audit/?session={sid}&until={now}")["results"]) == len(everything)
    error_of(reader.client.get("/api/audit/?channel=phone"), 400, "invalid_input")
    error_of(reader.client.get("/api/audit/?until=later"), 400, "invalid_input")
