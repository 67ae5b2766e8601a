"""Planning a roleplay write: run it with all its checks, append nothing.

Every roleplay write appends through one function (``writes.append``),
which first calls ``intercept``: while ``plan_write`` runs a write, that
call stops it with the entries it would have appended, before anything is
written or audited. So a plan can never drift from what the write does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypedDict

from sessiontree.core.entries import custom_entry
from sessiontree.core.pi_session_file import now_iso
from sessiontree.core.types import Entry

from .. import inspection
from ..reducer import RoleplayState, reduce_branch
from .branch import Branch


class WritePlan(TypedDict):
    """What a write would append, and the state after it (``plan_write``)."""

    operation: str
    session_id: str
    leaf_entry_id: str | None  # the leaf the entries would be appended to
    entries: list[Entry]  # as they would be appended; ids are placeholders ("new-1", …)
    before: RoleplayState
    after: RoleplayState  # the state reduced from the path with the entries appended
    changes: inspection.ChangeLists  # pointers changed, added and removed, with their values


class _Planned(Exception):  # control flow out of writes.append, never seen by callers
    def __init__(self, plan: WritePlan) -> None:
        super().__init__(plan["operation"])
        self.plan = plan


_planning: ContextVar[bool] = ContextVar("roleplay_planning", default=False)


def _plan(session_id: str, branch: Branch, items: list[tuple[str, Any]], operation: str) -> WritePlan:
    parent, stamp, entries = branch["leaf_entry_id"], now_iso(), []
    for number, (custom_type, data) in enumerate(items, 1):
        body = custom_entry(custom_type, copy.deepcopy(data))
        entry: Entry = {"type": "custom", "id": f"new-{number}", "parentId": parent, "timestamp": stamp, **body}
        entries.append(entry)
        parent = entry["id"]
    before = branch["state"]
    after = reduce_branch([*branch["reduced"], *entries])  # as of the whole path: see reduce_branch_lazily
    return {
        "operation": operation,
        "session_id": session_id,
        "leaf_entry_id": branch["leaf_entry_id"],
        "entries": entries,
        "before": before,
        "after": after,
        "changes": inspection.document_changes(before["state"], after["state"]),
    }


def plan_write(write: Callable[..., Entry], **kwargs: Any) -> WritePlan:
    """Run ``write`` (``correct_state``, ``decide_review``, ``amend_review``,
    ``repair_turn``, ``archive``, ``create_checkpoint``) with all its checks,
    appending nothing: what it would append at the leaf and the state after.

    Raises what the write would raise (``RoleplayValidationError``,
    ``ReviewNotFound``, ``CharacterArchived``, ``LeafConflict``…), so a face
    can show a confirmation page that says exactly what confirming does, or
    the reason it cannot be done. Nothing is audited: nothing happened.
    """
    token = _planning.set(True)
    try:
        write(**kwargs)
    except _Planned as planned:
        return planned.plan
    finally:
        _planning.reset(token)
    raise RuntimeError(f"{getattr(write, '__name__', write)!r} is not a roleplay write: it appended nothing to plan")


def intercept(session_id: str, branch: Branch, items: list[tuple[str, Any]], operation: str) -> None:
    """Stop the write here, with its plan, when ``plan_write`` runs it; else do nothing."""
    if _planning.get():
        raise _Planned(_plan(session_id, branch, items, operation))
