"""Identifiers: time-ordered session ids and Pi's short entry ids."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Container

import uuid6


def new_session_id() -> str:
    """A UUIDv7 string: unique and sortable by creation time."""
    return str(uuid6.uuid7())


def new_entry_id(existing: Container[str] = frozenset()) -> str:
    """Eight hex characters, as Pi writes them, unique within ``existing``.

    After 100 collisions (a session would need millions of entries) fall back
    to a full UUID, which Pi also accepts.
    """
    for _ in range(100):
        candidate = secrets.token_hex(4)
        if candidate not in existing:
            return candidate
    return str(uuid.uuid4())
