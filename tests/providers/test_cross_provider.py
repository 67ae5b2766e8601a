"""The file and mysql providers give the same results for the same operations.

Entry ids are random, so results are compared with every id replaced by the
position of its entry in append order; the clock is fixed so timestamps (and
the context messages made from them) match. Sessions copied file → DB → file
must come back equal as JSON, unknown fields and key order included.
"""

from __future__ import annotations

import random
import shutil
from typing import Any

import orjson
import pytest

from sessiontree.core import entries as entry_builders
from sessiontree.core import fork
from sessiontree.core.context_builder import build_session_context
from sessiontree.core.errors import SessionTreeError
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider
from tests.pi_fixtures import fixture_path

FIXED_NOW = "2026-04-19T00:00:00.000Z"
PI_HEADER_KEYS = {"type", "version", "id", "timestamp", "cwd", "parentSession"}


@pytest.fixture
def providers(db, tmp_path, monkeypatch):
    monkeypatch.setattr(entry_builders, "now_iso", lambda: FIXED_NOW)
    monkeypatch.setattr(fork, "now_iso", lambda: FIXED_NOW)
    clear_index_cache()
    return FileSessionTreeProvider(root=tmp_path / "files"), MySQLSessionTreeProvider()


def as_json(entries: list[dict]) -> list[bytes]:
    return [orjson.dumps(e) for e in entries]


# --- normalizing ids ---------------------------------------------------------------


def id_names(provider, session_id: str) -> dict[str, str]:
    """Entry id → its position; session ids (both providers share one table, so
    each run uses its own prefix) → the id without the prefix."""
    names = {e["id"]: f"#{i}" for i, e in enumerate(provider.list_entries(session_id))}
    prefix = session_id.split("-", 1)[0] + "-"
    names.update({sid: sid.removeprefix(prefix) for sid in getattr(provider, "session_ids", [])})
    return names


