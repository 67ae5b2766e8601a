"""What an erase touches, decided without storage: which entries of a
session are the erased entry (or a copy of it), which summaries were made
from it, which context edits carry its content, and how a line of a file
the store does not read as a session (a backup, a malformed line, the
source of an import) is cleaned of it.

- A **copy** is an entry with the same id, type and timestamp (a fork or a
  clone copies entries as they are; an 8-hex id alone could collide).
- A **summary derived** from an entry is a ``compaction`` whose summarized
  range held it (on its path, before its ``firstKeptEntryId``: what it, or
  an earlier compaction whose summary it took over, summarized) or a
  ``branch_summary`` whose abandoned branch held it (on the path of its
  ``fromId`` and not on its own path). Derivation is transitive: a later
  compaction that summarized such a summary is derived too.
- A **context edit** of an erased entry (a hide's notice, an unhide's
  restored original) is erased with it.
- **Erased text** (``ErasedText``) finds what is left of an erased entry's
  text where no entry structure says so (a line that does not parse, a
  note, an audit detail): every run of at least ``MIN_RUN`` characters it
  shares with the entry's text, raw, as JSON escapes it, or with its
  whitespace collapsed.

Pure functions: ``services/erasure.py`` decides what to erase across a
lineage, the storages rewrite what this returns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from .errors import CorruptSessionTree, EntryNotFound
from .path import walk_path
from .redaction import ERASED, erase_entry
from .session_reader import BLANK, decode_line
from .text import entry_pieces
from .types import Entry

SUMMARY_TYPES = frozenset({"compaction", "branch_summary"})
# The shortest run of an erased text that is still recognized elsewhere:
# long enough not to match common words, short enough for an SSN.
MIN_RUN = 10
# Roles of a selected entry (``select_for_erasure``).
TARGET, SUMMARY, CONTEXT_EDIT = "target", "summary", "context_edit"

Signature = tuple[Any, Any]


def signature(entry: Mapping[str, Any]) -> Signature:
    """What tells a copy of an entry from another entry with the same id."""
    return entry.get("type"), entry.get("timestamp")


def is_copy(entry: Mapping[str, Any], tainted: Mapping[str, Signature]) -> bool:
    entry_id = entry.get("id")
    return isinstance(entry_id, str) and tainted.get(entry_id) == signature(entry)


# --- what a summary summarized ------------------------------------------------------------


def _path_ids(entry_id: str, parents: Mapping[str, Any]) -> list[str]:
    try:
        return walk_path(entry_id, parents)
    except (CorruptSessionTree, EntryNotFound):  # a cycle: nothing can be said of this summary's range
        return []


def summarized_ids(summary: Entry, parents: Mapping[str, Any]) -> set[str]:
    """The ids of the entries ``summary`` (a compaction or a branch summary)
    was made from, as far as the session holding it can tell."""
    summary_id = summary.get("id")
    if not isinstance(summary_id, str) or summary_id not in parents:
        return set()
    path = _path_ids(summary_id, parents)[:-1]  # its ancestors, root first
    if summary.get("type") == "compaction":
        first_kept = summary.get("firstKeptEntryId")
        if isinstance(first_kept, str) and first_kept in path:
            return set(path[: path.index(first_kept)])
        return set(path)  # keeps none (null or itself), or a damaged reference: everything before it
    from_id = summary.get("fromId")
    if not isinstance(from_id, str) or from_id not in parents:
        return set()  # from the root, or from a branch this session does not hold (a fork's copy)
    return set(_path_ids(from_id, parents)) - set(path)


def select_for_erasure(
    entries: Sequence[Entry], tainted: Mapping[str, Signature], *, derived: bool
) -> list[tuple[Entry, str]]:
    """The entries of one session (append order) an erase of ``tainted``
    (id → signature) touches, each with its role: ``target`` (a copy of a
    tainted entry), ``summary`` (derived from one, with ``derived``) and
    ``context_edit`` (editing one, with ``derived``). Append order."""
    roles: dict[str, str] = {}
    for entry in entries:
        if is_copy(entry, tainted):
            roles[entry["id"]] = TARGET
    if derived and roles:
        parents = {e["id"]: e.get("parentId") for e in entries if isinstance(e.get("id"), str)}
        summaries = [e for e in entries if e.get("type") in SUMMARY_TYPES and isinstance(e.get("id"), str)]
        ranges = {e["id"]: summarized_ids(e, parents) for e in summaries if e["id"] not in roles}
        grew = True
        while grew:
            grew = False
            for summary_id, summarized in ranges.items():
                if summary_id not in roles and not summarized.isdisjoint(roles):
                    roles[summary_id] = SUMMARY
                    grew = True
        for entry in entries:
            if (
                entry.get("type") == "context_edit"
                and entry.get("targetId") in roles
                and isinstance(entry.get("id"), str)
                and entry["id"] not in roles
            ):
                roles[entry["id"]] = CONTEXT_EDIT
    return [(entry, roles[entry["id"]]) for entry in entries if entry.get("id") in roles]


# --- erased text found where no structure says so ---------------------------------------------

_SPACES = re.compile(r"\s+")


def _collapsed(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _json_escaped(text: str) -> str:
    return orjson.dumps(text).decode()[1:-1]


class ErasedText:
    """Runs of at least ``MIN_RUN`` characters of erased text, found in any
    other text: raw, JSON-escaped (a line of a file) or with whitespace
    collapsed (a preview, a log message).

    Grams of ``MIN_RUN - STRIDE + 1`` characters are indexed every
    ``STRIDE`` characters of the erased text: any shared run of ``MIN_RUN``
    characters holds one of them whole, and is then extended both ways."""

    STRIDE = 3

    def __init__(self, pieces: Iterable[str] = ()) -> None:
        self.forms: list[str] = []
        self._index: dict[str, list[tuple[int, int]]] = {}
        self._gram = MIN_RUN - self.STRIDE + 1
        self.add(pieces)

    def __bool__(self) -> bool:
        return bool(self.forms)

    def add(self, pieces: Iterable[str]) -> None:
        known = set(self.forms)
        for piece in pieces:
            for form in (piece, _json_escaped(piece), _collapsed(piece)):
                if len(form) >= MIN_RUN and form not in known:
                    known.add(form)
                    self._index_form(form)

    def _index_form(self, form: str) -> None:
        number = len(self.forms)
        self.forms.append(form)
        gram = self._gram
        for start in range(0, len(form) - gram + 1, self.STRIDE):
            places = self._index.setdefault(form[start : start + gram], [])
            if len(places) < 8:  # a gram repeated more often (1111 1111 …) is found from its first places
                places.append((number, start))

    def _runs(self, text: str) -> Iterator[tuple[int, int]]:
        gram = self._gram
        at = 0
        end = len(text)
        while at + gram <= end:
            places = self._index.get(text[at : at + gram])
            best: tuple[int, int] | None = None
            for number, start in places or ():
                form = self.forms[number]
                left = 0
                while at - left > 0 and start - left > 0 and text[at - left - 1] == form[start - left - 1]:
                    left += 1
                right = gram
                while at + right < end and start + right < len(form) and text[at + right] == form[start + right]:
                    right += 1
                if left + right >= MIN_RUN and (best is None or left + right > best[1] - best[0]):
                    best = (at - left, at + right)
            if best is not None:
                yield best
                at = best[1]
            else:
                at += 1

    def _scrub_exactly(self, text: str) -> str:
        pieces: list[str] = []
        done = 0
        for start, stop in self._runs(text):
            start = max(start, done)
            if pieces and start == done and pieces[-1] == ERASED:
                done = stop  # adjoining runs: one marker
                continue
            pieces += [text[done:start], ERASED]
            done = stop
        if not pieces:
            return text
        return "".join([*pieces, text[done:]])

    def scrub(self, text: str) -> str:
        """``text`` with every run it shares with the erased text replaced by
        the marker (whitespace collapsed when that is how it matches)."""
        if not self.forms or len(text) < MIN_RUN:
            return text
        scrubbed = self._scrub_exactly(text)
        if scrubbed != text:
            return scrubbed
        collapsed = _collapsed(text)
        if collapsed != text:
            scrubbed = self._scrub_exactly(collapsed)
            if scrubbed != collapsed:
                return scrubbed
        return text

    def holds(self, text: str) -> bool:
        return self.scrub(text) != text


def target_pieces(entries: Iterable[Entry]) -> list[str]:
    """The text pieces of erased entries (what ``ErasedText`` looks for)."""
    return [piece for entry in entries for piece in entry_pieces(entry)]


# --- lines and values outside a session's own entries -------------------------------------------


class ErasureRule:
    """What an erase removes, applied where the session's own entries are
    not: ``tainted`` (id → signature) names the erased entries and their
    copies, ``text`` is their text."""

    def __init__(self, tainted: Mapping[str, Signature], text: ErasedText | None = None) -> None:
        self.tainted = dict(tainted)
        self.text = text if text is not None else ErasedText()
        self._signatures = set(self.tainted.values())

    def erase_object(self, value: Any) -> Any:
        """A JSON object read outside a session's entries (a line of a backup
        or of an import's source): erased when it is a copy of a tainted
        entry, or an entry without an id (a v1 file's) with a tainted
        signature or the erased text; otherwise ``value`` itself."""
        if not isinstance(value, dict) or value.get("type") == "session":
            return value
        entry_id = value.get("id")
        if isinstance(entry_id, str):
            return erase_entry(value) if is_copy(value, self.tainted) else value
        if signature(value) in self._signatures or any(self.text.holds(piece) for piece in entry_pieces(value)):
            return erase_entry(value)
        return value

    def erase_line(self, line: bytes) -> bytes | None:
        """A line of a file that is not read as the session's entries (a
        backup of it, the source of an import, a malformed or torn line of
        its own file) without the erased text; ``None`` when it holds none.
        A line that parses is erased as ``erase_object`` says; one that does
        not has the erased text's runs replaced by the marker."""
        body = line.rstrip(b"\r\n")
        ending = line[len(body) :]
        value = decode_line(body)
        if value is BLANK:
            return None
        if isinstance(value, dict):
            erased = self.erase_object(value)
            if erased is value or erased == value:
                return None
            return orjson.dumps(erased) + ending
        raw = body.decode("utf-8", "surrogateescape")
        scrubbed = self.text.scrub(raw)
        if scrubbed == raw:
            return None
        return scrubbed.encode("utf-8", "surrogateescape") + ending

    def scrub_value(self, value: Any, erased: Mapping[str, Signature]) -> Any:
        """A JSON value kept beside the tree (an audit detail, the stored
        answer of an idempotent write) without the erased entries: an entry
        among ``erased`` (id → signature) is replaced by its erased form,
        strings have the erased text's runs replaced by the marker. Returns
        ``value`` itself when nothing changes."""
        if isinstance(value, dict):
            entry_id = value.get("id")
            if isinstance(entry_id, str) and erased.get(entry_id) == signature(value) and "type" in value:
                new_entry = erase_entry(value)
                return value if new_entry == value else new_entry
            changed = False
            out: dict[str, Any] = {}
            for key, item in value.items():
                new = self.scrub_value(item, erased)
                changed = changed or new is not item
                out[key] = new
            return out if changed else value
        if isinstance(value, list):
            items = [self.scrub_value(item, erased) for item in value]
            return items if any(new is not old for new, old in zip(items, value, strict=True)) else value
        if isinstance(value, str):
            scrubbed = self.text.scrub(value)
            return scrubbed if scrubbed != value else value
        return value


__all__ = [
    "CONTEXT_EDIT",
    "MIN_RUN",
    "SUMMARY",
    "TARGET",
    "ErasedText",
    "ErasureRule",
    "is_copy",
    "select_for_erasure",
    "signature",
    "summarized_ids",
    "target_pieces",
]
