"""A window onto a session's entry tree: what a tree view renders first, and
the pieces it loads on demand.

A session may hold 100,000 entries; a page cannot show them all, and does not
need to. The tree is laid out as *lines*: from an entry, the line continues
through the child on the active path (else the first child), and every other
child starts a *folded branch* one level deeper, loaded when it is opened.
On a line, the entries worth seeing stay visible (the line's ends, branch
points, labelled entries, compactions and branch summaries, the leaf, the
entry asked for, a few neighbours of each, the last entries before the leaf);
long stretches between them collapse into a *run* ("312 entries") that is
loaded when it is expanded.

Everything is computed from the session's skeleton (id → parent, in append
order), its label, compaction and branch-summary entries, and the payloads of
the entries actually shown: a fixed number of reads whatever the size, and
payloads only for the window. The same functions serve the first page
(``tree_window``), an opened branch (``branch_window``) and an expanded run
(``run_window``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.context_builder import entry_to_message
from sessiontree.core.path import resolve_latest_labels, walk_path
from sessiontree.core.types import Entry, LabelInfo
from sessiontree.providers.base import SessionTreeProvider

# Entries kept visible on each side of an entry worth seeing.
EDGE = 2
# A stretch of fewer hidden entries than this is shown rather than collapsed.
MIN_RUN = 8
# The last entries of the main line (the recent conversation) stay visible.
TAIL = 30
# Entries looked at, down a folded branch, to find the message it is named by.
NAME_LOOKAHEAD = 8
# Rows of one window at most; the rest of a line becomes one more run.
MAX_ROWS = 1500
# Entries an expanded run shows at once; the remainder is a run again.
RUN_CHUNK = 300
# Unreachable entries (a parent cycle in a damaged file) listed at most.
MAX_UNREACHABLE = 200

MARKER_TYPES = ("compaction", "branch_summary")


@dataclass
class TreeSkeleton:
    """The whole tree's shape, without payloads (except a few small entry kinds)."""

    session_id: str
    leaf_entry_id: str | None
    status: str
    entry_count: int
    order: list[str]  # every entry id, append order (the in-flight one last)
    parent: dict[str, str | None]  # a missing or self parent is None: the entry is a root
    children: dict[str | None, list[str]]  # append order; roots under None
    active_path: list[str]
    labels: dict[str, LabelInfo]
    markers: dict[str, Entry]  # compaction and branch_summary entries by id
    compacted_by: dict[str, str]  # active-path entry → the compaction that left it out of the context
    depth: dict[str, int]
    in_flight_entry_id: str | None = None
    _active: frozenset[str] = frozenset()
    _sizes: dict[str, int] | None = None

    @property
    def active(self) -> frozenset[str]:
        return self._active

    def is_branch_point(self, entry_id: str) -> bool:
        return len(self.children.get(entry_id, ())) > 1

    def subtree_size(self, entry_id: str) -> int:
        if self._sizes is None:
            sizes = dict.fromkeys(self.order, 1)
            # Parents are appended before their children: one reverse pass sizes every subtree.
            for entry_id_ in reversed(self.order):
                parent_id = self.parent[entry_id_]
                if parent_id is not None:
                    sizes[parent_id] += sizes[entry_id_]
            self._sizes = sizes
        return self._sizes.get(entry_id, 1)

    @property
    def tips(self) -> list[str]:
        """Entries without children (the ends of branches), append order."""
        return [entry_id for entry_id in self.order if not self.children.get(entry_id)]

    def path_to(self, entry_id: str) -> list[str]:
        return walk_path(entry_id, self.parent)


def _normalize(parents: Mapping[str, Any]) -> tuple[list[str], dict[str, str | None]]:
    order = list(parents)
    normalized: dict[str, str | None] = {}
    for entry_id in order:
        parent_id = parents[entry_id]
        normalized[entry_id] = parent_id if parent_id in parents and parent_id != entry_id else None
    return order, normalized


def _depths(order: Sequence[str], parent: Mapping[str, str | None]) -> dict[str, int]:
    depths: dict[str, int] = {}
    for entry_id in order:
        parent_id = parent[entry_id]
        depths[entry_id] = depths[parent_id] + 1 if parent_id is not None and parent_id in depths else 0
    return depths


