"""Facts about an entry's root→entry path, fixed when the entry is stored.

A completed entry's path never changes (entries are append-only and keep
their ``parentId``), so what the context needs to know about that path can be
computed once, from the parent's facts and the entry itself, in O(1):

- ``depth``: the number of ancestors (a root is 0);
- ``compaction_id``: the nearest ``compaction`` on the path (the entry itself
  included), the one whose summary speaks first in the context;
- ``model_id``: the nearest entry that sets the model (a ``model_change``, or
  a ``message`` whose message is an assistant's: Pi's ``buildSessionContext``
  takes provider and model from either);
- ``thinking_id``: the nearest ``thinking_level_change`` that names a level;
- ``jump_id`` and ``jump_depth``: an ancestor to jump to (the entry itself
  for a root) and its depth, chosen as in Myers' skew-binary lists from the
  parent's jump and that jump's own (``jump_for``): going up from any entry
  to the ancestor at a given depth takes O(log depth) steps
  (``ancestor_at``), so whether an entry lies on a path is decided by key
  without walking it;
- ``exact``: whether the facts are known to describe the path every reader
  walks. A parent id that names no entry *known when the entry was stored*
  makes the entry a root for now, but an entry with that id may come later
  (a hand-edited file, an import in another order); such an entry and its
  descendants are not exact, and their reads walk the full path instead.

An erase keeps what these facts depend on (type, id, parent, a message's
role, a compaction's ``firstKeptEntryId``, a thinking level's presence).

``context_path`` uses the leaf's facts to name the few entries a context is
made of: the path from the nearest compaction's ``firstKeptEntryId`` (or the
compaction itself, when it keeps nothing of the path; or the root, with no
compaction) down to the leaf, plus the entries that set the model and the
thinking level when they lie above that. ``build_context_from_segment`` turns
them into exactly what ``build_context_from_path`` gives for the whole path.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple

from .context_builder import build_context_from_path
from .types import Entry, SessionContext


class PathFacts(NamedTuple):
    """One entry's facts (a tuple: cheap to build for every entry of a file)."""

    depth: int
    compaction_id: str | None
    model_id: str | None
    thinking_id: str | None
    exact: bool
    jump_id: str | None = None
    jump_depth: int = 0


def sets_model(entry: Mapping[str, Any]) -> bool:
    """Whether ``entry`` sets the model the context reports (``context_settings``)."""
    entry_type = entry.get("type")
    if entry_type == "model_change":
        return True
    if entry_type == "message":
        message = entry.get("message")
        return isinstance(message, dict) and message.get("role") == "assistant"
    return False


def sets_thinking(entry: Mapping[str, Any]) -> bool:
    """Whether ``entry`` sets the thinking level (a change that names a level)."""
    return entry.get("type") == "thinking_level_change" and "thinkingLevel" in entry


def jump_for(parent_id: Any, parent: PathFacts, parent_jump: PathFacts | None) -> tuple[Any, int]:
    """The jump (id, depth) of a child of ``parent_id`` (whose facts are
    ``parent``), given the facts of the parent's jump (``None``: unknown).

    Myers' rule: when the parent's jump spans as many levels as the jump's
    own, the child jumps twice as far (to the jump's jump), else to its
    parent. Any ancestor is a correct jump; this choice keeps every walk to
    an ancestor at O(log depth) steps. Sums, not differences: depths are
    unsigned in the database."""
    if parent_jump is not None and parent.depth + parent_jump.jump_depth == 2 * parent.jump_depth:
        return parent_jump.jump_id, parent_jump.jump_depth
    return parent_id, parent.depth


def facts_for(
    entry: Mapping[str, Any], parent: PathFacts | None, *, parent_known: bool, parent_jump: PathFacts | None = None
) -> PathFacts:
    """The facts of ``entry``, given its parent's (``None``: no parent) and,
    for the jump, the facts of the parent's jump (``parent_jump``; without
    them the entry jumps to its parent: correct, only not as far).

    ``parent_known``: the entry's ``parentId`` is ``None`` or names an entry
    known now (whose facts are ``parent``); anything else makes the entry a
    root that is not ``exact``."""
    entry_id = entry.get("id")
    own_id = entry_id if isinstance(entry_id, str) else None
    is_compaction = entry.get("type") == "compaction"
    if parent is None:
        return PathFacts(
            0,
            own_id if is_compaction else None,
            own_id if sets_model(entry) else None,
            own_id if sets_thinking(entry) else None,
            parent_known and own_id is not None,
            own_id,
            0,
        )
    jump_id, jump_depth = jump_for(entry.get("parentId"), parent, parent_jump)
    return PathFacts(
        parent.depth + 1,
        own_id if is_compaction else parent.compaction_id,
        own_id if sets_model(entry) else parent.model_id,
        own_id if sets_thinking(entry) else parent.thinking_id,
        parent.exact and parent_known and own_id is not None,
        jump_id,
        jump_depth,
    )


