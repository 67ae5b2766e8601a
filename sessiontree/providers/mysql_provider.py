"""The ``mysql`` storage: Pi's entry tree in ``AgentSessionEntry`` rows.

Same semantics as the ``file`` storage (the contract suite proves it): the
contract's logic is ``providers/template.py``'s; this module only implements
the storage port (``providers/port.py``). The session meta row (leaf, status,
lineage) is the same ``AgentSession`` row. docs/mysql-provider.md explains the
schema, the codec and the locking.

- Every write runs in one transaction that first row-locks the session
  (``SELECT … FOR UPDATE``; SQLite serializes writers itself), so two writers
  never attach to the same leaf by accident and ``entry_seq`` =
  ``entry_count + 1`` stays gap-free and unique. Deadlocks, lock-wait
  timeouts and Galera certification conflicts (MySQL 1213/1205) are retried
  with jittered backoff, and so is a transaction whose connection failed
  before its COMMIT (``providers/db_errors.py``); every failure is typed.
- An append costs the same at any depth: the locking query also returns the
  leaf's depth, status and whether it has children; only ids the entry names
  (a label's target, a compaction's first kept entry, an explicit id) are
  looked up, by index; a generated id is left to the unique constraint.
- Every statement of an entry operation names one session (``session_id``
  in its WHERE clause or its row): what a session-sharded keyspace needs.
- A path read fetches the ``(entry_id, parent_entry_id, entry_seq)`` skeleton
  from a covering index, walks it, then loads only the path's payloads.
- Completed rows are immutable: the one UPDATE of an entry has
  ``status = 'in_flight'`` in its WHERE clause.
"""

from __future__ import annotations

import collections
import hashlib
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import IntegrityError, connection
from django.utils import timezone

from sessiontree.core import entry_keys
from sessiontree.core.entries import MAX_ENTRY_ID_LENGTH, first_message_preview
from sessiontree.core.errors import EntryNotFound, ImmutableEntry, InvalidEntry
from sessiontree.core.ids import new_entry_id
from sessiontree.core.path import TreeStats, entry_depths, tree_stats
from sessiontree.core.path_facts import PathFacts, context_path, facts_for, facts_in_order
from sessiontree.core.pi_session_file import gc_paused, new_session_header, serialize_line
from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.core.verify import MetaCounts
from sessiontree.models import AgentSessionEntry

from . import db_errors, keyed_reads, meta
from . import entry_rows as rows
from .port import (
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
from .template import CheckedCopies, TreeProvider

KIND = "mysql"
COMPLETED = AgentSessionEntry.Status.COMPLETED.value
IN_FLIGHT = AgentSessionEntry.Status.IN_FLIGHT.value

# MySQL/MariaDB: ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT. The server has rolled
# the transaction back; running it again is the documented remedy.
TRANSIENT_MYSQL_ERRORS = db_errors.CONFLICT_CODES
RETRY_ATTEMPTS = db_errors.CONFLICT_ATTEMPTS
RETRY_BASE_SECONDS = db_errors.CONFLICT_BASE_SECONDS
# Tries to insert with a freshly generated entry id (a collision is a 1 in 4e9 event)
ID_ATTEMPTS = 8

T = TypeVar("T")

logger = logging.getLogger(__name__)


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

    def __init__(self, session_key: str, ids: Iterable[Any] = (), *, assume_absent: Iterable[str] = ()) -> None:
        self._session_key = session_key
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
                [self._session_key, *ids],
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
                f"{rows.SELECT_PAYLOAD} WHERE {rows.SESSION_COLUMN} = %s AND entry_id = %s", [self._session_key, key]
            )
            return rows.decode_row(cursor.fetchone())

    def _all_ids(self) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT entry_id FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s ORDER BY entry_seq",
                [self._session_key],
            )
            return [r[0] for r in cursor.fetchall()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all_ids())

    def __len__(self) -> int:
        return len(self._all_ids())


_S = rows.quote


def _leaf_column_sql(column: str) -> str:  # the leaf's row, when the cache does not say
    """A column of the session's leaf entry, as a scalar subquery: a plain
    (non-locking) read, so only the session row is locked; the leaf row cannot
    change meanwhile, since every writer of an entry holds the session row.
    (A LEFT JOIN would lock the leaf row too, and MariaDB may take that lock
    before the session row's, during optimization.)"""
    return (
        f"(SELECT e.{_S(column)} FROM {rows.TABLE} e "
        f"WHERE e.{rows.SESSION_COLUMN} = s.{_S('session_id')} AND e.{_S('entry_id')} = s.{_S('leaf_entry_id')})"
    )


_CACHED = f"s.{_S('leaf_entry_id')} IS NULL OR s.{_S('leaf_depth')} IS NOT NULL"
# The session's meta row, its leaf's depth and status, and whether the leaf
# has children (an append there adds a branch), in one round trip: from the
# row's cache (the usual case: a plain read of one row), else from the leaf's row.
_STATE_SQL = meta.select_sql(
    alias="s",
    extra=[
        f"CASE WHEN {_CACHED} THEN s.{_S('leaf_depth')} ELSE {_leaf_column_sql('depth')} END",
        f"CASE WHEN {_CACHED} THEN (CASE WHEN s.{_S('leaf_in_flight')} THEN '{IN_FLIGHT}' "
        f"WHEN s.{_S('leaf_entry_id')} IS NULL THEN NULL ELSE '{COMPLETED}' END) "
        f"ELSE {_leaf_column_sql('status')} END",
        f"CASE WHEN {_CACHED} THEN s.{_S('leaf_has_children')} "
        f"ELSE EXISTS(SELECT 1 FROM {rows.TABLE} c WHERE c.{rows.SESSION_COLUMN} = s.{_S('session_id')} "
        f"AND c.{_S('parent_entry_id')} = s.{_S('leaf_entry_id')}) END",
        f"s.{_S('rows_in_order')}",
    ],
)
_UPDATE_SESSION_SQL = (
    f"UPDATE {meta.TABLE} SET {_S('leaf_entry_id')} = %s, {_S('root_entry_id')} = %s, "
    f"{_S('entry_count')} = %s, {_S('branch_count')} = %s, {_S('compaction_count')} = %s, "
    f"{_S('leaf_depth')} = %s, {_S('leaf_in_flight')} = %s, {_S('leaf_has_children')} = %s, "
    f"{_S('first_message_preview')} = %s, {_S('updated_at')} = %s "
    f"WHERE {_S('session_id')} = %s"
)
# An entry stored before its parent: the session's children are read by key from now on.
_OUT_OF_ORDER_SQL = f"UPDATE {meta.TABLE} SET {_S('rows_in_order')} = 0 WHERE {_S('session_id')} = %s"
# ``rows_in_order`` from the rows (a repair): no row with inexact path facts.
_AIMED_BEFORE_SQL = (
    f"SELECT 1 FROM {rows.TABLE} l LEFT JOIN {rows.TABLE} t ON t.{rows.SESSION_COLUMN} = l.{rows.SESSION_COLUMN} "
    f"AND t.{_S('entry_id')} = l.target_entry_id WHERE l.{rows.SESSION_COLUMN} = %s "
    f"AND l.target_entry_id IS NOT NULL AND (t.{_S('entry_id')} IS NULL OR t.{_S('entry_seq')} > l.{_S('entry_seq')})"
)
_IN_ORDER_SQL = (
    f"UPDATE {meta.TABLE} SET {_S('rows_in_order')} = NOT EXISTS (SELECT 1 FROM {rows.TABLE} e "
    f"WHERE e.{rows.SESSION_COLUMN} = %s AND NOT e.{_S('path_exact')}) AND NOT EXISTS ({_AIMED_BEFORE_SQL}) "
    f"WHERE {_S('session_id')} = %s"
)
# Where an entry sits, for a leaf move: depth, status, and whether it has children.
_PLACE_SQL = (
    f"SELECT e.{_S('depth')}, e.{_S('status')}, EXISTS(SELECT 1 FROM {rows.TABLE} c "
    f"WHERE c.{rows.SESSION_COLUMN} = e.{rows.SESSION_COLUMN} AND c.{_S('parent_entry_id')} = e.{_S('entry_id')}) "
    f"FROM {rows.TABLE} e WHERE e.{rows.SESSION_COLUMN} = %s AND e.{_S('entry_id')} = %s"
)

_DISCARD_SQL = (
    f"DELETE FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_id')} = %s AND {_S('status')} = %s"
)


@dataclass
class _Leaf:
    """What a write needs to know of the entry the next one hangs from."""

    depth: int | None  # None: no leaf, or a leaf id with no row
    status: str | None
    has_children: bool


def _read_state(session_id: str, *, for_update: bool) -> tuple[SessionState, _Leaf, meta.MetaRow, bool]:
    """The session row (locked with ``for_update``; SQLite has no row locks and
    serializes writers itself), its leaf and whether its entries were stored
    in order (``rows_in_order``), in one query."""
    sql = _STATE_SQL + (" FOR UPDATE" if for_update and connection.features.has_select_for_update else "")
    row, (depth, leaf_status, has_children, in_order) = meta.fetch_row(sql, session_id, provider=KIND)
    state = SessionState(
        pk=row.pk,
        session_id=session_id,
        provider=KIND,
        status=row.status,
        leaf_entry_id=row.leaf_entry_id,
        root_entry_id=row.root_entry_id,
        entry_count=row.entry_count,
        branch_count=row.branch_count,
        compaction_count=row.compaction_count,
        # An in-flight entry is always the leaf: it becomes the leaf when it
        # starts and nothing may move the leaf until it is completed.
        in_flight_entry_id=row.leaf_entry_id if leaf_status == IN_FLIGHT else None,
        first_message_preview=row.first_message_preview,
    )
    return state, _Leaf(depth, leaf_status, bool(has_children)), row, bool(in_order)


def _lock(session_id: str) -> tuple[SessionState, _Leaf, meta.MetaRow, bool]:
    """Lock the session row for this transaction."""
    return _read_state(session_id, for_update=True)


def _atomic(work: Callable[[], T]) -> T:
    """Run ``work`` in a transaction, again on a deadlock or lock-wait timeout
    (or a connection lost before the COMMIT); ``db_errors.retrying``.

    Inside a caller's own transaction a retry is impossible (the server
    rolled all of it back), so the error goes to that caller.
    """
    return db_errors.run_in_transaction(
        work, what="Transaction", attempts=RETRY_ATTEMPTS, base_seconds=RETRY_BASE_SECONDS, log=logger
    )


