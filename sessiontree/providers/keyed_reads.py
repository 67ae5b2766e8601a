"""Reads by key around one entry, for pages that show one entry (issue 23):
its path facts, the ids just above it, its children, the entries aimed at
it (labels, context edits) and the subtree under it.

Each asks the storage's own optional method first (a view may answer by
key: the mysql provider by its indexes, the file provider from its index)
and falls back to a generic answer from the port's ``parents()`` and
``all_entries()``, which every storage has. The optional view methods carry
the same names and signatures as the functions here, without ``view``, and
may answer ``None`` for "ask the generic way":

- ``entry_facts(ids) -> Mapping[str, PathFacts]``
- ``path_ids(entry_id, steps) -> list[str]``
- ``path_and_children(entry_id, steps) -> tuple[list[str], dict[str, list[str]]]``
- ``child_ids(entry_id) -> list[str]``
- ``children_of(ids) -> dict[str, list[str]]``
- ``entries_targeting(target_id, types) -> list[Entry]``
- ``entries_targeting_any(target_ids, types) -> list[Entry]``
- ``subtree(entry_id, limit=None) -> dict[str, str | None]`` (``limit``: may
  stop after more than ``limit`` entries; the caller then asks no more)
- ``subtrees(ids, limit) -> dict[str, dict[str, str | None]]``
- ``root_ids(limit) -> list[str]``
- ``count_types(types) -> int``
- ``entry_types(ids) -> dict[str, str]``
- ``ancestor_at(entry_id, depth) -> str | None``
- ``path_entries(entry_id, top, bottom) -> list[Entry] | None``
- ``custom_entries(custom_types, limit=None) -> list[Entry]``
- ``tool_results(tool_names, limit=None) -> list[Entry]``
- ``entries_with_key(key) -> list[Entry]``
- ``keys_complete() -> bool``
- ``ids_in_order(start, limit, types=None, before=False) -> list[tuple[int, str]]``
- ``entries_in_order(start, limit, types=None, before=False) -> list[tuple[int, Entry]]``
- ``position_of(entry_id) -> int | None``
- ``latest_tips(limit, scan) -> list[tuple[int, str]]``
- ``tail_parents(scan) -> list[tuple[int, str, Any]]``
- ``levels_below(ids, depth) -> list[list[tuple[str, str]]]``
- ``branch_walks(starts, stop_at, steps) -> dict[str, list[tuple[str, Any]]]``
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sessiontree.core import entry_keys
from sessiontree.core.path import resolve_latest_labels, walk_path
from sessiontree.core.path_facts import PathFacts, facts_in_order
from sessiontree.core.types import Entry, LabelInfo

from .port import StoredView


def entry_facts(view: StoredView, ids: Collection[str]) -> Mapping[str, PathFacts]:
    """The path facts (``core/path_facts.py``) of the ``ids`` that name stored
    entries. Generic: each one's path walked and its facts computed from it."""
    own = getattr(view, "entry_facts", None)
    found: Mapping[str, PathFacts] | None = own(ids) if own is not None else None
    if found is not None:
        return found
    parents = view.parents()
    out: dict[str, PathFacts] = {}
    for entry_id in dict.fromkeys(ids):
        if entry_id not in parents:
            continue
        out[entry_id] = facts_in_order(view.entries(walk_path(entry_id, parents)))[-1]
    return out


def path_ids(view: StoredView, entry_id: str, steps: int) -> list[str]:
    """``entry_id`` and its ``steps`` nearest ancestors (fewer near a root), root first."""
    own = getattr(view, "path_ids", None)
    found: list[str] | None = own(entry_id, steps) if own is not None else None
    if found is not None:
        return found
    parents = view.parents()
    out = [entry_id]
    seen = {entry_id}
    current: Any = parents.get(entry_id)
    while len(out) <= steps and isinstance(current, str) and current in parents and current not in seen:
        out.append(current)
        seen.add(current)
        current = parents.get(current)
    out.reverse()
    return out


