"""Pi's real session with two compactions (before-compaction.jsonl, v1), loaded
into every provider: the same context as Pi builds, and a third compaction
that updates the second one's summary."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from sessiontree.core.compaction import CompactionSettings, estimate_context_tokens
from sessiontree.core.context_builder import build_session_context
from sessiontree.core.pi_session_file import load_entries_from_file, migrate_to_current_version
from sessiontree.services import compact_session, fork_session
from tests.pi_fixtures import fixture_path as pi_fixture_path
from tests.pi_fixtures import split_header

from .session_builders import RecordingSummarizer

FIXTURE = "before-compaction.jsonl"


def fixture_path() -> Path:
    return pi_fixture_path(FIXTURE)


@pytest.fixture(scope="module")
def migrated() -> tuple[dict, list[dict]]:
    """The file migrated by the kernel alone (v1 → v3), header and entries."""
    file_entries = load_entries_from_file(fixture_path())
    assert migrate_to_current_version(file_entries)
    header, entries = split_header(file_entries)
    return header, entries


def load_into(provider, header: dict, entries: list[dict]) -> str:
    """Put the Pi session into the provider the way each one takes an existing session."""
    session_id = header["id"]
    if provider.kind == "file":
        # A Pi file dropped into the root, registered as the sync command does
        # (the provider migrates it itself on first read).
        shutil.copyfile(fixture_path(), provider.root / f"{session_id}.jsonl")
        provider.register_existing_file(session_id)
    elif "entries" in inspect.signature(provider.create_session).parameters:
        provider.create_session(session_id=session_id, cwd=header.get("cwd"), entries=entries)
    else:
        provider.create_session(session_id=session_id, cwd=header.get("cwd"))
        for entry in entries:
            if provider.get_session(session_id)["leaf_entry_id"] != entry["parentId"]:
                provider.switch_leaf(session_id, entry["parentId"])
            provider.append_entry(session_id, entry)
    return session_id


def test_context_is_the_one_pi_builds(provider, migrated):
    header, kernel_entries = migrated
    session_id = load_into(provider, header, kernel_entries)
    stored = provider.list_entries(session_id)
    assert len(stored) == 1002
    # Pi resumes a session at its last entry.
    assert provider.get_session(session_id)["leaf_entry_id"] == stored[-1]["id"]

    context = provider.build_context(session_id)
    assert context == build_session_context(stored)
    expected = build_session_context(kernel_entries)
    assert context["messages"] == expected["messages"]
    assert (context["thinking_level"], context["model"]) == (expected["thinking_level"], expected["model"])

    # Pi's rule, restated over the stored entries: the latest compaction's
    # summary, then the messages from its firstKeptEntryId up to it, then the rest.
    compactions = [i for i, e in enumerate(stored) if e["type"] == "compaction"]
    latest = stored[compactions[-1]]
    first_kept = next(i for i, e in enumerate(stored) if e["id"] == latest["firstKeptEntryId"])
    kept_and_after = [e for e in stored[first_kept:] if e["type"] == "message"]
    assert context["messages"][0]["role"] == "compactionSummary"
    assert context["messages"][0]["summary"] == latest["summary"]
    assert context["messages"][0]["tokensBefore"] == latest["tokensBefore"] == 185014
    assert context["messages"][1:] == [e["message"] for e in kept_and_after]
    assert context["source_entry_ids"] == [latest["id"]] + [e["id"] for e in kept_and_after]
    assert len(context["messages"]) == 446


def test_a_third_compaction_updates_the_second_summary(provider, migrated):
    header, kernel_entries = migrated
    session_id = load_into(provider, header, kernel_entries)
    stored = provider.list_entries(session_id)
    latest = [e for e in stored if e["type"] == "compaction"][-1]
    context_before = provider.build_context(session_id)

    summarizer = RecordingSummarizer()
    entry = compact_session(
        provider=provider,
        session_id=session_id,
        summarizer=summarizer,
        settings=CompactionSettings(),
        actor="system",
        channel="internal",
    )
    assert entry is not None and entry["parentId"] == stored[-1]["id"]
    history = summarizer.requests[0]
    assert history.kind == "compaction"
    assert history.previous_summary == latest["summary"]
    # What the second compaction kept is summarized again, never dropped.
    first_kept_of_latest = next(e for e in stored if e["id"] == latest["firstKeptEntryId"])
    assert history.messages[0] == first_kept_of_latest["message"]
    assert entry["tokensBefore"] == estimate_context_tokens(context_before["messages"]).tokens
    # Cumulative file lists, carried from the second compaction's details when it has them.
    assert entry["details"]["modifiedFiles"] and entry["details"]["readFiles"]

    path = provider.get_active_path(session_id)
    path_ids = [e["id"] for e in path]
    assert entry["firstKeptEntryId"] in path_ids
    kept_index = path_ids.index(entry["firstKeptEntryId"])
    assert path_ids.index(latest["id"]) < kept_index
    assert path[kept_index]["message"]["role"] != "toolResult"

    context = provider.build_context(session_id)
    assert context["messages"][0]["summary"] == entry["summary"]
    assert context["messages"][1:] == [e["message"] for e in path[kept_index:-1] if e["type"] == "message"]


def test_replaying_each_of_pis_compactions_measures_the_context_as_pi_did(provider, migrated):
    """Fork just before each compaction Pi wrote and compact there: ``tokensBefore``
    is the figure Pi stored (175,004 and 185,014), and the second replay updates
    the first compaction's summary.

    ``firstKeptEntryId`` is not compared: this file was written by an earlier
    Pi release whose kept regions here start on user messages (entries 292
    and 550, about 20,000 tokens of reported usage before the end); the
    current rule, which this project follows, walks back by character
    estimates and may cut at an assistant reply (here 259 and 533, both
    split turns)."""
    header, kernel_entries = migrated
    session_id = load_into(provider, header, kernel_entries)
    stored = provider.list_entries(session_id)
    pis = [e for e in stored if e["type"] == "compaction"]
    assert [c["tokensBefore"] for c in pis] == [175004, 185014]

    for number, pi_compaction in enumerate(pis):
        fork = fork_session(
            provider=provider,
            session_id=session_id,
            entry_id=pi_compaction["parentId"],
            position="at",
            actor="system",
            channel="internal",
        )
        summarizer = RecordingSummarizer()
        entry = compact_session(
            provider=provider,
            session_id=fork["session_id"],
            summarizer=summarizer,
            settings=CompactionSettings(),
            actor="system",
            channel="internal",
        )
        assert entry["tokensBefore"] == pi_compaction["tokensBefore"]
        assert summarizer.requests[0].previous_summary == (pis[0]["summary"] if number else None)
        path = provider.get_active_path(fork["session_id"])
        kept = next(e for e in path if e["id"] == entry["firstKeptEntryId"])
        assert kept["message"]["role"] != "toolResult"
        assert path.index(kept) > (path.index(next(e for e in path if e["id"] == pis[0]["id"])) if number else 0)
