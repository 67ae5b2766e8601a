"""The storage port: what a storage must offer for ``TreeProvider`` to be a
full provider of the contract.

A storage knows how to lock one session, read its tree skeleton and entry
payloads, insert entries, keep the in-flight entry and set the leaf. It knows
nothing of Pi's rules: validation, id/parent/timestamp filling, forks,
snapshots, the order of checks and writes all live once, in
``providers/template.py``. Adding a storage means implementing this module's
two protocols and nothing else (``file_provider.FileStorage`` and
``mysql_provider.MySQLStorage`` are the two we have).

Every write happens inside ``SessionStorage.write``: the storage locks the
session, runs the template's ``work`` on a ``StoredWrite``, and then makes
everything ``work`` did durable together with whatever ``before_commit``
writes to the database (the operations layer's audit record), or none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sessiontree.core.types import Entry, SessionTreeSession

T = TypeVar("T")


@dataclass
class SessionState:
    """A session's meta as its storage reads it (under the lock, for writes).

    ``leaf_entry_id`` is the effective leaf: for the ``file`` storage the
    file's last entry when the file holds entries its meta row has not seen
    (Pi's rule on load), the in-flight entry while one streams.
    """

    pk: int
    session_id: str
    provider: str
    status: str
    leaf_entry_id: str | None
    root_entry_id: str | None
    entry_count: int
    branch_count: int
    compaction_count: int
    in_flight_entry_id: str | None


class StoredView(Protocol):
    """A consistent read of one session (a shared lock for files)."""

    state: SessionState

    def session(self) -> SessionTreeSession:
        """The session's meta as the contract returns it (counts and leaf as stored now)."""
        ...

    def parents(self) -> Mapping[str, Any]:
        """Every entry id (the in-flight one included) → its ``parentId``: the
        skeleton to walk, iterated in append order."""
        ...

    def entries(self, ids: Sequence[str]) -> list[Entry]:
        """The entries ``ids`` name, in that order (every id must exist)."""
        ...

    def all_entries(self, types: Collection[str] | None = None) -> list[Entry]:
        """Every entry in append order (the in-flight one last), or only those of ``types``."""
        ...

    def get(self, entry_id: str) -> Entry | None: ...

    def known_ids(self, named: Collection[str]) -> Mapping[str, Any]:
        """A mapping that answers ``id in …`` for the session's ids: at least
        the ``named`` ones cheaply (validation asks only about those)."""
        ...


class StoredWrite(StoredView, Protocol):
    """A session locked for writing; changes become durable when ``write`` returns."""

    def new_entry_id(self) -> str:
        """An id for a new entry (unique, or made unique by ``insert``)."""
        ...

    def insert(self, entry: Entry, *, generated_id: bool = False, line: bytes | None = None) -> Entry:
        """Store a completed entry (a child of the current leaf) and make it
        the leaf. With ``generated_id`` the storage may replace a colliding id
        with a fresh one; the entry as stored is returned. ``line`` is the
        entry's JSONL line, already encoded (a file storage writes it as is)."""
        ...

    def in_flight(self) -> Entry | None: ...

    def insert_in_flight(self, entry: Entry, *, generated_id: bool = False) -> Entry:
        """Start a streaming entry: visible to reads and the leaf, not yet completed."""
        ...

    def replace_in_flight(self, entry: Entry, *, complete: bool, line: bytes | None = None) -> None:
        """Replace the in-flight entry's content; ``complete`` makes it a stored entry for good."""
        ...

    def set_leaf(self, entry_id: str | None) -> None:
        """Move the leaf (``None``: before the root); ``EntryNotFound`` for an unknown id."""
        ...


BeforeCommit = Callable[[StoredWrite], None]


class SessionStorage(Protocol):
    kind: str

    def read(self, session_id: str) -> AbstractContextManager[StoredView]: ...

    def write(self, session_id: str, work: Callable[[StoredWrite], T], *, before_commit: BeforeCommit | None) -> T:
        """Lock the session, run ``work``, then make its changes and
        ``before_commit``'s database writes durable together, or none of them.
        ``work`` may run more than once (a storage retries on a deadlock), so
        it must not have effects outside the ``StoredWrite``."""
        ...

    def create(
        self,
        row_fields: dict[str, Any],
        header: dict[str, Any],
        entries: list[Entry],
        *,
        before_commit: Callable[[SessionTreeSession], None] | None,
    ) -> SessionTreeSession:
        """Create the session (meta row, header and copied ``entries``), all or nothing."""
        ...

    def destroy(self, session_id: str, *, before_commit: Callable[[], None] | None) -> None:
        """Delete the session and its entries for good, all or nothing."""
        ...

    def header(self, session_id: str) -> dict[str, Any]: ...

    def session(self, session_id: str) -> SessionTreeSession:
        """The session's meta, as ``StoredView.session``, without failing on damaged entries."""
        ...


def iter_named_ids(entry: Mapping[str, Any]) -> Iterator[str]:
    """The ids an entry refers to that validation will look up."""
    for key in ("id", "targetId", "firstKeptEntryId"):
        value = entry.get(key)
        if isinstance(value, str):
            yield value