def path_and_children(view: StoredView, entry_id: str, steps: int) -> tuple[list[str], dict[str, list[str]]]:
    """``path_ids`` and ``children_of`` those ids, read together where the
    storage can (a tree window's line and what branches off it)."""
    own = getattr(view, "path_and_children", None)
    found: tuple[list[str], dict[str, list[str]]] | None = own(entry_id, steps) if own is not None else None
    if found is not None:
        return found
    ids = path_ids(view, entry_id, steps)
    return ids, children_of(view, ids)


def ancestor_at(view: StoredView, entry_id: str, depth: int) -> str | None:
    """The ancestor of ``entry_id`` (itself included) at ``depth`` on its path,
    found by the path facts' jumps in O(log depth) steps where the storage
    has them; ``None`` when ``entry_id`` is unknown or ``depth`` is not on
    its path. Generic: the path walked up from the entry."""
    own = getattr(view, "ancestor_at", None)
    if own is not None:
        found: str | None = own(entry_id, depth)
        if found is not None:
            return found
    parents = view.parents()
    if entry_id not in parents or depth < 0:
        return None
    ids = walk_path(entry_id, parents)
    return ids[depth] if depth < len(ids) else None


def on_path(view: StoredView, leaf_id: str | None, ids: Collection[str]) -> set[str] | None:
    """Which of ``ids`` lie on the root-to-``leaf_id`` path (the leaf itself
    included), by the path facts: an entry at depth ``d`` is on it when the
    leaf's ancestor at ``d`` is that entry (O(log depth) each). Ids the
    session does not hold are not on it. ``None`` when the facts cannot say
    (a storage without them, facts that are not exact): read the path."""
    if leaf_id is None:
        return set()
    if getattr(view, "entry_facts", None) is None:
        return None
    wanted = list(dict.fromkeys(ids))
    facts = entry_facts(view, [leaf_id, *wanted])
    leaf = facts.get(leaf_id)
    if leaf is None or not leaf.exact:
        return None
    found: set[str] = set()
    for entry_id in wanted:
        own = facts.get(entry_id)
        if own is None:
            continue
        if not own.exact:
            return None
        if own.depth <= leaf.depth and ancestor_at(view, leaf_id, own.depth) == entry_id:
            found.add(entry_id)
    return found


def path_entries(view: StoredView, entry_id: str, top: int, bottom: int) -> list[Entry] | None:
    """The entries at depths ``top``..``bottom`` (inclusive, root first) of
    ``entry_id``'s path, ``bottom`` not below the entry: reached by the path
    facts' jumps, then walked by parent (O(log depth) + the entries read).
    ``None`` when the facts cannot say (unknown entry, depths off its path,
    rows that do not chain). Generic: ``ancestor_at``, ``path_ids``, ``entries``."""
    if not 0 <= top <= bottom:
        return None
    own = getattr(view, "path_entries", None)
    found: list[Entry] | None
    if own is not None:
        found = own(entry_id, top, bottom)
    else:
        start = ancestor_at(view, entry_id, bottom)
        if start is None:
            return None
        ids = path_ids(view, start, bottom - top)
        found = view.entries(ids) if len(ids) == bottom - top + 1 and ids[-1] == start else None
    if found is None or len(found) != bottom - top + 1:
        return None
    if any(found[i + 1].get("parentId") != found[i].get("id") for i in range(len(found) - 1)):
        return None
    return found


def child_ids(view: StoredView, entry_id: str) -> list[str]:
    """The entries whose parent is ``entry_id``, in append order."""
    own = getattr(view, "child_ids", None)
    found: list[str] | None = own(entry_id) if own is not None else None
    if found is not None:
        return found
    return [child for child, parent in view.parents().items() if parent == entry_id and child != entry_id]


