"""Choosing the summarizer from Django settings."""

from __future__ import annotations

import pytest

from sessiontree.core.errors import SummarizerError
from sessiontree.summarizers import ExtractiveSummarizer, OpenAICompatibleSummarizer, Summarizer, get_summarizer


def test_default_is_extractive(settings) -> None:
    settings.SESSIONTREE_SUMMARIZER = "extractive"
    summarizer = get_summarizer()
    assert isinstance(summarizer, ExtractiveSummarizer)
    assert isinstance(summarizer, Summarizer)


def test_openai_from_settings(settings) -> None:
    settings.SESSIONTREE_SUMMARIZER = "openai"
    settings.SESSIONTREE_OPENAI_BASE_URL = "http://127.0.0.1:9999/v1/"
    settings.SESSIONTREE_OPENAI_MODEL = "local-model"
    settings.SESSIONTREE_OPENAI_API_KEY = "sk-abc"
    settings.SESSIONTREE_OPENAI_TIMEOUT = "7.5"
    summarizer = get_summarizer()
    assert isinstance(summarizer, OpenAICompatibleSummarizer)
    assert summarizer.endpoint == "http://127.0.0.1:9999/v1/chat/completions"
    assert (summarizer.model, summarizer.api_key, summarizer.timeout) == ("local-model", "sk-abc", 7.5)


def test_name_argument_overrides_settings(settings) -> None:
    settings.SESSIONTREE_SUMMARIZER = "openai"
    assert isinstance(get_summarizer("extractive"), ExtractiveSummarizer)


def test_bad_configuration_is_reported(settings) -> None:
    with pytest.raises(SummarizerError, match="Unknown summarizer 'magic'"):
        get_summarizer("magic")
    settings.SESSIONTREE_OPENAI_TIMEOUT = "soon"
    with pytest.raises(SummarizerError, match="SESSIONTREE_OPENAI_TIMEOUT"):
        get_summarizer("openai")
