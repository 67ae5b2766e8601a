"""Pi writes, we read: sessions written by the published Pi's
``SessionManager`` give, in our kernel, Pi's context at every entry as leaf,
its compaction preparation there for several ``keep_recent_tokens``, its
tree, labels, session name and branch-summary collection. Then the same
files through both providers: imported into ``mysql`` and exported back,
a session stays what it was in Pi's eyes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from sessiontree.core.pi_session_file import load_entries_from_file
from sessiontree.providers.file_provider import FileSessionTreeProvider
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider
from tests.pi_fixtures import split_header

from .pi_scenarios import KEEP_RECENT_TOKENS, SCENARIOS
from .views import compare_read, kernel_read, write_session_file


@pytest.fixture(scope="session")
def pi_files(pi, tmp_path_factory) -> dict[str, list[Path]]:
    """Every scenario written once by Pi (a fork writes a second file)."""
    files: dict[str, list[Path]] = {}
    for name, ops in SCENARIOS.items():
        directory = tmp_path_factory.mktemp(f"pi-{name}")
        written = pi.write(directory, ops)
        files[name] = [Path(f) for f in written["files"]]
    return files


def branch_pairs(entry_ids: list[str]) -> list[tuple[str | None, str]]:
    return [(old, target) for old in [None, *entry_ids[::4]] for target in entry_ids[::3]]


@pytest.mark.parametrize(("scenario", "index"), [(n, i) for n in SCENARIOS for i in range(2 if n == "forks" else 1)])
def test_kernel_reads_what_pi_reads(pi, pi_files, scenario, index, tmp_path):
    path = pi_files[scenario][index]
    file_entries = load_entries_from_file(path)
    header, entries = split_header(file_entries)
    ids = [entry["id"] for entry in entries]
    # Pi 1.6's branch summary does not fill in null contents and throws on
    # them (``prepareBranchEntries`` → ``estimateTokens``); ours counts them
    # as empty. Nothing to compare there.
    pairs = [] if scenario == "null_contents" else branch_pairs(ids)
    answer = pi.read(path, keep=KEEP_RECENT_TOKENS, branch_pairs=pairs)
    assert header == answer["header"]
    assert entries == answer["entries"]
    ours = kernel_read(entries, answer["leaves"], KEEP_RECENT_TOKENS, pairs)
    problems = compare_read(answer, ours)
    assert not problems, f"{len(problems)} difference(s) in {scenario}:\n" + "\n".join(problems[:5])
    # The scenarios exercise what they claim to.
    assert any(prep is not None for preps in answer["preparations"] for prep in preps)


def test_scenarios_cover_every_entry_type(pi_files):
    seen: set[str] = set()
    for paths in pi_files.values():
        for path in paths:
            seen.update(entry["type"] for entry in split_header(load_entries_from_file(path))[1])
    assert seen == {
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "context_edit",
        "usage",
    }


def import_into(provider: Any, path: Path) -> str:
    """Import a Pi file into ``provider``: the session keeps the header's id."""
    header, entries = split_header(load_entries_from_file(path))
    extra = {
        key: value
        for key, value in header.items()
        if key not in ("type", "version", "id", "timestamp", "cwd", "parentSession")
    }
    session = provider.create_session(
        session_id=header["id"],
        cwd=header.get("cwd"),
        parent_session_id=header.get("parentSession"),
        entries=entries,
        header_extra=extra,
    )
    return session["session_id"]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["file", "mysql"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_pi_file_through_a_provider_and_back_is_the_same_session_in_pi(
    pi, pi_files, scenario, kind, tmp_path, settings
):
    path = pi_files[scenario][0]
    provider = FileSessionTreeProvider() if kind == "file" else MySQLSessionTreeProvider()
    if kind == "file":
        # The file provider adopts the file as it is (the sync command's registration).
        header_id = split_header(load_entries_from_file(path))[0]["id"]
        shutil.copyfile(path, provider.root / f"{header_id}.jsonl")
        session_id = provider.register_existing_file(header_id)["session_id"]
    else:
        session_id = import_into(provider, path)
    exported = write_session_file(
        tmp_path / "exported.jsonl", provider.get_header(session_id), provider.list_entries(session_id)
    )
    original = pi.read(path)
    again = pi.read(exported)
    assert again["entries"] == original["entries"]
    assert {k: v for k, v in again["header"].items() if k != "timestamp"} == {
        k: v for k, v in original["header"].items() if k != "timestamp"
    }
    for key in ("name", "labels", "tree", "contexts", "leaf"):
        assert again[key] == original[key], key
    # And the provider itself answers what Pi answers, at every entry.
    for leaf, context in zip(original["leaves"][1:], original["contexts"][1:], strict=True):
        ours = provider.build_context(session_id, leaf)
        assert {
            "messages": ours["messages"],
            "thinkingLevel": ours["thinking_level"],
            "model": ours["model"],
        } == context, leaf
