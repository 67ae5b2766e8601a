"""Typed errors of the session-tree kernel and its providers.

Every error carries a stable ``code`` (the REST API's JSON error code, the
first word of a command's one-line reason) and a ``category``. The category
decides how every face answers, through one table (``CATEGORIES``): the HTTP
status of the REST API and the exit code of the management commands. A
message always names the offending session or entry id.

| category      | meaning                                   | HTTP | exit |
|---------------|-------------------------------------------|------|------|
| ``bad_input``   | the caller sent something unusable        | 400  | 2    |
| ``too_large``   | an entry or body beyond the size limits   | 413  | 2    |
| ``not_found``   | unknown session or entry                  | 404  | 3    |
| ``conflict``    | leaf moved, entry immutable, session closed | 409 | 4   |
| ``precondition`` | a conditional request's tag does not match | 412  | 4    |
| ``unprocessable`` | a key reused for a different request, a search too broad | 422 | 2 |
| ``corrupt``     | stored data is damaged (operator's job)   | 500  | 5    |
| ``unavailable`` | storage cannot be reached right now       | 503  | 6    |
| ``upstream``    | a summarizer back end failed              | 502  | 7    |
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Category(NamedTuple):
    name: str
    http_status: int
    exit_code: int


BAD_INPUT: Final = "bad_input"
TOO_LARGE: Final = "too_large"
NOT_FOUND: Final = "not_found"
CONFLICT: Final = "conflict"
PRECONDITION: Final = "precondition"
UNPROCESSABLE: Final = "unprocessable"
CORRUPT: Final = "corrupt"
UNAVAILABLE: Final = "unavailable"
UPSTREAM: Final = "upstream"

# The one table every face uses (REST exception handler, command exit codes).
CATEGORIES: Final[dict[str, Category]] = {
    BAD_INPUT: Category(BAD_INPUT, 400, 2),
    TOO_LARGE: Category(TOO_LARGE, 413, 2),
    NOT_FOUND: Category(NOT_FOUND, 404, 3),
    CONFLICT: Category(CONFLICT, 409, 4),
    # A stale tag is a conflict the caller asked to be told apart (HTTP If-Match).
    PRECONDITION: Category(PRECONDITION, 412, 4),
    # Well-formed, and refused for what it means: an idempotency key reused.
    UNPROCESSABLE: Category(UNPROCESSABLE, 422, 2),
    CORRUPT: Category(CORRUPT, 500, 5),
    UNAVAILABLE: Category(UNAVAILABLE, 503, 6),
    UPSTREAM: Category(UPSTREAM, 502, 7),
}
# Anything that is not a SessionTreeError: a bug, reported as such.
EXIT_UNEXPECTED: Final = 1


class SessionTreeError(Exception):
    code = "session_tree_error"
    category = BAD_INPUT

    @property
    def http_status(self) -> int:
        return CATEGORIES[self.category].http_status

    @property
    def exit_code(self) -> int:
        return CATEGORIES[self.category].exit_code


class SessionNotFound(SessionTreeError):
    code = "session_not_found"
    category = NOT_FOUND


class EntryNotFound(SessionTreeError):
    code = "entry_not_found"
    category = NOT_FOUND


class SessionAlreadyExists(SessionTreeError):
    code = "session_already_exists"
    category = CONFLICT


class InvalidEntry(SessionTreeError, ValueError):
    """An entry given to be stored is unusable (its shape, a field, an id it names)."""

    code = "invalid_entry"
    category = BAD_INPUT


class ParentNotLeaf(InvalidEntry):
    """A new entry names a ``parentId`` that is not the leaf it would be
    appended to (in a bulk append, not the entry before it): the tree moved
    since the caller looked, or the caller meant another branch. Answered as
    ``expected_leaf_id`` is: 409 ``leaf_conflict``."""

    code = "leaf_conflict"
    category = CONFLICT


class BadInput(InvalidEntry):
    """An argument that is not an entry is unusable: an option, a position,
    a page size, a session field, a filter. It is an ``InvalidEntry`` only so
    that code written when every bad input was one still catches it; its
    code says what it is (``bad_input``)."""

    code = "bad_input"


class EntryTooLarge(InvalidEntry):
    """An entry beyond ``SESSIONTREE_MAX_ENTRY_BYTES`` or nested deeper than
    ``SESSIONTREE_MAX_ENTRY_DEPTH``: refused on every provider before a write."""

    code = "entry_too_large"
    category = TOO_LARGE


class InvalidTree(InvalidEntry):
    """Entries given to be stored as they are (a fork, an import) do not form a
    tree: a duplicate id or a cycle. The caller's input, unlike ``CorruptSessionTree``."""

    code = "invalid_tree"


class InvalidSessionId(SessionTreeError, ValueError):
    code = "invalid_session_id"
    category = BAD_INPUT


class CorruptSessionTree(SessionTreeError):
    """Stored entries do not form a tree (a missing parent, a cycle, a
    duplicate id) or a session's storage is not what it must be (a folder
    where its file should be, a file that is not a Pi session). Damage to
    stored data, for an operator to repair; never the caller's input."""

    code = "corrupt_session_tree"
    category = CORRUPT


class SessionOnHold(SessionTreeError):
    """A legal hold keeps the session: no hard delete, erase, user erasure or
    retention touches it until the hold is released (appends, moves and reads go on)."""

    code = "session_on_hold"
    category = CONFLICT


class ImmutableEntry(SessionTreeError):
    code = "immutable_entry"
    category = CONFLICT


class LeafConflict(SessionTreeError):
    code = "leaf_conflict"
    category = CONFLICT


class PreconditionFailed(SessionTreeError):
    """The version the caller names (an HTTP ``If-Match`` tag) is not the
    session's or entry's current one: nothing was written."""

    code = "precondition_failed"
    category = PRECONDITION


class SessionClosed(SessionTreeError):
    """The session is deleted (soft) or archived: readable, but nothing may be appended."""

    code = "session_closed"
    category = CONFLICT


class StorageUnavailable(SessionTreeError):
    """The database or the session folder cannot be used right now (connection
    lost, disk full, permission denied); retrying later may work."""

    code = "storage_unavailable"
    category = UNAVAILABLE


class StorageConflict(SessionTreeError):
    """A write lost a race the storage settles by refusing one side (a
    deadlock, a lock-wait timeout, a certification conflict on a
    multi-primary cluster) and its retries were used up: nothing was
    stored; trying again shortly may work."""

    code = "storage_conflict"
    category = CONFLICT


class CommitOutcomeUnknown(StorageUnavailable):
    """The connection was lost while a write was being committed: it may or
    may not be stored. A retry with the same idempotency key answers which
    (and stores nothing twice); without a key, read the session first."""

    code = "commit_outcome_unknown"


class SearchTooBroad(SessionTreeError):
    """A search whose words are in so many entries that the full-text engine
    could not answer within the search time limit (InnoDB computes every
    match before it can order them newest first): nothing is wrong with the
    query, and asking again gives the same answer; add a word or narrow the
    sessions searched."""

    code = "search_too_broad"
    category = UNPROCESSABLE


class SummarizerError(SessionTreeError):
    """A summarizer back end failed (unreachable, HTTP error, timeout, bad reply)."""

    code = "summarizer_failed"
    category = UPSTREAM
