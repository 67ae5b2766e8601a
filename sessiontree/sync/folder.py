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
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import DatabaseError, InterfaceError, connection, reset_queries, transaction

from sessiontree.core.context_builder import UNSET
from sessiontree.core.entries import check_copied_entries
from sessiontree.core.errors import (
    CATEGORIES,
    EXIT_UNEXPECTED,
    UNAVAILABLE,
    BadInput,
    InvalidEntry,
    InvalidSessionId,
    LeafConflict,
    SessionTreeError,
)
from sessiontree.core.pi_session_file import migrate_to_current_version, serialize_line
from sessiontree.core.session_reader import SessionReader
from sessiontree.core.types import CURRENT_SESSION_VERSION, Entry
from sessiontree.core.verify import scan_session_bytes
from sessiontree.models import AgentSession, SyncedFile
from sessiontree.providers import meta
from sessiontree.providers.factory import check_kind, get_provider
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from sessiontree.providers.template import TreeProvider
from sessiontree.selectors.export import export_entries
from sessiontree.services import entries as entry_ops
from sessiontree.services import sessions as session_ops
from sessiontree.services.audit import SYNC_ACTOR, Actor

from .pi_files import (
    Batch,
    FileStat,
    HeaderProbe,
    check_replaceable,
    folder_lock,
    hash_prefix,
    header_version,
    iter_batches,
    iter_session_files,
    open_file,
    parse_time,
    path_key,
    quick_scan,
    read_header,
    reader_at,
    title_of,
    write_atomically,
)

logger = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("index", "import", "export")
ON_REWRITE: tuple[str, ...] = ("report", "reimport")
LAYOUTS: tuple[str, ...] = ("pi", "flat")
CHANNEL = "sync"

CREATED, UPDATED, UNCHANGED, SKIPPED, FAILED = "created", "updated", "unchanged", "skipped", "failed"
ACTIONS: tuple[str, ...] = (CREATED, UPDATED, UNCHANGED, SKIPPED, FAILED)


@dataclass
class SyncOptions:
    mode: str = "import"
    provider: str | None = None  # None: file for index, mysql for import, every provider for export
    dry_run: bool = False
    workers: int = 1
    on_rewrite: str = "report"
    migrate: bool = False  # index: let v1/v2 files be migrated to v3 in place
    layout: str = "pi"  # export: Pi's --<cwd>--/<time>_<id>.jsonl, or flat <id>.jsonl
    checksum: bool = False  # re-hash files whose size and mtime did not change
    actor: Actor = SYNC_ACTOR
    channel: str = CHANNEL

    def check(self) -> None:
        if self.mode not in MODES:
            raise BadInput(f"Unknown mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.on_rewrite not in ON_REWRITE:
            raise BadInput(f"Unknown --on-rewrite {self.on_rewrite!r}; use report or reimport")
        if self.layout not in LAYOUTS:
            raise BadInput(f"Unknown layout {self.layout!r}; use one of {', '.join(LAYOUTS)}")
        if self.workers < 1:
            raise BadInput("--workers must be at least 1")
        if self.provider is not None:
            self.provider = check_kind(self.provider)
        if self.mode == "index" and self.provider not in (None, "file"):
            raise BadInput("index registers files in place as file sessions: --provider must be file")

    @property
    def target_kind(self) -> str:
        if self.provider is not None:
            return self.provider
        return "file" if self.mode == "index" else "mysql"


@dataclass
class FileResult:
    path: str
    action: str
    session_id: str | None = None
    reason: str | None = None
    code: str | None = None  # a failure's error code
    exit_code: int | None = None  # a failure's exit code
    entries: int = 0  # entries written (or that would be, in a dry run)
    malformed_lines: int = 0
    torn_bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value not in (None, 0) or key == "action"}


