"""The branch a roleplay write is checked against: the session's leaf, its
path and the state reduced from it, read once; who writes; which provider."""

from __future__ import annotations

from typing import Any, TypedDict

from sessiontree.core.errors import LeafConflict, SessionNotFound
from sessiontree.core.types import UNSET, Entry, Unset
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session

from ..errors import CharacterArchived, NoRoleplayCharacter
from ..reducer import RoleplayState, reduce_branch

Actor = Any  # a user, a name such as "cli:alice", or a services.Actor


class Branch(TypedDict):
    leaf_entry_id: str | None
    path: list[Entry]
    state: RoleplayState


def read_branch(
    provider: SessionTreeProvider,
    session_id: str,
    leaf_entry_id: str | Unset | None = UNSET,
    *,
    character_id: str | None = None,
) -> Branch:
    """The leaf (the one given, or the session's), its path and the reduced state, read once."""
    if isinstance(leaf_entry_id, Unset):
        session = provider.get_session(session_id)
        if session is None:
            raise SessionNotFound(f"Session {session_id} not found")
        leaf_entry_id = session["leaf_entry_id"]
    path = provider.get_active_path(session_id, leaf_entry_id)
    return {"leaf_entry_id": leaf_entry_id, "path": path, "state": reduce_branch(path, character_id)}


def current_branch(
    provider: SessionTreeProvider, session_id: str, expected_leaf_id: str | Unset | None = UNSET
) -> Branch:
    """The branch at the session's leaf; ``LeafConflict`` when the caller saw another leaf."""
    branch = read_branch(provider, session_id)
    if not isinstance(expected_leaf_id, Unset) and expected_leaf_id != branch["leaf_entry_id"]:
        raise LeafConflict(
            f"Session {session_id}: the leaf is {branch['leaf_entry_id'] or 'none'}, not {expected_leaf_id or 'none'} "
            "(someone appended or moved it meanwhile); nothing was appended"
        )
    return branch


def writable_branch(
    provider: SessionTreeProvider, session_id: str, action: str, expected_leaf_id: str | Unset | None = UNSET
) -> Branch:
    """The current branch, refused when it has no character or the character is archived."""
    branch = current_branch(provider, session_id, expected_leaf_id)
    state = branch["state"]
    if state["character_id"] is None:
        raise NoRoleplayCharacter(
            f"Session {session_id}: no roleplay character on the current branch "
            f"(leaf {branch['leaf_entry_id']}); cannot {action}"
        )
    if state["archived"]:
        archive_entry = (state.get("archive") or {}).get("entryId")
        raise CharacterArchived(
            f"Session {session_id}: character {state['character_id']} is archived on this branch "
            f"(entry {archive_entry}); cannot {action}. Navigate before the archive entry or fork to continue."
        )
    return branch


def resolve_provider(provider: SessionTreeProvider | None, session_id: str) -> SessionTreeProvider:
    """``provider``, or the one that stores ``session_id``."""
    return provider if provider is not None else get_provider_for_session(session_id)
