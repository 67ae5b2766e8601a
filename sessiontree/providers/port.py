"""The storage port: what a storage must offer for ``TreeProvider`` to be a
full provider of the contract.

A storage knows how to lock one session, read its tree skeleton and entry
payloads, insert entries, keep the in-flight entry and set the leaf. It knows
nothing of Pi's rules: validation, id/parent/timestamp filling, forks,
snapshots, the order of checks and writes all live once, in
``providers/template.py``. Everything else that touches a session's bytes or
a storage's own columns is a port method too (``scan`` for verification,
``cut_torn_tail`` and ``recompute_meta`` for repairs), so nothing outside
``providers/`` needs to know which storage holds a session.

Adding a storage means implementing this module's protocols and nothing else
(``file_provider.FileStorage`` and ``mysql_provider.MySQLStorage`` are the
two we ship; ``tests/contract/memory_storage.py`` is a third, in dicts, that
the contract suite runs against) and naming its provider class in the
``SESSIONTREE_PROVIDERS`` registry.

Every write happens inside ``SessionStorage.write``: the storage locks the
session, runs the template's ``work`` on a ``StoredWrite``, and then makes
everything ``work`` did durable together with whatever ``before_commit``
writes to the database (the operations layer's audit record), or none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.core.verify import MetaCounts, ScannedFile

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
    # The meta row's preview of the first user message (``None``: none yet).
    # ``SessionWriter`` sets it; the storage stores it with the row.
    first_message_preview: str | None = None


@dataclass(frozen=True)
class TreeFields:
    """The meta row's tree fields: what the session list shows and filters on."""

    entry_count: int
    branch_count: int
    compaction_count: int
    root_entry_id: str | None
    leaf_entry_id: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_count": self.entry_count,
            "branch_count": self.branch_count,
            "compaction_count": self.compaction_count,
            "root_entry_id": self.root_entry_id,
            "leaf_entry_id": self.leaf_entry_id,
        }


@dataclass(frozen=True)
class MetaRecount:
    """A meta row's tree fields as recorded, against what the stored entries say.

    ``stored.leaf_entry_id`` keeps the recorded leaf while it is an entry of
    the session (or the entry in flight), else it is the last entry (Pi's
    rule); for a file that grew behind the row's back, the file's last entry.
    """

    recorded: TreeFields
    stored: TreeFields
    title: str | None  # the row's, for callers that set it in the same unit

    def changes(self) -> dict[str, tuple[Any, Any]]:
        """field → (recorded, stored) for every field that differs."""
        before, after = self.recorded.as_dict(), self.stored.as_dict()
        return {name: (before[name], after[name]) for name in before if before[name] != after[name]}


@dataclass
class StoredScan:
    """What verification needs of one stored session, read raw: nothing a
    load would skip silently is hidden (a torn last line, malformed lines).

    ``location`` names where the storage keeps it (a file's path);
    ``scanned`` is the raw bytes' scan (``core.verify.scan_session_bytes``)
    for storages that keep Pi's bytes; ``entries`` are the session's entries
    at v3, in append order; ``counts`` the meta row's (an in-flight leaf left
    out: it is no stored entry yet). ``missing`` says why there is nothing
    to read at all (its file was deleted), with no entries then.
    """

    session_id: str
    provider: str
    counts: MetaCounts
    entries: list[Entry]
    location: str | None = None
    scanned: ScannedFile | None = None
    missing: str | None = None


@dataclass(frozen=True)
class TornTailCut:
    """A torn last line cut off a session's bytes (``cut_torn_tail``)."""

    session_id: str
    cut_bytes: int
    backup: str  # where the whole file was copied first
    backup_name: str


@dataclass(frozen=True)
class ErasedEntry:
    """One entry an erase rewrote in place."""

    entry_id: str
    sha256: str  # of the entry's bytes before: its JSON line as stored (without the newline)
    entry: Entry  # as stored now


@dataclass(frozen=True)
class RewrittenFile:
    """A session file as an erase left it (rewritten, renamed over the old one)."""

    path: str
    size: int
    mtime_ns: int
    inode: int
    complete: int  # bytes up to the end of its last whole line


