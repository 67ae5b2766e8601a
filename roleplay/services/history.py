"""The session tree, for roleplay: moving the leaf, forking and compacting,
with the state the new position derives.

Navigation and forks are not roleplay writes: ``history_goto`` and
``history_fork`` delegate to ``sessiontree.services`` and only report the
state the new position derives. Every compaction of a roleplay branch gets
its automatic checkpoint as the compaction entry's child (seed 003 §6.2):
``register_hooks`` (run by ``RoleplayConfig.ready``) makes
``checkpoint_after_compaction`` an ``after_compact`` hook, whoever compacts;
``compact_with_checkpoint`` compacts and reports that checkpoint.
"""

from __future__ import annotations

from typing import Any, Literal

from sessiontree import services as tree_services
from sessiontree.core.errors import LeafConflict
from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.services.hooks import HookEvent
from sessiontree.services.idempotency import idempotent

from .. import schema
from ..operations import RoleplayOperation
from ..reducer import make_checkpoint_data
from .branch import Actor, read_branch, resolve_provider
from .reads import inspect_state
from .writes import append


@idempotent()
def history_goto(
    *,
    session_id: str,
    entry_id: str,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    summarize: bool = False,
    summarizer: Any = None,
    label: str | None = None,
) -> dict[str, Any]:
    """``/rp history goto``: move the leaf (``navigate_tree``); the state is re-derived from the new path.

    Returns ``navigate_tree``'s result plus ``state``, the reduced state at the new leaf.
    """
    provider = resolve_provider(provider, session_id)
    result = tree_services.navigate_tree(
        provider=provider,
        session_id=session_id,
        target_id=entry_id,
        summarize=summarize,
        summarizer=summarizer,
        label=label,
        actor=actor,
        channel=channel,
    )
    return {**result, "state": inspect_state(provider, session_id)}


@idempotent()
def history_fork(
    *,
    session_id: str,
    entry_id: str,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
    position: Literal["before", "at"] = "before",
) -> dict[str, Any]:
    """``/rp history fork``: a new session from ``entry_id`` (``fork_session``).

    The new session's state is reduced from its own copied path, never taken
    from the source. Returns ``{"session", "state"}``.
    """
    provider = resolve_provider(provider, session_id)
    session: SessionTreeSession = tree_services.fork_session(
        provider=provider, session_id=session_id, entry_id=entry_id, position=position, actor=actor, channel=channel
    )
    return {"session": session, "state": inspect_state(provider, session["session_id"])}


def checkpoint_after_compaction(
    *,
    session_id: str,
    compaction: Entry,
    actor: Actor,
    channel: str,
    provider: SessionTreeProvider | None = None,
) -> Entry | None:
    """Append the automatic checkpoint as the compaction entry's child.

    Runs as an ``after_compact`` hook (roleplay/apps.py), so after every
    ``sessiontree.services.compact_session``, audited with its actor and
    channel. Only when the branch has a character; ``None`` otherwise, or when
    someone appended after the compaction first.
    """
    provider = resolve_provider(provider, session_id)
    with read_branch(provider, session_id, compaction["id"]) as branch:
        if branch["state"]["character_id"] is None:
            return None
        data = make_checkpoint_data(branch["state"])
    data.update({"trigger": "compaction", "compactionEntryId": compaction["id"]})
    try:
        return append(
            provider,
            session_id,
            branch,
            [(schema.CHECKPOINT_TYPE, data)],
            operation=RoleplayOperation.CHECKPOINT,
            actor=actor,
            channel=channel,
        )
    except LeafConflict:
        # A checkpoint anywhere else would not be the compaction's child, and
        # it is only a shortcut for the reducer: the compaction stands alone.
        return None


def _checkpoint_hook(event: HookEvent) -> None:
    if event.result is not None:
        checkpoint_after_compaction(
            provider=event.provider,
            session_id=event.session_id,
            compaction=event.result,
            actor=event.actor,
            channel=event.channel,
        )


@idempotent()
def compact_with_checkpoint(
    *, session_id: str, actor: Actor, channel: str, provider: SessionTreeProvider | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Compact (``compact_session``) and report the automatic checkpoint the
    compaction hook appended as the compaction's child (``None`` when the
    branch has no character or nothing was compacted).

    Returns ``{"compaction": Entry | None, "checkpoint": Entry | None}``.
    """
    provider = resolve_provider(provider, session_id)
    compaction = tree_services.compact_session(
        provider=provider, session_id=session_id, actor=actor, channel=channel, **kwargs
    )
    checkpoint = None
    if compaction is not None:
        session = provider.get_session(session_id)
        leaf_id = session["leaf_entry_id"] if session else None
        if leaf_id is not None and leaf_id != compaction["id"]:
            leaf = provider.get_entry(session_id, leaf_id)
            if leaf.get("parentId") == compaction["id"] and leaf.get("customType") == schema.CHECKPOINT_TYPE:
                checkpoint = leaf
    return {"compaction": compaction, "checkpoint": checkpoint}


def register_hooks() -> None:
    tree_services.register_hook("after_compact", _checkpoint_hook)