TARGETING_TYPES = ("label", "context_edit")


def _targets_first(entries: Sequence[Entry]) -> bool:
    """Whether every label or context edit among ``entries`` aims at an entry before it."""
    seen: set[Any] = set()
    for entry in entries:
        target = entry.get("targetId")
        if entry.get("type") in TARGETING_TYPES and isinstance(target, str) and target not in seen:
            return False
        seen.add(entry.get("id"))
    return True


def _insert(
    session_key: str,
    entries: list[Entry],
    *,
    first_seq: int,
    facts: list[PathFacts],
    status: str,
    payloads: list[bytes] | None = None,
) -> None:
    """INSERT ``entries`` with their path ``facts``; ``payloads``: their ``rows.payload_literals``, encoded ahead."""
    now = rows.db_now()
    if payloads is not None and len(entries) > 1:
        statements = rows.encoded_insert_statements(
            session_key, first_seq=first_seq, facts=facts, status=status, created_at=now, payloads=payloads
        )
        if statements is not None:
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)  # type: ignore[arg-type]  # bytes: values already escaped
            return
    params = [
        rows.insert_params(session_key, entry, entry_seq=first_seq + i, facts=facts[i], status=status, created_at=now)
        for i, entry in enumerate(entries)
    ]
    with connection.cursor() as cursor:
        if len(params) == 1:
            cursor.execute(rows.INSERT_SQL, params[0])
            return
        statements = rows.insert_statements(params)
        if statements is not None:
            for statement in statements:
                cursor.execute(statement)  # type: ignore[arg-type]  # bytes: values already escaped
            return
        for chunk in rows.chunks(params):
            cursor.executemany(rows.INSERT_SQL, chunk)


def _append(session_key: str, entry: Entry, *, entry_seq: int, depth: int, status: str) -> None:
    """INSERT one entry below its parent's row, which gives it its path facts (one statement)."""
    params = rows.append_params(
        session_key, entry, entry_seq=entry_seq, depth=depth, status=status, created_at=rows.db_now()
    )
    with connection.cursor() as cursor:
        cursor.execute(rows.APPEND_SQL, params)


def _select_entries(
    session_key: str, where: str = "", params: Iterable[Any] = (), *, ordered: bool = True
) -> list[Entry]:
    # Unordered, a read by id goes by the (session, entry_id) key: with ORDER BY
    # entry_seq, SQLite (and at times MariaDB) walks the session's rows in seq
    # order instead, filtering each: the whole session for a few ids.
    order = " ORDER BY entry_seq" if ordered else ""
    sql = f"{rows.SELECT_PAYLOAD} WHERE {rows.SESSION_COLUMN} = %s{where}{order}"
    with connection.cursor() as cursor, gc_paused():
        cursor.execute(sql, [session_key, *params])
        return rows.decode_rows(cursor.fetchall())


def _entries_at(session_key: str, seqs: list[int]) -> dict[int, Entry]:
    """entry_seq → entry for ``seqs``. A path is mostly runs of consecutive
    seqs (a branch is appended in one go), so runs become BETWEEN ranges and
    the rest IN lists: at most 1,000 terms a query."""
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
            # SQLite refuses an expression deeper than 1,000 (a chain of ORs):
            # at most RANGES_PER_QUERY ranges a statement.
            for start in range(0, max(len(ranges), 1), RANGES_PER_QUERY):
                part = ranges[start : start + RANGES_PER_QUERY]
                where = ["entry_seq BETWEEN %s AND %s" for _ in part]
                params: list[Any] = [session_key, *(bound for pair in part for bound in pair)]
                if singles and start == 0:
                    where.append(f"entry_seq IN ({rows.in_list(len(singles))})")
                    params += singles
                if not where:
                    continue
                cursor.execute(
                    f"SELECT entry_seq, {rows.PAYLOAD_SQL} FROM {rows.TABLE} "
                    f"WHERE {rows.SESSION_COLUMN} = %s AND ({' OR '.join(where)})",
                    params,
                )
                for row in cursor.fetchall():
                    found[row[0]] = rows.decode_row(row[1:])
    return found


RANGES_PER_QUERY = 500


# Entries are read by id in statements of this many; a request for more than
# a tenth of the session (a long path) reads the skeleton and goes by entry_seq ranges.
BY_ID_LIMIT = 2000
BY_ID_SHARE = 10


def _entry_shapes(session_key: str) -> list[Entry]:
    """Every entry's id, parent and type in append order: what tree stats need."""
    with connection.cursor() as cursor, gc_paused():
        cursor.execute(
            f"SELECT entry_id, parent_entry_id, type FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s "
            "ORDER BY entry_seq",
            [session_key],
        )
        return [{"id": entry_id, "parentId": parent_id, "type": kind} for entry_id, parent_id, kind in cursor]


def _first_message_preview(session_key: str) -> str | None:
    """``first_message_preview`` of the session's entries, read in pages of
    message rows until the first user message."""
    after = 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                f"SELECT entry_seq, {rows.PAYLOAD_SQL} FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s "
                "AND type = 'message' AND entry_seq > %s ORDER BY entry_seq LIMIT 100",
                [session_key, after],
            )
            page = cursor.fetchall()
            if not page:
                return None
            preview = first_message_preview(rows.decode_row(row[1:]) for row in page)
            if preview is not None:
                return preview
            after = page[-1][0]


def _skeleton(session_key: str) -> tuple[dict[str, str | None], dict[str, int]]:
    """(entry id → parent id, entry id → entry_seq) for the whole session in
    append order (children keep their order, as in a file), read from one
    covering index (``entry_skeleton_idx``)."""
    parents: dict[str, str | None] = {}
    seqs: dict[str, int] = {}
    with connection.cursor() as cursor, gc_paused():
        cursor.execute(
            f"SELECT entry_id, parent_entry_id, entry_seq FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s "
            "ORDER BY entry_seq",
            [session_key],
        )
        for entry_id, parent_id, seq in cursor.fetchall():
            parents[entry_id] = parent_id
            seqs[entry_id] = seq
    return parents, seqs


# The join of a recursive walk's step: the walk's rows first, each looking its
# next rows up by key, in the order written. MariaDB, given some statistics,
# put the table first (the session's rows in an index read at every step,
# each probing the walk's rows: 1.6 s instead of 3 ms for 634 rows); MariaDB
# keeps the order of a STRAIGHT_JOIN and SQLite that of a CROSS JOIN.
_ORDERED_JOIN = "STRAIGHT_JOIN" if connection.vendor == "mysql" else "CROSS JOIN"


# The leaf's path from the ancestor at a depth down (root first): one walk by
# parent over the unique (session, entry_id) index, bounded by depth.
_SEGMENT_SQL = (
    f"WITH RECURSIVE seg (eid, pid, d) AS ("
    f"SELECT {_S('entry_id')}, {_S('parent_entry_id')}, {_S('depth')} FROM {rows.TABLE} "
    f"WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_id')} = %s "
    f"UNION ALL SELECT p.{_S('entry_id')}, p.{_S('parent_entry_id')}, p.{_S('depth')} FROM seg "
    f"{_ORDERED_JOIN} {rows.TABLE} p ON p.{rows.SESSION_COLUMN} = %s AND p.{_S('entry_id')} = seg.pid AND p.{_S('depth')} < seg.d "
    f"WHERE seg.d > %s) "
    f"SELECT {rows.PAYLOAD_SQL} FROM seg {_ORDERED_JOIN} {rows.TABLE} t ON t.{rows.SESSION_COLUMN} = %s "
    f"AND t.{_S('entry_id')} = seg.eid ORDER BY seg.d"
)
_FACTS_SQL = f"SELECT {rows.SELECT_FACTS}, {_S('status')}, {rows.PAYLOAD_SQL} FROM {rows.TABLE}"
_FACTS_WIDTH = 3 + len(rows.FACT_COLUMN_NAMES)  # entry_id, depth, the facts, status


def _qualified_facts_sql(alias: str) -> str:
    names = ("entry_id", "depth", *rows.FACT_COLUMN_NAMES, "status", *rows.PAYLOAD_COLUMN_NAMES, "extra")
    return ", ".join(f"{alias}.{_S(name)}" for name in names)


def _leaf_named(column: str, alias: str = "x") -> str:
    """Rows the leaf ``l``'s fact ``column`` names, joined by key."""
    return (
        f"SELECT {_qualified_facts_sql(alias)} FROM {rows.TABLE} l JOIN {rows.TABLE} {alias} "
        f"ON {alias}.{rows.SESSION_COLUMN} = l.{rows.SESSION_COLUMN} AND {alias}.{_S('entry_id')} = l.{_S(column)} "
        f"WHERE l.{rows.SESSION_COLUMN} = %s AND l.{_S('entry_id')} = %s"
    )


# What the context at a leaf starts from, in one statement of index lookups:
# the leaf, its nearest compaction, model and thinking entries, and the
# compaction's first kept entry (each with its facts).
_CONTEXT_HEADS_SQL = " UNION ALL ".join(
    [
        f"SELECT {_qualified_facts_sql('x')} FROM {rows.TABLE} x "
        f"WHERE x.{rows.SESSION_COLUMN} = %s AND x.{_S('entry_id')} = %s",
        _leaf_named("path_compaction_id"),
        _leaf_named("path_model_id"),
        _leaf_named("path_thinking_id"),
        f"SELECT {_qualified_facts_sql('x')} FROM {rows.TABLE} l JOIN {rows.TABLE} c "
        f"ON c.{rows.SESSION_COLUMN} = l.{rows.SESSION_COLUMN} AND c.{_S('entry_id')} = l.{_S('path_compaction_id')} "
        f"JOIN {rows.TABLE} x ON x.{rows.SESSION_COLUMN} = c.{rows.SESSION_COLUMN} "
        f"AND x.{_S('entry_id')} = c.{_S('first_kept_entry_id')} "
        f"WHERE l.{rows.SESSION_COLUMN} = %s AND l.{_S('entry_id')} = %s",
    ]
)


def _decoded_facts(fetched: Iterable[Sequence[Any]]) -> dict[str, tuple[Entry, PathFacts, str]]:
    return {i: (rows.decode_row(row), facts, status) for i, (row, facts, status) in _raw_facts(fetched).items()}