_new_facts = tuple.__new__


def child_facts(entry: Mapping[str, Any], facts_of: Mapping[str, PathFacts]) -> PathFacts:
    """``facts_for`` with the parent looked up in ``facts_of`` (the entries
    known so far). The common case (a known parent; an entry that is not a
    compaction and sets nothing) is written out: this runs for every entry
    of a file as it is indexed."""
    parent_id = entry.get("parentId")
    if parent_id is None:
        return facts_for(entry, None, parent_known=True)
    parent = facts_of.get(parent_id) if isinstance(parent_id, str) else None
    entry_id = entry.get("id")
    if parent is None or not isinstance(entry_id, str):
        jump = facts_of.get(parent.jump_id) if parent is not None and parent.jump_id is not None else None
        return facts_for(entry, parent, parent_known=parent is not None, parent_jump=jump)
    depth, compaction_id, model_id, thinking_id, exact, jump_id, jump_depth = parent
    jump = facts_of.get(jump_id) if jump_id is not None else None
    if jump is not None and depth + jump[6] == 2 * jump_depth:
        jump_id, jump_depth = jump[5], jump[6]
    else:
        jump_id, jump_depth = parent_id, depth
    entry_type = entry.get("type")
    if entry_type == "message":
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant":
            model_id = entry_id
    elif entry_type == "compaction":
        compaction_id = entry_id
    elif entry_type == "model_change":
        model_id = entry_id
    elif entry_type == "thinking_level_change" and "thinkingLevel" in entry:
        thinking_id = entry_id
    return _new_facts(PathFacts, (depth + 1, compaction_id, model_id, thinking_id, exact, jump_id, jump_depth))


def facts_in_order(entries: Sequence[Entry]) -> list[PathFacts]:
    """Facts of ``entries`` given in append order (a file, a copy of a session)."""
    known: dict[str, PathFacts] = {}
    out: list[PathFacts] = []
    for entry in entries:
        facts = child_facts(entry, known)
        entry_id = entry.get("id")
        if isinstance(entry_id, str) and entry_id not in known:
            known[entry_id] = facts
        out.append(facts)
    return out


# --- reads --------------------------------------------------------------------------

# ids → (entry, its facts) for the ids that name stored entries (others left out).
Lookup = Callable[[Collection[str]], Mapping[str, tuple[Entry, PathFacts]]]
# (leaf id, top depth) → the leaf's path from the ancestor at ``top depth`` down, root first.
Segment = Callable[[str, int], list[Entry]]


def context_path(leaf_id: str, leaf_facts: PathFacts, lookup: Lookup, segment: Segment) -> list[Entry] | None:
    """What the context at ``leaf_id`` is built from (``build_context_from_segment``'s
    argument): the entries that set the model and thinking level when they lie
    above the segment, then the segment, root first. ``None`` when the facts
    cannot say (not exact, or the stored rows disagree with them): the caller
    reads the whole path."""
    if not leaf_facts.exact:
        return None
    top = 0
    compaction_id = leaf_facts.compaction_id
    wanted = [i for i in (leaf_facts.model_id, leaf_facts.thinking_id) if i is not None]
    found: Mapping[str, tuple[Entry, PathFacts]] = {}
    first_kept: Any = None
    compaction_depth = 0
    if compaction_id is not None:
        found_compaction = lookup([compaction_id]).get(compaction_id)
        if found_compaction is None:
            return None
        compaction, compaction_facts = found_compaction
        top = compaction_depth = compaction_facts.depth
        first_kept = compaction.get("firstKeptEntryId")
        if isinstance(first_kept, str) and first_kept != compaction_id:
            wanted.append(first_kept)
        found = lookup(wanted)
        kept = found.get(first_kept) if isinstance(first_kept, str) else None
        if kept is not None and kept[1].depth < top:
            top = kept[1].depth
    elif wanted:
        found = lookup(wanted)
    entries = segment(leaf_id, top)
    if not entries or entries[-1].get("id") != leaf_id or len(entries) != leaf_facts.depth - top + 1:
        return None
    # Rows changed behind the storage's back (a parent rewritten): the walk
    # must still be a chain, from a true root when it starts at depth 0.
    if top == 0 and entries[0].get("parentId") is not None:
        return None
    if any(entries[i + 1].get("parentId") != entries[i].get("id") for i in range(len(entries) - 1)):
        return None
    if compaction_id is not None:
        if entries[compaction_depth - top].get("id") != compaction_id:
            return None
        if entries[0].get("id") != first_kept:
            # The first kept entry is not above the compaction on this path:
            # the compaction keeps nothing of it.
            entries = entries[compaction_depth - top :]
            top = compaction_depth
    above: list[Entry] = []
    for setting_id in (leaf_facts.model_id, leaf_facts.thinking_id):
        if setting_id is None:
            continue
        setting = found.get(setting_id)
        if setting is None:
            return None
        if setting[1].depth < top:
            above.append(setting[0])
    # Root first: the one nearer the root goes first (only their kinds matter
    # to ``context_settings``, which reads from the end).
    above.sort(key=lambda e: found[e["id"]][1].depth)
    return [*above, *entries]


