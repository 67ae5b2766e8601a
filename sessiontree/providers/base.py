"""The provider contract: every storage of session trees implements this.

``file`` and ``mysql`` implement it (``providers/template.py`` over a storage
port, ``providers/port.py``); ``tests/contract/`` proves both behave the
same. Entries in and out are plain dicts with Pi's camelCase keys; session
meta is a ``SessionTreeSession`` dict with snake_case keys.

``SessionTreeProvider`` is what production code uses: reads, sessions, and
``transact`` (the unit of work the operations layer composes, with its audit
record as ``before_commit``). ``OneStepWriter`` is the Python API's
unaudited one-step writes (``append_message``, ``switch_leaf`` …); every
provider has them (``providers/one_step.py``), for tests and tools only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from sessiontree.core.errors import (
    CorruptSessionTree,
    EntryNotFound,
    ImmutableEntry,
    InvalidEntry,
    InvalidSessionId,
    LeafConflict,
    SessionAlreadyExists,
    SessionNotFound,
    SessionTreeError,
    StorageUnavailable,
)
from sessiontree.core.types import UNSET, Entry, SessionContext, SessionSnapshot, SessionTreeSession, Unset

if TYPE_CHECKING:
    from .port import EntryErasure, ErasureDone, MetaRecount, StoredScan, TornTailCut
    from .search_index import IndexChanges

__all__ = [
    "UNSET",
    "CorruptSessionTree",
    "EntryNotFound",
    "ImmutableEntry",
    "InvalidEntry",
    "InvalidSessionId",
    "LeafConflict",
    "OneStepWriter",
    "RegistersFiles",
    "SessionAlreadyExists",
    "SessionNotFound",
    "SessionTreeError",
    "SessionTreeProvider",
    "StorageUnavailable",
]

T = TypeVar("T")
Expected = str | None | Unset


@runtime_checkable
class SessionTreeProvider(Protocol):
    kind: str
    # Whether all of a write lives in the database, so that a caller's outer
    # transaction.atomic() undoes it too.
    joins_outer_transaction: bool

    # --- sessions ----------------------------------------------------------
    def create_session(
        self,
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        agent_id: int | None = None,
        user_id: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        entries: list[Entry] | None = None,
        header_extra: dict[str, Any] | None = None,
        parent_session_ref: str | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
    ) -> SessionTreeSession: ...

    def get_session(self, session_id: str) -> SessionTreeSession | None: ...

    def update_session(self, session_id: str, **fields: Any) -> SessionTreeSession: ...

    def delete_session(
        self, session_id: str, *, hard: bool = False, before_commit: Callable[[], None] | None = None
    ) -> None: ...

    # --- entries -----------------------------------------------------------
    def list_entries(self, session_id: str) -> list[Entry]: ...

    def get_entry(self, session_id: str, entry_id: str) -> Entry: ...

    # --- branches --------------------------------------------------------------
    def create_branched_session(
        self,
        session_id: str,
        leaf_entry_id: str | None,
        *,
        new_session_id: str | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
        **fields: Any,
    ) -> SessionTreeSession: ...

    def create_fork(
        self,
        source: SessionTreeSession,
        copied: list[Entry],
        *,
        new_session_id: str | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
        **fields: Any,
    ) -> SessionTreeSession:
        """A fork's new session from what the caller read (``template.fork_copies``)."""
        ...

    def read(self, session_id: str) -> Any:
        """A consistent read of one session (a ``StoredView``: state, skeleton, entries)."""
        ...

    # --- units of work (the operations layer composes steps with these) ------
    def transact(
        self,
        session_id: str,
        work: Callable[[Any], T],
        *,
        expected_leaf_id: Expected = UNSET,
        before_commit: Callable[[Any], None] | None = None,
    ) -> T: ...

    # --- reads -------------------------------------------------------------
    def get_header(self, session_id: str) -> dict[str, Any]: ...

    def get_active_path(self, session_id: str, leaf_entry_id: str | None | Unset = UNSET) -> list[Entry]: ...

    def get_snapshot(self, session_id: str) -> SessionSnapshot: ...

    def build_context(self, session_id: str, leaf_entry_id: str | None | Unset = UNSET) -> SessionContext: ...

    # --- maintenance: what verification and repairs need of the storage ----------
    def scan(self, session_id: str) -> StoredScan: ...

    def cut_torn_tail(
        self, session_id: str, *, before_commit: Callable[[TornTailCut], None] | None = None
    ) -> TornTailCut | None: ...

    def recount(self, session_id: str) -> MetaRecount: ...

    def recompute_meta(
        self, session_id: str, *, before_commit: Callable[[MetaRecount], None] | None = None
    ) -> MetaRecount: ...

    # --- the search index (providers/search_index.py) ------------------------------
    def reindex_search(self, session_id: str, *, dry_run: bool = False) -> IndexChanges:
        """Make the search index hold exactly the session's stored entries."""
        ...

    # --- erase: the one audited rewrite of completed entries (services/erasure.py) ----
    def erase_entries(
        self, session_id: str, erasure: EntryErasure, *, before_commit: Callable[[ErasureDone], None] | None = None
    ) -> ErasureDone: ...