def normalized(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every entry id (as a string or a dict key) replaced by its position."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {normalized(k, names): normalized(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v, names) for v in value]
    return value


def comparable_session(session: dict) -> dict:
    return {k: session[k] for k in ("root_entry_id", "leaf_entry_id", "cwd", "title", "status", "metadata")} | {
        "parent_session_id": session["parent_session_id"]
    }


def observe(provider, session_id: str, source_id: str | None = None, *, every: int = 1) -> dict:
    """Everything a caller can read of a session, ids normalized (a fork's
    entries may still name entries only its ``source_id`` has); contexts and
    paths at every ``every``-th entry."""
    names = id_names(provider, session_id)
    if source_id is not None:
        names = {k: f"source{v}" if v.startswith("#") else v for k, v in id_names(provider, source_id).items()} | names
    entries = provider.list_entries(session_id)
    snapshot = provider.get_snapshot(session_id)
    snapshot["session"] = comparable_session(snapshot["session"])
    return normalized(
        {
            "entries": entries,
            "snapshot": snapshot,
            "active_path": provider.get_active_path(session_id),
            "context": provider.build_context(session_id),
            "context_at": [provider.build_context(session_id, e["id"]) for e in entries[::every]],
            "path_at": [[p["id"] for p in provider.get_active_path(session_id, e["id"])] for e in entries[::every]],
        },
        names,
    )


# --- one script, both providers --------------------------------------------------------


def assistant(text: str, model: str = "m-1") -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": model}


def scripted(provider, session_id: str) -> str:
    """Settings, labels on the path, a compaction, branch summaries, a reset,
    an in-flight entry, then a fork: every operation of the contract."""
    provider.session_ids = [session_id, f"{session_id}-fork"]
    provider.create_session(session_id=session_id, cwd="/w", title="t")
    first = provider.append_message(session_id, {"role": "user", "content": "one"})
    provider.append_thinking_level_change(session_id, "high")
    provider.append_label_change(session_id, first["id"], "start")
    provider.append_message(session_id, assistant("two"))
    kept = provider.append_message(session_id, {"role": "user", "content": "three", "x-unknown": [1, None]})
    provider.append_model_change(session_id, "openai", "gpt-x")
    provider.append_compaction(
        session_id, summary="S", first_kept_entry_id=kept["id"], tokens_before=500, details={"readFiles": ["a"]}
    )
    after = provider.append_message(session_id, assistant("four", "m-2"))
    provider.append_custom_entry(session_id, "ext", {"k": [1, 2]})
    provider.append_custom_message(session_id, "note", [{"type": "text", "text": "n"}], display=False, details=None)
    provider.append_branch_summary(session_id, branch_from_entry_id=first["id"], summary="left a branch")
    provider.append_message(session_id, {"role": "user", "content": "on the new branch"})
    provider.append_label_change(session_id, first["id"], None)  # cleared
    provider.append_session_info(session_id, "named")
    streaming = provider.begin_in_flight_entry(session_id, {"type": "message", "message": assistant("")})
    provider.update_in_flight_entry(session_id, streaming["id"], {"message": assistant("stream")})
    provider.update_in_flight_entry(session_id, streaming["id"], {"message": assistant("streamed")}, complete=True)
    provider.switch_leaf(session_id, after["id"])
    provider.append_label_change(session_id, kept["id"], "kept")
    provider.append_message(session_id, {"role": "user", "content": "after the label"})
    provider.append_branch_summary(session_id, branch_from_entry_id=None, summary="from the root")
    provider.reset_leaf(session_id)
    provider.append_message(session_id, {"role": "user", "content": "second root"})
    provider.switch_leaf(session_id, after["id"])
    provider.create_branched_session(session_id, after["id"], new_session_id=f"{session_id}-fork")
    return session_id


def test_the_same_script_gives_the_same_results(providers):
    file_provider, db_provider = providers
    scripted(file_provider, "f-s1")
    scripted(db_provider, "d-s1")
    assert observe(db_provider, "d-s1") == observe(file_provider, "f-s1")
    assert observe(db_provider, "d-s1-fork", "d-s1") == observe(file_provider, "f-s1-fork", "f-s1")
    context = observe(db_provider, "d-s1")["context"]
    assert [m["role"] for m in context["messages"]][:3] == ["compactionSummary", "user", "assistant"]
    contexts_at = observe(db_provider, "d-s1")["context_at"]
    assert any(m["role"] == "branchSummary" for c in contexts_at for m in c["messages"])


def random_operations(provider, prefix: str, seed: int, steps: int = 80) -> None:
    """``steps`` random operations; references to entries are positions in
    append order, so both providers receive the same operations."""
    rng = random.Random(seed)
    session_id = f"{prefix}r"
    provider.session_ids = [session_id]
    provider.create_session(session_id=session_id)
    forks = 0
    streaming: str | None = None  # position of the in-flight entry
    for step in range(steps):
        entries = provider.list_entries(session_id)
        pick = entries[rng.randrange(len(entries))]["id"] if entries else None
        op = rng.choice(
            ["user", "user", "assistant", "assistant", "thinking", "model", "custom", "custom_message", "label",
             "clear_label", "info", "switch", "switch", "reset", "compaction", "branch_summary", "in_flight", "fork"]
        )  # fmt: skip
        if streaming is not None and rng.random() < 0.4:
            op = "complete"  # otherwise the in-flight entry would block every later write
        try:
            if op == "complete":
                entry_id = entries[int(streaming)]["id"]
                streaming = None
                provider.update_in_flight_entry(
                    session_id, entry_id, {"message": assistant(f"done{step}")}, complete=True
                )
            elif op == "user":
                provider.append_message(session_id, {"role": "user", "content": f"u{step}"})
            elif op == "assistant":
                provider.append_message(session_id, assistant(f"a{step}", model=f"m{step % 3}"))
            elif op == "thinking":
                provider.append_thinking_level_change(session_id, rng.choice(["low", "high"]))
            elif op == "model":
                provider.append_model_change(session_id, "p", f"m{step}")
            elif op == "custom":
                provider.append_custom_entry(session_id, "ext", {"step": step} if step % 2 else None)
            elif op == "custom_message":
                provider.append_custom_message(session_id, "note", f"c{step}", display=bool(step % 2))
            elif op == "label" and pick:
                provider.append_label_change(session_id, pick, f"l{step}")
            elif op == "clear_label" and pick:
                provider.append_label_change(session_id, pick, None)
            elif op == "info":
                provider.append_session_info(session_id, f"n{step}")
            elif op == "switch" and pick:
                provider.switch_leaf(session_id, pick)
            elif op == "reset":
                provider.reset_leaf(session_id)
            elif op == "compaction" and pick:
                provider.append_compaction(session_id, summary=f"s{step}", first_kept_entry_id=pick, tokens_before=step)
            elif op == "branch_summary":
                provider.append_branch_summary(session_id, branch_from_entry_id=pick, summary=f"b{step}")
            elif op == "in_flight":
                started = provider.begin_in_flight_entry(session_id, {"type": "message", "message": assistant("")})
                provider.update_in_flight_entry(session_id, started["id"], {"message": assistant(f"f{step}")})
                streaming = str(len(entries))
            elif op == "fork" and pick:
                forks += 1
                provider.session_ids.append(f"{session_id}-fork{forks}")
                provider.create_branched_session(session_id, pick, new_session_id=f"{session_id}-fork{forks}")
        except SessionTreeError as exc:  # e.g. an append while an entry is in flight: same error on both
            provider.list_entries(session_id)  # still readable
            provider.errors = [*getattr(provider, "errors", []), (step, type(exc).__name__)]
    provider.forks = forks


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_give_the_same_results(providers, seed):
    file_provider, db_provider = providers
    random_operations(file_provider, "f-", seed)
    random_operations(db_provider, "d-", seed)
    assert getattr(db_provider, "errors", []) == getattr(file_provider, "errors", [])
    assert observe(db_provider, "d-r") == observe(file_provider, "f-r")
    for i in range(1, file_provider.forks + 1):
        assert observe(db_provider, f"d-r-fork{i}", "d-r") == observe(file_provider, f"f-r-fork{i}", "f-r")


# --- copies between the providers ---------------------------------------------------


def copy_session(source, target, session_id: str, new_session_id: str) -> None:
    header = source.get_header(session_id)
    target.create_session(
        session_id=new_session_id,
        cwd=header.get("cwd"),
        entries=source.list_entries(session_id),
        header_extra={k: v for k, v in header.items() if k not in PI_HEADER_KEYS},
    )


def register_fixture(file_provider, name: str, session_id: str) -> None:
    shutil.copyfile(fixture_path(name), file_provider.root / f"{session_id}.jsonl")
    file_provider.register_existing_file(session_id)


@pytest.mark.parametrize("name", ["large-session.jsonl", "before-compaction.jsonl"])
def test_a_real_pi_session_copied_file_db_file_is_unchanged(providers, name):
    file_provider, db_provider = providers
    register_fixture(file_provider, name, "pi")
    original = file_provider.list_entries("pi")
    assert len(original) > 1000
    copy_session(file_provider, db_provider, "pi", "db")
    assert as_json(db_provider.list_entries("db")) == as_json(original)
    copy_session(db_provider, file_provider, "db", "back")
    assert as_json(file_provider.list_entries("back")) == as_json(original)
    # the file itself: header extras, then every entry line byte for byte
    lines = (file_provider.root / "back.jsonl").read_bytes().splitlines()
    assert lines[1:] == as_json(original)
    source_header, back_header = file_provider.get_header("pi"), orjson.loads(lines[0])
    assert {k: v for k, v in back_header.items() if k not in PI_HEADER_KEYS} == {
        k: v for k, v in source_header.items() if k not in PI_HEADER_KEYS
    }
    leaf = original[-1]["id"]
    expected = build_session_context(original, leaf)
    assert db_provider.build_context("db") == expected
    assert file_provider.build_context("back") == expected
    if name == "before-compaction.jsonl":
        assert expected["messages"][0]["role"] == "compactionSummary"
    assert observe(db_provider, "db", every=97) == observe(file_provider, "pi", every=97)


def test_unknown_fields_nulls_and_odd_entries_survive_a_copy_both_ways(providers):
    file_provider, db_provider = providers
    odd = [
        {"type": "message", "id": "a1", "parentId": None, "timestamp": FIXED_NOW,
         "message": {"role": "user", "content": "x", "zz": {"b": 1, "a": None}}, "extraTop": None},
        {"id": "a2", "type": "label", "parentId": "a1", "timestamp": FIXED_NOW, "targetId": "a1"},
        {"type": "label", "id": "a3", "parentId": "a2", "timestamp": FIXED_NOW, "targetId": "a1", "label": None},
        {"type": "custom", "id": "a4", "parentId": "a3", "timestamp": FIXED_NOW, "customType": "c", "data": None},
        {"type": "future_entry_type", "id": "a5", "parentId": "a4", "timestamp": 123, "payload": [{"k": "v"}]},
        {"type": "compaction", "id": "a6", "parentId": "a5", "timestamp": FIXED_NOW, "summary": "s",
         "firstKeptEntryId": "a1", "tokensBefore": 1, "details": {"z": 1, "a": 2}, "fromHook": False, "x": 1.5},
        {"type": "session_info", "id": "a7", "parentId": "a6", "timestamp": FIXED_NOW},
    ]  # fmt: skip
    file_provider.create_session(session_id="odd", entries=odd, header_extra={"branchedFrom": "/x.jsonl", "n": None})
    copy_session(file_provider, db_provider, "odd", "db")
    copy_session(db_provider, file_provider, "db", "back")
    assert as_json(db_provider.list_entries("db")) == as_json(odd)
    assert as_json(file_provider.list_entries("back")) == as_json(odd)
    assert db_provider.get_header("db")["branchedFrom"] == "/x.jsonl"
    assert "n" in file_provider.get_header("back")
    assert db_provider.build_context("db") == file_provider.build_context("odd")
