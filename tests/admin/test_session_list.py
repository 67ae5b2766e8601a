"""The session list: columns, filters, search, lineage, bulk actions, hard delete."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from sessiontree import services
from sessiontree.management.commands.load_demo import build_coding_1, build_coding_2
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider

from .conftest import BUILDER, build, provider_of, tree_url

pytestmark = pytest.mark.django_db
LIST = reverse("admin:sessiontree_agentsession_changelist")


def test_columns_show_what_an_operator_needs(admin_client, branched):
    html = admin_client.get(LIST).content.decode()

    row = AgentSession.objects.get(pk=branched.pk)
    for text in ("Branched", f"agent-{branched.provider}", "alice", branched.provider, "active", row.leaf_entry_id):
        assert text in html
    assert f">{row.entry_count}<" in html and f">{row.branch_count}<" in html
    assert tree_url(branched) in html
    for header in ("title", "agent", "user id", "provider", "status", "entries", "branches", "leaf", "created"):
        assert f">{header.capitalize()}<" in html or f">{header}<" in html.lower()
    assert "last activity" in html.lower()


def test_created_is_the_session_header_time_not_the_import_time(admin_client, kind):
    row = build(build_coding_2, "imported", kind)
    header = dict(row.header)
    assert header.get("timestamp"), "the meta row keeps the session's header"
    AgentSession.objects.filter(pk=row.pk).update(header={**header, "timestamp": "2024-02-03T04:05:06.000Z"})

    html = admin_client.get(LIST).content.decode()

    assert "2024-02-03 04:05" in html


def test_untitled_sessions_of_every_storage_show_their_first_user_message(admin_client):
    build(build_coding_1, "untitled-db", "mysql", title=None)
    file_row = build(build_coding_1, "untitled-file", "file", title=None)
    build(build_coding_1, "titled", "file", title="Has a title")
    # The preview is the meta row's: the list shows it with the file gone.
    get_provider("file").path_for(file_row.session_id).unlink()

    html = admin_client.get(LIST).content.decode()

    assert html.count("<em>“Invoice totals are off by one cent") == 2
    assert "Has a title" in html
    assert "untitled</em>" not in html


def test_the_list_never_opens_session_files(admin_client):
    row = build(build_coding_1, "no-file", "file")
    get_provider("file").path_for(row.session_id).unlink()

    response = admin_client.get(LIST)

    assert response.status_code == 200
    assert [r.session_id for r in response.context["cl"].result_list] == ["no-file"]
    assert row.leaf_entry_id in response.content.decode()


def test_the_list_costs_the_same_queries_for_more_sessions(admin_client, django_assert_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    build(build_coding_1, "one", "file")
    build(build_coding_1, "two", "mysql", title=None)
    with CaptureQueriesContext(connection) as few:
        assert admin_client.get(LIST).status_code == 200
    for index in range(6):
        build(build_coding_2, f"more-{index}", "mysql" if index % 2 else "file", title=None if index % 3 else "t")

    with django_assert_num_queries(len(few.captured_queries)):
        assert admin_client.get(LIST).status_code == 200
    assert len(few.captured_queries) <= 12


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"provider": "mysql"}, {"compacted-mysql", "branched-mysql"}),
        ({"has_compaction": "yes"}, {"compacted-file", "compacted-mysql"}),
        ({"has_compaction": "no"}, {"branched-file", "branched-mysql", "fork-file"}),
        ({"has_branches": "yes"}, {"compacted-file", "compacted-mysql", "branched-file", "branched-mysql"}),
        ({"has_branches": "no"}, {"fork-file"}),
        ({"is_fork": "yes"}, {"fork-file"}),
        ({"status": "archived"}, {"branched-mysql"}),
        ({"q": "fork-file"}, {"fork-file"}),
        ({"q": "agent-mysql"}, {"compacted-mysql", "branched-mysql"}),
        ({"q": "alice"}, {"compacted-file", "compacted-mysql", "branched-file", "branched-mysql", "fork-file"}),
        ({"q": "Branched"}, {"branched-file", "branched-mysql"}),
    ],
)
def test_filters_and_search(admin_client, query, expected):
    rows = {kind: build(build_coding_1, f"branched-{kind}", kind) for kind in ("file", "mysql")}
    for kind in ("file", "mysql"):
        build(build_coding_2, f"compacted-{kind}", kind, title="Compacted")
    leaf = provider_of(rows["file"]).get_session("branched-file")["leaf_entry_id"]
    services.tree.fork_session(
        provider=provider_of(rows["file"]),
        session_id="branched-file",
        entry_id=leaf,
        position="at",
        new_session_id="fork-file",
        actor=BUILDER,
        channel="internal",
    )
    services.sessions.archive_session(session_id="branched-mysql", actor=BUILDER, channel="internal")

    response = admin_client.get(LIST, query)

    assert response.status_code == 200
    shown = {row.session_id for row in response.context["cl"].result_list}
    assert shown == expected


def test_parent_column_links_a_fork_to_its_source(admin_client, branched):
    leaf = provider_of(branched).get_session(branched.session_id)["leaf_entry_id"]
    services.tree.fork_session(
        provider=provider_of(branched),
        session_id=branched.session_id,
        entry_id=leaf,
        position="at",
        new_session_id="the-fork",
        actor=BUILDER,
        channel="internal",
    )

    html = admin_client.get(LIST, {"q": "the-fork"}).content.decode()

    assert f'<a href="{tree_url(branched)}">{branched.session_id}</a>' in html


# --- bulk actions -----------------------------------------------------------------------------


def post_action(client: Client, action: str, *rows: AgentSession, **extra: str):
    data = {"action": action, "_selected_action": [row.pk for row in rows], **extra}
    return client.post(LIST, data, follow=True)


@pytest.mark.parametrize(
    ("action", "start", "status", "operation"),
    [
        ("archive_selected", "active", "archived", "archive_session"),
        ("soft_delete_selected", "active", "deleted", "delete_session"),
        ("restore_selected", "archived", "active", "restore_session"),
    ],
)
def test_bulk_status_actions_go_through_the_operations_layer(
    moderator_client, moderator, branched, compacted, action, start, status, operation
):
    for row in (branched, compacted):
        AgentSession.objects.filter(pk=row.pk).update(status=start)

    response = post_action(moderator_client, action, branched, compacted)

    assert response.status_code == 200
    assert set(AgentSession.objects.values_list("status", flat=True)) == {status}
    records = AuditRecord.objects.filter(operation=operation)
    assert {(r.session_id, r.channel, r.actor, r.user_id) for r in records} == {
        (branched.session_id, "admin", "moderator", moderator.pk),
        (compacted.session_id, "admin", "moderator", moderator.pk),
    }
    assert LogEntry.objects.filter(action_flag=CHANGE, user=moderator).count() == 2
    assert branched.session_id in response.content.decode()


def test_a_refused_bulk_step_is_reported_and_the_rest_done(moderator_client, branched, compacted):
    AgentSession.objects.filter(pk=branched.pk).update(status="deleted")

    response = post_action(moderator_client, "archive_selected", branched, compacted)

    html = response.content.decode()
    assert "Not archived" in html and "session_closed" in html
    assert AgentSession.objects.get(pk=compacted.pk).status == "archived"
    assert AgentSession.objects.get(pk=branched.pk).status == "deleted"


def test_view_only_staff_see_no_actions_and_cannot_forge_one(viewer_client, branched):
    response = viewer_client.get(LIST)

    assert response.status_code == 200
    assert 'name="action"' not in response.content.decode()
    post_action(viewer_client, "archive_selected", branched)
    assert AgentSession.objects.get(pk=branched.pk).status == "active"
    assert not AuditRecord.objects.filter(operation="archive_session").exists()


def test_hard_delete_needs_its_permission(moderator_client, branched):
    html = moderator_client.get(LIST).content.decode()
    assert "archive_selected" in html
    assert 'value="delete_selected"' not in html

    post_action(moderator_client, "delete_selected", branched, post="yes")

    assert AgentSession.objects.filter(pk=branched.pk).exists()


def test_hard_delete_confirms_on_djangos_page_then_deletes_for_good(moderator, branched):
    moderator.user_permissions.add(Permission.objects.get(codename="hard_delete_session"))
    client = Client()
    client.force_login(moderator)
    provider = provider_of(branched)

    confirm = client.post(LIST, {"action": "delete_selected", "_selected_action": [branched.pk]})

    assert confirm.status_code == 200
    assert "admin/delete_selected_confirmation.html" in [t.name for t in confirm.templates]
    assert branched.session_id in confirm.content.decode()
    assert AgentSession.objects.filter(pk=branched.pk).exists()

    done = post_action(client, "delete_selected", branched, post="yes")

    assert "Deleted for good 1" in done.content.decode()
    assert not AgentSession.objects.filter(pk=branched.pk).exists()
    assert provider.get_session(branched.session_id) is None
    if branched.provider == "file":
        assert not get_provider("file").path_for(branched.session_id).exists()
    assert AuditRecord.objects.filter(operation="hard_delete_session", session_id=branched.session_id).exists()
    assert LogEntry.objects.filter(action_flag=DELETION, object_repr=str(branched)).exists()


def test_a_refused_hard_delete_is_reported_and_not_logged(moderator):
    moderator.user_permissions.add(Permission.objects.get(codename="hard_delete_session"))
    client = Client()
    client.force_login(moderator)
    row = build(build_coding_1, "stuck", "file")
    path = get_provider("file").path_for("stuck")
    path.unlink()
    path.mkdir()  # a folder where the file should be: nothing may be deleted

    response = post_action(client, "delete_selected", row, post="yes")

    assert "Not deleted: stuck (corrupt_session_tree" in response.content.decode()
    assert AgentSession.objects.filter(pk=row.pk).exists()
    assert not LogEntry.objects.filter(action_flag=DELETION).exists()
