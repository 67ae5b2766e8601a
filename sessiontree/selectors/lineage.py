"""A session's lineage: every session that may hold copies of its entries.

A fork (or a clone: a fork at the leaf) copies entries with their ids, and
so does a fork of a fork. The lineage is followed both ways through the
meta rows: the lineage tree (``parent``), and the ``parent_session_id``
reference a session keeps of its source (a session id, or the path of a Pi
file ending in ``_<id>.jsonl``). The reference outlives a hard-deleted
source, whose forks become lineage roots: forks that name the same deleted
source are still each other's lineage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_

from django.db.models import Q

from sessiontree.models import AgentSession
from sessiontree.providers import meta


@dataclass(frozen=True)
class _Row:
    pk: int
    session_id: str
    parent_pk: int | None
    parent_ref: str | None
    session_file: str
    created_at: datetime | None


_FIELDS = ("pk", "session_id", "parent_id", "parent_session_id", "session_file", "created_at")


def _rows(query: Q) -> list[_Row]:
    return [_Row(*values) for values in AgentSession.objects.filter(query).values_list(*_FIELDS)]


def _named_id(reference: str) -> str:
    """The id a source reference names (a plain id, or a Pi file's path)."""
    if "/" in reference or "\\" in reference or reference.endswith(".jsonl"):
        return meta.referenced_session_id(reference)
    return reference


def lineage_session_ids(session_id: str) -> list[str]:
    """``session_id`` first, then every other session of its lineage (its
    sources, their forks, forks of forks…, also across a hard-deleted
    source), oldest first."""
    known: dict[str, _Row] = {}
    ghosts: set[str] = set()  # sources named by a reference that no session has any more
    ask: Q | None = Q(session_id=session_id)
    while ask is not None:
        found = [row for row in _rows(ask) if row.session_id not in known]
        if not found:
            break
        for row in found:
            known[row.session_id] = row
        asks: list[Q] = []
        # Up: the lineage parent, and the session a reference names.
        parents = [row.parent_pk for row in found if row.parent_pk is not None]
        if parents:
            asks.append(Q(pk__in=parents))
        for row in found:
            if not row.parent_ref:
                continue
            named = {row.parent_ref, _named_id(row.parent_ref)}
            existing = set(AgentSession.objects.filter(session_id__in=named).values_list("session_id", flat=True))
            if existing:
                asks.append(Q(session_id__in=existing))
            else:
                ghosts.add(_named_id(row.parent_ref))
        # Down: sessions whose parent is one of these, or whose reference names one (or a ghost).
        names = {row.session_id for row in found} | ghosts
        files = {row.session_file for row in found if row.session_file}
        asks.append(Q(parent_id__in=[row.pk for row in found]))
        asks.append(Q(parent_session_id__in=names | files))
        asks += [Q(parent_session_id__endswith=f"_{name}.jsonl") for name in names]
        asks += [Q(parent_session_id__endswith=f"/{name}.jsonl") for name in names]
        # Every row found is linked to one of these (a ``_<name>.jsonl`` path ends in the id it names).
        kept = [row.session_id for row in _rows(reduce(or_, asks)) if row.session_id not in known]
        ask = Q(session_id__in=kept) if kept else None
    first = known.pop(session_id, None)
    if first is None:
        return [session_id]
    others = sorted(
        known.values(), key=lambda row: (row.created_at.timestamp() if row.created_at else 0.0, row.session_id)
    )
    return [session_id, *(row.session_id for row in others)]


__all__ = ["lineage_session_ids"]
