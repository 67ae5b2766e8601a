"""A third storage, in plain dicts: the storage port (``providers/port.py``)
and nothing else, to show what adding a storage takes.

The entries of each session live in a module-level dict (every provider the
registry hands out sees the same ones; nothing survives the process). The
session's meta row is the ``AgentSession`` row, as for the ``file`` and
``mysql`` storages: lists, lineage, the admin and the API find it there,
and the row's leaf and counts are written in the same database transaction
as the operation's audit record. Everything Pi's format asks for (ids,
parents, timestamps, validation, forks, contexts, limits) is the provider
template's (``TreeProvider``), so this module only stores and reads.

Registered for the contract suite through the registry setting
(``tests/contract/conftest.py``)::

    SESSIONTREE_PROVIDERS = {..., "memory": "tests.contract.memory_storage.MemorySessionTreeProvider"}
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import transaction
from django.utils import timezone

from sessiontree.core.entries import first_message_preview
from sessiontree.core.errors import EntryNotFound, ImmutableEntry, SessionNotFound
from sessiontree.core.ids import new_entry_id
from sessiontree.core.path import tree_stats
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.core.verify import MetaCounts
from sessiontree.models import AgentSession
from sessiontree.providers import meta
from sessiontree.providers.port import (
    BeforeCommit,
    EntryErasure,
    ErasedEntry,
    ErasureDone,
    MetaRecount,
    SessionState,
    StoredScan,
    StoredWrite,
    TornTailCut,
    TreeFields,
)
from sessiontree.providers.template import TreeProvider

KIND = "memory"
PROVIDER_PATH = "tests.contract.memory_storage.MemorySessionTreeProvider"
T = TypeVar("T")


@dataclass
class _Stored:
    """One session's entries (append order) and header."""

    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    by_id: dict[str, Entry] = field(default_factory=dict)
    with_children: set[str] = field(default_factory=set)
    in_flight: Entry | None = None

    def add(self, entry: Entry) -> None:
        parent_id = entry.get("parentId")
        if parent_id is not None and parent_id in self.by_id:
            self.with_children.add(parent_id)
        self.entries.append(entry)
        self.by_id[entry["id"]] = entry


_sessions: dict[str, _Stored] = {}
# One lock for every session: writers of this storage queue, readers see whole writes.
_lock = threading.RLock()


def clear() -> None:
    with _lock:
        _sessions.clear()


def _stored(session_id: str) -> _Stored:
    found = _sessions.get(session_id)
    if found is None:  # the row outlived the process that held the entries
        raise SessionNotFound(f"Session {session_id} has no entries in this process's memory")
    return found


def _tree(source: SessionState | meta.MetaRow) -> TreeFields:
    return TreeFields(
        source.entry_count, source.branch_count, source.compaction_count, source.root_entry_id, source.leaf_entry_id
    )


class MemoryView:
    def __init__(self, row: meta.MetaRow, stored: _Stored) -> None:
        self.row = row
        self.stored = stored
        self.in_flight_entry = stored.in_flight
        self.pending: list[Entry] = []
        self.written_at: Any = None
        self.state = SessionState(
            pk=row.pk,
            session_id=row.session_id,
            provider=KIND,
            status=row.status,
            leaf_entry_id=row.leaf_entry_id,
            root_entry_id=row.root_entry_id,
            entry_count=row.entry_count,
            branch_count=row.branch_count,
            compaction_count=row.compaction_count,
            in_flight_entry_id=stored.in_flight["id"] if stored.in_flight is not None else None,
            first_message_preview=row.first_message_preview,
        )

    def _by_id(self) -> dict[str, Entry]:
        by_id = dict(self.stored.by_id)
        by_id.update((entry["id"], entry) for entry in self.pending)
        if self.in_flight_entry is not None:
            by_id[self.in_flight_entry["id"]] = self.in_flight_entry
        return by_id

    def _all(self) -> list[Entry]:
        extra = [self.in_flight_entry] if self.in_flight_entry is not None else []
        return [*self.stored.entries, *self.pending, *extra]

    # --- StoredView -----------------------------------------------------------------
    def session(self) -> SessionTreeSession:
        return self.row.session(self.state, updated_at=self.written_at)

    def parents(self) -> Mapping[str, Any]:
        return {entry["id"]: entry.get("parentId") for entry in self._all()}

    def entries(self, ids: Sequence[str]) -> list[Entry]:
        by_id = self._by_id()
        return [by_id[entry_id] for entry_id in ids]

    def all_entries(self, types: Collection[str] | None = None) -> list[Entry]:
        return [entry for entry in self._all() if types is None or entry.get("type") in types]

    def get(self, entry_id: str) -> Entry | None:
        return self._by_id().get(entry_id)

    def known_ids(self, named: Collection[str]) -> Mapping[str, Any]:
        return self._by_id()

    def recount(self) -> MetaRecount:
        entries = self.stored.entries
        stats = tree_stats(entries)
        recorded = self.row
        if self.stored.in_flight is not None:
            leaf: str | None = self.stored.in_flight["id"]
        elif recorded.leaf_entry_id in self.stored.by_id:
            leaf = recorded.leaf_entry_id
        else:
            leaf = entries[-1]["id"] if entries else None
        stored = TreeFields(stats.entry_count, stats.branch_count, stats.compaction_count, stats.root_entry_id, leaf)
        return MetaRecount(_tree(recorded), stored, recorded.title)


