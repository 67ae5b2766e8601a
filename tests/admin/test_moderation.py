"""Moderation from the tree page: each action confirmed where it deserves it,
done through the operations layer as the signed-in user on the admin channel,
reported, and recorded (AuditRecord and Django's LogEntry)."""

from __future__ import annotations

import orjson
import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.messages import get_messages
from django.test import Client

from sessiontree.models import AgentSession, AuditRecord

from .conftest import action_url, labelled, leaf_of, provider_of, tree_url

pytestmark = pytest.mark.django_db


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def confirm(client: Client, row: AgentSession, action: str, data: dict) -> tuple:
    """Post once (the confirmation page), then again with ``confirmed``."""
    page = client.post(action_url(row, action), data)
    done = client.post(action_url(row, action), {**data, "confirmed": "yes"})
    return page, done


def audit(operation: str, row: AgentSession) -> AuditRecord:
    return AuditRecord.objects.get(operation=operation, session_id=row.session_id, channel="admin")


def test_switch_leaf_confirms_then_moves_the_leaf_and_records_who(moderator_client, moderator, branched):
    before = leaf_of(branched)
    target = labelled(branched, "decimal fix")

    page, done = confirm(moderator_client, branched, "switch_leaf", {"entry_id": target, "expected_leaf": before})

    assert page.status_code == 200
    html = page.content.decode()
    assert "Yes, I\u2019m sure" in html and f"The leaf moves from {before}" in html and "messages" in html
    assert done.status_code == 302 and done["Location"].startswith(tree_url(branched))
    assert leaf_of(branched) == target
    record = audit("switch_leaf", branched)
    assert (record.actor, record.user_id, record.channel) == ("moderator", moderator.pk, "admin")
    assert (record.leaf_before, record.leaf_after) == (before, target)
    log = LogEntry.objects.get(action_flag=CHANGE, object_id=str(branched.pk))
    assert log.user_id == moderator.pk and f"Leaf moved from {before} to {target}" in log.change_message
    assert any(f"to {target}" in m for m in messages_of(done))
    history = moderator_client.get(tree_url(branched)).content.decode()
    assert "switch_leaf" in history and "moderator" in history


def test_the_confirmation_page_alone_changes_nothing(moderator_client, branched):
    before = leaf_of(branched)

    moderator_client.post(action_url(branched, "switch_leaf"), {"entry_id": labelled(branched, "decimal fix")})

    assert leaf_of(branched) == before
    assert not AuditRecord.objects.filter(session_id=branched.session_id, channel="admin").exists()


def test_a_leaf_moved_meanwhile_refuses_the_action(moderator_client, branched):
    before = leaf_of(branched)

    _page, done = confirm(
        moderator_client,
        branched,
        "switch_leaf",
        {"entry_id": labelled(branched, "decimal fix"), "expected_leaf": labelled(branched, "bug report")},
    )

    assert leaf_of(branched) == before
    assert any("leaf_conflict" in m for m in messages_of(done))
    assert not LogEntry.objects.exists()


def test_reset_leaf(moderator_client, branched):
    _page, done = confirm(moderator_client, branched, "reset_leaf", {"expected_leaf": leaf_of(branched)})

    assert done.status_code == 302
    assert leaf_of(branched) is None
    assert audit("reset_leaf", branched).leaf_after is None


def test_navigate_with_a_branch_summary_and_a_label(moderator_client, branched):
    target = labelled(branched, "decimal fix")
    count = len(provider_of(branched).list_entries(branched.session_id))

    page, _done = confirm(
        moderator_client, branched, "navigate", {"entry_id": target, "summarize": "on", "label": "reviewed"}
    )

    assert "summarized" in page.content.decode()
    entries = provider_of(branched).list_entries(branched.session_id)
    assert [e["type"] for e in entries[count:]] == ["branch_summary", "label"]
    summary, label = entries[count:]
    assert summary["parentId"] == target and label["targetId"] == summary["id"] and label["label"] == "reviewed"
    assert leaf_of(branched) == label["id"]
    assert audit("navigate_tree", branched).detail["summarized"] is True