def _raw_facts(fetched: Iterable[Sequence[Any]]) -> dict[str, tuple[Sequence[Any], PathFacts, str]]:
    """id → (payload columns, facts, status) of rows selected with the facts first."""
    found: dict[str, tuple[Sequence[Any], PathFacts, str]] = {}
    for row in fetched:
        entry_id, facts = rows.row_facts(row)
        if entry_id not in found:
            found[entry_id] = (row[_FACTS_WIDTH:], facts, row[_FACTS_WIDTH - 1])
    return found


def _context_heads(session_key: str, leaf_entry_id: str) -> dict[str, tuple[Sequence[Any], PathFacts, str]]:
    """``_CONTEXT_HEADS_SQL``: id → (payload columns, facts, status) of the
    leaf and the entries its facts name (decoded only when used)."""
    with connection.cursor() as cursor:
        cursor.execute(_CONTEXT_HEADS_SQL, [session_key, leaf_entry_id] * 5)
        return _raw_facts(cursor.fetchall())


def _facts_and_entries(session_key: str, ids: Collection[str]) -> dict[str, tuple[Entry, PathFacts, str]]:
    """id → (entry, path facts, status) of the ``ids`` that name rows (one query by key)."""
    wanted = list(dict.fromkeys(i for i in ids if isinstance(i, str)))
    if not wanted:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"{_FACTS_SQL} WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_id')} IN ({rows.in_list(len(wanted))})",
            [session_key, *wanted],
        )
        return _decoded_facts(cursor.fetchall())


# Steps a recursive statement takes at most: MariaDB's default
# ``max_recursive_iterations`` is 1,000, beyond which it stops silently
# (MySQL's ``cte_max_recursion_depth`` fails instead), so longer walks go on
# in more statements.
WALK_STEPS = 900

# An entry and its ancestors (id, parent, type), nearest first, ``%s`` (≤ WALK_STEPS) steps at most.
_UP_WALK = (
    f"WITH RECURSIVE up (eid, pid, kind, n) AS ("
    f"SELECT {_S('entry_id')}, {_S('parent_entry_id')}, type, 0 FROM {rows.TABLE} "
    f"WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_id')} = %s "
    f"UNION ALL SELECT p.{_S('entry_id')}, p.{_S('parent_entry_id')}, p.type, up.n + 1 FROM up "
    f"{_ORDERED_JOIN} {rows.TABLE} p ON p.{rows.SESSION_COLUMN} = %s AND p.{_S('entry_id')} = up.pid "
    f"WHERE up.n < %s) "
)
_PATH_IDS_SQL = f"{_UP_WALK}SELECT eid, pid, kind FROM up ORDER BY n"
# The same walk, each entry with its children (by ``entry_parent_idx``): the
# line of a tree window and what branches off it, in one statement (an IN list
# of the walk's ids costs the server more than the walk itself).
_PATH_CHILDREN_SQL = (
    f"{_UP_WALK}SELECT up.eid, up.pid, up.kind, up.n, c.{_S('entry_id')}, c.type, c.{_S('entry_seq')} FROM up "
    f"LEFT JOIN {rows.TABLE} c {{parent_index}} "
    f"ON c.{rows.SESSION_COLUMN} = %s AND c.{_S('parent_entry_id')} = up.eid"
)
# The rows (seq, id, parent, type) of a session in order (``rows_in_order``)
# from ``%s`` rows before an entry to ``%s`` rows after it: one range of the
# ``entry_skeleton_idx`` around the entry's seq. A tree window's line near the
# end of a session lies in the rows appended just before its last entry, and
# the children of its entries in the rows after each (every entry of such a
# session was stored after its parent), so ``path_and_children`` walks them
# in memory: a recursive statement takes ~5 us a step on MariaDB and a probe
# of ``entry_parent_idx`` per entry as much again (6 ms for a 600-entry line
# at 100,000 entries, against ~1.5 ms for this range).
_SEQ_OF = (
    # Signed on MariaDB: ``entry_seq`` is unsigned there, and the range's low end may be below 0.
    f"{'CAST(' if connection.vendor == 'mysql' else ''}(SELECT s.{_S('entry_seq')} FROM {rows.TABLE} s "
    f"WHERE s.{rows.SESSION_COLUMN} = %s AND s.{_S('entry_id')} = %s)"
    f"{' AS SIGNED)' if connection.vendor == 'mysql' else ''}"
)
_AROUND_SQL = (
    f"SELECT e.{_S('entry_seq')}, e.{_S('entry_id')}, e.{_S('parent_entry_id')}, e.type, e.target_entry_id "
    f"FROM {rows.TABLE} e {{seq_index}} WHERE e.{rows.SESSION_COLUMN} = %s "
    f"AND e.{_S('entry_seq')} > {_SEQ_OF} - %s AND e.{_S('entry_seq')} <= {_SEQ_OF} + %s "
    f"ORDER BY e.{_S('entry_seq')}"
)
# Rows read before the entry per step of the path asked for (a path through the
# tail of a branching conversation passes rows of other branches on the way),
# and after it at most (more: the line's children are read by key).
AROUND_ROWS_PER_STEP = 2
AROUND_AFTER = 2000
# The entries ``{{ids}}`` and every entry below them (by ``entry_parent_idx``)
# down ``%s`` (≤ WALK_STEPS) levels, with their parents, seqs and levels.
_SUBTREE_SQL = (
    f"WITH RECURSIVE down (eid, pid, seq, n) AS ("
    f"SELECT {_S('entry_id')}, {_S('parent_entry_id')}, {_S('entry_seq')}, 0 FROM {rows.TABLE} "
    # ``depth``, in no index with the others: the (session, entry_id) key is used,
    # not entry_skeleton_idx walked through every row of the session (SQLite's choice).
    f"WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_id')} IN ({{ids}}) AND {_S('depth')} >= 0 "
    f"UNION ALL SELECT c.{_S('entry_id')}, c.{_S('parent_entry_id')}, c.{_S('entry_seq')}, down.n + 1 FROM down "
    f"{_ORDERED_JOIN} {rows.TABLE} c {{parent_index}} ON c.{rows.SESSION_COLUMN} = %s AND c.{_S('parent_entry_id')} = down.eid "
    f"WHERE down.n < %s) "
    f"SELECT eid, pid, seq, n FROM down"
)
# The entries ``{{ids}}`` and their ancestors, nearest first (``keyed_reads.branch_walks``):
# each walk goes on past an entry only while that entry is not ``%s`` (the stop) and
# has no child besides the one walked up from (``entry_parent_idx``), ``%s`` steps at most.
_BRANCH_WALK_SQL = (
    f"WITH RECURSIVE up (start, eid, pid, prev, n) AS ("
    f"SELECT {_S('entry_id')}, {_S('entry_id')}, {_S('parent_entry_id')}, {_S('entry_id')}, 0 FROM {rows.TABLE} "
    f"WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_id')} IN ({{ids}}) AND {_S('depth')} >= 0 "
    f"UNION ALL SELECT up.start, p.{_S('entry_id')}, p.{_S('parent_entry_id')}, up.eid, up.n + 1 FROM up "
    f"{_ORDERED_JOIN} {rows.TABLE} p ON p.{rows.SESSION_COLUMN} = %s AND p.{_S('entry_id')} = up.pid "
    f"WHERE up.n < %s AND (up.n = 0 OR (up.eid <> %s AND NOT EXISTS (SELECT 1 FROM {rows.TABLE} c {{parent_index}} "
    f"WHERE c.{rows.SESSION_COLUMN} = %s AND c.{_S('parent_entry_id')} = up.eid AND c.{_S('entry_id')} <> up.prev)))) "
    f"SELECT start, eid, pid, n FROM up"
)
_CHILD_IDS_SQL = (
    f"SELECT {_S('entry_id')} FROM {rows.TABLE} {{parent_index}} WHERE {rows.SESSION_COLUMN} = %s "
    f"AND {_S('parent_entry_id')} = %s ORDER BY {_S('entry_seq')}"
)
# The session's rows from an entry on, in append order (``entry_skeleton_idx``: no payload), ``%s`` at most.
_TAIL_SQL = (
    f"SELECT {_S('entry_id')}, {_S('parent_entry_id')}, {_S('entry_seq')} FROM {rows.TABLE} "
    f"WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_seq')} >= %s ORDER BY {_S('entry_seq')} LIMIT %s"
)


def _order_sql(columns: str, index: str, type_filter: str, before: bool) -> str:
    """A page of the session's rows in append order (``ids_in_order``): from a
    seq on, or (``before``) the last ones before it; ``type_filter`` narrows
    it to one type. The seq comes first, then ``columns``."""
    return (
        f"SELECT {_S('entry_seq')}, {columns} FROM {rows.TABLE} {_index_hint(index)} "
        f"WHERE {rows.SESSION_COLUMN} = %s{type_filter} AND {_S('entry_seq')} {'<' if before else '>='} %s "
        f"ORDER BY {_S('entry_seq')}{' DESC' if before else ''} LIMIT %s"
    )


# The session's last ``%s`` rows (seq, id, parent): the highest seq less ``%s``
# (one probe of the index), then a range of ``entry_skeleton_idx``, no probe
# per row (a probe of ``entry_parent_idx`` per row for a child touched a page
# of that index per row: 110 ms for 5,000 rows at 1,000,000 entries).
_TAIL_PARENTS_SQL = (
    f"SELECT e.{_S('entry_seq')}, e.{_S('entry_id')}, e.{_S('parent_entry_id')} FROM {rows.TABLE} e "
    f"{{skeleton_index}} "
    f"WHERE e.{rows.SESSION_COLUMN} = %s AND e.{_S('entry_seq')} > "
    f"(SELECT COALESCE(MAX(m.{_S('entry_seq')}), 0) FROM {rows.TABLE} m WHERE m.{rows.SESSION_COLUMN} = %s) - %s "
    f"ORDER BY e.{_S('entry_seq')}"
)
# Rows at most that ``subtrees`` reads from the earliest branch on, before walking down by parent instead.
TAIL_SCAN = 5000
_CHILDREN_OF_SQL = (
    f"SELECT {_S('entry_id')}, {_S('parent_entry_id')}, type FROM {rows.TABLE} {{parent_index}} "
    f"WHERE {rows.SESSION_COLUMN} = %s AND {_S('parent_entry_id')} IN ({{ids}}) ORDER BY {_S('entry_seq')}"
)
_TARGETING_ANY_SQL = (
    f"{rows.SELECT_PAYLOAD} {{index}} WHERE {rows.SESSION_COLUMN} = %s AND type IN ({{types}})"
    f"{{targets}} ORDER BY entry_seq"
)
_ROOTS_SQL = (
    f"SELECT {_S('entry_id')}, {_S('entry_seq')} FROM {rows.TABLE} {{parent_index}} WHERE {rows.SESSION_COLUMN} = %s "
    f"AND {_S('parent_entry_id')} IS NULL ORDER BY {_S('entry_seq')} LIMIT %s"
)
# Rows whose parent names no row of the session, or themselves (roots too), in append order.
_DANGLING_SQL = (
    f"SELECT e.{_S('entry_id')}, e.{_S('entry_seq')} FROM {rows.TABLE} e WHERE e.{rows.SESSION_COLUMN} = %s "
    f"AND e.{_S('parent_entry_id')} IS NOT NULL AND (e.{_S('parent_entry_id')} = e.{_S('entry_id')} OR NOT EXISTS "
    f"(SELECT 1 FROM {rows.TABLE} p WHERE p.{rows.SESSION_COLUMN} = e.{rows.SESSION_COLUMN} "
    f"AND p.{_S('entry_id')} = e.{_S('parent_entry_id')})) ORDER BY e.{_S('entry_seq')} LIMIT %s"
)
_COUNT_TYPES_SQL = (
    f"SELECT COUNT(*) FROM {rows.TABLE} {{type_index}} WHERE {rows.SESSION_COLUMN} = %s AND type IN ({{types}})"
)
# Entries of some types aimed at one target: by ``entry_target_idx`` (migration
# 0021), never every label of the session.
_TARGETING_SQL = (
    f"{rows.SELECT_PAYLOAD} {{target_index}} WHERE {rows.SESSION_COLUMN} = %s AND type IN ({{types}}) "
    f"AND target_entry_id = %s ORDER BY entry_seq"
)


