"""The entry panel at the leaf issues the same statements at 50 and 2,000
entries (issue 23): its context, path, children, label and moderation block
are read by key, not by reading the whole session."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider
from tests.selectors.test_entry_panel_reads import with_labels_and_edits

from .conftest import tree_url

pytestmark = pytest.mark.django_db


def test_the_entry_panel_at_the_leaf_costs_the_same_at_any_size(admin_client, kind):
    counts = {}
    pages = {}
    for size in (50, 2000):
        sid = f"panel-{kind}-{size}"
        get_provider(kind).create_session(session_id=sid, entries=with_labels_and_edits(size))
        row = AgentSession.objects.get(session_id=sid)
        leaf = row.leaf_entry_id
        admin_client.get(tree_url(row, "tree_entry", leaf))  # the user's session and permission caches
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(tree_url(row, "tree_entry", leaf))
        assert response.status_code == 200
        counts[size] = len(captured.captured_queries)
        pages[size] = response.content.decode()
    assert counts[50] == counts[2000], counts
    # What it shows still says how long the path is and how much the compactions left out.
    assert re.search(r"Path: 19\d\d entries", pages[2000])
    assert re.search(r'<strong class="left-out-count">14\d\d</strong>', pages[2000])
    assert "root → … " in pages[2000]


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param((50, 1900), id="whole-shape"),  # under KEYED_FROM: the shape, kept per process
        pytest.param((3000, 12000), id="keyed"),  # from KEYED_FROM: the window read by key
    ],
)
def test_the_tree_page_issues_the_same_statements_at_any_size(admin_client, kind, sizes):
    """The tree page (issue 23's guard): the same number of statements at
    both sizes, read cold (the per-process shape cache cleared) and warm. No
    statement is sent per entry or per step of a path; under ``KEYED_FROM``
    entries the work grows with the session (it lays out the whole shape),
    from it the page reads its window by key (a statement per folded branch
    of the window at most: the same at any size)."""
    from sessiontree.selectors.tree_window import KEYED_FROM, clear_shape_cache

    assert sizes[0] < KEYED_FROM > sizes[1] or sizes[0] >= KEYED_FROM <= sizes[1]
    counts = {}
    for size in sizes:
        sid = f"tree-{kind}-{size}"
        get_provider(kind).create_session(session_id=sid, entries=with_labels_and_edits(size))
        row = AgentSession.objects.get(session_id=sid)
        admin_client.get(tree_url(row))  # the user's session and permission caches
        clear_shape_cache()
        with CaptureQueriesContext(connection) as cold:
            response = admin_client.get(tree_url(row))
        assert response.status_code == 200
        with CaptureQueriesContext(connection) as warm:
            assert admin_client.get(tree_url(row)).status_code == 200
        counts[size] = (len(cold.captured_queries), len(warm.captured_queries))
    assert counts[sizes[0]] == counts[sizes[1]], counts


def test_the_compare_page_issues_the_same_statements_at_any_size(admin_client, kind, monkeypatch):
    """The compare page of two sessions longer than the tips' scan: the same
    statements at both sizes (its branch tips walked up to the active path by
    key, the two leaves compared by key), and never the whole shape (which
    costs one statement on ``mysql`` and none on ``file``, whatever the size)."""
    from sessiontree.selectors import entry_context
    from sessiontree.selectors.entry_context import TIPS_SCAN
    from sessiontree.selectors.tree_window import clear_shape_cache

    def refused(view):
        raise AssertionError("the whole shape was read")

    monkeypatch.setattr(entry_context, "read_skeleton", refused)
    monkeypatch.setattr(entry_context, "read_shape", refused)

    counts = {}
    pages = {}
    for size in (2 * TIPS_SCAN, 4 * TIPS_SCAN):
        sid = f"compare-{kind}-{size}"
        get_provider(kind).create_session(session_id=sid, entries=with_labels_and_edits(size))
        row = AgentSession.objects.get(session_id=sid)
        admin_client.get(tree_url(row, "tree_compare"))  # the user's session and permission caches
        clear_shape_cache()
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(tree_url(row, "tree_compare"))
        assert response.status_code == 200
        counts[size] = len(captured.captured_queries)
        pages[size] = response.content.decode()
    assert counts[2 * TIPS_SCAN] == counts[4 * TIPS_SCAN], counts
    for page in pages.values():  # the leaf against the latest side branch, each named
        assert page.count('class="compare-row') > 0
        assert "side " in page
