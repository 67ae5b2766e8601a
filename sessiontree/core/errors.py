"""Typed errors of the session-tree kernel and its providers.

Every error carries a stable ``code`` (used by the REST API's JSON errors and
by the commands' one-line reasons) and a message that names the offending
session or entry id.
"""

from __future__ import annotations


class SessionTreeError(Exception):
    code = "session_tree_error"
    http_status = 400


class SessionNotFound(SessionTreeError):
    code = "session_not_found"
    http_status = 404


class EntryNotFound(SessionTreeError):
    code = "entry_not_found"
    http_status = 404


class SessionAlreadyExists(SessionTreeError):
    code = "session_already_exists"
    http_status = 409


class InvalidEntry(SessionTreeError, ValueError):
    code = "invalid_entry"
    http_status = 400


class InvalidSessionId(SessionTreeError, ValueError):
    code = "invalid_session_id"
    http_status = 400


class CorruptSessionTree(InvalidEntry):
    """Stored entries do not form a tree: a missing parent, a cycle, a duplicate id."""

    code = "corrupt_session_tree"


class ImmutableEntry(SessionTreeError):
    code = "immutable_entry"
    http_status = 409


class LeafConflict(SessionTreeError):
    code = "leaf_conflict"
    http_status = 409


class SessionClosed(SessionTreeError):
    """The session is deleted (soft): readable, but nothing may be appended."""

    code = "session_closed"
    http_status = 409


class SummarizerError(SessionTreeError):
    """A summarizer back end failed (unreachable, HTTP error, timeout, bad reply)."""

    code = "summarizer_failed"
    http_status = 502
