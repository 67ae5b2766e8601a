"""Entry dict ↔ ``AgentSessionEntry`` row: the ``mysql`` provider's codec and SQL.

Pi's known keys of each entry type go to typed columns when the value fits
the column (a string within ``max_length``, a bool, a 64-bit integer, any
JSON for JSON columns); every other key goes to ``extra["fields"]``.
``extra["keys"]`` lists the entry's keys in order, so a decoded entry has the
same keys, in the same order, as the one written: an absent key stays absent
and a ``null`` stays ``null`` (a cleared label has no ``"label"`` key).

JSON is written and read with orjson through plain SQL: Django's JSONField
round trip (``json.dumps``/``json.loads`` per value, a model instance per row)
costs several times more on large sessions, and orjson writes what the file
provider writes (NaN → ``null``, compact, key order kept).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson
from django.db import connection, models
from django.utils import timezone

from sessiontree.core import entry_keys
from sessiontree.core.errors import InvalidEntry
from sessiontree.core.path_facts import PathFacts, sets_model, sets_thinking
from sessiontree.core.types import Entry
from sessiontree.models import AgentSessionEntry

JSON, TEXT, CHAR, INT, BOOL = "json", "text", "char", "int", "bool"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Rows per INSERT / ids per IN list: bounded statements on every backend.
CHUNK = 1000

# Keys every entry may carry, whatever its type.
COMMON_KEY_COLUMNS: dict[str, str] = {
    "type": "type",
    "id": "entry_id",
    "parentId": "parent_entry_id",
    "timestamp": "timestamp",
    "sourceRuntime": "source_runtime",
}
# Pi's keys of each entry type (the plan's typed columns).
TYPE_KEY_COLUMNS: dict[str, dict[str, str]] = {
    "message": {"message": "message"},
    "thinking_level_change": {"thinkingLevel": "thinking_level"},
    "model_change": {"provider": "provider", "modelId": "model_id"},
    "compaction": {
        "summary": "summary",
        "firstKeptEntryId": "first_kept_entry_id",
        "tokensBefore": "tokens_before",
        "details": "details",
        "fromHook": "from_hook",
    },
    "branch_summary": {"fromId": "from_id", "summary": "summary", "details": "details", "fromHook": "from_hook"},
    "custom": {"customType": "custom_type", "data": "data"},
    "custom_message": {"customType": "custom_type", "content": "content", "display": "display", "details": "details"},
    "label": {"targetId": "target_entry_id", "label": "label"},
    "session_info": {"name": "name"},
    # Pi 1.x: the ids and names worth querying get columns; ``replacement``,
    # ``kind`` and ``usage`` stay in ``extra`` (lossless either way).
    "context_edit": {"targetId": "target_entry_id"},
    "usage": {"provider": "provider", "model": "model_id"},
}
_KEY_COLUMNS_BY_TYPE: dict[Any, dict[str, str]] = {
    entry_type: {**COMMON_KEY_COLUMNS, **columns} for entry_type, columns in TYPE_KEY_COLUMNS.items()
}


def key_columns(entry_type: Any) -> dict[str, str]:
    """Entry key → column for an entry of ``entry_type`` (unknown types: the common keys only)."""
    if isinstance(entry_type, str):
        return _KEY_COLUMNS_BY_TYPE.get(entry_type, COMMON_KEY_COLUMNS)
    return COMMON_KEY_COLUMNS


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    null: bool
    max_length: int | None = None


def _column(name: str) -> Column:
    field = AgentSessionEntry._meta.get_field(name)
    if isinstance(field, models.JSONField):
        kind = JSON
    elif isinstance(field, models.BooleanField):
        kind = BOOL
    elif isinstance(field, models.IntegerField):
        kind = INT
    elif isinstance(field, models.CharField):
        kind = CHAR
    else:
        kind = TEXT
    return Column(name, kind, field.null, getattr(field, "max_length", None))


# The payload columns, in SELECT order; ``extra`` is last.
PAYLOAD_COLUMN_NAMES: tuple[str, ...] = tuple(
    dict.fromkeys(
        [*COMMON_KEY_COLUMNS.values(), *(c for columns in TYPE_KEY_COLUMNS.values() for c in columns.values())]
    )
)
COLUMNS: dict[str, Column] = {name: _column(name) for name in PAYLOAD_COLUMN_NAMES}
COLUMN_INDEX: dict[str, int] = {name: i for i, name in enumerate(PAYLOAD_COLUMN_NAMES)}
EXTRA_INDEX = len(PAYLOAD_COLUMN_NAMES)
# Written after ``extra`` with the payload (and rewritten with it), never read
# back into the entry: its key (``core/entry_keys.py``), for reads by key.
KEY_COLUMN = "entry_key"


def _fits(column: Column, value: Any) -> bool:
    if value is None:
        return column.null
    kind = column.kind
    if kind == JSON:
        return True
    if kind in (CHAR, TEXT):
        return isinstance(value, str) and (column.max_length is None or len(value) <= column.max_length)
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
    return isinstance(value, bool)


def _dump(value: Any, entry_id: Any, key: str) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise InvalidEntry(f"Entry {entry_id}: field {key!r} cannot be stored as JSON ({exc})") from None


def _check_text(value: str, entry_id: Any, key: str) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidEntry(f"Entry {entry_id}: field {key!r} is not valid Unicode text") from None


def encode_entry(entry: Entry) -> dict[str, Any]:
    """Column → database value for ``entry`` (JSON columns as JSON text), ``extra`` included."""
    entry_id = entry.get("id")
    mapping = key_columns(entry.get("type"))
    values: dict[str, Any] = dict.fromkeys(PAYLOAD_COLUMN_NAMES)
    values["type"] = ""
    values["timestamp"] = ""
    fields: dict[str, Any] = {}
    for key, value in entry.items():
        name = mapping.get(key)
        column = COLUMNS[name] if name is not None else None
        if name is None or column is None or not _fits(column, value):
            fields[key] = value
            continue
        if column.kind == JSON:
            values[name] = None if value is None else _dump(value, entry_id, key)
        else:
            if isinstance(value, str):
                _check_text(value, entry_id, key)
            values[name] = value
    values["extra"] = _dump({"keys": list(entry), "fields": fields}, entry_id, "extra")
    values[KEY_COLUMN] = entry_keys.entry_key(entry)
    return values


_CONVERTERS: dict[str, Callable[[Any], Any] | None] = {
    JSON: orjson.loads,
    BOOL: bool,
    INT: None,
    CHAR: None,
    TEXT: None,
}
TYPE_INDEX = COLUMN_INDEX["type"]

# Decoding plans: (key, column index, converter) per key of an entry. Most
# rows share one of a few ``extra`` texts (same keys, no unknown fields), so
# the plan of each (extra text, type) is worked out once per process.
Plan = tuple[tuple[str, int, Callable[[Any], Any] | None], ...]
_plans: dict[tuple[Any, Any], Plan] = {}
MAX_PLANS = 1024


def decode_row(row: Sequence[Any]) -> Entry:
    """The entry of a row selected with ``SELECT_PAYLOAD``."""
    raw_extra = row[EXTRA_INDEX]
    plan = _plans.get((raw_extra, row[TYPE_INDEX]))
    if plan is None:
        return _decode_and_plan(row)
    entry: Entry = {}
    for key, index, convert in plan:
        value = row[index]
        entry[key] = value if convert is None or value is None else convert(value)
    return entry


def _decode_and_plan(row: Sequence[Any]) -> Entry:
    raw_extra = row[EXTRA_INDEX]
    extra = orjson.loads(raw_extra) if raw_extra else {}
    fields: dict[str, Any] = extra.get("fields") or {}
    entry_type = fields["type"] if "type" in fields else row[TYPE_INDEX]
    mapping = key_columns(entry_type)
    keys = extra.get("keys")
    if keys is None:
        # A row written without this codec (e.g. by hand): Pi's base keys,
        # then every typed column that holds a value.
        keys = ["type", "id", "parentId", "timestamp"]
        keys += [k for k, name in mapping.items() if k not in keys and row[COLUMN_INDEX[name]] is not None]
    entry: Entry = {}
    for key in keys:
        if key in fields:
            entry[key] = fields[key]
        else:
            column = COLUMNS[mapping[key]]
            value = row[COLUMN_INDEX[column.name]]
            convert = _CONVERTERS[column.kind]
            entry[key] = value if convert is None or value is None else convert(value)
    if not fields and raw_extra:
        # Values from ``fields`` are never cached: each entry gets its own objects.
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        _plans[(raw_extra, row[TYPE_INDEX])] = tuple(
            (key, COLUMN_INDEX[mapping[key]], _CONVERTERS[COLUMNS[mapping[key]].kind]) for key in keys
        )
    return entry


# --- SQL ---------------------------------------------------------------------

quote = connection.ops.quote_name
TABLE = quote(AgentSessionEntry._meta.db_table)
SESSION_COLUMN = quote(AgentSessionEntry._meta.get_field("session").column)
PAYLOAD_SQL = ", ".join(quote(name) for name in (*PAYLOAD_COLUMN_NAMES, "extra"))

SELECT_PAYLOAD = f"SELECT {PAYLOAD_SQL} FROM {TABLE}"
# The path facts of a row (core/path_facts.py; ``depth`` is the first of them).
# The facts an entry's own kind may set (a streaming entry's are written again
# when it completes), then its jump, which only its ancestors decide.
KIND_FACT_COLUMN_NAMES: tuple[str, ...] = ("path_compaction_id", "path_model_id", "path_thinking_id", "path_exact")
FACT_COLUMN_NAMES: tuple[str, ...] = (*KIND_FACT_COLUMN_NAMES, "path_jump_id", "path_jump_depth")
SELECT_FACTS = ", ".join(quote(name) for name in ("entry_id", "depth", *FACT_COLUMN_NAMES))
INSERT_COLUMN_NAMES: tuple[str, ...] = (
    "entry_seq",
    "depth",
    *FACT_COLUMN_NAMES,
    "status",
    "created_at",
    *PAYLOAD_COLUMN_NAMES,
    "extra",
    KEY_COLUMN,
)
_INSERT_INTO = f"INSERT INTO {TABLE} ({SESSION_COLUMN}, {', '.join(quote(n) for n in INSERT_COLUMN_NAMES)}) "
INSERT_SQL = f"{_INSERT_INTO}VALUES ({', '.join(['%s'] * (len(INSERT_COLUMN_NAMES) + 1))})"
# An append: the row's path facts come from its parent's row in the same
# statement (the entry's own part is given: its id where it is a
# compaction, sets the model or the thinking level; else the parent's).
# Its jump (``path_facts.jump_for``) from the parent's and the parent's
# jump's row (``j``): a root (no parent row) jumps to itself.
_FAR = (
    f"j.{quote('entry_id')} IS NOT NULL AND "
    f"p.{quote('depth')} + j.{quote('path_jump_depth')} = 2 * p.{quote('path_jump_depth')}"
)
APPEND_SQL = (
    f"{_INSERT_INTO}SELECT %s, %s, %s, COALESCE(%s, p.{quote('path_compaction_id')}), "
    f"COALESCE(%s, p.{quote('path_model_id')}), COALESCE(%s, p.{quote('path_thinking_id')}), "
    f"CASE WHEN %s THEN %s ELSE COALESCE(p.{quote('path_exact')}, %s) END, "
    f"CASE WHEN p.{quote('entry_id')} IS NULL THEN %s WHEN {_FAR} THEN j.{quote('path_jump_id')} "
    f"ELSE p.{quote('entry_id')} END, "
    f"CASE WHEN p.{quote('entry_id')} IS NULL THEN 0 WHEN {_FAR} THEN j.{quote('path_jump_depth')} "
    f"ELSE p.{quote('depth')} END, "
    f"{', '.join(['%s'] * (len(INSERT_COLUMN_NAMES) - 8))} "
    f"FROM (SELECT 1 AS one) o LEFT JOIN {TABLE} p "
    f"ON p.{SESSION_COLUMN} = %s AND p.{quote('entry_id')} = %s "
    f"LEFT JOIN {TABLE} j ON j.{SESSION_COLUMN} = p.{SESSION_COLUMN} "
    f"AND j.{quote('entry_id')} = p.{quote('path_jump_id')}"
)
# The facts of a completed streaming entry (its kind may have changed while it streamed).
UPDATE_FACTS_SQL = (
    f"UPDATE {TABLE} SET {', '.join(f'{quote(n)} = %s' for n in KIND_FACT_COLUMN_NAMES)} "
    f"WHERE {SESSION_COLUMN} = %s AND {quote('entry_id')} = %s"
)
_UPDATE_COLUMN_NAMES: tuple[str, ...] = (*PAYLOAD_COLUMN_NAMES, "extra", KEY_COLUMN, "status")
# The only UPDATE of an entry: its WHERE clause refuses completed rows.
UPDATE_IN_FLIGHT_SQL = (
    f"UPDATE {TABLE} SET {', '.join(f'{quote(n)} = %s' for n in _UPDATE_COLUMN_NAMES)} "
    f"WHERE {SESSION_COLUMN} = %s AND {quote('entry_id')} = %s AND {quote('status')} = %s"
)


# An erase (the audited exception to immutable rows): a completed row's
# payload rewritten in place, its id, parent and place kept.
ERASE_SQL = (
    f"UPDATE {TABLE} SET {', '.join(f'{quote(n)} = %s' for n in (*PAYLOAD_COLUMN_NAMES, 'extra', KEY_COLUMN))} "
    f"WHERE {SESSION_COLUMN} = %s AND {quote('entry_id')} = %s AND {quote('status')} = %s"
)

_payload_values = itemgetter(*PAYLOAD_COLUMN_NAMES, "extra", KEY_COLUMN)


def kind_fact_values(facts: PathFacts) -> tuple[Any, ...]:
    """``KIND_FACT_COLUMN_NAMES``' values of a row with ``facts``."""
    return facts.compaction_id, facts.model_id, facts.thinking_id, facts.exact


