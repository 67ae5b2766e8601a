"""On which branches a message is hidden from the model.

Hiding (``services.moderation.hide_entry``) appends Pi's ``context_edit`` on
the active branch, so it holds on that branch and on every branch later
grown from below the edit, and not on branches that left the path before it.
The entry panel says which: for each branch tip under the message (the leaf
first, then the latest), whether the latest ``context_edit`` of the message
on the way from the message to that tip hides it (as
``moderation.hidden_on_path`` decides for a whole path). Reads go through
the provider contract, by key: the message, the subtree under it and the
``context_edit`` entries aimed at it (``providers/keyed_reads.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sessiontree.core.entries import message_of
from sessiontree.core.errors import EntryNotFound
from sessiontree.core.types import Entry
from sessiontree.providers import keyed_reads
from sessiontree.providers.base import SessionTreeProvider

# Branch tips checked at most (the leaf first, then the latest); more are counted.
TIPS_CHECKED = 20


@dataclass(frozen=True)
class BranchHiding:
    tip_id: str
    is_leaf: bool
    hidden: bool
    edit_id: str | None  # the context_edit that decides (None: none on the way)


@dataclass
class HiddenOn:
    """The message's hiding per branch through it."""

    entry_id: str
    hideable: bool  # a message the model sees (a user, assistant or tool result message, or a custom message)
    branches: list[BranchHiding] = field(default_factory=list)
    more: int = 0  # tips under the message not checked (beyond ``TIPS_CHECKED``)

    @property
    def hidden_count(self) -> int:
        return sum(1 for branch in self.branches if branch.hidden)


def _content(entry: Entry) -> object:
    return entry.get("content") if entry.get("type") == "custom_message" else message_of(entry).get("content")


def _hideable(entry: Entry) -> bool:
    if entry.get("type") == "custom_message":
        return True
    return entry.get("type") == "message" and message_of(entry).get("role") in ("user", "assistant", "toolResult")


def _hides(edit: Entry, original: object) -> bool:
    replacement = edit.get("replacement")
    if replacement is None:
        return True
    content = replacement.get("content") if isinstance(replacement, dict) else None
    return bool(content != original)


def hidden_on_branches(
    provider: SessionTreeProvider,
    session_id: str,
    entry_id: str,
    *,
    limit: int = TIPS_CHECKED,
    branches_when_unedited: bool = True,
) -> HiddenOn:
    """Whether ``entry_id`` is hidden from the model on each branch through it.

    Reads the message, the ``context_edit`` entries aimed at it and the
    subtree under it (children by parent): nothing above it. A message no
    edit names is shown on every branch: with ``branches_when_unedited``
    false (the entry panel) its subtree is not read and no branch is listed."""
    with provider.read(session_id) as view:
        target = view.get(entry_id)
        if target is None:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        if not _hideable(target):
            return HiddenOn(entry_id, hideable=False)
        leaf_id = view.state.leaf_entry_id
        edits = {
            edit["id"]: edit
            for edit in keyed_reads.entries_targeting(view, entry_id, ("context_edit",))
            if edit.get("id") is not None
        }
        if not edits and not branches_when_unedited:
            return HiddenOn(entry_id, hideable=True)
        below = keyed_reads.subtree(view, entry_id)  # append order
    # The tips under the message (itself, when it has no children).
    has_children = {parent for child, parent in below.items() if child != entry_id}
    order = {child: index for index, child in enumerate(below)}
    tips = [child for child in below if child not in has_children]
    tips.sort(key=lambda tip: (tip != leaf_id, -order.get(tip, 0)))
    original = _content(target)
    found = HiddenOn(entry_id, hideable=True, more=max(0, len(tips) - limit))
    for tip in tips[:limit]:
        decided: Entry | None = None
        current: str | None = tip
        seen: set[str] = set()
        while current is not None and current != entry_id and current not in seen:
            seen.add(current)
            edit = edits.get(current)
            if edit is not None:
                decided = edit  # the latest edit of the message on this branch
                break
            current = below.get(current)
        found.branches.append(
            BranchHiding(
                tip_id=tip,
                is_leaf=tip == leaf_id,
                hidden=decided is not None and _hides(decided, original),
                edit_id=decided.get("id") if decided is not None else None,
            )
        )
    return found
