"""``sync_sessions --mode index``: Pi files registered in place as ``file``
sessions (their entries stay in the file); a file that grew gets its meta
row refreshed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessiontree.core.context_builder import UNSET
from sessiontree.core.entries import check_copied_entries
from sessiontree.core.pi_session_file import migrate_to_current_version
from sessiontree.core.session_reader import read_session_bytes
from sessiontree.core.types import CURRENT_SESSION_VERSION
from sessiontree.models import SyncedFile
from sessiontree.providers.base import RegistersFiles
from sessiontree.providers.factory import file_registering_provider

# Dropping the file storage's parsed files from memory is a file-only capability.
from sessiontree.services import sessions as session_ops

from .marks import Probe, mark_saver, same_file, session_meta, stat_matches
from .options import SyncOptions
from .pi_files import FileStat, header_version, open_file, parse_time, path_key, quick_scan
from .report import CREATED, UNCHANGED, UPDATED, FileResult, Skip


def index_file(probe: Probe, options: SyncOptions, result: FileResult) -> FileResult:
    """Register a file in place as a ``file`` session, or refresh its meta row when it grew."""
    header, path = probe.header, probe.path
    session_id = result.session_id = header["id"]
    version = header_version(header)
    if version < CURRENT_SESSION_VERSION and not options.migrate:
        raise Skip(
            f"needs migration: a v{version} file is rewritten as v3 when registered; "
            "use --mode import (the file stays untouched) or --migrate"
        )
    provider = file_registering_provider()
    assert isinstance(provider, RegistersFiles)
    row = session_meta(session_id)
    mark = SyncedFile.objects.filter(mode="index", path_key=path_key(path)).first()
    if row is not None and (row["provider"] != provider.kind or not same_file(row, path)):
        where = row["session_file"] or f"the {row['provider']} provider"
        raise Skip(f"already registered: session {session_id} is {where}")
    fd = open_file(path)
    try:
        st = FileStat.of(os.fstat(fd))
        if row is not None and mark is not None and mark.session_id == session_id and stat_matches(mark, st):
            result.action = UNCHANGED
            return result
        grown_from = (
            mark.offset
            if row is not None and mark is not None and mark.inode == st.inode and st.size >= mark.offset
            else 0
        )
        quick = quick_scan(fd, start=grown_from)
    finally:
        os.close(fd)
    result.torn_bytes = quick.torn_bytes
    try:
        if row is None:
            return _register(probe, options, result, st, quick)
        title: Any = quick.title if quick.named else UNSET
        saver = _index_mark(probe, st, quick.complete_bytes, quick.lines, grown_from, mark, provider.kind)
        changes = session_ops.refresh_session(
            session_id=session_id,
            actor=options.actor,
            channel=options.channel,
            provider=provider,
            title=title,
            activity_at=quick.last_timestamp if grown_from or mark is None else None,
            also=saver,
            dry_run=options.dry_run,
        )
        result.action = UPDATED if changes else UNCHANGED
        if changes and "entry_count" in changes:
            before, after = changes["entry_count"]
            result.entries = max(0, after - before)
        return result
    finally:
        provider.forget_files()  # never keep a folder's parsed files in memory


def _index_mark(
    probe: Probe,
    st: FileStat,
    complete_bytes: int,
    lines: int,
    start: int,
    mark: SyncedFile | None,
    kind: str,
) -> Callable[[int], None]:
    def save(entry_count: int) -> None:
        # Lines that are not entries (malformed, stray headers): the header is one of the lines from 0.
        seen_before = mark.entry_count if (start and mark is not None) else 0
        malformed_before = mark.malformed_lines if (start and mark is not None) else 0
        malformed = malformed_before + max(0, lines - (0 if start else 1) - (entry_count - seen_before))
        mark_saver(
            "index",
            probe,
            kind,
            stat=st,
            offset=complete_bytes,
            entry_count=entry_count,
            malformed_lines=malformed,
            version=CURRENT_SESSION_VERSION,
        )(entry_count)

    return save


def _register(probe: Probe, options: SyncOptions, result: FileResult, st: FileStat, quick: Any) -> FileResult:
    header = probe.header
    if options.dry_run:
        fd = open_file(probe.path)
        try:
            read = read_session_bytes(os.pread(fd, st.size, 0))
        finally:
            os.close(fd)
        objs = [dict(header), *read.entries]
        migrate_to_current_version(objs)
        check_copied_entries(objs[1:])  # what registering would refuse
        result.action, result.entries = CREATED, len(objs) - 1
        result.malformed_lines = read.skipped_lines
        return result
    session = session_ops.register_file(
        session_id=header["id"],
        path=probe.path,
        actor=options.actor,
        channel=options.channel,
        title=quick.title,
        created_at=parse_time(header.get("timestamp")),
        activity_at=quick.last_timestamp,
        also=_index_mark(probe, st, quick.complete_bytes, quick.lines, 0, None, options.registering_kind),
    )
    result.action = CREATED
    result.entries = session.get("entry_count", 0)
    mark = SyncedFile.objects.filter(mode="index", path_key=path_key(probe.path)).first()
    result.malformed_lines = mark.malformed_lines if mark is not None else 0
    if header_version(header) < CURRENT_SESSION_VERSION and mark is not None:
        # Migrated in place: a new file now, remember its own size and time.
        SyncedFile.objects.filter(pk=mark.pk).update(**_stat_fields(probe.path))
    return result


def _stat_fields(path: Path) -> dict[str, int]:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino, "offset": st.st_size}
