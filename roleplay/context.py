"""The roleplay LLM context: the session context, minus branch summaries, plus the character view.

A ``branch_summary`` describes a branch the user left; in roleplay that is an
abandoned timeline, not canon. The summaries are dropped from the *copy* of
the messages built for the model (the stored entries are untouched, so the
tree, its audit and Pi itself still see them), and one custom message is
added at the end: the "Current Character View" of the state reduced from the
same path, followed by the non-canon boundary note.

Built as the session's context is (issue 23): the messages from the entries
the context needs (``context_entries``: by the storage's path facts, not the
whole path) and the state by the keyed reduction (``services.reads``: the
head up to the identity's lock, the tail from the latest checkpoint), in one
consistent read. ``roleplay_context_from_path`` builds the same from a
root-to-leaf path in hand.
"""

from __future__ import annotations

from typing import Any, Final

from sessiontree.core.context_builder import build_context_from_path, iso_to_epoch_ms
from sessiontree.core.errors import EntryNotFound
from sessiontree.core.path_facts import build_context_from_segment
from sessiontree.core.pi_session_file import gc_paused
from sessiontree.core.types import UNSET, Entry, SessionContext, Unset
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.template import context_entries

from .reducer import NON_CANON_BOUNDARY_NOTE, RoleplayState, reduce_branch, render_character_view

CHARACTER_VIEW_CUSTOM_TYPE: Final = "pi-roleplay-character-view"


def character_view_message(text: str, *, details: dict[str, Any], timestamp: int | None) -> dict[str, Any]:
    """A Pi custom message (converted to a user message by the model adapter), hidden from the UI."""
    return {
        "role": "custom",
        "customType": CHARACTER_VIEW_CUSTOM_TYPE,
        "content": text,
        "display": False,
        "details": details,
        "timestamp": timestamp,
    }


def build_roleplay_context(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    leaf_entry_id: str | Unset | None = UNSET,
) -> SessionContext:
    """The context for the roleplay model at the leaf (or at ``leaf_entry_id``).

    ``messages`` and ``source_entry_ids`` stay aligned: the injected view
    message, which comes from no entry, has ``None`` as its source id. The
    result also carries ``roleplay``: the character id, revision, state hash,
    the ids of the branch summaries removed, the view text and the note.
    """
    from .services.reads import state_in_view

    with provider.read(session_id) as view, gc_paused():
        leaf = view.state.leaf_entry_id if isinstance(leaf_entry_id, Unset) else leaf_entry_id
        if leaf is not None and leaf not in view.known_ids([leaf]):
            raise EntryNotFound(f"Entry {leaf} not found in session {session_id}")
        context = build_context_from_segment(context_entries(view, leaf))
        state = state_in_view(view, session_id, leaf)
        leaf_entry: Entry | None = view.entries([leaf])[0] if leaf is not None else None
    return _with_character_view(context, state, leaf_entry)


def roleplay_context_from_path(path: list[Entry]) -> SessionContext:
    """``build_roleplay_context`` of the root-to-leaf ``path`` (every entry of it in hand)."""
    return _with_character_view(build_context_from_path(path), reduce_branch(path), path[-1] if path else None)


def _with_character_view(context: SessionContext, state: RoleplayState, leaf: Entry | None) -> SessionContext:
    """The session's ``context`` without branch summaries, plus the view of ``state`` (the leaf's time)."""
    messages: list[dict[str, Any]] = []
    source_entry_ids: list[str | None] = []
    removed: list[str] = []
    for message, entry_id in zip(context["messages"], context["source_entry_ids"], strict=True):
        if message.get("role") == "branchSummary":
            removed.append(entry_id)
            continue
        messages.append(message)
        source_entry_ids.append(entry_id)

    view = render_character_view(state)
    text = f"{view}\n\n{NON_CANON_BOUNDARY_NOTE}"
    details = {
        "characterId": state["character_id"],
        "revision": state["revision"],
        "stateHash": state["state_hash"],
    }
    # The leaf's time, not now: the same path always gives the same context.
    timestamp = iso_to_epoch_ms(leaf.get("timestamp")) if leaf is not None else None
    messages.append(character_view_message(text, details=details, timestamp=timestamp))
    source_entry_ids.append(None)

    result: dict[str, Any] = {
        **context,
        "messages": messages,
        "source_entry_ids": source_entry_ids,
        "roleplay": {
            "character_id": state["character_id"],
            "revision": state["revision"],
            "state_hash": state["state_hash"],
            "removed_branch_summary_entry_ids": removed,
            "character_view": view,
            "boundary_note": NON_CANON_BOUNDARY_NOTE,
        },
    }
    return result  # type: ignore[return-value]
