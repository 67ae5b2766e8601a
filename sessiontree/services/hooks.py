"""Lifecycle hooks around tree operations: before/after navigate, fork, compact.

Pi's extensions hear ``session_before_tree``/``session_tree``,
``session_before_fork``/``session_fork`` and ``session_compact``; the roleplay
layer builds on them (seed 003). Here a hook is a callable taking one
``HookEvent``:

- a **before** hook runs before anything is written and may refuse the
  operation by raising (a ``SessionTreeError`` says why, e.g. ``LeafConflict``
  or ``InvalidEntry``); nothing is written then;
- an **after** hook runs once the change is stored; if it fails, the failure
  is logged and the stored change stands (it is never undone).

Hooks are registered once per process (``register_hook``), typically in an
``AppConfig.ready``; registering the same callable twice is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.types import Entry
from sessiontree.providers.base import SessionTreeProvider

from .audit import Actor

logger = logging.getLogger(__name__)

OPERATIONS = ("navigate", "fork", "compact")
EVENTS = tuple(f"{when}_{operation}" for operation in OPERATIONS for when in ("before", "after"))


@dataclass
class HookEvent:
    """What a hook learns: which operation, on which session, by whom.

    ``data`` holds the operation's arguments (navigate: ``target_id``,
    ``old_leaf_id``, ``summarize``; fork: ``entry_id``, ``position``; compact:
    ``leaf_entry_id``, ``custom_instructions``); an after hook also gets
    ``result`` (navigate: its result dict; fork: the new session; compact: the
    compaction entry). A hook reports nothing back: what it writes, it
    writes through the operations layer like any caller.
    """

    name: str
    provider: SessionTreeProvider
    session_id: str
    actor: Actor
    channel: str
    data: dict[str, Any] = field(default_factory=dict)
    result: Any = None


Hook = Callable[[HookEvent], object]
_hooks: dict[str, list[Hook]] = {event: [] for event in EVENTS}


def _check_event(event: str) -> None:
    if event not in _hooks:
        raise ValueError(f"Unknown hook event {event!r}; use one of {', '.join(EVENTS)}")


def register_hook(event: str, hook: Hook) -> None:
    """Run ``hook`` on ``event`` (``before_navigate``, ``after_fork`` …), once however often registered."""
    _check_event(event)
    if hook not in _hooks[event]:
        _hooks[event].append(hook)


def unregister_hook(event: str, hook: Hook) -> None:
    _check_event(event)
    if hook in _hooks[event]:
        _hooks[event].remove(hook)


def has_hooks(event: str) -> bool:
    """Whether any hook listens to ``event`` (an operation with no before
    hook need not stop between reading and writing)."""
    _check_event(event)
    return bool(_hooks[event])


def run_before(event: HookEvent) -> None:
    """Run the before hooks; the first that raises refuses the operation."""
    for hook in list(_hooks[event.name]):
        hook(event)


def run_after(event: HookEvent) -> HookEvent:
    """Run the after hooks; a failing hook is logged, never raised."""
    for hook in list(_hooks[event.name]):
        try:
            hook(event)
        except Exception:
            # The change is stored and correct; a hook (an automatic
            # checkpoint, say) must not make it look failed.
            logger.exception("%s hook %r failed for session %s", event.name, hook, event.session_id)
    return event


# --- the compaction hook of earlier releases, as an after_compact hook ----------------

# Called with (provider, session_id, compaction_entry) after every compaction
# that compact_session writes (Pi's "session_compact").
CompactionHook = Callable[[SessionTreeProvider, str, Entry], object]
_compaction_adapters: dict[CompactionHook, Hook] = {}


def register_compaction_hook(hook: CompactionHook) -> None:
    """Run ``hook(provider, session_id, compaction_entry)`` after each compaction ``compact_session`` appends."""
    if hook in _compaction_adapters:
        return

    def adapter(event: HookEvent) -> None:
        hook(event.provider, event.session_id, event.result)

    _compaction_adapters[hook] = adapter
    register_hook("after_compact", adapter)


def unregister_compaction_hook(hook: CompactionHook) -> None:
    adapter = _compaction_adapters.pop(hook, None)
    if adapter is not None:
        unregister_hook("after_compact", adapter)
