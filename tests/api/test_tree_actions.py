"""Actions on a session's tree: switch-leaf, reset-leaf, navigate, fork,
compact, labels, path, context, tree, snapshot and export, on every provider."""

from __future__ import annotations

import pytest

from sessiontree.core.pi_session_file import parse_session_entries
from sessiontree.services import tree as tree_services
from tests.services.session_builders import FailingSummarizer, words

from .conftest import assert_audited, assistant_message, audit_records, user_message


def build_branched(api, sid: str) -> dict[str, str]:
    """u1 → a1 → u2 → a2, and a branch u3 off a1; the leaf ends on u3."""
    e: dict[str, str] = {}
    e["u1"] = api.say(sid, "first question")["id"]
    e["a1"] = api.say(sid, "first answer", role="assistant")["id"]
    e["u2"] = api.say(sid, "second question")["id"]
    e["a2"] = api.say(sid, "second answer", role="assistant")["id"]
    api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": e["a1"]})
    e["u3"] = api.say(sid, "another way")["id"]
    return e


def texts(context: dict) -> list[str]:
    out = []
    for message in context["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            out.append("".join(block.get("text", "") for block in content if isinstance(block, dict)))
        else:
            out.append(str(content if content is not None else message.get("summary", "")))
    return out


def test_switch_and_reset_leaf(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    e = build_branched(api, sid)
    moved = api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": e["a2"], "expected_leaf_id": e["u3"]})
    assert moved["leaf_entry_id"] == e["a2"] and moved["branch_count"] == 2
    assert_audited(sid, "switch_leaf", users.alice)
    error = api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": e["u1"], "expected_leaf_id": e["u3"]}, 409)
    assert error["error"]["code"] == "leaf_conflict"
    assert api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": "nothere1"}, 404)["error"]["code"] == (
        "entry_not_found"
    )
    api.post(f"/api/sessions/{sid}/switch-leaf/", {}, 400)
    api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": ["a"]}, 400)
    reset = api.post(f"/api/sessions/{sid}/reset-leaf/", {"expected_leaf_id": e["a2"]})
    assert reset["leaf_entry_id"] is None
    assert_audited(sid, "reset_leaf", users.alice)
    assert api.say(sid, "new root")["parentId"] is None
    api.post(f"/api/sessions/{sid}/reset-leaf/", {"expected_leaf_id": "zzz"}, 409)


def test_navigate_to_a_user_message_gives_its_text_back_with_a_summary_and_label(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    e = build_branched(api, sid)
    result = api.post(
        f"/api/sessions/{sid}/navigate/", {"target_id": e["u2"], "summarize": True, "label": "retry-here"}
    )
    assert result["editor_text"] == "second question"
    summary, label = result["summary_entry"], result["label_entry"]
    assert summary["type"] == "branch_summary" and summary["parentId"] == e["a1"]
    assert summary["fromId"] == e["u3"]  # the leaf left behind
    assert (label["targetId"], label["label"]) == (summary["id"], "retry-here")
    assert result["leaf_entry_id"] == label["id"]
    assert_audited(sid, "navigate_tree", users.alice)
    context = api.get(f"/api/sessions/{sid}/context/")
    assert context["messages"][-1]["role"] == "branchSummary"
    assert context["source_entry_ids"] == [e["u1"], e["a1"], summary["id"]]


def test_navigate_plain_and_refusals(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    e = build_branched(api, sid)
    result = api.post(f"/api/sessions/{sid}/navigate/", {"target_id": e["a2"]})
    assert result == {"leaf_entry_id": e["a2"], "editor_text": None, "summary_entry": None, "label_entry": None}
    api.post(f"/api/sessions/{sid}/navigate/", {"target_id": "nothere1"}, 404)
    api.post(f"/api/sessions/{sid}/navigate/", {"target_id": e["u1"], "summarize": "yes"}, 400)
    api.post(f"/api/sessions/{sid}/navigate/", {"target_id": e["u1"], "label": 7}, 400)
    conflict = {"target_id": e["u1"], "expected_leaf_id": e["u3"]}
    assert api.post(f"/api/sessions/{sid}/navigate/", conflict, 409)["error"]["code"] == "leaf_conflict"


def test_navigate_summarizer_failure_is_502_and_writes_nothing(api, kind, users, monkeypatch):
    sid = api.create_session(kind)["session_id"]
    e = build_branched(api, sid)
    monkeypatch.setattr(tree_services, "get_summarizer", FailingSummarizer)
    error = api.post(f"/api/sessions/{sid}/navigate/", {"target_id": e["a2"], "summarize": True}, 502)["error"]
    assert error["code"] == "summarizer_failed"
    assert api.get(f"/api/sessions/{sid}/")["leaf_entry_id"] == e["u3"]
    assert not audit_records(sid, "navigate_tree")


def test_fork_before_and_at(api, kind, users):
    sid = api.create_session(kind, title="source", cwd="/repo")["session_id"]
    e = build_branched(api, sid)
    label = {"target_id": e["u1"], "label": "start"}
    api.post(f"/api/sessions/{sid}/labels/", label, expected=201)
    before = api.post(f"/api/sessions/{sid}/fork/", {"entry_id": e["u2"]}, expected=201)
    assert before["parent_session_id"] == sid and before["user_id"] == "alice" and before["provider"] == kind
    assert_audited(sid, "fork_session", users.alice)
    assert_audited(before["session_id"], "create_session", users.alice)
    forked_path = api.get(f"/api/sessions/{before['session_id']}/path/")["entries"]
    assert [entry["id"] for entry in forked_path if entry["type"] == "message"] == [e["u1"], e["a1"]]
    tree = api.get(f"/api/sessions/{before['session_id']}/tree/")
    assert tree["roots"][0]["label"] == "start"
    at = api.post(
        f"/api/sessions/{sid}/fork/",
        {"entry_id": e["a2"], "position": "at", "new_session_id": "fork-at-a2", "title": "mine"},
        expected=201,
    )
    assert (at["session_id"], at["title"]) == ("fork-at-a2", "mine")
    copied = api.get("/api/sessions/fork-at-a2/entries/")["results"]
    assert [x["id"] for x in copied if x["type"] == "message"] == [e["u1"], e["a1"], e["u2"], e["a2"]]
    assert copied[-1]["type"] == "label"  # labels on the path are re-created after it
    assert texts(api.get("/api/sessions/fork-at-a2/context/")) == texts(
        api.get(f"/api/sessions/{sid}/context/?leaf={e['a2']}")
    )
    assert api.post(f"/api/sessions/{sid}/fork/", {"entry_id": e["a1"]}, 400)["error"]["code"] == "invalid_entry"
    api.post(f"/api/sessions/{sid}/fork/", {"entry_id": e["a1"], "position": "after"}, 400)
    api.post(f"/api/sessions/{sid}/fork/", {"entry_id": "nothere1", "position": "at"}, 404)
    dup = {"entry_id": e["a1"], "position": "at", "new_session_id": "fork-at-a2"}
    assert api.post(f"/api/sessions/{sid}/fork/", dup, 409)["error"]["code"] == "session_id_unavailable"


def test_compact_nothing_then_something(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "short")
    assert api.post(f"/api/sessions/{sid}/compact/", {}, expected=200) == {"compacted": False}
    assert not audit_records(sid, "compact_session")
    stored = []
    for i in range(4):
        stored.append(api.say(sid, f"question {i} " + words(9000))["id"])
        stored.append(api.say(sid, f"answer {i} " + words(9000), role="assistant")["id"])
    entry = api.post(f"/api/sessions/{sid}/compact/", {"custom_instructions": "keep the numbers"}, expected=201)
    assert entry["type"] == "compaction" and entry["parentId"] == stored[-1]
    assert entry["firstKeptEntryId"] in stored[1:]
    assert_audited(sid, "compact_session", users.alice)
    context = api.get(f"/api/sessions/{sid}/context/")
    assert context["messages"][0]["role"] == "compactionSummary"
    assert context["source_entry_ids"][0] == entry["id"]
    assert api.get(f"/api/sessions/{sid}/")["compaction_count"] == 1
    api.post(f"/api/sessions/{sid}/compact/", {"custom_instructions": 3}, expected=400)


def test_compact_with_keep_recent_tokens_as_the_admin_can(api, kind):
    """Issue 25: the admin's compact form lowers the keep-recent budget; the API
    refused the same field (400 unknown field)."""
    sid = api.create_session(kind)["session_id"]
    ids = [api.say(sid, f"turn {i} " + words(300), role="user" if i % 2 == 0 else "assistant")["id"] for i in range(8)]
    # With Pi's default budget (20,000 tokens) these ~3,000 tokens are all recent: nothing to compact.
    assert api.post(f"/api/sessions/{sid}/compact/", {}, expected=200) == {"compacted": False}

    entry = api.post(f"/api/sessions/{sid}/compact/", {"keep_recent_tokens": 500}, expected=201)

    assert entry["type"] == "compaction" and entry["firstKeptEntryId"] in ids[4:]
    for bad in (-1, "500", 1.5, True, 10**12):
        api.post(f"/api/sessions/{sid}/compact/", {"keep_recent_tokens": bad}, expected=400)


def test_labels_set_and_clear(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "hello")
    entry = api.post(f"/api/sessions/{sid}/labels/", {"target_id": first["id"], "label": "greeting"}, expected=201)
    assert (entry["type"], entry["targetId"], entry["label"]) == ("label", first["id"], "greeting")
    assert_audited(sid, "set_label", users.alice)
    assert api.get(f"/api/sessions/{sid}/tree/")["roots"][0]["label"] == "greeting"
    api.post(f"/api/sessions/{sid}/labels/", {"target_id": first["id"], "label": None}, expected=201)
    assert_audited(sid, "clear_label", users.alice)
    assert "label" not in api.get(f"/api/sessions/{sid}/tree/")["roots"][0]
    api.post(f"/api/sessions/{sid}/labels/", {"target_id": first["id"]}, expected=400)  # label is required
    api.post(f"/api/sessions/{sid}/labels/", {"target_id": "nothere1", "label": "x"}, expected=404)


def test_path_and_context_at_the_leaf_or_any_entry(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    e = build_branched(api, sid)
    assert [x["id"] for x in api.get(f"/api/sessions/{sid}/path/")["entries"]] == [e["u1"], e["a1"], e["u3"]]
    at_a2 = api.get(f"/api/sessions/{sid}/path/?leaf={e['a2']}")["entries"]
    assert [x["id"] for x in at_a2] == [e["u1"], e["a1"], e["u2"], e["a2"]]
    context = api.get(f"/api/sessions/{sid}/context/")
    assert texts(context) == ["first question", "first answer", "another way"]
    assert context["model"] == {"provider": "anthropic", "modelId": "claude-test"}
    assert context["thinking_level"] == "off"
    assert api.get(f"/api/sessions/{sid}/context/?leaf={e['a2']}")["source_entry_ids"] == [
        e["u1"],
        e["a1"],
        e["u2"],
        e["a2"],
    ]
    assert api.get(f"/api/sessions/{sid}/context/?leaf=nothere1", expected=404)["error"]["code"] == "entry_not_found"
    api.get(f"/api/sessions/{sid}/path/?leaf={'x' * 65}", expected=400)
    empty = api.create_session(kind)["session_id"]
    assert api.get(f"/api/sessions/{empty}/path/") == {"entries": []}
    assert api.get(f"/api/sessions/{empty}/context/")["messages"] == []


def test_tree_nests_children_in_append_order_with_a_window(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    e = build_branched(api, sid)
    tree = api.get(f"/api/sessions/{sid}/tree/")
    assert tree["leaf_entry_id"] == e["u3"] and tree["depth"] == 50 and tree["root"] is None
    (root,) = tree["roots"]
    assert (root["id"], root["type"], root["role"], root["child_count"]) == (e["u1"], "message", "user", 1)
    a1 = root["children"][0]
    assert [child["id"] for child in a1["children"]] == [e["u2"], e["u3"]]
    assert a1["children"][0]["children"][0]["id"] == e["a2"]
    shallow = api.get(f"/api/sessions/{sid}/tree/?depth=1")
    assert shallow["roots"][0]["children"][0]["children"] == []
    assert shallow["roots"][0]["children"][0]["child_count"] == 2
    window = api.get(f"/api/sessions/{sid}/tree/?root={e['a1']}&depth=0")
    assert [node["id"] for node in window["roots"]] == [e["a1"]] and window["roots"][0]["children"] == []
    assert api.get(f"/api/sessions/{sid}/tree/?root=nothere1", expected=404)["error"]["code"] == "entry_not_found"
    for bad in ("depth=-1", "depth=101", "depth=x", "depth=" + "9" * 5000):
        assert api.get(f"/api/sessions/{sid}/tree/?{bad}", expected=400)["error"]["code"] == "invalid_input"


def test_tree_of_a_deep_chain_stays_readable(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    previous = None
    for i in range(150):
        previous = api.append(sid, entry={"type": "custom", "customType": "step", "data": i})["id"]
    tree = api.get(f"/api/sessions/{sid}/tree/?depth=100")
    node, levels = tree["roots"][0], 0
    while node["children"]:
        node, levels = node["children"][0], levels + 1
    assert levels == 100 and node["child_count"] == 1
    rest = api.get(f"/api/sessions/{sid}/tree/?root={node['id']}&depth=100")
    node, levels = rest["roots"][0], 0
    while node["children"]:
        node, levels = node["children"][0], levels + 1
    assert node["id"] == previous and levels == 49


def test_snapshot(api, kind, users):
    sid = api.create_session(kind, title="snap")["session_id"]
    e = build_branched(api, sid)
    snapshot = api.get(f"/api/sessions/{sid}/snapshot/")
    assert snapshot["session"]["title"] == "snap" and "session_file" not in snapshot["session"]
    assert [entry["id"] for entry in snapshot["entries"]] == [e["u1"], e["a1"], e["u2"], e["a2"], e["u3"]]
    assert snapshot["active_path"] == [e["u1"], e["a1"], e["u3"]]
    assert snapshot["children_by_parent_id"][e["a1"]] == [e["u2"], e["u3"]]
    assert snapshot["root_entry_ids"] == [e["u1"]]
    assert texts(snapshot["runtime_context"]) == ["first question", "first answer", "another way"]


@pytest.mark.parametrize(
    ("scope", "entry_key", "expected"),
    [
        ("full", None, ["u1", "a1", "u2", "a2", "u3"]),
        ("active", None, ["u1", "a1", "u3"]),
        ("active", "a2", ["u1", "a1", "u2", "a2"]),
        ("subtree", "u2", ["u1", "a1", "u2", "a2"]),
    ],
)
def test_export_scopes_stream_pi_jsonl(api, kind, users, scope, entry_key, expected):
    sid = api.create_session(kind)["session_id"]
    e = build_branched(api, sid)
    query = f"?scope={scope}" + (f"&entry={e[entry_key]}" if entry_key else "")
    response = api.get(f"/api/sessions/{sid}/export/{query}", HTTP_ACCEPT="application/x-ndjson")
    assert response["Content-Type"] == "application/x-ndjson"
    assert response.streaming
    assert response["Content-Disposition"] == f'attachment; filename="{sid}.jsonl"'
    text = b"".join(response.streaming_content).decode()
    header, *entries = parse_session_entries(text)
    assert header["type"] == "session" and header["id"] == sid
    assert [entry["id"] for entry in entries] == [e[key] for key in expected]


def test_export_refusals_are_json(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    for query, status, code in [
        ("?scope=everything", 400, "invalid_input"),
        ("?scope=subtree", 400, "bad_input"),
        ("?scope=subtree&entry=nothere1", 404, "entry_not_found"),
    ]:
        response = api.client.get(f"/api/sessions/{sid}/export/{query}", HTTP_ACCEPT="application/x-ndjson")
        assert (response.status_code, response["Content-Type"]) == (status, "application/json"), query
        assert response.json()["error"]["code"] == code


def test_message_entries_keep_pi_camel_case(api, kind, users):
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hi")
    entry = api.append(
        sid,
        entry={
            "type": "message",
            "message": {**assistant_message("x"), "stopReason": "toolUse"},
            "sourceRuntime": "pi",
        },
    )
    assert entry["message"]["stopReason"] == "toolUse" and entry["sourceRuntime"] == "pi"
    assert api.get(f"/api/sessions/{sid}/entries/{entry['id']}/")["parentId"] is not None
    assert api.append(sid, message=user_message("x"))["message"]["role"] == "user"