def build_context_from_segment(entries: Sequence[Entry]) -> SessionContext:
    """The context of ``context_path``'s entries: exactly what
    ``build_context_from_path`` returns for the whole root→leaf path.

    The entries above the segment only set the model and thinking level: they
    precede the first kept entry (or the compaction), so the selection never
    takes them, while ``context_settings`` finds them when the segment sets
    neither."""
    return build_context_from_path(entries)


def walk_segment(
    leaf_id: str, steps: int, parent_of: Callable[[str], Any], entry_of: Callable[[str], Entry]
) -> list[Entry]:
    """The leaf and its ``steps`` nearest ancestors, root first, over an
    in-memory index (``parent_of``: an id's ``parentId``; ``entry_of``: its entry)."""
    out = [entry_of(leaf_id)]
    current: Any = leaf_id
    for _ in range(steps):
        current = parent_of(current)
        if not isinstance(current, str):
            break
        out.append(entry_of(current))
    out.reverse()
    return out


def ancestor_at(
    entry_id: str, depth: int, facts_of: Callable[[str], PathFacts | None], parent_of: Callable[[str], Any]
) -> str | None:
    """The ancestor of ``entry_id`` (itself included) at ``depth``, going up
    by the jumps where they do not overshoot and by parents elsewhere
    (O(log depth) steps with Myers' jumps). ``None`` when the facts cannot
    say: an unknown entry, a depth below it or under 0, facts that are not
    exact, a step that does not climb."""
    facts = facts_of(entry_id)
    if facts is None or not facts.exact or not 0 <= depth <= facts.depth:
        return None
    current: Any = entry_id
    while facts.depth > depth:
        step = facts.jump_id if facts.jump_depth >= depth and facts.jump_depth < facts.depth else parent_of(current)
        above = facts_of(step) if isinstance(step, str) else None
        if above is None or above.depth >= facts.depth:
            return None
        current, facts = step, above
    return current if facts.depth == depth else None


def context_path_in_memory(
    leaf_id: str,
    facts_of: Callable[[str], PathFacts | None],
    by_id: Mapping[str, Entry],
    segment_ids: Callable[[list[str]], list[Entry]] | None = None,
    parent_of: Callable[[str], Any] | None = None,
) -> list[Entry] | None:
    """``context_path`` over an in-memory index: ``by_id`` (every entry by id)
    and ``facts_of`` (an id's facts; ``None``: unknown, read the whole path).

    With ``parent_of`` (an id's ``parentId`` without its entry) and
    ``segment_ids`` (entries by ids, in that order, read together), the
    segment's ids are walked first and its entries read at once, instead
    of one entry at a time: the same entries (a stored index whose entries
    are read back from a file)."""
    leaf_facts = facts_of(leaf_id)
    if leaf_facts is None:
        return None

    def lookup(ids: Collection[str]) -> dict[str, tuple[Entry, PathFacts]]:
        found: dict[str, tuple[Entry, PathFacts]] = {}
        for entry_id in ids:
            entry, facts = by_id.get(entry_id), facts_of(entry_id)
            if entry is not None and facts is not None:
                found[entry_id] = (entry, facts)
        return found

    def segment(leaf: str, top: int) -> list[Entry]:
        if segment_ids is None or parent_of is None:
            return walk_segment(leaf, leaf_facts.depth - top, lambda i: by_id[i].get("parentId"), by_id.__getitem__)
        ids = [leaf]
        current: Any = leaf
        for _ in range(leaf_facts.depth - top):
            current = parent_of(current)
            if not isinstance(current, str):
                break
            ids.append(current)
        ids.reverse()
        return segment_ids(ids)

    return context_path(leaf_id, leaf_facts, lookup, segment)
