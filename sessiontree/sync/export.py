"""``sync_sessions --mode export``: database sessions written into a folder
as Pi files, atomically, never replacing a file that holds entries the
database lacks."""

from __future__ import annotations

import os
from pathlib import Path

from sessiontree.core.pi_session_file import serialize_line
from sessiontree.models import AgentSession, SyncedFile
from sessiontree.providers.base import RegistersFiles
from sessiontree.providers.factory import get_provider
from sessiontree.selectors.export import export_entries

from .marks import same_file, session_meta, stat_matches, stored_entry_count
from .options import SyncOptions
from .pi_files import FileStat, check_replaceable, path_key, write_atomically
from .report import CREATED, UNCHANGED, UPDATED, FileResult, Skip, Task, guarded


def pi_folder_name(cwd: str) -> str:
    """Pi's folder for a working directory: ``--home-me-project--``."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + trimmed.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def export_path(folder: Path, row: AgentSession, layout: str) -> Path:
    """Where a session is exported: Pi's ``--<cwd>--/<created>_<id>.jsonl``
    layout (so Pi lists it under its project), or ``<id>.jsonl``."""
    if layout == "flat":
        return folder / f"{row.session_id}.jsonl"
    created = row.created_at
    stamp = created.strftime("%Y-%m-%dT%H-%M-%S-") + f"{created.microsecond // 1000:03d}Z"
    return folder / pi_folder_name(row.cwd or "") / f"{stamp}_{row.session_id}.jsonl"


def export_tasks(folder: Path, options: SyncOptions) -> list[Task]:
    """One task per session not deleted (of ``options.provider``), oldest first
    (creation time, then id: not the row's pk, which several nodes allocate)."""
    queryset = AgentSession.objects.exclude(status=AgentSession.Status.DELETED).order_by("created_at", "session_id")
    if options.provider is not None:
        queryset = queryset.filter(provider=options.provider)
    tasks: list[Task] = []
    for row in queryset.only("pk", "session_id", "provider", "cwd", "created_at", "session_file").iterator():
        target = export_path(folder, row, options.layout)
        tasks.append(guarded(target, folder, lambda result, r=row, t=target: _export_session(r, t, options, result)))  # type: ignore[misc]
    return tasks


def _export_session(row: AgentSession, target: Path, options: SyncOptions, result: FileResult) -> FileResult:
    session_id = result.session_id = row.session_id
    session = session_meta(session_id)
    if session is None:
        raise Skip(f"gone: session {session_id} was deleted meanwhile")
    kind = session["provider"]
    if same_file(session, target):
        raise Skip(f"is the session's own file: session {session_id} is stored in it")
    key = path_key(target)
    mark = SyncedFile.objects.filter(mode="export", path_key=key).first()
    try:
        current: os.stat_result | None = os.stat(target, follow_symlinks=False)
    except FileNotFoundError:
        current = None
    if (
        mark is not None
        and current is not None
        # A session kept in a file is compared by its bytes: its file may
        # change in place with its count unchanged (an erase rewrites it).
        and not isinstance(get_provider(kind), RegistersFiles)
        and mark.session_id == session_id
        and mark.session_entry_count == stored_entry_count(session)
        and stat_matches(mark, FileStat.of(current))
        and not options.checksum
    ):
        result.action = UNCHANGED
        return result
    header, entries = export_entries(get_provider(kind), session_id, scope="full")
    data = b"".join([serialize_line(header), *(serialize_line(entry) for entry in entries)])
    result.entries = len(entries)
    existing = target.read_bytes() if current is not None else None
    if existing is not None and existing != data:
        check_replaceable(existing, session_id, {entry["id"] for entry in entries})
    if existing == data:
        result.action, result.entries = UNCHANGED, 0
    elif options.dry_run:
        result.action = UPDATED if current is not None else CREATED
        return result
    else:
        write_atomically(target, data)
        result.action = UPDATED if current is not None else CREATED
    if not options.dry_run:
        st = FileStat.of(os.stat(target))
        SyncedFile.objects.update_or_create(
            mode="export",
            path_key=key,
            defaults={
                "path": str(target),
                "session_id": session_id,
                "provider": kind,
                "size": st.size,
                "mtime_ns": st.mtime_ns,
                "inode": st.inode,
                "offset": st.size,
                "entry_count": len(entries),
                "session_entry_count": len(entries),
                "last_entry_id": entries[-1]["id"] if entries else None,
            },
        )
    return result
