"""The services with the real OpenAI-compatible summarizer, against a fake
chat-completions server the test starts on 127.0.0.1: a good answer appends
exactly one entry; every failure is a SummarizerError and leaves the session
untouched."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.errors import SummarizerError
from sessiontree.services import compact_session, navigate_tree
from sessiontree.summarizers import OpenAICompatibleSummarizer
from tests.fake_openai import FakeOpenAI, completion, serve_fake_openai

from .session_builders import assistant, snapshot_state, user, words


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with serve_fake_openai(lambda body: (200, completion("## Goal\n- ship it"), 0.0)) as server:
        yield server


def http_summarizer(fake: FakeOpenAI, timeout: float = 5.0) -> OpenAICompatibleSummarizer:
    return OpenAICompatibleSummarizer(base_url=fake.url, model="tiny-model", timeout=timeout)


@pytest.fixture
def session(provider):
    provider.create_session(session_id="s1")
    for n in range(3):
        provider.append_message("s1", user(f"request {n} " + words(100)))
        provider.append_message("s1", assistant(f"answer {n} " + words(100)))
    return provider


SETTINGS = CompactionSettings(keep_recent_tokens=200)


def test_success_appends_one_compaction(session, fake_openai):
    before = session.list_entries("s1")
    entry = compact_session(
        provider=session,
        session_id="s1",
        summarizer=http_summarizer(fake_openai),
        settings=SETTINGS,
        actor="system",
        channel="internal",
    )
    assert entry["type"] == "compaction"
    assert entry["summary"] == "## Goal\n- ship it"
    after = session.list_entries("s1")
    assert after == [*before, entry]
    assert session.get_session("s1")["leaf_entry_id"] == entry["id"]

    (sent,) = fake_openai.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["model"] == "tiny-model"
    prompt = sent["body"]["messages"][-1]["content"]
    assert "[User]: request 0" in prompt and "[User]: request 2" not in prompt  # the last turn is kept, not summarized


def test_success_appends_one_branch_summary(session, fake_openai):
    entries = session.list_entries("s1")
    target = entries[1]  # the first answer: the later turns are left behind
    result = navigate_tree(
        provider=session,
        session_id="s1",
        target_id=target["id"],
        summarize=True,
        summarizer=http_summarizer(fake_openai),
        actor="system",
        channel="internal",
    )
    assert result["summary_entry"]["summary"].endswith("## Goal\n- ship it")
    assert session.list_entries("s1") == [*entries, result["summary_entry"]]


FAILURES = {
    "http_error": (
        lambda body: (500, b'{"error": {"message": "model overloaded"}}', 0.0),
        5.0,
        "HTTP 500: model overloaded",
    ),
    "timeout": (lambda body: (200, completion("late"), 1.5), 0.3, "timed out after 0.3s"),
    "malformed": (lambda body: (200, b"<html>not json</html>", 0.0), 5.0, "malformed reply"),
    "no_choices": (lambda body: (200, b'{"choices": []}', 0.0), 5.0, r"malformed reply \(no choices"),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_failed_compaction_appends_nothing_and_keeps_the_leaf(session, fake_openai, failure):
    reply, timeout, message = FAILURES[failure]
    fake_openai.reply = reply
    before = snapshot_state(session, "s1")
    with pytest.raises(SummarizerError, match=message):
        compact_session(
            provider=session,
            session_id="s1",
            summarizer=http_summarizer(fake_openai, timeout),
            settings=SETTINGS,
            actor="system",
            channel="internal",
        )
    assert len(fake_openai.requests) == 1
    assert snapshot_state(session, "s1") == before


@pytest.mark.parametrize("failure", ["http_error", "malformed"])
def test_failed_branch_summary_appends_nothing_and_keeps_the_leaf(session, fake_openai, failure):
    reply, timeout, message = FAILURES[failure]
    fake_openai.reply = reply
    before = snapshot_state(session, "s1")
    target = before[0][1]
    with pytest.raises(SummarizerError, match=message):
        navigate_tree(
            provider=session,
            session_id="s1",
            target_id=target["id"],
            summarize=True,
            summarizer=http_summarizer(fake_openai, timeout),
            label="x",
            actor="system",
            channel="internal",
        )
    assert snapshot_state(session, "s1") == before


def test_unreachable_server_appends_nothing(session):
    # A port nothing listens on: bind one, note it, close it.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summarizer = OpenAICompatibleSummarizer(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=2)
    before = snapshot_state(session, "s1")
    with pytest.raises(SummarizerError, match="unreachable"):
        compact_session(
            provider=session,
            session_id="s1",
            summarizer=summarizer,
            settings=SETTINGS,
            actor="system",
            channel="internal",
        )
    assert snapshot_state(session, "s1") == before
