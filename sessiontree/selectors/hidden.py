"""On which branches a message is hidden from the model.

Hiding (``services.moderation.hide_entry``) appends Pi's ``context_edit`` on
the active branch, so it holds on that branch and on every branch later
grown from below the edit, and not on branches that left the path before it.
The entry panel says which: for each branch tip under the message (the leaf
first, then the latest), whether the latest ``context_edit`` of the message
on the way from the message to that tip hides it (as
``moderation.hidden_on_path`` decides for a whole path). Reads go through
the provider contract: the skeleton, the session's ``context_edit`` entries
and the message itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sessiontree.core.entries import message_of
from sessiontree.core.errors import EntryNotFound
from sessiontree.core.types import Entry
from sessiontree.providers.base import SessionTreeProvider

from .tree_window import read_skeleton

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
    provider: SessionTreeProvider, session_id: str, entry_id: str, *, limit: int = TIPS_CHECKED
) -> HiddenOn:
    """Whether ``entry_id`` is hidden from the model on each branch through it."""
    with provider.read(session_id) as view:
        skeleton = read_skeleton(view)
        shape = skeleton.shape
        if entry_id not in shape.parent:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        (target,) = view.entries([entry_id])
        if not _hideable(target):
            return HiddenOn(entry_id, hideable=False)
        edits = {
            edit["id"]: edit
            for edit in view.all_entries(types=("context_edit",))
            if edit.get("targetId") == entry_id and edit.get("id") is not None
        }
    # The tips under the message (itself, when it has no children).
    tips: list[str] = []
    stack = [entry_id]
    seen: set[str] = set()
    while stack:
        below = stack.pop()
        if below in seen:  # pragma: no cover - only a damaged file has a cycle
            continue
        seen.add(below)
        kids = shape.children.get(below, ())
        if not kids:
            tips.append(below)
        stack.extend(kids)
    order = {entry_id: index for index, entry_id in enumerate(shape.parent)}
    tips.sort(key=lambda tip: (tip != skeleton.leaf_entry_id, -order.get(tip, 0)))
    original = _content(target)
    found = HiddenOn(entry_id, hideable=True, more=max(0, len(tips) - limit))
    for tip in tips[:limit]:
        decided: Entry | None = None
        current: str | None = tip
        while current is not None and current != entry_id:
            edit = edits.get(current)
            if edit is not None:
                decided = edit  # the latest edit of the message on this branch
                break
            current = shape.parent_of(current)
        found.branches.append(
            BranchHiding(
                tip_id=tip,
                is_leaf=tip == skeleton.leaf_entry_id,
                hidden=decided is not None and _hides(decided, original),
                edit_id=decided.get("id") if decided is not None else None,
            )
        )
    return found


__all__ = ["TIPS_CHECKED", "BranchHiding", "HiddenOn", "hidden_on_branches"]
