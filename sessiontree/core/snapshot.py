"""The snapshot payload the API and admin render: everything about one session at once."""

from __future__ import annotations

from collections.abc import Sequence

from .context_builder import build_context_from_path, walk_to_root
from .errors import EntryNotFound
from .path import build_entry_index, group_children_by_parent, resolve_latest_labels
from .types import Entry, SessionSnapshot, SessionTreeSession

ROOT_KEY = "root"


def build_snapshot(session: SessionTreeSession, entries: Sequence[Entry]) -> SessionSnapshot:
    """Session meta, every entry, the active path (ids, root first), children per
    parent (roots under ``"root"``: JSON objects need string keys), current
    labels and the LLM context at the leaf."""
    by_id = build_entry_index(entries)
    leaf_id = session["leaf_entry_id"]
    path: list[Entry] = []
    if leaf_id is not None:
        leaf = by_id.get(leaf_id)
        if leaf is None:
            raise EntryNotFound(f"Leaf entry {leaf_id} of session {session['session_id']} not found")
        path = walk_to_root(leaf, by_id)
    children = {
        (ROOT_KEY if parent_id is None else parent_id): ids
        for parent_id, ids in group_children_by_parent(entries).items()
    }
    return {
        "session": session,
        "entries": list(entries),
        "active_path": [e["id"] for e in path],
        "children_by_parent_id": children,
        "labels_by_entry_id": resolve_latest_labels(entries),
        "runtime_context": build_context_from_path(path),
    }
