"""The ``file`` storage's persisted index of a session file (its "sidecar").

What ``FileIndex`` derives from a file's lines (ids, parents, types, where
each line lies, path facts, keyed positions, and whatever else the index
keeps) is written beside the file once it is known, so that another process
opening the file loads it instead of decoding every line, then reads only
the lines appended since (the index's tail read).

Where: ``<folder>/.sessiontree-index/<file name>.idx``, beside the session
file (as the storage's other companions: ``.writing``, ``.bak``). Pi lists
``*.jsonl`` files of a folder (and of the folders one level down); the sync
command registers ``*.jsonl`` files: a hidden folder of ``.idx`` files is
neither.

The file stays Pi's, byte for byte; the sidecar holds no payload text (ids,
parent ids, types, offsets, path facts, and the keys of keyed reads: tool
names, custom types, target ids, the entries' keys of ``core/entry_keys.py``). Erase, destroy, migration and every cut of
the file delete it.

**Never served stale.** A sidecar names the file it describes: device and
inode, the size and mtime it saw, the bytes it covers (``offset``), a hash of
the file's first bytes and one of a sample of the lines it indexes (the last
one included). It is used only when all of them still hold; a file that grew
(appended by Pi or another process that did not rewrite the sidecar) is
then read from ``offset`` on. A file of the same size with another mtime, a
smaller one, another inode, different bytes where the sample lies, a sidecar
of another format (or Python) version, or damaged (its payload has a
checksum) is read whole again, and the sidecar written anew.

**Written atomically**: a temporary file beside it, renamed over it, so a
crash leaves the old sidecar, the new one, or a stray temporary file (never
read), and processes writing it at the same time each put a whole one in
place (any of them describes a prefix of the same append-only file).

``SESSIONTREE_FILE_INDEX_SIDECAR`` (default on) turns it off.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import logging
import marshal
import os
import struct
import sys
import threading
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

from sessiontree.core import entry_keys
from sessiontree.core.path_facts import PathFacts
from sessiontree.core.session_reader import gc_paused

logger = logging.getLogger(__name__)

FOLDER = ".sessiontree-index"
SUFFIX = ".idx"
MAGIC = b"STIDX\x01\n"
# Bump when what the index derives from a line changes meaning (the slots'
# names and PathFacts' fields are part of the format key already).
# 3: an entry whose parent comes later in the file is that parent's child, not a root;
# 4: the path facts as columns by position (the slots' names say it too), the
# parents as positions;
# 5: the entries' keys (``core/entry_keys.py``, the slot ``key_at``; the
# registered rules are part of the format key too).
VERSION = 5
# Bytes of the file's beginning whose hash a sidecar keeps (the header line, mostly).
HEAD_BYTES = 4096
# Lines whose bytes a sidecar's sample hash covers (spread evenly, the last one always).
SAMPLE_LINES = 16
# A process rewrites the sidecar once this many entries (or an eighth of the
# index, whichever is more) are not in it: an append does not rewrite it.
MIN_UNSAVED = 256

# Slots that are not the index's content: where it came from, its in-process
# token and bookkeeping, and what is rebuilt from the rest.
_NOT_PERSISTED = frozenset(
    {
        "token",
        "inode",
        "size",
        "mtime_ns",
        "offset",
        "sidecar_entries",
        "position",
        "type_counts",
        "waiting",
        "key_rules",
    }
)
_META = struct.Struct("<I")


def enabled() -> bool:
    return bool(getattr(settings, "SESSIONTREE_FILE_INDEX_SIDECAR", True))


def path_of(session_file: Path) -> Path:
    return session_file.parent / FOLDER / (session_file.name + SUFFIX)


def delete(session_file: Path) -> None:
    """Drop the sidecar of ``session_file`` (its file rewritten, cut or
    gone), and what writers that died left of theirs."""
    target = path_of(session_file)
    try:
        os.unlink(target)
    except FileNotFoundError:
        pass
    except OSError as exc:  # pragma: no cover - a folder we cannot write to: nothing was written there either
        logger.warning("Could not delete the index of %s: %s", session_file.name, exc)
    if target.parent.is_dir():
        for stray in target.parent.glob(glob.escape(target.name) + ".*.tmp"):
            _unlink_quietly(stray)


def format_key(slots: tuple[str, ...]) -> str:
    """What a sidecar must have been written with to be read: this module's
    version, the index's slots, PathFacts' fields, the entry key rules
    registered (``entry_keys.signature``), Python's marshal format."""
    return _format_key(slots, entry_keys.signature())