def compacted_entries(active_path: Sequence[str], markers: Mapping[str, Entry]) -> dict[str, str]:
    """Entries of ``active_path`` the context leaves out because the latest
    compaction on it summarized them (entry id → that compaction's id): the
    context builder's rule, from ids alone."""
    compaction_index = None
    for index in range(len(active_path) - 1, -1, -1):
        marker = markers.get(active_path[index])
        if marker is not None and marker.get("type") == "compaction":
            compaction_index = index
            break
    if compaction_index is None:
        return {}
    compaction_id = active_path[compaction_index]
    first_kept = markers[compaction_id].get("firstKeptEntryId")
    cut = compaction_index
    for index in range(compaction_index):
        if active_path[index] == first_kept:
            cut = index
            break
    return dict.fromkeys(active_path[:cut], compaction_id)


def read_skeleton(view: Any, *, leaf_entry_id: Any = None) -> TreeSkeleton:
    """The skeleton of the session ``view`` reads (a provider ``read()`` view)."""
    state = view.state
    order, parent = _normalize(view.parents())
    children: dict[str | None, list[str]] = {}
    for entry_id in order:
        children.setdefault(parent[entry_id], []).append(entry_id)
    small = view.all_entries(types=("label", *MARKER_TYPES))
    labels = resolve_latest_labels(small)
    markers = {entry["id"]: entry for entry in small if entry.get("type") in MARKER_TYPES}
    leaf_id = state.leaf_entry_id if leaf_entry_id is None else leaf_entry_id
    active_path = walk_path(leaf_id, parent) if leaf_id is not None and leaf_id in parent else []
    skeleton = TreeSkeleton(
        session_id=state.session_id,
        leaf_entry_id=leaf_id,
        status=state.status,
        entry_count=len(order),
        order=order,
        parent=parent,
        children=children,
        active_path=active_path,
        labels=labels,
        markers=markers,
        compacted_by=compacted_entries(active_path, markers),
        depth=_depths(order, parent),
        in_flight_entry_id=state.in_flight_entry_id,
    )
    skeleton._active = frozenset(active_path)
    return skeleton


# --- rows ---------------------------------------------------------------------------------


@dataclass
class TreeRow:
    """One line of a tree view: an entry, a folded branch, or a collapsed run."""

    kind: str  # "entry" | "branch" | "run"
    level: int  # branch nesting (indentation), not depth
    entry_id: str  # the entry; the branch's first entry; the run's first entry
    depth: int = 0
    on_active_path: bool = False
    is_leaf: bool = False
    is_branch_point: bool = False
    label: str = ""
    compacted_by: str = ""  # the compaction that left this entry out of the context
    in_flight: bool = False
    unreachable: bool = False
    entry: Entry | None = None  # filled once payloads are loaded
    size: int = 0  # branch: entries in it; run: entries hidden
    name_entry: Entry | None = None  # branch: the entry it is named by (its first message)
    open: bool = False  # branch: shown unfolded (it leads to the focused entry)
    rows: list[TreeRow] = field(default_factory=list)  # branch: its rows when open
    marker: str = ""  # filled by the face that shows the row
    preview: str = ""


@dataclass
class TreeWindow:
    skeleton: TreeSkeleton
    rows: list[TreeRow]
    focus_entry_id: str | None = None

    def iter_rows(self) -> Iterable[TreeRow]:
        stack = list(reversed(self.rows))
        while stack:
            row = stack.pop()
            yield row
            stack.extend(reversed(row.rows))

    @property
    def entry_rows(self) -> list[TreeRow]:
        return [row for row in self.iter_rows() if row.kind == "entry"]


