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


def test_the_tree_page_issues_the_same_statements_at_any_size(admin_client, kind):
    """The tree page (issue 23's guard): the same number of statements at 50
    and at 2,000 entries, read cold (the per-process shape cache cleared)
    and warm. Its work still grows with the session (it lays out the whole
    tree's shape: bench/bench_history.py), but no statement is sent per
    entry, per step of a path or per branch."""
    from sessiontree.selectors.tree_window import clear_shape_cache

    counts = {}
    for size in (50, 2000):
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
    assert counts[50] == counts[2000], counts
