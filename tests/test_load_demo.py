"""The demo data set: built through the operations layer, idempotent, rich enough to show every feature."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessiontree.models import Agent, AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider

FILE_IDS = ["demo-coding-1", "demo-coding-1-fork", "demo-coding-1-fork-2", "demo-coding-2", "demo-roleplay-1"]
FILE_IDS += ["demo-long-1"]
MYSQL_IDS = ["demo-mysql-coding-1", "demo-mysql-coding-2", "demo-mysql-coding-1-fork"]
DEMO_IDS = FILE_IDS + MYSQL_IDS

pytestmark = pytest.mark.django_db


def load_demo(*args: str) -> str:
    out = StringIO()
    call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def state_of(session_ids: list[str]) -> dict[str, tuple[str | None, list[dict]]]:
    state = {}
    for sid in session_ids:
        provider = get_provider(AgentSession.objects.get(session_id=sid).provider)
        state[sid] = (provider.get_session(sid)["leaf_entry_id"], provider.list_entries(sid))
    return state


def test_creates_the_demo_sessions_with_a_summary_line():
    output = load_demo("--provider", "file")

    # Issue 25: the line names where the sessions are (three are in the mysql provider whatever --provider says).
    assert output.strip().splitlines()[-1] == "Demo data: 9 sessions (6 file, 3 mysql), 9 created, 0 already present."
    assert sorted(AgentSession.objects.values_list("session_id", flat=True)) == sorted(DEMO_IDS)
    assert sorted(AgentSession.objects.filter(provider="file").values_list("session_id", flat=True)) == sorted(FILE_IDS)
    assert sorted(AgentSession.objects.filter(provider="mysql").values_list("session_id", flat=True)) == sorted(
        MYSQL_IDS
    )
    assert set(Agent.objects.values_list("name", flat=True)) == {"demo-coder", "demo-roleplay", "demo-db-coder"}


def test_running_twice_gives_the_same_sessions():
    load_demo()
    before = state_of(DEMO_IDS)

    output = load_demo()

    assert "0 created, 9 already present." in output
    assert state_of(DEMO_IDS) == before
    assert AgentSession.objects.count() == 9


def test_dry_run_changes_nothing():
    output = load_demo("--dry-run")

    assert "Would create demo-coding-1 (file)" in output
    assert "Would create demo-mysql-coding-1 (mysql)" in output
    assert "9 would be created" in output
    assert AgentSession.objects.count() == 0
    assert Agent.objects.count() == 0


def test_reset_rebuilds_the_sessions():
    load_demo()
    old_entry_ids = {e["id"] for e in get_provider("file").list_entries("demo-coding-1")}

    output = load_demo("--reset")

    assert "Deleted demo-coding-1" in output
    assert "9 created, 0 already present." in output
    new_entry_ids = {e["id"] for e in get_provider("file").list_entries("demo-coding-1")}
    assert new_entry_ids and new_entry_ids.isdisjoint(old_entry_ids)
    assert AgentSession.objects.count() == 9


def test_files_without_rows_are_registered_not_duplicated():
    load_demo()
    entries = get_provider("file").list_entries("demo-coding-2")
    AgentSession.objects.all().delete()  # the database was reset, the files stayed

    output = load_demo()

    assert "6 registered from existing files." in output  # the mysql sessions went with their rows
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
    assert len(fork_messages) == len(source_messages) + 4  # two exchanges of its own


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


def test_every_demo_write_went_through_the_operations_layer_on_the_cli_channel():
    load_demo()

    for session_id in DEMO_IDS:
        records = AuditRecord.objects.filter(session_id=session_id)
        assert records.exists(), session_id
        assert set(records.values_list("channel", flat=True)) == {"cli"}
        assert all(actor.startswith("cli:") for actor in records.values_list("actor", flat=True))


def test_the_long_session_has_compactions_branches_and_labels():
    load_demo()
    row = AgentSession.objects.get(session_id="demo-long-1")
    provider = get_provider("file")
    snapshot = provider.get_snapshot("demo-long-1")

    assert 1800 <= row.entry_count <= 2200
    assert row.compaction_count >= 3
    assert row.branch_count >= 5
    assert len(snapshot["labels_by_entry_id"]) >= 5
    types = [e["type"] for e in snapshot["entries"]]
    assert types.count("branch_summary") >= 3
    context = snapshot["runtime_context"]
    assert context["messages"][0]["role"] == "compactionSummary"
    assert snapshot["active_path"][-1] == row.leaf_entry_id == snapshot["entries"][-1]["id"]


def test_a_fork_of_a_fork_and_forks_in_the_mysql_provider():
    load_demo()

    grandchild = AgentSession.objects.get(session_id="demo-coding-1-fork-2")
    assert [a.session_id for a in grandchild.get_ancestors()] == ["demo-coding-1", "demo-coding-1-fork"]
    mysql_fork = AgentSession.objects.get(session_id="demo-mysql-coding-1-fork")
    assert mysql_fork.provider == "mysql" and mysql_fork.parent.session_id == "demo-mysql-coding-1"
    provider = get_provider("mysql")
    labels = provider.get_snapshot("demo-mysql-coding-1")["labels_by_entry_id"]
    fork_point = next(entry_id for entry_id, info in labels.items() if info["label"] == "decimal fix")
    source = provider.build_context("demo-mysql-coding-1", fork_point)["messages"]
    assert provider.build_context("demo-mysql-coding-1-fork")["messages"][: len(source)] == source


def test_a_corrupt_demo_file_is_a_one_line_reason(settings):
    from pathlib import Path

    root = Path(settings.SESSIONTREE_FILE_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    (root / "demo-coding-1.jsonl").write_text("this is not a session file\n")

    with pytest.raises(CommandError) as failure:
        load_demo()

    message = str(failure.value)
    assert "\n" not in message and message.startswith("corrupt_session_tree:")
    assert failure.value.returncode == 5
    assert (root / "demo-coding-1.jsonl").read_text() == "this is not a session file\n"  # nothing lost


def test_a_directory_in_the_way_is_a_one_line_reason(settings):
    from pathlib import Path

    root = Path(settings.SESSIONTREE_FILE_ROOT)
    (root / "demo-coding-2.jsonl").mkdir(parents=True)

    with pytest.raises(CommandError) as failure:
        load_demo()

    message = str(failure.value)
    assert "\n" not in message and "demo-coding-2" in message
    assert failure.value.returncode != 0


def test_a_file_root_that_is_a_file_is_a_one_line_reason(settings, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    settings.SESSIONTREE_FILE_ROOT = str(blocker)

    with pytest.raises(CommandError) as failure:
        load_demo()

    assert "\n" not in str(failure.value) and failure.value.returncode == 6
