"""Where the real Pi session files are: the shared folder beside the
repository checkout, or ``SESSIONTREE_PI_FIXTURES``.

A missing file fails the test, never skips it: these files are what proves
Pi compatibility.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def fixtures_dir() -> Path:
    configured = os.environ.get("SESSIONTREE_PI_FIXTURES")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "pi"


def fixture_path(name: str) -> Path:
    path = fixtures_dir() / name
    if not path.is_file():
        pytest.fail(f"Pi fixture {name} not found at {path}; set SESSIONTREE_PI_FIXTURES to its folder")
    return path
