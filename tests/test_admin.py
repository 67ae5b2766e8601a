"""The admin console: session pages, the entry-tree page, read-only audit records."""

from __future__ import annotations

import re
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from sessiontree.admin import build_tree_rows
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo():
    call_command("load_demo", stdout=StringIO())


def tree_url(session_id: str) -> str:
    row = AgentSession.objects.get(session_id=session_id)
    return reverse("admin:sessiontree_agentsession_tree", args=[row.pk])


def entry(entry_id: str, parent_id: str | None, text: str = "hi", **extra) -> dict:
    base = {"type": "message", "id": entry_id, "parentId": parent_id, "timestamp": "2026-01-01T00:00:00.000Z"}
    return {**base, "message": {"role": "user", "content": text}, **extra}


# --- the page -----------------------------------------------------------------------


def test_tree_page_renders_a_demo_session(demo, admin_client, django_assert_max_num_queries):
    leaf_id = get_provider("file").get_session("demo-coding-1")["leaf_entry_id"]
    url = tree_url("demo-coding-1")

    with django_assert_max_num_queries(10):
        response = admin_client.get(url)

    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="entry-{leaf_id}"' in html
    assert re.search(rf'class="entry active leaf" id="entry-{leaf_id}"', html)
    assert html.count('<details class="branch">') == 2  # Decimal and integer-cents branches folded
    assert "bug report" in html and "decimal fix" in html
    assert "branch summary" in html


def test_tree_page_marks_the_compaction(demo, admin_client):
    response = admin_client.get(tree_url("demo-coding-2"))

    assert response.status_code == 200
    assert 'class="marker marker-compaction">compaction<' in response.content.decode()


def test_change_page_links_to_the_tree(demo, admin_client):
    row = AgentSession.objects.get(session_id="demo-roleplay-1")

    response = admin_client.get(reverse("admin:sessiontree_agentsession_change", args=[row.pk]))

    assert response.status_code == 200
    assert tree_url("demo-roleplay-1") in response.content.decode()


def test_tree_page_needs_staff(demo, client):
    response = client.get(tree_url("demo-coding-1"))

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_tree_page_of_an_unknown_session_is_404(admin_client):
    response = admin_client.get(reverse("admin:sessiontree_agentsession_tree", args=[999999]))

    assert response.status_code == 404


def test_tree_page_reports_a_missing_file_instead_of_failing(demo, admin_client, settings):
    row = AgentSession.objects.get(session_id="demo-coding-2")
    get_provider("file").path_for("demo-coding-2").unlink()

    response = admin_client.get(reverse("admin:sessiontree_agentsession_tree", args=[row.pk]))

    assert response.status_code == 200
    assert "session_not_found" in response.content.decode()


def test_tree_page_stays_usable_at_10000_entries(admin_client):
    entries = [entry(f"e{i:05d}", f"e{i - 1:05d}" if i else None) for i in range(10_000)]
    entries.append(entry("side0001", "e04999", "the road not taken"))
    get_provider("file").create_session(session_id="big", entries=entries)
    get_provider("file").switch_leaf("big", "e09999")

    started = time.perf_counter()
    response = admin_client.get(tree_url("big"))
    elapsed = time.perf_counter() - started

    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="entry active leaf" id="entry-e09999"' in html
    assert html.count('class="entry active') == 10_000
    assert html.count('<details class="branch">') == 1
    assert "the road not taken" in html
    assert elapsed < 20  # generous: guards against accidental quadratic work, not a benchmark


# --- editing a session goes through the provider and is audited --------------------