@dataclass
class ErasureDone:
    """What ``SessionStorage.erase`` changed of one session: its entries
    rewritten in place (append order), the file it rewrote, and the backups
    of its bytes it rewrote (for storages that keep files)."""

    session_id: str
    erased: list[ErasedEntry] = field(default_factory=list)
    file: RewrittenFile | None = None
    backups: list[str] = field(default_factory=list)
    lines_cleaned: int = 0  # lines of its file that were no entry (malformed, torn) and held erased text

    @property
    def changed(self) -> bool:
        return bool(self.erased or self.backups or self.lines_cleaned)


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

    # Optional: ``context_entries(leaf_entry_id) -> list[Entry] | None``, the
    # entries the context at a leaf is built from, read by key from the
    # storage's path facts (``core/path_facts.context_path``); ``None`` when
    # the facts cannot say. A storage without it gets the generic default
    # (``template.context_entries``: the whole root→leaf path).
    #
    # Optional too: the reads by key of ``providers/keyed_reads.py`` (an
    # entry's path facts, its ancestor at a depth, a slice of its path with
    # the entries, its children, the entries aimed at it, its subtree,
    # custom entries by type, a tool's results), each under the same name;
    # a storage without one gets the generic answer from ``parents()``,
    # ``entries()`` and ``all_entries()`` (the memory storage of the
    # contract tests has none).

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

    def discard_in_flight(self) -> Entry:
        """Drop the in-flight entry as if it had never begun (the leaf goes
        back to its parent, the counts to what they were); returns it."""
        ...

    def set_leaf(self, entry_id: str | None) -> None:
        """Move the leaf (``None``: before the root); ``EntryNotFound`` for an unknown id."""
        ...


BeforeCommit = Callable[[StoredWrite], None]


class EntryErasure(Protocol):
    """What an erase asks of a storage (``SessionStorage.erase``); the
    operations layer decides it (``services/erasure.py``)."""

    def select(self, view: StoredView) -> Mapping[str, Entry]:
        """The new content of each entry to rewrite (id → entry with the same
        ``type``, ``id``, ``parentId`` and ``timestamp``), chosen from the
        session as locked for the erase; append order."""
        ...

    def erase_line(self, line: bytes) -> bytes | None:
        """A line the storage keeps that is not one of the session's entries
        (a malformed or torn line of its file, a line of a backup of it):
        what to keep instead, or ``None`` to keep it as it is."""
        ...


class SessionStorage(Protocol):
    kind: str

    def read(self, session_id: str) -> AbstractContextManager[StoredView]: ...

    def write(self, session_id: str, work: Callable[[StoredWrite], T], *, before_commit: BeforeCommit | None) -> T:
        """Lock the session, run ``work``, then make its changes and
        ``before_commit``'s database writes durable together, or none of them.
        ``work`` may run more than once (a storage retries on a deadlock), so
        it must not have effects outside the ``StoredWrite``. A unit whose
        ``work`` changed nothing writes nothing of its own (no meta row
        update); ``before_commit`` still runs (the template always gives one:
        the search index rows of the entries the unit stored)."""
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

    # --- maintenance (verification and repairs) ------------------------------------
    def scan(self, session_id: str) -> StoredScan:
        """The session as stored, for ``selectors/verify.py`` to check (a
        shared lock for files: no writer is mid-line meanwhile)."""
        ...

    def cut_torn_tail(
        self, session_id: str, *, before_commit: Callable[[TornTailCut], None] | None
    ) -> TornTailCut | None:
        """Cut a torn last line (bytes after the last newline) after copying
        everything to a backup, with ``before_commit``'s database writes in the
        same unit; ``None`` when nothing is torn (or the storage keeps no bytes).
        Cached parses of the session are dropped."""
        ...

    def recount(self, session_id: str) -> MetaRecount:
        """The meta row's tree fields against the stored entries (a read)."""
        ...

    # --- erase (the one rewrite of completed entries) ---------------------------------
    def erase(
        self, session_id: str, erasure: EntryErasure, *, before_commit: Callable[[ErasureDone], None] | None
    ) -> ErasureDone:
        """Rewrite the entries ``erasure.select`` names in place, under the
        session's write lock, with ``before_commit``'s database writes in the
        same unit (called only when something changed). A storage that keeps
        bytes rewrites them whole (a file: a temporary file in the same
        folder, fsync, rename) and passes every other line it keeps of the
        session, backups included, through ``erasure.erase_line``; cached
        parses are dropped. The meta row's first-message preview is
        recomputed and ``updated_at`` moves. An in-flight entry is
        ``ImmutableEntry``, an unknown id ``EntryNotFound``."""
        ...

    def recompute_meta(self, session_id: str, *, before_commit: Callable[[MetaRecount], None] | None) -> MetaRecount:
        """Write the stored entries' tree fields into the meta row (and drop
        whatever the storage caches of the leaf), under the session's write
        lock, with ``before_commit``'s database writes in the same unit."""
        ...


def iter_named_ids(entry: Mapping[str, Any]) -> Iterator[str]:
    """The ids an entry refers to that validation will look up."""
    for key in ("id", "targetId", "firstKeptEntryId"):
        value = entry.get(key)
        if isinstance(value, str):
            yield value
