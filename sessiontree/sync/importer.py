"""``sync_sessions --mode import``: every file's entries copied into a
provider (``mysql`` by default); a file that grew gets only its appended
tail copied; a file whose imported part changed is reported, or replaced
under ``on_rewrite="reimport"``, never mixed."""

from __future__ import annotations

import os
from collections.abc import Iterable

from django.db import transaction

from sessiontree.core.entries import check_copied_entries
from sessiontree.core.errors import InvalidEntry, LeafConflict
from sessiontree.core.types import CURRENT_SESSION_VERSION, SessionTreeSession
from sessiontree.models import SyncedFile
from sessiontree.providers.factory import get_provider
from sessiontree.services import entries as entry_ops
from sessiontree.services import sessions as session_ops

from .marks import Probe, activity, mark_saver, session_meta, stat_matches, stored_entry_count
from .options import SyncOptions
from .pi_files import (
    Batch,
    FileStat,
    file_batches,
    hash_prefix,
    iter_batches,
    open_file,
    parse_time,
    path_key,
    reader_at,
    title_of,
)
from .read_ahead import ReadAhead, ReadFile
from .report import CREATED, UNCHANGED, UPDATED, FileResult, Skip


def import_file(probe: Probe, options: SyncOptions, result: FileResult, ahead: ReadAhead | None) -> FileResult:
    """Import a file into the target provider: whole when new, its tail when it grew."""
    header, path = probe.header, probe.path
    session_id = result.session_id = header["id"]
    mark = SyncedFile.objects.filter(mode="import", path_key=path_key(path)).first()
    row = session_meta(session_id)
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
            raise Skip(
                f"already exists: session {session_id} is a {row['provider']} session not imported from this file"
            )
        read = ahead.take(probe, st) if ahead is not None else None
        return _import_new(fd, probe, st, options, result, provider_kind=options.target_kind, read=read)
    finally:
        os.close(fd)


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
        header, batches, version = file_batches(fd, probe.header, reader)
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
        saver = mark_saver(
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
                activity_at=activity(batch.entries),
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
                activity_at=activity(batch.entries),
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
    fd: int,
    probe: Probe,
    st: FileStat,
    mark: SyncedFile,
    row: SessionTreeSession,
    options: SyncOptions,
    result: FileResult,
) -> FileResult:
    def rewritten(reason: str) -> FileResult:
        return _rewritten(fd, probe, st, mark, options, result, f"rewritten: {reason}")

    if stat_matches(mark, st) and not options.checksum:
        result.action = UNCHANGED
        return result
    if st.inode != mark.inode and mark.inode != -1:
        return rewritten("it is a new file (another inode)")
    if st.size < mark.offset:
        return rewritten("it is shorter than the part imported")
    hasher = hash_prefix(fd, mark.offset)
    if hasher.hexdigest() != mark.prefix_sha256:
        return rewritten("the part imported has changed")
    reader = reader_at(mark.offset)
    session_id = row["session_id"]
    provider = get_provider(row["provider"])
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
            return rewritten(
                "a v1/v2 file grew after its import (its entry ids were made up at import, so a tail cannot be matched)"
            )
        if row["status"] != "active":
            raise Skip(f"closed: session {session_id} is {row['status']}; the file's new entries are not imported")
        if not wrote and (held := stored_entry_count(row)) != mark.session_entry_count:
            # Asked of its storage: a file session's file may hold more than its row has seen.
            raise LeafConflict(
                f"Session {session_id} holds {held} entries, {mark.session_entry_count} after "
                "its last import: it was written to in the database since; not mixed with the file's tail"
            )
        count += len(batch.entries)
        result.entries += len(batch.entries)
        if options.dry_run:
            continue
        saver = mark_saver(
            "import",
            probe,
            row["provider"],
            stat=None,
            offset=batch.end_offset,
            entry_count=count,
            prefix_sha256=batch.prefix_sha256,
            last_entry_id=batch.entries[-1]["id"],
            malformed_lines=malformed,
            version=mark.version,
        )
        entry_ops.import_entries(
            session_id=session_id,
            entries=batch.entries,
            actor=options.actor,
            channel=options.channel,
            provider=provider,
            expected_entry_count=session_count,
            activity_at=activity(batch.entries),
            also=saver,
        )
        session_count += len(batch.entries)
        wrote = True
        named, title = title_of(batch.session_infos)
        if named:
            session_ops.update_session(session_id=session_id, actor=options.actor, channel=options.channel, title=title)
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
    old = session_meta(mark.session_id)
    held = stored_entry_count(old) if old is not None else None
    if held is not None and held != mark.session_entry_count:
        raise LeafConflict(
            f"{reason}, but session {mark.session_id} holds {held} entries, "
            f"{mark.session_entry_count} after its import: written to in the database since; not replaced"
        )
    new_id = probe.header["id"]
    if new_id != mark.session_id and session_meta(new_id) is not None:
        raise Skip(f"already exists: session {new_id} (this file's new content) is in the database")
    provider_kind = old["provider"] if old is not None else mark.provider
    if options.dry_run:
        _import_new(fd, probe, st, options, result, provider_kind=provider_kind)
        result.action, result.reason = UPDATED, f"{reason}; would be re-imported"
        return result

    def replace() -> None:
        if old is not None:
            session_ops.delete_session(
                session_id=old["session_id"], actor=options.actor, channel=options.channel, hard=True
            )
        SyncedFile.objects.filter(pk=mark.pk).delete()
        _import_new(fd, probe, st, options, result, provider_kind=provider_kind)

    if get_provider(provider_kind).joins_outer_transaction:
        with transaction.atomic():  # the old session goes only if the new one is stored
            replace()
    else:
        replace()
    result.action, result.reason = UPDATED, f"{reason}; re-imported"
    return result