@dataclass
class SyncReport:
    folder: Path
    mode: str
    dry_run: bool
    results: list[FileResult] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for result in self.results if result.action == action)

    @property
    def failed(self) -> list[FileResult]:
        return [result for result in self.results if result.action == FAILED]

    @property
    def entries(self) -> int:
        return sum(result.entries for result in self.results)

    @property
    def malformed_lines(self) -> int:
        return sum(result.malformed_lines for result in self.results)

    def skipped_reasons(self) -> dict[str, int]:
        return dict(Counter(_reason_kind(r.reason) for r in self.results if r.action == SKIPPED).most_common())

    def summary_line(self) -> str:
        would = "would be " if self.dry_run else ""
        parts = [
            f"{self.count(CREATED)} {would}created",
            f"{self.count(UPDATED)} {would}updated",
            f"{self.count(UNCHANGED)} unchanged",
        ]
        reasons = self.skipped_reasons()
        skipped = f"{self.count(SKIPPED)} skipped"
        if reasons:
            skipped += " (" + "; ".join(f"{count} {reason}" for reason, count in reasons.items()) + ")"
        parts.append(skipped)
        parts.append(f"{len(self.failed)} failed")
        noun = "session" if self.mode == "export" else "file"
        total = len(self.results)
        line = f"{self.mode}{' (dry run)' if self.dry_run else ''}: {total} {noun}{'' if total == 1 else 's'}: "
        line += ", ".join(parts)
        line += f"; {self.entries} entries {'would be ' if self.dry_run else ''}{_verb(self.mode)}"
        if self.malformed_lines:
            files = sum(1 for r in self.results if r.malformed_lines)
            line += f"; {self.malformed_lines} malformed line(s) skipped in {files} file(s)"
        torn = sum(1 for r in self.results if r.torn_bytes)
        if torn:
            line += f"; {torn} file(s) end in a torn line, left for the next run"
        return line

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "mode": self.mode,
            "dry_run": self.dry_run,
            "summary": {
                **{action: self.count(action) for action in ACTIONS},
                "entries": self.entries,
                "malformed_lines": self.malformed_lines,
                "skipped_reasons": self.skipped_reasons(),
            },
            "files": [result.as_dict() for result in self.results],
        }


def _verb(mode: str) -> str:
    return {"index": "indexed", "import": "imported", "export": "exported"}[mode]


def _reason_kind(reason: str | None) -> str:
    """A skip reason without the details that differ per file (for the summary)."""
    if not reason:
        return "no reason"
    return reason.split(":", 1)[0].split(" (", 1)[0]


class Skip(Exception):
    """This file is deliberately left alone; the message says why."""


# --- the run ---------------------------------------------------------------------------


Progress = Callable[[int], None]


def sync_folder(folder: Path, options: SyncOptions, *, progress: Callable[[int], Progress] | None = None) -> SyncReport:
    """Sync ``folder`` in ``options.mode``. ``progress(total)`` returns a
    callback told of each file done (the command's progress bar). Raises
    ``SyncBusy`` when another sync holds the folder's lock."""
    options.check()
    folder = folder.expanduser().resolve()
    if options.mode == "export":
        if not folder.exists() and not options.dry_run:
            folder.mkdir(parents=True)
    elif not folder.exists():
        raise BadInput(f"{folder} does not exist")
    report = SyncReport(folder=folder, mode=options.mode, dry_run=options.dry_run)
    with folder_lock(folder):
        if options.mode == "export":
            tasks = _export_tasks(folder, options)
            levels = [tasks]
            ahead: ReadAhead | None = None
        else:
            levels, ahead = _file_tasks(folder, options, report)
        total = sum(len(level) for level in levels)
        done = progress(total) if progress is not None else None
        try:
            for level in levels:
                report.results += _run(level, options.workers, done)
        finally:
            if ahead is not None:
                ahead.close()
    report.results.sort(key=lambda r: r.path)
    return report


Task = Callable[[], FileResult]


def _run(tasks: list[Task], workers: int, done: Progress | None) -> list[FileResult]:
    if workers <= 1 or len(tasks) <= 1:
        results = []
        for task in tasks:
            results.append(task())
            if done is not None:
                done(1)
        return results
    main = threading.get_ident()

    def in_worker(task: Task) -> FileResult:
        try:
            return task()
        finally:
            if threading.get_ident() != main:
                connection.close()  # each worker thread has its own connection

    out: list[FileResult] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sync") as pool:
        for result in pool.map(in_worker, tasks):
            out.append(result)
            if done is not None:
                done(1)
    return out


def _guarded(path: Path, folder: Path, work: Callable[[FileResult], FileResult]) -> Task:
    """A task whose known failures become a failed result with a one-line reason."""

    def task() -> FileResult:
        result = FileResult(path=_shown(path, folder), action=FAILED)
        reset_queries()  # with DEBUG on, Django would keep every statement of the run
        try:
            return work(result)
        except Skip as skip:
            result.action, result.reason = SKIPPED, str(skip)
        except SessionTreeError as exc:
            result.action, result.reason, result.code, result.exit_code = FAILED, _line(exc), exc.code, exc.exit_code
        except (DatabaseError, InterfaceError, OSError) as exc:
            result.action, result.reason = FAILED, _line(exc)
            result.code, result.exit_code = "storage_unavailable", CATEGORIES[UNAVAILABLE].exit_code
        except Exception as exc:
            logger.exception("sync_sessions: unexpected failure on %s", path)
            result.action, result.reason = FAILED, f"unexpected {type(exc).__name__}: {_line(exc)}"
            result.code, result.exit_code = "unexpected_error", EXIT_UNEXPECTED
        return result

    return task


def _line(value: Any) -> str:
    return " ".join(str(value).split())


