"""The session lineage without anything shared by every session.

Each lineage tree's id is its root's own pk: creating a session neither reads
``MAX(tree_id)`` nor locks a row every creation locks, and shifts no other
tree whatever the number of sessions or where its id sorts (django-mptt's
``order_insertion_by=session_id`` renumbered every later tree). Forks of forks,
hard deletes that cut the parent link, and the admin's ancestors/descendants
keep working (``assert_valid_lineage``).
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.models import AgentSession
from tests.contract.conftest import PROVIDER_KINDS, make_provider

from .lineage import assert_valid_lineage

CONTROL = re.compile(r"^\s*(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK|COMMIT|BEGIN|SET )", re.I)


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


def places() -> dict[str, tuple[int, int, int, int, int | None]]:
    return {
        row.session_id: (row.tree_id, row.lft, row.rght, row.level, row.parent_id) for row in AgentSession.objects.all()
    }


def test_a_new_root_changes_no_other_session_wherever_its_id_sorts(provider):
    for n in range(30):
        provider.create_session(session_id=f"m-{n:03d}")
    provider.create_branched_session("m-010", None, new_session_id="m-010-fork")
    before = places()
    provider.create_session(session_id="a-sorts-first")
    provider.create_session(session_id="z-sorts-last")
    after = places()
    assert {k: v for k, v in after.items() if k in before} == before
    for session_id in ("a-sorts-first", "z-sorts-last"):
        row = AgentSession.objects.get(session_id=session_id)
        assert (row.tree_id, row.lft, row.rght, row.level) == (row.pk, 1, 2, 0)
    assert_valid_lineage()


def test_creating_a_root_reads_no_maximum_and_writes_only_its_own_row(provider):
    provider.create_session(session_id="m-1")
    provider.create_branched_session("m-1", None, new_session_id="m-1-fork")
    with CaptureQueriesContext(connection) as captured:
        provider.create_session(session_id="a-first")
    statements = [q["sql"] for q in captured.captured_queries if not CONTROL.match(q["sql"])]
    assert not [sql for sql in statements if "MAX(" in sql.upper() or "FOR UPDATE" in sql.upper()]
    writes = [sql for sql in statements if not sql.lstrip().upper().startswith("SELECT")]
    assert writes and all("'a-first'" in sql for sql in writes), writes


def test_forks_are_listed_in_the_order_they_were_made(provider):
    provider.create_session(session_id="src")
    for fork in ("f-c", "f-a", "f-b"):
        provider.create_branched_session("src", None, new_session_id=fork)
    src = AgentSession.objects.get(session_id="src")
    assert [s.session_id for s in src.get_children()] == ["f-c", "f-a", "f-b"]
    assert_valid_lineage()


def test_forks_of_forks_and_hard_deletes_keep_every_tree_keyed_by_its_root(provider):
    provider.create_session(session_id="src")
    a = provider.append_message("src", {"role": "user", "content": "a"})
    provider.create_session(session_id="elsewhere")
    provider.create_branched_session("elsewhere", None, new_session_id="elsewhere-fork")
    for fork, source in [("f1", "src"), ("f1a", "f1"), ("f1a1", "f1a"), ("f1b", "f1"), ("f2", "src")]:
        provider.create_branched_session(source, a["id"] if source == "src" else None, new_session_id=fork)
    untouched = {k: v for k, v in places().items() if k.startswith("elsewhere")}
    src = AgentSession.objects.get(session_id="src")
    assert [s.session_id for s in src.get_descendants()] == ["f1", "f1a", "f1a1", "f1b", "f2"]
    assert [s.session_id for s in AgentSession.objects.get(session_id="f1a1").get_ancestors()] == ["src", "f1", "f1a"]
    assert_valid_lineage()

    provider.delete_session("f1", hard=True)  # a middle node: its forks become roots of their own trees
    for root in ("f1a", "f1b"):
        row = AgentSession.objects.get(session_id=root)
        assert row.is_root_node() and row.tree_id == row.pk and row.parent_session_id == "f1"
    assert [s.session_id for s in AgentSession.objects.get(session_id="f1a").get_descendants()] == ["f1a1"]
    assert [s.session_id for s in AgentSession.objects.get(session_id="src").get_descendants()] == ["f2"]
    assert_valid_lineage()

    provider.delete_session("src", hard=True)  # a root
    f2 = AgentSession.objects.get(session_id="f2")
    assert f2.is_root_node() and f2.tree_id == f2.pk
    provider.create_branched_session("f1a1", None, new_session_id="f1a1-fork")  # the moved trees take forks
    assert [s.session_id for s in AgentSession.objects.get(session_id="f1a").get_descendants()] == [
        "f1a1",
        "f1a1-fork",
    ]
    assert {k: v for k, v in places().items() if k.startswith("elsewhere")} == untouched
    assert_valid_lineage()
