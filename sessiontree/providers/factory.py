"""Which provider stores a session, and getting one configured from settings.

Provider kinds come from one registry, the ``SESSIONTREE_PROVIDERS`` setting
(kind → dotted path of the provider class, resolved with ``import_string``),
as Django's ``STORAGES`` does. A kind the registry does not know is a
configuration error (``ImproperlyConfigured``), never a silent fallback.

Every place that creates a session resolves its provider the same way
(``resolve_session_provider_kind``): an explicit choice, else the agent's
``session_provider``, else ``SESSIONTREE_DEFAULT_PROVIDER``, else ``file``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .base import RegistersFiles, SessionTreeProvider

DEFAULT_PROVIDER_KIND = "file"
DEFAULT_PROVIDERS: dict[str, str] = {
    "file": "sessiontree.providers.file_provider.FileSessionTreeProvider",
    "mysql": "sessiontree.providers.mysql_provider.MySQLSessionTreeProvider",
}


def provider_registry() -> dict[str, str]:
    """Kind → provider class path, from ``SESSIONTREE_PROVIDERS``."""
    registry = getattr(settings, "SESSIONTREE_PROVIDERS", None) or DEFAULT_PROVIDERS
    if not isinstance(registry, Mapping):
        raise ImproperlyConfigured("SESSIONTREE_PROVIDERS must map provider kinds to provider class paths")
    return dict(registry)


def provider_kinds() -> tuple[str, ...]:
    """The kinds the registry knows, in its order: the one list of kinds
    (models, serializers, filters and commands take their choices from it)."""
    return tuple(provider_registry())


def provider_choices() -> list[tuple[str, str]]:
    """``provider_kinds`` as Django choices, for fields that evaluate them
    when used (a callable ``choices``), so a kind added to the registry needs
    no edit, and no migration, anywhere else."""
    return [(kind, kind) for kind in provider_kinds()]


class ProviderChoices:
    """``provider_choices()`` read again each time it is iterated: for
    choices that must be a list where they are declared but should follow
    the registry (a filter's, which the OpenAPI schema lists as an enum)."""

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(provider_choices())


# The kinds built in (the registry's default); what is configured is ``provider_kinds()``.
PROVIDER_KINDS: tuple[str, ...] = tuple(DEFAULT_PROVIDERS)


def check_kind(kind: Any, *, source: str = "provider kind") -> str:
    """``kind`` normalized (``" MySQL"`` → ``"mysql"``) if the registry knows it."""
    value = kind.strip().lower() if isinstance(kind, str) else kind
    if not isinstance(value, str) or value not in provider_registry():
        known = ", ".join(provider_kinds())
        raise ImproperlyConfigured(f"Unknown session provider {kind!r} ({source}); known providers: {known}")
    return value


def _configured_value(config: Any) -> Any:
    if isinstance(config, str):
        return config
    if isinstance(config, Mapping):
        return config.get("session_provider", config.get("sessionProvider"))
    if config is not None:
        return getattr(config, "session_provider", None)
    return None


def default_provider_kind() -> str:
    """``SESSIONTREE_DEFAULT_PROVIDER``, else ``file``."""
    configured = getattr(settings, "SESSIONTREE_DEFAULT_PROVIDER", None)
    if configured in (None, ""):
        return DEFAULT_PROVIDER_KIND
    return check_kind(configured, source="SESSIONTREE_DEFAULT_PROVIDER")


def resolve_session_provider_kind(config: Any = None, *, explicit: Any = None) -> str:
    """The provider kind a new session gets.

    ``explicit`` (a request's or a command's choice) wins; else the agent's
    choice: ``config`` may be an ``Agent``, a mapping (``session_provider`` or
    Pi-style ``sessionProvider``) or a plain string; else
    ``SESSIONTREE_DEFAULT_PROVIDER``, else ``file``. An empty choice means
    "no choice"; a kind the registry does not know raises ``ImproperlyConfigured``.
    """
    if explicit not in (None, ""):
        return check_kind(explicit, source="explicit choice")
    configured = _configured_value(config)
    if configured not in (None, ""):
        return check_kind(configured, source="agent session_provider")
    return default_provider_kind()


@cache
def _provider_class(path: str) -> type:
    try:
        return import_string(path)  # type: ignore[no-any-return,unused-ignore]
    except ImportError as exc:
        raise ImproperlyConfigured(f"SESSIONTREE_PROVIDERS names {path!r}, which cannot be imported ({exc})") from exc


def get_provider(kind: str | None = None) -> SessionTreeProvider:
    """A provider of ``kind`` (default: ``SESSIONTREE_DEFAULT_PROVIDER``) configured from settings."""
    resolved = check_kind(kind) if kind not in (None, "") else default_provider_kind()
    provider: SessionTreeProvider = _provider_class(provider_registry()[resolved])()
    return provider


def file_registering_provider() -> SessionTreeProvider:
    """The provider that adopts Pi files in place (``RegistersFiles``): the
    default one if it can, else the first in the registry that can."""
    default = default_provider_kind()
    for kind in (default, *(k for k in provider_kinds() if k != default)):
        if issubclass(_provider_class(provider_registry()[kind]), RegistersFiles):
            return get_provider(kind)
    raise ImproperlyConfigured("No provider in SESSIONTREE_PROVIDERS can register Pi files in place")


def get_provider_for_agent(agent: Any, *, explicit: Any = None) -> SessionTreeProvider:
    return get_provider(resolve_session_provider_kind(agent, explicit=explicit))


def get_provider_for_session(session_id: str) -> SessionTreeProvider:
    """The provider that stores ``session_id`` (one short read of its meta
    row; ``SessionNotFound`` for an unknown session)."""
    from . import meta

    return get_provider(meta.provider_kind_of(session_id))


def provider_for(provider: SessionTreeProvider | None, session_id: str) -> SessionTreeProvider:
    """``provider`` when the caller has it (the API and the admin do), else the
    one that stores ``session_id``: every operation resolves it this way."""
    return provider if provider is not None else get_provider_for_session(session_id)
