"""The search index: the text of every entry, in the database's own
full-text engine, kept by the write path of every storage.

One row per entry that holds text (``core.text.entry_text``; ids, times and
settings are not text) in ``SearchEntry``: session, entry id, type, role and
the text. SQLite indexes it with FTS5, MySQL/MariaDB with an InnoDB
``FULLTEXT`` index (migration 0014). Nothing outside ``providers/`` writes
or queries these tables: the provider template calls ``add_entries`` in the
same database transaction as the entries it stores (appends, several at
once, in-flight completions, forks' and imports' copies, a session created
with entries), ``remove_session`` in a hard delete's; the ``file`` storage
adds what a foreign writer (Pi itself) appended to a file, in the unit that
first sees it, and a file adopted where it lies. ``reindex_entries`` is the
one way to change rows of entries that were rewritten (an erase).

Searches (``search``) take the query's terms (``core.search.query_terms``)
and the session filters; hits come newest first.

The engines take a row into their inverted index as InnoDB does: the write
stores the row; InnoDB adds it to its full-text cache at commit, SQLite's
FTS5 index is brought up to the newest row (``catch_up``) before any
full-text read. Changing or deleting a row already in FTS5 updates it at
once (triggers), so a rewritten entry's old words are never found again.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, transaction

from sessiontree.core.errors import SearchTooBroad
from sessiontree.core.search import term_words
from sessiontree.core.text import entry_role, entry_text
from sessiontree.core.types import Entry
from sessiontree.models import AgentSession, SearchEntry

from .db_errors import read_retry

# At most this many characters of an entry's text are indexed (a tool's
# output can be megabytes); ``SESSIONTREE_SEARCH_MAX_TEXT`` overrides it.
DEFAULT_MAX_TEXT = 1_000_000
# A MySQL/MariaDB search statement is stopped after this many milliseconds
# (``SESSIONTREE_SEARCH_TIMEOUT_MS``; 0: never). InnoDB computes every match of
# a word before it can order them: a word in most entries of a large index
# would otherwise hold a worker for seconds.
DEFAULT_TIMEOUT_MS = 5000
# The servers' errors for a statement stopped by its time limit: MariaDB's
# max_statement_time (1969; 188, "interrupted", when it lands inside InnoDB's
# full-text search), MySQL's MAX_EXECUTION_TIME (3024).
STATEMENT_TIMEOUT_ERRORS = frozenset({188, 1969, 3024})
# MySQL/MariaDB (``_mysql_search``): how many of the newest rows a search
# reads first (about 10 ms), and up to how many rows the sessions a search
# names may hold for all of theirs to be read instead.
SCAN_WINDOW = 20_000
SESSION_SCAN_ROWS = 20_000
# Rows per INSERT statement, and bytes of text per statement (MySQL's packet limit).
BATCH_ROWS = 500
BATCH_BYTES = 4 * 1024 * 1024

FTS_TABLE = "neta_search_fts"
FTS_POSITION_TABLE = "neta_search_fts_position"
# InnoDB's default stop words (INFORMATION_SCHEMA.INNODB_FT_DEFAULT_STOPWORD):
# a required term made of these alone matches nothing, so it is left out.
INNODB_STOPWORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "are",
        "as",
        "at",
        "be",
        "by",
        "com",
        "de",
        "en",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "la",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "who",
        "will",
        "with",
        "und",
        "www",
    ]
)

_q = connection.ops.quote_name
TABLE = _q(SearchEntry._meta.db_table)
SESSIONS = _q(AgentSession._meta.db_table)
_COLUMNS = "session_id, entry_id, entry_type, role, text"


@dataclass(slots=True)
class IndexRow:
    """What the index keeps of one entry (built on every append: slots, not frozen)."""

    entry_id: str
    entry_type: str
    role: str | None
    text: str


@dataclass(frozen=True)
class SearchHit:
    """One entry a search found (``search_id``: its row, newest highest)."""

    search_id: int
    session_id: str
    entry_id: str
    entry_type: str
    role: str | None
    text: str


@dataclass(frozen=True)
class ScannedRow:
    """A row of the index as the classifiers read it."""

    search_id: int
    session_id: str
    entry_id: str
    text: str


def max_text() -> int:
    return int(getattr(settings, "SESSIONTREE_SEARCH_MAX_TEXT", DEFAULT_MAX_TEXT))


def timeout_ms() -> float:
    return max(0.0, float(getattr(settings, "SESSIONTREE_SEARCH_TIMEOUT_MS", DEFAULT_TIMEOUT_MS)))


def index_row(entry: Entry, *, limit: int | None = None) -> IndexRow | None:
    """The index row of ``entry`` (``None``: it holds no text)."""
    text = entry_text(entry)
    if not text:
        return None
    kind = entry.get("type")
    role = entry_role(entry)
    return IndexRow(
        str(entry["id"]),
        kind[:32] if isinstance(kind, str) else "",
        role[:32] if role is not None else None,
        text[: limit if limit is not None else max_text()],
    )


def index_rows(entries: Iterable[Entry]) -> list[IndexRow]:
    limit = max_text()
    rows = (index_row(entry, limit=limit) for entry in entries)
    return [row for row in rows if row is not None]


# --- writes (inside the caller's transaction) -------------------------------------------


@functools.cache
def _upsert_sql(vendor: str) -> str:
    """The upsert of one row for ``vendor`` (``upsert_sql()``: this process's)."""
    insert = f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s)"
    if vendor == "mysql":
        return (
            f"{insert} ON DUPLICATE KEY UPDATE entry_type = VALUES(entry_type), role = VALUES(role), "
            "text = VALUES(text)"
        )
    # SQLite and PostgreSQL spell an upsert alike.
    return (
        f"{insert} ON CONFLICT (session_id, entry_id) DO UPDATE SET entry_type = excluded.entry_type, "
        "role = excluded.role, text = excluded.text"
    )


