"""The ``mysql`` provider: Pi's entry tree in ``AgentSessionEntry`` rows.

Same semantics as the ``file`` provider (the contract suite proves it); the
session meta row (leaf, status, lineage) is the same ``AgentSession`` row.
docs/mysql-provider.md explains the schema, the codec and the locking.

- Every write runs in one transaction that first row-locks the session
  (``SELECT … FOR UPDATE``; SQLite serializes writers itself), so two writers
  never attach to the same leaf by accident and ``entry_seq`` =
  ``entry_count + 1`` stays gap-free and unique. Deadlocks and lock-wait
  timeouts (MySQL 1213/1205) are retried with jittered backoff.
- An append costs the same at any depth: the locking query also returns the
  leaf's depth and status; only ids the entry names (a label's target, a
  compaction's first kept entry, an explicit id) are looked up, by index; a
  generated id is left to the unique constraint.
- A path read fetches the ``(entry_id, parent_entry_id, entry_seq)`` skeleton
  from a covering index, walks it, then loads only the path's payloads.
- Completed rows are immutable: the one UPDATE of an entry has
  ``status = 'in_flight'`` in its WHERE clause.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import IntegrityError, OperationalError, connection, transaction

from sessiontree.core.context_builder import UNSET, _Unset, build_context_from_path
from sessiontree.core.entries import (
    MAX_ENTRY_ID_LENGTH,
    apply_in_flight_patch,
    check_copied_entries,
    prepare_new_entry,
)
from sessiontree.core.errors import (
    CorruptSessionTree,
    EntryNotFound,
    ImmutableEntry,
    InvalidEntry,
    LeafConflict,
    SessionClosed,
    SessionNotFound,
)
from sessiontree.core.fork import build_branched_entries
from sessiontree.core.ids import new_entry_id, new_session_id
from sessiontree.core.path import entry_depths, resolve_latest_labels
from sessiontree.core.pi_session_file import encode_entry_line, gc_paused, new_session_header
from sessiontree.core.snapshot import build_snapshot
from sessiontree.core.types import Entry, SessionContext, SessionSnapshot, SessionTreeSession
from sessiontree.models import AgentSession, AgentSessionEntry

from . import entry_rows as rows
from . import meta
from .appends import TypedAppends

KIND = "mysql"
COMPLETED = AgentSessionEntry.Status.COMPLETED.value
IN_FLIGHT = AgentSessionEntry.Status.IN_FLIGHT.value

# MySQL/MariaDB: ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT. The server has rolled
# the transaction back; running it again is the documented remedy.
TRANSIENT_MYSQL_ERRORS = frozenset({1213, 1205})
RETRY_ATTEMPTS = 8
RETRY_BASE_SECONDS = 0.005
# Tries to insert with a freshly generated entry id (a collision is a 1 in 4e9 event)
ID_ATTEMPTS = 8

T = TypeVar("T")

logger = logging.getLogger(__name__)


def is_transient(exc: OperationalError) -> bool:
    """A lock conflict that a retry of the whole transaction resolves."""
    code = exc.args[0] if exc.args else None
    if code in TRANSIENT_MYSQL_ERRORS:
        return True
    # SQLite refuses a deferred transaction's write while another writer holds the lock.
    return "database is locked" in str(exc)


def _named_ids(*values: Any) -> list[str]:
    """The values that could be stored entry ids (others can never match one)."""
    return [v for v in values if isinstance(v, str) and 0 < len(v) <= MAX_ENTRY_ID_LENGTH]


class StoredIds(Mapping[str, Entry]):
    """The entry ids a session holds, as the kernel's validation asks for them
    (``id in by_id``), without loading the session.

    Ids named up front are answered by one indexed query (none when nothing is
    named); any other id asked later costs one more. ``assume_absent`` ids are
    answered "absent" without a query: the caller's INSERT and the unique
    constraint on (session, entry_id) decide for them.
    """

    def __init__(self, session_pk: int, ids: Iterable[Any] = (), *, assume_absent: Iterable[str] = ()) -> None:
        self._session_pk = session_pk
        self._found: set[str] = set()
        self._absent: set[str] = set(assume_absent)
        self._fetch(_named_ids(*ids))

    def _fetch(self, ids: list[str]) -> None:
        ids = [i for i in dict.fromkeys(ids) if i not in self._found and i not in self._absent]
        if not ids:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT entry_id FROM {rows.TABLE} "
                f"WHERE {rows.SESSION_COLUMN} = %s AND entry_id IN ({rows.in_list(len(ids))})",
                [self._session_pk, *ids],
            )
            self._found.update(r[0] for r in cursor.fetchall())
        self._absent.update(i for i in ids if i not in self._found)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if key not in self._found and key not in self._absent:
            self._fetch([key])
        return key in self._found

    # The rest of Mapping, for completeness; validation never iterates.
    def __getitem__(self, key: str) -> Entry:
        if key not in self:
            raise KeyError(key)
        with connection.cursor() as cursor:
            cursor.execute(
                f"{rows.SELECT_PAYLOAD} WHERE {rows.SESSION_COLUMN} = %s AND entry_id = %s", [self._session_pk, key]
            )
            return rows.decode_row(cursor.fetchone())

    def _all_ids(self) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT entry_id FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s ORDER BY entry_seq",
                [self._session_pk],
            )
            return [r[0] for r in cursor.fetchall()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all_ids())

    def __len__(self) -> int:
        return len(self._all_ids())


@dataclass
class LockedSession:
    """What a write needs of the session row it has locked, and of its leaf."""

    pk: int
    session_id: str
    status: str
    leaf_entry_id: str | None
    root_entry_id: str | None
    entry_count: int
    leaf_depth: int | None  # None: no leaf, or a leaf id with no row
    leaf_status: str | None


_S = rows.quote
_SESSION_TABLE = _S(AgentSession._meta.db_table)


def _leaf_column_sql(column: str) -> str:
    """A column of the session's leaf entry, as a scalar subquery: a plain
    (non-locking) read, so only the session row is locked; the leaf row cannot
    change meanwhile, since every writer of an entry holds the session row.
    (A LEFT JOIN would lock the leaf row too, and MariaDB may take that lock
    before the session row's, during optimization.)"""
    return (
        f"(SELECT e.{_S(column)} FROM {rows.TABLE} e "
        f"WHERE e.{rows.SESSION_COLUMN} = s.{_S('id')} AND e.{_S('entry_id')} = s.{_S('leaf_entry_id')})"
    )


# The session row and its leaf's depth and status, in one round trip.
_LOCK_SQL = (
    f"SELECT s.{_S('id')}, s.{_S('provider')}, s.{_S('status')}, s.{_S('leaf_entry_id')}, "
    f"s.{_S('root_entry_id')}, s.{_S('entry_count')}, {_leaf_column_sql('depth')}, {_leaf_column_sql('status')} "
    f"FROM {_SESSION_TABLE} s WHERE s.{_S('session_id')} = %s"
)
_ADVANCE_LEAF_SQL = (
    f"UPDATE {_SESSION_TABLE} SET {_S('leaf_entry_id')} = %s, {_S('entry_count')} = {_S('entry_count')} + %s, "
    f"{_S('root_entry_id')} = COALESCE({_S('root_entry_id')}, %s), {_S('updated_at')} = %s WHERE {_S('id')} = %s"
)


class MySQLSessionTreeProvider(meta.SessionMetaMethods, TypedAppends):
    kind = KIND

    # --- transactions -----------------------------------------------------------
    @staticmethod
    def _atomic(work: Callable[[], T]) -> T:
        """Run ``work`` in a transaction, again on a deadlock or lock-wait timeout.

        Inside a caller's own transaction a retry is impossible (the server
        rolled all of it back), so the error goes to that caller.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                with transaction.atomic():
                    return work()
            except OperationalError as exc:
                if attempt >= RETRY_ATTEMPTS or not is_transient(exc) or connection.in_atomic_block:
                    raise
                logger.info("Transaction attempt %d hit a lock conflict (%s); retrying", attempt, exc)
            time.sleep(RETRY_BASE_SECONDS * (2 ** (attempt - 1)) * random.uniform(0.5, 1.5))

    @staticmethod
    def _lock(session_id: str) -> LockedSession:
        """Lock the session row for this transaction (``SELECT … FOR UPDATE``;
        SQLite has no row locks and serializes writers itself)."""
        meta.validate_session_id(session_id)
        sql = _LOCK_SQL + (" FOR UPDATE" if connection.features.has_select_for_update else "")
        with connection.cursor() as cursor:
            cursor.execute(sql, [session_id])
            found = cursor.fetchone()
        if found is None:
            raise SessionNotFound(f"Session {session_id} not found")
        pk, provider, status, leaf_id, root_id, entry_count, leaf_depth, leaf_status = found
        if provider != KIND:
            raise SessionNotFound(f"Session {session_id} not found in the {KIND} provider (it is a {provider} session)")
        return LockedSession(pk, session_id, status, leaf_id, root_id, entry_count, leaf_depth, leaf_status)

    @staticmethod
    def _advance_leaf(
        locked: LockedSession, leaf_entry_id: str | None, *, appended: int = 0, root_entry_id: str | None = None
    ) -> None:
        """Move the leaf, count appended entries, set the root if there was none: one UPDATE."""
        with connection.cursor() as cursor:
            cursor.execute(_ADVANCE_LEAF_SQL, [leaf_entry_id, appended, root_entry_id, rows.db_now(), locked.pk])
        locked.leaf_entry_id = leaf_entry_id
        locked.entry_count += appended

    # --- checks (the file provider's, in the same order) -------------------------
    @staticmethod
    def _check_writable(locked: LockedSession) -> None:
        if locked.status == AgentSession.Status.DELETED:
            raise SessionClosed(f"Session {locked.session_id} is deleted; restore it before writing")

    @staticmethod
    def _check_no_in_flight(locked: LockedSession) -> None:
        # An in-flight entry is always the leaf: it becomes the leaf when it
        # starts and nothing may move the leaf until it is completed.
        if locked.leaf_status == IN_FLIGHT:
            raise LeafConflict(
                f"Entry {locked.leaf_entry_id} of session {locked.session_id} is still in flight; complete it first"
            )

    @staticmethod
    def _check_expected_leaf(locked: LockedSession, expected_leaf_id: str | _Unset | None) -> None:
        if not isinstance(expected_leaf_id, _Unset) and expected_leaf_id != locked.leaf_entry_id:
            raise LeafConflict(
                f"Leaf of session {locked.session_id} is {locked.leaf_entry_id!r}, "
                f"not the expected {expected_leaf_id!r}"
            )

    # --- rows ---------------------------------------------------------------------
    @staticmethod
    def _insert(session_pk: int, entries: list[Entry], *, first_seq: int, depths: list[int], status: str) -> None:
        now = rows.db_now()
        params = [
            rows.insert_params(
                session_pk, entry, entry_seq=first_seq + i, depth=depths[i], status=status, created_at=now
            )
            for i, entry in enumerate(entries)
        ]
        with connection.cursor() as cursor:
            if len(params) == 1:
                cursor.execute(rows.INSERT_SQL, params[0])
            else:
                for chunk in rows.chunks(params):
                    cursor.executemany(rows.INSERT_SQL, chunk)

    @staticmethod
    def _select_entries(session_pk: int, where: str = "", params: Iterable[Any] = ()) -> list[Entry]:
        sql = f"{rows.SELECT_PAYLOAD} WHERE {rows.SESSION_COLUMN} = %s{where} ORDER BY entry_seq"
        with connection.cursor() as cursor, gc_paused():
            cursor.execute(sql, [session_pk, *params])
            return rows.decode_rows(cursor.fetchall())

    @staticmethod
    def _entries_at(session_pk: int, seqs: list[int]) -> dict[int, Entry]:
        """entry_seq → entry for ``seqs``. A path is mostly runs of consecutive
        seqs (a branch is appended in one go), so runs become BETWEEN ranges
        and the rest IN lists: at most 1,000 terms a query."""
        terms: list[tuple[int, int]] = []
        for seq in sorted(seqs):
            if terms and terms[-1][1] == seq - 1:
                terms[-1] = (terms[-1][0], seq)
            else:
                terms.append((seq, seq))
        found: dict[int, Entry] = {}
        with connection.cursor() as cursor, gc_paused():
            for chunk in rows.chunks(terms):
                singles = [low for low, high in chunk if low == high]
                ranges = [(low, high) for low, high in chunk if low != high]
                where = ["entry_seq BETWEEN %s AND %s" for _ in ranges]
                params: list[Any] = [session_pk, *(bound for pair in ranges for bound in pair)]
                if singles:
                    where.append(f"entry_seq IN ({rows.in_list(len(singles))})")
                    params += singles
                cursor.execute(
                    f"SELECT entry_seq, {rows.PAYLOAD_SQL} FROM {rows.TABLE} "
                    f"WHERE {rows.SESSION_COLUMN} = %s AND ({' OR '.join(where)})",
                    params,
                )
                for row in cursor.fetchall():
                    found[row[0]] = rows.decode_row(row[1:])
        return found

    @staticmethod
    def _skeleton(session_pk: int) -> dict[str, tuple[str | None, int]]:
        """entry id → (parent id, entry_seq) for the whole session, read from
        one covering index (``entry_skeleton_idx``)."""
        with connection.cursor() as cursor, gc_paused():
            cursor.execute(
                f"SELECT entry_id, parent_entry_id, entry_seq FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s",
                [session_pk],
            )
            return {entry_id: (parent_id, seq) for entry_id, parent_id, seq in cursor.fetchall()}

    @staticmethod
    def _walk(skeleton: Mapping[str, tuple[str | None, int]], leaf_id: str) -> list[str]:
        """Root-first ids up to ``leaf_id``, tolerant as ``walk_to_root``: a
        missing parent acts as a root; a cycle is an error."""
        path: list[str] = []
        seen: set[str] = set()
        current: str | None = leaf_id
        while current is not None:
            if current in seen:
                raise CorruptSessionTree(f"Cycle detected at entry {current}")
            seen.add(current)
            path.append(current)
            parent_id = skeleton[current][0]
            current = parent_id if parent_id in skeleton else None
        path.reverse()
        return path

    def _path(self, row: AgentSession, leaf_id: str) -> list[Entry]:
        skeleton = self._skeleton(row.pk)
        if not isinstance(leaf_id, str) or leaf_id not in skeleton:
            raise EntryNotFound(f"Entry {leaf_id} not found in session {row.session_id}")
        path_seqs = [skeleton[entry_id][1] for entry_id in self._walk(skeleton, leaf_id)]
        by_seq = self._entries_at(row.pk, path_seqs)
        return [by_seq[seq] for seq in path_seqs]

    # --- sessions -------------------------------------------------------------------
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
    ) -> SessionTreeSession:
        """Create the meta row (its ``header`` holds the session's Pi header)
        and, if given, ``entries``: already-built entries copied verbatim (a
        fork, an import), in order."""
        copied = check_copied_entries(entries or [])
        session_id = meta.validate_session_id(session_id) if session_id is not None else new_session_id()
        header = new_session_header(session_id, cwd=cwd or "", parent_session=parent_session_id, extra=header_extra)

        def work() -> AgentSession:
            row = meta.create_row(
                provider=KIND,
                session_id=session_id,
                cwd=cwd,
                agent_id=agent_id,
                user_id=user_id,
                title=title,
                parent_session_id=parent_session_id,
                metadata=metadata,
                header=header,
            )
            if copied:
                depths = entry_depths(copied)
                self._insert(row.pk, copied, first_seq=1, depths=[depths[e["id"]] for e in copied], status=COMPLETED)
                roots = [e["id"] for e in copied if e.get("parentId") is None]
                meta.set_leaf(row, copied[-1]["id"], appended=len(copied), root_entry_id=roots[0] if roots else None)
            return row

        return meta.to_session_dict(self._atomic(work))

    def delete_session(self, session_id: str, *, hard: bool = False) -> None:
        row = self._row(session_id)
        if not hard:
            meta.update_row_fields(row, {"status": AgentSession.Status.DELETED})
            return
        self._atomic(lambda: meta.delete_row(row))

    def get_header(self, session_id: str) -> dict[str, Any]:
        """The session's Pi header line (what a JSONL export starts with)."""
        row = self._row(session_id)
        if row.header:
            return dict(row.header)
        created = row.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z") if row.created_at else None
        return new_session_header(
            row.session_id, cwd=row.cwd or "", parent_session=row.parent_session_id, timestamp=created
        )

    # --- entries ----------------------------------------------------------------------
    def list_entries(self, session_id: str) -> list[Entry]:
        return self._select_entries(self._row(session_id).pk)

    def get_entry(self, session_id: str, entry_id: str) -> Entry:
        row = self._row(session_id)
        found = self._select_entries(row.pk, " AND entry_id = %s", [entry_id]) if isinstance(entry_id, str) else []
        if not found:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        return found[0]

    def append_entry(self, session_id: str, entry: Entry, *, expected_leaf_id: str | _Unset | None = UNSET) -> Entry:
        return self._append(session_id, entry, expected_leaf_id=expected_leaf_id, status=COMPLETED)

    def begin_in_flight_entry(self, session_id: str, entry: Entry) -> Entry:
        """Start a streaming entry: a row with ``status='in_flight'`` that
        becomes the leaf; it alone may be updated, until it is completed."""
        return self._append(session_id, entry, expected_leaf_id=UNSET, status=IN_FLIGHT)

    def _append(self, session_id: str, entry: Entry, *, expected_leaf_id: str | _Unset | None, status: str) -> Entry:
        def work() -> Entry:
            locked = self._lock(session_id)
            self._check_writable(locked)
            self._check_no_in_flight(locked)
            if status == COMPLETED:
                self._check_expected_leaf(locked, expected_leaf_id)
            if not isinstance(entry, dict):
                prepare_new_entry(entry, leaf_id=locked.leaf_entry_id, by_id={})  # raises InvalidEntry
            # Only the ids this entry refers to are looked up (none for a
            # message); a generated id is left to the unique constraint.
            named = [entry.get("id")]
            if entry.get("type") == "label":
                named.append(entry.get("targetId"))
            elif entry.get("type") == "compaction":
                named.append(entry.get("firstKeptEntryId"))
            generated = new_entry_id() if entry.get("id") is None else None
            stored = StoredIds(locked.pk, named, assume_absent=[generated] if generated else [])
            new = prepare_new_entry(
                entry if generated is None else {**entry, "id": generated}, leaf_id=locked.leaf_entry_id, by_id=stored
            )
            _, new = encode_entry_line(new)  # as stored and read back (NaN → null), as the file provider returns it
            depth = 0 if locked.leaf_depth is None else locked.leaf_depth + 1
            for _ in range(ID_ATTEMPTS):
                try:
                    self._insert(locked.pk, [new], first_seq=locked.entry_count + 1, depths=[depth], status=status)
                    break
                except IntegrityError:
                    # The one expected cause: a generated id already in use.
                    if generated is None or new["id"] not in StoredIds(locked.pk, [new["id"]]):
                        raise
                    taken, new["id"] = new["id"], new_entry_id()
                    if new.get("type") == "compaction" and new.get("firstKeptEntryId") == taken:
                        new["firstKeptEntryId"] = new["id"]  # a retain-none compaction names itself
            else:  # pragma: no cover - 8 random 32-bit collisions in a row
                raise InvalidEntry(f"Could not find a free entry id in session {session_id}")
            # A streaming root becomes the session's root when it is completed, as in the file provider.
            is_root = new["parentId"] is None and status == COMPLETED
            self._advance_leaf(locked, new["id"], appended=1, root_entry_id=new["id"] if is_root else None)
            return new

        return self._atomic(work)

    def update_in_flight_entry(
        self, session_id: str, entry_id: str, patch: dict[str, Any], *, complete: bool = False
    ) -> Entry:
        def work() -> Entry:
            locked = self._lock(session_id)
            self._check_writable(locked)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT {rows.quote('id')}, status, {rows.PAYLOAD_SQL} FROM {rows.TABLE} "
                    f"WHERE {rows.SESSION_COLUMN} = %s AND entry_id = %s",
                    [locked.pk, entry_id if isinstance(entry_id, str) else ""],
                )
                found = cursor.fetchone()
            if found is None:
                raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
            row_pk, row_status, payload = found[0], found[1], found[2:]
            if row_status != IN_FLIGHT:
                raise ImmutableEntry(f"Entry {entry_id} of session {session_id} is completed and cannot change")
            current = rows.decode_row(payload)
            named = [patch.get("targetId"), patch.get("firstKeptEntryId")] if isinstance(patch, dict) else []
            _, updated = encode_entry_line(apply_in_flight_patch(current, patch, StoredIds(locked.pk, named)))
            params = rows.update_in_flight_params(
                row_pk, updated, status=COMPLETED if complete else IN_FLIGHT, in_flight_status=IN_FLIGHT
            )
            with connection.cursor() as cursor:
                cursor.execute(rows.UPDATE_IN_FLIGHT_SQL, params)
                if cursor.rowcount != 1:  # pragma: no cover - the session lock makes this unreachable
                    raise ImmutableEntry(f"Entry {entry_id} of session {session_id} is completed and cannot change")
            is_root = complete and updated["parentId"] is None
            self._advance_leaf(locked, locked.leaf_entry_id, root_entry_id=updated["id"] if is_root else None)
            return updated

        return self._atomic(work)

    # --- leaf and branches ----------------------------------------------------------
    def switch_leaf(self, session_id: str, entry_id: str) -> SessionTreeSession:
        def work() -> SessionTreeSession:
            locked = self._lock(session_id)
            self._check_writable(locked)
            self._check_no_in_flight(locked)
            if entry_id not in StoredIds(locked.pk, [entry_id]):
                raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
            self._advance_leaf(locked, entry_id)
            return meta.to_session_dict(self._row(session_id))

        return self._atomic(work)

    def reset_leaf(self, session_id: str) -> SessionTreeSession:
        def work() -> SessionTreeSession:
            locked = self._lock(session_id)
            self._check_writable(locked)
            self._check_no_in_flight(locked)
            self._advance_leaf(locked, None)
            return meta.to_session_dict(self._row(session_id))

        return self._atomic(work)

    def create_branched_session(
        self, session_id: str, leaf_entry_id: str | None, *, new_session_id: str | None = None, **fields: Any
    ) -> SessionTreeSession:
        """A new session holding the root→``leaf_entry_id`` path (labels
        re-created), whose parent is this one. ``None`` → an empty child."""
        source = self._row(session_id)
        copied: list[Entry] = []
        if leaf_entry_id is not None:
            path = self._path(source, leaf_entry_id)
            labels = resolve_latest_labels(self._select_entries(source.pk, " AND type = %s", ["label"]))
            copied = build_branched_entries(path, labels)
        return self.create_session(session_id=new_session_id, entries=copied, **meta.fork_fields(source, fields))

    # --- reads ----------------------------------------------------------------------
    def get_active_path(self, session_id: str, leaf_entry_id: str | _Unset | None = UNSET) -> list[Entry]:
        row = self._row(session_id)
        leaf_id = row.leaf_entry_id if isinstance(leaf_entry_id, _Unset) else leaf_entry_id
        if leaf_id is None:
            return []
        return self._path(row, leaf_id)

    def build_context(self, session_id: str, leaf_entry_id: str | _Unset | None = UNSET) -> SessionContext:
        with gc_paused():
            return build_context_from_path(self.get_active_path(session_id, leaf_entry_id))

    def get_snapshot(self, session_id: str) -> SessionSnapshot:
        row = self._row(session_id)
        with gc_paused():
            return build_snapshot(meta.to_session_dict(row), self._select_entries(row.pk))
