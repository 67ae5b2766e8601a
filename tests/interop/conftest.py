"""One Pi process for the whole test session (see ``pi.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .pi import REQUIRE_ENV, PiProcess, interop_required, missing_reason


@pytest.fixture(scope="session")
def pi() -> Iterator[PiProcess]:
    reason = missing_reason()
    if reason is not None:
        if interop_required():
            pytest.fail(f"{reason}; {REQUIRE_ENV}=1 makes the Pi interop tests required")
        pytest.skip(reason)
    process = PiProcess()
    yield process
    process.close()