def fact_values(facts: PathFacts) -> tuple[Any, ...]:
    """``FACT_COLUMN_NAMES``' values of a row with ``facts``."""
    return facts.compaction_id, facts.model_id, facts.thinking_id, facts.exact, facts.jump_id, facts.jump_depth


def row_facts(row: Sequence[Any]) -> tuple[str, PathFacts]:
    """(entry id, facts) of a row selected with ``SELECT_FACTS`` (a row
    without a jump, written before jumps were stored, jumps to its parent:
    ``ancestor_at`` then steps by parents)."""
    return row[0], PathFacts(
        row[1], row[2], row[3], row[4], bool(row[5]), row[6], row[7] if row[7] is not None else row[1]
    )


def insert_params(
    session_key: str, entry: Entry, *, entry_seq: int, facts: PathFacts, status: str, created_at: Any
) -> list[Any]:
    return [
        session_key,
        entry_seq,
        facts.depth,
        *fact_values(facts),
        status,
        created_at,
        *_payload_values(encode_entry(entry)),
    ]


def append_params(
    session_key: str, entry: Entry, *, entry_seq: int, depth: int, status: str, created_at: Any
) -> list[Any]:
    """``APPEND_SQL``'s parameters: ``entry`` hangs from its ``parentId`` (the
    leaf, or ``None``), whose row gives the facts the entry does not set."""
    entry_id = entry["id"]
    parent_id = entry.get("parentId")
    return [
        session_key,
        entry_seq,
        depth,
        entry_id if entry.get("type") == "compaction" else None,
        entry_id if sets_model(entry) else None,
        entry_id if sets_thinking(entry) else None,
        parent_id is None,
        True,
        False,
        entry_id,
        status,
        created_at,
        *_payload_values(encode_entry(entry)),
        session_key,
        parent_id,
    ]


