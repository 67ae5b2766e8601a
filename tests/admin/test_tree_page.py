"""The entry-tree page and its fragments: what it shows, at what cost, to whom."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree import services
from sessiontree.management.commands.load_demo import build_long
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider
from sessiontree.selectors.tree_window import MAX_ROWS

from .conftest import BUILDER, build, labelled, leaf_of, provider_of, tree_url

pytestmark = pytest.mark.django_db


def entry_rows(html: str) -> list[str]:
    return re.findall(r'<div class="entry[^"]*" id="entry-([^"]+)"', html)


def test_tree_page_shows_the_active_path_branches_labels_and_markers(admin_client, branched):
    leaf = leaf_of(branched)

    response = admin_client.get(tree_url(branched))

    assert response.status_code == 200
    html = response.content.decode()
    assert re.search(rf'class="entry active leaf" id="entry-{leaf}"', html)
    assert "← leaf" in html
    assert html.count('<details class="branch"') == 2  # Decimal and integer-cents branches, folded
    assert '<span class="tag" title="label">bug report</span>' in html  # a label on the active path
    assert "decimal fix" not in html  # on a folded branch: not loaded yet
    assert "marker-branch-summary" in html
    assert 'id="legend"' in html and "Legend" in html
    assert "session-banner" not in html


def test_folded_branches_are_named_by_their_first_message(admin_client, branched):
    html = admin_client.get(tree_url(branched)).content.decode()

    names = re.findall(r'<span class="branch-name">([^<]*)</span>', html)
    assert sorted(names) == ["user: Store amounts as integer cents instead.", "user: Use Decimal with ROUND_HALF_UP."]


def test_a_branch_loads_on_demand_with_its_labels(admin_client, branched):
    html = admin_client.get(tree_url(branched)).content.decode()
    branch_url = re.search(r'<details class="branch" data-url="([^"]+)"[^>]*><summary>[^\n]*Decimal', html).group(1)

    fragment = admin_client.get(branch_url.replace("&amp;", "&"))

    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert '<span class="tag" title="label">decimal fix</span>' in body
    assert "Use Decimal with ROUND_HALF_UP." in body
    assert "<html" not in body  # a fragment, not a page


def test_the_compaction_marks_what_it_left_out_of_the_context(admin_client, compacted):
    html = admin_client.get(tree_url(compacted)).content.decode()

    assert 'class="marker marker-compaction">compaction<' in html
    left_out = re.findall(r'<div class="entry active compacted" id="entry-([^"]+)"', html)
    path = provider_of(compacted).get_active_path(compacted.session_id)
    kept = next(e for e in path if e["type"] == "compaction")["firstKeptEntryId"]
    before_cut = [e for e in path[: [e["id"] for e in path].index(kept)] if e["type"] == "message"]
    assert left_out == [e["id"] for e in before_cut]
    assert "✂ left out" in html
    model_change = path[0]
    assert model_change["type"] == "model_change" and model_change["id"] not in left_out  # settings still apply


def test_custom_entries_render_as_fields_not_python_repr(admin_client, roleplay):
    html = admin_client.get(tree_url(roleplay)).content.decode()

    assert (
        '<span class="marker marker-rp-turn">rp turn</span><span class="tag" title="label">haircut</span>'
        '<span class="preview">'
        "commit: c1 · ops: add /hair = &quot;short&quot; · source: turn · character: alice</span>" in html
    )
    assert "{&#x27;commitId&#x27;" not in html and "{'commitId'" not in html


def test_filters_list_matching_entries_across_the_whole_session(admin_client, branched):
    user_only = admin_client.get(tree_url(branched), {"show": "user"}).context["matches"]
    messages = admin_client.get(tree_url(branched), {"show": "messages"}).context["matches"]
    labelled_only = admin_client.get(tree_url(branched), {"show": "labelled"}).context["matches"]
    found = admin_client.get(tree_url(branched), {"q": "integer CENTS"}).context["matches"]

    entries = provider_of(branched).list_entries(branched.session_id)
    users = [e["id"] for e in entries if e["type"] == "message" and e["message"]["role"] == "user"]
    assert [e["id"] for e in user_only.entries] == users
    assert [e["id"] for e in messages.entries] == [e["id"] for e in entries if e["type"] == "message"]
    assert sorted(e["id"] for e in labelled_only.entries) == sorted(
        [labelled(branched, "bug report"), labelled(branched, "decimal fix")]
    )
    assert found.total == 3  # the answer offering it, the request, the branch summary
    assert all("integer cents" in str(e).lower() for e in found.entries)


def test_focus_unfolds_the_branch_that_holds_the_entry(admin_client, branched):
    target = labelled(branched, "decimal fix")

    html = admin_client.get(tree_url(branched), {"focus": target}).content.decode()

    assert f'id="entry-{target}"' in html
    assert re.search(r'<details class="branch" open data-loaded="1"', html)
    assert f'data-focus="{target}"' in html


def test_a_long_session_renders_a_window_with_runs_and_the_leaf(admin_client, kind):
    row = build(build_long, f"long-{kind}", kind)
    leaf = leaf_of(row)

    html = admin_client.get(tree_url(row)).content.decode()

    rows = entry_rows(html)
    assert leaf in rows
    assert 100 < len(rows) < 700 < row.entry_count  # a window, not 1,900 rows
    runs = re.findall(r'data-url="([^"]+/tree/run/[^"]+)"', html)
    assert runs
    first_run = runs[0].replace("&amp;", "&")
    count = int(re.search(r"count=(\d+)", first_run).group(1))
    expanded = entry_rows(admin_client.get(first_run).content.decode())
    assert len(expanded) == count
    assert not set(expanded) & set(rows)


def test_tree_page_costs_a_fixed_number_of_queries(admin_client, kind, django_assert_num_queries):
    small = build(build_long, f"long-{kind}", kind)
    tiny = AgentSession.objects.get(
        session_id=services.sessions.create_session(
            actor=BUILDER, channel="internal", kind=kind, session_id=f"tiny-{kind}"
        )["session_id"]
    )
    services.entries.append_message(
        session_id=tiny.session_id, message={"role": "user", "content": "hi"}, actor=BUILDER, channel="internal"
    )
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(tree_url(tiny)).status_code == 200

    with django_assert_num_queries(len(queries.captured_queries)):
        assert admin_client.get(tree_url(small)).status_code == 200
    assert len(queries.captured_queries) <= 14


def test_the_window_stays_bounded_however_branched(admin_client, kind):
    # Every entry a branch point: the window stops at its row budget and the rest is one run.
    entries = []
    for i in range(1200):
        parent = f"m{i - 1:05d}" if i else None
        entries.append(
            {
                "type": "message",
                "id": f"m{i:05d}",
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": f"main {i}"},
            }
        )
        entries.append(
            {
                "type": "message",
                "id": f"s{i:05d}",
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": f"side {i}"},
            }
        )
    entries.sort(key=lambda e: (int(e["id"][1:]), e["id"][0] == "m"))
    services.sessions.create_session(actor=BUILDER, channel="internal", kind=kind, session_id="bushy", entries=entries)
    services.tree.switch_leaf(session_id="bushy", entry_id="m01199", actor=BUILDER, channel="internal")

    html = admin_client.get(tree_url(AgentSession.objects.get(session_id="bushy"))).content.decode()

    assert html.count('<div class="entry') + html.count('<details class="branch"') <= MAX_ROWS + 10
    assert "tree/run/" in html


def test_archived_and_deleted_sessions_show_a_banner_and_no_actions(admin_client, branched):
    for status in ("archived", "deleted"):
        AgentSession.objects.filter(pk=branched.pk).update(status=status)

        html = admin_client.get(tree_url(branched)).content.decode()

        assert f"This session is {status}" in html
        assert "session-banner" in html
        assert 'id="session-actions"' not in html
        assert "/tree/action/restore/" in html  # the one action left: restore
        leaf = leaf_of(branched)
        panel = admin_client.get(tree_url(branched, "tree_entry", leaf)).content.decode()
        # No action on the tree; a flag (a row beside it, never a tree entry) can still be opened.
        assert set(re.findall(r"/tree/action/(\w+)/", panel)) == {"flag"}


def test_view_only_staff_see_the_tree_but_no_action(viewer_client, branched):
    html = viewer_client.get(tree_url(branched)).content.decode()
    panel = viewer_client.get(tree_url(branched, "tree_entry", leaf_of(branched))).content.decode()

    assert 'id="session-tree"' in html
    assert "/tree/action/" not in html and "/tree/action/" not in panel


def test_the_tree_needs_staff_and_view_permission(client, branched, django_user_model):
    response = client.get(tree_url(branched))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]

    nobody = django_user_model.objects.create_user("staff-only", password="pw", is_staff=True)
    client.force_login(nobody)
    assert client.get(tree_url(branched)).status_code == 403
    assert client.get(tree_url(branched, "tree_entry", leaf_of(branched))).status_code == 403


def test_unknown_session_or_entry_is_404(admin_client, branched):
    from django.urls import reverse

    assert admin_client.get(reverse("admin:sessiontree_agentsession_tree", args=[999999])).status_code == 404
    assert admin_client.get(tree_url(branched, "tree_entry", "nope")).status_code == 404
    assert admin_client.get(tree_url(branched, "tree_branch", "nope")).status_code == 404
    assert admin_client.get(tree_url(branched, "tree_run", "nope")).status_code == 404


def test_a_missing_file_is_reported_not_a_server_error(admin_client):
    row = build(__import__("sessiontree.management.commands.load_demo", fromlist=["x"]).build_coding_2, "gone", "file")
    get_provider("file").path_for(row.session_id).unlink()

    response = admin_client.get(tree_url(row))

    assert response.status_code == 200
    assert "session_not_found" in response.content.decode()


def test_change_page_links_to_the_tree_and_shows_lineage_and_history(admin_client, branched):
    from django.urls import reverse

    provider = provider_of(branched)
    fork = services.tree.fork_session(
        provider=provider,
        session_id=branched.session_id,
        entry_id=leaf_of(branched),
        position="at",
        new_session_id="child",
        actor=BUILDER,
        channel="internal",
    )
    services.tree.fork_session(
        provider=provider,
        session_id="child",
        entry_id=fork["leaf_entry_id"],
        position="at",
        new_session_id="grandchild",
        actor=BUILDER,
        channel="internal",
    )

    html = admin_client.get(reverse("admin:sessiontree_agentsession_change", args=[branched.pk])).content.decode()

    assert tree_url(branched) in html
    child = AgentSession.objects.get(session_id="child")
    grandchild = AgentSession.objects.get(session_id="grandchild")
    assert f'href="{tree_url(child)}">child</a>' in html
    assert f'href="{tree_url(grandchild)}">grandchild</a>' in html
    assert html.index(">child<") < html.index(">grandchild<")
    assert "test-builder" in html and "fork" in html  # the audit trail

    grand_html = admin_client.get(tree_url(grandchild)).content.decode()
    assert f'href="{tree_url(branched)}">{branched.session_id}</a>' in grand_html  # ancestors, linked
    assert f'href="{tree_url(child)}">child</a>' in grand_html


def test_the_history_panel_does_not_read_the_ids_an_audit_record_lists(admin_client, kind):
    """An import's audit record lists every id of its batch (55 KB at 5,000
    entries): the history panel shows the record but not the ids, so it does
    not read them (issue 23: 5 ms of the tree page at 100k entries on MariaDB,
    growing with the number of batches)."""
    from sessiontree.services import entries as entry_ops
    from sessiontree.services import sessions as session_ops

    provider = get_provider(kind)
    made = [
        {
            "type": "message",
            "id": f"h{i:05d}",
            "parentId": f"h{i - 1:05d}" if i else None,
            "timestamp": "2026-04-19T00:00:00.000Z",
            "message": {"role": "user", "content": f"turn {i}", "timestamp": 1},
        }
        for i in range(600)
    ]
    session_ops.import_session(
        header={"type": "session", "version": 3, "id": f"hist-{kind}", "timestamp": made[0]["timestamp"], "cwd": "/"},
        entries=made[:300],
        actor=BUILDER,
        channel="cli",
        provider=provider,
    )
    entry_ops.import_entries(
        session_id=f"hist-{kind}",
        entries=made[300:],
        actor=BUILDER,
        channel="cli",
        provider=provider,
        expected_entry_count=300,
    )
    row = AgentSession.objects.get(session_id=f"hist-{kind}")
    admin_client.get(tree_url(row))
    with CaptureQueriesContext(connection) as captured:
        html = admin_client.get(tree_url(row)).content.decode()
    audit_reads = [q["sql"] for q in captured.captured_queries if "auditrecord" in q["sql"]]
    assert audit_reads and not any("entry_ids" in sql for sql in audit_reads), audit_reads
    assert "import_entries" in html and "import_session" in html  # the records are shown
