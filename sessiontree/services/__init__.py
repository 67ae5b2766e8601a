"""The operations layer: every state change of a session goes through here.

Faces (admin, REST API, management commands, the roleplay layer) parse their
input, call one of these functions and render the result; they never write
through the ORM or a provider directly. Each function is keyword-only and
takes a required ``actor`` (a user, or a system actor such as ``cli:alice``,
``sync`` or ``SYSTEM_ACTOR``) and ``channel`` (``admin``, ``api``, ``cli``,
``sync``, ``internal``), writes the change, and
writes an ``AuditRecord`` in the same transaction: a record exists if and only
if the change happened.

Modules:
- ``sessions``: create, update title/metadata, archive, restore, soft/hard
  delete; sessions from Pi files (``import_session``, ``register_file``) and
  ``refresh_session`` (meta row recomputed from the stored entries);
- ``entries``: append any entry type (one or several at once), in-flight
  entries begun, updated and completed, ``import_entries`` (a Pi file's
  tail copied as it is, branches included);
- ``repair`` (imported on its own): the safe repairs of ``repair_session``;
- ``tree``: switch/reset the leaf, set/clear labels, navigate (optional branch
  summary and label), fork before/at an entry, compact;
- ``audit``: actors, channels and the record; ``operations``: the names of
  audited operations (constants);
- ``hooks``: before/after hooks for navigate, fork and compact;
- ``moderation``: flags beside the tree, hide/unhide (``context_edit``),
  ``search_entries`` (``search``: search across sessions);
- ``classification`` (imported on its own): the classifiers' incremental scan
  (``moderate_sessions``), opening flags through ``moderation``;
- ``exports``: a session exported as Pi JSONL, audited, with its manifest;
- ``protection`` (and ``holds``): legal holds, retention;
- ``versions``: the entity tags of sessions and entries (``If-Match``).

Optimistic concurrency: every append and leaf move takes ``expected_leaf_id``;
a leaf that moved is ``LeafConflict`` before anything is written.
"""

from __future__ import annotations

from . import (
    audit,
    entries,
    exports,
    holds,
    hooks,
    moderation,
    operations,
    protection,
    search,
    sessions,
    tree,
    versions,
)
from .audit import SYNC_ACTOR, SYSTEM_ACTOR, Actor, cli_actor
from .hooks import (
    HookEvent,
    register_compaction_hook,
    register_hook,
    unregister_compaction_hook,
    unregister_hook,
)
from .operations import Operation, register_operations
from .tree import FORK_POSITIONS, NavigateResult, compact_session, fork_session, navigate_tree

__all__ = [
    "FORK_POSITIONS",
    "SYNC_ACTOR",
    "SYSTEM_ACTOR",
    "Actor",
    "HookEvent",
    "NavigateResult",
    "Operation",
    "audit",
    "cli_actor",
    "compact_session",
    "entries",
    "exports",
    "fork_session",
    "holds",
    "hooks",
    "moderation",
    "navigate_tree",
    "operations",
    "protection",
    "register_compaction_hook",
    "register_hook",
    "register_operations",
    "search",
    "sessions",
    "tree",
    "unregister_compaction_hook",
    "unregister_hook",
    "versions",
]
