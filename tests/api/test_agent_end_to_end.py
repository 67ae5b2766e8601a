"""An agent runtime driving a session over HTTP only, start to finish: the
context it reads back equals what the kernel builds from the exported file."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.pi_session_file import migrate_to_current_version, parse_session_entries
from sessiontree.models import AuditRecord
from tests.services.session_builders import words

from .conftest import Api, assistant_message, token_client


def export(api: Api, sid: str, query: str = "") -> list[dict[str, Any]]:
    response = api.get(f"/api/sessions/{sid}/export/{query}", HTTP_ACCEPT="application/x-ndjson")
    file_entries = parse_session_entries(b"".join(response.streaming_content))
    migrate_to_current_version(file_entries)
    header, *entries = file_entries
    assert header["type"] == "session" and header["id"] == sid
    return entries


def test_an_agent_plays_a_whole_session_over_http(kind, db):
    agent_user = User.objects.create_user("agent-runtime")
    api = Api(token_client(agent_user))
    session = api.create_session(kind, title="fix the flaky test", cwd="/repo")
    sid = session["session_id"]

    api.append(sid, entry={"type": "model_change", "provider": "anthropic", "modelId": "claude-test"})
    api.append(sid, entry={"type": "thinking_level_change", "thinkingLevel": "high"})
    question = api.say(sid, "The test in test_io.py fails one run in ten. " + words(9000))

    # The assistant's answer streams in: begun empty, patched as tokens arrive, completed.
    leaf = api.get(f"/api/sessions/{sid}/")["leaf_entry_id"]
    streaming = {"type": "message", "message": {**assistant_message(""), "content": []}}
    started = api.post(f"/api/sessions/{sid}/in-flight/", {"entry": streaming, "expected_leaf_id": leaf}, 201)
    url = f"/api/sessions/{sid}/entries/{started['id']}/"
    text = ""
    for chunk in ("It looks like ", "a race between ", "two writers. " + words(9000)):
        text += chunk
        api.patch(url, {"patch": {"message": {**assistant_message(text), "stopReason": None}}})
        assert api.get(f"/api/sessions/{sid}/context/")["messages"][-1]["content"][0]["text"] == text
    answer = api.patch(url, {"patch": {"message": assistant_message(text)}, "complete": True})
    assert answer["message"]["stopReason"] == "stop"

    follow_up = api.say(sid, "Try a lock then. " + words(9000))
    api.say(sid, "Added a lock; the test passes 100 runs out of 100. " + words(9000), role="assistant")

    # Change of mind: go back to the follow-up question, summarizing the branch left behind.
    navigated = api.post(
        f"/api/sessions/{sid}/navigate/", {"target_id": follow_up["id"], "summarize": True, "label": "lock attempt"}
    )
    assert navigated["editor_text"].startswith("Try a lock then.")
    assert navigated["summary_entry"]["type"] == "branch_summary"
    api.say(sid, "Try a retry loop instead. " + words(9000))
    api.say(sid, "A retry loop hides the race; the lock is better. " + words(9000), role="assistant")

    # Fork here into a new session for a colleague; its context equals ours.
    leaf = api.get(f"/api/sessions/{sid}/")["leaf_entry_id"]
    fork = api.post(f"/api/sessions/{sid}/fork/", {"entry_id": leaf, "position": "at", "title": "retry idea"}, 201)
    ours = api.get(f"/api/sessions/{sid}/context/")
    theirs = api.get(f"/api/sessions/{fork['session_id']}/context/")
    assert theirs["messages"] == ours["messages"] and theirs["model"] == ours["model"]

    # The context grows too long: compact, then keep going.
    compaction = api.post(f"/api/sessions/{sid}/compact/", {"custom_instructions": "keep file names"}, 201)
    assert compaction["type"] == "compaction"
    api.say(sid, "Summarize where we are.")
    context = api.get(f"/api/sessions/{sid}/context/")
    assert context["messages"][0]["role"] == "compactionSummary"
    assert context["thinking_level"] == "high"
    assert context["model"] == {"provider": "anthropic", "modelId": "claude-test"}
    assert context["messages"][-1]["content"][0]["text"] == "Summarize where we are."

    # Export: the active path, and the whole tree; the kernel reads the same context from both.
    active = export(api, sid, "?scope=active")
    assert build_session_context(active) == context
    detail = api.get(f"/api/sessions/{sid}/")
    full = export(api, sid)
    assert len(full) == detail["entry_count"]
    assert build_session_context(full, detail["leaf_entry_id"]) == context
    assert question["id"] in {entry["id"] for entry in full}

    # Every change went through the operations layer, as this user, from the API.
    records = AuditRecord.objects.filter(session_id=sid)
    assert records.count() >= 12
    assert set(records.values_list("channel", "actor", "user_id")) == {("api", "agent-runtime", agent_user.pk)}
    assert {
        "create_session",
        "begin_in_flight",
        "update_in_flight",
        "complete_in_flight",
        "navigate_tree",
        "fork_session",
    } <= set(records.values_list("operation", flat=True))
    assert "compact_session" in set(records.values_list("operation", flat=True))
