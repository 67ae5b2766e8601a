"""Which provider stores a session, and getting one configured from settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from sessiontree.core.errors import SessionNotFound
from sessiontree.core.types import SessionTreeProviderKind

from .base import SessionTreeProvider

PROVIDER_KINDS: tuple[SessionTreeProviderKind, ...] = ("file", "mysql")
DEFAULT_PROVIDER_KIND: SessionTreeProviderKind = "file"


def resolve_session_provider_kind(config: Any) -> SessionTreeProviderKind:
    """``file`` or ``mysql`` from an agent's config; anything else is ``file``.

    ``config`` may be ``None``, a mapping (``session_provider`` or Pi-style
    ``sessionProvider``), an ``Agent`` instance, or a plain string.
    """
    value: Any = None
    if isinstance(config, str):
        value = config
    elif isinstance(config, Mapping):
        value = config.get("session_provider", config.get("sessionProvider"))
    elif config is not None:
        value = getattr(config, "session_provider", None)
    if isinstance(value, str) and value.strip().lower() in PROVIDER_KINDS:
        return value.strip().lower()  # type: ignore[return-value]
    return DEFAULT_PROVIDER_KIND


def get_provider(kind: str | None = None) -> SessionTreeProvider:
    """A provider of ``kind`` (default: ``SESSIONTREE_DEFAULT_PROVIDER``) configured from settings."""
    resolved = resolve_session_provider_kind(kind or getattr(settings, "SESSIONTREE_DEFAULT_PROVIDER", None))
    if resolved == "mysql":
        from .mysql_provider import MySQLSessionTreeProvider

        return MySQLSessionTreeProvider()
    from .file_provider import FileSessionTreeProvider

    return FileSessionTreeProvider()


def get_provider_for_agent(agent: Any) -> SessionTreeProvider:
    return get_provider(resolve_session_provider_kind(agent))


def get_provider_for_session(session_id: str) -> SessionTreeProvider:
    """The provider that stores ``session_id`` (from its meta row)."""
    from . import meta

    row = meta.get_row(session_id)
    if row is None:  # pragma: no cover - get_row raises
        raise SessionNotFound(f"Session {session_id} not found")
    return get_provider(row.provider)