def children_of(view: StoredView, ids: Collection[str]) -> dict[str, list[str]]:
    """Each of ``ids`` → the entries whose parent it is, in append order
    (an unknown id has none)."""
    own = getattr(view, "children_of", None)
    found: dict[str, list[str]] | None = own(ids) if own is not None else None
    if found is not None:
        return found
    wanted = dict.fromkeys(ids)
    out: dict[str, list[str]] = {entry_id: [] for entry_id in wanted}
    for child, parent in view.parents().items():
        if parent in out and child != parent:
            out[parent].append(child)
    return out


def entries_targeting(view: StoredView, target_id: str, types: Collection[str]) -> list[Entry]:
    """The entries of ``types`` (``label``, ``context_edit``) whose ``targetId`` is ``target_id``, in append order."""
    own = getattr(view, "entries_targeting", None)
    found: list[Entry] | None = own(target_id, types) if own is not None else None
    if found is not None:
        return found
    return [entry for entry in view.all_entries(types=types) if entry.get("targetId") == target_id]


def entries_targeting_any(view: StoredView, target_ids: Collection[str], types: Collection[str]) -> list[Entry]:
    """The entries of ``types`` whose ``targetId`` is one of ``target_ids``, in append order."""
    wanted = set(target_ids)
    if not wanted:
        return []
    own = getattr(view, "entries_targeting_any", None)
    found: list[Entry] | None = own(wanted, types) if own is not None else None
    if found is not None:
        return found
    return [entry for entry in view.all_entries(types=types) if entry.get("targetId") in wanted]


def subtrees(view: StoredView, ids: Collection[str], *, limit: int) -> dict[str, dict[str, str | None]]:
    """``subtree(view, id, limit=limit)`` of each of ``ids`` (disjoint
    subtrees: the children of different entries, say), in one read where the
    storage can: more than ``limit`` entries in one means it was read in part."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    own = getattr(view, "subtrees", None)
    found: dict[str, dict[str, str | None]] | None = own(wanted, limit=limit) if own is not None else None
    if found is not None:
        return found
    return {entry_id: subtree(view, entry_id, limit=limit) for entry_id in wanted}


def subtree_within(view: StoredView, entry_id: str, limit: int) -> dict[str, str | None] | None:
    """``subtree`` when it holds at most ``limit`` entries, else ``None``
    (without reading much more than ``limit`` where the storage can stop)."""
    found = subtree(view, entry_id, limit=limit)
    return found if len(found) <= limit else None


def root_ids(view: StoredView, limit: int) -> list[str]:
    """Up to ``limit`` entries that start a tree (no parent, or one the session
    does not hold; a healthy session has one), in append order."""
    own = getattr(view, "root_ids", None)
    found: list[str] | None = own(limit) if own is not None else None
    if found is not None:
        return found
    parents = view.parents()
    out: list[str] = []
    for child, parent in parents.items():
        if parent is None or parent == child or parent not in parents:
            out.append(child)
            if len(out) >= limit:
                break
    return out


def count_types(view: StoredView, types: Collection[str]) -> int:
    """How many entries of ``types`` the session holds."""
    own = getattr(view, "count_types", None)
    found: int | None = own(types) if own is not None else None
    if found is not None:
        return found
    return len(view.all_entries(types=types))


def entry_types(view: StoredView, ids: Collection[str]) -> dict[str, Any]:
    """The ``type`` of each of ``ids`` the session holds (no payload decoded where the storage can say)."""
    own = getattr(view, "entry_types", None)
    found: dict[str, Any] | None = own(ids) if own is not None else None
    if found is not None:
        return found
    known = view.known_ids(ids)
    wanted = [entry_id for entry_id in dict.fromkeys(ids) if entry_id in known]
    return {entry["id"]: entry.get("type") for entry in view.entries(wanted)}


def label_of(view: StoredView, target_id: str) -> LabelInfo | None:
    """``target_id``'s current label (the latest label entry aimed at it; an empty one clears)."""
    return resolve_latest_labels(entries_targeting(view, target_id, ("label",))).get(target_id)


