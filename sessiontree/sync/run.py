"""One run of ``sync_sessions``: the folder's files probed and ordered
(parents before the forks that name them), one task per file or session,
run by one thread or by workers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django.db import connection

from sessiontree.core.errors import BadInput, InvalidSessionId, SessionTreeError
from sessiontree.providers import meta

from .export import export_tasks
from .importer import import_file
from .index import index_file
from .marks import Probe
from .options import SyncOptions
from .pi_files import HeaderProbe, folder_lock, iter_session_files, read_header
from .read_ahead import ReadAhead
from .report import FAILED, SKIPPED, FileResult, SyncReport, Task, guarded, one_line, shown

Progress = Callable[[int], None]


def sync_folder(
    folder: Path, options: SyncOptions, *, progress: Callable[[int], Progress | None] | None = None
) -> SyncReport:
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
            tasks = export_tasks(folder, options)
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


# --- index and import: the files of the folder --------------------------------------------


def _file_tasks(folder: Path, options: SyncOptions, report: SyncReport) -> tuple[list[list[Task]], ReadAhead | None]:
    """One task per session file, grouped in levels: a file whose header names
    a parent session in the folder comes in a later level than the parent, so
    lineage links resolve whatever the workers do. An import by one worker
    gets a ``ReadAhead`` too (to close when the tasks have run)."""
    probes: list[Probe] = []
    first_of: dict[str, Path] = {}
    for path in iter_session_files(folder):
        name = shown(path, folder)
        try:
            found: HeaderProbe = read_header(path)
        except SessionTreeError as exc:
            report.results.append(
                FileResult(name, FAILED, reason=one_line(exc), code=exc.code, exit_code=exc.exit_code)
            )
            continue
        if found.header is None:
            report.results.append(FileResult(name, SKIPPED, reason=found.reason))
            continue
        session_id = found.header["id"]
        try:
            meta.validate_session_id(session_id, new=True)
        except InvalidSessionId:
            report.results.append(
                FileResult(name, SKIPPED, reason=f"header id is not a usable session id ({session_id[:80]!r})")
            )
            continue
        if session_id in first_of:
            report.results.append(
                FileResult(
                    name,
                    SKIPPED,
                    session_id=session_id,
                    reason=f"duplicate session id: {session_id} is also {shown(first_of[session_id], folder)}",
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
    tasks = [[guarded(probe.path, folder, _bind(probe, options, ahead)) for probe in level] for level in ordered]
    return tasks, ahead


def _bind(probe: Probe, options: SyncOptions, ahead: ReadAhead | None) -> Callable[[FileResult], FileResult]:
    if options.mode == "index":
        return lambda result: index_file(probe, options, result)
    return lambda result: import_file(probe, options, result, ahead)


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
