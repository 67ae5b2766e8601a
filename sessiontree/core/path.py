"""Pure tree logic over a list of entries (append order)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import CorruptSessionTree, EntryNotFound
from .pi_session_file import gc_paused
from .types import Entry, LabelInfo, TreeNode


def build_entry_index(entries: Iterable[Entry]) -> dict[str, Entry]:
    """Map entry id → entry. A duplicate id is a corrupt session, not a silent overwrite."""
    index: dict[str, Entry] = {}
    for entry in entries:
        entry_id = entry.get("id")
        if not isinstance(entry_id, str):
            raise CorruptSessionTree(f"Entry without a string id: type={entry.get('type')!r}")
        if entry_id in index:
            raise CorruptSessionTree(f"Duplicate entry id {entry_id}")
        index[entry_id] = entry
    return index


def get_path_to_leaf(
    entries: Sequence[Entry],
    leaf_id: str | None,
    by_id: Mapping[str, Entry] | None = None,
) -> list[Entry]:
    """The active path: root first, ``leaf_id`` last. ``None`` → empty path.

    Raises ``EntryNotFound`` for an unknown leaf and ``CorruptSessionTree`` for
    a parent that does not exist or a cycle, naming the entry.
    """
    if leaf_id is None:
        return []
    if by_id is None:
        by_id = build_entry_index(entries)
    current = by_id.get(leaf_id)
    if current is None:
        raise EntryNotFound(f"Entry {leaf_id} not found")
    path: list[Entry] = []
    seen: set[str] = set()
    while current is not None:
        entry_id = current["id"]
        if entry_id in seen:
            raise CorruptSessionTree(f"Cycle detected at entry {entry_id}")
        seen.add(entry_id)
        path.append(current)
        parent_id = current.get("parentId")
        if parent_id is None:
            break
        parent = by_id.get(parent_id)
        if parent is None:
            raise CorruptSessionTree(f"Entry {entry_id} has missing parent {parent_id}")
        current = parent
    path.reverse()
    return path


def group_children_by_parent(entries: Iterable[Entry]) -> dict[str | None, list[str]]:
    """Parent id → child ids in append order; roots are under the key ``None``."""
    children: dict[str | None, list[str]] = {}
    for entry in entries:
        children.setdefault(entry.get("parentId"), []).append(entry["id"])
    return children


def resolve_latest_labels(entries: Iterable[Entry]) -> dict[str, LabelInfo]:
    """Target id → its current label. Later label entries win; an empty label clears."""
    labels: dict[str, LabelInfo] = {}
    for entry in entries:
        if entry.get("type") != "label":
            continue
        target_id = entry.get("targetId")
        if not isinstance(target_id, str):
            continue
        label = entry.get("label")
        if label:
            labels[target_id] = {
                "label": label,
                "label_entry_id": entry["id"],
                "timestamp": entry.get("timestamp", ""),
            }
        else:
            labels.pop(target_id, None)
    return labels


def find_common_ancestor_entry_id(
    entries: Sequence[Entry],
    a: str | None,
    b: str | None,
    by_id: Mapping[str, Entry] | None = None,
) -> str | None:
    """The deepest entry on both paths, or ``None`` when they share no entry."""
    if a is None or b is None:
        return None
    if by_id is None:
        by_id = build_entry_index(entries)
    on_a = {e["id"] for e in get_path_to_leaf(entries, a, by_id)}
    common: str | None = None
    for entry in get_path_to_leaf(entries, b, by_id):
        if entry["id"] in on_a:
            common = entry["id"]
        else:
            break
    return common


def build_tree(entries: Sequence[Entry], labels: Mapping[str, LabelInfo] | None = None) -> list[TreeNode]:
    """Roots of the entry tree. Children keep append order.

    As Pi does, an entry whose parent is missing (or is itself) becomes a root,
    so a damaged file can still be inspected. Built without recursion, so
    10,000-deep trees are fine.
    """
    if labels is None:
        labels = resolve_latest_labels(entries)
    with gc_paused():
        return _link_tree(entries, labels)


def _link_tree(entries: Sequence[Entry], labels: Mapping[str, LabelInfo]) -> list[TreeNode]:
    nodes: dict[str, TreeNode] = {}
    for entry in entries:
        label = labels.get(entry["id"])
        nodes[entry["id"]] = {"entry": entry, "children": [], "label": label["label"] if label else None}
    roots: list[TreeNode] = []
    for entry in entries:
        node = nodes[entry["id"]]
        parent_id = entry.get("parentId")
        parent = nodes.get(parent_id) if parent_id is not None and parent_id != entry["id"] else None
        if parent is None:
            roots.append(node)
        else:
            parent["children"].append(node)
    return roots


def entry_depths(entries: Sequence[Entry]) -> dict[str, int]:
    """Depth of every entry (roots are 0), computed in one pass over append order.

    Parents are always appended before their children, so a forward pass
    suffices; an entry whose parent is missing counts as a root.
    """
    depths: dict[str, int] = {}
    for entry in entries:
        parent_id: Any = entry.get("parentId")
        depths[entry["id"]] = depths[parent_id] + 1 if parent_id in depths else 0
    return depths