_CUSTOM_SQL = (
    f"{rows.SELECT_PAYLOAD} {{custom_index}} WHERE {rows.SESSION_COLUMN} = %s AND custom_type IN ({{types}}) "
    f"AND type = 'custom'{{order}}{{limit}}"
)
_KEY_SQL = f"{rows.SELECT_PAYLOAD} {{key_index}} WHERE {rows.SESSION_COLUMN} = %s AND entry_key = %s ORDER BY entry_seq"
# ``tool_name`` is computed from ``message`` by the database (its first
# ``TOOL_NAME_LENGTH`` characters): the rows are checked again once decoded.
TOOL_NAME_LENGTH = 64
_TOOL_SQL = (
    f"{rows.SELECT_PAYLOAD} {{tool_index}} WHERE {rows.SESSION_COLUMN} = %s AND tool_name IN ({{names}}) "
    f"AND type = 'message'{{order}}{{limit}}"
)


# The climb from an entry (session, entry id, lowest depth) up its path to a
# depth: by its jump while that does not pass the depth asked for, else by
# its parent; it stops at that depth, or where a row is missing or not exact.
# Parameters: session, entry id, depth, session, depth, depth.
_CLIMB_CTE = (
    f"WITH RECURSIVE climb (eid, d, pid, jid, jd, exact) AS ("
    f"SELECT {_S('entry_id')}, {_S('depth')}, {_S('parent_entry_id')}, {_S('path_jump_id')}, "
    f"COALESCE({_S('path_jump_depth')}, {_S('depth')}), {_S('path_exact')} FROM {rows.TABLE} "
    f"WHERE {rows.SESSION_COLUMN} = %s AND {_S('entry_id')} = %s AND {_S('depth')} >= %s "
    f"UNION ALL SELECT a.{_S('entry_id')}, a.{_S('depth')}, a.{_S('parent_entry_id')}, a.{_S('path_jump_id')}, "
    f"COALESCE(a.{_S('path_jump_depth')}, a.{_S('depth')}), a.{_S('path_exact')} FROM climb "
    f"{_ORDERED_JOIN} {rows.TABLE} a ON a.{rows.SESSION_COLUMN} = %s AND a.{_S('entry_id')} = "
    f"CASE WHEN climb.jd >= %s AND climb.jd < climb.d AND climb.jid IS NOT NULL THEN climb.jid ELSE climb.pid END "
    f"AND a.{_S('depth')} < climb.d "
    f"WHERE climb.d > %s AND climb.exact) "
)

# The ancestor of an entry at a depth (``path_facts.ancestor_at``): the
# climb ends at the depth asked for, or where a row is missing or not exact
# (then the last row reached is not at that depth, and the caller walks).
_ANCESTOR_SQL = _CLIMB_CTE + "SELECT eid, d, exact FROM climb ORDER BY d LIMIT 1"


# The rows at depths ``%s``..``%s`` (top, bottom) of an entry's path, with
# their payloads: up by the jumps while above ``bottom`` (never past it),
# then by parents down to ``top`` (bottom - top < WALK_STEPS: MariaDB stops a
# recursion silently after 1,000 steps).
_PATH_ENTRIES_SQL = _CLIMB_CTE + (
    f"SELECT {', '.join(f't.{_S(name)}' for name in (*rows.PAYLOAD_COLUMN_NAMES, 'extra'))} FROM climb "
    f"{_ORDERED_JOIN} {rows.TABLE} t ON t.{rows.SESSION_COLUMN} = %s AND t.{_S('entry_id')} = climb.eid "
    f"WHERE climb.d <= %s AND climb.exact ORDER BY climb.d"
)


def _index_hint(name: str) -> str:
    """Use index ``name`` (the planners, without statistics, prefer a scan of the session's rows)."""
    if connection.vendor == "sqlite":
        return f"INDEXED BY {name}"
    if connection.vendor == "mysql":
        return f"FORCE INDEX ({name})"
    return ""  # pragma: no cover - the provider runs on MySQL/MariaDB and SQLite


def _segment(session_key: str, leaf_entry_id: str, top: int, leaf_depth: int) -> list[Entry]:
    """The path from depth ``top`` down to the leaf (at ``leaf_depth``), root
    first, in statements of ``WALK_STEPS`` steps at most (a longer recursion
    stops silently on MariaDB). A walk that ends early returns what it found:
    ``context_path`` checks the length."""
    parts: list[list[Entry]] = []
    current, depth = leaf_entry_id, leaf_depth
    with connection.cursor() as cursor, gc_paused():
        while True:
            bound = max(top, depth - WALK_STEPS)
            cursor.execute(_SEGMENT_SQL, [session_key, current, session_key, bound, session_key])
            part = rows.decode_rows(cursor.fetchall())
            if part:
                parts.append(part)
            if not part or bound <= top or len(part) != depth - bound + 1:
                break
            parent = part[0].get("parentId")
            if not isinstance(parent, str):
                break
            current, depth = parent, bound - 1
    return [entry for part in reversed(parts) for entry in part]


