"""Composite tree operations are all or nothing.

Navigating with a summary (leaf move, summary, label) and Pi's
branch-with-summary (leaf move, summary) used to be separate writes: a failure
between them, or a concurrent writer, left the leaf moved without its summary.
Each is now one unit under the session's lock (file) or in one transaction
(database), checked against the leaf it read.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from sessiontree.core.errors import LeafConflict
from sessiontree.models import AuditRecord
from sessiontree.providers import template
from sessiontree.services import tree
from tests.contract.conftest import PROVIDER_KINDS, make_provider
from tests.roleplay.story import FakeSummarizer


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def branched(provider):
    """root → a → b (leaf); the navigation targets go back to a."""
    provider.create_session(session_id="s1")
    root = provider.append_message("s1", user("root"))
    a = provider.append_message("s1", {"role": "assistant", "content": [{"type": "text", "text": "a"}]})
    b = provider.append_message("s1", user("b " + "words " * 50))
    return root, a, b


def state(provider):
    return provider.list_entries("s1"), provider.get_session("s1")["leaf_entry_id"], AuditRecord.objects.count()


class FaultAfter:
    """Make ``SessionWriter.append`` fail on its n-th call: a fault between steps."""

    def __init__(self, monkeypatch, n):
        real = template.SessionWriter.append
        calls = []

        def append(writer, entry, **kwargs):
            calls.append(entry.get("type"))
            if len(calls) == n:
                raise RuntimeError(f"fault injected before step {n} ({entry.get('type')})")
            return real(writer, entry, **kwargs)

        monkeypatch.setattr(template.SessionWriter, "append", append)


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
@pytest.mark.parametrize("fail_at", [1, 2], ids=["before-summary", "before-label"])
def test_a_fault_between_the_steps_of_navigate_leaves_the_session_as_it_was(kind, fail_at, db, tmp_path, monkeypatch):
    provider = make_provider(kind, tmp_path)
    _root, a, _b = branched(provider)
    before = state(provider)
    FaultAfter(monkeypatch, fail_at)
    with pytest.raises(RuntimeError, match="fault injected"):
        tree.navigate_tree(
            provider=provider,
            session_id="s1",
            target_id=a["id"],
            summarize=True,
            summarizer=FakeSummarizer("s"),
            label="here",
            actor="system",
            channel="internal",
        )
    assert state(provider) == before
    monkeypatch.undo()
    result = tree.navigate_tree(
        provider=provider,
        session_id="s1",
        target_id=a["id"],
        summarize=True,
        summarizer=FakeSummarizer("s"),
        label="here",
        actor="system",
        channel="internal",
    )
    assert result["summary_entry"]["parentId"] == a["id"] and result["label_entry"] is not None


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_a_fault_in_branch_with_summary_leaves_the_leaf_where_it_was(kind, db, tmp_path, monkeypatch):
    provider = make_provider(kind, tmp_path)
    _root, a, b = branched(provider)
    before = state(provider)
    FaultAfter(monkeypatch, 1)
    with pytest.raises(RuntimeError):
        provider.append_branch_summary("s1", branch_from_entry_id=a["id"], summary="s")
    assert state(provider) == before
    assert provider.get_session("s1")["leaf_entry_id"] == b["id"]


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_a_leaf_moved_while_summarizing_is_a_conflict_and_nothing_is_written(kind, db, tmp_path):
    provider = make_provider(kind, tmp_path)
    _root, a, _b = branched(provider)

    class MovingSummarizer(FakeSummarizer):
        def summarize(self, request):
            provider.append_message("s1", user("someone else wrote meanwhile"))
            return super().summarize(request)

    entries_before = len(provider.list_entries("s1"))
    with pytest.raises(LeafConflict):
        tree.navigate_tree(
            provider=provider,
            session_id="s1",
            target_id=a["id"],
            summarize=True,
            summarizer=MovingSummarizer("s"),
            label="x",
            actor="system",
            channel="internal",
        )
    assert len(provider.list_entries("s1")) == entries_before + 1  # only the other writer's entry
    assert provider.list_entries("s1")[-1]["message"]["content"] == "someone else wrote meanwhile"


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_navigations_one_wins_the_other_conflicts(kind, tmp_path):
    provider = make_provider(kind, tmp_path)
    root, a, _b = branched(provider)
    both_summarized = threading.Barrier(2, timeout=30)

    class WaitingSummarizer(FakeSummarizer):
        def summarize(self, request):
            both_summarized.wait()  # both have read the same old leaf before either writes
            return super().summarize(request)

    outcomes: dict[str, object] = {}

    def navigate(name, target):
        try:
            outcomes[name] = tree.navigate_tree(
                provider=provider,
                session_id="s1",
                target_id=target,
                summarize=True,
                summarizer=WaitingSummarizer(name),
                label=name,
                actor="system",
                channel="internal",
            )
        except Exception as exc:
            outcomes[name] = exc
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=navigate, args=("to-a", a["id"])),
        threading.Thread(target=navigate, args=("to-root", root["id"])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    conflicts = [name for name, outcome in outcomes.items() if isinstance(outcome, LeafConflict)]
    winners = [name for name, outcome in outcomes.items() if isinstance(outcome, dict)]
    assert len(conflicts) == 1 and len(winners) == 1, outcomes
    entries = provider.list_entries("s1")
    summaries = [e for e in entries if e["type"] == "branch_summary"]
    labels = [e for e in entries if e["type"] == "label"]
    assert len(summaries) == 1 and len(labels) == 1  # the loser wrote nothing at all
    assert labels[0]["label"] == winners[0]
    assert provider.get_session("s1")["leaf_entry_id"] == labels[0]["id"]
    assert AuditRecord.objects.filter(operation="navigate_tree").count() == 1