@functools.cache
def _format_key(slots: tuple[str, ...], rules: str) -> str:
    parts = [str(VERSION), ",".join(sorted(slots)), ",".join(PathFacts._fields), rules]
    parts += [f"{sys.version_info[0]}.{sys.version_info[1]}", str(marshal.version)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


# The index's columns with one item an entry (those it has).
_PER_ENTRY = (
    "ids",
    "parents",
    "types",
    "offsets",
    "lengths",
    "has_child",
    "first_child",
    "fact_depth",
    "fact_compaction",
    "fact_model",
    "fact_thinking",
    "fact_exact",
    "fact_jump",
    "fact_jump_depth",
)


def _whole(index: Any, count: int) -> bool:
    return all(len(getattr(index, name)) == count for name in _PER_ENTRY if hasattr(index, name))


def _persisted(index: Any) -> list[str]:
    return [name for name in type(index).__slots__ if name not in _NOT_PERSISTED]


# --- encoding the index's slots --------------------------------------------------------


# Separates the ids in the sidecar's one string of them (used only when no id holds it).
_SEP = "\x00"


def _encode(name: str, value: Any, position: dict[str, int]) -> tuple[Any, ...]:
    """A slot as marshal writes it fast and reads it back fast: arrays (the
    path facts' columns among them) as their bytes, the ids as one string,
    the parents as the positions of the ids they name (read back as those
    very id objects, not a second copy of each string); anything else as
    it is."""
    if name == "parents":
        return _encode_parents(value, position)
    if isinstance(value, array):
        return ("A", value.typecode, value.tobytes())
    if isinstance(value, bytearray):
        return ("B", bytes(value))
    if name == "ids":
        joined = _SEP.join(value)
        if joined.count(_SEP) == max(len(value) - 1, 0):
            return ("S", joined.encode("utf-8", "surrogatepass"), len(value))
        return ("V", value)
    return ("V", value)


def _encode_parents(parents: list[Any], position: dict[str, int]) -> tuple[Any, ...]:
    """("P", positions, others): each parent's position in the index, -1
    for none, -2 for an id the index does not hold (a parent still to come,
    or none at all), whose string ``others`` keeps by the child's position."""
    at_of = position.get
    positions = array("i", [-1 if parent is None else at_of(parent, -2) for parent in parents])
    others = {at: parents[at] for at, found in enumerate(positions) if found == -2} if -2 in positions else {}
    return ("P", positions.tobytes(), others)


def _decode(encoded: tuple[Any, ...], ids: list[str]) -> Any:
    kind = encoded[0]
    if kind == "P":
        positions = array("i")
        positions.frombytes(encoded[1])
        parents: list[Any] = [ids[at] if at >= 0 else None for at in positions]
        for at, parent in encoded[2].items():
            parents[at] = parent
        return parents
    if kind == "A":
        out = array(encoded[1])
        out.frombytes(encoded[2])
        return out
    if kind == "B":
        return bytearray(encoded[1])
    if kind == "S":
        text = encoded[1].decode("utf-8", "surrogatepass")
        return text.split(_SEP) if encoded[2] else []
    if kind == "V":
        return encoded[1]
    raise ValueError(f"unknown slot encoding {kind!r}")


# --- checking a sidecar against its file -------------------------------------------------


def _sample(count: int) -> list[int]:
    if count <= 0:
        return []
    return sorted({count - 1, *(i * count // SAMPLE_LINES for i in range(SAMPLE_LINES))})


def _file_hashes(fd: int, offsets: array, lengths: array, count: int, covered: int) -> tuple[str, str]:
    """The hash of the file's first bytes and of the sampled lines' bytes."""
    head = os.pread(fd, min(covered, HEAD_BYTES), 0)
    sample = hashlib.blake2b(digest_size=16)
    for at in _sample(count):
        sample.update(os.pread(fd, lengths[at], offsets[at]))
        sample.update(b"\n")
    return hashlib.blake2b(head, digest_size=16).hexdigest(), sample.hexdigest()


# --- writing and reading -------------------------------------------------------------------


def due(index: Any) -> bool:
    """Whether enough of ``index`` is not in its sidecar to write it again."""
    unsaved = len(index.ids) - index.sidecar_entries
    return unsaved > 0 and unsaved >= max(MIN_UNSAVED, len(index.ids) // 8)


def save(session_file: Path, fd: int, index: Any) -> bool:
    """Write ``index`` (of ``session_file``, open as ``fd`` and locked) as its
    sidecar, atomically. Returns whether it was written; failing to write
    one (a read-only folder, a full disk) is never an error."""
    count = len(index.ids)
    slots = _persisted(index)
    try:
        if not _whole(index, count):
            return False  # being extended meanwhile (another thread): the next write catches up
        if os.fstat(fd).st_ino != index.inode or os.stat(session_file).st_ino != index.inode:
            return False  # replaced meanwhile (an erase, a migration): this index is of the old file
        head, sample = _file_hashes(fd, index.offsets, index.lengths, count, index.offset)
        with gc_paused():
            payload = marshal.dumps({name: _encode(name, getattr(index, name), index.position) for name in slots})
    except (ValueError, TypeError, OSError) as exc:  # a slot marshal cannot write: a bug, but never the read's
        logger.warning("Not writing the index of %s: %s", session_file.name, exc)
        return False
    st = os.fstat(fd)
    meta = {
        "format": format_key(tuple(type(index).__slots__)),
        "dev": st.st_dev,
        "inode": index.inode,
        "size": index.size,
        "mtime_ns": index.mtime_ns,
        "offset": index.offset,
        "count": count,
        "head": head,
        "sample": sample,
        "crc": zlib.crc32(payload),
        "payload": len(payload),
    }
    meta_bytes = orjson.dumps(meta)
    target = path_of(session_file)
    temp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        target.parent.mkdir(mode=0o755, exist_ok=True)
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(b"".join([MAGIC, _META.pack(len(meta_bytes)), meta_bytes, payload]))
            while view:
                view = view[os.write(out, view) :]
        finally:
            os.close(out)
        os.replace(temp, target)
    except OSError as exc:
        logger.info("Not writing the index of %s: %s", session_file.name, exc)
        _unlink_quietly(temp)
        return False
    index.sidecar_entries = count
    return True


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def load(session_file: Path, fd: int, st: os.stat_result, make: Callable[..., Any]) -> Any | None:
    """The index of ``session_file`` (open as ``fd``, locked; ``st`` its
    stat) from its sidecar, or ``None`` when there is none or it does not
    describe this file any more (then the caller reads the file whole).
    ``make(inode=, size=, mtime_ns=, offset=, header=)`` builds an empty index;
    the sidecar's slots are set on it."""
    try:
        source = os.open(path_of(session_file), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(source, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    try:
        # Many small objects, none of them cyclic garbage, kept: see gc_paused.
        with gc_paused(promote=True):
            return _from_bytes(data, fd, st, make)
    except Exception as exc:  # damaged in a way the checks below did not name: read the file whole
        logger.warning("Ignoring the index of %s: %s", session_file.name, exc)
        return None


def _from_bytes(data: bytes, fd: int, st: os.stat_result, make: Callable[..., Any]) -> Any | None:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _META.size:
        return None
    (meta_len,) = _META.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _META.size
    meta = orjson.loads(data[start : start + meta_len])
    payload = memoryview(data)[start + meta_len :]
    if (meta.get("dev"), meta.get("inode")) != (st.st_dev, st.st_ino):
        return None
    size, mtime_ns, covered, count = meta["size"], meta["mtime_ns"], meta["offset"], meta["count"]
    if st.st_size < size or (st.st_size == size and st.st_mtime_ns != mtime_ns) or covered > size:
        return None  # cut, or rewritten in place
    if len(payload) != meta["payload"] or zlib.crc32(payload) != meta["crc"]:
        return None  # torn or damaged
    index = make(inode=st.st_ino, size=size, mtime_ns=mtime_ns, offset=covered, header={})
    if meta["format"] != format_key(tuple(type(index).__slots__)):
        return None
    columns = marshal.loads(payload)
    ids = _decode(columns["ids"], [])
    if not isinstance(ids, list) or len(ids) != count:
        return None
    for name in _persisted(index):
        setattr(index, name, ids if name == "ids" else _decode(columns[name], ids))
    index.position = dict(zip(ids, range(count), strict=True))
    rebuild = getattr(index, "loaded", None)
    if rebuild is not None:
        rebuild()  # what the index derives from its slots and does not persist
    if not _whole(index, count):
        return None
    if len(index.position) != count or (count and index.offsets[-1] + index.lengths[-1] > covered):
        return None
    if _file_hashes(fd, index.offsets, index.lengths, count, covered) != (meta["head"], meta["sample"]):
        return None
    index.sidecar_entries = count
    return index
