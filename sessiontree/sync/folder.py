"""Sync a folder of Pi session files with the database (``sync_sessions``).

Three modes, each safe to run again and again:

- ``index``: register every Pi file in place as a ``file`` session (entries
  stay in the file); a file that grew gets its meta row refreshed.
- ``import``: copy every file's entries into a provider (``mysql`` by
  default); a file that grew gets only its appended tail copied; a file
  whose already-imported part changed is reported, or replaced under
  ``on_rewrite="reimport"``, never mixed.
- ``export``: write database sessions into the folder as Pi files,
  atomically, never replacing a file that holds entries the database lacks.

Every write goes through the operations layer (``sessiontree.services``) on
the ``sync`` channel as the ``sync`` actor (``services.audit.SYNC_ACTOR``).
How far each file was synced is kept in ``SyncedFile`` rows, written in the
same transaction as the change they describe.

The run lives in the modules beside this one, along its parts:
``options`` (what is asked), ``report`` (what was done), ``run`` (probe,
order, workers), ``index``, ``importer`` with ``read_ahead``, ``export``;
``pi_files`` reads and writes the files (through the kernel's one reader)
and ``marks`` keeps the ``SyncedFile`` rows. This module names what the
command and the tests use.
"""

from __future__ import annotations

from .export import export_path, pi_folder_name
from .options import CHANNEL, LAYOUTS, MODES, ON_REWRITE, SyncOptions
from .read_ahead import READ_AHEAD_NICENESS, READ_AHEAD_SWITCH_SECONDS, ReadAhead, ReadFile
from .report import ACTIONS, CREATED, FAILED, SKIPPED, UNCHANGED, UPDATED, FileResult, Skip, SyncReport
from .run import Progress, sync_folder

__all__ = [
    "ACTIONS",
    "CHANNEL",
    "CREATED",
    "FAILED",
    "LAYOUTS",
    "MODES",
    "ON_REWRITE",
    "READ_AHEAD_NICENESS",
    "READ_AHEAD_SWITCH_SECONDS",
    "SKIPPED",
    "UNCHANGED",
    "UPDATED",
    "FileResult",
    "Progress",
    "ReadAhead",
    "ReadFile",
    "Skip",
    "SyncOptions",
    "SyncReport",
    "export_path",
    "pi_folder_name",
    "sync_folder",
]
