"""A window onto a session's entry tree: what a tree view renders first, and
the pieces it loads on demand.

A session may hold 100,000 entries; a page cannot show them all, and does not
need to. The tree is laid out as *lines*: from an entry, the line continues
through the child on the active path (else the one leading to a focused
entry, else the first child), and every other child starts a *folded branch*
one level deeper, loaded when it is opened. On a line, the entries worth
seeing stay visible (the line's ends, branch points, labelled entries,
compactions and branch summaries, the leaf, the entry asked for, a few
neighbours of each, the last entries before the leaf); long stretches between
them collapse into a *run* ("312 entries"), loaded when it is expanded.

Everything comes from the session's skeleton (id → parent, append order), its
label, compaction and branch-summary entries, and the payloads of the entries
shown: a fixed number of reads whatever the size. The leaf-independent part
(children, branch points, labels, markers) is kept per process for a few
sessions, keyed by what identifies their content (an append-only session with
the same entry count holds the same entries), so a second view of a large
session does not walk all of it again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontree.core.context_builder import entry_to_message
from sessiontree.core.errors import EntryNotFound
from sessiontree.core.path import resolve_latest_labels, walk_path
from sessiontree.core.types import Entry, LabelInfo
from sessiontree.providers import keyed_reads
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
# Branches unfolded down to a focused entry, at most (deeper ones stay folded).
MAX_OPEN_DEPTH = 50
# Sessions whose shape is kept per process, and their entries in all at most
# (a shape holds a few hundred bytes an entry: the budget bounds a worker's
# memory whatever the sessions' sizes; a larger shape is used and dropped).
SHAPE_CACHE_SIZE = 8
SHAPE_CACHE_ENTRIES = 1_000_000
# From this many entries, on a storage that reads by key (path facts), a
# window reads only what it shows: the end of its line, the first entries,
# the folded branches on the way, their labels (``_KeyedRead``). Below it the
# whole shape, kept per process, is cheaper (measured side by side: the page
# costs the same both ways at ~2,000 entries; the keyed one 1.1x (`file`) to
# 1.4x (`mysql`) at 1,000, 0.5-0.7x at 5,000, 0.2-0.3x at 20,000).
KEYED_FROM = 2000
# Entries of the main line read back from its end; above them, after the
# root's first entries, one run ("N earlier entries", loaded on demand).
LINE_WINDOW = 600
# Entries read below folded branches (to size and name them) at most; past
# it the window is laid out from the whole shape instead.
BRANCH_READ_LIMIT = 20_000
# Entries read below a folded branch that stays folded: past it, the branch
# shows as "more than BRANCH_PEEK entries" (its size is read when it opens).
BRANCH_PEEK = 200

MARKER_TYPES = ("compaction", "branch_summary")


# --- the shape: everything that does not depend on the leaf ----------------------------------


class TreeShape:
    """Children, branch points, labels and markers of one session's entries."""

    def __init__(self, parents: Mapping[str, Any], small: Sequence[Entry]) -> None:
        self.parent = parents  # as stored: a parent that names no entry makes a root
        children: dict[str | None, list[str]] = {}
        seen: set[str] = set()
        forward = False
        for entry_id, parent_id in parents.items():
            if parent_id is not None and parent_id not in seen:
                # Named before it appears: a missing parent (a root) or a damaged order.
                if parent_id in parents and parent_id != entry_id:
                    forward = True
                else:
                    parent_id = None
            seen.add(entry_id)
            kids = children.get(parent_id)
            if kids is None:
                children[parent_id] = [entry_id]
            else:
                kids.append(entry_id)
        self.children = children
        self.count = len(seen)
        self.forward = forward
        self.branch_points = frozenset(key for key, kids in children.items() if key is not None and len(kids) > 1)
        self.labels: dict[str, LabelInfo] = resolve_latest_labels(small)
        self.markers: dict[str, Entry] = {e["id"]: e for e in small if e.get("type") in MARKER_TYPES}
        self._sizes: dict[str, int] = {}

    def parent_of(self, entry_id: str) -> str | None:
        parent_id = self.parent.get(entry_id)
        return parent_id if parent_id is not None and parent_id != entry_id and parent_id in self.parent else None

    def subtree_size(self, entry_id: str) -> int:
        size = self._sizes.get(entry_id)
        if size is None:
            size = 0
            stack = [entry_id]
            seen: set[str] = set()
            while stack:
                current = stack.pop()
                if current in seen:  # pragma: no cover - only a damaged file has a cycle
                    continue
                seen.add(current)
                size += 1
                stack.extend(self.children.get(current, ()))
            self._sizes[entry_id] = size
        return size

    def depth_of(self, entry_id: str) -> int:
        return len(walk_path(entry_id, self.parent)) - 1

    def tips(self) -> list[str]:
        """Entries without children (the ends of branches), append order."""
        return [entry_id for entry_id in self.parent if entry_id not in self.children]

    def unreachable(self) -> list[str]:
        """Entries no root leads to (a parent cycle in a damaged file), append order."""
        if not self.forward:
            return []
        reached: set[str] = set()
        stack = list(self.children.get(None, ()))
        while stack:
            current = stack.pop()
            if current not in reached:
                reached.add(current)
                stack.extend(self.children.get(current, ()))
        return [entry_id for entry_id in self.parent if entry_id not in reached]