def test_navigate_to_a_user_message_gives_its_text_back(moderator_client, branched):
    user = next(
        e
        for e in provider_of(branched).get_active_path(branched.session_id)
        if e["type"] == "message" and e["message"]["role"] == "user" and "round at the edge" in str(e["message"])
    )

    _page, done = confirm(moderator_client, branched, "navigate", {"entry_id": user["id"]})

    assert leaf_of(branched) == user["parentId"]
    assert any("Text to re-send: Keep floats in the model" in m for m in messages_of(done))


def test_set_and_clear_a_label_without_confirmation(moderator_client, branched):
    target = leaf_of(branched)

    moderator_client.post(action_url(branched, "set_label"), {"entry_id": target, "label": "checked"})
    assert provider_of(branched).get_snapshot(branched.session_id)["labels_by_entry_id"][target]["label"] == "checked"

    response = moderator_client.post(action_url(branched, "set_label"), {"entry_id": target, "label": ""})
    assert target not in provider_of(branched).get_snapshot(branched.session_id)["labels_by_entry_id"]
    assert any("Cleared the label" in m for m in messages_of(response))
    assert audit("set_label", branched).detail["label"] == "checked"
    assert audit("clear_label", branched).detail["target_id"] == target


def test_fork_makes_a_linked_session_and_opens_it(moderator_client, moderator, branched):
    target = labelled(branched, "decimal fix")

    page, done = confirm(moderator_client, branched, "fork", {"entry_id": target, "position": "at", "title": "Spin"})

    assert "A new session is created" in page.content.decode()
    fork = AgentSession.objects.get(parent__pk=branched.pk)
    assert done["Location"] == tree_url(fork)
    assert fork.title == "Spin" and fork.provider == branched.provider
    provider = provider_of(fork)
    assert (
        provider.build_context(fork.session_id)["messages"]
        == provider.build_context(branched.session_id, target)["messages"]
    )
    assert audit("fork_session", branched).detail["new_session_id"] == fork.session_id
    assert LogEntry.objects.filter(action_flag=ADDITION, object_id=str(fork.pk), user=moderator).exists()
    html = moderator_client.get(tree_url(fork)).content.decode()
    assert f'href="{tree_url(branched)}">{branched.session_id}</a>' in html  # the lineage link back


def test_fork_before_needs_a_user_message(moderator_client, branched):
    _page, done = confirm(
        moderator_client, branched, "fork", {"entry_id": labelled(branched, "decimal fix"), "position": "before"}
    )

    assert any("invalid_entry" in m for m in messages_of(done))
    assert not AgentSession.objects.filter(parent__pk=branched.pk).exists()


def test_compact_now(moderator_client, compacted):
    provider = provider_of(compacted)
    provider.append_message(compacted.session_id, {"role": "user", "content": "And now document it. " * 40})
    provider.append_message(
        compacted.session_id,
        {"role": "assistant", "content": [{"type": "text", "text": "Documented in README. " * 40}]},
    )

    page, done = confirm(moderator_client, compacted, "compact", {"keep_recent_tokens": "50"})

    assert "is compacted" in page.content.decode()
    assert done.status_code == 302
    last = provider.get_active_path(compacted.session_id)[-1]
    assert last["type"] == "compaction" and leaf_of(compacted) == last["id"]
    assert audit("compact_session", compacted).channel == "admin"


def test_compact_with_nothing_to_compact_offers_no_confirmation(moderator_client, compacted):
    provider = provider_of(compacted)
    count = len(provider.list_entries(compacted.session_id))

    page = moderator_client.post(action_url(compacted, "compact"), {"keep_recent_tokens": "1000000"})

    assert "Nothing to compact" in page.content.decode()
    assert 'id="confirm-action"' not in page.content.decode()
    assert len(provider.list_entries(compacted.session_id)) == count