class MySQLView:
    """One session's rows, read in the current transaction (if any)."""

    def __init__(self, state: SessionState, row: meta.MetaRow, in_order: bool = False) -> None:
        self.state = state
        self.row = row
        # Every entry row was stored after its parent (``AgentSession.rows_in_order``):
        # an entry's children are all among the rows appended after it.
        self.in_order = in_order
        self.written_at: Any = None  # the row's new updated_at, once a write stored it
        self._skeleton: tuple[dict[str, str | None], dict[str, int]] | None = None
        # Each entry's ``type`` seen by a walk of this read (the walks read the
        # rows anyway; a type never changes): ``entry_types`` asks only for the others.
        self._types: dict[str, Any] = {}
        # The rows ``_around`` read to the session's last one (id → seq, type,
        # target): the entries aimed at any of them lie among them too.
        self._near: dict[str, tuple[int, Any, Any]] | None = None

    def session(self) -> SessionTreeSession:
        return self.row.session(self.state, updated_at=self.written_at)

    def recount(self) -> MetaRecount:
        """The row's tree fields against its entries' (one light query)."""
        shapes = _entry_shapes(self.state.session_id)
        stats = tree_stats(shapes)
        recorded = self.row
        ids = {shape["id"] for shape in shapes}
        leaf = recorded.leaf_entry_id if recorded.leaf_entry_id in ids else (shapes[-1]["id"] if shapes else None)
        return MetaRecount(
            recorded=TreeFields(
                recorded.entry_count,
                recorded.branch_count,
                recorded.compaction_count,
                recorded.root_entry_id,
                recorded.leaf_entry_id,
            ),
            stored=TreeFields(stats.entry_count, stats.branch_count, stats.compaction_count, stats.root_entry_id, leaf),
            title=recorded.title,
        )

    def _loaded_skeleton(self) -> tuple[dict[str, str | None], dict[str, int]]:
        if self._skeleton is None:
            self._skeleton = _skeleton(self.state.session_id)
        return self._skeleton

    def parents(self) -> Mapping[str, Any]:
        return self._loaded_skeleton()[0]

    def entries(self, ids: Sequence[str]) -> list[Entry]:
        if self._skeleton is None and len(ids) <= max(BY_ID_LIMIT, self.state.entry_count // BY_ID_SHARE):
            # A page's window (a few thousand entries of a long session) by id:
            # no need to read the whole skeleton first.
            wanted = list(dict.fromkeys(ids))
            found: dict[str, Entry] = {}
            for chunk in rows.chunks(wanted, BY_ID_LIMIT):
                where = f" AND entry_id IN ({rows.in_list(len(chunk))})"
                found.update(
                    (entry["id"], entry)
                    for entry in _select_entries(self.state.session_id, where, chunk, ordered=False)
                )
            return [found[entry_id] for entry_id in ids]
        seqs = self._loaded_skeleton()[1]
        path_seqs = [seqs[entry_id] for entry_id in ids]
        by_seq = _entries_at(self.state.session_id, path_seqs)
        return [by_seq[seq] for seq in path_seqs]

    def all_entries(self, types: Collection[str] | None = None) -> list[Entry]:
        if types is None:
            return _select_entries(self.state.session_id)
        kinds = list(types)
        return _select_entries(self.state.session_id, f" AND type IN ({rows.in_list(len(kinds))})", kinds)

    def get(self, entry_id: str) -> Entry | None:
        found = _select_entries(self.state.session_id, " AND entry_id = %s", [entry_id])
        return found[0] if found else None

    def known_ids(self, named: Collection[str]) -> Mapping[str, Any]:
        return StoredIds(self.state.session_id, named)

    # --- reads by key around one entry (``keyed_reads``) ----------------------------

    def _by_ids(self, columns: str, ids: Collection[str]) -> list[Sequence[Any]]:
        """``columns`` of the rows ``ids`` name, by the (session, entry_id) key,
        in statements of ``BY_ID_LIMIT`` ids (no payload unless asked for).
        ``columns`` should hold one column ``entry_skeleton_idx`` does not
        (SQLite answers a select of that index's columns alone by walking it
        through every row of the session)."""
        wanted = list(dict.fromkeys(i for i in ids if isinstance(i, str)))
        found: list[Sequence[Any]] = []
        with connection.cursor() as cursor:
            for chunk in rows.chunks(wanted, BY_ID_LIMIT):
                cursor.execute(
                    f"SELECT {columns} FROM {rows.TABLE} WHERE {rows.SESSION_COLUMN} = %s "
                    f"AND {_S('entry_id')} IN ({rows.in_list(len(chunk))})",
                    [self.state.session_id, *chunk],
                )
                found.extend(cursor.fetchall())
        return found

    def entry_facts(self, ids: Collection[str]) -> dict[str, PathFacts]:
        """The path facts of the ``ids`` that name rows (by key, no payloads)."""
        return dict(rows.row_facts(row) for row in self._by_ids(rows.SELECT_FACTS, ids))

    def path_ids(self, entry_id: str, steps: int) -> list[str]:
        """``entry_id`` and its ``steps`` nearest ancestors, root first, walked
        by parent (ids only) in statements of ``WALK_STEPS`` steps at most."""
        key = self.state.session_id
        out: list[str] = []
        seen: set[str] = set()
        current: Any = entry_id
        left = max(0, steps)
        with connection.cursor() as cursor:
            while isinstance(current, str) and current not in seen:
                cursor.execute(_PATH_IDS_SQL, [key, current, key, min(left, WALK_STEPS)])
                walked = cursor.fetchall()
                if not walked:
                    break
                self._types.update((found_id, kind) for found_id, _, kind in walked)
                for found_id, _, _ in walked:
                    if found_id in seen:  # pragma: no cover - a parent cycle in damaged rows
                        walked = []
                        break
                    seen.add(found_id)
                    out.append(found_id)
                left -= len(walked) - 1 if walked else 0
                if not walked or left <= 0 or len(walked) <= WALK_STEPS:
                    break
                current = walked[-1][1]  # the next walk starts at the top's parent
                left -= 1
                if not isinstance(current, str):
                    break
        out.reverse()
        return out

    def path_and_children(self, entry_id: str, steps: int) -> tuple[list[str], dict[str, list[str]]] | None:
        """``keyed_reads.path_and_children``: in a session stored in order, from
        the rows around ``entry_id`` (``_around``) where they hold the path's
        end and every row after it; else (and for the rest of a path that
        leaves them) the walk and its children in one recursive statement
        (``None``: longer than one walk, or damaged rows: ask the generic way)."""
        if steps >= WALK_STEPS:
            return None
        found = self._around(entry_id, steps) if self.in_order else None
        if found is None:
            return self._path_and_children_walked(entry_id, steps)
        ids, kids, above = found
        if above is None:
            return ids, kids
        higher = self._path_and_children_walked(above, steps - len(ids))
        if higher is None or set(higher[0]) & set(ids):
            return None  # pragma: no cover - a parent cycle in damaged rows
        return higher[0] + ids, {**higher[1], **kids}

    def _around(self, entry_id: str, steps: int) -> tuple[list[str], dict[str, list[str]], str | None] | None:
        """``entry_id``'s path (up to ``steps`` ancestors, root first) and each
        one's children, from one range of rows around it, with the parent
        where the path leaves the range (``None``: it ends at a root within
        it); ``None`` when the range does not reach the session's last row
        (children may lie beyond it) or does not hold the entry."""
        key = self.state.session_id
        before = AROUND_ROWS_PER_STEP * (steps + 1)
        with connection.cursor() as cursor:
            sql = _AROUND_SQL.format(seq_index=_index_hint("entry_skeleton_idx"))
            cursor.execute(sql, [key, key, entry_id, before, key, entry_id, AROUND_AFTER])
            near = cursor.fetchall()
        parent_of: dict[str, Any] = {}
        children: dict[str, list[str]] = {}
        types = self._types
        own_seq = None
        for seq, child, parent, kind, _target in near:  # in append order
            parent_of[child] = parent
            types[child] = kind
            if child == entry_id:
                own_seq = seq
            if isinstance(parent, str) and parent != child:
                children.setdefault(parent, []).append(child)
        if own_seq is None or sum(1 for row in near if row[0] > own_seq) >= AROUND_AFTER:
            return None  # not stored, or rows after the range may hold children
        self._near = {row[1]: (row[0], row[3], row[4]) for row in near}
        out: list[str] = []
        seen: set[str] = set()
        current: Any = entry_id
        while len(out) <= steps and isinstance(current, str) and current not in seen:
            if current not in parent_of:
                out.reverse()
                return out, {i: children.get(i, []) for i in out}, current  # goes on above the range
            seen.add(current)
            out.append(current)
            current = parent_of[current]
        out.reverse()
        return out, {i: children.get(i, []) for i in out}, None

    def _path_and_children_walked(self, entry_id: str, steps: int) -> tuple[list[str], dict[str, list[str]]] | None:
        """The path and its children in one recursive statement."""
        key = self.state.session_id
        sql = _PATH_CHILDREN_SQL.format(parent_index=_index_hint("entry_parent_idx"))
        with connection.cursor() as cursor:
            cursor.execute(sql, [key, entry_id, key, max(0, steps), key])
            found = cursor.fetchall()
        at: dict[str, int] = {}
        kids: dict[str, list[tuple[int, str]]] = {}
        for eid, _, kind, n, child, child_kind, seq in found:
            if at.setdefault(eid, n) != n:
                return None  # pragma: no cover - a parent cycle in damaged rows
            self._types[eid] = kind
            listed = kids.setdefault(eid, [])
            if child is not None and child != eid:
                self._types[child] = child_kind
                listed.append((seq, child))
        ids = sorted(at, key=at.__getitem__, reverse=True)
        return ids, {eid: [child for _, child in sorted(kids[eid])] for eid in ids}

    def path_entries(self, entry_id: str, top: int, bottom: int) -> list[Entry] | None:
        """``keyed_reads.path_entries``: one statement per ``WALK_STEPS`` entries
        (the first climbs to ``bottom`` by the jumps), payloads included."""
        key = self.state.session_id
        parts: list[list[Entry]] = []
        current: Any = entry_id
        high = bottom
        with connection.cursor() as cursor, gc_paused():
            while high >= top:
                low = max(top, high - WALK_STEPS + 1)
                cursor.execute(_PATH_ENTRIES_SQL, [key, current, high, key, high, low, key, high])
                part = rows.decode_rows(cursor.fetchall())
                if len(part) != high - low + 1:
                    return None
                parts.append(part)
                current, high = part[0].get("parentId"), low - 1
                if high >= top and not isinstance(current, str):
                    return None
        return [entry for part in reversed(parts) for entry in part]

    def child_ids(self, entry_id: str) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                _CHILD_IDS_SQL.format(parent_index=_index_hint("entry_parent_idx")), [self.state.session_id, entry_id]
            )
            return [row[0] for row in cursor.fetchall() if row[0] != entry_id]

    def children_of(self, ids: Collection[str]) -> dict[str, list[str]]:
        """Each of ``ids`` → its children in append order, by ``entry_parent_idx``
        (one statement per ``BY_ID_LIMIT`` ids)."""
        wanted = list(dict.fromkeys(i for i in ids if isinstance(i, str)))
        out: dict[str, list[str]] = {i: [] for i in wanted}
        with connection.cursor() as cursor:
            for chunk in rows.chunks(wanted, BY_ID_LIMIT):
                sql = _CHILDREN_OF_SQL.format(
                    parent_index=_index_hint("entry_parent_idx"), ids=rows.in_list(len(chunk))
                )
                cursor.execute(sql, [self.state.session_id, *chunk])
                for child, parent, kind in cursor.fetchall():
                    self._types[child] = kind
                    if child != parent:
                        out[parent].append(child)
        return out

    def entry_types(self, ids: Collection[str]) -> dict[str, Any]:
        """Each id's ``type``, by key (no payload): those a walk of this read saw
        without a statement, the others in one."""
        known = self._types
        found = {entry_id: known[entry_id] for entry_id in ids if entry_id in known}
        missing = [entry_id for entry_id in ids if entry_id not in known]
        if missing:
            found.update((entry_id, kind) for entry_id, kind in self._by_ids(f"{_S('entry_id')}, type", missing))
        return found

    def subtrees(self, ids: Collection[str], limit: int) -> dict[str, dict[str, str | None]]:
        """``keyed_reads.subtrees``: the subtrees of ``ids`` (disjoint).

        In a session stored in order (``rows_in_order``) an entry's
        descendants were all appended after it: when the session's
        rows from the earliest of ``ids`` on are few (``TAIL_SCAN`` at most,
        the usual case for the branches near the leaf), they are read in one
        range of ``entry_skeleton_idx`` (ids, parents, seqs: no payload) and
        the subtrees found in them; else walked down together by parent
        (``_walk_subtrees``)."""
        key = self.state.session_id
        wanted = list(dict.fromkeys(i for i in ids if isinstance(i, str)))
        # Each one's seq (``depth`` too: not MIN(), nor the seq alone, which
        # SQLite would answer from entry_skeleton_idx, walked through every row).
        seqs = [row[0] for row in self._by_ids(f"{_S('entry_seq')}, {_S('depth')}", wanted)]
        if not seqs:
            return {}
        first = min(seqs)
        # Seqs run 1..entry_count (and one more for an entry in flight): from
        # that far back the range holds more than TAIL_SCAN rows, so walk at
        # once instead of reading them to find out.
        if not self.in_order or self.state.entry_count + 1 - first >= TAIL_SCAN:
            return self._walk_subtrees(wanted, limit)
        with connection.cursor() as cursor:
            cursor.execute(_TAIL_SQL, [key, first, TAIL_SCAN + 1])
            tail = cursor.fetchall()
        if len(tail) > TAIL_SCAN:
            return self._walk_subtrees(wanted, limit)
        children: dict[str, list[str]] = {}
        parent_of: dict[str, str | None] = {}
        for child, parent, _seq in tail:  # in append order
            parent_of[child] = parent
            if isinstance(parent, str) and parent != child:
                children.setdefault(parent, []).append(child)
        out: dict[str, dict[str, str | None]] = {}
        for root in wanted:
            if root not in parent_of:
                continue
            under = {root}
            queue = collections.deque([root])  # level by level, as the walk would read them
            while queue and len(under) <= limit:
                for kid in children.get(queue.popleft(), ()):
                    if kid not in under:
                        under.add(kid)
                        queue.append(kid)
            out[root] = {child: parent_of[child] for child in parent_of if child in under}
        return out

    def _walk_subtrees(self, wanted: list[str], limit: int) -> dict[str, dict[str, str | None]]:
        """The subtrees of ``wanted`` walked down together, ``limit`` levels at
        most, in one statement per ``BY_ID_LIMIT`` ids (a subtree that reaches
        ``limit`` levels holds more than ``limit`` entries: read in part, as
        the caller expects)."""
        key = self.state.session_id
        levels = max(1, min(limit, WALK_STEPS))
        root_of: dict[str, str] = {}
        found: dict[str, list[tuple[int, str, str | None]]] = {i: [] for i in wanted}
        with connection.cursor() as cursor:
            for chunk in rows.chunks(wanted, BY_ID_LIMIT):
                sql = _SUBTREE_SQL.format(ids=rows.in_list(len(chunk)), parent_index=_index_hint("entry_parent_idx"))
                cursor.execute(sql, [key, *chunk, key, levels])
                for child, parent, seq, level in sorted(cursor.fetchall(), key=lambda row: (row[3], row[2])):
                    root = child if level == 0 else root_of.get(parent) if isinstance(parent, str) else None
                    if root is None or child in root_of:  # pragma: no cover - a parent cycle in damaged rows
                        continue
                    root_of[child] = root
                    found[root].append((seq, child, parent))
        return {root: {child: parent for _, child, parent in sorted(part)} for root, part in found.items() if part}

    def levels_below(self, ids: Collection[str], depth: int) -> list[list[tuple[str, str]]] | None:
        """``keyed_reads.levels_below`` in one walk down by ``entry_parent_idx``
        (``depth`` levels, at most ``WALK_STEPS``; more: level by level)."""
        wanted = list(dict.fromkeys(i for i in ids if isinstance(i, str)))
        if depth > WALK_STEPS or len(wanted) > BY_ID_LIMIT:
            return None
        sql = _SUBTREE_SQL.format(ids=rows.in_list(len(wanted)), parent_index=_index_hint("entry_parent_idx"))
        with connection.cursor() as cursor:
            cursor.execute(sql, [self.state.session_id, *wanted, self.state.session_id, depth])
            found = cursor.fetchall()
        seen = set(wanted)
        out: list[list[tuple[str, str]]] = []
        for child, parent, _seq, level in sorted(found, key=lambda row: (row[3], row[2])):
            if level == 0 or child in seen or parent not in seen:
                continue  # the start, or an entry met twice (a damaged tree)
            seen.add(child)
            while len(out) < level:
                out.append([])
            out[level - 1].append((str(child), str(parent)))
        while out and not out[-1]:
            out.pop()
        return out

    def branch_walks(self, starts: Collection[str], stop_at: str, steps: int) -> dict[str, list[tuple[str, Any]]]:
        """``keyed_reads.branch_walks`` in one statement per ``BY_ID_LIMIT``
        starts: the walks up by the (session, entry_id) key, each stopped by
        a probe of ``entry_parent_idx`` (``steps`` at most ``WALK_STEPS``)."""
        wanted = list(dict.fromkeys(i for i in starts if isinstance(i, str)))
        key = self.state.session_id
        found: dict[str, list[tuple[int, str, Any]]] = {}
        with connection.cursor() as cursor:
            for chunk in rows.chunks(wanted, BY_ID_LIMIT):
                sql = _BRANCH_WALK_SQL.format(
                    ids=rows.in_list(len(chunk)), parent_index=_index_hint("entry_parent_idx")
                )
                cursor.execute(sql, [key, *chunk, key, max(0, min(steps, WALK_STEPS)), stop_at, key])
                for start, entry_id, parent_id, n in cursor.fetchall():
                    found.setdefault(str(start), []).append((int(n), str(entry_id), parent_id))
        return {start: [(entry_id, parent) for _, entry_id, parent in sorted(walk)] for start, walk in found.items()}

    def root_ids(self, limit: int) -> list[str]:
        """Rows without a parent, by ``entry_parent_idx``; in a session not
        stored in order (``rows_in_order``) also the rows whose parent names
        no row (a copy whose parent never came) or themselves, found among
        all of the session's rows (only such a session can hold them)."""
        key = self.state.session_id
        with connection.cursor() as cursor:
            cursor.execute(
                _ROOTS_SQL.format(parent_index=_index_hint("entry_parent_idx")),
                [key, max(limit, 0)],
            )
            found = list(cursor.fetchall())
            if not self.in_order:
                cursor.execute(_DANGLING_SQL, [key, max(limit, 0)])
                found += cursor.fetchall()
        return [row[0] for row in sorted(found, key=lambda row: row[1])[: max(limit, 0)]]

    def count_types(self, types: Collection[str]) -> int:
        """Entries of ``types``, counted on ``entry_type_idx``."""
        kinds = list(dict.fromkeys(types))
        if not kinds:
            return 0
        sql = _COUNT_TYPES_SQL.format(type_index=_index_hint("entry_type_idx"), types=rows.in_list(len(kinds)))
        with connection.cursor() as cursor:
            cursor.execute(sql, [self.state.session_id, *kinds])
            return int(cursor.fetchone()[0])

    def ids_in_order(
        self, start: int, limit: int, types: Collection[str] | None = None, *, before: bool = False
    ) -> list[tuple[int, str]]:
        """``keyed_reads.ids_in_order``, the position being ``entry_seq``: a
        range of ``entry_skeleton_idx``, or of ``entry_type_idx`` (session,
        type, seq) for each type asked for, merged (one statement a type)."""
        found = self._in_order(_S("entry_id"), start, limit, types, before)
        return [(seq, str(row[0])) for seq, row in found]

    def entries_in_order(
        self, start: int, limit: int, types: Collection[str] | None = None, *, before: bool = False
    ) -> list[tuple[int, Entry]]:
        """``keyed_reads.entries_in_order``: ``ids_in_order``'s ranges, the payloads in the same statements."""
        with gc_paused():
            return [
                (seq, rows.decode_row(row))
                for seq, row in self._in_order(rows.PAYLOAD_SQL, start, limit, types, before)
            ]

    def _in_order(
        self, columns: str, start: int, limit: int, types: Collection[str] | None, before: bool
    ) -> list[tuple[int, Sequence[Any]]]:
        if limit <= 0:
            return []
        queries: list[tuple[str, list[Any]]]
        if types is None:
            queries = [(_order_sql(columns, "entry_skeleton_idx", "", before), [])]
        else:
            typed = _order_sql(columns, "entry_type_idx", " AND type = %s", before)
            queries = [(typed, [kind]) for kind in dict.fromkeys(types) if isinstance(kind, str)]
        found: list[tuple[int, Sequence[Any]]] = []
        with connection.cursor() as cursor:
            for sql, params in queries:
                cursor.execute(sql, [self.state.session_id, *params, start, limit])
                found += [(int(row[0]), row[1:]) for row in cursor.fetchall()]
        found.sort(key=lambda pair: pair[0])
        return found[-limit:] if before else found[:limit]

    def tail_parents(self, scan: int) -> list[tuple[int, str, Any]]:
        """``keyed_reads.tail_parents`` in one statement: the last ``scan`` rows
        of ``entry_skeleton_idx`` (the tips among them: ``keyed_reads.tips_in``,
        whose check of the candidates is one ``children_of``)."""
        key = self.state.session_id
        with connection.cursor() as cursor:
            # The range by entry_skeleton_idx, named: with few rows MariaDB took the
            # (session, seq) key and read every row of the session through it.
            cursor.execute(_TAIL_PARENTS_SQL.format(skeleton_index=_index_hint("entry_skeleton_idx")), [key, key, scan])
            return [(int(seq), str(entry_id), parent) for seq, entry_id, parent in cursor.fetchall()]

    def position_of(self, entry_id: str) -> int | None:
        """``keyed_reads.position_of``: the row's ``entry_seq``."""
        found = self._by_ids(f"{_S('entry_seq')}, type", [entry_id])
        return int(found[0][0]) if found else None

    def entries_targeting_any(self, target_ids: Collection[str], types: Collection[str]) -> list[Entry]:
        """Entries of ``types`` aimed at any of ``target_ids``, by ``entry_target_idx``
        (one statement; more than ``BY_ID_LIMIT`` targets read every entry of
        those types instead, by ``entry_type_idx``)."""
        kinds = list(dict.fromkeys(types))
        wanted = list(dict.fromkeys(target_ids))
        if not kinds or not wanted:
            return []
        near = self._near if self.in_order else None
        if near is not None:
            return self._targeting_near(near, wanted, kinds)
        targets = rows.in_list(len(wanted)) if len(wanted) <= BY_ID_LIMIT else None
        sql = _TARGETING_ANY_SQL.format(
            index=_index_hint("entry_target_idx" if targets else "entry_type_idx"),
            types=rows.in_list(len(kinds)),
            targets=f" AND target_entry_id IN ({targets})" if targets else "",
        )
        with connection.cursor() as cursor, gc_paused():
            cursor.execute(sql, [self.state.session_id, *kinds, *(wanted if targets else ())])
            found = rows.decode_rows(cursor.fetchall())
        chosen = set(wanted)
        return [entry for entry in found if entry.get("targetId") in chosen]

    def _targeting_near(
        self, near: dict[str, tuple[int, Any, Any]], wanted: list[str], kinds: list[str]
    ) -> list[Entry]:
        """``entries_targeting_any`` after ``_around`` read the rows from before
        a line to the session's end, in a session stored in order (an entry
        aimed at another was stored after it): those aimed at the entries
        among the rows are among them too, read by id; those aimed at the few
        others (the root's first entries, say) by ``entry_target_idx``."""
        inside = {entry_id for entry_id in wanted if entry_id in near}
        hits = sorted(
            (seq, entry_id) for entry_id, (seq, kind, target) in near.items() if kind in kinds and target in inside
        )
        found = self.entries([entry_id for _, entry_id in hits]) if hits else []
        outside = [entry_id for entry_id in wanted if entry_id not in inside]
        if outside:
            self._near = None  # the read by key, just for them
            try:
                found += self.entries_targeting_any(outside, kinds)
            finally:
                self._near = near
        # In append order: a row outside the range was stored before every row in it.
        found.sort(key=lambda entry: near[entry["id"]][0] if entry["id"] in near else -1)
        return found

    def entries_targeting(self, target_id: str, types: Collection[str]) -> list[Entry]:
        kinds = list(types)
        sql = _TARGETING_SQL.format(target_index=_index_hint("entry_target_idx"), types=rows.in_list(len(kinds)))
        with connection.cursor() as cursor:
            cursor.execute(sql, [self.state.session_id, *kinds, target_id])
            return rows.decode_rows(cursor.fetchall())

    def custom_entries(
        self, custom_types: Collection[str], limit: int | None = None, *, ordered: bool = True
    ) -> list[Entry]:
        """``custom`` entries of ``custom_types``, by ``entry_custom_type_idx`` (never every custom entry)."""
        kinds = list(dict.fromkeys(custom_types))
        if not kinds or (limit is not None and limit <= 0):
            return []
        sql = _CUSTOM_SQL.format(
            custom_index=_index_hint("entry_custom_type_idx"),
            types=rows.in_list(len(kinds)),
            order=" ORDER BY entry_seq" if ordered else "",
            limit="" if limit is None else f" LIMIT {int(limit)}",
        )
        with connection.cursor() as cursor, gc_paused():
            cursor.execute(sql, [self.state.session_id, *kinds])
            return rows.decode_rows(cursor.fetchall())

    def entries_with_key(self, key: str) -> list[Entry]:
        """The entries whose key is ``key``, by ``entry_key_idx`` (``keyed_reads``):
        the rows the column matches (a collation that ignores case may match
        more), checked again once decoded."""
        with connection.cursor() as cursor, gc_paused():
            cursor.execute(_KEY_SQL.format(key_index=_index_hint("entry_key_idx")), [self.state.session_id, key])
            found = rows.decode_rows(cursor.fetchall())
        return [entry for entry in found if entry_keys.entry_key(entry) == key]

    def tool_results(
        self, tool_names: Collection[str], limit: int | None = None, *, ordered: bool = True
    ) -> list[Entry]:
        """``message`` entries naming one of ``tool_names``, by ``entry_tool_name_idx``
        (the generated ``tool_name`` column); never every message."""
        wanted = set(tool_names)
        keys = list(dict.fromkeys(name[:TOOL_NAME_LENGTH] for name in wanted))
        if not keys or (limit is not None and limit <= 0):
            return []
        # The column may match more than the names (a name cut to its length,
        # a collation that ignores case): rows are filtered here, and a LIMIT
        # that the filter left short is raised until the rows run out.
        take = limit
        while True:
            sql = _TOOL_SQL.format(
                tool_index=_index_hint("entry_tool_name_idx"),
                names=rows.in_list(len(keys)),
                order=" ORDER BY entry_seq" if ordered else "",
                limit="" if take is None else f" LIMIT {int(take)}",
            )
            with connection.cursor() as cursor, gc_paused():
                cursor.execute(sql, [self.state.session_id, *keys])
                fetched = cursor.fetchall()
            found = [entry for entry in rows.decode_rows(fetched) if keyed_reads.names_tool(entry, wanted)]
            if take is None or limit is None or len(found) >= limit or len(fetched) < take:
                return found if limit is None else found[:limit]
            take *= 4

    def ancestor_at(self, entry_id: str, depth: int) -> str | None:
        """``path_facts.ancestor_at`` in one statement: up by the rows' jumps
        where they do not overshoot, by parents elsewhere (O(log depth) rows)."""
        key = self.state.session_id
        with connection.cursor() as cursor:
            cursor.execute(_ANCESTOR_SQL, [key, entry_id, depth, key, depth, depth])
            found = cursor.fetchall()
        if not found or found[0][1] != depth or not found[0][2]:
            return None
        return str(found[0][0])

    def subtree(self, entry_id: str, limit: int | None = None) -> dict[str, str | None]:
        """``entry_id`` and every entry below it → its parent, in append order:
        walked down by parent in statements of ``WALK_STEPS`` levels at most
        (no more statements once more than ``limit`` were found)."""
        key = self.state.session_id
        found: dict[str, tuple[int, str | None]] = {}
        frontier = [entry_id]
        with connection.cursor() as cursor:
            while frontier:
                deeper: list[str] = []
                for chunk in rows.chunks(frontier, BY_ID_LIMIT):
                    sql = _SUBTREE_SQL.format(
                        ids=rows.in_list(len(chunk)), parent_index=_index_hint("entry_parent_idx")
                    )
                    cursor.execute(sql, [key, *chunk, key, WALK_STEPS])
                    for child, parent, seq, level in cursor.fetchall():
                        if level and child in found:  # pragma: no cover - a parent cycle in damaged rows
                            continue
                        if child not in found:
                            found[child] = (seq, parent)
                        if level == WALK_STEPS:
                            deeper.append(child)  # its children are not read yet
                frontier = deeper if limit is None or len(found) <= limit else []
        return {child: parent for child, (_, parent) in sorted(found.items(), key=lambda item: item[1][0])}

    def context_entries(self, leaf_entry_id: str) -> list[Entry] | None:
        """The entries the context at ``leaf_entry_id`` needs, read by key from
        the rows' path facts: a fixed number of queries at any size. ``None``
        (the whole path is read instead) for a streaming leaf or facts that
        cannot say."""
        key = self.state.session_id
        heads = _context_heads(key, leaf_entry_id)
        leaf = heads.get(leaf_entry_id)
        if leaf is None or leaf[2] != COMPLETED:
            return None

        def lookup(ids: Collection[str]) -> dict[str, tuple[Entry, PathFacts]]:
            # The heads hold every stored entry the leaf's facts can name.
            return {i: (rows.decode_row(heads[i][0]), heads[i][1]) for i in ids if i in heads}

        depth = leaf[1].depth
        return context_path(leaf_entry_id, leaf[1], lookup, lambda leaf_id, top: _segment(key, leaf_id, top, depth))


