"""Lifecycle hooks around navigate, fork and compact (Pi's session_before_tree /
session_tree, session_before_fork / session_fork, session_compact).

A before hook may refuse (nothing is written); an after hook's failure is
logged and never undoes the stored change."""

from __future__ import annotations

import logging

import pytest

from sessiontree import services
from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.errors import InvalidEntry, LeafConflict
from sessiontree.models import AuditRecord
from sessiontree.services import hooks
from tests.contract.conftest import PROVIDER_KINDS, make_provider
from tests.roleplay.story import FakeSummarizer


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


@pytest.fixture
def registered():
    """Register hooks for one test only."""
    added: list[tuple[str, hooks.Hook]] = []

    def register(event, hook):
        services.register_hook(event, hook)
        added.append((event, hook))
        return hook

    yield register
    for event, hook in added:
        services.unregister_hook(event, hook)


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def chain(provider, n=4):
    provider.create_session(session_id="s1")
    return [provider.append_message("s1", user(f"m{i} " + "words " * 120)) for i in range(n)]


def snapshot(provider):
    return provider.list_entries("s1"), provider.get_session("s1")["leaf_entry_id"], AuditRecord.objects.count()


def test_every_event_is_heard_with_its_operation_and_result(provider, registered):
    entries = chain(provider)
    heard: list[hooks.HookEvent] = []
    for event in hooks.EVENTS:
        registered(event, heard.append)
    result = services.navigate_tree(
        provider=provider, session_id="s1", target_id=entries[1]["id"], actor="alice", channel="admin"
    )
    fork = services.fork_session(
        provider=provider, session_id="s1", entry_id=entries[1]["id"], position="at", actor="alice", channel="admin"
    )
    services.navigate_tree(
        provider=provider, session_id="s1", target_id=entries[-1]["id"], actor="alice", channel="admin"
    )
    compaction = services.compact_session(
        provider=provider,
        session_id="s1",
        summarizer=FakeSummarizer("s"),
        settings=CompactionSettings(keep_recent_tokens=50),
        actor="system",
        channel="internal",
    )
    assert [e.name for e in heard] == [
        "before_navigate",
        "after_navigate",
        "before_fork",
        "after_fork",
        "before_navigate",
        "after_navigate",
        "before_compact",
        "after_compact",
    ]
    navigate_after = heard[1]
    assert (navigate_after.session_id, navigate_after.actor.name, navigate_after.channel) == ("s1", "alice", "admin")
    assert navigate_after.data["target_id"] == entries[1]["id"]
    assert navigate_after.data["old_leaf_id"] == entries[-1]["id"]
    assert navigate_after.result == result
    assert heard[3].result == fork and heard[2].data == {
        "entry_id": entries[1]["id"],
        "position": "at",
        "fork_leaf_id": entries[1]["id"],
    }
    assert heard[7].result == compaction and heard[6].result is None
    assert heard[7].actor.name == "system" and heard[7].channel == "internal"


@pytest.mark.parametrize("event", ["before_navigate", "before_fork", "before_compact"])
def test_a_before_hook_refuses_and_nothing_is_written(provider, registered, event):
    entries = chain(provider)
    after: list[hooks.HookEvent] = []
    registered(event.replace("before", "after"), after.append)

    def refuse(hook_event):
        raise LeafConflict(f"{hook_event.name}: not now")

    registered(event, refuse)
    before = snapshot(provider)
    sessions_before = provider.get_session("s1")
    operations = {
        "before_navigate": lambda: services.navigate_tree(
            provider=provider,
            session_id="s1",
            target_id=entries[0]["id"],
            summarize=True,
            summarizer=FakeSummarizer("s"),
            label="x",
            actor="system",
            channel="internal",
        ),
        "before_fork": lambda: services.fork_session(
            provider=provider,
            session_id="s1",
            entry_id=entries[1]["id"],
            position="at",
            new_session_id="f1",
            actor="system",
            channel="internal",
        ),
        "before_compact": lambda: services.compact_session(
            provider=provider,
            session_id="s1",
            summarizer=FakeSummarizer("s"),
            settings=CompactionSettings(keep_recent_tokens=50),
            actor="system",
            channel="internal",
        ),
    }
    with pytest.raises(LeafConflict, match="not now"):
        operations[event]()
    assert snapshot(provider) == before
    assert provider.get_session("s1") == sessions_before
    assert provider.get_session("f1") is None
    assert after == []


def test_an_after_hook_that_fails_never_undoes_the_change(provider, registered, caplog):
    entries = chain(provider)

    def broken(hook_event):
        raise RuntimeError("the hook is broken")

    later: list[str] = []
    registered("after_navigate", broken)
    registered("after_navigate", lambda hook_event: later.append(hook_event.name))
    with caplog.at_level(logging.ERROR, logger="sessiontree.services.hooks"):
        result = services.navigate_tree(
            provider=provider, session_id="s1", target_id=entries[1]["id"], actor="system", channel="internal"
        )  # a user message: its parent
    assert result["leaf_entry_id"] == entries[0]["id"]
    assert provider.get_session("s1")["leaf_entry_id"] == entries[0]["id"]
    assert AuditRecord.objects.filter(operation="navigate_tree").count() == 1
    assert later == ["after_navigate"]  # the other hooks still ran
    assert "after_navigate hook" in caplog.text and "the hook is broken" in caplog.text


def test_registration_is_idempotent_and_checked(registered):
    def hook(hook_event):
        return None

    registered("after_fork", hook)
    services.register_hook("after_fork", hook)
    assert hooks._hooks["after_fork"].count(hook) == 1
    with pytest.raises(ValueError, match="Unknown hook event"):
        services.register_hook("after_lunch", hook)


def test_the_compaction_hook_of_earlier_releases_still_works(provider):
    chain(provider)
    seen: list[tuple[str, str]] = []

    def legacy(hook_provider, session_id, compaction):
        seen.append((session_id, compaction["type"]))

    services.register_compaction_hook(legacy)
    try:
        services.compact_session(
            provider=provider,
            session_id="s1",
            summarizer=FakeSummarizer("s"),
            settings=CompactionSettings(keep_recent_tokens=50),
            actor="system",
            channel="internal",
        )
    finally:
        services.unregister_compaction_hook(legacy)
    assert seen == [("s1", "compaction")]


def test_a_before_hook_may_refuse_with_a_typed_bad_input_error(provider, registered):
    entries = chain(provider, 2)

    def only_labelled(hook_event):
        if not hook_event.data.get("label"):
            raise InvalidEntry("navigations need a label in this deployment")

    registered("before_navigate", only_labelled)
    with pytest.raises(InvalidEntry, match="need a label"):
        services.navigate_tree(
            provider=provider, session_id="s1", target_id=entries[0]["id"], actor="system", channel="internal"
        )
    assert (
        services.navigate_tree(
            provider=provider,
            session_id="s1",
            target_id=entries[0]["id"],
            label="ok",
            actor="system",
            channel="internal",
        )["label_entry"]["label"]
        == "ok"
    )
