"""A session's entry tree as nested nodes, one window at a time (the REST
API's ``tree``; the admin lays the tree out in lines instead: ``tree_window``).

Each node is ``{"id", "type", "role"?, "label"?, "child_count", "children"}``
with children in append order; ``role`` is a message's role, ``label`` the
entry's current label. A window starts at the roots (or at one entry,
``root``) and goes ``depth`` levels down; a node at the window's edge keeps
its ``child_count`` with an empty ``children`` list, and the client asks for
the next window with ``root`` set to it. Nesting is bounded by the window, so
every JSON library can read the answer (a 10,000-deep chain nested whole
would not be).

From ``KEYED_FROM`` entries on, the window is read by key (issue 23): its
start (the root, or the entry asked for), then each level's children
(``keyed_reads.levels_below``: one walk down on ``mysql``; the edge's child
counts by ``children_of``), the window's payloads and
the labels aimed at its entries; its cost follows the window, not the
session's length. A session whose tree the storage cannot vouch for by key
(more than one root, or none: orphans or a damaged order) is read whole.
"""

from __future__ import annotations

from typing import Any, TypedDict

from sessiontree.core.errors import EntryNotFound
from sessiontree.core.path import resolve_latest_labels
from sessiontree.core.pi_session_file import gc_paused
from sessiontree.core.types import Entry
from sessiontree.providers import keyed_reads
from sessiontree.providers.base import SessionTreeProvider

DEFAULT_TREE_DEPTH = 50
MAX_TREE_DEPTH = 100
# From this many entries a window is read by key. Below it, reading the whole
# skeleton once costs less than a read per level.
KEYED_FROM = 2000


class SessionTreeWindow(TypedDict):
    leaf_entry_id: str | None
    root: str | None
    depth: int
    roots: list[dict[str, Any]]


def nested_tree(
    provider: SessionTreeProvider, session_id: str, *, root: str | None = None, depth: int = DEFAULT_TREE_DEPTH
) -> SessionTreeWindow:
    """The tree window below ``root`` (``None``: every root), ``depth`` levels
    deep (0: the start nodes only). ``EntryNotFound`` for an unknown ``root``."""
    with provider.read(session_id) as view, gc_paused():
        keyed = _keyed_levels(view, session_id, root, depth)
        if keyed is not None:
            read_levels, kids, parent_of = keyed
            ids = [entry_id for level in read_levels for entry_id in level]
            labels_here = resolve_latest_labels(keyed_reads.entries_targeting_any(view, ids, ("label",)))
            payloads = {entry["id"]: entry for entry in view.entries(ids)}
            return _nest(view.state.leaf_entry_id, root, depth, read_levels, kids, parent_of, payloads, labels_here)
        leaf_id = view.state.leaf_entry_id
        parents = view.parents()
        children: dict[str | None, list[str]] = {}
        for entry_id, parent_id in parents.items():
            # As every reader treats a damaged tree: a missing or own parent makes a root.
            attach = parent_id if parent_id is not None and parent_id != entry_id and parent_id in parents else None
            children.setdefault(attach, []).append(entry_id)
        if root is not None and root not in parents:
            raise EntryNotFound(f"Entry {root} not found in session {session_id}")
        start = [root] if root is not None else children.get(None, [])

        # Breadth first, level by level, each entry once (a cycle cannot loop).
        levels: list[list[str]] = [list(start)]
        seen = set(start)
        while len(levels) <= depth:
            below = [kid for entry_id in levels[-1] for kid in children.get(entry_id, ()) if kid not in seen]
            if not below:
                break
            seen.update(below)
            levels.append(below)
        window = [entry_id for level in levels for entry_id in level]
        entries = {entry["id"]: entry for entry in view.entries(window)}
        labels = resolve_latest_labels(view.all_entries(types=("label",)))
        return _nest(leaf_id, root, depth, levels, children, parents, entries, labels)


def _nest(
    leaf_id: str | None,
    root: str | None,
    depth: int,
    levels: list[list[str]],
    children: dict[str | None, list[str]],
    parent_of: dict[str, str | None],
    entries: dict[str, Entry],
    labels: dict[str, Any],
) -> SessionTreeWindow:
    """The window's nodes, nested: ``levels`` from the start nodes down,
    ``children`` (of every entry of the window), each entry's parent."""
    nodes: dict[str, dict[str, Any]] = {}
    for level in levels:
        for entry_id in level:
            entry = entries[entry_id]
            node: dict[str, Any] = {"id": entry_id, "type": entry.get("type")}
            message = entry.get("message")
            if entry.get("type") == "message" and isinstance(message, dict) and isinstance(message.get("role"), str):
                node["role"] = message["role"]
            if entry_id in labels:
                node["label"] = labels[entry_id]["label"]
            node["child_count"] = len(children.get(entry_id, ()))
            node["children"] = []
            nodes[entry_id] = node
    for level in levels[1:]:
        for entry_id in level:
            nodes[str(parent_of[entry_id])]["children"].append(nodes[entry_id])
    return {
        "leaf_entry_id": leaf_id,
        "root": root,
        "depth": depth,
        "roots": [nodes[entry_id] for entry_id in levels[0]],
    }


def _keyed_levels(
    view: Any, session_id: str, root: str | None, depth: int
) -> tuple[list[list[str]], dict[str | None, list[str]], dict[str, str | None]] | None:
    """The window's levels read by key, with each of its entries' children
    and parents; ``None`` where the whole skeleton is read instead (a small
    session, a storage without path facts, a tree that is not one root)."""
    if getattr(view, "entry_facts", None) is None or view.state.entry_count < KEYED_FROM:
        return None
    roots = keyed_reads.root_ids(view, 2)
    if len(roots) != 1:
        return None  # orphans or a damaged order: the whole skeleton says what the roots are
    if root is not None and root not in view.known_ids([root]):
        raise EntryNotFound(f"Entry {root} not found in session {session_id}")
    start = [root] if root is not None else roots
    levels: list[list[str]] = [list(start)]
    children: dict[str | None, list[str]] = {}
    parent_of: dict[str, str | None] = {}
    for below in keyed_reads.levels_below(view, start, depth):
        for kid, parent in below:
            parent_of[kid] = parent
            children.setdefault(parent, []).append(kid)
        levels.append([kid for kid, _ in below])
    # The window's edge keeps its nodes' child counts (the level below it, unread).
    if len(levels) > depth:
        children.update(keyed_reads.children_of(view, levels[-1]))
    return levels, children, parent_of