def test_editing_the_title_goes_through_the_provider_and_is_audited(demo, admin_client, admin_user):
    row = AgentSession.objects.get(session_id="demo-coding-2")
    url = reverse("admin:sessiontree_agentsession_change", args=[row.pk])

    response = admin_client.post(
        url,
        # initial-metadata: the hidden initial Django renders for a field with a callable default
        {"title": "Renamed", "agent": row.agent_id, "user_id": row.user_id, "metadata": "{}", "initial-metadata": "{}"},
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert get_provider("file").get_session("demo-coding-2")["title"] == "Renamed"
    record = AuditRecord.objects.get(operation="update_session")
    assert (record.session_id, record.actor, record.user, record.channel) == (
        "demo-coding-2",
        admin_user.username,
        admin_user,
        "admin",
    )
    assert record.detail == {"fields": ["title"], "title": "Renamed"}


def test_metadata_that_is_not_an_object_is_a_form_error_not_a_crash(demo, admin_client):
    row = AgentSession.objects.get(session_id="demo-coding-2")
    url = reverse("admin:sessiontree_agentsession_change", args=[row.pk])
    response = admin_client.post(
        url,
        {
            "title": row.title,
            "agent": row.agent_id,
            "user_id": row.user_id,
            "metadata": "[1, 2]",
            "initial-metadata": "{}",
        },
    )
    assert response.status_code == 200
    assert "must be a JSON object" in response.content.decode()
    assert get_provider("file").get_session("demo-coding-2")["metadata"] == row.metadata
    assert not AuditRecord.objects.filter(operation="update_session").exists()


def test_sessions_cannot_be_added_or_deleted_from_the_admin(demo, admin_client):
    row = AgentSession.objects.get(session_id="demo-coding-1")

    assert admin_client.get(reverse("admin:sessiontree_agentsession_add")).status_code == 403
    assert admin_client.get(reverse("admin:sessiontree_agentsession_delete", args=[row.pk])).status_code == 403


def test_changelist_filters_and_searches(demo, admin_client):
    url = reverse("admin:sessiontree_agentsession_changelist")

    response = admin_client.get(url, {"q": "roleplay", "provider": "file"})

    assert response.status_code == 200
    html = response.content.decode()
    assert "demo-roleplay-1" in html
    assert "demo-coding-2" not in html


def test_audit_records_are_read_only(admin_client):
    record = AuditRecord.objects.create(actor="alice", channel="api", operation="switch_leaf", session_id="s1")

    assert admin_client.get(reverse("admin:sessiontree_auditrecord_changelist")).status_code == 200
    change = admin_client.get(reverse("admin:sessiontree_auditrecord_change", args=[record.pk]))
    assert change.status_code == 200
    assert 'name="operation"' not in change.content.decode()  # shown, not editable
    assert admin_client.get(reverse("admin:sessiontree_auditrecord_add")).status_code == 403


def test_root_redirects_to_the_admin(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"


# --- the row layout, without HTTP ---------------------------------------------------


def test_rows_fold_branches_off_the_active_path_and_keep_it_unfolded():
    entries = [entry("a", None), entry("b", "a"), entry("c", "a"), entry("d", "c"), entry("e", "b")]

    rows = build_tree_rows(entries, ["a", "c", "d"], {})

    assert [(r.kind, r.entry_id) for r in rows] == [
        ("entry", "a"),
        ("open", "b"),
        ("entry", "b"),
        ("entry", "e"),
        ("close", "b"),
        ("entry", "c"),
        ("entry", "d"),
    ]
    folded = [r for r in rows if r.kind == "open"]
    assert folded[0].branch_size == 2
    assert [r.entry_id for r in rows if r.kind == "entry" and r.on_active_path] == ["a", "c", "d"]
    assert [r.entry_id for r in rows if r.is_leaf] == ["d"]
    assert {r.entry_id: r.depth for r in rows if r.kind == "entry"} == {"a": 0, "b": 1, "c": 1, "d": 2, "e": 2}
    assert {r.entry_id: r.level for r in rows if r.kind == "entry"} == {"a": 0, "b": 1, "e": 1, "c": 0, "d": 0}


def test_rows_show_orphans_as_roots_and_cycles_as_unreachable():
    entries = [entry("a", None), entry("x", "missing"), entry("p", "q"), entry("q", "p")]

    rows = build_tree_rows(entries, [], {})

    entry_rows = [r for r in rows if r.kind == "entry"]
    # Two roots: "x" (its parent is missing) is folded as a branch next to the first root "a".
    assert [(r.kind, r.entry_id) for r in rows][:4] == [("open", "x"), ("entry", "x"), ("close", "x"), ("entry", "a")]
    assert [r.entry_id for r in entry_rows] == ["x", "a", "p", "q"]
    assert [r.marker.startswith("unreachable") for r in entry_rows] == [False, False, True, True]
    assert entry_rows[0].depth == 0


def test_rows_describe_labels_and_markers():
    entries = [
        entry("a", None, "hello " * 100),
        {"type": "label", "id": "l", "parentId": "a", "timestamp": "t", "targetId": "a", "label": "start"},
        {
            "type": "compaction",
            "id": "c",
            "parentId": "l",
            "timestamp": "t",
            "summary": "sum",
            "firstKeptEntryId": "a",
            "tokensBefore": 5,
        },
    ]

    rows = build_tree_rows(entries, ["a", "l", "c"], {"a": {"label": "start", "label_entry_id": "l", "timestamp": "t"}})

    by_id = {r.entry_id: r for r in rows}
    assert by_id["a"].label == "start"
    assert len(by_id["a"].preview) <= 140
    assert by_id["l"].marker == "label"
    assert by_id["c"].marker == "compaction"
    assert "keeps from a" in by_id["c"].preview
