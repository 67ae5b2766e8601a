"""A provider whose reads refuse the whole session: tests of reads by key
(issue 23) use it to prove a read never falls back to the whole skeleton or
to every entry of a type."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


class WholeRefused:
    """A view whose whole-session reads fail the test: only reads by key may be used."""

    def __init__(self, view: Any) -> None:
        self._view = view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)

    def parents(self) -> Any:
        raise AssertionError("the whole skeleton was read")

    def all_entries(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("every entry of a type was read")


@contextmanager
def whole_reads_refused(provider: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``provider.read`` hands out ``WholeRefused`` views while the block runs."""
    original = provider.read

    class Read:
        def __init__(self, session_id: str) -> None:
            self.inner = original(session_id)

        def __enter__(self) -> WholeRefused:
            return WholeRefused(self.inner.__enter__())

        def __exit__(self, *exc: Any) -> Any:
            return self.inner.__exit__(*exc)

    with monkeypatch.context() as patch:
        patch.setattr(provider, "read", Read)
        yield