# A multi-row INSERT stays below this many bytes (MariaDB's packet limit is 16 MiB by default).
MAX_STATEMENT_BYTES = 1024 * 1024
_INSERT_PREFIX = INSERT_SQL.split(" VALUES ", 1)[0].encode() + b" VALUES "


class _NotInlinable(Exception):
    """A value ``insert_statements`` does not inline (the caller falls back)."""


def _inline(value: Any) -> bytes:  # pragma: no cover - only the types above reach the database
    raise _NotInlinable


def _row_literal(values: Iterable[Any], literal: Callable[[bytes], bytes]) -> bytes:
    """``values`` as SQL literals joined by commas (text escaped by ``literal``)."""
    return b",".join(
        [
            b"NULL"
            if value is None
            else literal(value.encode())
            if value.__class__ is str
            else (b"1" if value else b"0")
            if value.__class__ is bool
            else b"%d" % value
            if value.__class__ is int
            else _inline(value)
            for value in values
        ]
    )


def _literal_function() -> Callable[[bytes], bytes] | None:
    """The MySQL client library's escaping for this thread's connection
    (its character set and SQL mode), or ``None`` off MySQL/MariaDB."""
    if connection.vendor != "mysql":
        return None
    connection.ensure_connection()
    literal: Callable[[bytes], bytes] = connection.connection.string_literal
    return literal