class MySQLWrite(MySQLView):
    """One session locked (its row, ``FOR UPDATE``) for this transaction."""

    def __init__(self, state: SessionState, leaf: _Leaf, row: meta.MetaRow, in_order: bool = False) -> None:
        super().__init__(state, row, in_order)
        self.leaf = leaf
        self.changed = False
        self.stored_in_order = in_order  # what the row says; ``in_order`` may turn False in this write

    def new_entry_id(self) -> str:
        return new_entry_id()  # made unique by ``insert`` against the unique constraint

    def _insert_one(self, entry: Entry, *, generated_id: bool, status: str) -> Entry:
        state, leaf = self.state, self.leaf
        depth = 0 if leaf.depth is None else leaf.depth + 1
        if entry.get("parentId") is not None and entry.get("parentId") != state.leaf_entry_id:
            # A parent the session does not hold (yet): stored before its parent (``copy_entry``).
            self.in_order = False
            self.changed = True
        # Only a session stored out of order can hold rows naming this entry as their parent already.
        adopting = not self.in_order and isinstance(entry.get("id"), str) and bool(self.child_ids(entry["id"]))
        for _ in range(ID_ATTEMPTS):
            try:
                _append(state.session_id, entry, entry_seq=state.entry_count + 1, depth=depth, status=status)
                break
            except IntegrityError:
                # The one expected cause: a generated id already in use.
                if not generated_id or entry["id"] not in StoredIds(state.session_id, [entry["id"]]):
                    raise
                taken, entry["id"] = entry["id"], new_entry_id()
                if entry.get("type") == "compaction" and entry.get("firstKeptEntryId") == taken:
                    entry["firstKeptEntryId"] = entry["id"]  # a retain-none compaction names itself
        else:  # pragma: no cover - 8 random 32-bit collisions in a row
            raise InvalidEntry(f"Could not find a free entry id in session {state.session_id}")
        if entry.get("parentId") is None or leaf.has_children:
            state.branch_count += 1  # a new root, or a sibling: one more tip
        if adopting:
            state.branch_count -= 1  # it has children already: not a tip
        if entry.get("type") == "compaction":
            state.compaction_count += 1
        state.entry_count += 1
        state.leaf_entry_id = entry["id"]
        self.leaf = _Leaf(depth, status, adopting)
        self.changed = True
        return entry

    def copied_before_target(self) -> None:
        """The entry being copied aims at one not stored (yet) (``copy_entry``;
        an append's target is checked to exist): the session is out of order."""
        self.in_order = False
        self.changed = True

    def insert(self, entry: Entry, *, generated_id: bool = False, line: bytes | None = None) -> Entry:
        stored = self._insert_one(entry, generated_id=generated_id, status=COMPLETED)
        if stored.get("parentId") is None and self.state.root_entry_id is None:
            self.state.root_entry_id = stored["id"]
        return stored

    def in_flight(self) -> Entry | None:
        entry_id = self.state.in_flight_entry_id
        return self.get(entry_id) if entry_id is not None else None

    def insert_in_flight(self, entry: Entry, *, generated_id: bool = False) -> Entry:
        stored = self._insert_one(entry, generated_id=generated_id, status=IN_FLIGHT)
        self.state.in_flight_entry_id = stored["id"]
        return stored

    def replace_in_flight(self, entry: Entry, *, complete: bool, line: bytes | None = None) -> None:
        state = self.state
        with connection.cursor() as cursor:
            cursor.execute(
                rows.UPDATE_IN_FLIGHT_SQL,
                rows.update_in_flight_params(
                    state.session_id, entry, status=COMPLETED if complete else IN_FLIGHT, in_flight_status=IN_FLIGHT
                ),
            )
            if cursor.rowcount != 1:  # pragma: no cover - the session lock makes this unreachable
                raise ImmutableEntry(
                    f"Entry {entry['id']} of session {state.session_id} is completed and cannot change"
                )
        if complete:
            self._store_facts(entry)
            state.in_flight_entry_id = None
            self.leaf.status = COMPLETED
            # A streaming root becomes the session's root when it is completed.
            if entry.get("parentId") is None and state.root_entry_id is None:
                state.root_entry_id = entry["id"]
            self.changed = True

    def _store_facts(self, entry: Entry) -> None:
        """A completed streaming entry's path facts, from its parent's row (the
        entry's kind may have changed while it streamed)."""
        key = self.state.session_id
        parent_id = entry.get("parentId")
        parent = _facts_and_entries(key, [parent_id]).get(parent_id) if isinstance(parent_id, str) else None
        facts = facts_for(entry, parent[1] if parent else None, parent_known=parent_id is None or parent is not None)
        with connection.cursor() as cursor:
            cursor.execute(rows.UPDATE_FACTS_SQL, [*rows.kind_fact_values(facts), key, entry["id"]])

    def discard_in_flight(self) -> Entry:
        """Delete the streaming row and undo what ``_insert_one`` counted for it."""
        state = self.state
        entry = self.in_flight()
        assert entry is not None  # the template checks it first
        with connection.cursor() as cursor:
            cursor.execute(_DISCARD_SQL, [state.session_id, entry["id"], IN_FLIGHT])
        state.in_flight_entry_id = None
        state.entry_count -= 1
        if entry.get("type") == "compaction":
            state.compaction_count -= 1
        parent_id = entry.get("parentId")
        self.set_leaf(parent_id if isinstance(parent_id, str) else None)
        # It was one more tip when it started a root or hung beside a sibling.
        if parent_id is None or self.leaf.has_children:
            state.branch_count -= 1
        self._skeleton = None
        return entry

    def set_leaf(self, entry_id: str | None) -> None:
        state = self.state
        if entry_id is None:
            self.leaf = _Leaf(None, None, bool(state.entry_count))
        else:
            with connection.cursor() as cursor:
                cursor.execute(_PLACE_SQL, [state.session_id, entry_id])
                found = cursor.fetchone()
            if found is None:
                raise EntryNotFound(f"Entry {entry_id} not found in session {state.session_id}")
            self.leaf = _Leaf(found[0], found[1], bool(found[2]))
        state.leaf_entry_id = entry_id
        self.changed = True

    def flush(self) -> None:
        """The session row as this write leaves it: one UPDATE."""
        if not self.changed:
            return
        state, leaf = self.state, self.leaf
        self.written_at = timezone.now()
        with connection.cursor() as cursor:
            cursor.execute(
                _UPDATE_SESSION_SQL,
                [
                    state.leaf_entry_id,
                    state.root_entry_id,
                    state.entry_count,
                    state.branch_count,
                    state.compaction_count,
                    leaf.depth if state.leaf_entry_id is not None else None,
                    leaf.status == IN_FLIGHT,
                    leaf.has_children,
                    state.first_message_preview,
                    connection.ops.adapt_datetimefield_value(self.written_at),
                    state.session_id,
                ],
            )
            if self.stored_in_order and not self.in_order:
                cursor.execute(_OUT_OF_ORDER_SQL, [state.session_id])
                self.stored_in_order = False


