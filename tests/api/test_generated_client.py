"""A client generated from the served schema plays a whole agent session.

``openapi-python-client`` builds a package from ``/api/schema/`` into a
temporary folder (offline: the generator needs nothing from the network);
its typed models and functions then drive the Django application through
an ``httpx`` WSGI transport, on both providers: create, append user and
assistant messages, stream an in-flight entry and complete it, label,
navigate with a summary, fork, compact, read the context and the tree,
export, page with ``after``, conditional writes (a 412 on a stale tag), a
bulk append, and the roleplay flow (state, a correction, a review decision).
The generated package is never committed.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from sessiontree.core.pi_session_file import parse_session_entries

PACKAGE = "sessiontree_generated_client"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, django_db_blocker: Any) -> Iterator[ModuleType]:
    with django_db_blocker.unblock():
        served = APIClient().get("/api/schema/?format=json")
    assert served.status_code == 200
    folder = tmp_path_factory.mktemp("client")
    schema_file = folder / "schema.json"
    schema_file.write_bytes(served.content)
    done = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(schema_file),
            "--output-path",
            str(folder / PACKAGE),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every operation made it into the client (only the export's NDJSON body is left to the caller).
    assert "Unable to" not in done.stdout + done.stderr, done.stdout
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]


@pytest.fixture
def wsgi_connection(db: Any) -> Iterator[None]:
    # As Django's test client does: a finished request must not close the test's connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def client(generated: ModuleType, wsgi_connection: None) -> Any:
    user = User.objects.create_user("runtime")
    token = Token.objects.create(user=user)
    api = importlib.import_module(f"{PACKAGE}.client")
    base = "http://testserver"
    authenticated = api.AuthenticatedClient(base_url=base, token=token.key, prefix="Token")
    transport = httpx.WSGITransport(app=WSGIHandler())
    authenticated.set_httpx_client(
        httpx.Client(base_url=base, transport=transport, headers={"Authorization": f"Token {token.key}"})
    )
    return authenticated


def op(name: str) -> ModuleType:
    """One generated operation module, by its operationId."""
    for tag in ("sessions", "entries", "tree", "roleplay"):
        try:
            return importlib.import_module(f"{PACKAGE}.api.{tag}.{name}")
        except ModuleNotFoundError:
            continue
    raise AssertionError(f"no generated operation {name}")


def words(count: int) -> str:
    return " ".join(f"word{i % 97}" for i in range(count))


def test_a_generated_client_plays_an_agent_session(generated: ModuleType, client: Any, kind: str) -> None:
    m = importlib.import_module(f"{PACKAGE}.models")

    def user(text: str) -> Any:
        return m.UserMessage(role=m.UserMessageRole.USER, content=text, timestamp=1)

    def assistant(text: str | None, *, stop: str | None = "stop") -> Any:
        content = [] if text is None else [m.TextContent(type_=m.TextContentType.TEXT, text=text)]
        return m.AssistantMessage(
            role=m.AssistantMessageRole.ASSISTANT,
            content=content,
            provider="anthropic",
            model="claude-test",
            stop_reason=stop,
            timestamp=2,
        )

    created = op("sessions_create").sync_detailed(
        client=client, body=m.SessionCreateRequest(provider=m.ProviderEnum(kind), title="flaky test", cwd="/repo")
    )
    assert created.status_code == 201
    session = created.parsed
    assert isinstance(session, m.Session) and created.headers["etag"] == session.etag
    sid = session.session_id

    append = op("sessions_entries_create")
    question = append.sync(sid, client=client, body=m.AppendMessageRequest(message=user("Why? " + words(6000))))
    assert isinstance(question, m.MessageEntry) and question.message.role == m.UserMessageRole.USER

    # The answer streams: begun empty, patched under its own tag, completed.
    begun = op("sessions_in_flight_create").sync_detailed(
        sid,
        client=client,
        body=m.InFlightBeginRequest(
            entry=m.NewMessageEntry(type_=m.NewMessageEntryType.MESSAGE, message=assistant(None, stop=None))
        ),
    )
    assert begun.status_code == 201 and isinstance(begun.parsed, m.MessageEntry)
    streaming, tag = begun.parsed, begun.headers["etag"]
    patch = op("sessions_entries_partial_update")
    step = patch.sync_detailed(
        sid,
        streaming.id,
        client=client,
        body=m.PatchedInFlightPatchRequest(patch=m.InFlightPatch(message=assistant("It looks", stop=None))),
        if_match=tag,
    )
    assert step.status_code == 200
    stale = patch.sync_detailed(
        sid, streaming.id, client=client, body=m.PatchedInFlightPatchRequest(complete=True), if_match=tag
    )
    assert stale.status_code == 412 and isinstance(stale.parsed, m.Error)
    assert stale.parsed.error.code == "precondition_failed"
    done = patch.sync(
        sid,
        streaming.id,
        client=client,
        body=m.PatchedInFlightPatchRequest(
            patch=m.InFlightPatch(message=assistant("It looks like a race. " + words(6000))), complete=True
        ),
        if_match=step.headers["etag"],
    )
    assert isinstance(done, m.MessageEntry) and done.message.content[0].text.startswith("It looks like a race")

    label = op("sessions_labels_create").sync(
        sid, client=client, body=m.LabelRequest(target_id=question.id, label="question")
    )
    assert isinstance(label, m.LabelEntry) and label.target_id == question.id
    follow = append.sync(sid, client=client, body=m.AppendMessageRequest(message=user("Try a lock. " + words(6000))))
    append.sync(sid, client=client, body=m.AppendMessageRequest(message=assistant("Locked. " + words(6000))))

    # Back to the follow-up question, the branch left behind summarized (the offline extractive summarizer).
    navigated = op("sessions_navigate_create").sync(
        sid, client=client, body=m.NavigateRequest(target_id=follow.id, summarize=True)
    )
    assert isinstance(navigated, m.NavigateResult) and navigated.editor_text.startswith("Try a lock.")
    assert isinstance(navigated.summary_entry, m.BranchSummaryEntry) and navigated.summary_entry.summary

    # Conditional writes: the session's tag, then the same tag again (stale: 412, nothing written).
    current = op("sessions_retrieve").sync_detailed(sid, client=client)
    assert isinstance(current.parsed, m.SessionDetail)
    tag = current.headers["etag"]
    assert op("sessions_retrieve").sync_detailed(sid, client=client, if_none_match=tag).status_code == 304
    retry = m.AppendMessageRequest(message=user("Try a retry loop. " + words(6000)))
    assert append.sync_detailed(sid, client=client, body=retry, if_match=tag).status_code == 201
    again = append.sync_detailed(sid, client=client, body=retry, if_match=tag)
    assert again.status_code == 412 and again.parsed.error.code == "precondition_failed"

    bulk = op("sessions_bulk_append_create").sync(
        sid,
        client=client,
        body=m.BulkAppendRequest(
            entries=[
                m.NewModelChangeEntry(type_=m.NewModelChangeEntryType.MODEL_CHANGE, provider="openai", model_id="gpt"),
                m.NewMessageEntry(
                    type_=m.NewMessageEntryType.MESSAGE, message=assistant("A retry hides it. " + words(6000))
                ),
            ]
        ),
    )
    assert isinstance(bulk, m.BulkAppendResult) and [type(e) for e in bulk.entries] == [
        m.ModelChangeEntry,
        m.MessageEntry,
    ]
    leaf = bulk.entries[-1].id

    fork = op("sessions_fork_create").sync(
        sid, client=client, body=m.ForkRequest(entry_id=leaf, position=m.PositionEnum.AT, title="retry idea")
    )
    assert isinstance(fork, m.Session) and fork.parent_session_id == sid

    compaction = op("sessions_compact_create").sync(sid, client=client, body=m.CompactRequest())
    assert isinstance(compaction, m.CompactionEntry) and compaction.tokens_before > 0

    context = op("sessions_context_retrieve").sync(sid, client=client)
    assert isinstance(context, m.Context)
    assert isinstance(context.messages[0], m.CompactionSummaryMessage)
    assert context.model.provider == "anthropic" and context.model.model_id == "claude-test"  # the latest answer
    tree = op("sessions_tree_retrieve").sync(sid, client=client)
    assert isinstance(tree, m.Tree) and tree.leaf_entry_id == compaction.id

    exported = op("sessions_export_retrieve").sync_detailed(sid, client=client)
    assert exported.status_code == 200 and exported.headers["content-type"] == "application/x-ndjson"
    header, *entries = parse_session_entries(exported.content)
    assert header["id"] == sid and entries[-1]["id"] == compaction.id

    # Paging after a known entry, then with the cursor of the next link.
    listing = op("sessions_entries_list")
    page = listing.sync(sid, client=client, after=question.id, page_size=3)
    assert isinstance(page, m.PaginatedEntryList) and page.has_more is True
    assert page.results[0].id == streaming.id
    cursor = httpx.URL(page.next_).params["cursor"]
    rest = listing.sync(sid, client=client, cursor=cursor, page_size=100)
    assert rest.has_more is False and rest.results[-1].id == compaction.id


def test_a_generated_client_plays_the_roleplay_flow(generated: ModuleType, client: Any, kind: str) -> None:
    m = importlib.import_module(f"{PACKAGE}.models")
    sid = (
        op("sessions_create").sync(client=client, body=m.SessionCreateRequest(provider=m.ProviderEnum(kind))).session_id
    )
    commit = {
        "commitId": "commit-cut",
        "ops": [{"op": "add", "path": "/appearance", "value": {"hair": "short"}}],
        "reviews": [{"reviewId": "review-trust", "op": {"op": "add", "path": "/trust", "value": 0.5}, "note": "trust"}],
    }
    turn = m.ToolResultMessage.from_dict(
        {
            "role": "toolResult",
            "toolCallId": "call-1",
            "toolName": "roleplay_finalize_turn",
            "content": [{"type": "text", "text": "Turn finalized."}],
            "details": {"characterId": "alice", "commit": commit},
            "isError": False,
            "timestamp": 3,
        }
    )
    op("sessions_bulk_append_create").sync(
        sid,
        client=client,
        body=m.BulkAppendRequest(
            entries=[
                m.NewCustomEntry.from_dict(
                    {"type": "custom", "customType": "pi-roleplay-identity", "data": {"characterId": "alice"}}
                ),
                m.NewMessageEntry(
                    type_=m.NewMessageEntryType.MESSAGE,
                    message=m.UserMessage(role=m.UserMessageRole.USER, content="Cut your hair?"),
                ),
                m.NewMessageEntry(type_=m.NewMessageEntryType.MESSAGE, message=turn),
            ]
        ),
    )
    state = op("sessions_roleplay_state_retrieve").sync(sid, client=client)
    assert isinstance(state, m.StateDetail) and state.character_id == "alice"
    assert state.state.to_dict() == {"appearance": {"hair": "short"}}
    assert [review.review_id for review in state.pending_reviews] == ["review-trust"]

    correction = op("sessions_roleplay_corrections_create").sync(
        sid,
        client=client,
        body=m.CorrectionInlineRequest.from_dict(
            {"op": "replace", "path": "/appearance/hair", "value": "chin-length", "reason": "only trimmed"}
        ),
        if_match=op("sessions_retrieve").sync_detailed(sid, client=client).headers["etag"],
    )
    assert isinstance(correction, m.CustomEntry) and correction.custom_type == "pi-roleplay-commit"
    decision = op("sessions_roleplay_reviews_decide_create").sync(
        sid, "review-trust", client=client, body=m.AcceptRequest(decision=m.AcceptDecisionEnum.ACCEPT)
    )
    assert isinstance(decision, m.CustomEntry) and decision.custom_type == "pi-roleplay-review-decision"
    after = op("sessions_roleplay_state_retrieve").sync(sid, client=client)
    assert after.state.to_dict() == {"appearance": {"hair": "chin-length"}, "trust": 0.5}
    assert json.loads(json.dumps(after.to_dict()))["decided_reviews"][0]["reviewId"] == "review-trust"
