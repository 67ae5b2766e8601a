"""The import's read-ahead thread: while one file's batches are written,
the next new file is read, parsed, migrated, checked and encoded."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection

from sessiontree.core.errors import InvalidEntry
from sessiontree.core.session_reader import SessionReader
from sessiontree.models import AgentSession, SyncedFile
from sessiontree.providers.factory import get_provider
from sessiontree.providers.template import TreeProvider

from .marks import Probe
from .pi_files import Batch, FileStat, file_batches, open_file, path_key, reader_at

logger = logging.getLogger(__name__)


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
            header, batches, version = file_batches(fd, probe.header, reader)
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