def _takes_limit(method: Any) -> bool:
    try:
        return "limit" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return False


def subtree(view: StoredView, entry_id: str, *, limit: int | None = None) -> dict[str, str | None]:
    """``entry_id`` and every entry below it → its parent id, in append order;
    with ``limit``, possibly only part of them once there are more than
    ``limit`` (the levels nearest ``entry_id`` first)."""
    own = getattr(view, "subtree", None)
    found: dict[str, str | None] | None = None
    if own is not None:
        found = own(entry_id, limit=limit) if limit is not None and _takes_limit(own) else own(entry_id)
    if found is not None:
        return found
    parents = view.parents()
    if entry_id not in parents:
        return {}
    children: dict[str, list[str]] = {}
    for child, parent in parents.items():
        if isinstance(parent, str):
            children.setdefault(parent, []).append(child)
    under = {entry_id}
    stack = [entry_id]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in under:
                under.add(child)
                stack.append(child)
    return {child: parents[child] for child in parents if child in under}


def custom_entries(
    view: StoredView, custom_types: Collection[str], *, limit: int | None = None, ordered: bool = True
) -> list[Entry]:
    """The ``custom`` entries whose ``customType`` is one of ``custom_types``,
    in append order; the first ``limit`` of them when given, or any ``limit``
    of them with ``ordered=False`` (``limit=1, ordered=False``: is there any,
    without ordering every match first)."""
    own = getattr(view, "custom_entries", None)
    found: list[Entry] | None = own(custom_types, limit=limit, ordered=ordered) if own is not None else None
    if found is None:
        wanted = set(custom_types)
        found = [entry for entry in view.all_entries(types=("custom",)) if entry.get("customType") in wanted]
    return found if limit is None else found[: max(limit, 0)]


def names_tool(entry: Entry, tool_names: Collection[str]) -> bool:
    """Whether ``entry`` is a ``message`` whose message's ``toolName`` is one of ``tool_names``."""
    message = entry.get("message") if entry.get("type") == "message" else None
    return isinstance(message, dict) and isinstance(message.get("toolName"), str) and message["toolName"] in tool_names


def tool_results(
    view: StoredView, tool_names: Collection[str], *, limit: int | None = None, ordered: bool = True
) -> list[Entry]:
    """The ``message`` entries whose message names one of ``tool_names`` as
    its ``toolName`` (a tool's results), in append order; the first ``limit``
    of them when given, or any ``limit`` of them with ``ordered=False``.
    Callers check the role they need."""
    own = getattr(view, "tool_results", None)
    found: list[Entry] | None = own(tool_names, limit=limit, ordered=ordered) if own is not None else None
    if found is None:
        wanted = set(tool_names)
        found = [entry for entry in view.all_entries(types=("message",)) if names_tool(entry, wanted)]
    return found if limit is None else found[: max(limit, 0)]


def entries_with_key(view: StoredView, key: str) -> list[Entry]:
    """The entries whose key (``core/entry_keys.py``) is ``key``, in append
    order: by the storage's index of keys where it has one; generic: every
    ``custom`` and ``message`` entry's key computed. A hint, as the module
    says: a row stored before its rule existed may be missing."""
    own = getattr(view, "entries_with_key", None)
    found: list[Entry] | None = own(key) if own is not None else None
    if found is None:
        found = [entry for entry in view.all_entries(types=("custom", "message")) if entry_keys.entry_key(entry) == key]
    return found


def keys_complete(view: StoredView) -> bool:
    """Whether ``entries_with_key`` finds every entry with a key, so that
    finding none proves there is none: the storage's own answer (the
    ``file`` index computes every line's key under the rules in force; a
    ``mysql`` row stored by a process without a rule has no key: not
    complete), and always for the generic answer (every entry's key
    computed)."""
    if getattr(view, "entries_with_key", None) is None:
        return True
    own = getattr(view, "keys_complete", None)
    return bool(own()) if own is not None else False