_shapes: OrderedDict[tuple[Any, ...], TreeShape] = OrderedDict()
_shapes_lock = threading.Lock()


# The number of markers of a large session (its page's summary), kept per
# process under the shape's key: the same entry count means the same entries,
# and a marker never changes type (a count over the type index costs 3 ms at
# 1M entries on MariaDB, growing with the session).
_marker_counts: OrderedDict[tuple[Any, ...], int] = OrderedDict()
MARKER_COUNTS_KEPT = 256


def clear_shape_cache() -> None:
    with _shapes_lock:
        _shapes.clear()
        _marker_counts.clear()


def marker_count(view: Any) -> int:
    """How many compactions and branch summaries the session holds (by key,
    kept per process for the same content)."""
    key = _shape_key(view.state)
    if key is not None:
        with _shapes_lock:
            if key in _marker_counts:
                _marker_counts.move_to_end(key)
                return _marker_counts[key]
    count = keyed_reads.count_types(view, MARKER_TYPES)
    if key is not None:
        with _shapes_lock:
            _marker_counts[key] = count
            while len(_marker_counts) > MARKER_COUNTS_KEPT:
                _marker_counts.popitem(last=False)
    return count


def _shape_key(state: Any) -> tuple[Any, ...] | None:
    pk = getattr(state, "pk", None)
    if pk is None:
        return None
    return (
        getattr(state, "provider", None),
        pk,
        state.session_id,
        state.entry_count,
        getattr(state, "root_entry_id", None),
        state.in_flight_entry_id,
    )


def read_shape(view: Any) -> TreeShape:
    """The shape of the session ``view`` reads, from the per-process cache when
    the session's content is unchanged (same entry count, root and stream)."""
    key = _shape_key(view.state)
    if key is not None:
        with _shapes_lock:
            shape = _shapes.get(key)
            if shape is not None:
                _shapes.move_to_end(key)
                return shape
    shape = TreeShape(view.parents(), view.all_entries(types=("label", *MARKER_TYPES)))
    if key is not None and shape.count <= SHAPE_CACHE_ENTRIES:
        with _shapes_lock:
            _shapes[key] = shape
            total = sum(kept.count for kept in _shapes.values())
            while len(_shapes) > SHAPE_CACHE_SIZE or total > SHAPE_CACHE_ENTRIES:
                total -= _shapes.popitem(last=False)[1].count
    return shape


# --- the skeleton: the shape seen from the current leaf -------------------------------------


@dataclass
class TreeSkeleton:
    session_id: str
    leaf_entry_id: str | None
    status: str
    shape: TreeShape
    active_path: list[str]
    compacted_by: dict[str, str]  # active-path entry → the compaction that left it out of the context
    in_flight_entry_id: str | None = None
    active: frozenset[str] = frozenset()
    # Read by key (a large session): what the page's summary says, counted
    # without the whole path (``None``: from ``active_path``/``markers``/``compacted_by``).
    active_count: int | None = None
    markers_count: int | None = None
    compacted_count_known: int | None = None

    @property
    def entry_count(self) -> int:
        return self.shape.count

    @property
    def active_length(self) -> int:
        return self.active_count if self.active_count is not None else len(self.active_path)

    @property
    def marker_count(self) -> int:
        return self.markers_count if self.markers_count is not None else len(self.shape.markers)

    @property
    def compacted_count(self) -> int:
        return self.compacted_count_known if self.compacted_count_known is not None else len(self.compacted_by)

    @property
    def labels(self) -> dict[str, LabelInfo]:
        return self.shape.labels

    @property
    def markers(self) -> dict[str, Entry]:
        return self.shape.markers

    @property
    def tips(self) -> list[str]:
        return self.shape.tips()

    def has(self, entry_id: str) -> bool:
        return entry_id in self.shape.parent


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


def read_skeleton(view: Any) -> TreeSkeleton:
    """The skeleton of the session ``view`` reads (a provider ``read()`` view)."""
    state = view.state
    shape = read_shape(view)
    leaf_id = state.leaf_entry_id
    active_path = walk_path(leaf_id, shape.parent) if leaf_id is not None and leaf_id in shape.parent else []
    return TreeSkeleton(
        session_id=state.session_id,
        leaf_entry_id=leaf_id,
        status=state.status,
        shape=shape,
        active_path=active_path,
        compacted_by=compacted_entries(active_path, shape.markers),
        in_flight_entry_id=state.in_flight_entry_id,
        active=frozenset(active_path),
    )


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
    size_more: bool = False  # branch: ``size`` is a lower bound (a large branch, read in part)
    name_entry: Entry | None = None  # branch: the entry it is named by (its first message)
    open: bool = False  # branch: shown unfolded (it leads to the focused entry)
    rows: list[TreeRow] = field(default_factory=list)  # branch: its rows when open
    # An entry whose parent is a branch point: its place among the alternatives
    # (1-based), how many there are, and the alternatives before and after it.
    sibling_index: int = 0
    sibling_count: int = 0
    prev_sibling: str | None = None
    next_sibling: str | None = None
    child_count: int = 0  # a branch point's children
    marker: str = ""  # filled by the face that shows the row
    preview: str = ""
    body: Any = None  # the entry's readable body (HTML), filled by the face


