"""What is wrong with a stored session: the kernel's checks
(``sessiontree.core.verify``) over what its storage holds.

The storage reads the session raw (``provider.scan``: a ``file`` session's
bytes under a shared lock, so a torn last line and malformed lines are seen,
not silently skipped as a load does; a ``mysql`` session's rows), with the
meta row's counts; this module only compares.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from sessiontree.core.types import Entry
from sessiontree.core.verify import (
    Problem,
    ScannedFile,
    file_problems,
    meta_problems,
    sorted_problems,
    tree_problems,
)
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider_for_session


@dataclass
class SessionReport:
    session_id: str
    provider: str
    problems: list[Problem] = field(default_factory=list)
    path: str | None = None  # where the storage keeps it (a file session's file)
    scanned: ScannedFile | None = None  # its bytes as read (storages that keep bytes)
    entries: list[Entry] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "provider": self.provider,
            **({"path": self.path} if self.path else {}),
            "problems": [problem.as_dict() for problem in self.problems],
        }


def verify_session(session_id: str) -> SessionReport:
    """Every problem of one session (``SessionNotFound`` for an unknown id)."""
    stored = get_provider_for_session(session_id).scan(session_id)
    report = SessionReport(
        session_id=stored.session_id, provider=stored.provider, path=stored.location, scanned=stored.scanned
    )
    if stored.missing is not None:
        report.problems.append(Problem("missing_file", stored.missing))
        return report
    if stored.scanned is not None:
        report.problems += file_problems(stored.scanned)
        if stored.scanned.header is None:
            return report
    report.entries = stored.entries
    report.problems += tree_problems(stored.entries)
    report.problems += meta_problems(stored.counts, stored.entries)
    report.problems = sorted_problems(report.problems)
    return report


def session_ids(*, provider: str | None = None) -> Iterator[str]:
    """Every session id (of ``provider``), oldest first (by creation time, then
    id: a row's pk says nothing about time when several nodes allocate them),
    read in pages keyed by that order."""
    queryset = AgentSession.objects.order_by("created_at", "session_id")
    if provider is not None:
        queryset = queryset.filter(provider=provider)
    last: tuple[Any, str] | None = None
    while True:
        page_query = queryset
        if last is not None:
            page_query = queryset.filter(Q(created_at__gt=last[0]) | Q(created_at=last[0], session_id__gt=last[1]))
        page = list(page_query.values_list("created_at", "session_id")[:500])
        if not page:
            return
        for created_at, session_id in page:
            last = (created_at, session_id)
            yield session_id