class MemoryWrite(MemoryView):
    """Changes are collected here and stored when the unit commits."""

    changed = False

    # --- StoredWrite ----------------------------------------------------------------
    def new_entry_id(self) -> str:
        return new_entry_id(self._by_id())

    def insert(self, entry: Entry, *, generated_id: bool = False, line: bytes | None = None) -> Entry:
        state = self.state
        parent_id = entry.get("parentId")
        has_children = parent_id in self.stored.with_children or any(
            e.get("parentId") == parent_id for e in self.pending
        )
        if parent_id is None or has_children:
            state.branch_count += 1  # a new root, or a sibling: one more tip
        if parent_id is None and state.root_entry_id is None:
            state.root_entry_id = entry["id"]
        if entry.get("type") == "compaction":
            state.compaction_count += 1
        state.entry_count += 1
        state.leaf_entry_id = entry["id"]
        self.pending.append(entry)
        self.changed = True
        return entry

    def in_flight(self) -> Entry | None:
        return self.in_flight_entry

    def insert_in_flight(self, entry: Entry, *, generated_id: bool = False) -> Entry:
        self.in_flight_entry = entry
        self.state.in_flight_entry_id = self.state.leaf_entry_id = entry["id"]
        self.changed = True
        return entry

    def replace_in_flight(self, entry: Entry, *, complete: bool, line: bytes | None = None) -> None:
        if complete:
            self.in_flight_entry = None
            self.state.in_flight_entry_id = None
            self.insert(entry)
        else:
            self.in_flight_entry = entry
        self.changed = True

    def discard_in_flight(self) -> Entry:
        entry = self.in_flight_entry
        assert entry is not None  # the template checks it first
        self.in_flight_entry = None
        self.state.in_flight_entry_id = None
        self.state.leaf_entry_id = entry.get("parentId")
        self.changed = True
        return entry

    def set_leaf(self, entry_id: str | None) -> None:
        if entry_id is not None and entry_id not in self._by_id():
            raise EntryNotFound(f"Entry {entry_id} not found in session {self.state.session_id}")
        self.state.leaf_entry_id = entry_id
        self.changed = True

    # --- the commit ---------------------------------------------------------------------
    def store_row(self) -> None:
        state = self.state
        self.written_at = timezone.now()
        AgentSession.objects.filter(pk=state.pk).update(
            leaf_entry_id=state.leaf_entry_id,
            root_entry_id=state.root_entry_id,
            entry_count=state.entry_count,
            branch_count=state.branch_count,
            compaction_count=state.compaction_count,
            first_message_preview=state.first_message_preview,
            updated_at=self.written_at,
        )

    def store_entries(self) -> None:
        for entry in self.pending:
            self.stored.add(entry)
        self.stored.in_flight = self.in_flight_entry
        self.pending = []