def payload_literals(entries: Iterable[Entry]) -> list[bytes] | None:
    """Each entry's payload columns (``encode_entry``: ``extra``, then its key) as
    escaped SQL literals, the tail of its row in ``insert_statements``: the
    expensive part of a bulk INSERT, which can be done before the write's
    transaction (even in another thread: the escaping is that thread's own
    connection's, on the same server and settings). ``None`` where
    ``insert_statements`` would be."""
    literal = _literal_function()
    if literal is None:
        return None
    empty = _empty_literals(literal)
    try:
        return [_payload_literal(entry, literal, empty) for entry in entries]
    except _NotInlinable:  # a str or int subclass (never from a parsed file)
        return None


# Per entry type: key → (column index, column kind, nullable, max length) for its typed columns.
_LITERAL_PLANS: dict[Any, dict[str, tuple[int, str, bool, int | None]]] = {}


def _empty_literals(literal: Callable[[bytes], bytes]) -> tuple[bytes, ...]:
    """A row with every payload column empty: NULL, but '' for type and timestamp (as encode_entry)."""
    blank = literal(b"")
    return tuple(blank if name in ("type", "timestamp") else b"NULL" for name in (*PAYLOAD_COLUMN_NAMES, "extra"))


def _literal_plan(entry_type: Any) -> dict[str, tuple[int, str, bool, int | None]]:
    key = entry_type if isinstance(entry_type, str) and entry_type in _KEY_COLUMNS_BY_TYPE else None
    plan = _LITERAL_PLANS.get(key)
    if plan is None:
        plan = {
            k: (COLUMN_INDEX[name], COLUMNS[name].kind, COLUMNS[name].null, COLUMNS[name].max_length)
            for k, name in key_columns(entry_type).items()
        }
        _LITERAL_PLANS[key] = plan
    return plan