@functools.cache
def upsert_sql() -> str:
    # The database of a process never changes; reading the connection proxy's
    # vendor costs more than the rest of building a row.
    return _upsert_sql(connection.vendor)


def _batches(params: list[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    size = 0
    for row in params:
        if batch and (len(batch) >= BATCH_ROWS or size + len(row[4]) > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += len(row[4])
    if batch:
        yield batch


@functools.cache
def _sqlite_upsert_sql() -> str:
    """The SQLite upsert in the DB-API's own parameter style (``?``)."""
    return _upsert_sql("sqlite").replace("%s", "?")


def _execute_one(sql: str, params: tuple[Any, ...]) -> None:
    """Run one row's upsert in the caller's transaction.

    On SQLite and MySQL/MariaDB, when nothing watches Django's cursors (no
    query log: DEBUG off and no ``CaptureQueriesContext``; no execute
    wrapper but the backend's own ``read_retry``, which only ever sends a
    lone ``SELECT`` again), the statement goes to the connection's DB-API
    object itself: the same connection and transaction, a failure turned
    into Django's (typed) error as its cursor would, without Django's cursor
    wrapper per append (on SQLite about a fifth of what the row costs an
    append; on MariaDB 300 → 190 µs, bench/bench_search_row.py --server).
    Otherwise, and on other databases, Django's cursor."""
    db = connections[DEFAULT_DB_ALIAS]
    raw = db.connection
    direct = raw is not None and db.vendor in ("sqlite", "mysql") and not db.queries_logged
    if direct:
        for wrapper in db.execute_wrappers:
            if wrapper is not read_retry:
                direct = False
                break
    if not direct:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return
    db.validate_no_broken_transaction()
    try:
        if db.vendor == "sqlite":
            raw.execute(_sqlite_upsert_sql(), params)
        else:
            # mysqlclient takes Django's SQL as it is (the same %s parameter style).
            with raw.cursor() as cursor:
                cursor.execute(sql, params)
    except Exception:
        with db.wrap_database_errors:
            raise


def _store(session_id: str, rows: Sequence[IndexRow]) -> None:
    if not rows:
        return
    sql = upsert_sql()
    if len(rows) == 1:
        row = rows[0]
        _execute_one(sql, (session_id, row.entry_id, row.entry_type, row.role, row.text))
        return
    params = [(session_id, row.entry_id, row.entry_type, row.role, row.text) for row in rows]
    with connection.cursor() as cursor:
        for batch in _batches(params):
            cursor.executemany(sql, batch)


def store_rows(session_id: str, rows: Sequence[IndexRow]) -> None:
    """Store rows built ahead (``index_rows``, outside the transaction)."""
    _store(session_id, rows)


def add_entries(session_id: str, entries: Iterable[Entry]) -> int:
    """Index ``entries`` of ``session_id`` (a row already there for an entry id
    is replaced); how many held text. Runs in the caller's transaction."""
    if isinstance(entries, list) and len(entries) == 1:
        # One entry (an append): its row straight to its statement.
        row = index_row(entries[0])
        if row is None:
            return 0
        _execute_one(upsert_sql(), (session_id, row.entry_id, row.entry_type, row.role, row.text))
        return 1
    rows = index_rows(entries)
    _store(session_id, rows)
    return len(rows)


def _delete_entries(session_id: str, entry_ids: Sequence[str]) -> None:
    with connection.cursor() as cursor:
        for start in range(0, len(entry_ids), BATCH_ROWS):
            chunk = entry_ids[start : start + BATCH_ROWS]
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE session_id = %s AND entry_id IN ({', '.join(['%s'] * len(chunk))})",
                [session_id, *chunk],
            )


def reindex_entries(session_id: str, entries: Iterable[Entry], *, purge: bool = False) -> dict[str, int]:
    """The index rows of ``entries`` of ``session_id`` made what the entries
    hold now: the one function to call after entries were rewritten in
    place (an erase), inside the rewrite's transaction. An entry left with
    text gets its row replaced (it keeps its place in the classifiers'
    order); one left without any loses its row, so the old text leaves the
    index. Returns ``{"updated": n, "removed": n}``.

    ``purge``: on SQLite also merge the FTS5 index (``optimize``), so the old
    words leave the engine's own structures now rather than at a later
    merge; on MySQL/MariaDB this cannot run inside a transaction: call
    ``optimize_index()`` after the commit (docs/moderation.md, "Search")."""
    listed = list(entries)
    rows = index_rows(listed)
    kept = {row.entry_id for row in rows}
    emptied = [str(entry["id"]) for entry in listed if str(entry["id"]) not in kept]
    _store(session_id, rows)
    if emptied:
        _delete_entries(session_id, emptied)
    if purge and connection.vendor == "sqlite":
        _optimize_sqlite()
    return {"updated": len(rows), "removed": len(emptied)}


def remove_session(session_id: str) -> None:
    """Drop every row of ``session_id`` (a hard delete, in its transaction)."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE session_id = %s", [session_id])


def indexed(session_id: str) -> dict[str, IndexRow]:
    """entry id → the row the index holds for it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT entry_id, entry_type, role, text FROM {TABLE} WHERE session_id = %s", [session_id])
        return {row[0]: IndexRow(*row) for row in cursor.fetchall()}


@dataclass(frozen=True)
class IndexChanges:
    """What bringing one session's rows up to date changes (or would)."""

    added: int
    updated: int
    removed: int

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def plan_session(session_id: str, entries: Iterable[Entry]) -> tuple[IndexChanges, list[IndexRow], list[str]]:
    """(counts, rows to store, entry ids to drop) that make the index hold
    exactly ``entries`` of ``session_id``."""
    have = indexed(session_id)
    wanted = {row.entry_id: row for row in index_rows(entries)}
    store = [row for entry_id, row in wanted.items() if have.get(entry_id) != row]
    drop = [entry_id for entry_id in have if entry_id not in wanted]
    added = sum(1 for row in store if row.entry_id not in have)
    return IndexChanges(added, len(store) - added, len(drop)), store, drop


def sync_session(session_id: str, entries: Iterable[Entry]) -> IndexChanges:
    """Make the index hold exactly ``entries`` of ``session_id`` (the build
    command, under the session's write lock)."""
    changes, store, drop = plan_session(session_id, entries)
    _store(session_id, store)
    if drop:
        _delete_entries(session_id, drop)
    return changes


def orphan_session_ids() -> list[str]:
    """Sessions the index holds rows of but that no longer exist."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT s.session_id FROM {TABLE} s LEFT JOIN {SESSIONS} a ON a.session_id = s.session_id "
            "WHERE a.session_id IS NULL"
        )
        return [row[0] for row in cursor.fetchall()]


def catch_up() -> int:
    """SQLite: add the rows above the FTS5 index's position to it (the rows
    appended since the last full-text read) and move the position; how many.
    Runs before every full-text read, in its own write transaction (or the
    caller's), so a search always sees every committed row. InnoDB keeps its
    own cache of new rows: nothing to do on MySQL/MariaDB."""
    if connection.vendor != "sqlite":
        return 0
    position_sql = f"SELECT position FROM {FTS_POSITION_TABLE} WHERE id = 1"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT ({position_sql}), (SELECT MAX(id) FROM {TABLE})")
        position, highest = cursor.fetchone()
        if highest is None or highest <= (position or 0):
            return 0
    with transaction.atomic(), connection.cursor() as cursor:
        # Again under the write lock: another process may have caught up meanwhile.
        cursor.execute(position_sql)
        position = cursor.fetchone()[0] or 0
        cursor.execute(
            f"INSERT INTO {FTS_TABLE}(rowid, text) SELECT id, text FROM {TABLE} WHERE id > %s ORDER BY id", [position]
        )
        added = cursor.rowcount
        cursor.execute(
            f"UPDATE {FTS_POSITION_TABLE} SET position = MAX(position, COALESCE((SELECT MAX(id) FROM {TABLE}), 0)) "
            "WHERE id = 1"
        )
    return int(added)


def _optimize_sqlite() -> None:
    catch_up()
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")


def optimize_index() -> str:
    """Merge the full-text index so deleted text leaves the engine's own
    structures: FTS5 ``optimize`` on SQLite, ``OPTIMIZE TABLE`` on
    MySQL/MariaDB (a table copy: writes to the index wait meanwhile; never
    inside a transaction). Returns what was run."""
    if connection.vendor == "sqlite":
        _optimize_sqlite()
        return "FTS5 optimize"
    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute(f"OPTIMIZE TABLE {TABLE}")
            cursor.fetchall()
        return "OPTIMIZE TABLE"
    return "nothing (no full-text engine on this database)"


# --- reads ---------------------------------------------------------------------------------


def fts5_query(terms: Sequence[str]) -> str:
    """FTS5's syntax for ``terms``: each a quoted string (a phrase of its
    words; nothing inside is an operator), all of them required."""
    return " ".join('"' + term.replace('"', '""') + '"' for term in terms)


@functools.cache
def _innodb_min_token() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@innodb_ft_min_token_size")
        found = cursor.fetchone()
    return int(found[0]) if found and found[0] is not None else 3


def innodb_query(terms: Sequence[str], *, min_token: int) -> str:
    """InnoDB boolean mode for ``terms``: each a required phrase (``+"…"``);
    a term whose words InnoDB does not index at all (shorter than
    ``innodb_ft_min_token_size``, or stop words) is left out, since InnoDB
    would then match nothing. ``""`` when no term is left."""
    kept = []
    for term in terms:
        words = term_words(term)
        if any(len(word) >= min_token and word.casefold() not in INNODB_STOPWORDS for word in words):
            kept.append('+"' + term.replace('"', " ") + '"')
    return " ".join(kept)


def _time_limited(sql: str, limit: float) -> str:
    """``sql`` (a SELECT) stopped after ``limit`` ms, in the server's own syntax."""
    if getattr(connection, "mysql_is_mariadb", False):
        # Seconds, to the microsecond.
        return f"SET STATEMENT max_statement_time={max(limit / 1000, 0.000001):.6f} FOR {sql}"
    # Whole milliseconds.
    return sql.replace("SELECT ", f"SELECT /*+ MAX_EXECUTION_TIME({max(1, round(limit))}) */ ", 1)


def _too_broad(error: DatabaseError) -> bool:
    code = error.args[0] if error.args else None
    return code in STATEMENT_TIMEOUT_ERRORS


@dataclass(frozen=True)
class SessionScope:
    """Which sessions a search looks in: the session list's filters, and
    whose sessions the searcher may see (``owner``: only theirs)."""

    session_ids: Sequence[str] | None = None
    user_id: str | None = None
    owner: str | None = None
    agent_id: int | None = None
    provider: str | None = None
    statuses: Sequence[str] | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.session_ids is not None:
            clauses.append(f"s.session_id IN ({', '.join(['%s'] * len(self.session_ids))})")
            params += list(self.session_ids)
        for column, value in (("user_id", self.user_id), ("user_id", self.owner), ("provider", self.provider)):
            if value is not None:
                clauses.append(f"a.{column} = %s")
                params.append(value)
        if self.agent_id is not None:
            clauses.append("a.agent_id = %s")
            params.append(self.agent_id)
        if self.statuses is not None:
            clauses.append(f"a.status IN ({', '.join(['%s'] * len(self.statuses))})")
            params += list(self.statuses)
        return clauses, params


_HIT_COLUMNS = "s.id, s.session_id, s.entry_id, s.entry_type, s.role"


def _sqlite_search(terms: Sequence[str], scope: SessionScope, clauses: list[str], params: list[Any], limit: int) -> Any:
    catch_up()
    match = fts5_query(terms)
    if scope.session_ids is not None:
        # A few sessions: their rows first (by the session index), each
        # checked against FTS5 by rowid; scanning a common word's matches
        # newest first for one session's would read most of them.
        sql = (
            f"SELECT {_HIT_COLUMNS} FROM {TABLE} s "
            f"CROSS JOIN {FTS_TABLE} f JOIN {SESSIONS} a ON a.session_id = s.session_id "
            f"WHERE f.rowid = s.id AND {FTS_TABLE} MATCH %s"
        )
        order = "s.id"
    else:
        sql = (
            f"SELECT {_HIT_COLUMNS} FROM {FTS_TABLE} f "
            f"JOIN {TABLE} s ON s.id = f.rowid JOIN {SESSIONS} a ON a.session_id = s.session_id "
            f"WHERE {FTS_TABLE} MATCH %s"
        )
        # Newest first: FTS5 hands out matches in rowid order itself (no
        # sort, and the LIMIT stops the scan); the rowid is the row's id.
        order = "f.rowid"
    sql += "".join(f" AND {clause}" for clause in clauses) + f" ORDER BY {order} DESC LIMIT %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, *params, limit])
        return cursor.fetchall()


class _OutOfTime(Exception):
    """A MySQL/MariaDB search statement stopped by its time limit."""


def _run_limited(sql: str, params: list[Any], limit_ms: float | None) -> Any:
    """Run ``sql`` with at most ``limit_ms`` (``None``: no limit)."""
    if limit_ms is not None:
        if limit_ms <= 0:
            raise _OutOfTime
        sql = _time_limited(sql, limit_ms)
    with connection.cursor() as cursor:
        try:
            cursor.execute(sql, params)
        except DatabaseError as error:
            if _too_broad(error):
                raise _OutOfTime from error
            raise
        return cursor.fetchall()


def _mysql_search(
    match: str, scope: SessionScope, clauses: list[str], params: list[Any], limit: int, plan: str | None
) -> Any:
    """InnoDB answers a boolean ``MATCH`` in ``WHERE`` by computing every
    match, then fetching each one to order them: quick for a selective word,
    5 to 15 µs a match for a common one. A ``MATCH`` in the select list is
    instead looked up per row (in the same computed set), so a scan of the
    rows newest first stops after ``limit`` hits: quick for a common word,
    a read of every row for a rare one. So a search reads the newest
    ``SCAN_WINDOW`` rows first (or, when it names sessions holding at most
    ``SESSION_SCAN_ROWS`` rows, all of theirs); the hits there are the
    newest, and when there are fewer than ``limit``, the ``WHERE`` plan
    adds the older ones (a word rare among the newest rows is rarely common
    among the rest). Both plans give the same rows
    (tests/providers/test_search_plans.py); ``plan`` forces one."""
    where = "".join(f" AND {clause}" for clause in clauses)

    def by_match(upto: int | None, count: int) -> tuple[str, list[Any]]:
        bound = " AND s.id <= %s" if upto is not None else ""
        sql = (
            f"SELECT {_HIT_COLUMNS} FROM {TABLE} s JOIN {SESSIONS} a ON a.session_id = s.session_id "
            f"WHERE MATCH (s.text) AGAINST (%s IN BOOLEAN MODE){bound}{where} ORDER BY s.id DESC LIMIT %s"
        )
        return sql, [match, *([upto] if upto is not None else []), *params, count]

    def by_scan(after: int | None) -> tuple[str, list[Any]]:
        # STRAIGHT_JOIN: the search rows first, read newest first by their
        # primary key (or by the session index when sessions are named); a
        # MATCH in the select list is a per-row lookup, and boolean mode
        # gives every match a relevance above 0 (InnoDB's smallest is
        # positive, also for a word in every row) and every other row 0.
        bound = " AND s.id > %s" if after is not None else ""
        sql = (
            f"SELECT STRAIGHT_JOIN {_HIT_COLUMNS}, MATCH (s.text) AGAINST (%s IN BOOLEAN MODE) AS relevance "
            f"FROM {TABLE} s JOIN {SESSIONS} a ON a.session_id = s.session_id WHERE TRUE{bound}{where} "
            "HAVING relevance > 0 ORDER BY s.id DESC LIMIT %s"
        )
        return sql, [match, *([after] if after is not None else []), *params, limit]

    total = timeout_ms() or None
    started = time.monotonic()

    def left() -> float | None:
        return None if total is None else total - (time.monotonic() - started) * 1000

    def hits(rows: Any) -> list[Any]:
        return [row[:5] for row in rows]

    if plan == "match":
        return _run_limited(*by_match(None, limit), total)
    if plan == "scan":
        return hits(_run_limited(*by_scan(None), total))
    if scope.session_ids is not None:
        held = _run_limited(
            f"SELECT COUNT(*) FROM {TABLE} WHERE session_id IN ({', '.join(['%s'] * len(scope.session_ids))})",
            list(scope.session_ids),
            left(),
        )[0][0]
        if held <= SESSION_SCAN_ROWS:
            return hits(_run_limited(*by_scan(None), left()))
    highest = _run_limited(f"SELECT MAX(id) FROM {TABLE}", [], left())[0][0] or 0
    window = highest - SCAN_WINDOW
    recent = hits(_run_limited(*by_scan(window), left()))
    if len(recent) >= limit or window <= 0:
        return recent
    return recent + list(_run_limited(*by_match(window, limit - len(recent)), left()))


def search(terms: Sequence[str], scope: SessionScope, *, limit: int, plan: str | None = None) -> list[SearchHit]:
    """Entries whose text holds every term, in the sessions ``scope`` names,
    newest first, at most ``limit``. ``plan`` (MySQL/MariaDB, for tests and
    benchmarks): ``"match"`` or ``"scan"`` forces one of ``_mysql_search``'s
    two ways; the default picks by running."""
    if not terms or limit < 1 or (scope.session_ids is not None and not scope.session_ids):
        return []
    clauses, params = scope.where()
    vendor = connection.vendor
    if vendor == "sqlite":
        found = _sqlite_search(terms, scope, clauses, params, limit)
    elif vendor == "mysql":
        match = innodb_query(terms, min_token=_innodb_min_token())
        if not match:
            return []
        try:
            found = _mysql_search(match, scope, clauses, params, limit, plan)
        except _OutOfTime as error:
            raise SearchTooBroad(
                f"the search {' '.join(terms)!r} matches too many entries to answer within "
                f"{timeout_ms():g} ms: add a word, or search fewer sessions (a user, an agent, a session)"
            ) from error
    else:  # pragma: no cover - the project runs on SQLite and MySQL/MariaDB
        return []
    if not found:
        return []
    with connection.cursor() as cursor:
        # The texts in a second statement: a sort never carries them.
        ids = [row[0] for row in found]
        cursor.execute(f"SELECT id, text FROM {TABLE} WHERE id IN ({', '.join(['%s'] * len(ids))})", ids)
        texts = dict(cursor.fetchall())
    return [SearchHit(row[0], row[1], row[2], row[3], row[4], texts.get(row[0], "")) for row in found]


def ids_commit_in_order() -> bool:
    """Whether index rows become visible in the order of their ids. SQLite
    has one writer at a time, so yes: an id missing below the highest one
    seen is a deleted row for good. InnoDB hands out ids before commit: a
    lower id may commit after a higher one (the classifiers keep such gaps)."""
    return connection.vendor == "sqlite"


def rows_after(position: int, gaps: Sequence[tuple[int, int]], *, limit: int) -> list[ScannedRow]:
    """Index rows with an id above ``position`` or inside one of the ``gaps``
    (inclusive ranges), in id order, at most ``limit``: what a classifier has
    not read yet."""
    clauses = ["id > %s"]
    params: list[Any] = [position]
    for low, high in gaps:
        clauses.append("id BETWEEN %s AND %s")
        params += [low, high]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, session_id, entry_id, text FROM {TABLE} WHERE {' OR '.join(clauses)} ORDER BY id LIMIT %s",
            [*params, limit],
        )
        return [ScannedRow(*row) for row in cursor.fetchall()]


def count_after(position: int, gaps: Sequence[tuple[int, int]]) -> int:
    """How many rows ``rows_after`` has left to give (a progress bar's total)."""
    clauses = ["id > %s"]
    params: list[Any] = [position]
    for low, high in gaps:
        clauses.append("id BETWEEN %s AND %s")
        params += [low, high]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE {' OR '.join(clauses)}", params)
        return int(cursor.fetchone()[0])


__all__ = [
    "IndexChanges",
    "IndexRow",
    "ScannedRow",
    "SearchHit",
    "SessionScope",
    "add_entries",
    "catch_up",
    "count_after",
    "ids_commit_in_order",
    "index_row",
    "index_rows",
    "optimize_index",
    "orphan_session_ids",
    "plan_session",
    "reindex_entries",
    "remove_session",
    "rows_after",
    "search",
    "store_rows",
    "sync_session",
]