def _shown(path: Path, folder: Path) -> str:
    try:
        return str(path.relative_to(folder)) if path != folder else path.name
    except ValueError:
        return str(path)


# --- index and import: the files of the folder --------------------------------------------


@dataclass
class Probe:
    path: Path
    header: dict[str, Any]
    stat: FileStat


def _file_tasks(folder: Path, options: SyncOptions, report: SyncReport) -> tuple[list[list[Task]], ReadAhead | None]:
    """One task per session file, grouped in levels: a file whose header names
    a parent session in the folder comes in a later level than the parent, so
    lineage links resolve whatever the workers do. An import by one worker
    gets a ``ReadAhead`` too (to close when the tasks have run)."""
    probes: list[Probe] = []
    first_of: dict[str, Path] = {}
    for path in iter_session_files(folder):
        shown = _shown(path, folder)
        try:
            found: HeaderProbe = read_header(path)
        except SessionTreeError as exc:
            report.results.append(FileResult(shown, FAILED, reason=_line(exc), code=exc.code, exit_code=exc.exit_code))
            continue
        if found.header is None:
            report.results.append(FileResult(shown, SKIPPED, reason=found.reason))
            continue
        session_id = found.header["id"]
        try:
            meta.validate_session_id(session_id, new=True)
        except InvalidSessionId:
            report.results.append(
                FileResult(shown, SKIPPED, reason=f"header id is not a usable session id ({session_id[:80]!r})")
            )
            continue
        if session_id in first_of:
            report.results.append(
                FileResult(
                    shown,
                    SKIPPED,
                    session_id=session_id,
                    reason=f"duplicate session id: {session_id} is also {_shown(first_of[session_id], folder)}",
                )
            )
            continue
        first_of[session_id] = path
        probes.append(Probe(path, found.header, found.stat))

    by_level: dict[int, list[Probe]] = {}
    for probe, level in _levels(probes):
        by_level.setdefault(level, []).append(probe)
    ordered = [by_level[level] for level in sorted(by_level)]
    ahead = None
    if options.mode == "import" and options.workers == 1 and not options.dry_run:
        ahead = ReadAhead.start([probe for level in ordered for probe in level], options.target_kind)
    work = _index_file if options.mode == "index" else _import_file
    tasks = [[_guarded(probe.path, folder, _bind(work, probe, options, ahead)) for probe in level] for level in ordered]
    return tasks, ahead


def _bind(
    work: Callable[[Probe, SyncOptions, FileResult, ReadAhead | None], FileResult],
    probe: Probe,
    options: SyncOptions,
    ahead: ReadAhead | None,
) -> Callable[[FileResult], FileResult]:
    return lambda result: work(probe, options, result, ahead)


def _parent_id(header: dict[str, Any], known: Iterable[str]) -> str | None:
    """The session id a header's ``parentSession`` names (an id, or Pi's file path)."""
    parent = header.get("parentSession")
    if not isinstance(parent, str) or not parent:
        return None
    ids = set(known)
    if parent in ids:
        return parent
    stem = parent.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".jsonl")
    candidate = stem.rsplit("_", 1)[-1]
    return candidate if candidate in ids else None


def _levels(probes: list[Probe]) -> list[tuple[Probe, int]]:
    by_id = {probe.header["id"]: probe for probe in probes}
    parent_of = {sid: _parent_id(probe.header, by_id) for sid, probe in by_id.items()}
    level: dict[str, int] = {}
    for sid in by_id:
        chain: list[str] = []
        current: str | None = sid
        while current is not None and current not in level and current not in chain:
            chain.append(current)
            current = parent_of.get(current)
        base = level.get(current, -1) if current is not None and current in level else -1
        for offset, member in enumerate(reversed(chain), start=1):
            level[member] = base + offset
    return [(probe, level[sid]) for sid, probe in by_id.items()]


def _stat_matches(mark: SyncedFile, st: FileStat) -> bool:
    return (mark.size, mark.mtime_ns, mark.inode) == (st.size, st.mtime_ns, st.inode)


