"""Roleplay commands: read the state, and append structured entries to the current branch.

This is the public module: it re-exports the functions of
``roleplay/services/`` (``reads``, ``writes``, ``planning``, ``history``),
so ``from roleplay import service; service.correct_state(...)`` is how
every face calls them. A test that replaces one of them patches the module
that looks it up (``roleplay.services.<module>``), not this one.

Every function here is thin: read the active path from the provider, reduce
it with ``roleplay.reducer.reduce_branch``, validate the input with
``roleplay.schema`` against that reduced state, and append the entry (or
entries, all or none) through the operations layer
(``sessiontree.services.entries``, audited with the caller's ``actor`` and
``channel``) as a child of the leaf that was read (``expected_leaf_id``), so
a leaf moved meanwhile by someone else gives ``LeafConflict`` instead of a
commit on the wrong branch. Bad input raises ``RoleplayValidationError``,
an unknown review ``ReviewNotFound``, a decided one ``ReviewAlreadyDecided``
(``roleplay/errors.py`` gives each its category); nothing is appended then.
REST views, admin pages and the ``rp`` command call these functions and
nothing below them.

The reads the faces render — ``inspect_state_detail`` (the state panel, with
provenance made readable), ``diff_states`` (two entries compared),
``list_reviews``/``get_review`` (the review queue) — are one consistent read
each, and load only the entries the reduction needs
(``reducer.reduce_branch_from_ids``); ``roleplay/inspection.py`` builds the
views.

Navigation and forks are not roleplay writes: ``history_goto`` and
``history_fork`` delegate to ``sessiontree.services`` and only report the
state the new position derives. ``compact_with_checkpoint`` compacts and then
appends the automatic checkpoint as the compaction entry's child.
"""

from __future__ import annotations

from sessiontree.core.types import UNSET, Unset

from .errors import CharacterArchived, NoRoleplayCharacter, ReviewAlreadyDecided, ReviewNotFound
from .schema import RoleplayValidationError
from .services.branch import Actor, Branch
from .services.history import (
    checkpoint_after_compaction,
    compact_with_checkpoint,
    history_fork,
    history_goto,
    register_hooks,
)
from .services.planning import WritePlan, plan_write
from .services.reads import (
    CheckpointList,
    CheckpointRecord,
    DiffEnd,
    ReviewQueue,
    ReviewStatus,
    StateDetail,
    StateDiff,
    diff_states,
    get_review,
    inspect_state,
    inspect_state_detail,
    list_checkpoints,
    list_reviews,
    review_queue,
    state_in_view,
)
from .services.writes import amend_review, archive, correct_state, create_checkpoint, decide_review, repair_turn

__all__ = [
    "UNSET",
    "Actor",
    "Branch",
    "CharacterArchived",
    "CheckpointList",
    "CheckpointRecord",
    "DiffEnd",
    "NoRoleplayCharacter",
    "ReviewAlreadyDecided",
    "ReviewNotFound",
    "ReviewQueue",
    "ReviewStatus",
    "RoleplayValidationError",
    "StateDetail",
    "StateDiff",
    "Unset",
    "WritePlan",
    "amend_review",
    "archive",
    "checkpoint_after_compaction",
    "compact_with_checkpoint",
    "correct_state",
    "create_checkpoint",
    "decide_review",
    "diff_states",
    "get_review",
    "history_fork",
    "history_goto",
    "inspect_state",
    "inspect_state_detail",
    "list_checkpoints",
    "list_reviews",
    "plan_write",
    "register_hooks",
    "repair_turn",
    "review_queue",
    "state_in_view",
]
