"""The path facts' jumps on every storage (issue 23): the ancestor of an entry
at any depth, read by key, is the entry the walk finds there; each storage
writes the jumps ``facts_in_order`` computes, whether a session is created
whole or grown by appends; the mysql provider finds an ancestor in one
statement, whatever the depth."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.core.path import get_path_to_leaf
from sessiontree.core.path_facts import facts_in_order
from sessiontree.providers import keyed_reads
from tests.contract.conftest import make_provider
from tests.providers.test_history_reads import long_session

pytestmark = pytest.mark.django_db


def test_the_ancestor_at_a_depth_is_the_walks(any_provider):
    provider = any_provider
    # Deeper than MariaDB's default recursion (1,000 steps), with side branches.
    entries = long_session(2500)
    provider.create_session(session_id="deep", entries=entries)
    with provider.read("deep") as view:
        for leaf in (entries[-1]["id"], entries[1234]["id"], entries[25]["id"]):  # entry 25: a side entry
            path = [e["id"] for e in get_path_to_leaf(entries, leaf)]
            for depth in sorted({0, 1, 2, len(path) // 3, len(path) // 2, len(path) - 2, len(path) - 1}):
                assert keyed_reads.ancestor_at(view, leaf, depth) == path[depth], (leaf, depth)
                own = getattr(view, "ancestor_at", None)
                if own is not None:  # the storage's own answer, not the generic walk
                    assert own(leaf, depth) == path[depth], (leaf, depth)
            assert keyed_reads.ancestor_at(view, leaf, len(path)) is None
            assert keyed_reads.ancestor_at(view, leaf, -1) is None
        assert keyed_reads.ancestor_at(view, "nope", 0) is None


def test_stored_jumps_are_the_computed_ones_created_or_appended(provider):
    entries = long_session(300)
    provider.create_session(session_id="whole", entries=entries)
    provider.create_session(session_id="grown", entries=entries[:1])
    for entry in entries[1:]:
        if provider.get_session("grown")["leaf_entry_id"] != entry["parentId"]:
            provider.switch_leaf("grown", entry["parentId"])
        provider.append_entry("grown", dict(entry))
    expected = dict(zip((e["id"] for e in entries), facts_in_order(entries), strict=True))
    for session_id in ("whole", "grown"):
        with provider.read(session_id) as view:
            assert dict(keyed_reads.entry_facts(view, list(expected))) == expected, session_id


def test_mysql_finds_an_ancestor_in_one_statement(db, tmp_path):
    provider = make_provider("mysql", tmp_path)
    entries = long_session(3000)
    provider.create_session(session_id="deep", entries=entries)
    leaf = entries[-1]["id"]
    path = [e["id"] for e in get_path_to_leaf(entries, leaf)]
    with provider.read("deep") as view:
        for depth in (0, 7, 1000, len(path) - 10):
            with CaptureQueriesContext(connection) as queries:
                assert view.ancestor_at(leaf, depth) == path[depth]
            assert len(queries) == 1
