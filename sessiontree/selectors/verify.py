"""What is wrong with a stored session: the kernel's checks
(``sessiontree.core.verify``) over its storage.

A ``file`` session's file is read as bytes under a shared lock (so a torn
last line and malformed lines are seen, not silently skipped as a load
does); a ``mysql`` session's entries come from its provider. Both are
compared with the session's meta row.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessiontree.core.errors import CorruptSessionTree, SessionNotFound, StorageUnavailable
from sessiontree.core.pi_session_file import migrate_to_current_version
from sessiontree.core.types import Entry
from sessiontree.core.verify import (
    MetaCounts,
    Problem,
    ScannedFile,
    file_problems,
    meta_problems,
    scan_session_bytes,
    sorted_problems,
    tree_problems,
)
from sessiontree.models import AgentSession
from sessiontree.providers import meta
from sessiontree.providers.factory import get_provider
from sessiontree.providers.file_provider import FileSessionTreeProvider


@dataclass
class SessionReport:
    session_id: str
    provider: str
    problems: list[Problem] = field(default_factory=list)
    path: str | None = None  # the file of a file session
    scanned: ScannedFile | None = None  # its bytes as read (file sessions)
    entries: list[Entry] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "provider": self.provider,
            **({"path": self.path} if self.path else {}),
            "problems": [problem.as_dict() for problem in self.problems],
        }


def session_file_path(row: AgentSession) -> Path:
    """A file session's file: the one its row names, else ``<root>/<id>.jsonl``."""
    if row.session_file:
        return Path(row.session_file)
    provider = get_provider("file")
    assert isinstance(provider, FileSessionTreeProvider)
    return provider.path_for(row.session_id)


def read_locked(path: Path) -> bytes:
    """A file's bytes under a shared lock (no writer mid-line meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise SessionNotFound(f"{path.name} does not exist") from None
    except OSError as exc:
        raise StorageUnavailable(f"{path.name}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


def verify_session(session_id: str) -> SessionReport:
    """Every problem of one session (``SessionNotFound`` for an unknown id)."""
    row = meta.get_row(session_id)
    report = SessionReport(session_id=row.session_id, provider=row.provider)
    in_flight_id: str | None = None
    if row.provider == "file":
        path = session_file_path(row)
        report.path = str(path)
        try:
            data = read_locked(path)
        except SessionNotFound:
            report.problems.append(Problem("missing_file", f"its file {path} does not exist"))
            return report
        scanned = scan_session_bytes(data)
        report.scanned = scanned
        report.problems += file_problems(scanned)
        if scanned.header is None:
            return report
        entries = scanned.entries
        if (scanned.header.get("version") or 1) < 3:
            objs = [dict(scanned.header), *entries]
            migrate_to_current_version(objs)
            entries = objs[1:]
        if isinstance(row.in_flight_entry, dict):
            in_flight_id = row.in_flight_entry.get("id")
    else:
        provider = get_provider(row.provider)
        try:
            entries = provider.list_entries(session_id)
        except CorruptSessionTree as exc:  # pragma: no cover - the mysql storage reads any rows
            report.problems.append(Problem("unreadable", str(exc)))
            return report
    report.entries = entries
    report.problems += tree_problems(entries)
    counts = MetaCounts(
        entry_count=row.entry_count,
        branch_count=row.branch_count,
        compaction_count=row.compaction_count,
        leaf_entry_id=None if row.leaf_entry_id == in_flight_id else row.leaf_entry_id,
    )
    report.problems += meta_problems(counts, entries)
    report.problems = sorted_problems(report.problems)
    return report


def session_ids(*, provider: str | None = None) -> Iterator[str]:
    """Every session id (of ``provider``), oldest first, read in pages."""
    queryset = AgentSession.objects.order_by("pk")
    if provider is not None:
        queryset = queryset.filter(provider=provider)
    last = 0
    while True:
        page = list(queryset.filter(pk__gt=last).values_list("pk", "session_id")[:500])
        if not page:
            return
        for pk, session_id in page:
            last = pk
            yield session_id