def _mark_saver(
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


def _activity(entries: list[Entry]) -> Any:
    for entry in reversed(entries):
        moment = parse_time(entry.get("timestamp"))
        if moment is not None:
            return moment
    return None


# --- index ------------------------------------------------------------------------------


def _file_provider() -> FileSessionTreeProvider:
    provider = get_provider("file")
    assert isinstance(provider, FileSessionTreeProvider)
    return provider


def _same_file(row: AgentSession, path: Path, provider: FileSessionTreeProvider) -> bool:
    stored = Path(row.session_file) if row.session_file else provider.path_for(row.session_id)
    try:
        return stored.resolve() == path.resolve()
    except OSError:
        return False


def _index_file(probe: Probe, options: SyncOptions, result: FileResult, _ahead: ReadAhead | None) -> FileResult:
    header, path = probe.header, probe.path
    session_id = result.session_id = header["id"]
    version = header_version(header)
    if version < CURRENT_SESSION_VERSION and not options.migrate:
        raise Skip(
            f"needs migration: a v{version} file is rewritten as v3 when registered; "
            "use --mode import (the file stays untouched) or --migrate"
        )
    provider = _file_provider()
    row = AgentSession.objects.filter(session_id=session_id).first()
    mark = SyncedFile.objects.filter(mode="index", path_key=path_key(path)).first()
    if row is not None and (row.provider != "file" or not _same_file(row, path, provider)):
        where = row.session_file or f"the {row.provider} provider"
        raise Skip(f"already registered: session {session_id} is {where}")
    fd = open_file(path)
    try:
        st = FileStat.of(os.fstat(fd))
        if row is not None and mark is not None and mark.session_id == session_id and _stat_matches(mark, st):
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
            return _register(probe, options, result, provider, st, quick)
        title: Any = quick.title if quick.named else UNSET
        saver = _index_mark(probe, st, quick.complete_bytes, quick.lines, grown_from, mark)
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
        clear_index_cache()  # never keep a folder's parsed files in memory


def _index_mark(
    probe: Probe, st: FileStat, complete_bytes: int, lines: int, start: int, mark: SyncedFile | None
) -> Callable[[int], None]:
    def save(entry_count: int) -> None:
        # Lines that are not entries (malformed, stray headers): the header is one of the lines from 0.
        seen_before = mark.entry_count if (start and mark is not None) else 0
        malformed_before = mark.malformed_lines if (start and mark is not None) else 0
        malformed = malformed_before + max(0, lines - (0 if start else 1) - (entry_count - seen_before))
        _mark_saver(
            "index",
            probe,
            "file",
            stat=st,
            offset=complete_bytes,
            entry_count=entry_count,
            malformed_lines=malformed,
            version=CURRENT_SESSION_VERSION,
        )(entry_count)

    return save


def _register(
    probe: Probe, options: SyncOptions, result: FileResult, provider: FileSessionTreeProvider, st: FileStat, quick: Any
) -> FileResult:
    header = probe.header
    if options.dry_run:
        fd = open_file(probe.path)
        try:
            scanned = scan_session_bytes(os.pread(fd, st.size, 0))
        finally:
            os.close(fd)
        objs = [dict(header), *scanned.entries]
        migrate_to_current_version(objs)
        check_copied_entries(objs[1:])  # what registering would refuse
        result.action, result.entries = CREATED, len(objs) - 1
        result.malformed_lines = len(scanned.malformed_lines)
        return result
    session = session_ops.register_file(
        session_id=header["id"],
        path=probe.path,
        actor=options.actor,
        channel=options.channel,
        title=quick.title,
        created_at=parse_time(header.get("timestamp")),
        activity_at=quick.last_timestamp,
        also=_index_mark(probe, st, quick.complete_bytes, quick.lines, 0, None),
        provider=provider,
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


# --- import -----------------------------------------------------------------------------


def _import_file(probe: Probe, options: SyncOptions, result: FileResult, ahead: ReadAhead | None) -> FileResult:
    header, path = probe.header, probe.path
    session_id = result.session_id = header["id"]
    mark = SyncedFile.objects.filter(mode="import", path_key=path_key(path)).first()
    row = AgentSession.objects.filter(session_id=session_id).first()
    fd = open_file(path)
    try:
        st = FileStat.of(os.fstat(fd))
        if mark is not None and mark.session_id == session_id and row is not None:
            return _import_again(fd, probe, st, mark, row, options, result)
        if mark is not None and mark.session_id != session_id:
            return _rewritten(
                fd,
                probe,
                st,
                mark,
                options,
                result,
                f"rewritten: it now holds session {session_id}, it held {mark.session_id} when imported",
            )
        if row is not None:
            other = SyncedFile.objects.filter(mode="import", session_id=session_id).exclude(path_key=path_key(path))
            source = other.first()
            if source is not None:
                raise Skip(f"already imported: session {session_id} came from {source.path}")
            raise Skip(f"already exists: session {session_id} is a {row.provider} session not imported from this file")
        read = ahead.take(probe, st) if ahead is not None else None
        return _import_new(fd, probe, st, options, result, provider_kind=options.target_kind, read=read)
    finally:
        os.close(fd)


def _batches(fd: int, probe: Probe, reader: SessionReader) -> tuple[dict[str, Any], Iterable[Batch], int]:
    """The header and entry batches of a whole file; a v1/v2 file is read whole
    and migrated to v3 in memory (its ids are made up here)."""
    header = dict(probe.header)
    version = header_version(header)
    batches: Iterable[Batch] = iter_batches(fd, reader=reader, hasher=hashlib.sha256())
    if version < CURRENT_SESSION_VERSION:
        whole = list(batches)
        last = whole[-1]
        objs = [header, *(entry for batch in whole for entry in batch.entries)]
        migrate_to_current_version(objs)
        entries = objs[1:]
        merged = Batch(
            entries,
            last.end_offset,
            last.prefix_sha256,
            malformed_lines=sum(batch.malformed_lines for batch in whole),
            session_infos=[entry for entry in entries if entry.get("type") == "session_info"],
        )
        return objs[0], [merged], version
    return header, batches, version


# --- import: reading ahead -------------------------------------------------------------------


@dataclass
class ReadFile:
    """A file as the read-ahead thread reads it: its header, version and
    entry batches (the first one's entries checked and encoded for the
    target provider); ``reader`` knows the torn tail once ``batches`` is exhausted."""

    header: dict[str, Any]
    version: int
    reader: SessionReader
    batches: Iterator[Batch]


_START, _BATCH, _END, _ERROR, _FALLBACK = "start", "batch", "end", "error", "fallback"
# How much nicer than the process the read-ahead thread runs (Linux).
READ_AHEAD_NICENESS = 10


# The interpreter's thread switch interval while a read-ahead runs (Python's default: 5 ms).
READ_AHEAD_SWITCH_SECONDS = 0.001
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


def _short_switches(on: bool) -> None:
    """While a read-ahead runs, the interpreter hands the GIL over within
    1 ms instead of 5: the importing thread, back from each statement,
    waits for the GIL while the read-ahead thread holds it (measured: a
    fifth of the import's time). The first user sets it, the last one
    restores what was there."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if on:
            if _switch_users == 0:
                _switch_saved = sys.getswitchinterval()
                sys.setswitchinterval(min(_switch_saved, READ_AHEAD_SWITCH_SECONDS))
            _switch_users += 1
        else:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


def _yield_cpu() -> None:
    """Lower this thread's CPU priority (Linux, where the nice value is per
    thread): on a busy machine the importing thread and a database server
    on the same machine come first, the read-ahead has time to spare."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        thread_id = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, thread_id)
        os.setpriority(os.PRIO_PROCESS, thread_id, min(19, current + READ_AHEAD_NICENESS))


_DONE = object()  # the thread has finished


class ReadAhead:
    """While one file's batches are written (the importing thread waits for
    the database; mysqlclient releases the GIL meanwhile), a thread reads,
    parses, migrates, checks and encodes the next file's first batch: the
    Python work and the database's overlap. Only files that look new are
    read ahead (no import record and no session of their id when the run
    starts: an unchanged file is never read); the import decides as before,
    and uses what was read only when the file's size, time and inode are
    those it sees.

    Memory stays bounded: the thread reads a batch only when no batch waits
    to be taken, so at most two batches are in memory (the one being
    written and the next). Failures come out where they would without the
    thread: anything before a file's first batch is read makes the import
    read that file itself (same errors, from its own reading); a first
    batch whose checks fail is passed on unchecked (the write checks it
    again and refuses it, nothing of it stored); a read error after a batch
    is raised where the next batch is taken.

    The thread gives way: it runs at a lower CPU priority (``_yield_cpu``)
    and, while it runs, the GIL changes hands within 1 ms (``_short_switches``)."""

    def __init__(self, probes: list[Probe], provider_kind: str) -> None:
        self._probes = probes
        self._index = {id(probe): i for i, probe in enumerate(probes)}
        self._kind = provider_kind
        self._items: deque[Any] = deque()
        self._changed = threading.Condition()
        self._pending: Any = None
        self._wanted = 0  # files before this index are no longer wanted
        self._stopped = False
        self._finished = False
        self._closed = False
        self._thread = threading.Thread(target=self._produce, name="sync-read-ahead", daemon=True)

    @classmethod
    def start(cls, probes: list[Probe], provider_kind: str) -> ReadAhead | None:
        """A running read-ahead of those of ``probes`` (in task order) that look new, or ``None``."""
        marked: set[str] = set()
        existing: set[str] = set()
        keys = {id(probe): path_key(probe.path) for probe in probes}
        for start in range(0, len(probes), 500):
            chunk = probes[start : start + 500]
            marked.update(
                SyncedFile.objects.filter(mode="import", path_key__in=[keys[id(p)] for p in chunk]).values_list(
                    "path_key", flat=True
                )
            )
            existing.update(
                AgentSession.objects.filter(session_id__in=[p.header["id"] for p in chunk]).values_list(
                    "session_id", flat=True
                )
            )
        new = [p for p in probes if keys[id(p)] not in marked and p.header["id"] not in existing]
        if len(new) < 2:
            return None  # nothing to overlap
        ahead = cls(new, provider_kind)
        _short_switches(True)
        try:
            ahead._thread.start()
        except BaseException:  # pragma: no cover - no thread to run it
            _short_switches(False)
            raise
        return ahead

    # --- the thread --------------------------------------------------------------------
    def _room(self, index: int) -> bool:
        """Wait until no batch waits to be taken; False once stopped or file ``index`` is no longer wanted."""
        with self._changed:
            while True:
                if self._stopped or index < self._wanted:
                    return False
                if not any(item is not _DONE and item[1] == _BATCH for item in self._items):
                    return True
                self._changed.wait()

    def _put(self, item: Any) -> bool:
        with self._changed:
            if item is not _DONE and (self._stopped or item[0] < self._wanted):
                return False
            self._items.append(item)
            self._changed.notify_all()
            return True

    def _produce(self) -> None:
        _yield_cpu()
        try:
            provider = get_provider(self._kind)
            for index, probe in enumerate(self._probes):
                if self._room(index):
                    self._read(index, probe, provider)
                elif self._stopped:
                    break
        except Exception:  # pragma: no cover - _read keeps its failures
            logger.exception("sync_sessions: the read-ahead stopped")
        finally:
            connection.close()  # the thread's own connection (its SQL escaping's), if it opened one
            self._put(_DONE)

    def _read(self, index: int, probe: Probe, provider: Any) -> None:
        delivered = False
        try:
            fd = open_file(probe.path)
        except Exception:
            self._put((index, _FALLBACK, None))
            return
        try:
            st = FileStat.of(os.fstat(fd))
            reader = reader_at(0)
            header, batches, version = _batches(fd, probe, reader)
            for number, batch in enumerate(batches):
                if number == 0 and batch.entries and isinstance(provider, TreeProvider):
                    # Unchecked if refused: the write checks again and refuses it, as without the read-ahead.
                    with contextlib.suppress(Exception):
                        batch.entries = provider.prepare_copies(batch.entries)
                if not delivered:
                    if not self._put((index, _START, (st, header, version, reader))):
                        return
                    delivered = True
                if not self._put((index, _BATCH, batch)):
                    return
                del batch
                if not self._room(index):
                    return
            self._put((index, _END, None) if delivered else (index, _FALLBACK, None))
        except Exception as exc:
            self._put((index, _ERROR, exc) if delivered else (index, _FALLBACK, None))
        finally:
            os.close(fd)

    # --- the importing thread ------------------------------------------------------------
    def _want(self, index: int) -> None:
        with self._changed:
            self._wanted = max(self._wanted, index)
            self._changed.notify_all()

    def _next(self, index: int) -> Any:
        """The next item of file ``index`` (dropping earlier files'), or ``None``."""
        while True:
            if self._pending is not None:
                item, self._pending = self._pending, None
            elif self._finished:
                return None
            else:
                with self._changed:
                    while not self._items:
                        self._changed.wait()
                    item = self._items.popleft()
                    self._changed.notify_all()
            if item is _DONE:
                self._finished = True
                return None
            if item[0] < index:
                continue  # a file not imported after all (skipped, failed, or read by the import)
            if item[0] > index:
                self._pending = item
                return None
            return item

    def take(self, probe: Probe, st: FileStat) -> ReadFile | None:
        """File ``probe`` as read ahead, if it was and is still as ``st`` says; else ``None``."""
        index = self._index.get(id(probe))
        if index is None or index < self._wanted:
            return None
        self._want(index)
        item = self._next(index)
        if item is None or item[1] != _START:
            self._want(index + 1)
            return None  # not read ahead: the import reads it itself
        read_st, header, version, reader = item[2]
        if read_st != st:
            self._want(index + 1)
            return None  # changed since: the import reads it itself
        return ReadFile(header, version, reader, self._batches(index))

    def _batches(self, index: int) -> Iterator[Batch]:
        try:
            while True:
                item = self._next(index)
                if item is None:  # pragma: no cover - the thread ends every file it starts
                    raise InvalidEntry("the read-ahead stopped in the middle of a file")
                if item[1] == _BATCH:
                    yield item[2]
                elif item[1] == _ERROR:
                    raise item[2]
                else:
                    return
        finally:
            self._want(index + 1)

    def close(self) -> None:
        """Stop the thread and wait for it (what it read and nobody took is dropped)."""
        with self._changed:
            self._stopped = True
            self._items.clear()
            self._changed.notify_all()
        self._thread.join()
        self._items.clear()
        if not self._closed:
            self._closed = True
            _short_switches(False)


def _import_new(
    fd: int,
    probe: Probe,
    st: FileStat,
    options: SyncOptions,
    result: FileResult,
    *,
    provider_kind: str,
    read: ReadFile | None = None,
) -> FileResult:
    """Import a file from its start; ``read``: the file as the read-ahead
    thread read it (the same size, time and inode as ``st``) instead of ``fd``."""
    batches: Iterable[Batch]
    if read is not None:
        reader, header, batches, version = read.reader, read.header, read.batches, read.version
    else:
        reader = reader_at(0)
        header, batches, version = _batches(fd, probe, reader)
    session_id = header["id"]
    provider = get_provider(provider_kind)
    created = False
    count = 0
    seen: set[str] = set()
    for batch in batches:
        count += len(batch.entries)
        result.malformed_lines += batch.malformed_lines
        named, title = title_of(batch.session_infos)
        if options.dry_run:
            check_copied_entries(batch.entries)
            for entry in batch.entries:
                if entry["id"] in seen:
                    raise InvalidEntry(f"Duplicate entry id {entry['id']}")
                seen.add(entry["id"])
            created = True
            continue
        saver = _mark_saver(
            "import",
            probe,
            provider_kind,
            stat=None,
            offset=batch.end_offset,
            entry_count=count,
            prefix_sha256=batch.prefix_sha256,
            last_entry_id=batch.entries[-1]["id"] if batch.entries else None,
            malformed_lines=result.malformed_lines,
            version=version,
        )
        if not created:
            session_ops.import_session(
                header=header,
                entries=batch.entries,
                actor=options.actor,
                channel=options.channel,
                provider=provider,
                title=title,
                created_at=parse_time(header.get("timestamp")),
                activity_at=_activity(batch.entries),
                also=saver,
            )
            created = True
        elif batch.entries:
            entry_ops.import_entries(
                session_id=session_id,
                entries=batch.entries,
                actor=options.actor,
                channel=options.channel,
                provider=provider,
                expected_entry_count=count - len(batch.entries),
                activity_at=_activity(batch.entries),
                also=saver,
            )
            if named:
                session_ops.update_session(
                    session_id=session_id, actor=options.actor, channel=options.channel, title=title
                )
    if not created and not options.dry_run:
        raise InvalidEntry("nothing to import: the file holds no complete line")  # pragma: no cover - probed
    if not options.dry_run:
        # Fully read: a re-run may now skip the file while its size and time stay.
        SyncedFile.objects.filter(mode="import", path_key=path_key(probe.path)).update(
            size=st.size, mtime_ns=st.mtime_ns, inode=st.inode
        )
    result.action, result.entries, result.torn_bytes = CREATED, count, reader.torn_bytes
    return result


def _import_again(
    fd: int, probe: Probe, st: FileStat, mark: SyncedFile, row: AgentSession, options: SyncOptions, result: FileResult
) -> FileResult:
    if _stat_matches(mark, st) and not options.checksum:
        result.action = UNCHANGED
        return result
    if st.inode != mark.inode and mark.inode != -1:
        return _rewritten(fd, probe, st, mark, options, result, "rewritten: it is a new file (another inode)")
    if st.size < mark.offset:
        return _rewritten(fd, probe, st, mark, options, result, "rewritten: it is shorter than the part imported")
    hasher = hash_prefix(fd, mark.offset)
    if hasher.hexdigest() != mark.prefix_sha256:
        return _rewritten(fd, probe, st, mark, options, result, "rewritten: the part imported has changed")
    reader = reader_at(mark.offset)
    provider = get_provider(row.provider)
    count = mark.entry_count
    session_count = mark.session_entry_count
    malformed = mark.malformed_lines
    wrote = False
    offset, prefix = mark.offset, mark.prefix_sha256
    for batch in iter_batches(fd, reader=reader, hasher=hasher):
        malformed += batch.malformed_lines
        result.malformed_lines += batch.malformed_lines
        offset, prefix = batch.end_offset, batch.prefix_sha256
        if not batch.entries:
            continue
        if mark.version < CURRENT_SESSION_VERSION:
            return _rewritten(
                fd,
                probe,
                st,
                mark,
                options,
                result,
                "rewritten: a v1/v2 file grew after its import "
                "(its entry ids were made up at import, so a tail cannot be matched)",
            )
        if row.status != AgentSession.Status.ACTIVE:
            raise Skip(f"closed: session {row.session_id} is {row.status}; the file's new entries are not imported")
        if row.entry_count != mark.session_entry_count and not wrote:
            raise LeafConflict(
                f"Session {row.session_id} holds {row.entry_count} entries, {mark.session_entry_count} after "
                "its last import: it was written to in the database since; not mixed with the file's tail"
            )
        count += len(batch.entries)
        result.entries += len(batch.entries)
        if options.dry_run:
            continue
        saver = _mark_saver(
            "import",
            probe,
            row.provider,
            stat=None,
            offset=batch.end_offset,
            entry_count=count,
            prefix_sha256=batch.prefix_sha256,
            last_entry_id=batch.entries[-1]["id"],
            malformed_lines=malformed,
            version=mark.version,
        )
        entry_ops.import_entries(
            session_id=row.session_id,
            entries=batch.entries,
            actor=options.actor,
            channel=options.channel,
            provider=provider,
            expected_entry_count=session_count,
            activity_at=_activity(batch.entries),
            also=saver,
        )
        session_count += len(batch.entries)
        wrote = True
        named, title = title_of(batch.session_infos)
        if named:
            session_ops.update_session(
                session_id=row.session_id, actor=options.actor, channel=options.channel, title=title
            )
    result.torn_bytes = reader.torn_bytes
    result.action = UPDATED if result.entries else UNCHANGED
    if not options.dry_run:
        # Read to the end: remember the file as it is now (blank lines and a
        # torn tail included), so an unchanged file is not read again.
        SyncedFile.objects.filter(pk=mark.pk).update(
            size=st.size,
            mtime_ns=st.mtime_ns,
            inode=st.inode,
            offset=offset,
            prefix_sha256=prefix,
            malformed_lines=malformed,
        )
    return result


def _rewritten(
    fd: int, probe: Probe, st: FileStat, mark: SyncedFile, options: SyncOptions, result: FileResult, reason: str
) -> FileResult:
    """A file that no longer starts with what was imported from it: reported,
    or with ``on_rewrite="reimport"`` its session is replaced by a fresh
    import, unless the session was written to in the database since."""
    if options.on_rewrite != "reimport":
        raise Skip(f"{reason}; use --on-rewrite reimport to replace session {mark.session_id}")
    old = AgentSession.objects.filter(session_id=mark.session_id).first()
    if old is not None and old.entry_count != mark.session_entry_count:
        raise LeafConflict(
            f"{reason}, but session {mark.session_id} holds {old.entry_count} entries, "
            f"{mark.session_entry_count} after its import: written to in the database since; not replaced"
        )
    new_id = probe.header["id"]
    if new_id != mark.session_id and AgentSession.objects.filter(session_id=new_id).exists():
        raise Skip(f"already exists: session {new_id} (this file's new content) is in the database")
    provider_kind = old.provider if old is not None else mark.provider
    if options.dry_run:
        _import_new(fd, probe, st, options, result, provider_kind=provider_kind)
        result.action, result.reason = UPDATED, f"{reason}; would be re-imported"
        return result

    def replace() -> None:
        if old is not None:
            session_ops.delete_session(
                session_id=old.session_id, actor=options.actor, channel=options.channel, hard=True
            )
        SyncedFile.objects.filter(pk=mark.pk).delete()
        _import_new(fd, probe, st, options, result, provider_kind=provider_kind)

    if provider_kind == "mysql":
        with transaction.atomic():  # the old session goes only if the new one is stored
            replace()
    else:
        replace()
    result.action, result.reason = UPDATED, f"{reason}; re-imported"
    return result


# --- export -------------------------------------------------------------------------------


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


def _export_tasks(folder: Path, options: SyncOptions) -> list[Task]:
    queryset = AgentSession.objects.exclude(status=AgentSession.Status.DELETED).order_by("pk")
    if options.provider is not None:
        queryset = queryset.filter(provider=options.provider)
    tasks: list[Task] = []
    for row in queryset.only("pk", "session_id", "provider", "cwd", "created_at", "session_file").iterator():
        target = export_path(folder, row, options.layout)
        tasks.append(_guarded(target, folder, lambda result, r=row, t=target: _export_session(r, t, options, result)))  # type: ignore[misc]
    return tasks


def _export_session(row: AgentSession, target: Path, options: SyncOptions, result: FileResult) -> FileResult:
    result.session_id = row.session_id
    row = AgentSession.objects.get(pk=row.pk)
    if row.provider == "file" and _same_file(row, target, _file_provider()):
        raise Skip(f"is the session's own file: session {row.session_id} is stored in it")
    key = path_key(target)
    mark = SyncedFile.objects.filter(mode="export", path_key=key).first()
    try:
        current: os.stat_result | None = os.stat(target, follow_symlinks=False)
    except FileNotFoundError:
        current = None
    if (
        mark is not None
        and current is not None
        and row.provider != "file"  # a file session's row may lag its file
        and mark.session_id == row.session_id
        and mark.session_entry_count == row.entry_count
        and _stat_matches(mark, FileStat.of(current))
        and not options.checksum
    ):
        result.action = UNCHANGED
        return result
    provider = get_provider(row.provider)
    header, entries = export_entries(provider, row.session_id, scope="full")
    data = b"".join([serialize_line(header), *(serialize_line(entry) for entry in entries)])
    result.entries = len(entries)
    if current is not None:
        existing = target.read_bytes()
        if existing != data:
            check_replaceable(existing, row.session_id, {entry["id"] for entry in entries})
    if current is not None and target.read_bytes() == data:
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
                "session_id": row.session_id,
                "provider": row.provider,
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
