"""The OpenAI-compatible summarizer against a fake chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sessiontree.core.compaction import CompactionSettings, prepare_compaction
from sessiontree.core.errors import SummarizerError
from sessiontree.summarizers import (
    OpenAICompatibleSummarizer,
    SummaryRequest,
    generate_compaction_summary,
    get_summarizer,
)
from sessiontree.summarizers.prompts import SYSTEM_PROMPT
from tests.fake_openai import FakeOpenAI, Reply, completion, serve_fake_openai


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as server:
        yield server


def request(**overrides: Any) -> SummaryRequest:
    fields: dict[str, Any] = {
        "kind": "compaction",
        "messages": [{"role": "user", "content": "please refactor parser.py"}],
    }
    fields.update(overrides)
    return SummaryRequest(**fields)


def test_success_sends_a_chat_completion_and_returns_the_text(fake_server) -> None:
    fake_server.reply = lambda body: (200, completion("  ## Goal\n- refactor  \n"), 0.0)
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url + "/", model="tiny", api_key="sk-test", timeout=5)
    text = summarizer.summarize(request(previous_summary="OLD SUMMARY", custom_instructions="the lexer"))
    assert text == "## Goal\n- refactor"

    (sent,) = fake_server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == "Bearer sk-test"
    body = sent["body"]
    assert body["model"] == "tiny"
    assert body["stream"] is False
    assert body["max_tokens"] == 13107  # Pi's cap for a compaction: 80% of the default reserve
    system, user = body["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert "<conversation>\n[User]: please refactor parser.py\n</conversation>" in user["content"]
    assert "<previous-summary>\nOLD SUMMARY\n</previous-summary>" in user["content"]
    assert user["content"].rstrip().endswith("Pay particular attention to: the lexer")


def test_no_authorization_header_without_a_key(fake_server) -> None:
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url, model="tiny", timeout=5)
    assert summarizer.summarize(request(kind="branch", max_tokens=77)) == "SUMMARY"
    (sent,) = fake_server.requests
    assert "Authorization" not in sent["headers"]
    assert sent["body"]["max_tokens"] == 77


def test_content_parts_are_joined(fake_server) -> None:
    fake_server.reply = lambda body: (
        200,
        completion([{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]),
        0,
    )
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url, model="tiny", timeout=5)
    assert summarizer.summarize(request()) == "A\nB"


def test_http_error_is_a_clear_summarizer_error(fake_server) -> None:
    error_body = json.dumps({"error": {"message": "model 'tiny' is overloaded", "type": "server_error"}}).encode()
    fake_server.reply = lambda body: (503, error_body, 0.0)
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url, model="tiny", api_key="sk-secret", timeout=5)
    with pytest.raises(SummarizerError, match=r"HTTP 503: model 'tiny' is overloaded") as caught:
        summarizer.summarize(request())
    assert "sk-secret" not in str(caught.value)
    assert caught.value.code == "summarizer_failed"


def test_timeout_is_a_clear_summarizer_error(fake_server) -> None:
    fake_server.reply = lambda body: (200, completion("late"), 1.5)
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url, model="tiny", timeout=0.2)
    started = time.monotonic()
    with pytest.raises(SummarizerError, match=r"timed out after 0.2s"):
        summarizer.summarize(request())
    assert time.monotonic() - started < 1.4


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"<html>not json</html>", r"malformed reply \(not JSON\)"),
        (json.dumps({"choices": []}).encode(), r"malformed reply \(no choices\[0\].message.content\)"),
        (json.dumps({"object": "error"}).encode(), "malformed reply"),
        (json.dumps({"choices": [{"message": {"content": 42}}]}).encode(), "content is not text"),
        (completion("   "), "returned an empty summary"),
        (completion("half a summ", finish_reason="length"), "output limit"),
    ],
)
def test_malformed_replies_are_clear_summarizer_errors(fake_server, payload, message) -> None:
    fake_server.reply = lambda body: (200, payload, 0.0)
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url, model="tiny", timeout=5)
    with pytest.raises(SummarizerError, match=message):
        summarizer.summarize(request())


def test_unreachable_server_is_a_clear_summarizer_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, nothing listens now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summarizer = OpenAICompatibleSummarizer(base_url=f"http://127.0.0.1:{port}/v1", model="tiny", timeout=2)
    with pytest.raises(SummarizerError, match=rf"127.0.0.1:{port}/v1/chat/completions .* is unreachable"):
        summarizer.summarize(request())


def test_configuration_is_checked_and_the_key_never_shown() -> None:
    with pytest.raises(SummarizerError, match="base URL"):
        OpenAICompatibleSummarizer(base_url="", model="m")
    with pytest.raises(SummarizerError, match="model"):
        OpenAICompatibleSummarizer(base_url="http://127.0.0.1:1/v1", model="")
    assert "sk-hidden" not in repr(OpenAICompatibleSummarizer(base_url="http://x/v1", model="m", api_key="sk-hidden"))


def test_a_failed_split_turn_compaction_produces_no_summary(fake_server) -> None:
    """The second call (the turn prefix) fails: nothing comes back for the caller to write."""

    def reply(body: dict[str, Any]) -> Reply:
        if "beginning of a single turn" in body["messages"][1]["content"]:
            return 500, b'{"error": {"message": "prefix failed"}}', 0.0
        return 200, completion("history ok"), 0.0

    fake_server.reply = reply
    path = [
        {
            "type": "message",
            "id": f"e{i}",
            "parentId": f"e{i - 1}" if i else None,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": m,
        }
        for i, m in enumerate(
            [
                {"role": "user", "content": "earlier " * 50},
                {"role": "assistant", "content": [{"type": "text", "text": "earlier reply " * 50}]},
                {"role": "user", "content": "big task"},
                {"role": "assistant", "content": [{"type": "text", "text": "step " * 400}]},
                {"role": "assistant", "content": [{"type": "text", "text": "last " * 100}]},
            ]
        )
    ]
    preparation = prepare_compaction(path, CompactionSettings(keep_recent_tokens=100))
    assert preparation is not None and preparation.is_split_turn
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url, model="tiny", timeout=5)
    with pytest.raises(SummarizerError, match="prefix failed"):
        generate_compaction_summary(summarizer, preparation)
    assert len(fake_server.requests) == 2


def test_a_key_the_server_quotes_back_is_masked(fake_server) -> None:
    # Real servers quote a rejected key in their 401 body.
    body = json.dumps({"error": {"message": "Incorrect API key provided: sk-live-123456"}}).encode()
    fake_server.reply = lambda body_sent: (401, body, 0.0)
    summarizer = OpenAICompatibleSummarizer(base_url=fake_server.url, model="tiny", api_key="sk-live-123456", timeout=5)
    with pytest.raises(SummarizerError, match=r"HTTP 401: Incorrect API key provided: \*\*\*") as caught:
        summarizer.summarize(request())
    assert "sk-live-123456" not in str(caught.value)


def test_credentials_in_the_base_url_are_never_shown() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summarizer = OpenAICompatibleSummarizer(
        base_url=f"http://user:pw-secret@127.0.0.1:{port}/v1?key=q-secret", model="tiny", timeout=2
    )
    with pytest.raises(SummarizerError, match="unreachable") as caught:
        summarizer.summarize(request())
    assert "secret" not in str(caught.value) and "secret" not in repr(summarizer)
    assert f"127.0.0.1:{port}/v1" in str(caught.value)


def one_shot_raw_server(raw_reply: bytes) -> tuple[socket.socket, threading.Thread]:
    """A socket server that answers one request with ``raw_reply`` (not necessarily HTTP) and hangs up."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def answer() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(raw_reply)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize(
    "raw_reply",
    [b"garbage, not HTTP\r\n\r\n", b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"choices"'],
    ids=["not-http", "cut-short"],
)
def test_a_reply_that_is_not_valid_http_is_a_summarizer_error(raw_reply) -> None:
    listener, thread = one_shot_raw_server(raw_reply)
    with listener:
        port = listener.getsockname()[1]
        summarizer = OpenAICompatibleSummarizer(base_url=f"http://127.0.0.1:{port}/v1", model="tiny", timeout=5)
        # Before: http.client's BadStatusLine / IncompleteRead escaped untyped.
        with pytest.raises(SummarizerError, match=rf"127.0.0.1:{port}/v1/chat/completions"):
            summarizer.summarize(request())
        thread.join(timeout=5)


@pytest.mark.parametrize("base_url", ["ftp://127.0.0.1/v1", "not a url", "http:///v1"])
def test_a_base_url_that_is_not_http_is_refused_up_front(base_url) -> None:
    with pytest.raises(SummarizerError, match="http"):
        OpenAICompatibleSummarizer(base_url=base_url, model="m")


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), "soon"])
def test_a_timeout_the_socket_cannot_use_is_refused_up_front(timeout) -> None:
    with pytest.raises(SummarizerError, match="timeout must be a positive number"):
        OpenAICompatibleSummarizer(base_url="http://127.0.0.1:1/v1", model="m", timeout=timeout)


def test_the_configured_timeout_bounds_a_slow_server(settings, fake_server) -> None:
    settings.SESSIONTREE_OPENAI_BASE_URL = fake_server.url
    settings.SESSIONTREE_OPENAI_TIMEOUT = 0.3
    fake_server.reply = lambda body: (200, completion("late"), 2.0)
    summarizer = get_summarizer("openai")
    started = time.monotonic()
    with pytest.raises(SummarizerError, match=r"timed out after 0.3s"):
        summarizer.summarize(request())
    assert time.monotonic() - started < 1.5
