"""A session as Pi JSONL: the whole tree, the active path, or a subtree.

Every export starts with the session's own header line and lists entries in
append order, so Pi's loader opens it with the same context at every
exported entry. An in-flight (still streaming) entry is never exported.

- ``full``: every entry.
- ``active``: the root→leaf path (or root→``entry_id``).
- ``subtree``: ``entry_id``, everything below it, and the path above it
  (without its ancestors the subtree's context would lose its beginning).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sessiontree.core.errors import BadInput, EntryNotFound
from sessiontree.core.path import walk_path
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.core.types import Entry
from sessiontree.providers import meta
from sessiontree.providers.base import SessionTreeProvider

EXPORT_SCOPES: tuple[str, ...] = ("full", "active", "subtree")


def export_header(provider: SessionTreeProvider, session_id: str) -> dict[str, Any]:
    """The session's header line as an export carries it: a fork's
    ``parentSession`` names the parent session by id, never by the path of
    the parent's file on this server (Pi writes a path there; an export
    leaves the server, its paths must not)."""
    header = provider.get_header(session_id)
    parent_ref = header.get("parentSession")
    if isinstance(parent_ref, str) and ("/" in parent_ref or "\\" in parent_ref):
        parent = meta.resolve_parent(parent_ref)
        # A parent this server does not hold keeps its file's name, not its folder.
        named = parent.session_id if parent is not None else parent_ref.replace("\\", "/").rsplit("/", 1)[-1]
        header = {**header, "parentSession": named}
    return header


def export_entries(
    provider: SessionTreeProvider, session_id: str, *, scope: str = "full", entry_id: str | None = None
) -> tuple[dict[str, Any], list[Entry]]:
    """(header, entries) of the export; ``InvalidEntry`` for a bad scope,
    ``EntryNotFound`` for an unknown ``entry_id``."""
    if scope not in EXPORT_SCOPES:
        raise BadInput(f"Unknown export scope {scope!r}; use one of {', '.join(EXPORT_SCOPES)}")
    if scope == "subtree" and not entry_id:
        raise BadInput("A subtree export needs the entry it starts at")
    header = export_header(provider, session_id)
    with provider.read(session_id) as view:
        in_flight = view.state.in_flight_entry_id
        start = entry_id if entry_id is not None else view.state.leaf_entry_id
        if start is not None and start == in_flight:
            start = view.get(in_flight).get("parentId")  # the stream's parent: what is stored so far
        entries = [entry for entry in view.all_entries() if entry["id"] != in_flight]
    if scope == "full":
        return header, entries
    if start is None:
        return header, []
    parents = {entry["id"]: entry.get("parentId") for entry in entries}
    if start not in parents:
        raise EntryNotFound(f"Entry {start} not found in session {session_id}")
    keep = set(walk_path(start, parents))
    if scope == "subtree":
        below = {start}
        for entry in entries:  # append order: a parent always comes before its children
            parent_id = entry.get("parentId")
            if isinstance(parent_id, str) and parent_id in below:
                below.add(entry["id"])
        keep |= below
    return header, [entry for entry in entries if entry["id"] in keep]


def export_jsonl(
    provider: SessionTreeProvider, session_id: str, *, scope: str = "full", entry_id: str | None = None
) -> Iterator[bytes]:
    """The export's lines (each ending in a newline), header first."""
    header, entries = export_entries(provider, session_id, scope=scope, entry_id=entry_id)
    yield serialize_line(header)
    for entry in entries:
        yield serialize_line(entry)