class MemoryStorage:
    kind = KIND

    @contextmanager
    def read(self, session_id: str) -> Iterator[MemoryView]:
        with _lock:
            row = meta.read_row(session_id, provider=KIND)
            yield MemoryView(row, _stored(session_id))

    def session(self, session_id: str) -> SessionTreeSession:
        return meta.read_row(session_id, provider=KIND).session()

    def header(self, session_id: str) -> dict[str, Any]:
        with self.read(session_id) as view:
            return dict(view.stored.header)

    def write(self, session_id: str, work: Callable[[MemoryWrite], T], *, before_commit: BeforeCommit | None) -> T:
        with _lock:
            with transaction.atomic():
                txn = MemoryWrite(meta.read_row(session_id, provider=KIND), _stored(session_id))
                result = work(txn)
                if txn.changed:
                    txn.store_row()
                if before_commit is not None:
                    before_commit(txn)
            txn.store_entries()  # the database part committed: keep the entries
            return result

    def create(
        self,
        row_fields: dict[str, Any],
        header: dict[str, Any],
        entries: list[Entry],
        *,
        before_commit: Callable[[SessionTreeSession], None] | None,
    ) -> SessionTreeSession:
        stored = _Stored(header=dict(header))
        for entry in entries:
            stored.add(entry)
        with _lock:
            with transaction.atomic():
                row = meta.create_row(
                    provider=KIND,
                    header=header,
                    stats=tree_stats(entries),
                    leaf_entry_id=entries[-1]["id"] if entries else None,
                    **row_fields,
                )
                session = meta.to_session_dict(row)
                if before_commit is not None:
                    before_commit(session)
            _sessions[row.session_id] = stored
        return session

    def destroy(self, session_id: str, *, before_commit: Callable[[], None] | None) -> None:
        with _lock:
            with transaction.atomic():
                meta.delete_row(meta.get_row(session_id, provider=KIND))
                if before_commit is not None:
                    before_commit()
            _sessions.pop(session_id, None)

    # --- erase ----------------------------------------------------------------------------
    def erase(
        self, session_id: str, erasure: EntryErasure, *, before_commit: Callable[[ErasureDone], None] | None
    ) -> ErasureDone:
        """Entries replaced in the dicts once the row (preview, time) and
        ``before_commit`` committed; dicts keep no backups or other lines."""
        with _lock:
            with transaction.atomic():
                txn = MemoryWrite(meta.read_row(session_id, provider=KIND), _stored(session_id))
                replacements = dict(erasure.select(txn))
                done = ErasureDone(session_id=session_id)
                if not replacements:
                    return done
                if txn.state.in_flight_entry_id in replacements:
                    raise ImmutableEntry(f"Entry {txn.state.in_flight_entry_id} of session {session_id} is in flight")
                for entry in txn.stored.entries:
                    new = replacements.get(entry["id"])
                    if new is not None:
                        digest = hashlib.sha256(serialize_line(entry).rstrip(b"\n")).hexdigest()
                        done.erased.append(ErasedEntry(entry["id"], digest, new))
                missing = set(replacements) - {erased.entry_id for erased in done.erased}
                if missing:
                    raise EntryNotFound(f"Entry {sorted(missing)[0]} not found in session {session_id}")
                entries = [replacements.get(entry["id"], entry) for entry in txn.stored.entries]
                txn.state.first_message_preview = first_message_preview(entries)
                txn.store_row()
                if before_commit is not None:
                    before_commit(done)
            stored = txn.stored  # the database part committed: keep the new entries
            stored.entries[:] = entries
            stored.by_id.update((entry["id"], entry) for entry in entries if entry["id"] in replacements)
            return done

    # --- maintenance ------------------------------------------------------------------------
    def scan(self, session_id: str) -> StoredScan:
        with self.read(session_id) as view:
            recorded = view.row
            counts = MetaCounts(
                entry_count=recorded.entry_count,
                branch_count=recorded.branch_count,
                compaction_count=recorded.compaction_count,
                leaf_entry_id=None if view.state.in_flight_entry_id is not None else recorded.leaf_entry_id,
            )
            return StoredScan(session_id, KIND, counts, list(view.stored.entries))

    def cut_torn_tail(
        self, session_id: str, *, before_commit: Callable[[TornTailCut], None] | None
    ) -> TornTailCut | None:
        meta.read_row(session_id, provider=KIND)  # SessionNotFound for an unknown session
        return None  # dicts hold no torn lines

    def recount(self, session_id: str) -> MetaRecount:
        with self.read(session_id) as view:
            return view.recount()

    def recompute_meta(self, session_id: str, *, before_commit: Callable[[MetaRecount], None] | None) -> MetaRecount:
        recounts: list[MetaRecount] = []

        def work(txn: MemoryWrite) -> None:
            recount = txn.recount()
            stored, state = recount.stored, txn.state
            state.entry_count, state.branch_count = stored.entry_count, stored.branch_count
            state.compaction_count, state.root_entry_id = stored.compaction_count, stored.root_entry_id
            state.leaf_entry_id = stored.leaf_entry_id
            if state.first_message_preview is None:
                state.first_message_preview = first_message_preview(txn.stored.entries)
            txn.changed = True
            recounts[:] = [recount]

        def commit(_txn: StoredWrite) -> None:
            if before_commit is not None:
                before_commit(recounts[0])

        self.write(session_id, work, before_commit=commit)
        return recounts[0]


class MemorySessionTreeProvider(TreeProvider):
    """The contract over ``MemoryStorage``."""

    kind = KIND

    def __init__(self) -> None:
        self.storage = MemoryStorage()
