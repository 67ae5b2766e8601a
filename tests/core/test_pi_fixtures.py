"""Real session files recorded by Pi (v1 format): load, migrate, and build the
same context Pi builds.

Expected values are computed here by re-stating Pi's rules directly over the
raw file, independently of the kernel, then pinned as literals so that a
regression in either shows up.
"""

from __future__ import annotations

import collections
import itertools
import re

import orjson
import pytest

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.path import build_entry_index, get_path_to_leaf
from sessiontree.core.pi_session_file import (
    load_entries_from_file,
    migrate_to_current_version,
    serialize_file,
)
from tests.pi_fixtures import fixture_path, fixtures_dir, missing, split_header

HEX8 = re.compile(r"^[0-9a-f]{8}$")


def raw_lines(name: str) -> list[dict]:
    """The file's objects exactly as stored, header first, no kernel code involved."""
    return [orjson.loads(line) for line in fixture_path(name).read_bytes().splitlines() if line.strip()]


def loaded(name: str) -> tuple[dict, list[dict], bool]:
    file_entries = load_entries_from_file(fixture_path(name))
    migrated = migrate_to_current_version(file_entries)
    header, entries = split_header(file_entries)
    assert header is not None
    return header, entries, migrated


@pytest.fixture(scope="module")
def large():
    return loaded("large-session.jsonl")


@pytest.fixture(scope="module")
def before_compaction():
    return loaded("before-compaction.jsonl")


def test_fixture_readme_is_present():
    readme = fixtures_dir() / "README.md"
    if not readme.is_file():
        missing("README.md", readme)


# --- both files: migration and tree validity -------------------------------

FILES = ["large-session.jsonl", "before-compaction.jsonl"]


@pytest.mark.parametrize("name", FILES)
def test_files_are_v1_and_migrate_to_v3(name):
    raw = raw_lines(name)
    assert "version" not in raw[0]
    assert all("id" not in obj and "parentId" not in obj for obj in raw[1:])
    header, entries, migrated = loaded(name)
    assert migrated is True
    assert header["version"] == 3
    assert header["id"] == raw[0]["id"]
    assert len(entries) == len(raw) - 1


@pytest.mark.parametrize("name", FILES)
def test_migrated_entries_form_one_linear_valid_tree(name):
    _, entries, _ = loaded(name)
    entry_ids = [e["id"] for e in entries]
    assert all(HEX8.match(i) for i in entry_ids)
    assert len(set(entry_ids)) == len(entries)
    path = get_path_to_leaf(entries, entries[-1]["id"])
    assert [e["id"] for e in path] == entry_ids
    assert path[0]["parentId"] is None
    for previous, current in itertools.pairwise(path):
        assert current["parentId"] == previous["id"]


@pytest.mark.parametrize("name", FILES)
def test_migration_changes_only_the_tree_fields(name):
    raw = raw_lines(name)
    _, entries, _ = loaded(name)
    for before, after in zip(raw[1:], entries, strict=True):
        stripped = {k: v for k, v in after.items() if k not in {"id", "parentId", "firstKeptEntryId"}}
        expected = {k: v for k, v in before.items() if k != "firstKeptEntryIndex"}
        assert stripped == expected


@pytest.mark.parametrize("name", FILES)
def test_migrated_file_round_trips_and_is_not_migrated_again(name, tmp_path):
    header, entries, _ = loaded(name)
    copy_path = tmp_path / name
    copy_path.write_bytes(serialize_file([header, *entries]))
    reloaded = load_entries_from_file(copy_path)
    assert migrate_to_current_version(reloaded) is False
    assert reloaded == [header, *entries]
    assert build_session_context(reloaded[1:]) == build_session_context(entries)


# --- large-session.jsonl ---------------------------------------------------


def test_large_session_header_keeps_its_extra_fields(large):
    header, _, _ = large
    assert header["provider"] == "anthropic"
    assert header["modelId"] == "claude-sonnet-4-5"
    assert header["thinkingLevel"] == "off"
    assert header["cwd"] == "/Users/badlogic/workspaces/pi-mono"


def test_large_session_entry_counts_match_the_readme(large):
    _, entries, _ = large
    assert len(entries) == 1018
    assert collections.Counter(e["type"] for e in entries) == {
        "message": 914,
        "thinking_level_change": 103,
        "model_change": 1,
    }
    assert collections.Counter(e["message"]["role"] for e in entries if e["type"] == "message") == {
        "assistant": 453,
        "toolResult": 373,
        "user": 88,
    }


