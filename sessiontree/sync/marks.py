"""What sync remembers of a file (its ``SyncedFile`` row) and the facts it
reads from a probed file (``Probe``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiontree.core.types import CURRENT_SESSION_VERSION, Entry
from sessiontree.models import AgentSession, SyncedFile
from sessiontree.providers.factory import get_provider
from sessiontree.providers.file_provider import FileSessionTreeProvider

from .pi_files import FileStat, parse_time, path_key


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


def file_provider() -> FileSessionTreeProvider:
    provider = get_provider("file")
    assert isinstance(provider, FileSessionTreeProvider)
    return provider


def same_file(row: AgentSession, path: Path, provider: FileSessionTreeProvider) -> bool:
    stored = Path(row.session_file) if row.session_file else provider.path_for(row.session_id)
    try:
        return stored.resolve() == path.resolve()
    except OSError:
        return False