# --- entries in append order, from a position --------------------------------------------


def ids_in_order(
    view: StoredView, start: int, limit: int, types: Collection[str] | None = None, *, before: bool = False
) -> list[tuple[int, str]]:
    """``(position, id)`` of the session's entries in append order (the one
    in flight last), of ``types`` (``None``: of any type): the first
    ``limit`` at or after position ``start``, or with ``before`` the last
    ``limit`` before it (still in append order). A position is the storage's
    own: it grows with the append order and never changes, but need not be
    dense (``position_of`` gives an entry's). Generic: the skeleton's order."""
    if limit <= 0:
        return []
    own = getattr(view, "ids_in_order", None)
    found: list[tuple[int, str]] | None = own(start, limit, types, before=before) if own is not None else None
    if found is not None:
        return found
    order = list(view.parents())
    wanted = None if types is None else {entry["id"] for entry in view.all_entries(types=types)}
    positions = [at for at, entry_id in enumerate(order) if wanted is None or entry_id in wanted]
    if before:
        chosen = [at for at in positions if at < start][-limit:]
    else:
        chosen = [at for at in positions if at >= start][:limit]
    return [(at, order[at]) for at in chosen]


def entries_in_order(
    view: StoredView, start: int, limit: int, types: Collection[str] | None = None, *, before: bool = False
) -> list[tuple[int, Entry]]:
    """``ids_in_order`` with the entries themselves: ``(position, entry)``."""
    if limit <= 0:
        return []
    own = getattr(view, "entries_in_order", None)
    found: list[tuple[int, Entry]] | None = own(start, limit, types, before=before) if own is not None else None
    if found is not None:
        return found
    pairs = ids_in_order(view, start, limit, types, before=before)
    entries = view.entries([entry_id for _, entry_id in pairs]) if pairs else []
    return [(at, entry) for (at, _), entry in zip(pairs, entries, strict=True)]


def position_of(view: StoredView, entry_id: str) -> int | None:
    """``entry_id``'s position in append order (``ids_in_order``), ``None`` when the session holds no such entry."""
    own = getattr(view, "position_of", None)
    if own is not None:
        found: int | None = own(entry_id)
        return found
    for at, known in enumerate(view.parents()):
        if known == entry_id:
            return at
    return None


def latest_tips(view: StoredView, limit: int, scan: int) -> list[tuple[int, str]]:
    """``(position, id)`` of up to ``limit`` branch tips (entries without
    children) among the session's last ``scan`` entries, the latest first.
    Generic: the last ``scan`` entries with their parents (``tail_parents``,
    one range of the append order), then ``tips_in`` them."""
    if limit <= 0 or scan <= 0:
        return []
    own = getattr(view, "latest_tips", None)
    found: list[tuple[int, str]] | None = own(limit, scan) if own is not None else None
    if found is not None:
        return found
    return tips_in(view, tail_parents(view, scan), limit)


def tail_parents(view: StoredView, scan: int) -> list[tuple[int, str, Any]]:
    """``(position, id, stored parent id)`` of the session's last ``scan``
    entries, in append order (the one in flight last). Generic: ``ids_in_order``
    and ``parents()``."""
    if scan <= 0:
        return []
    own = getattr(view, "tail_parents", None)
    found: list[tuple[int, str, Any]] | None = own(scan) if own is not None else None
    if found is not None:
        return found
    parents = view.parents()
    return [(at, entry_id, parents.get(entry_id)) for at, entry_id in ids_in_order(view, 10**18, scan, before=True)]