def test_large_session_context_follows_pis_rules(large):
    _, entries, _ = large
    raw = raw_lines("large-session.jsonl")[1:]
    # No compaction: every message in order; settings from the last change.
    expected_messages = [obj["message"] for obj in raw if obj["type"] == "message"]
    expected_thinking = [obj["thinkingLevel"] for obj in raw if obj["type"] == "thinking_level_change"][-1]
    expected_model = None
    for obj in raw:
        if obj["type"] == "model_change":
            expected_model = {"provider": obj["provider"], "modelId": obj["modelId"]}
        elif obj["type"] == "message" and obj["message"]["role"] == "assistant":
            expected_model = {"provider": obj["message"].get("provider"), "modelId": obj["message"].get("model")}

    context = build_session_context(entries)
    assert context["messages"] == expected_messages
    assert context["thinking_level"] == expected_thinking
    assert context["model"] == expected_model
    assert context["source_entry_ids"] == [e["id"] for e in entries if e["type"] == "message"]

    assert len(context["messages"]) == 914
    assert context["thinking_level"] == "off"
    assert context["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}


# --- before-compaction.jsonl -----------------------------------------------


def test_before_compaction_header_keeps_branched_from(before_compaction):
    header, _, _ = before_compaction
    raw_header = raw_lines("before-compaction.jsonl")[0]
    assert header["branchedFrom"] == raw_header["branchedFrom"]
    assert header["branchedFrom"].endswith(".jsonl")
    assert (header["provider"], header["modelId"], header["thinkingLevel"]) == ("anthropic", "claude-opus-4-5", "off")


def test_before_compaction_entry_counts(before_compaction):
    _, entries, _ = before_compaction
    assert len(entries) == 1002
    assert collections.Counter(e["type"] for e in entries) == {
        "message": 990,
        "thinking_level_change": 5,
        "model_change": 5,
        "compaction": 2,
    }


def test_first_kept_entry_index_resolves_to_the_line_it_counts(before_compaction):
    _, entries, _ = before_compaction
    raw = raw_lines("before-compaction.jsonl")
    raw_indexes = [obj["firstKeptEntryIndex"] for obj in raw if obj["type"] == "compaction"]
    assert raw_indexes == [293, 551]
    compactions = [e for e in entries if e["type"] == "compaction"]
    for compaction, line_index in zip(compactions, raw_indexes, strict=True):
        # Line numbers count the header as line 0, so entry index = line index - 1.
        assert compaction["firstKeptEntryId"] == entries[line_index - 1]["id"]
        assert "firstKeptEntryIndex" not in compaction


def test_before_compaction_context_follows_pis_rules(before_compaction):
    _, entries, _ = before_compaction
    raw = raw_lines("before-compaction.jsonl")  # header at line 0

    # Pi's rule restated over raw lines: the latest compaction's summary, then
    # the message lines from its firstKeptEntryIndex up to it, then the rest.
    compaction_lines = [i for i, obj in enumerate(raw) if obj["type"] == "compaction"]
    latest = compaction_lines[-1]
    first_kept_line = raw[latest]["firstKeptEntryIndex"]
    kept_and_after = [i for i in range(first_kept_line, len(raw)) if i != latest and raw[i]["type"] == "message"]
    expected_messages = [raw[i]["message"] for i in kept_and_after]
    expected_thinking = "off"
    expected_model = None
    for obj in raw[1:]:
        if obj["type"] == "thinking_level_change":
            expected_thinking = obj["thinkingLevel"]
        elif obj["type"] == "model_change":
            expected_model = {"provider": obj["provider"], "modelId": obj["modelId"]}
        elif obj["type"] == "message" and obj["message"]["role"] == "assistant":
            expected_model = {"provider": obj["message"].get("provider"), "modelId": obj["message"].get("model")}

    context = build_session_context(entries)
    summary = context["messages"][0]
    assert summary["role"] == "compactionSummary"
    assert summary["summary"] == raw[latest]["summary"]
    assert summary["tokensBefore"] == raw[latest]["tokensBefore"]
    assert context["messages"][1:] == expected_messages
    assert context["thinking_level"] == expected_thinking
    assert context["model"] == expected_model
    # Each message maps back to the line it came from (entry index = line - 1).
    assert context["source_entry_ids"] == [entries[latest - 1]["id"]] + [entries[i - 1]["id"] for i in kept_and_after]

    # Pinned figures.
    assert (latest, first_kept_line) == (628, 551)
    assert summary["tokensBefore"] == 185014
    assert len(context["messages"]) == 446
    assert collections.Counter(m["role"] for m in context["messages"]) == {
        "compactionSummary": 1,
        "assistant": 219,
        "toolResult": 192,
        "user": 31,
        "bashExecution": 3,
    }
    assert context["thinking_level"] == "off"
    assert context["model"] == {"provider": "anthropic", "modelId": "claude-opus-4-5"}


def test_before_compaction_context_just_after_the_first_compaction(before_compaction):
    _, entries, _ = before_compaction
    by_id = build_entry_index(entries)
    first = next(e for e in entries if e["type"] == "compaction")
    first_index = entries.index(first)
    kept_from = entries.index(by_id[first["firstKeptEntryId"]])
    leaf = entries[first_index + 1]
    context = build_session_context(entries, leaf["id"], by_id)
    expected = [e["message"] for e in entries[kept_from:first_index] if e["type"] == "message"]
    if leaf["type"] == "message":
        expected.append(leaf["message"])
    assert context["messages"][0]["summary"] == first["summary"]
    assert context["messages"][1:] == expected
    assert (first_index, kept_from) == (358, 292)
