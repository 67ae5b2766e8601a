"""The snapshot payload the API and admin render: everything about one session at once."""

from __future__ import annotations

from collections.abc import Sequence

from .context_builder import build_context_from_path, walk_to_root
from .errors import EntryNotFound
from .path import build_entry_index, group_children_by_parent, resolve_latest_labels
from .types import Entry, SessionSnapshot, SessionTreeSession


def build_snapshot(session: SessionTreeSession, entries: Sequence[Entry]) -> SessionSnapshot:
    """Session meta, every entry, the active path (ids, root first), the roots
    (``root_entry_ids``), children per parent id, current labels and the LLM
    context at the leaf.

    Roots have a list of their own: kept under a made-up key among the
    parent ids, they were lost when an entry had that very id (``"root"``)."""
    by_id = build_entry_index(entries)
    leaf_id = session["leaf_entry_id"]
    path: list[Entry] = []
    if leaf_id is not None:
        leaf = by_id.get(leaf_id)
        if leaf is None:
            raise EntryNotFound(f"Leaf entry {leaf_id} of session {session['session_id']} not found")
        path = walk_to_root(leaf, by_id)
    grouped = group_children_by_parent(entries)
    roots = grouped.pop(None, [])
    children: dict[str, list[str]] = {str(parent_id): ids for parent_id, ids in grouped.items()}
    return {
        "session": session,
        "entries": list(entries),
        "active_path": [e["id"] for e in path],
        "root_entry_ids": roots,
        "children_by_parent_id": children,
        "labels_by_entry_id": resolve_latest_labels(entries),
        "runtime_context": build_context_from_path(path),
    }