def _payload_literal(entry: Entry, literal: Callable[[bytes], bytes], empty: tuple[bytes, ...] | None = None) -> bytes:
    """``_row_literal(_payload_values(encode_entry(entry)))`` in one pass (the
    payload columns, ``extra``, the entry's key): the same columns, values,
    checks and errors (in the same order), without the
    intermediate dict and text (JSON goes from orjson's bytes to the literal).
    Raises ``_NotInlinable`` for a value of a subclass of str or int."""
    entry_id = entry.get("id")
    entry_type = entry.get("type")
    plan = _LITERAL_PLANS.get(entry_type) if entry_type.__class__ is str else None
    if plan is None:
        plan = _literal_plan(entry_type)
    out = list(empty if empty is not None else _empty_literals(literal))
    fields: dict[str, Any] = {}
    for key, value in entry.items():
        spec = plan.get(key)
        if spec is None:
            fields[key] = value
            continue
        index, kind, null, max_length = spec
        if value is None:
            if not null:
                fields[key] = value
            elif kind != JSON:
                out[index] = b"NULL"
            continue  # a JSON column's NULL: SQL NULL, as encode_entry
        if kind == JSON:
            try:
                out[index] = literal(orjson.dumps(value))
            except (TypeError, orjson.JSONEncodeError) as exc:
                raise InvalidEntry(f"Entry {entry_id}: field {key!r} cannot be stored as JSON ({exc})") from None
        elif kind in (CHAR, TEXT):
            if not isinstance(value, str) or (max_length is not None and len(value) > max_length):
                fields[key] = value
                continue
            if value.__class__ is not str:
                raise _NotInlinable
            try:
                out[index] = literal(value.encode())
            except UnicodeEncodeError:
                raise InvalidEntry(f"Entry {entry_id}: field {key!r} is not valid Unicode text") from None
        elif kind == INT:
            if not isinstance(value, int) or isinstance(value, bool) or not INT64_MIN <= value <= INT64_MAX:
                fields[key] = value
                continue
            if value.__class__ is not int:
                raise _NotInlinable
            out[index] = b"%d" % value
        elif isinstance(value, bool):
            out[index] = b"1" if value else b"0"
        else:
            fields[key] = value
    try:
        out[EXTRA_INDEX] = literal(orjson.dumps({"keys": list(entry), "fields": fields}))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise InvalidEntry(f"Entry {entry_id}: field 'extra' cannot be stored as JSON ({exc})") from None
    found = entry_keys.entry_key(entry)
    out.append(b"NULL" if found is None else literal(found.encode()))
    return b",".join(out)


