"""The session lineage (which session was forked from which) as a django-mptt
tree over ``AgentSession``, written without anything shared by every session.

Each lineage tree's ``tree_id`` is its root's own primary key. A new root
(a session that is not a fork) therefore allocates nothing: no ``MAX(tree_id)
+ 1`` read, no lock held by every creation, no other tree shifted (django-mptt's
``order_insertion_by`` renumbered every later tree). Its cost does not depend
on how many sessions there are or where its id sorts, and two roots created
at the same instant on two nodes of a multi-primary cluster (Galera) touch
disjoint rows, so they cannot collide.

A fork joins its source's tree as the last child of the source (django-mptt's
default position): the source's tree is locked by its root row (``SELECT …
FOR UPDATE`` of the row whose pk is the tree's id) and the nested-set
intervals right of the insertion point grow by two. Every such write updates
the root row (its ``rght`` grows), so two forks into one tree on two Galera
nodes conflict at certification and one of them is retried: the root row is
both locked and written, never only locked. The cost is that of the source's
own tree, never of the number of sessions.

A hard delete moves each fork of the deleted session into a tree of its own
(whose ``tree_id`` is that fork's pk: still "the root's own key"), closes the
gap the session leaves in its tree, then deletes the row without django-mptt's
own gap closing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models
from django.db.models import F

from sessiontree.models import AgentSession

# A session whose tree changed under us (a concurrent hard delete moved it)
# is looked up again; more than this many changes in a row is a bug.
_LOCK_ATTEMPTS = 16


@dataclass(frozen=True)
class Place:
    """Where a session sits in its lineage tree."""

    pk: int
    tree_id: int
    lft: int
    rght: int
    level: int


def _locked_place(pk: int, tree_id: int | None = None) -> Place | None:
    """Lock the lineage tree ``pk`` belongs to (its root row), then read ``pk``'s
    place under that lock. ``tree_id``: the tree it was last seen in (checked
    under the lock). ``None`` when the session is gone."""
    for _ in range(_LOCK_ATTEMPTS):
        if tree_id is None:
            found = AgentSession.objects.filter(pk=pk).values_list("tree_id", flat=True).first()
            if found is None:
                return None
            tree_id = found
        # The root row and the session's row, locked in one statement (the root's pk is the tree id).
        locked = {
            row["pk"]: row
            for row in AgentSession.objects.select_for_update()
            .filter(pk__in={tree_id, pk})
            .values("pk", "tree_id", "lft", "rght", "level")
        }
        row = locked.get(pk)
        if row is None:
            return None
        if row["tree_id"] == tree_id and tree_id in locked:
            return Place(pk, tree_id, row["lft"], row["rght"], row["level"])
        tree_id = row["tree_id"]  # moved to another tree meanwhile: lock that one
    raise RuntimeError(f"The lineage tree of session row {pk} kept changing")  # pragma: no cover


def insert(row: AgentSession) -> None:
    """Save the new session ``row`` into the lineage: a root of its own tree,
    or the last fork of ``row.parent`` (inside the caller's transaction)."""
    parent = row.parent
    place = _locked_place(parent.pk, parent.tree_id) if parent is not None else None
    if place is None:
        # A root (or a parent deleted meanwhile: the row keeps its parent_session_id).
        row.parent = None
        row.lft, row.rght, row.level, row.tree_id = 1, 2, 0, 0
        row.save()
        # The tree's id is the root's own key, known once the row exists.
        AgentSession.objects.filter(session_id=row.session_id).update(tree_id=row.pk)
        row.tree_id = row.pk
        return
    AgentSession.objects.filter(tree_id=place.tree_id, rght__gte=place.rght).update(rght=F("rght") + 2)
    AgentSession.objects.filter(tree_id=place.tree_id, lft__gt=place.rght).update(lft=F("lft") + 2)
    row.lft, row.rght, row.level, row.tree_id = place.rght, place.rght + 1, place.level + 1, place.tree_id
    row.save()  # django-mptt leaves a node whose lft and rght are set as it is


def remove(pk: int) -> None:
    """Delete session row ``pk`` for good (inside the caller's transaction):
    its forks become roots of their own trees (keeping ``parent_session_id``),
    the gap it leaves is closed, then the row goes (entries by cascade)."""
    place = _locked_place(pk)
    if place is None:
        return
    forks = AgentSession.objects.filter(parent_id=pk).order_by("lft").values_list("pk", "lft", "rght", "level")
    for fork_pk, lft, rght, level in list(forks):
        AgentSession.objects.filter(tree_id=place.tree_id, lft__gte=lft, lft__lte=rght).update(
            tree_id=fork_pk, lft=F("lft") - (lft - 1), rght=F("rght") - (lft - 1), level=F("level") - level
        )
        AgentSession.objects.filter(pk=fork_pk).update(parent=None)
    width = place.rght - place.lft + 1
    if place.level > 0:
        AgentSession.objects.filter(tree_id=place.tree_id, lft__gt=place.rght).update(lft=F("lft") - width)
        AgentSession.objects.filter(tree_id=place.tree_id, rght__gt=place.rght).update(rght=F("rght") - width)
    row = AgentSession.objects.get(pk=pk)
    # Django's own delete (cascades), not django-mptt's, whose gap closing is done above.
    models.Model.delete(row)
