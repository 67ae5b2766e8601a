"""The OpenAI-compatible moderation classifier against a fake endpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessiontree.classifiers import get_classifier, get_classifiers
from sessiontree.classifiers.base import ClassifierError
from sessiontree.classifiers.openai_moderation import OpenAIModerationClassifier
from tests.fake_openai import serve_fake_openai


def moderation(results: list[dict[str, Any]]) -> bytes:
    return json.dumps({"id": "modr-1", "model": "omni-moderation-latest", "results": results}).encode()


def flagged(**categories: float) -> dict[str, Any]:
    return {
        "flagged": True,
        "categories": {name: True for name in categories},
        "category_scores": dict(categories),
    }


CLEAN = {"flagged": False, "categories": {}, "category_scores": {}}


def classifier(url: str, **kwargs: Any) -> OpenAIModerationClassifier:
    return OpenAIModerationClassifier(base_url=url, api_key="sk-secret", sleep=lambda seconds: None, **kwargs)


def test_categories_map_onto_ours_and_empty_texts_are_not_sent() -> None:
    def reply(body: dict[str, Any]) -> tuple[int, bytes, float]:
        answers = {
            "you are worthless": flagged(**{"harassment": 0.91, "harassment/threatening": 0.97}),
            "how to make a weapon": flagged(**{"illicit/violent": 0.8}),
            "hello": CLEAN,
        }
        return 200, moderation([answers[text] for text in body["input"]]), 0.0

    with serve_fake_openai(reply) as fake:
        results = classifier(fake.url).classify(["you are worthless", "", "how to make a weapon", "hello"])
    assert [[(f.category, f.score) for f in found] for found in results] == [
        [("harassment", 0.97)],
        [],
        [("illegal", 0.8)],
        [],
    ]
    (request,) = fake.requests
    assert request["path"] == "/v1/moderations" or request["path"].endswith("/moderations")
    assert request["body"]["input"] == ["you are worthless", "how to make a weapon", "hello"]
    assert request["headers"]["Authorization"] == "Bearer sk-secret"


def test_rate_limits_and_server_errors_are_retried_then_reported() -> None:
    calls: list[int] = []

    def reply(body: dict[str, Any]) -> tuple[int, bytes, float]:
        calls.append(1)
        if len(calls) < 3:
            return 429, b'{"error": "slow down"}', 0.0
        return 200, moderation([CLEAN for _ in body["input"]]), 0.0

    with serve_fake_openai(reply) as fake:
        assert classifier(fake.url, retries=3).classify(["a"]) == [[]]
    assert len(calls) == 3
    with serve_fake_openai(lambda body: (503, b"{}", 0.0)) as fake, pytest.raises(ClassifierError, match="HTTP 503"):
        classifier(fake.url, retries=1).classify(["a"])


def test_a_reply_that_does_not_answer_every_input_is_an_error_without_the_key() -> None:
    with (
        serve_fake_openai(lambda body: (200, moderation([CLEAN]), 0.0)) as fake,
        pytest.raises(ClassifierError) as caught,
    ):
        classifier(fake.url).classify(["a", "b"])
    assert "1 results for 2 inputs" in str(caught.value) and "sk-secret" not in str(caught.value)
    with pytest.raises(ClassifierError, match="base URL"):
        OpenAIModerationClassifier(base_url="ftp://nowhere")


def test_an_unreachable_endpoint_is_a_typed_error() -> None:
    with pytest.raises(ClassifierError, match="cannot be reached"):
        classifier("http://127.0.0.1:9/v1", retries=0, timeout=2).classify(["a"])


def test_the_registry_resolves_names_and_refuses_unknown_ones(settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.SESSIONTREE_MODERATION_CLASSIFIERS = ["pii", "sessiontree.classifiers.pii.PIIClassifier"]
    assert [c.name for c in get_classifiers()] == ["pii", "pii"]
    with pytest.raises(ImproperlyConfigured, match="Unknown classifier"):
        get_classifier("nonsense")
    with pytest.raises(ImproperlyConfigured, match="not a classifier"):
        get_classifier("collections.OrderedDict")


def test_a_slow_endpoint_times_out_is_retried_then_reported() -> None:
    calls: list[float] = []

    def reply(body: dict[str, Any]) -> tuple[int, bytes, float]:
        calls.append(1)
        return 200, moderation([CLEAN for _ in body["input"]]), 1.5

    with (
        serve_fake_openai(reply) as fake,
        pytest.raises(ClassifierError, match="cannot be reached") as caught,
    ):
        classifier(fake.url, retries=1, timeout=0.3).classify(["a"])
    assert len(calls) == 2  # the first try and one retry, each cut off by the timeout
    assert "sk-secret" not in str(caught.value)


def test_a_reply_cut_short_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import http.client
    import urllib.request

    attempts: list[int] = []

    def cut_short(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        raise http.client.IncompleteRead(b"{", 10)

    monkeypatch.setattr(urllib.request, "urlopen", cut_short)
    with pytest.raises(ClassifierError, match="cannot be reached"):
        classifier("http://127.0.0.1:9/v1", retries=2).classify(["a"])
    assert len(attempts) == 3
