"""Exports as Pi JSONL: what each scope holds, and that the kernel reads them
back with the source's context."""

from __future__ import annotations

import orjson
import pytest

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.errors import EntryNotFound, InvalidEntry
from sessiontree.core.pi_session_file import parse_session_entries
from sessiontree.selectors.export import export_entries, export_jsonl
from tests.contract.conftest import PROVIDER_KINDS, make_provider
from tests.pi_fixtures import split_header


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


@pytest.fixture
def tree(provider):
    """a → b → c (branch 1), b → d → e (branch 2, the leaf), label on b."""
    provider.create_session(session_id="s1", cwd="/w")
    a = provider.append_message("s1", user("a"))
    b = provider.append_message("s1", user("b"))
    c = provider.append_message("s1", user("c"))
    provider.switch_leaf("s1", b["id"])
    label = provider.append_label_change("s1", b["id"], "here")
    d = provider.append_message("s1", user("d"))
    e = provider.append_message("s1", user("e"))
    return {"a": a, "b": b, "c": c, "label": label, "d": d, "e": e}


def ids(entries):
    return [entry["id"] for entry in entries]


def test_full_active_and_subtree_scopes(provider, tree):
    t = tree
    header, full = export_entries(provider, "s1")
    assert header["id"] == "s1" and header["cwd"] == "/w"
    assert full == provider.list_entries("s1")
    _, active = export_entries(provider, "s1", scope="active")
    assert ids(active) == ids(provider.get_active_path("s1"))
    _, at_c = export_entries(provider, "s1", scope="active", entry_id=t["c"]["id"])
    assert ids(at_c) == [t["a"]["id"], t["b"]["id"], t["c"]["id"]]
    _, sub = export_entries(provider, "s1", scope="subtree", entry_id=t["label"]["id"])
    # the path above the subtree's top, then the top and everything below it, in append order
    assert ids(sub) == [t["a"]["id"], t["b"]["id"], t["label"]["id"], t["d"]["id"], t["e"]["id"]]


def test_an_export_loads_back_with_the_same_context_everywhere(provider, tree):
    data = b"".join(export_jsonl(provider, "s1"))
    header, entries = split_header(parse_session_entries(data))
    assert header == provider.get_header("s1")
    for entry in entries:
        assert build_session_context(entries, entry["id"]) == provider.build_context("s1", entry["id"])
    lines = data.splitlines()
    assert all(orjson.loads(line) for line in lines) and len(lines) == 1 + len(entries)


def test_in_flight_entries_are_never_exported(provider, tree):
    streaming = provider.begin_in_flight_entry("s1", {"type": "message", "message": {"role": "assistant"}})
    _, full = export_entries(provider, "s1")
    assert streaming["id"] not in ids(full)
    _, active = export_entries(provider, "s1", scope="active")
    assert ids(active)[-1] == tree["e"]["id"]


def test_bad_scopes_and_unknown_entries(provider, tree):
    with pytest.raises(InvalidEntry, match="scope"):
        export_entries(provider, "s1", scope="everything")
    with pytest.raises(InvalidEntry, match="subtree"):
        export_entries(provider, "s1", scope="subtree")
    with pytest.raises(EntryNotFound, match="nope"):
        export_entries(provider, "s1", scope="active", entry_id="nope")


def test_an_empty_or_reset_session_exports_its_header_only_for_paths(provider):
    provider.create_session(session_id="e1")
    assert export_entries(provider, "e1", scope="active")[1] == []
    assert b"".join(export_jsonl(provider, "e1")).count(b"\n") == 1