def tips_in(view: StoredView, tail: Sequence[tuple[int, str, Any]], limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` tips among ``tail`` (``tail_parents``), the latest first.
    An entry's children come after it, so one that the tail names as a parent
    has a child; the others are tips, but for a child stored before its parent
    (an import out of order): ``children_of`` the candidates says."""
    named = {parent for _, _, parent in tail if isinstance(parent, str)}
    candidates = [(at, entry_id) for at, entry_id, _ in reversed(tail) if entry_id not in named]
    children = children_of(view, [entry_id for _, entry_id in candidates])
    return [pair for pair in candidates if not children.get(pair[1])][: max(limit, 0)]


def levels_below(view: StoredView, ids: Collection[str], depth: int) -> list[list[tuple[str, str]]]:
    """The entries 1 … ``depth`` levels below ``ids``, level by level, each
    ``(id, parent id)``, each level in append order (so each parent's children
    in append order); an entry met twice (a damaged tree) once. Generic: one
    ``children_of`` a level."""
    wanted = list(dict.fromkeys(ids))
    if depth <= 0 or not wanted:
        return []
    own = getattr(view, "levels_below", None)
    found: list[list[tuple[str, str]]] | None = own(wanted, depth) if own is not None else None
    if found is not None:
        return found
    out: list[list[tuple[str, str]]] = []
    seen = set(wanted)
    level = wanted
    while len(out) < depth:
        children = children_of(view, level)
        below = []
        for parent in level:
            for kid in children.get(parent, ()):
                if kid not in seen:
                    seen.add(kid)
                    below.append((kid, parent))
        if not below:
            break
        out.append(below)
        level = [kid for kid, _ in below]
    return out


def branch_walks(
    view: StoredView, starts: Collection[str], stop_at: str, steps: int
) -> dict[str, list[tuple[str, Any]]]:
    """Each of ``starts`` that names an entry → ``(id, stored parent id)`` of
    it and of its ancestors, nearest first, up to the first ancestor that is
    ``stop_at``, or has a child besides the one walked up from (a branch
    point), or whose parent names no entry (a root); ``steps`` steps up at
    most. The start itself never stops the walk. Generic: ``parents()`` and
    ``children_of`` an entry at a time."""
    own = getattr(view, "branch_walks", None)
    found: dict[str, list[tuple[str, Any]]] | None = own(starts, stop_at, steps) if own is not None else None
    if found is not None:
        return found
    parents = view.parents()
    out: dict[str, list[tuple[str, Any]]] = {}
    for start in dict.fromkeys(starts):
        if start not in parents:
            continue
        walk = [(start, parents[start])]
        seen = {start}
        while len(walk) <= steps:
            below, above = walk[-1]
            if not isinstance(above, str) or above not in parents or above in seen:
                break
            seen.add(above)
            walk.append((above, parents[above]))
            if above == stop_at or any(kid != below for kid in children_of(view, [above])[above]):
                break
        out[start] = walk
    return out


def walk_to_path(
    view: StoredView,
    leaf_id: str,
    tips: Collection[str],
    *,
    window: int,
    tail: Mapping[str, Any] | None = None,
) -> dict[str, tuple[list[str], str | None]] | None:
    """Where each of ``tips`` (entries off the root-to-``leaf_id`` path; the
    leaf itself is left out) meets that path: ``tip`` → (the ids from it up
    to the path, the tip first, the meeting entry left out; the meeting
    entry, ``None`` when the walk reached a root off the path).

    By key, whatever the session's length (the compare page's branch tips,
    issue 23): the tips are walked up together by ``branch_walks``, which
    stops at branch points (where a branch leaves the path, the path's entry
    has two children); a stop is on the path when the leaf's ancestor at its
    depth is that entry: the leaf's last ``window`` path entries are read
    once, deeper stops are asked by the jumps (``ancestor_at``). The work is
    the branches' lengths plus the window, not the session. ``None`` when the
    path facts cannot say (a storage without them, facts that are not exact).

    ``tail``: the session's last entries (id → stored parent id, from
    ``tail_parents``), walked in memory first: the leaf's path among them
    (its facts are exact, so its entries were stored after their parents and
    the part of the path in the tail is the part below the tail's first
    entry) and each tip up to that path or out of the tail."""
    if getattr(view, "entry_facts", None) is None:
        return None
    leaf = entry_facts(view, [leaf_id]).get(leaf_id)
    if leaf is None or not leaf.exact:
        return None
    active: dict[int, str] = {}  # depth → the leaf's ancestor there, read from the leaf up
    read_top = leaf.depth + 1  # the depths from here down are in ``active``
    pending = {tip: tip for tip in dict.fromkeys(tips) if tip != leaf_id}  # tip → where its walk goes on
    walked: dict[str, list[str]] = {tip: [] for tip in pending}
    out: dict[str, tuple[list[str], str | None]] = {}
    if tail:
        on_tail_path: set[str] = set()
        current: Any = leaf_id
        while isinstance(current, str) and current in tail and current not in on_tail_path:
            active[leaf.depth - len(on_tail_path)] = current  # what the window read would say
            on_tail_path.add(current)
            current = tail[current]
        read_top = leaf.depth - len(on_tail_path) + 1
        for tip in list(pending):
            ids: list[str] = []
            met: set[str] = set()
            current = tip
            while isinstance(current, str) and current in tail and current not in on_tail_path:
                if current in met:
                    break  # a parent cycle in damaged rows: the walk by key says
                ids.append(current)
                met.add(current)
                current = tail[current]
            if isinstance(current, str) and current in on_tail_path:
                out[tip] = (ids, current)
                del pending[tip]
            elif ids:
                walked[tip] = ids
                pending[tip] = ids[-1]
    while pending:
        walks = branch_walks(view, list(dict.fromkeys(pending.values())), leaf_id, _BRANCH_STEPS)
        stops: dict[str, str] = {}
        for tip, start in list(pending.items()):
            ids = [entry_id for entry_id, _ in walks.get(start, ())]
            if walked[tip]:
                ids = ids[1:]  # the walk went on from its last stop
            if not ids or not set(walked[tip]).isdisjoint(ids):
                out[tip] = (walked[tip], None)  # a root off the path (or a parent cycle in damaged rows)
                del pending[tip]
                continue
            walked[tip].extend(ids)
            stops[tip] = ids[-1]
        facts = entry_facts(view, stops.values())
        if any(stop not in facts or not facts[stop].exact for stop in stops.values()):
            return None
        if stops and read_top > leaf.depth:
            lowest = min(facts[stop].depth for stop in stops.values())
            ids = path_ids(view, leaf_id, max(0, min(leaf.depth - lowest, window)))
            for offset, entry_id in enumerate(reversed(ids)):
                active[leaf.depth - offset] = entry_id
            read_top = leaf.depth - len(ids) + 1
        for tip, stop in stops.items():
            depth = facts[stop].depth
            if depth > leaf.depth:
                meets = False
            elif depth >= read_top:
                meets = active.get(depth) == stop
            else:
                meets = ancestor_at(view, leaf_id, depth) == stop
            if meets:
                out[tip] = (walked[tip][:-1], stop)
                del pending[tip]
            else:
                pending[tip] = stop
    return out


# Steps up one ``branch_walks`` takes at most (the mysql provider's recursion bound).
_BRANCH_STEPS = 900


def path_up(view: StoredView, entry_id: str, steps: int, tail: Mapping[str, Any]) -> list[str]:
    """``path_ids(entry_id, steps)``, its part among ``tail`` (the session's
    last entries, id → stored parent id) walked in memory, the rest by key."""
    ids = [entry_id]
    while len(ids) <= steps and ids[-1] in tail:
        parent = tail[ids[-1]]
        if not isinstance(parent, str) or parent not in tail or parent in ids:
            break
        ids.append(parent)
    ids.reverse()
    top = ids[0]
    if len(ids) > steps:
        return ids[-(steps + 1) :]
    if top in tail and not isinstance(tail[top], str):
        return ids  # a root
    return path_ids(view, top, steps - len(ids) + 1)[:-1] + ids