def test_archive_refuses_moves_until_restored(moderator_client, branched):
    before = leaf_of(branched)
    moderator_client.post(action_url(branched, "archive"))
    assert AgentSession.objects.get(pk=branched.pk).status == "archived"
    assert "This session is archived" in moderator_client.get(tree_url(branched)).content.decode()

    _page, done = confirm(moderator_client, branched, "switch_leaf", {"entry_id": labelled(branched, "bug report")})
    assert leaf_of(branched) == before
    assert any("restore it first" in m for m in messages_of(done))

    moderator_client.post(action_url(branched, "restore"))
    assert AgentSession.objects.get(pk=branched.pk).status == "active"
    assert [r.operation for r in AuditRecord.objects.filter(session_id=branched.session_id, channel="admin")] == [
        "restore_session",
        "archive_session",
    ]


def test_soft_delete_is_confirmed(moderator_client, branched):
    page, _done = confirm(moderator_client, branched, "delete", {})

    assert "stays readable" in page.content.decode()
    assert AgentSession.objects.get(pk=branched.pk).status == "deleted"
    assert "This session is deleted" in moderator_client.get(tree_url(branched)).content.decode()


@pytest.mark.parametrize(
    "action", ["switch_leaf", "reset_leaf", "navigate", "set_label", "fork", "compact", "archive", "restore", "delete"]
)
def test_view_only_staff_get_403_on_a_forged_post(viewer_client, branched, action):
    data = {
        "entry_id": leaf_of(branched),
        "label": "x",
        "position": "at",
        "keep_recent_tokens": "0",
        "confirmed": "yes",
    }

    response = viewer_client.post(action_url(branched, action), data)

    assert response.status_code == 403
    assert not AuditRecord.objects.filter(channel="admin").exists()


def test_actions_are_post_only_and_csrf_protected(moderator, branched):
    client = Client(enforce_csrf_checks=True)
    client.force_login(moderator)

    assert client.get(action_url(branched, "archive")).status_code == 405
    assert client.post(action_url(branched, "archive")).status_code == 403  # no CSRF token
    assert AgentSession.objects.get(pk=branched.pk).status == "active"


def test_an_unknown_action_is_404(moderator_client, branched):
    assert moderator_client.post(action_url(branched, "explode")).status_code == 404


def test_a_bad_form_is_a_message_not_an_error(moderator_client, branched):
    response = moderator_client.post(action_url(branched, "fork"), {"entry_id": "x", "position": "sideways"})

    assert response.status_code == 302
    assert any("position" in m for m in messages_of(response))


@pytest.mark.parametrize("action", ["switch_leaf", "navigate", "reset_leaf"])
def test_the_leaf_an_action_reports_is_the_files_not_the_rows(moderator_client, action):
    """Pi may append to a session file behind its meta row: the file is the
    truth for the leaf, so that is the leaf an action says it moved from."""
    from sessiontree.management.commands.load_demo import build_coding_1

    from .conftest import build

    row = build(build_coding_1, "grown", "file")
    provider = provider_of(row)
    stale = row.leaf_entry_id
    target = provider.get_active_path(row.session_id)[1]["id"]
    line = orjson.dumps(
        {
            "type": "message",
            "id": "pi000001",
            "parentId": stale,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "written by Pi"}]},
        }
    )
    with open(provider.path_for(row.session_id), "ab") as handle:
        handle.write(line + b"\n")
    assert AgentSession.objects.get(pk=row.pk).leaf_entry_id == stale  # the row has not seen it
    data = {} if action == "reset_leaf" else {"entry_id": target}

    _page, done = confirm(moderator_client, row, action, data)

    assert done.status_code == 302
    log = LogEntry.objects.get(action_flag=CHANGE, object_id=str(row.pk))
    assert "pi000001" in log.change_message and stale not in log.change_message
