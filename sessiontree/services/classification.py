"""Automatic classifiers over new entries (``manage.py moderate_sessions``;
docs/moderation.md, "Classifiers").

Each configured classifier (``SESSIONTREE_MODERATION_CLASSIFIERS``,
``sessiontree.classifiers``) reads the text of entries from the search
index, which the write path keeps for every storage, in the order the rows
were indexed. A cursor per classifier (``ClassifierCursor``) remembers how
far it read, so a run scans only what arrived since the last one; rows whose
transaction had not committed when a run passed them (InnoDB hands out ids
before commit) are kept as gaps and looked at again, for
``SESSIONTREE_MODERATION_GAP_SECONDS``.

A finding opens a flag with source ``classifier:<name>`` through
``moderation.flag_entry`` (audited ``flag_entry``), unless that entry has an
open flag of that category from that source already: a re-run, or a batch
scanned again after a crash, never opens a second one. Flags come first,
then the cursor moves past the batch. One run at a time per classifier (a
lease on its cursor; another run meanwhile is ``ScanInProgress``).
Classifiers never run on the append path.
"""

from __future__ import annotations

import bisect
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypedDict

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessiontree.classifiers import Classifier, ClassifierError, get_classifiers
from sessiontree.core.errors import CONFLICT, BadInput, EntryNotFound, SessionNotFound, SessionTreeError
from sessiontree.models import ClassifierCursor, ModerationFlag
from sessiontree.providers import search_index

from . import moderation
from .audit import who

DEFAULT_BATCH = 100
DEFAULT_GAP_SECONDS = 3600
LEASE_SECONDS = 3600
# Gap ranges kept (the newest): each is a term of the scan's query.
MAX_GAPS = 200


class ScanInProgress(SessionTreeError):
    """Another run is scanning with this classifier (its lease has not expired)."""

    code = "scan_in_progress"
    category = CONFLICT


class ClassifierScan(TypedDict):
    classifier: str
    scanned: int  # index rows read (entries with text)
    with_findings: int  # entries something was found in
    flags_opened: int
    already_open: int  # findings an open flag of the same entry, category and source covered
    skipped: int  # findings on entries gone meanwhile, or in a category not configured
    position: int  # the cursor after the run
    error: dict[str, Any] | None


class ScanReport(TypedDict):
    dry_run: bool
    classifiers: list[ClassifierScan]


Gap = list[Any]  # [low, high, first seen (ISO time)]


def gap_seconds() -> float:
    return float(getattr(settings, "SESSIONTREE_MODERATION_GAP_SECONDS", DEFAULT_GAP_SECONDS))


@dataclass
class _Cursor:
    """A cursor as one run moves it (stored after each batch)."""

    position: int
    gaps: list[Gap] = field(default_factory=list)

    def ranges(self) -> list[tuple[int, int]]:
        return [(int(low), int(high)) for low, high, _seen in self.gaps]

    def advance(self, found_ids: Sequence[int], now_iso: str, cutoff_iso: str, *, track_gaps: bool = True) -> None:
        """Past the rows read: ids below the new position that were not read
        become gaps (``track_gaps``); gaps read (or too old) are dropped."""
        found = sorted(set(found_ids))
        gaps: list[Gap] = []
        for low, high, seen in self.gaps:
            if seen < cutoff_iso:
                continue  # no transaction takes that long: a rollback or a deletion left the hole
            start = int(low)
            for value in found[bisect.bisect_left(found, int(low)) : bisect.bisect_right(found, int(high))]:
                if value > start:
                    gaps.append([start, value - 1, seen])
                start = value + 1
            if start <= int(high):
                gaps.append([start, int(high), seen])
        new = found[bisect.bisect_right(found, self.position) :]
        if new:
            expected = self.position + 1
            for value in new:
                if value > expected and track_gaps:
                    gaps.append([expected, value - 1, now_iso])
                expected = value + 1
            self.position = new[-1]
        self.gaps = sorted(gaps)[-MAX_GAPS:]


def _category(finding_category: str) -> str | None:
    known = moderation.categories()
    if finding_category in known:
        return finding_category
    return "other" if "other" in known else None


def _lease(name: str, owner: str, *, restart: bool) -> _Cursor:
    """Take the cursor's lease for this run (``ScanInProgress`` while another holds it)."""
    now = timezone.now()
    with transaction.atomic():
        cursor, _ = ClassifierCursor.objects.select_for_update().get_or_create(classifier=name)
        if cursor.lease_owner and cursor.lease_until is not None and cursor.lease_until > now:
            raise ScanInProgress(
                f"{cursor.lease_owner} is scanning with {name} (until {cursor.lease_until:%Y-%m-%d %H:%M:%S} UTC)"
            )
        cursor.lease_owner = owner
        cursor.lease_until = now + timedelta(seconds=LEASE_SECONDS)
        if restart:
            cursor.position, cursor.gaps = 0, []
        cursor.save()
        return _Cursor(cursor.position, list(cursor.gaps or []))


def _store(name: str, owner: str, state: _Cursor, *, scanned: int, flagged: int, release: bool = False) -> None:
    with transaction.atomic():
        cursor = ClassifierCursor.objects.select_for_update().get(classifier=name)
        if cursor.lease_owner != owner:  # pragma: no cover - taken over after our lease expired
            raise ScanInProgress(f"{cursor.lease_owner} took over the scan with {name}")
        cursor.position = state.position
        cursor.gaps = state.gaps
        cursor.scanned += scanned
        cursor.flagged += flagged
        if release:
            cursor.lease_owner, cursor.lease_until = "", None
        else:
            cursor.lease_until = timezone.now() + timedelta(seconds=LEASE_SECONDS)
        cursor.save()