@runtime_checkable
class RegistersFiles(Protocol):
    """A provider that can adopt a Pi file where it lies as one of its
    sessions (the ``file`` provider; ``sync_sessions --mode index``)."""

    def register_existing_file(
        self,
        session_id: str,
        *,
        path: str | os.PathLike[str] | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
        **fields: Any,
    ) -> SessionTreeSession: ...

    def path_for(self, session_id: str) -> Path:
        """Where a session without a recorded file of its own is stored."""
        ...

    def forget_files(self) -> None:
        """Drop what this process keeps of files it read (a folder sync reads
        many once; their parsed copies must not stay in memory)."""
        ...


@runtime_checkable
class OneStepWriter(Protocol):
    """Unaudited one-step writes (tests and tools only; no face or service calls them)."""

    def append_entry(self, session_id: str, entry: Entry, *, expected_leaf_id: str | None | Unset = UNSET) -> Entry: ...

    def append_message(
        self, session_id: str, message: dict[str, Any], *, expected_leaf_id: str | None | Unset = UNSET
    ) -> Entry: ...

    def append_thinking_level_change(self, session_id: str, thinking_level: str) -> Entry: ...

    def append_model_change(self, session_id: str, provider: str, model_id: str) -> Entry: ...

    def append_compaction(
        self,
        session_id: str,
        *,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
        usage: Any = None,
        system_message: Any = None,
    ) -> Entry: ...

    def append_branch_summary(
        self,
        session_id: str,
        *,
        branch_from_entry_id: str | None,
        summary: str,
        details: Any = None,
        from_hook: bool | None = None,
    ) -> Entry: ...

    def append_custom_entry(self, session_id: str, custom_type: str, data: Any = None) -> Entry: ...

    def append_custom_message(
        self, session_id: str, custom_type: str, content: Any, *, display: bool = True, details: Any = None
    ) -> Entry: ...

    def append_label_change(self, session_id: str, target_id: str, label: str | None) -> Entry: ...

    def append_session_info(self, session_id: str, name: str) -> Entry: ...

    def append_context_edit(self, session_id: str, target_id: str, replacement: Any) -> Entry: ...

    def append_usage(
        self, session_id: str, kind: str, provider: str, model: str, usage: Any, note: str | None = None
    ) -> Entry: ...

    def begin_in_flight_entry(self, session_id: str, entry: Entry) -> Entry: ...

    def update_in_flight_entry(
        self, session_id: str, entry_id: str, patch: dict[str, Any], *, complete: bool = False
    ) -> Entry: ...

    def abort_in_flight_entry(self, session_id: str, entry_id: str) -> Entry: ...

    def switch_leaf(self, session_id: str, entry_id: str) -> SessionTreeSession: ...

    def reset_leaf(self, session_id: str) -> SessionTreeSession: ...
