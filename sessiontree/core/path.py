"""Pure tree logic over a list of entries (append order)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from .errors import CorruptSessionTree, EntryNotFound
from .session_reader import gc_paused
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


class EntryParents(Mapping[str, Any]):
    """``entry id → parentId`` over an ``id → entry`` map, without copying it:
    lets ``walk_path`` run over a session's entry index as it is."""

    __slots__ = ("_by_id",)

    def __init__(self, by_id: Mapping[str, Entry]) -> None:
        self._by_id = by_id

    def __getitem__(self, entry_id: str) -> Any:
        return self._by_id[entry_id].get("parentId")

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


def walk_path(leaf_entry_id: str, parent_of: Mapping[str, Any], *, strict: bool = False) -> list[str]:
    """The ids from the root to ``leaf_entry_id`` (root first): the one tree walker.

    ``parent_of`` maps every entry id of the session to its ``parentId``
    (``None`` for a root): a plain dict, a database skeleton, or
    ``EntryParents`` over an entry index. An unknown ``leaf_entry_id`` raises
    ``EntryNotFound``; a cycle raises ``CorruptSessionTree``.

    A parent id that names no entry makes its child a root, as Pi does when
    it loads a file (its own forks leave such entries behind); every reader
    of stored sessions (providers, context building, the admin) uses that
    policy. ``strict=True`` raises ``CorruptSessionTree`` instead, naming the
    entry: the kernel plan's ``getPathToLeaf`` check for trees being built.
    Iterative, so a 100,000-deep chain is fine.
    """
    if not isinstance(leaf_entry_id, str) or leaf_entry_id not in parent_of:
        raise EntryNotFound(f"Entry {leaf_entry_id} not found")
    path: list[str] = []
    seen: set[str] = set()
    current: Any = leaf_entry_id
    while current is not None:
        if current in seen:
            raise CorruptSessionTree(f"Cycle detected at entry {current}")
        seen.add(current)
        path.append(current)
        parent_id = parent_of[current]
        # A parent that names no entry (or is no id at all: Pi looks a list or
        # a number up as a key and finds nothing) makes a root.
        if parent_id is not None and (parent_id.__class__ is not str or parent_id not in parent_of):
            if strict:
                raise CorruptSessionTree(f"Entry {current} has missing parent {parent_id}")
            parent_id = None
        current = parent_id
    path.reverse()
    return path


def find_cycles(parent_of: Mapping[str, Any]) -> Iterator[list[str]]:
    """Each cycle of parents in ``parent_of`` (entry id → ``parentId``),
    once, listed from the entry where its chain closes, as the walk meets
    them. Every chain is followed once, so this is linear in the entries."""
    done: set[str] = set()
    for start in parent_of:
        chain: list[str] = []
        position: dict[str, int] = {}
        current: Any = start
        while isinstance(current, str) and current in parent_of and current not in done:
            if current in position:
                yield chain[position[current] :]
                break
            position[current] = len(chain)
            chain.append(current)
            current = parent_of[current]
        done.update(chain)


def path_entries(leaf_entry_id: str, by_id: Mapping[str, Entry], *, strict: bool = False) -> list[Entry]:
    """``walk_path`` over an entry index, returning the entries themselves."""
    return [by_id[entry_id] for entry_id in walk_path(leaf_entry_id, EntryParents(by_id), strict=strict)]


def get_path_to_leaf(
    entries: Sequence[Entry],
    leaf_entry_id: str | None,
    by_id: Mapping[str, Entry] | None = None,
) -> list[Entry]:
    """The active path: root first, ``leaf_entry_id`` last. ``None`` → empty path.

    Strict, as the kernel plan asks: raises ``EntryNotFound`` for an unknown
    leaf and ``CorruptSessionTree`` for a parent that does not exist or a
    cycle, naming the entry. (Stored sessions are read with Pi's tolerant
    rule instead: see ``walk_path``.)
    """
    if leaf_entry_id is None:
        return []
    if by_id is None:
        by_id = build_entry_index(entries)
    return path_entries(leaf_entry_id, by_id, strict=True)


def group_children_by_parent(entries: Iterable[Entry]) -> dict[str | None, list[str]]:
    """Parent id → child ids in append order; roots are under the key ``None``."""
    children: dict[str | None, list[str]] = {}
    for entry in entries:
        parent_id = entry.get("parentId")
        children.setdefault(parent_id if isinstance(parent_id, str) else None, []).append(entry["id"])
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
        parent = nodes.get(parent_id) if isinstance(parent_id, str) and parent_id != entry["id"] else None
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
        depths[entry["id"]] = depths[parent_id] + 1 if isinstance(parent_id, str) and parent_id in depths else 0
    return depths


class TreeStats(NamedTuple):
    """What session lists show of a tree, kept in the session's meta row."""

    entry_count: int
    branch_count: int  # tips: entries without children (a linear session has 1)
    compaction_count: int
    root_entry_id: str | None  # the first root in append order


def tree_stats(entries: Sequence[Entry]) -> TreeStats:
    """``TreeStats`` of a session's entries (append order). An entry whose
    parent is missing counts as a root, as every reader treats it."""
    ids = {entry.get("id") for entry in entries}
    parents: set[Any] = set()
    compactions = 0
    root: str | None = None
    for entry in entries:
        parent_id = entry.get("parentId")
        if isinstance(parent_id, str) and parent_id in ids and parent_id != entry.get("id"):
            parents.add(parent_id)
        elif root is None:
            root = entry.get("id")
        if entry.get("type") == "compaction":
            compactions += 1
    return TreeStats(len(entries), len(entries) - len(parents), compactions, root)
