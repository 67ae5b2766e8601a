"""The provider contract, written once over a storage port.

``TreeProvider`` implements every method of ``SessionTreeProvider`` with
Pi's rules (which checks, in which order; id, parent and timestamp filling;
size limits; forks; snapshots; context) on top of a ``SessionStorage``
(``providers/port.py``). ``FileSessionTreeProvider`` and
``MySQLSessionTreeProvider`` are this class bound to their storage.

Writes go through ``transact``: the storage locks the session, the work runs
on a ``SessionWriter`` (append, leaf moves, in-flight entries, several at
once), and everything becomes durable together with the operations layer's
audit record (``before_commit``) or not at all. The unaudited one-step
writes of the Python API (``append_message``, ``switch_leaf`` …, for tests and
tools) are ``providers/one_step.py``'s, each one ``transact`` call; the
operations layer (``sessiontree/services/``) composes several steps in one.

The search index (``providers/search_index.py``) is kept here, for every
storage: the entries a unit stored (``SessionWriter.completed``), a session's
copies when it is created with entries, and its rows' removal on a hard
delete, each in the write's own transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from django.conf import settings

from sessiontree.core import entries as build
from sessiontree.core.entries import (
    DEFAULT_MAX_ENTRY_BYTES,
    DEFAULT_MAX_ENTRY_DEPTH,
    apply_in_flight_patch,
    check_copied_entries,
    check_entry_depth,
    check_entry_size,
    first_message_preview,
    line_nests_at_most,
    message_of,
    prepare_new_entry,
)
from sessiontree.core.errors import (
    EntryNotFound,
    ImmutableEntry,
    InvalidEntry,
    InvalidTree,
    LeafConflict,
    SessionClosed,
    SessionNotFound,
)
from sessiontree.core.fork import build_branched_entries
from sessiontree.core.ids import new_session_id
from sessiontree.core.path import resolve_latest_labels, walk_path
from sessiontree.core.path_facts import build_context_from_segment
from sessiontree.core.pi_session_file import encode_entry_line, gc_paused, new_session_header, serialize_line
from sessiontree.core.snapshot import build_snapshot
from sessiontree.core.types import UNSET, Entry, SessionContext, SessionSnapshot, SessionTreeSession, Unset

from . import keyed_reads, meta, search_index
from .one_step import OneStepWrites
from .port import (
    EntryErasure,
    ErasureDone,
    MetaRecount,
    SessionState,
    SessionStorage,
    StoredScan,
    StoredView,
    StoredWrite,
    TornTailCut,
    iter_named_ids,
)

T = TypeVar("T")

CLOSED_STATUSES = {"deleted": "deleted", "archived": "archived"}


def entry_limits() -> tuple[int, int]:
    """(maximum bytes of an entry's JSON line, maximum JSON nesting depth) from settings."""
    return (
        int(getattr(settings, "SESSIONTREE_MAX_ENTRY_BYTES", DEFAULT_MAX_ENTRY_BYTES)),
        int(getattr(settings, "SESSIONTREE_MAX_ENTRY_DEPTH", DEFAULT_MAX_ENTRY_DEPTH)),
    )


def encode_checked(entry: Entry) -> tuple[bytes, Entry]:
    """The entry's line and the entry as stored, refused beyond the size limits
    (``EntryTooLarge``) or when JSON cannot hold it (``InvalidEntry``)."""
    max_bytes, max_depth = entry_limits()
    check_entry_depth(entry, max_depth=max_depth)
    line, stored = encode_entry_line(entry)
    check_entry_size(entry, len(line), max_bytes=max_bytes)
    return line, stored


def check_storable(entries: list[Entry]) -> None:
    """``encode_checked`` for entries stored as they are (a fork, an import),
    without building their stored copies: each is serialized once, and the
    nesting walk runs only for a line with more brackets than the depth limit
    (orjson refuses a depth bomb itself before that)."""
    max_bytes, max_depth = entry_limits()
    for entry in entries:
        try:
            line = serialize_line(entry)
        except (TypeError, orjson.JSONEncodeError):
            encode_checked(entry)  # raises the error naming the entry (and the field)
            raise  # pragma: no cover - encode_checked fails the same way
        check_entry_size(entry, len(line), max_bytes=max_bytes)
        if not line_nests_at_most(line, max_depth):
            check_entry_depth(entry, max_depth=max_depth)


class CheckedCopies(list[Entry]):
    """Entries already checked for ``create_session(entries=...)`` by
    ``TreeProvider.prepare_copies`` of provider ``kind``, with what its
    storage encoded of them ahead (``encoded``; ``None``: nothing). The
    owner must not change them afterwards: the write trusts the checks."""

    kind: str = ""
    encoded: Any = None
    search_rows: Any = None  # their search index rows, built ahead too


class SessionWriter:
    """One session, locked for writing: the steps of one operation.

    Every step validates before it writes and sees the steps before it; if any
    step raises, nothing of the operation is stored.
    """

    def __init__(self, txn: StoredWrite) -> None:
        self._txn = txn
        self.session_id = txn.state.session_id
        self.leaf_before: str | None = txn.state.leaf_entry_id
        self.written: list[Entry] = []
        # Entries this unit stored for good (in-flight ones once completed):
        # what the search index gets in the unit's own transaction.
        self.completed: list[Entry] = []
        self.result: Any = UNSET  # what the unit of work returned, once it has

    # --- state ------------------------------------------------------------------
    @property
    def state(self) -> SessionState:
        return self._txn.state

    @property
    def leaf_entry_id(self) -> str | None:
        return self._txn.state.leaf_entry_id

    def session(self) -> SessionTreeSession:
        """The session as this unit leaves it; once ``transact`` has returned,
        the session as stored, without reading it again."""
        return self._txn.session()

    def get_entry(self, entry_id: Any) -> Entry:
        found = self._txn.get(entry_id) if isinstance(entry_id, str) else None
        if found is None:
            raise EntryNotFound(f"Entry {entry_id} not found in session {self.session_id}")
        return found

    def active_path(self, leaf_entry_id: str | None | Unset = UNSET) -> list[Entry]:
        leaf = self.leaf_entry_id if isinstance(leaf_entry_id, Unset) else leaf_entry_id
        return read_path(self._txn, leaf)

    def entry_on_active_path(self, entry_id: str) -> Entry | None:
        """The entry ``entry_id`` when it lies on the active path, else
        ``None``: by the path facts (O(log depth)) where they can say, else
        from the whole path."""
        found = keyed_reads.on_path(self._txn, self.leaf_entry_id, [entry_id])
        if found is None:
            return next((e for e in self.active_path() if e.get("id") == entry_id), None)
        return self._txn.get(entry_id) if entry_id in found else None

    @property
    def view(self) -> StoredView:
        """The session as this unit sees it (its own steps included), for
        reads by key (``keyed_reads``) instead of whole paths."""
        return self._txn

    # --- checks (one order for every storage) -------------------------------------
    def check_writable(self) -> None:
        status = self.state.status
        if status in CLOSED_STATUSES:
            raise SessionClosed(f"Session {self.session_id} is {status}; restore it before writing")

    def check_no_in_flight(self) -> None:
        in_flight = self.state.in_flight_entry_id
        if in_flight is not None:
            raise LeafConflict(f"Entry {in_flight} of session {self.session_id} is still in flight; complete it first")

    def check_expected_leaf(self, expected_leaf_id: str | None | Unset) -> None:
        if not isinstance(expected_leaf_id, Unset) and expected_leaf_id != self.leaf_entry_id:
            raise LeafConflict(
                f"Leaf of session {self.session_id} is {self.leaf_entry_id!r}, not the expected {expected_leaf_id!r}"
            )

    # --- steps ---------------------------------------------------------------------
    def _prepare(self, entry: Any) -> tuple[Entry, bool, bytes]:
        """Validate ``entry`` as a child of the leaf; returns it as it will be
        stored, whether its id was generated, and its line."""
        if not isinstance(entry, dict):
            prepare_new_entry(entry, leaf_entry_id=self.leaf_entry_id, by_id={})  # raises InvalidEntry
        generated = entry.get("id") is None
        known = self._txn.known_ids(list(iter_named_ids(entry)))  # before the id is made up: not looked up
        if generated:
            entry = {**entry, "id": self._txn.new_entry_id()}
            known = _AssumingAbsent(known, entry["id"])
        new = prepare_new_entry(entry, leaf_entry_id=self.leaf_entry_id, by_id=known)
        line, stored = encode_checked(new)
        return stored, generated, line

    def append(self, entry: Entry, *, expected_leaf_id: str | None | Unset = UNSET) -> Entry:
        """Append ``entry`` as a child of the leaf; it becomes the leaf."""
        self.check_writable()
        self.check_no_in_flight()
        self.check_expected_leaf(expected_leaf_id)
        new, generated, line = self._prepare(entry)
        stored = self._txn.insert(new, generated_id=generated, line=line)
        self._note_first_message(stored)
        self.written.append(stored)
        self.completed.append(stored)
        return stored

    def _note_first_message(self, entry: Entry) -> None:
        """The session's first user message becomes the meta row's preview
        (the storage writes it with the row); later ones change nothing."""
        if self.state.first_message_preview is None:
            self.state.first_message_preview = first_message_preview([entry])

    def begin_in_flight(self, entry: Entry, *, expected_leaf_id: str | None | Unset = UNSET) -> Entry:
        """Start a streaming entry: it becomes the leaf, visible to reads, and
        alone may change until it is completed."""
        self.check_writable()
        self.check_no_in_flight()
        self.check_expected_leaf(expected_leaf_id)
        new, generated, _line = self._prepare(entry)
        stored = self._txn.insert_in_flight(new, generated_id=generated)
        self.written.append(stored)
        return stored

    def update_in_flight(self, entry_id: Any, patch: Any, *, complete: bool = False) -> Entry:
        self.check_writable()
        current = self._txn.in_flight()
        if current is None or current["id"] != entry_id:
            self.get_entry(entry_id)  # EntryNotFound for an unknown id
            raise ImmutableEntry(f"Entry {entry_id} of session {self.session_id} is completed and cannot change")
        named = [patch.get("targetId"), patch.get("firstKeptEntryId")] if isinstance(patch, dict) else []
        updated = apply_in_flight_patch(current, patch, self._txn.known_ids([n for n in named if isinstance(n, str)]))
        line, stored = encode_checked(updated)
        self._txn.replace_in_flight(stored, complete=complete, line=line)
        if complete:
            self._note_first_message(stored)
            self.completed.append(stored)
        self.written.append(stored)
        return stored

    def abort_in_flight(self, entry_id: Any) -> Entry:
        """Discard the in-flight entry ``entry_id`` (a stream that failed or
        was cancelled): the leaf goes back to its parent, as if it had never
        begun. A completed entry raises ``ImmutableEntry``."""
        self.check_writable()
        current = self._txn.in_flight()
        if current is None or current["id"] != entry_id:
            self.get_entry(entry_id)  # EntryNotFound for an unknown id
            raise ImmutableEntry(
                f"Entry {entry_id} of session {self.session_id} is completed: only an in-flight entry can be aborted"
            )
        return self._txn.discard_in_flight()

    def switch_leaf(self, entry_id: Any, *, expected_leaf_id: str | None | Unset = UNSET) -> None:
        """Move the leaf to an existing entry (history is never rewritten)."""
        self.check_writable()
        self.check_no_in_flight()
        self.check_expected_leaf(expected_leaf_id)
        if not isinstance(entry_id, str):
            raise EntryNotFound(f"Entry {entry_id!r} not found in session {self.session_id}")
        self._txn.set_leaf(entry_id)  # EntryNotFound for an id the session does not hold

    def reset_leaf(self, *, expected_leaf_id: str | None | Unset = UNSET) -> None:
        """Move the leaf before the root: the next entry starts a new root."""
        self.check_writable()
        self.check_no_in_flight()
        self.check_expected_leaf(expected_leaf_id)
        self._txn.set_leaf(None)

    def copy_entry(self, entry: Any) -> Entry:
        """Store an entry copied from elsewhere (a Pi file being imported)
        as it is: its own id and ``parentId``, any type, unknown fields kept.

        Unlike ``append`` it may hang from any entry: when its parent is not
        the leaf (a branch in the source) the leaf moves to the parent first;
        afterwards the entry is the leaf. A parent the session does not hold
        makes it a root, as every reader treats such an entry."""
        self.check_writable()
        self.check_no_in_flight()
        check_copied_entries([entry])  # a JSON object with a usable string id
        entry_id = entry["id"]
        parent_id = entry.get("parentId")
        target = entry.get("targetId") if entry.get("type") in ("label", "context_edit") else None
        named = [entry_id, parent_id] if isinstance(parent_id, str) else [entry_id]
        if isinstance(target, str):
            named.append(target)
        known = self._txn.known_ids(named)
        if entry_id in known:
            raise InvalidTree(f"Duplicate entry id {entry_id} in session {self.session_id}")
        if parent_id != self.leaf_entry_id:
            self._txn.set_leaf(parent_id if isinstance(parent_id, str) and parent_id in known else None)
        if isinstance(target, str) and target not in known:
            # Aimed at an entry not stored (yet): a storage that reads the
            # entries aimed at one among the rows after it hears of it.
            noted = getattr(self._txn, "copied_before_target", None)
            if noted is not None:
                noted()
        line, stored = encode_checked(entry)
        inserted = self._txn.insert(stored, line=line)
        self._note_first_message(inserted)
        self.written.append(inserted)
        self.completed.append(inserted)
        return inserted

    def append_context_edit(self, target_id: str, replacement: Any) -> Entry:
        """Append a ``context_edit`` for ``target_id``, checked against the
        active path: the target must be on it and be a message the model sees.
        A string given for an assistant or tool result becomes one text block,
        as those roles need block lists."""
        target = self.entry_on_active_path(target_id)
        if target is None:
            raise EntryNotFound(f"Entry {target_id} is not on the active path of session {self.session_id}")
        role = message_of(target).get("role") if target.get("type") == "message" else None
        if target.get("type") != "custom_message" and role not in ("user", "assistant", "toolResult"):
            raise InvalidEntry(f"Entry {target_id} is not a message whose content the model sees")
        if (
            isinstance(replacement, dict)
            and role in ("assistant", "toolResult")
            and isinstance(replacement.get("content"), str)
        ):
            replacement = {"content": [{"type": "text", "text": replacement["content"]}]}
        return self.append(build.context_edit_entry(target_id, replacement))


class _AssumingAbsent(dict[str, Any]):
    """``known_ids`` plus one generated id taken as absent: the storage makes
    it unique on insert, so validation need not ask the storage about it."""

    def __init__(self, known: Any, generated: str) -> None:
        super().__init__()
        self._known = known
        self._generated = generated

    def __contains__(self, key: object) -> bool:
        return key != self._generated and key in self._known


def read_path(view: StoredView, leaf_entry_id: str | None) -> list[Entry]:
    """Root-first entries up to ``leaf_entry_id`` (Pi's tolerant walk), payloads of the path only."""
    if leaf_entry_id is None:
        return []
    try:
        ids = walk_path(leaf_entry_id, view.parents())
    except EntryNotFound:
        raise EntryNotFound(f"Entry {leaf_entry_id} not found in session {view.state.session_id}") from None
    return view.entries(ids)


def context_entries(view: StoredView, leaf_entry_id: str | None) -> list[Entry]:
    """What the context at ``leaf_entry_id`` is built from
    (``build_context_from_segment``): the storage's ``context_entries`` when
    it keeps path facts (``core/path_facts.py``) and they can say, else the
    whole root→leaf path (the generic default, for every storage)."""
    if leaf_entry_id is None:
        return []
    from_facts = getattr(view, "context_entries", None)
    if from_facts is not None and isinstance(leaf_entry_id, str):
        found: list[Entry] | None = from_facts(leaf_entry_id)
        if found is not None:
            return found
    return read_path(view, leaf_entry_id)


def fork_copies(view: StoredView, leaf_entry_id: str | None) -> list[Entry]:
    """What a fork at ``leaf_entry_id`` holds, read from ``view``: the
    root→leaf path without label entries, plus fresh labels for it."""
    if leaf_entry_id is None:
        return []
    path = read_path(view, leaf_entry_id)
    labels = resolve_latest_labels(view.all_entries(types=("label",)))
    return build_branched_entries(path, labels)


class TreeProvider(meta.SessionMetaMethods, OneStepWrites):
    """Every method of the contract, for the storage in ``self.storage``."""

    kind: str
    storage: SessionStorage
    # Whether all of a write lives in the database, so that a caller's outer
    # transaction.atomic() undoes it too (a storage that also writes files
    # cannot take its bytes back when an outer transaction rolls back).
    joins_outer_transaction: bool = False

    # --- units of work -------------------------------------------------------------
    def transact(
        self,
        session_id: str,
        work: Callable[[SessionWriter], T],
        *,
        expected_leaf_id: str | None | Unset = UNSET,
        before_commit: Callable[[SessionWriter], None] | None = None,
    ) -> T:
        """Run ``work`` on the locked session; its steps and ``before_commit``'s
        database writes are stored together or not at all. ``expected_leaf_id``
        is checked before ``work`` runs (``LeafConflict``). ``work`` may run more
        than once (a database deadlock is retried), so it must only use the writer."""
        writers: list[SessionWriter] = []

        def run(txn: StoredWrite) -> T:
            writer = SessionWriter(txn)
            writers[:] = [writer]
            writer.check_expected_leaf(expected_leaf_id)
            result = work(writer)
            writer.result = result  # what before_commit may keep (an idempotency key's answer)
            return result

        def commit(_txn: StoredWrite) -> None:
            writer = writers[0]
            if writer.completed:
                search_index.add_entries(writer.session_id, writer.completed)
            if before_commit is not None:
                before_commit(writer)

        # Always given: the search index rows of what the unit stored commit
        # with it (a storage commits a unit that changed nothing, and writes
        # nothing for it, only for a caller's before_commit).
        return self.storage.write(session_id, run, before_commit=commit)

    # --- sessions ------------------------------------------------------------------
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
    ) -> SessionTreeSession:
        """Create a session, empty or holding ``entries``: already-built
        entries copied verbatim (a fork, an import), checked first.

        ``parent_session_id`` links the lineage; the header's ``parentSession``
        is ``parent_session_ref`` when given (Pi writes the parent's file
        path), else that id."""
        if isinstance(entries, CheckedCopies) and entries.kind == self.kind:
            copied: list[Entry] = entries  # checked ahead by prepare_copies
        else:
            copied = check_copied_entries(entries or [])
            check_storable(copied)
        session_id = meta.validate_session_id(session_id, new=True) if session_id is not None else new_session_id()
        # An imported header keeps its own creation time.
        timestamp = (header_extra or {}).get("timestamp")
        header = new_session_header(
            session_id,
            cwd=cwd or "",
            parent_session=parent_session_ref or parent_session_id,
            timestamp=timestamp if isinstance(timestamp, str) and timestamp else None,
            extra=header_extra,
        )
        row_fields = {
            "cwd": cwd,
            "agent_id": agent_id,
            "user_id": user_id,
            "title": title,
            "parent_session_id": parent_session_id,
            "metadata": metadata,
        }
        meta.check_meta_fields(row_fields)
        preview = first_message_preview(copied)
        prepared = copied.search_rows if isinstance(copied, CheckedCopies) else None
        rows: list[search_index.IndexRow] = (
            prepared if prepared is not None else search_index.index_rows(copied)  # outside the transaction
        )

        def created(session: SessionTreeSession) -> None:
            search_index.store_rows(session["session_id"], rows)
            if before_commit is not None:
                before_commit(session)

        return self.storage.create(
            {"session_id": session_id, **row_fields, "first_message_preview": preview},
            header,
            copied,
            before_commit=created,
        )

    def prepare_copies(self, entries: list[Entry]) -> CheckedCopies:
        """``entries`` checked as ``create_session(entries=...)`` checks them
        (same errors), for a caller that prepares its next write while the
        current one runs (the folder sync's read-ahead thread); passed to
        ``create_session`` they are not checked again. Storages may encode
        them ahead too (the ``mysql`` provider's SQL literals)."""
        copied = CheckedCopies(check_copied_entries(entries))
        check_storable(copied)
        copied.kind = self.kind
        copied.search_rows = search_index.index_rows(copied)
        return copied

    def get_session(self, session_id: str) -> SessionTreeSession | None:
        try:
            return self.storage.session(session_id)
        except SessionNotFound:
            return None

    def delete_session(
        self, session_id: str, *, hard: bool = False, before_commit: Callable[[], None] | None = None
    ) -> None:
        """Soft: status ``deleted`` (readable, closed to writes). Hard: the
        session and its entries are gone for good, all or nothing."""
        if not hard:
            self.update_session(session_id, status="deleted")
            return

        def destroyed() -> None:
            search_index.remove_session(session_id)
            if before_commit is not None:
                before_commit()

        self.storage.destroy(session_id, before_commit=destroyed)

    def get_header(self, session_id: str) -> dict[str, Any]:
        """The session's Pi header line (what a JSONL export starts with)."""
        return self.storage.header(session_id)

    # --- entries -------------------------------------------------------------------
    def list_entries(self, session_id: str) -> list[Entry]:
        with self.storage.read(session_id) as view, gc_paused():
            return view.all_entries()

    def get_entry(self, session_id: str, entry_id: str) -> Entry:
        with self.storage.read(session_id) as view:
            found = view.get(entry_id) if isinstance(entry_id, str) else None
        if found is None:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        return found

    # --- leaf and branches -------------------------------------------------------------
    def branched_entries(self, session_id: str, leaf_entry_id: str | None) -> tuple[SessionTreeSession, list[Entry]]:
        """The source session and the entries a fork at ``leaf_entry_id`` holds:
        the root→leaf path without label entries, plus fresh labels for it."""
        with self.storage.read(session_id) as view:
            return view.session(), fork_copies(view, leaf_entry_id)

    def create_branched_session(
        self,
        session_id: str,
        leaf_entry_id: str | None,
        *,
        new_session_id: str | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
        **fields: Any,
    ) -> SessionTreeSession:
        """A new session holding the root→``leaf_entry_id`` path (labels
        re-created), whose parent is this one. ``None`` → an empty child."""
        source, copied = self.branched_entries(session_id, leaf_entry_id)
        return self.create_fork(source, copied, new_session_id=new_session_id, before_commit=before_commit, **fields)

    def create_fork(
        self,
        source: SessionTreeSession,
        copied: list[Entry],
        *,
        new_session_id: str | None = None,
        before_commit: Callable[[SessionTreeSession], None] | None = None,
        **fields: Any,
    ) -> SessionTreeSession:
        """The new session of a fork of ``source`` holding ``copied`` (from
        ``fork_copies``), for callers that read the source once themselves."""
        return self.create_session(
            session_id=new_session_id,
            entries=copied,
            parent_session_ref=self.parent_reference(source),
            before_commit=before_commit,
            **meta.fork_fields(source, fields),
        )

    def parent_reference(self, source: SessionTreeSession) -> str:
        """What a fork's header names as ``parentSession``: the source's id
        (storages that write files override this with what Pi writes)."""
        return source["session_id"]

    # --- reads ------------------------------------------------------------------------
    def get_active_path(self, session_id: str, leaf_entry_id: str | None | Unset = UNSET) -> list[Entry]:
        with self.storage.read(session_id) as view, gc_paused():
            leaf = view.state.leaf_entry_id if isinstance(leaf_entry_id, Unset) else leaf_entry_id
            return read_path(view, leaf)

    def build_context(self, session_id: str, leaf_entry_id: str | None | Unset = UNSET) -> SessionContext:
        """Built from the entries the context needs (``context_entries``), not the whole path."""
        with self.storage.read(session_id) as view, gc_paused():
            leaf = view.state.leaf_entry_id if isinstance(leaf_entry_id, Unset) else leaf_entry_id
            return build_context_from_segment(context_entries(view, leaf))

    def get_snapshot(self, session_id: str) -> SessionSnapshot:
        with self.storage.read(session_id) as view, gc_paused():
            return build_snapshot(view.session(), view.all_entries())

    def read(self, session_id: str) -> Any:
        """A consistent read of the session (``StoredView``), for selectors that
        need several reads at once (the admin's tree page, the API's tree) and
        for operations that read before they write."""
        return self.storage.read(session_id)

    # --- the search index ---------------------------------------------------------------
    def reindex_search(self, session_id: str, *, dry_run: bool = False) -> search_index.IndexChanges:
        """Make the search index hold exactly the session's stored entries
        (an in-flight one left out), under the session's write lock so that no
        append comes between the read and the rows; ``dry_run`` only counts
        what would change (under a read lock)."""
        if dry_run:
            with self.storage.read(session_id) as view:
                return search_index.plan_session(session_id, _stored_entries(view))[0]
        read: list[list[Entry]] = []
        changes: list[search_index.IndexChanges] = []

        def work(txn: StoredWrite) -> None:
            read[:] = [_stored_entries(txn)]

        def commit(_txn: StoredWrite) -> None:
            changes[:] = [search_index.sync_session(session_id, read[0])]

        self.storage.write(session_id, work, before_commit=commit)
        return changes[0]

    # --- maintenance (verification and repairs; the storage's own bytes and columns) ---
    def scan(self, session_id: str) -> StoredScan:
        """The session as stored, raw, for ``selectors.verify`` to check."""
        return self.storage.scan(session_id)

    def cut_torn_tail(
        self, session_id: str, *, before_commit: Callable[[TornTailCut], None] | None = None
    ) -> TornTailCut | None:
        """Cut a torn last line after a backup (``None``: nothing torn)."""
        return self.storage.cut_torn_tail(session_id, before_commit=before_commit)

    def recount(self, session_id: str) -> MetaRecount:
        """The meta row's tree fields against the stored entries."""
        return self.storage.recount(session_id)

    def recompute_meta(
        self, session_id: str, *, before_commit: Callable[[MetaRecount], None] | None = None
    ) -> MetaRecount:
        """The meta row's tree fields rewritten from the stored entries."""
        return self.storage.recompute_meta(session_id, before_commit=before_commit)

    # --- erase: the one rewrite of completed entries (audited by services/erasure.py) ------
    def erase_entries(
        self, session_id: str, erasure: EntryErasure, *, before_commit: Callable[[ErasureDone], None] | None = None
    ) -> ErasureDone:
        """Rewrite the entries ``erasure`` selects in place, with their copies
        in the storage's own backups (``SessionStorage.erase``)."""
        return self.storage.erase(session_id, erasure, before_commit=before_commit)


def _stored_entries(view: StoredView) -> list[Entry]:
    """Every completed entry of the session (the in-flight one is not stored yet)."""
    in_flight = view.state.in_flight_entry_id
    return [entry for entry in view.all_entries() if entry["id"] != in_flight]


def closed_reason(status: str) -> str | None:
    return CLOSED_STATUSES.get(status)


__all__ = [
    "CheckedCopies",
    "InvalidEntry",
    "SessionWriter",
    "TreeProvider",
    "context_entries",
    "encode_checked",
    "entry_limits",
    "fork_copies",
    "read_path",
]