def _release(name: str, owner: str) -> None:
    ClassifierCursor.objects.filter(classifier=name, lease_owner=owner).update(lease_owner="", lease_until=None)


def _already_open(session_id: str, entry_id: str, category: str, source: str) -> bool:
    return ModerationFlag.objects.filter(
        session_id=session_id, entry_id=entry_id, category=category, source=source, status=ModerationFlag.Status.OPEN
    ).exists()


def _scan_one(
    classifier: Classifier,
    *,
    dry_run: bool,
    limit: int | None,
    batch_size: int,
    restart: bool,
    actor: Any,
    channel: str,
    advance: Callable[[int], Any] | None,
    owner: str,
) -> ClassifierScan:
    name = classifier.name
    source = f"{moderation.CLASSIFIER_SOURCE_PREFIX}{name}"
    moderation.check_source(source)
    report: ClassifierScan = {
        "classifier": name,
        "scanned": 0,
        "with_findings": 0,
        "flags_opened": 0,
        "already_open": 0,
        "skipped": 0,
        "position": 0,
        "error": None,
    }
    if dry_run:
        stored = ClassifierCursor.objects.filter(classifier=name).first()
        state = _Cursor(0, []) if restart or stored is None else _Cursor(stored.position, list(stored.gaps or []))
    else:
        state = _lease(name, owner, restart=restart)
    try:
        while limit is None or report["scanned"] < limit:
            size = batch_size if limit is None else min(batch_size, limit - report["scanned"])
            rows = search_index.rows_after(state.position, state.ranges(), limit=size)
            if not rows:
                break
            results = classifier.classify([row.text for row in rows])
            opened = 0
            for row, findings in zip(rows, results, strict=True):
                report["with_findings"] += int(bool(findings))
                for finding in findings:
                    category = _category(finding.category)
                    if category is None:
                        report["skipped"] += 1
                        continue
                    if _already_open(row.session_id, row.entry_id, category, source):
                        report["already_open"] += 1
                        continue
                    if dry_run:
                        report["flags_opened"] += 1  # would be
                        continue
                    try:
                        moderation.flag_entry(
                            session_id=row.session_id,
                            entry_id=row.entry_id,
                            category=category,
                            note=finding.note[: moderation.MAX_NOTE],
                            source=source,
                            actor=actor,
                            channel=channel,
                        )
                    except (SessionNotFound, EntryNotFound):
                        report["skipped"] += 1  # deleted since it was indexed
                        continue
                    opened += 1
            report["flags_opened"] += opened
            report["scanned"] += len(rows)
            now = timezone.now()
            state.advance(
                [row.search_id for row in rows],
                now.isoformat(),
                (now - timedelta(seconds=gap_seconds())).isoformat(),
                track_gaps=not search_index.ids_commit_in_order(),
            )
            if not dry_run:
                _store(name, owner, state, scanned=len(rows), flagged=opened)
            if advance is not None:
                advance(len(rows))
    except ClassifierError as exc:
        report["error"] = {"code": exc.code, "message": str(exc), "exit_code": exc.exit_code}
    finally:
        if not dry_run:
            _release(name, owner)
    report["position"] = state.position
    return report


def scan_entries(
    *,
    actor: Any,
    channel: str,
    classifiers: Sequence[str] | None = None,
    dry_run: bool = False,
    limit: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    restart: bool = False,
    progress: Callable[[str, int], Callable[[int], Any] | None] | None = None,
) -> ScanReport:
    """Run each classifier (``classifiers`` by name, default the configured
    ones) over the entries indexed since its cursor, opening flags for what
    it finds. ``limit``: at most this many entries per classifier;
    ``restart``: from the first entry again (open flags are not doubled);
    ``dry_run``: classify and count, open nothing, move no cursor.
    ``progress(name, total)`` may return a callable advanced by the rows read.

    A classifier whose back end fails stops there (its cursor keeps the
    batches done) and says so in its report; the others still run."""
    acting, channel = who(actor, channel)
    if batch_size < 1 or (limit is not None and limit < 1):
        raise BadInput("batch size and limit are whole numbers from 1")
    chosen = get_classifiers(list(classifiers) if classifiers else None)
    owner = f"{acting.name} ({socket.gethostname()}:{os.getpid()})"[:191]
    report: ScanReport = {"dry_run": dry_run, "classifiers": []}
    for classifier in chosen:
        advance = None
        if progress is not None:
            stored = ClassifierCursor.objects.filter(classifier=classifier.name).first()
            start = _Cursor(0, []) if restart or stored is None else _Cursor(stored.position, list(stored.gaps or []))
            total = search_index.count_after(start.position, start.ranges())
            advance = progress(classifier.name, min(total, limit) if limit is not None else total)
        report["classifiers"].append(
            _scan_one(
                classifier,
                dry_run=dry_run,
                limit=limit,
                batch_size=batch_size,
                restart=restart,
                actor=acting,
                channel=channel,
                advance=advance,
                owner=owner,
            )
        )
    return report


def summary_line(report: ScanReport) -> str:
    """One line per run: what each classifier read and opened (or would)."""
    would = "would open" if report["dry_run"] else "opened"
    parts = []
    for scan in report["classifiers"]:
        part = (
            f"{scan['classifier']}: {scan['scanned']} entries scanned, {scan['with_findings']} with findings, "
            f"{scan['flags_opened']} flag(s) {would}, {scan['already_open']} already open"
        )
        if scan["skipped"]:
            part += f", {scan['skipped']} skipped"
        if scan["error"] is not None:
            part += f", stopped: {scan['error']['code']}"
        parts.append(part)
    return "; ".join(parts) if parts else "no classifier configured"


__all__ = ["ClassifierScan", "ScanInProgress", "ScanReport", "scan_entries", "summary_line"]