@dataclass
class TreeWindow:
    skeleton: TreeSkeleton
    rows: list[TreeRow]
    focus_entry_id: str | None = None
    line_entry_id: str | None = None  # the main line goes through this entry (else the active path)

    def iter_rows(self) -> Iterable[TreeRow]:
        stack = list(reversed(self.rows))
        while stack:
            row = stack.pop()
            yield row
            stack.extend(reversed(row.rows))

    @property
    def entry_rows(self) -> list[TreeRow]:
        return [row for row in self.iter_rows() if row.kind == "entry"]


def _pick(kids: list[str], *preferences: frozenset[str] | set[str]) -> str:
    for prefer in preferences:
        for kid in kids:
            if kid in prefer:
                return kid
    return kids[0]


def _line(
    shape: TreeShape,
    start_id: str,
    prefer: frozenset[str] | set[str],
    limit: int | None = None,
    then: frozenset[str] | set[str] = frozenset(),
    first: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """From ``start_id`` down: at each step the child in ``first`` (the path
    to the entry the line is asked to go through), else the one in ``prefer``
    (the active path), else the one in ``then`` (the way to a focused entry),
    else the first."""
    children = shape.children
    ids = [start_id]
    current = start_id
    while limit is None or len(ids) < limit:
        kids = children.get(current)
        if not kids:
            break
        current = kids[0] if len(kids) == 1 else _pick(kids, first, prefer, then)
        ids.append(current)
        if len(ids) > shape.count:  # pragma: no cover - children come from a parent map: no cycle reaches here
            break
    return ids


class _Layout:
    def __init__(self, skeleton: TreeSkeleton, focus_id: str | None, line_id: str | None = None) -> None:
        self.skeleton = skeleton
        self.shape = skeleton.shape
        self.focus_id = focus_id if focus_id is not None and skeleton.has(focus_id) else None
        self.focus_path: frozenset[str] = (
            frozenset(walk_path(self.focus_id, self.shape.parent)) if self.focus_id else frozenset()
        )
        self.line_id = line_id if line_id is not None and skeleton.has(line_id) else None
        # The main line: the path to the entry asked for, else the active path.
        self.main_path: list[str] = (
            walk_path(self.line_id, self.shape.parent) if self.line_id is not None else list(skeleton.active_path)
        )
        self.line_path: frozenset[str] = frozenset(self.main_path) if self.line_id is not None else frozenset()
        self.budget = MAX_ROWS
        self.open_depth = 0

    def entry_row(self, entry_id: str, level: int, depth: int) -> TreeRow:
        sk = self.skeleton
        label = sk.labels.get(entry_id)
        row = TreeRow(
            kind="entry",
            level=level,
            entry_id=entry_id,
            depth=depth,
            on_active_path=entry_id in sk.active,
            is_leaf=entry_id == sk.leaf_entry_id,
            is_branch_point=entry_id in self.shape.branch_points,
            label=label["label"] if label else "",
            compacted_by=sk.compacted_by.get(entry_id, ""),
            in_flight=entry_id == sk.in_flight_entry_id,
        )
        if row.is_branch_point:
            row.child_count = len(self.shape.children.get(entry_id, ()))
        parent_id = self.shape.parent_of(entry_id)
        if parent_id is not None and parent_id in self.shape.branch_points:
            siblings = self.shape.children[parent_id]
            index = siblings.index(entry_id)
            row.sibling_index, row.sibling_count = index + 1, len(siblings)
            row.prev_sibling = siblings[index - 1] if index > 0 else None
            row.next_sibling = siblings[index + 1] if index + 1 < len(siblings) else None
        return row

    def branch_row(self, entry_id: str, level: int, depth: int) -> TreeRow:
        row = TreeRow(kind="branch", level=level, entry_id=entry_id, size=self.shape.subtree_size(entry_id))
        row.size_more = entry_id in getattr(self.shape, "partial", ())
        if entry_id in self.focus_path and self.open_depth < MAX_OPEN_DEPTH:
            row.open = True
            self.open_depth += 1
            row.rows = self.line_rows(entry_id, level, depth)
            self.open_depth -= 1
        return row

    def run_row(self, ids: Sequence[str], level: int) -> TreeRow:
        return TreeRow(kind="run", level=level, entry_id=ids[0], size=len(ids))

    def _kept(self, ids: Sequence[str], *, main: bool) -> list[int]:
        """Sorted indices of ``ids`` to show: the ends, the entries worth seeing and their neighbours."""
        shape = self.shape
        count = len(ids)
        line = set(ids)
        notable = set(shape.branch_points & line)
        notable.update(entry_id for entry_id in shape.labels if entry_id in line)
        notable.update(entry_id for entry_id in shape.markers if entry_id in line)
        for entry_id in (self.skeleton.leaf_entry_id, self.focus_id):
            if entry_id is not None and entry_id in line:
                notable.add(entry_id)
        position = dict(zip(ids, range(count), strict=True)) if notable else {}
        centres = {0, count - 1, *(position[entry_id] for entry_id in notable)}
        if main:
            centres.update(range(max(0, count - TAIL), count))
        kept: set[int] = set()
        for centre in centres:
            kept.update(range(max(0, centre - EDGE), min(count, centre + EDGE + 1)))
        return sorted(kept)

    def line_rows(self, start_id: str, level: int, depth: int, *, main: bool = False) -> list[TreeRow]:
        """The rows of the line from ``start_id`` (at ``depth``): kept entries, folded branches, runs."""
        sk = self.skeleton
        if main and self.main_path and self.main_path[0] == start_id:
            # The main line is the active path (or the path to the entry asked for), then on from its end.
            ids = list(self.main_path)
            ids.extend(_line(self.shape, ids[-1], sk.active, then=self.focus_path)[1:])
        else:
            ids = _line(self.shape, start_id, sk.active, then=self.focus_path, first=self.line_path)
        kept = self._kept(ids, main=main)
        rows: list[TreeRow] = []
        previous = -1
        for position, index in enumerate(kept):
            gap = index - previous - 1
            if gap >= MIN_RUN:
                rows.append(self.run_row(ids[previous + 1 : index], level))
                self.budget -= 1
            elif gap > 0:
                for hidden in range(previous + 1, index):
                    rows.extend(self.entry_with_branches(ids, hidden, level, depth + hidden))
            if self.budget <= 0:
                rows.append(self.run_row(ids[index:], level))
                return rows
            rows.extend(self.entry_with_branches(ids, index, level, depth + index))
            previous = index
            if position == len(kept) - 1 and index < len(ids) - 1:  # pragma: no cover - the last entry is kept
                rows.append(self.run_row(ids[index + 1 :], level))
        return rows

    def entry_with_branches(self, ids: Sequence[str], index: int, level: int, depth: int) -> list[TreeRow]:
        entry_id = ids[index]
        rows = [self.entry_row(entry_id, level, depth)]
        self.budget -= 1
        if entry_id in self.shape.branch_points:
            next_id = ids[index + 1] if index + 1 < len(ids) else None
            for kid in self.shape.children.get(entry_id, ()):
                if kid != next_id:
                    rows.append(self.branch_row(kid, level + 1, depth + 1))
                    self.budget -= 1
        return rows

    def top_rows(self) -> list[TreeRow]:
        sk = self.skeleton
        roots = self.shape.children.get(None, [])
        if not roots:
            return []
        in_focus = next((root for root in roots if root in self.focus_path), roots[0])
        main = next((root for root in roots if root in self.line_path), None) or next(
            (root for root in roots if root in sk.active), in_focus
        )
        rows = [self.branch_row(root, 1, 0) for root in roots if root != main]
        rows.extend(self.line_rows(main, 0, 0, main=True))
        return rows

    def unreachable_rows(self) -> list[TreeRow]:
        rows = []
        for entry_id in self.shape.unreachable()[:MAX_UNREACHABLE]:
            row = self.entry_row(entry_id, 0, 0)
            row.unreachable = True
            rows.append(row)
        return rows


def _fill_payloads(view: Any, window: TreeWindow, known: Mapping[str, Entry] | None = None) -> None:
    """Load the payloads of the window's entries and of the entries folded
    branches are named by: one batch."""
    shape = window.skeleton.shape
    rows = list(window.iter_rows())
    wanted: dict[str, None] = {}
    name_lines: dict[str, list[str]] = {}
    for row in rows:
        if row.kind == "entry":
            wanted[row.entry_id] = None
        elif row.kind == "branch":
            line = _line(shape, row.entry_id, window.skeleton.active, limit=NAME_LOOKAHEAD)
            name_lines[row.entry_id] = line
            wanted.update(dict.fromkeys(line))
    ids = [entry_id for entry_id in wanted if entry_id not in known] if known else list(wanted)
    by_id: dict[str, Entry] = dict(zip(ids, view.entries(ids), strict=True)) if ids else {}
    if known:
        by_id.update((entry_id, known[entry_id]) for entry_id in wanted if entry_id in known)
    for row in rows:
        if row.kind == "entry":
            row.entry = by_id[row.entry_id]
            if row.compacted_by and entry_to_message(row.entry) is None and row.entry.get("type") != "compaction":
                row.compacted_by = ""  # settings and labels were never messages: nothing was left out
        elif row.kind == "branch":
            head = [by_id[entry_id] for entry_id in name_lines[row.entry_id]]
            row.name_entry = next((entry for entry in head if entry.get("type") == "message"), head[0])


# --- large sessions: a window read by key ---------------------------------------------------


class LocalShape(TreeShape):
    """The part of a large session's shape that a window shows, read by key
    (``_KeyedRead``): the entries of its line, their children, the folded
    branches below them (their first ``BRANCH_PEEK`` entries, or whole when
    one opens), the labels aimed at them and the markers among them. It
    answers ``TreeShape``'s questions for those entries only (``tips`` are
    those of what was read); ``count`` is the whole session's."""

    parent: dict[str, Any]

    def __init__(self, count: int) -> None:
        self.parent = {}
        self.children = {}
        self.count = count
        self.forward = False
        self.branch_points = frozenset()
        self.labels = {}
        self.markers = {}
        self._sizes = {}
        self.depth: dict[str, int] = {}
        self.partial: set[str] = set()  # folded branches read in part (their size is a lower bound)

    def depth_of(self, entry_id: str) -> int:
        return self.depth[entry_id]

    def tips(self) -> list[str]:
        return [entry_id for entry_id in self.parent if not self.children.get(entry_id)]

    def unreachable(self) -> list[str]:
        return []


class _NotByKey(Exception):
    """The window cannot be read by key (the caller lays out the whole shape)."""


class _KeyedRead:
    """What a window of a large session needs, read by key around its line:
    a fixed number of reads of the size of what it shows, whatever the
    session's length (the storage's path facts: depth, jumps, the nearest
    compaction). Raises ``_NotByKey`` where the facts cannot say (damaged
    or streaming trees, a focus or line far from the leaf, huge branches)."""

    def __init__(self, view: Any, named: Sequence[str | None]) -> None:
        state = view.state
        if getattr(view, "entry_facts", None) is None or state.entry_count < KEYED_FROM:
            raise _NotByKey
        if state.leaf_entry_id is None or state.in_flight_entry_id is not None:
            raise _NotByKey
        if len(keyed_reads.root_ids(view, 2)) != 1:
            raise _NotByKey  # orphans or a damaged order: the whole shape says what is unreachable
        self.view = view
        self.leaf_id: str = state.leaf_entry_id
        wanted = [self.leaf_id, *(entry_id for entry_id in named if entry_id)]
        self.facts = dict(keyed_reads.entry_facts(view, wanted))
        leaf = self.facts.get(self.leaf_id)
        if leaf is None or not leaf.exact:
            raise _NotByKey
        self.shape = LocalShape(state.entry_count)
        self.entries: dict[str, Entry] = {}
        self.branch_budget = BRANCH_READ_LIMIT
        self.kids: dict[str, list[str]] = {}  # children read with a path (``path(children=True)``)
        # Entries of branches that stay folded (read to size and name them): never a row of this window.
        self.folded: set[str] = set()

    def known(self, entry_id: str | None) -> str | None:
        """``entry_id`` when the session holds it (with exact facts)."""
        facts = self.facts.get(entry_id) if entry_id is not None else None
        if facts is None:
            return None
        if not facts.exact:
            raise _NotByKey
        return entry_id

    def depth(self, entry_id: str) -> int:
        return self.facts[entry_id].depth

    def path(self, end_id: str, top: int, bottom: int, *, children: bool = False) -> list[str]:
        """The ids at depths ``top``..``bottom`` of ``end_id``'s path
        (``children``: their children too, read with them, for ``read_children``)."""
        start = end_id if bottom == self.depth(end_id) else keyed_reads.ancestor_at(self.view, end_id, bottom)
        if start is None:
            raise _NotByKey
        if children:
            ids, kids = keyed_reads.path_and_children(self.view, start, bottom - top)
            self.kids.update(kids)
        else:
            ids = keyed_reads.path_ids(self.view, start, bottom - top)
        if len(ids) != bottom - top + 1 or ids[-1] != start:
            raise _NotByKey
        return ids

    def add_line(self, ids: Sequence[str], top: int) -> None:
        """A stretch of a path, starting at depth ``top``."""
        shape = self.shape
        for index, entry_id in enumerate(ids):
            shape.depth[entry_id] = top + index
            if index:
                shape.parent[entry_id] = ids[index - 1]
            elif entry_id not in shape.parent:
                shape.parent[entry_id] = None  # a root, or above what was read

    def read_children(self, ids: Sequence[str], on_line: Mapping[str, str | None]) -> None:
        """Children of ``ids`` (``on_line``: each one's next entry on the line,
        read already); every other child starts a folded branch, read whole."""
        shape = self.shape
        kids = self.kids
        missing = [entry_id for entry_id in ids if entry_id not in kids]
        if missing:
            kids = {**kids, **keyed_reads.children_of(self.view, missing)}
        folded: list[tuple[str, str]] = []
        for entry_id in ids:
            children = kids.get(entry_id, [])
            shape.children[entry_id] = list(children)
            folded.extend(
                (kid, entry_id) for kid in children if kid != on_line.get(entry_id) and kid not in shape.parent
            )
        whole = {kid for kid, _ in folded if self.leads_to_focus(kid)}
        # The branches that stay folded: their first entries, all in one read.
        peeked = keyed_reads.subtrees(self.view, [kid for kid, _ in folded if kid not in whole], limit=BRANCH_PEEK)
        for kid, parent_id in folded:
            self.read_branch(kid, parent_id, whole=kid in whole, below=peeked.get(kid))

    focus_id: str | None = None

    def leads_to_focus(self, root_id: str) -> bool:
        """Whether the focused entry lies in the branch from ``root_id`` (it opens: read it whole)."""
        if self.focus_id is None:
            return False
        depth, focus = self.facts.get(root_id), self.facts[self.focus_id]
        if depth is None:
            depth = keyed_reads.entry_facts(self.view, [root_id]).get(root_id)
            if depth is None:
                return False
            self.facts[root_id] = depth
        if depth.depth > focus.depth:
            return False
        return keyed_reads.ancestor_at(self.view, self.focus_id, depth.depth) == root_id

    def read_branch(
        self, root_id: str, parent_id: str, *, whole: bool = True, below: dict[str, str | None] | None = None
    ) -> None:
        """The branch from ``root_id`` (a child of ``parent_id``): whole, or its
        first ``BRANCH_PEEK`` entries (``below``: read already)."""
        if whole:
            below = keyed_reads.subtree_within(self.view, root_id, self.branch_budget)
            if below is None:
                raise _NotByKey
        else:
            if below is None:
                below = keyed_reads.subtree(self.view, root_id, limit=BRANCH_PEEK)
            if len(below) > BRANCH_PEEK:
                self.shape.partial.add(root_id)
                self.shape._sizes[root_id] = BRANCH_PEEK
        self.branch_budget -= len(below)
        shape = self.shape
        base = shape.depth[parent_id] + 1
        for entry_id, parent in below.items():
            if entry_id in shape.parent:
                continue
            if entry_id != root_id and parent not in shape.depth:
                continue  # below what a partial read reached
            if not whole:
                self.folded.add(entry_id)
            shape.parent[entry_id] = parent_id if entry_id == root_id else parent
            shape.depth[entry_id] = base if entry_id == root_id else shape.depth[parent] + 1  # type: ignore[index]
            if entry_id != root_id and parent is not None:
                shape.children.setdefault(parent, []).append(entry_id)
            shape.children.setdefault(entry_id, [])

    def finish(self, line_ids: Sequence[str]) -> None:
        """Branch points and labels of what was read, the markers among ``line_ids``."""
        shape = self.shape
        shape.branch_points = frozenset(key for key, kids in shape.children.items() if key and len(kids) > 1)
        # Labels show on entry rows: those of folded branches' entries are not read.
        local = [entry_id for entry_id in shape.parent if entry_id not in self.folded]
        shape.labels = {
            target: info
            for target, info in resolve_latest_labels(
                keyed_reads.entries_targeting_any(self.view, local, ("label",))
            ).items()
            if target in shape.parent
        }
        # The markers among them (their payloads: a compaction names its first kept entry).
        types = keyed_reads.entry_types(self.view, [i for i in dict.fromkeys(line_ids) if i not in self.entries])
        wanted = [entry_id for entry_id, kind in types.items() if kind in MARKER_TYPES]
        if wanted:
            self.entries.update(zip(wanted, self.view.entries(wanted), strict=True))
        shape.markers = {
            entry_id: entry for entry_id, entry in self.entries.items() if entry.get("type") in MARKER_TYPES
        }

    def active_ids(self, end: str, top: int, line_ids: Sequence[str]) -> frozenset[str]:
        """The read entries on the active path (the line's, when it ends at the
        leaf; else the leaf's path from depth ``top``, which must meet the line there)."""
        if end == self.leaf_id:
            return frozenset(line_ids)
        depth_of_leaf = self.depth(self.leaf_id)
        if top > depth_of_leaf or depth_of_leaf - top > 3 * LINE_WINDOW:
            raise _NotByKey
        path = self.path(self.leaf_id, top, depth_of_leaf)
        shape = self.shape
        if shape.depth.get(path[0]) != top:
            raise _NotByKey  # the leaf's path leaves the line above the window
        above = [entry_id for entry_id in line_ids if shape.depth[entry_id] < top]
        return frozenset(entry_id for entry_id in path if entry_id in shape.parent) | frozenset(above)

    def compacted(self, active: frozenset[str]) -> tuple[dict[str, str], int]:
        """The read active-path entries the context leaves out (id → the
        compaction), and how many there are on the whole path."""
        compaction_id = self.facts[self.leaf_id].compaction_id
        if compaction_id is None:
            return {}, 0
        compaction = self.view.entries([compaction_id])[0]
        first_kept = compaction.get("firstKeptEntryId")
        found = keyed_reads.entry_facts(
            self.view, [compaction_id, *([first_kept] if isinstance(first_kept, str) else [])]
        )
        if compaction_id not in found:
            raise _NotByKey
        cut = found[compaction_id].depth
        if isinstance(first_kept, str) and first_kept in found and found[first_kept].depth < cut:
            depth = found[first_kept].depth
            if keyed_reads.ancestor_at(self.view, compaction_id, depth) == first_kept:
                cut = depth
        shape = self.shape
        return {entry_id: compaction_id for entry_id in active if shape.depth[entry_id] < cut}, cut

    def skeleton(self, active: frozenset[str]) -> TreeSkeleton:
        state = self.view.state
        compacted_by, cut = self.compacted(active)
        shape = self.shape
        return TreeSkeleton(
            session_id=state.session_id,
            leaf_entry_id=self.leaf_id,
            status=state.status,
            shape=shape,
            active_path=sorted(active, key=shape.depth.__getitem__),
            compacted_by=compacted_by,
            in_flight_entry_id=None,
            active=active,
            active_count=self.depth(self.leaf_id) + 1,
            markers_count=marker_count(self.view),
            compacted_count_known=cut,
        )


def _keyed_tree_window(view: Any, focus_entry_id: str | None, line_entry_id: str | None) -> TreeWindow:
    """``tree_window`` of a large session, read by key (``_NotByKey``: lay out the whole shape)."""
    read = _KeyedRead(view, [focus_entry_id, line_entry_id])
    line_id = read.known(line_entry_id)
    focus_id = read.known(focus_entry_id)
    read.focus_id = focus_id
    end = line_id or read.leaf_id
    bottom = read.depth(end)
    top = max(0, bottom - LINE_WINDOW + 1)
    # Above the window, the line shows the root's first entries and the
    # focused entry's neighbours (when it is on the line up there); the
    # stretches between collapse into runs.
    shown: list[list[int]] = []
    if top:
        shown.append([0, EDGE])
        if focus_id is not None:
            depth = read.depth(focus_id)
            if depth < top and keyed_reads.ancestor_at(view, end, depth) == focus_id:
                shown.append([max(0, depth - EDGE), min(top - 1, depth + EDGE)])
    merged: list[list[int]] = []
    for first, last in sorted(shown):
        if merged and first - merged[-1][1] - 1 < MIN_RUN:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    if merged and top - merged[-1][1] - 1 < MIN_RUN:
        top = merged.pop()[0]  # a short stretch between: the window starts higher
    window = read.path(end, top, bottom, children=True)
    read.add_line(window, top)
    # Each stretch reads one entry past what it shows: the next one on the line (a run's first).
    stretches = [(first, read.path(end, first, last + 1)) for first, last in merged]
    for first, ids in stretches:
        read.add_line(ids, first)
    on_line: dict[str, str | None] = {}
    for ids in [*(ids for _, ids in stretches), window]:
        on_line.update(zip(ids, [*ids[1:], None], strict=True))
    # Each stretch's last entry only names the run after it: neither its children nor its payload are read.
    line_ids = [*(entry_id for _, ids in stretches for entry_id in ids[:-1]), *window]
    read.read_children(line_ids, on_line)  # the end's children too: the line goes on below it
    if focus_id is not None and focus_id not in read.shape.parent:
        raise _NotByKey  # in a branch that leaves the line above the window
    read.finish(line_ids)
    skeleton = read.skeleton(read.active_ids(end, top, line_ids))
    layout = _Layout(skeleton, None, None)
    layout.focus_id = focus_id
    layout.focus_path = frozenset(walk_path(focus_id, read.shape.parent)) if focus_id else frozenset()
    layout.line_id = line_id
    layout.main_path = list(window)
    layout.line_path = frozenset(window) if line_id is not None else frozenset()
    rows: list[TreeRow] = []
    for first, ids in stretches:
        for index in range(len(ids) - 1):
            rows.extend(layout.entry_with_branches(ids, index, 0, first + index))
        following = next((start for start, _ in stretches if start > first), top)
        gap = following - (first + len(ids) - 1)
        if gap > 0:
            rows.append(TreeRow(kind="run", level=0, entry_id=ids[-1], size=gap))
            layout.budget -= 1
    rows.extend(layout.line_rows(window[0], 0, top, main=True))
    result = TreeWindow(skeleton, rows, focus_id, line_id)
    _fill_payloads(view, result, read.entries)
    return result


def _keyed_run_window(view: Any, entry_id: str, count: int, level: int, line_entry_id: str | None) -> TreeWindow:
    """``run_window`` of a run on the main line of a large session, read by
    key (``_NotByKey``: a run elsewhere, laid out from the whole shape)."""
    read = _KeyedRead(view, [entry_id, line_entry_id])
    start = read.known(entry_id)
    if start is None:
        raise _NotByKey
    line_id = read.known(line_entry_id)
    end = line_id or read.leaf_id
    bottom, depth = read.depth(end), read.depth(start)
    count = max(1, count)
    shown = min(count, RUN_CHUNK)
    if depth + shown > bottom or keyed_reads.ancestor_at(view, end, depth) != start:
        raise _NotByKey  # not on the line, or reaching below its end
    ids = read.path(end, depth, depth + shown)  # one past the shown ones: the line goes on there
    read.add_line(ids, depth)
    read.read_children(ids[:-1], dict(zip(ids, [*ids[1:], None], strict=True)))
    read.finish(ids[:-1])
    skeleton = read.skeleton(read.active_ids(end, depth, ids))
    layout = _Layout(skeleton, None, None)
    layout.line_id = line_id
    layout.line_path = frozenset(ids) if line_id is not None else frozenset()
    rows: list[TreeRow] = []
    for index in range(shown):
        rows.extend(layout.entry_with_branches(ids, index, level, depth + index))
    if count > shown:
        rows.append(TreeRow(kind="run", level=level, entry_id=ids[shown], size=count - shown))
    window = TreeWindow(skeleton, rows)
    _fill_payloads(view, window, read.entries)
    return window


def _keyed_branch_window(view: Any, entry_id: str, level: int) -> TreeWindow:
    """``branch_window`` of a large session: the branch read whole, by key
    (``_NotByKey``: too large, or facts that cannot say)."""
    read = _KeyedRead(view, [entry_id])
    start = read.known(entry_id)
    if start is None:
        raise _NotByKey
    below = keyed_reads.subtree_within(view, start, BRANCH_READ_LIMIT)
    if below is None:
        raise _NotByKey
    shape, depth = read.shape, read.depth(start)
    for child, parent in below.items():
        shape.parent[child] = None if child == start else parent
        shape.depth[child] = depth if child == start else shape.depth[parent] + 1  # type: ignore[index]
        shape.children.setdefault(child, [])
        if child != start and parent is not None:
            shape.children[parent].append(child)
    if depth:  # the branch's place among its parent's children (the alternatives pager)
        parent_id = keyed_reads.path_ids(view, start, 1)[0]
        shape.parent[start] = parent_id
        shape.parent.setdefault(parent_id, None)
        shape.depth[parent_id] = depth - 1
        shape.children[parent_id] = keyed_reads.children_of(view, [parent_id])[parent_id]
    depth_of_leaf = read.depth(read.leaf_id)
    on_leaf_path = depth <= depth_of_leaf and keyed_reads.ancestor_at(view, read.leaf_id, depth) == start
    if on_leaf_path and depth_of_leaf - depth > 3 * LINE_WINDOW:
        raise _NotByKey
    active = frozenset(read.path(read.leaf_id, depth, depth_of_leaf)) if on_leaf_path else frozenset()
    read.finish(_line(shape, start, active))  # the payloads of the line the rows follow
    skeleton = read.skeleton(active)
    layout = _Layout(skeleton, None, None)
    window = TreeWindow(skeleton, layout.line_rows(start, level, depth))
    _fill_payloads(view, window, read.entries)
    return window


def tree_window(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    focus_entry_id: str | None = None,
    line_entry_id: str | None = None,
) -> TreeWindow:
    """The first view of a session's tree: the main line from the root through
    the leaf, folded branches, collapsed runs; unfolded down to
    ``focus_entry_id`` when one is given. With ``line_entry_id`` the main line
    goes through that entry instead of the leaf (an alternative at a branch
    point, flipped to); the active path stays marked. An id the session does
    not hold is ignored: ``TreeWindow.focus_entry_id``/``line_entry_id`` say
    which were used."""
    with provider.read(session_id) as view:
        try:
            return _keyed_tree_window(view, focus_entry_id, line_entry_id)
        except _NotByKey:
            pass
        skeleton = read_skeleton(view)
        layout = _Layout(skeleton, focus_entry_id, line_entry_id)
        rows = layout.top_rows()
        rows.extend(layout.unreachable_rows())
        window = TreeWindow(skeleton, rows, layout.focus_id, layout.line_id)
        _fill_payloads(view, window)
    return window


def _known(skeleton: TreeSkeleton, session_id: str, entry_id: str) -> None:
    if not skeleton.has(entry_id):
        raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")


def branch_window(provider: SessionTreeProvider, session_id: str, entry_id: str, *, level: int = 1) -> TreeWindow:
    """The rows of the folded branch that starts at ``entry_id``."""
    with provider.read(session_id) as view:
        try:
            return _keyed_branch_window(view, entry_id, level)
        except _NotByKey:
            pass
        skeleton = read_skeleton(view)
        _known(skeleton, session_id, entry_id)
        layout = _Layout(skeleton, None)
        window = TreeWindow(skeleton, layout.line_rows(entry_id, level, skeleton.shape.depth_of(entry_id)))
        _fill_payloads(view, window)
    return window


def run_window(
    provider: SessionTreeProvider,
    session_id: str,
    entry_id: str,
    count: int,
    *,
    level: int = 0,
    line_entry_id: str | None = None,
) -> TreeWindow:
    """The rows of a collapsed run: ``count`` entries down the line from
    ``entry_id``, at most ``RUN_CHUNK`` of them shown, the rest a run again
    (down the path to ``line_entry_id`` when the page's main line goes there)."""
    with provider.read(session_id) as view:
        try:
            return _keyed_run_window(view, entry_id, count, level, line_entry_id)
        except _NotByKey:
            pass
        skeleton = read_skeleton(view)
        _known(skeleton, session_id, entry_id)
        layout = _Layout(skeleton, None, line_entry_id)
        # One entry past the run: the line goes on there, so it is not a branch.
        line = _line(skeleton.shape, entry_id, skeleton.active, limit=max(1, count) + 1, first=layout.line_path)
        ids = line[: max(1, count)]
        depth = skeleton.shape.depth_of(entry_id)
        rows: list[TreeRow] = []
        for index in range(min(len(ids), RUN_CHUNK)):
            rows.extend(layout.entry_with_branches(line, index, level, depth + index))
        if len(ids) > RUN_CHUNK:
            rows.append(layout.run_row(ids[RUN_CHUNK:], level))
        window = TreeWindow(skeleton, rows)
        _fill_payloads(view, window)
    return window


__all__ = [
    "BRANCH_READ_LIMIT",
    "EDGE",
    "KEYED_FROM",
    "LINE_WINDOW",
    "MAX_ROWS",
    "MIN_RUN",
    "RUN_CHUNK",
    "TAIL",
    "LocalShape",
    "TreeRow",
    "TreeShape",
    "TreeSkeleton",
    "TreeWindow",
    "branch_window",
    "clear_shape_cache",
    "compacted_entries",
    "read_shape",
    "read_skeleton",
    "run_window",
    "tree_window",
]