def insert_statements(rows_params: Sequence[Sequence[Any]]) -> list[bytes] | None:
    """Multi-row INSERTs of ``rows_params`` with the values inlined, escaped
    by the MySQL client library for the connection's character set: what
    ``executemany`` sends, without its per-value Python dispatch (which cost
    about half of a bulk import). ``None`` unless on MySQL/MariaDB with only
    text, integers, booleans and NULLs (the caller then uses ``executemany``)."""
    literal = _literal_function()
    if literal is None:
        return None
    try:
        return _packed([b"(%b)" % _row_literal(params, literal) for params in rows_params])
    except _NotInlinable:
        return None


def encoded_insert_statements(
    session_key: str,
    *,
    first_seq: int,
    facts: Sequence[PathFacts],
    status: str,
    created_at: Any,
    payloads: Sequence[bytes],
) -> list[bytes] | None:
    """``insert_statements`` of rows whose payloads are ``payload_literals``
    already: only the leading values are added (``None`` off MySQL/MariaDB)."""
    literal = _literal_function()
    if literal is None:
        return None
    try:
        key = _row_literal([session_key], literal)
        lead = b",%b," % _row_literal([status, created_at], literal)
    except _NotInlinable:  # pragma: no cover - the key and db_now() are text on MySQL
        return None
    return _packed(
        [
            b"(%b,%d,%d,%b%b%b)"
            % (key, first_seq + i, fact.depth, _row_literal(fact_values(fact), literal), lead, payloads[i])
            for i, fact in enumerate(facts)
        ]
    )


def _packed(rows: Iterable[bytes]) -> list[bytes]:
    """Rows (``(…)`` literals) packed into INSERTs of at most ``MAX_STATEMENT_BYTES``."""
    statements: list[bytes] = []
    batch: list[bytes] = []
    size = len(_INSERT_PREFIX)
    for row in rows:
        if batch and size + len(row) + 1 > MAX_STATEMENT_BYTES:
            statements.append(_INSERT_PREFIX + b",".join(batch))
            batch, size = [], len(_INSERT_PREFIX)
        batch.append(row)
        size += len(row) + 1
    if batch:
        statements.append(_INSERT_PREFIX + b",".join(batch))
    return statements


def update_in_flight_params(session_key: str, entry: Entry, *, status: str, in_flight_status: str) -> list[Any]:
    return [*_payload_values(encode_entry(entry)), status, session_key, entry["id"], in_flight_status]


def erase_params(session_key: str, entry: Entry, *, status: str) -> list[Any]:
    return [*_payload_values(encode_entry(entry)), session_key, entry["id"], status]


def db_now() -> Any:
    return connection.ops.adapt_datetimefield_value(timezone.now())


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def in_list(count: int) -> str:
    return ", ".join(["%s"] * count)


def decode_rows(rows: Iterable[Sequence[Any]]) -> list[Entry]:
    return [decode_row(row) for row in rows]