@dataclass
class _Encoded:
    """What ``create`` computes of copied entries, computed ahead (``prepare_copies``)."""

    stats: TreeStats
    depths: dict[str, int]
    row_facts: list[PathFacts]  # each entry's path facts, in order
    payloads: list[bytes] | None  # rows.payload_literals (None: not on MySQL/MariaDB)


class MySQLStorage:
    kind = KIND

    @contextmanager
    def read(self, session_id: str) -> Iterator[MySQLView]:
        """The session's row (one query: the leaf's status comes with it)."""
        state, _leaf, row, in_order = _read_state(session_id, for_update=False)
        yield MySQLView(state, row, in_order)

    def session(self, session_id: str) -> SessionTreeSession:
        return meta.read_row(session_id, provider=KIND).session()

    def header(self, session_id: str) -> dict[str, Any]:
        """The session's Pi header line (what a JSONL export starts with)."""
        row = meta.get_row(session_id, provider=KIND)
        if row.header:
            return dict(row.header)
        created = row.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z") if row.created_at else None
        return new_session_header(
            row.session_id, cwd=row.cwd or "", parent_session=row.parent_session_id, timestamp=created
        )

    def write(self, session_id: str, work: Callable[[MySQLWrite], T], *, before_commit: BeforeCommit | None) -> T:
        def attempt() -> T:
            txn = MySQLWrite(*_lock(session_id))
            result = work(txn)
            txn.flush()
            if before_commit is not None:
                before_commit(txn)
            return result

        return _atomic(attempt)

    def create(
        self,
        row_fields: dict[str, Any],
        header: dict[str, Any],
        entries: list[Entry],
        *,
        before_commit: Callable[[SessionTreeSession], None] | None,
    ) -> SessionTreeSession:
        ahead = entries.encoded if isinstance(entries, CheckedCopies) and entries.kind == KIND else None
        if isinstance(ahead, _Encoded):
            stats, depths, row_facts, payloads = ahead.stats, ahead.depths, ahead.row_facts, ahead.payloads
        else:
            stats, depths = tree_stats(entries), entry_depths(entries)
            row_facts, payloads = facts_in_order(entries), None
        leaf = entries[-1]["id"] if entries else None

        def work() -> SessionTreeSession:
            # The last entry in append order has no children: the row's leaf
            # cache is its depth, completed, childless.
            row = meta.create_row(
                provider=KIND,
                header=header,
                stats=stats,
                leaf_entry_id=leaf,
                leaf_depth=depths[leaf] if leaf is not None else None,
                # Each entry after its parent (the facts say: a parent not stored yet
                # is not exact) and after the entry it aims at.
                rows_in_order=all(facts.exact for facts in row_facts) and _targets_first(entries),
                **row_fields,
            )
            if entries:
                _insert(row.session_id, entries, first_seq=1, facts=row_facts, status=COMPLETED, payloads=payloads)
            session = meta.to_session_dict(row)
            if before_commit is not None:
                before_commit(session)
            return session

        return _atomic(work)

    def destroy(self, session_id: str, *, before_commit: Callable[[], None] | None) -> None:
        def work() -> None:
            meta.delete_row(meta.get_row(session_id, provider=KIND))
            if before_commit is not None:
                before_commit()

        _atomic(work)

    # --- port: maintenance -------------------------------------------------------------
    def scan(self, session_id: str) -> StoredScan:
        """The session's rows, decoded (rows hold no torn or malformed lines)."""
        with self.read(session_id) as view:
            recorded = view.row
            in_flight = view.state.in_flight_entry_id
            counts = MetaCounts(
                entry_count=recorded.entry_count,
                branch_count=recorded.branch_count,
                compaction_count=recorded.compaction_count,
                leaf_entry_id=None if in_flight is not None else recorded.leaf_entry_id,
            )
            return StoredScan(session_id=session_id, provider=KIND, counts=counts, entries=view.all_entries())

    def cut_torn_tail(
        self, session_id: str, *, before_commit: Callable[[TornTailCut], None] | None
    ) -> TornTailCut | None:
        """Rows have no torn lines: nothing to cut (``SessionNotFound`` for an unknown session)."""
        _read_state(session_id, for_update=False)
        return None

    # --- port: erase --------------------------------------------------------------------
    def erase(
        self, session_id: str, erasure: EntryErasure, *, before_commit: Callable[[ErasureDone], None] | None
    ) -> ErasureDone:
        """Rewrite the selected rows' payloads in the transaction that locks
        the session row, updates it (the first-message preview, its time)
        and runs ``before_commit``: all of it or nothing. Only completed rows
        are rewritten (an in-flight one is ``ImmutableEntry``)."""

        def attempt() -> ErasureDone:
            txn = MySQLWrite(*_lock(session_id))
            state = txn.state
            replacements = dict(erasure.select(txn))
            done = ErasureDone(session_id=session_id)
            if not replacements:
                return done
            if state.in_flight_entry_id in replacements:
                raise ImmutableEntry(
                    f"Entry {state.in_flight_entry_id} of session {session_id} is in flight: complete or abort it first"
                )
            try:
                found = {entry["id"]: entry for entry in txn.entries(list(replacements))}
            except KeyError as exc:
                raise EntryNotFound(f"Entry {exc.args[0]} not found in session {session_id}") from None
            with connection.cursor() as cursor:
                for entry_id, entry in replacements.items():
                    old = found.get(entry_id)
                    if old is None:  # pragma: no cover - txn.entries raises first
                        raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
                    cursor.execute(rows.ERASE_SQL, rows.erase_params(state.session_id, entry, status=COMPLETED))
                    if cursor.rowcount != 1:  # pragma: no cover - the session lock makes this unreachable
                        raise ImmutableEntry(f"Entry {entry_id} of session {session_id} could not be rewritten")
                    line = serialize_line(old).rstrip(b"\n")
                    done.erased.append(ErasedEntry(entry_id, hashlib.sha256(line).hexdigest(), entry))
            state.first_message_preview = _first_message_preview(state.session_id)
            txn.changed = True
            txn.flush()
            if before_commit is not None:
                before_commit(done)
            return done

        return _atomic(attempt)

    def recount(self, session_id: str) -> MetaRecount:
        with self.read(session_id) as view:
            return view.recount()

    def recompute_meta(self, session_id: str, *, before_commit: Callable[[MetaRecount], None] | None) -> MetaRecount:
        """The row's tree fields from its entries, in the locked unit; the leaf
        moves through ``set_leaf``, so its cached depth, status and children
        are read again from the leaf's row."""
        recounts: list[MetaRecount] = []

        def work(txn: MySQLWrite) -> None:
            recount = txn.recount()
            stored, state = recount.stored, txn.state
            state.entry_count, state.branch_count = stored.entry_count, stored.branch_count
            state.compaction_count, state.root_entry_id = stored.compaction_count, stored.root_entry_id
            txn.set_leaf(stored.leaf_entry_id)
            if stored.leaf_entry_id is not None and txn.leaf.status == IN_FLIGHT:
                state.in_flight_entry_id = stored.leaf_entry_id
            if state.first_message_preview is None:
                state.first_message_preview = _first_message_preview(state.session_id)
            with connection.cursor() as cursor:  # in order again only when every row's facts are exact
                cursor.execute(_IN_ORDER_SQL, [state.session_id, state.session_id, state.session_id])
            recounts[:] = [recount]

        def commit(_txn: StoredWrite) -> None:
            if before_commit is not None:
                before_commit(recounts[0])

        self.write(session_id, work, before_commit=commit)
        return recounts[0]


class MySQLSessionTreeProvider(TreeProvider):
    """The contract over ``MySQLStorage``."""

    kind = KIND
    joins_outer_transaction = True

    def __init__(self) -> None:
        self.storage: MySQLStorage = MySQLStorage()

    def prepare_copies(self, entries: list[Entry]) -> CheckedCopies:
        """Checked, and encoded as the SQL literals of their rows (MySQL/MariaDB only)."""
        copied = super().prepare_copies(entries)
        depths = entry_depths(copied)
        copied.encoded = _Encoded(tree_stats(copied), depths, facts_in_order(copied), rows.payload_literals(copied))
        return copied
