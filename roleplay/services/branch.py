"""The branch a roleplay write is checked against: the session's leaf and
the state reduced from its path, read by key inside one consistent read
(``provider.read``), with what the write's checks ask of the path; who
writes; which provider.

The path is read as ``reads.inspect_state`` reads it (issue 23): the head up
to the identity's lock and the tail from the latest checkpoint, their ids by
the storage's path facts and jumps (``reads.KeyedPath``), or the walked
path where the facts cannot say. A write's checks ask the path for what
they need by key (``BranchPath``), so a write costs what it reads, not the
path's length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypedDict

from sessiontree.core.errors import LeafConflict
from sessiontree.core.pi_session_file import gc_paused
from sessiontree.core.types import UNSET, Entry, Unset
from sessiontree.providers import keyed_reads
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider_for_session

from ..errors import CharacterArchived, NoRoleplayCharacter
from ..reducer import RoleplayState, reduce_branch_lazily
from . import reads

Actor = Any  # a user, a name such as "cli:alice", or a services.Actor


class BranchPath:
    """The path of a branch, asked by key inside its read: an entry by id if it
    lies on the path (``entry``), the latest entry that matches (``latest``).
    Read by the path facts (``reads.KeyedPath``) where they can say, else
    from the walked path (``PathUnclear`` on the way walks it then)."""

    def __init__(self, view: Any, session_id: str, leaf_entry_id: str | None, keyed: Any, loaded: dict[str, Entry]):
        self._view, self._session_id, self._leaf = view, session_id, leaf_entry_id
        self._keyed = keyed  # a reads.KeyedPath, or None once the path is walked
        self._ids: Sequence[str] | None = (
            None if keyed is not None else reads.walked_path_ids(view, session_id, leaf_entry_id)
        )
        self._on_path: set[str] | None = None if self._ids is None else set(self._ids)
        self._loaded = loaded  # entries read so far, all on the path

    def _walk(self) -> None:
        self._keyed = None
        self._loaded = {}  # read by facts the rows disagree with: maybe not all on the path
        self._ids = reads.walked_path_ids(self._view, self._session_id, self._leaf)
        self._on_path = set(self._ids)

    def _keyed_or_walked(self, keyed: Callable[[Any], Any], walked: Callable[[], Any]) -> Any:
        if self._keyed is not None:
            try:
                return keyed(self._keyed)
            except reads.PathUnclear:
                self._walk()
        return walked()

    def _entries(self, ids: Sequence[str]) -> list[Entry]:
        missing = [i for i in ids if i not in self._loaded]
        if missing:
            for entry in self._view.entries(missing):
                self._loaded[str(entry.get("id"))] = entry
        return [self._loaded[i] for i in ids]

    def entry(self, entry_id: str) -> Entry | None:
        """The entry ``entry_id`` when it lies on the path, else ``None``."""

        def keyed(path: Any) -> Entry | None:
            if entry_id not in self._loaded and not path.on_path([entry_id]):
                return None
            found: Entry | None = path.load([entry_id])[0]
            return found

        def walked() -> Entry | None:
            assert self._on_path is not None
            return self._entries([entry_id])[0] if entry_id in self._on_path else None

        if entry_id in self._loaded:
            return self._loaded[entry_id]
        found: Entry | None = self._keyed_or_walked(keyed, walked)
        return found

    def keyed(self, key: str, match: Callable[[Entry], bool]) -> list[Entry]:
        """The entries stored with ``key`` (``sessiontree.core.entry_keys``)
        that ``match`` and lie on the path, in append order: one read by key
        and the path facts of what it found, whatever the distance to them.
        A key is a hint (an entry stored before its rule may lack it): an
        empty answer says there is none only where ``keys_complete``."""
        found = [entry for entry in keyed_reads.entries_with_key(self._view, key) if match(entry)]
        if not found:
            return []
        ids = [str(entry.get("id")) for entry in found]

        def walked() -> set[str]:
            assert self._on_path is not None
            return {i for i in ids if i in self._on_path}

        on_path: set[str] = self._keyed_or_walked(lambda path: path.on_path(ids), walked)
        return [entry for entry in found if str(entry.get("id")) in on_path]

    def keys_complete(self) -> bool:
        """Whether ``keyed`` finding nothing proves there is nothing (``keyed_reads.keys_complete``)."""
        return keyed_reads.keys_complete(self._view)

    def latest(self, match: Callable[[Entry], bool]) -> Entry | None:
        """The entry nearest the leaf that ``match``es, or ``None``: read back
        from the leaf in growing slices (the tail the reduction read comes
        first, already loaded), so it costs the distance to that entry; the
        whole path when none does."""

        def scan(ids: Sequence[str], load: Callable[[Sequence[str]], list[Entry]]) -> Entry | None:
            high, size = len(ids), reads.CHUNK
            while high > 0:
                low = max(0, high - size)
                for entry in reversed(load(ids[low:high])):
                    if match(entry):
                        return entry
                high, size = low, size * 2
            return None

        def walked() -> Entry | None:
            assert self._ids is not None
            return scan(self._ids, self._entries)

        found: Entry | None = self._keyed_or_walked(lambda path: scan(path, path.load), walked)
        return found


class Branch(TypedDict):
    leaf_entry_id: str | None
    state: RoleplayState
    # The path's entries the state was reduced from (``reducer.reduce_branch_lazily``):
    # the state after appending entries is ``reduce_branch([*reduced, *entries])``.
    reduced: list[Entry]
    path: BranchPath  # usable inside the read only


@contextmanager
def read_branch(
    provider: SessionTreeProvider, session_id: str, leaf_entry_id: str | Unset | None = UNSET
) -> Iterator[Branch]:
    """The leaf (the one given, or the session's) and the state reduced from
    its path, inside one consistent read: the checks run in the ``with``
    block, the append after it. ``SessionNotFound``, ``EntryNotFound``."""
    with provider.read(session_id) as view:
        leaf = view.state.leaf_entry_id if isinstance(leaf_entry_id, Unset) else leaf_entry_id
        loaded: dict[str, Entry] = {}
        with gc_paused():
            try:
                found = reads.reduce_keyed(view, leaf, None, loaded)
            except reads.PathUnclear:
                found, loaded = None, {}
            if found is not None:
                keyed, state, reduced = found
                path = BranchPath(view, session_id, leaf, keyed, keyed.loaded)
            else:
                path = BranchPath(view, session_id, leaf, None, loaded)
                assert path._ids is not None
                state, reduced = reduce_branch_lazily(path._ids, view.entries, None, cache=loaded)
        yield {"leaf_entry_id": leaf, "state": state, "reduced": reduced, "path": path}


@contextmanager
def current_branch(
    provider: SessionTreeProvider, session_id: str, expected_leaf_id: str | Unset | None = UNSET
) -> Iterator[Branch]:
    """The branch at the session's leaf; ``LeafConflict`` when the caller saw another leaf."""
    with read_branch(provider, session_id) as branch:
        if not isinstance(expected_leaf_id, Unset) and expected_leaf_id != branch["leaf_entry_id"]:
            raise LeafConflict(
                f"Session {session_id}: the leaf is {branch['leaf_entry_id'] or 'none'}, "
                f"not {expected_leaf_id or 'none'} (someone appended or moved it meanwhile); nothing was appended"
            )
        yield branch


@contextmanager
def writable_branch(
    provider: SessionTreeProvider, session_id: str, action: str, expected_leaf_id: str | Unset | None = UNSET
) -> Iterator[Branch]:
    """The current branch, refused when it has no character or the character is archived."""
    with current_branch(provider, session_id, expected_leaf_id) as branch:
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
        yield branch


def resolve_provider(provider: SessionTreeProvider | None, session_id: str) -> SessionTreeProvider:
    """``provider``, or the one that stores ``session_id``."""
    return provider if provider is not None else get_provider_for_session(session_id)
