"""Checks of the session lineage tree (django-mptt over ``AgentSession``)."""

from __future__ import annotations

from sessiontree.models import AgentSession


def assert_valid_lineage() -> None:
    """Every MPTT field agrees with the parent links: one tree_id per root (the
    root's own pk), nested ``lft``/``rght`` intervals, levels, and
    ``get_descendants``."""
    rows = {r.pk: r for r in AgentSession.objects.all()}
    children: dict[int, list[int]] = {pk: [] for pk in rows}
    for row in rows.values():
        if row.parent_id is not None:
            children[row.parent_id].append(row.pk)
    roots = [r for r in rows.values() if r.parent_id is None]
    assert len({r.tree_id for r in roots}) == len(roots), "two lineage roots share a tree_id"
    for root in roots:
        assert root.tree_id == root.pk, f"{root.session_id}: a tree's id is its root's own key"

    def subtree(pk: int) -> list[int]:
        found, stack = [], [pk]
        while stack:
            current = stack.pop()
            found.append(current)
            stack.extend(children[current])
        return found

    for row in rows.values():
        descendants = subtree(row.pk)
        assert row.rght - row.lft + 1 == 2 * len(descendants), row.session_id
        for pk in descendants:
            assert rows[pk].tree_id == row.tree_id, row.session_id
            assert row.lft <= rows[pk].lft < rows[pk].rght <= row.rght, row.session_id
        if row.parent_id is not None:
            assert row.level == rows[row.parent_id].level + 1, row.session_id
        else:
            assert row.level == 0 and row.lft == 1, row.session_id
        assert {d.pk for d in row.get_descendants()} == set(descendants) - {row.pk}, row.session_id
