"""Versions of sessions and entries, as entity tags (HTTP ``ETag``/``If-Match``).

- A **session's tag** names its leaf and its version, the session's
  ``updated_at`` (every change of the session moves it: appends, leaf moves,
  title, metadata, status). Tree writes compare only the leaf a tag names
  (that is the ``expected_leaf_id`` check); writes to the session itself
  (title, metadata, status, delete) compare the whole tag.
- An **entry's tag** is a digest of the entry as stored: a completed entry
  never changes, an in-flight one changes with every patch.

Tags are opaque to callers: compare them, never parse them. Ours read
``"<version digits>-<leaf id, percent-encoded>"`` and ``"e<hex digest>"``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import orjson

from sessiontree.core.errors import BadInput, PreconditionFailed
from sessiontree.core.types import UNSET, Entry, Unset

# Characters an entry id keeps in a tag; anything else is percent-encoded, so
# that an id read from a Pi file (it may hold '"' or spaces) still makes a valid tag.
_LEAF_SAFE = "-._~:"
_SESSION_TAG = re.compile(r'"(\d+)-([^"]*)"')


def session_etag_of(leaf_entry_id: str | None, updated_at: str) -> str:
    """The tag of a session whose leaf is ``leaf_entry_id`` and whose
    ``updated_at`` (ISO-8601, as the session dict holds it) is ``updated_at``."""
    version = "".join(ch for ch in updated_at if ch.isdigit()) or "0"
    leaf = quote(leaf_entry_id, safe=_LEAF_SAFE) if leaf_entry_id else ""
    return f'"{version}-{leaf}"'


def session_etag(session: Mapping[str, Any]) -> str:
    """The tag of a session dict (``leaf_entry_id``, ``updated_at``)."""
    return session_etag_of(session.get("leaf_entry_id"), str(session.get("updated_at") or ""))


def leaf_of(tag: str) -> str | None | Unset:
    """The leaf a session tag names (``None``: no leaf yet); ``UNSET`` when
    ``tag`` is not a session tag of ours (it can match no session)."""
    found = _SESSION_TAG.fullmatch(tag)
    if found is None:
        return UNSET
    return unquote(found.group(2)) or None


def _canonical(entry: Entry) -> bytes:
    try:
        return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # beyond orjson (a lone surrogate, a huge integer)
        return json.dumps(entry, sort_keys=True, separators=(",", ":")).encode("ascii")


def entry_etag(entry: Entry) -> str:
    """The tag of an entry as stored: equal for equal content, whatever the storage."""
    return f'"e{hashlib.sha256(_canonical(entry)).hexdigest()[:32]}"'


@dataclass(frozen=True)
class ExpectedTags:
    """What a conditional write expects: any current version (``*``), or one
    of ``tags`` (strong comparison: a weak tag matches nothing)."""

    tags: tuple[str, ...] = ()
    any_version: bool = False

    @classmethod
    def of(cls, value: str | Collection[str] | ExpectedTags) -> ExpectedTags:
        if isinstance(value, ExpectedTags):
            return value
        if isinstance(value, str):
            return cls(any_version=True) if value == "*" else cls(tags=(value,))
        return cls(tags=tuple(value))

    def matches(self, current: str) -> bool:
        return self.any_version or current in self.tags

    def expected_leaf_id(self) -> str | None | Unset:
        """The leaf a tree write must find (``UNSET``: any leaf, for ``*``).

        Only the leaf counts for a tree write. Tags that are no session's
        name no leaf: if none does, the write cannot succeed (``PreconditionFailed``);
        tags naming different leaves cannot all be one check (``BadInput``)."""
        if self.any_version:
            return UNSET
        leaves = {leaf for leaf in map(leaf_of, self.tags) if not isinstance(leaf, Unset)}
        if not leaves:
            raise PreconditionFailed("If-Match names no version of this session; read the session for its ETag")
        if len(leaves) > 1:
            raise BadInput("If-Match names several leaves; send the one tag you read")
        return leaves.pop()


def check(expected: str | Collection[str] | ExpectedTags | Unset, current: str, what: str) -> None:
    """Refuse (``PreconditionFailed``) unless ``current`` is what was expected."""
    if isinstance(expected, Unset):
        return
    if not ExpectedTags.of(expected).matches(current):
        raise PreconditionFailed(f"{what} is at version {current}, not the one expected; read it again")


def check_leaf_agrees(expected_leaf_id: str | None | Unset, tag_leaf: str | None | Unset) -> str | None | Unset:
    """One expected leaf out of a body's ``expected_leaf_id`` and a tag's leaf:
    either, or both when they agree. When they do not, no leaf can satisfy
    both preconditions: ``PreconditionFailed`` (412), as for a stale tag."""
    if isinstance(tag_leaf, Unset):
        return expected_leaf_id
    if isinstance(expected_leaf_id, Unset):
        return tag_leaf
    if expected_leaf_id != tag_leaf:
        raise PreconditionFailed(
            f"expected_leaf_id {expected_leaf_id!r} and the If-Match tag's leaf {tag_leaf!r} disagree: "
            "no leaf satisfies both; send one of them"
        )
    return expected_leaf_id
