"""Where the recorded Pi session files are: the shared folder beside the
repository checkout (``../shared/fixtures/pi/``), or ``SESSIONTREE_PI_FIXTURES``.

A plain clone does not have them: a test that needs one is skipped, with the
reason, so ``git clone`` + ``make test`` passes. CI has them and sets
``SESSIONTREE_REQUIRE_PI_FIXTURES=1`` (``.ci/run``): there a missing file
fails the test instead, since these files are what proves compatibility with
the Pi that recorded them. (The suite's own Pi data does not depend on them:
``tests/interop/`` runs the pinned Pi package.)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

REQUIRE_ENV = "SESSIONTREE_REQUIRE_PI_FIXTURES"


def fixtures_dir() -> Path:
    configured = os.environ.get("SESSIONTREE_PI_FIXTURES")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "pi"


def fixtures_required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def missing(what: str, where: Path) -> None:
    """Fail (CI) or skip (a plain clone) a test whose Pi fixture is not there."""
    reason = (
        f"recorded Pi fixture {what} not found at {where}; it lives in shared/fixtures/pi/ beside the "
        "repository (set SESSIONTREE_PI_FIXTURES to its folder)"
    )
    if fixtures_required():
        pytest.fail(f"{reason}; {REQUIRE_ENV}=1 makes it required")
    pytest.skip(reason)


def fixture_path(name: str) -> Path:
    path = fixtures_dir() / name
    if not path.is_file():
        missing(name, path)
    return path


def split_header(file_entries: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(header, entries) of what ``load_entries_from_file`` or
    ``parse_session_entries`` returned; entries exclude every header line."""
    header = file_entries[0] if file_entries and file_entries[0].get("type") == "session" else None
    return header, [e for e in file_entries if e.get("type") != "session"]
