"""What sync remembers of a file (its ``SyncedFile`` row) and the facts it
reads from a probed file (``Probe``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiontree.core.errors import SessionNotFound, StorageUnavailable
from sessiontree.core.types import CURRENT_SESSION_VERSION, Entry, SessionTreeSession
from sessiontree.models import SyncedFile
from sessiontree.providers import meta
from sessiontree.providers.base import RegistersFiles
from sessiontree.providers.factory import get_provider
from sessiontree.providers.port import RewrittenFile

from .pi_files import CHUNK_BYTES, FileStat, open_file, parse_time, path_key


@dataclass
class Probe:
    """A session file of the folder, its header read."""

    path: Path
    header: dict[str, Any]
    stat: FileStat


def stat_matches(mark: SyncedFile, st: FileStat) -> bool:
    return (mark.size, mark.mtime_ns, mark.inode) == (st.size, st.mtime_ns, st.inode)


def mark_saver(
    mode: str,
    probe: Probe,
    provider_kind: str,
    *,
    stat: FileStat | None,
    offset: int,
    entry_count: int,
    prefix_sha256: str = "",
    last_entry_id: str | None = None,
    malformed_lines: int = 0,
    version: int = CURRENT_SESSION_VERSION,
) -> Callable[[int], None]:
    """``also`` for an operation: record how far the file is synced, in the
    operation's transaction. ``stat`` None: the file is not fully read yet
    (a batch of a large file), so a re-run must not take it as unchanged."""

    def save(session_entry_count: int) -> None:
        SyncedFile.objects.update_or_create(
            mode=mode,
            path_key=path_key(probe.path),
            defaults={
                "path": str(probe.path),
                "session_id": probe.header["id"],
                "provider": provider_kind,
                "size": stat.size if stat is not None else -1,
                "mtime_ns": stat.mtime_ns if stat is not None else -1,
                "inode": stat.inode if stat is not None else -1,
                "offset": offset,
                "entry_count": entry_count,
                "prefix_sha256": prefix_sha256,
                "last_entry_id": last_entry_id,
                "session_entry_count": session_entry_count,
                "malformed_lines": malformed_lines,
                "version": version,
            },
        )

    return save


def activity(entries: list[Entry]) -> Any:
    """The last timestamp among ``entries`` (the session's last activity)."""
    for entry in reversed(entries):
        moment = parse_time(entry.get("timestamp"))
        if moment is not None:
            return moment
    return None


def session_meta(session_id: str) -> SessionTreeSession | None:
    """The session's meta (provider kind, status, ``session_file``…), or
    ``None`` when there is no such session. What its tree holds is its
    storage's to say: ``stored_entry_count``."""
    try:
        return meta.to_session_dict(meta.get_row(session_id))
    except SessionNotFound:
        return None


def stored_entry_count(session: SessionTreeSession) -> int:
    """How many entries the session's storage holds now (a ``file``
    session: what its file says, whatever its meta row last saw)."""
    found = get_provider(session["provider"]).get_session(session["session_id"])
    return found["entry_count"] if found is not None else 0


def same_file(session: SessionTreeSession, path: Path) -> bool:
    """Whether ``path`` is the file a ``file`` session is stored in."""
    stored = session.get("session_file")
    if not stored:
        # A row without its file's name: the file provider's own place (a
        # file-only capability, like dropping its parsed files: see index).
        provider = get_provider(session["provider"])
        if not isinstance(provider, RegistersFiles):
            return False
        stored = str(provider.path_for(session["session_id"]))
    try:
        return Path(stored).resolve() == path.resolve()
    except OSError:
        return False


# --- after an erase (``services/erasure.py``) -------------------------------------------------


def _same_path(stored: str, path: str) -> bool:
    try:
        return Path(stored).resolve() == Path(path).resolve()
    except OSError:
        return False


def after_erase(session_id: str, rewritten: RewrittenFile | None) -> None:
    """What sync remembers after an erase of ``session_id``, in the erase's
    transaction: a file registered in place (``index``) and rewritten by the
    erase is remembered as it is now (its size, time, inode and whole-line
    end), so the next run sees it unchanged instead of rewritten by someone
    else; files the session was exported to are marked stale, so the next
    export writes them again from the erased session."""
    if rewritten is not None:
        for mark in SyncedFile.objects.filter(mode=SyncedFile.Mode.INDEX, session_id=session_id):
            if _same_path(mark.path, rewritten.path):
                SyncedFile.objects.filter(pk=mark.pk).update(
                    size=rewritten.size, mtime_ns=rewritten.mtime_ns, inode=rewritten.inode, offset=rewritten.complete
                )
    SyncedFile.objects.filter(mode=SyncedFile.Mode.EXPORT, session_id=session_id).update(size=-1, mtime_ns=-1, inode=-1)


def synced_copies(session_ids: Iterable[str]) -> list[str]:
    """Files outside the store that sync copied sessions from or to (the
    sources of ``import``, the targets of ``export``), by path."""
    modes = (SyncedFile.Mode.IMPORT, SyncedFile.Mode.EXPORT)
    paths = SyncedFile.objects.filter(session_id__in=list(session_ids), mode__in=modes).values_list("path", flat=True)
    return sorted(set(paths))


def file_holds(path: str, holds: Callable[[bytes], bool]) -> bool:
    """Whether any line of the file at ``path`` ``holds`` something (a
    missing or unreadable file holds nothing)."""
    try:
        fd = open_file(Path(path))
    except StorageUnavailable:
        return False
    try:
        size = os.fstat(fd).st_size
        offset, rest = 0, b""
        while offset < size:
            data = os.pread(fd, min(CHUNK_BYTES, size - offset), offset)
            if not data:
                break
            offset += len(data)
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            if any(holds(line) for line in lines):
                return True
        return bool(rest) and holds(rest)
    finally:
        os.close(fd)
