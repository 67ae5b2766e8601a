"""The demo data set: built through the provider API, idempotent, rich enough to show every feature."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from sessiontree.models import Agent, AgentSession
from sessiontree.providers.factory import get_provider

DEMO_IDS = ["demo-coding-1", "demo-coding-1-fork", "demo-coding-2", "demo-roleplay-1"]

pytestmark = pytest.mark.django_db


def load_demo(*args: str) -> str:
    out = StringIO()
    call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def state_of(session_ids: list[str]) -> dict[str, tuple[str | None, list[dict]]]:
    provider = get_provider("file")
    return {sid: (provider.get_session(sid)["leaf_entry_id"], provider.list_entries(sid)) for sid in session_ids}


def test_creates_the_demo_sessions_with_a_summary_line():
    output = load_demo("--provider", "file")

    assert output.strip().splitlines()[-1] == "Demo data (file provider): 4 sessions, 4 created, 0 already present."
    assert sorted(AgentSession.objects.values_list("session_id", flat=True)) == sorted(DEMO_IDS)
    assert set(AgentSession.objects.values_list("provider", flat=True)) == {"file"}
    assert set(Agent.objects.values_list("name", flat=True)) == {"demo-coder", "demo-roleplay"}


def test_running_twice_gives_the_same_sessions():
    load_demo()
    before = state_of(DEMO_IDS)

    output = load_demo()

    assert "0 created, 4 already present." in output
    assert state_of(DEMO_IDS) == before
    assert AgentSession.objects.count() == 4


def test_dry_run_changes_nothing():
    output = load_demo("--dry-run")

    assert "Would create demo-coding-1" in output
    assert "4 would be created" in output
    assert AgentSession.objects.count() == 0
    assert Agent.objects.count() == 0


def test_reset_rebuilds_the_sessions():
    load_demo()
    old_entry_ids = {e["id"] for e in get_provider("file").list_entries("demo-coding-1")}

    output = load_demo("--reset")

    assert "Deleted demo-coding-1" in output
    assert "4 created, 0 already present." in output
    new_entry_ids = {e["id"] for e in get_provider("file").list_entries("demo-coding-1")}
    assert new_entry_ids and new_entry_ids.isdisjoint(old_entry_ids)
    assert AgentSession.objects.count() == 4


def test_files_without_rows_are_registered_not_duplicated():
    load_demo()
    entries = get_provider("file").list_entries("demo-coding-2")
    AgentSession.objects.all().delete()  # the database was reset, the files stayed

    output = load_demo()

    assert "4 registered from existing files." in output
    session = get_provider("file").get_session("demo-coding-2")
    assert session["title"] == "Flaky CI: test_export"
    assert get_provider("file").list_entries("demo-coding-2") == entries
    assert session["leaf_entry_id"] == entries[-1]["id"]  # Pi's rule for a file without meta


def test_coding_session_has_three_branches_labels_a_summary_and_a_model_switch():
    load_demo()
    provider = get_provider("file")
    snapshot = provider.get_snapshot("demo-coding-1")
    entries = snapshot["entries"]

    parents = {e["parentId"] for e in entries}
    leaves = [e for e in entries if e["id"] not in parents]
    assert len(leaves) == 3
    assert sorted(info["label"] for info in snapshot["labels_by_entry_id"].values()) == ["bug report", "decimal fix"]
    path = provider.get_active_path("demo-coding-1")
    assert [e["type"] for e in path].count("branch_summary") == 1
    context = snapshot["runtime_context"]
    assert context["model"] == {"provider": "openai", "modelId": "gpt-5.1-codex"}
    assert context["thinking_level"] == "high"
    assert any(m["role"] == "branchSummary" for m in context["messages"])


def test_fork_points_at_its_source_and_keeps_the_source_context():
    load_demo()
    provider = get_provider("file")
    fork = provider.get_session("demo-coding-1-fork")
    labels = provider.get_snapshot("demo-coding-1")["labels_by_entry_id"]
    fork_point = next(entry_id for entry_id, info in labels.items() if info["label"] == "decimal fix")

    assert fork["parent_session_id"] == "demo-coding-1"
    assert AgentSession.objects.get(session_id="demo-coding-1-fork").parent.session_id == "demo-coding-1"
    assert provider.get_header("demo-coding-1-fork")["parentSession"] == provider.path_for("demo-coding-1").as_posix()
    source_messages = provider.build_context("demo-coding-1", fork_point)["messages"]
    fork_messages = provider.build_context("demo-coding-1-fork")["messages"]
    # The source's path crosses a label entry; the fork must not lose what came before it.
    assert fork_messages[: len(source_messages)] == source_messages
    assert len(fork_messages) == len(source_messages) + 2


def test_compacted_session_starts_its_context_with_the_summary():
    load_demo()
    provider = get_provider("file")

    context = provider.build_context("demo-coding-2")
    entries = provider.list_entries("demo-coding-2")

    assert context["messages"][0]["role"] == "compactionSummary"
    assert context["messages"][1]["content"][0]["text"] == "Fix it with a frozen clock."
    assert (
        provider.get_session("demo-coding-2")["leaf_entry_id"] == [e for e in entries if e["type"] == "label"][-1]["id"]
    )
    side_branch = [e for e in entries if e["type"] == "message" and "inject a clock" in str(e["message"]["content"])]
    assert len(side_branch) == 1
    assert side_branch[0]["id"] not in {e["id"] for e in provider.get_active_path("demo-coding-2")}


def test_roleplay_session_has_the_commit_on_its_active_path():
    load_demo()
    provider = get_provider("file")

    path = provider.get_active_path("demo-roleplay-1")
    commits = [e for e in path if e["type"] == "custom" and e["customType"] == "pi-roleplay-commit"]

    assert [c["data"] for c in commits] == [
        {
            "commitId": "c1",
            "characterId": "alice",
            "source": "turn",
            "ops": [{"op": "add", "path": "/hair", "value": "short"}],
        }
    ]
    assert path[-1]["message"]["role"] == "assistant"
    assert "salt marshes" in path[-1]["message"]["content"][0]["text"]  # the reroll is the current branch
    roles = [e["message"]["role"] for e in provider.list_entries("demo-roleplay-1") if e["type"] == "message"]
    assert roles.count("user") == 3 and roles.count("assistant") == 3