def _line(
    skeleton: TreeSkeleton,
    start_id: str,
    prefer: frozenset[str] | set[str],
    limit: int | None = None,
    then: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """From ``start_id`` down: at each step the child in ``prefer`` (the
    active path), else the one in ``then`` (the way to a focused entry), else the first."""
    ids = [start_id]
    seen = {start_id}
    current = start_id
    while limit is None or len(ids) < limit:
        kids = skeleton.children.get(current)
        if not kids:
            break
        current = next((kid for kid in kids if kid in prefer), next((kid for kid in kids if kid in then), kids[0]))
        if current in seen:  # pragma: no cover - children come from a parent map: no cycle reaches here
            break
        seen.add(current)
        ids.append(current)
    return ids


class _Layout:
    def __init__(self, skeleton: TreeSkeleton, focus_id: str | None) -> None:
        self.skeleton = skeleton
        self.focus_id = focus_id if focus_id in skeleton.parent else None
        self.focus_path: set[str] = set(skeleton.path_to(self.focus_id)) if self.focus_id else set()
        self.budget = MAX_ROWS

    def entry_row(self, entry_id: str, level: int) -> TreeRow:
        sk = self.skeleton
        label = sk.labels.get(entry_id)
        return TreeRow(
            kind="entry",
            level=level,
            entry_id=entry_id,
            depth=sk.depth.get(entry_id, 0),
            on_active_path=entry_id in sk.active,
            is_leaf=entry_id == sk.leaf_entry_id,
            is_branch_point=sk.is_branch_point(entry_id),
            label=label["label"] if label else "",
            compacted_by=sk.compacted_by.get(entry_id, ""),
            in_flight=entry_id == sk.in_flight_entry_id,
        )

    def branch_row(self, entry_id: str, level: int) -> TreeRow:
        row = TreeRow(kind="branch", level=level, entry_id=entry_id, size=self.skeleton.subtree_size(entry_id))
        if entry_id in self.focus_path:
            row.open = True
            row.rows = self.line_rows(entry_id, level)
        return row

    def run_row(self, ids: Sequence[str], level: int) -> TreeRow:
        return TreeRow(kind="run", level=level, entry_id=ids[0], size=len(ids))

    def _important(self, ids: Sequence[str], *, main: bool) -> list[bool]:
        sk = self.skeleton
        count = len(ids)
        keep = [False] * count
        for index, entry_id in enumerate(ids):
            if (
                index == 0
                or index == count - 1
                or sk.is_branch_point(entry_id)
                or entry_id in sk.labels
                or entry_id in sk.markers
                or entry_id == sk.leaf_entry_id
                or entry_id == self.focus_id
                or (main and index >= count - TAIL)
            ):
                for near in range(max(0, index - EDGE), min(count, index + EDGE + 1)):
                    keep[near] = True
        return keep

    def line_rows(self, start_id: str, level: int, *, main: bool = False) -> list[TreeRow]:
        """The rows of the line from ``start_id``: kept entries, folded branches, runs."""
        ids = _line(self.skeleton, start_id, self.skeleton.active, then=self.focus_path)
        keep = self._important(ids, main=main)
        rows: list[TreeRow] = []
        index = 0
        while index < len(ids):
            if self.budget <= 0:
                rows.append(self.run_row(ids[index:], level))
                break
            if not keep[index]:
                end = index
                while end < len(ids) and not keep[end]:
                    end += 1
                if end - index >= MIN_RUN:
                    rows.append(self.run_row(ids[index:end], level))
                    self.budget -= 1
                    index = end
                    continue
            rows.extend(self.entry_with_branches(ids, index, level))
            index += 1
        return rows

    def entry_with_branches(self, ids: Sequence[str], index: int, level: int) -> list[TreeRow]:
        entry_id = ids[index]
        rows = [self.entry_row(entry_id, level)]
        self.budget -= 1
        next_id = ids[index + 1] if index + 1 < len(ids) else None
        for kid in self.skeleton.children.get(entry_id, ()):
            if kid != next_id:
                rows.append(self.branch_row(kid, level + 1))
                self.budget -= 1
        return rows

    def top_rows(self) -> list[TreeRow]:
        sk = self.skeleton
        roots = sk.children.get(None, [])
        if not roots:
            return []
        in_focus = next((root for root in roots if root in self.focus_path), roots[0])
        main = next((root for root in roots if root in sk.active), in_focus)
        rows = [self.branch_row(root, 1) for root in roots if root != main]
        rows.extend(self.line_rows(main, 0, main=True))
        return rows


def _unreachable_rows(skeleton: TreeSkeleton, layout: _Layout) -> list[TreeRow]:
    reached: set[str] = set()
    stack = list(skeleton.children.get(None, []))
    while stack:
        entry_id = stack.pop()
        if entry_id in reached:
            continue
        reached.add(entry_id)
        stack.extend(skeleton.children.get(entry_id, ()))
    rows = []
    for entry_id in skeleton.order:
        if entry_id not in reached:
            row = layout.entry_row(entry_id, 0)
            row.unreachable = True
            rows.append(row)
            if len(rows) >= MAX_UNREACHABLE:
                break
    return rows


def _fill_payloads(view: Any, window: TreeWindow) -> None:
    """Load the payloads of the window's entries and of the entries folded
    branches are named by: one batch."""
    skeleton = window.skeleton
    rows = list(window.iter_rows())
    wanted: dict[str, None] = {}
    name_lines: dict[str, list[str]] = {}
    for row in rows:
        if row.kind == "entry":
            wanted[row.entry_id] = None
        elif row.kind == "branch":
            line = _line(skeleton, row.entry_id, skeleton.active, limit=NAME_LOOKAHEAD)
            name_lines[row.entry_id] = line
            wanted.update(dict.fromkeys(line))
    ids = list(wanted)
    by_id: dict[str, Entry] = dict(zip(ids, view.entries(ids), strict=True)) if ids else {}
    for row in rows:
        if row.kind == "entry":
            row.entry = by_id[row.entry_id]
            if row.compacted_by and entry_to_message(row.entry) is None and row.entry.get("type") != "compaction":
                row.compacted_by = ""  # settings and labels were never messages: nothing was left out
        elif row.kind == "branch":
            head = [by_id[entry_id] for entry_id in name_lines[row.entry_id]]
            row.name_entry = next((entry for entry in head if entry.get("type") == "message"), head[0])


def tree_window(provider: SessionTreeProvider, session_id: str, *, focus_entry_id: str | None = None) -> TreeWindow:
    """The first view of a session's tree: the main line from the root through
    the leaf, folded branches, collapsed runs; unfolded down to
    ``focus_entry_id`` when one is given."""
    with provider.read(session_id) as view:
        skeleton = read_skeleton(view)
        layout = _Layout(skeleton, focus_entry_id)
        rows = layout.top_rows()
        rows.extend(_unreachable_rows(skeleton, layout))
        window = TreeWindow(skeleton, rows, layout.focus_id)
        _fill_payloads(view, window)
    return window


def branch_window(provider: SessionTreeProvider, session_id: str, entry_id: str, *, level: int = 1) -> TreeWindow:
    """The rows of the folded branch that starts at ``entry_id``."""
    from sessiontree.core.errors import EntryNotFound

    with provider.read(session_id) as view:
        skeleton = read_skeleton(view)
        if entry_id not in skeleton.parent:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        layout = _Layout(skeleton, None)
        window = TreeWindow(skeleton, layout.line_rows(entry_id, level))
        _fill_payloads(view, window)
    return window


def run_window(
    provider: SessionTreeProvider, session_id: str, entry_id: str, count: int, *, level: int = 0
) -> TreeWindow:
    """The rows of a collapsed run: ``count`` entries down the line from
    ``entry_id``, at most ``RUN_CHUNK`` of them shown, the rest a run again."""
    from sessiontree.core.errors import EntryNotFound

    with provider.read(session_id) as view:
        skeleton = read_skeleton(view)
        if entry_id not in skeleton.parent:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        layout = _Layout(skeleton, None)
        # One entry past the run: the line goes on there, so it is not a branch.
        line = _line(skeleton, entry_id, skeleton.active, limit=max(1, count) + 1)
        ids = line[: max(1, count)]
        rows: list[TreeRow] = []
        for index in range(min(len(ids), RUN_CHUNK)):
            rows.extend(layout.entry_with_branches(line, index, level))
        if len(ids) > RUN_CHUNK:
            rows.append(layout.run_row(ids[RUN_CHUNK:], level))
        window = TreeWindow(skeleton, rows)
        _fill_payloads(view, window)
    return window
