"""fork_session over every provider: "before" and "at", lineage, labels on the
path, nothing after the fork point."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sessiontree.core.errors import EntryNotFound, InvalidEntry, SessionNotFound
from sessiontree.core.path import resolve_latest_labels
from sessiontree.services import fork_session

from .session_builders import assistant, user


@pytest.fixture
def source(provider):
    """
    u1 ─ a1 ─ label(a1 "checkpoint") ─ u2 ─ a2 ─ u3 ─ a3   ← leaf
                                        └─ (side branch) u4 ─ a4, with label(u4 "side")
    """
    provider.create_session(session_id="src", cwd="/srv/app")
    s = SimpleNamespace(provider=provider)
    s.u1 = provider.append_message("src", user("one"))
    s.a1 = provider.append_message("src", assistant("first answer"))
    s.label_a1 = provider.append_label_change("src", s.a1["id"], "checkpoint")
    s.u2 = provider.append_message("src", user("two"))
    s.a2 = provider.append_message("src", assistant("second answer"))
    s.u4 = provider.append_message("src", user("side"))
    s.a4 = provider.append_message("src", assistant("side answer"))
    provider.append_label_change("src", s.u4["id"], "side")
    provider.switch_leaf("src", s.a2["id"])
    s.u3 = provider.append_message("src", user("three"))
    s.a3 = provider.append_message("src", assistant("third answer"))
    return s


def ids(entries) -> list[str]:
    return [e["id"] for e in entries]


def assert_is_child_of_source(provider, fork) -> None:
    assert fork["parent_session_id"] == "src"
    assert provider.get_session(fork["session_id"])["parent_session_id"] == "src"
    # The header names the parent as Pi does: a file session by its file's
    # path (Pi's session list and /resume follow it), a database one by id.
    expected = provider.get_session("src")["session_file"] if provider.kind == "file" else "src"
    assert provider.get_header(fork["session_id"])["parentSession"] == expected


def test_fork_before_a_user_message_forks_at_its_parent(source):
    p = source.provider
    source_before = p.list_entries("src")
    fork = fork_session(
        provider=p, session_id="src", entry_id=source.u3["id"], position="before", actor="system", channel="internal"
    )
    assert_is_child_of_source(p, fork)
    assert fork["session_id"] != "src"

    copied = p.list_entries(fork["session_id"])
    messages = [e for e in copied if e["type"] == "message"]
    # The path up to u3's parent; u3, a3 and the side branch are absent.
    assert ids(messages) == [source.u1["id"], source.a1["id"], source.u2["id"], source.a2["id"]]
    assert not {source.u3["id"], source.a3["id"], source.u4["id"], source.a4["id"]} & set(ids(copied))
    # The label entry on the path is re-created, fresh, at the end; the side branch's is not.
    assert source.label_a1["id"] not in ids(copied)
    labels = resolve_latest_labels(copied)
    assert {target: info["label"] for target, info in labels.items()} == {source.a1["id"]: "checkpoint"}
    # The fork's context is the source's context at the fork point.
    assert p.build_context(fork["session_id"])["messages"] == p.build_context("src", source.a2["id"])["messages"]
    assert p.list_entries("src") == source_before


def test_fork_before_the_root_user_message_is_an_empty_child(source):
    p = source.provider
    fork = fork_session(
        provider=p, session_id="src", entry_id=source.u1["id"], actor="system", channel="internal"
    )  # "before" is the default, as in Pi
    assert_is_child_of_source(p, fork)
    assert p.list_entries(fork["session_id"]) == []
    assert fork["leaf_entry_id"] is None and fork["root_entry_id"] is None
    assert p.append_message(fork["session_id"], user("one, again"))["parentId"] is None


def test_fork_at_copies_up_to_and_including_the_entry(source):
    p = source.provider
    fork = fork_session(
        provider=p,
        session_id="src",
        entry_id=source.u3["id"],
        position="at",
        new_session_id="fork-at",
        actor="system",
        channel="internal",
    )
    assert fork["session_id"] == "fork-at"
    assert_is_child_of_source(p, fork)
    messages = [e for e in p.list_entries("fork-at") if e["type"] == "message"]
    assert ids(messages) == [source.u1["id"], source.a1["id"], source.u2["id"], source.a2["id"], source.u3["id"]]
    assert source.a3["id"] not in ids(p.list_entries("fork-at"))
    assert p.build_context("fork-at")["messages"] == p.build_context("src", source.u3["id"])["messages"]


def test_fork_at_an_assistant_message(source):
    p = source.provider
    fork = fork_session(
        provider=p, session_id="src", entry_id=source.a4["id"], position="at", actor="system", channel="internal"
    )
    copied = p.list_entries(fork["session_id"])
    assert ids([e for e in copied if e["type"] == "message"]) == [
        source.u1["id"],
        source.a1["id"],
        source.u2["id"],
        source.a2["id"],
        source.u4["id"],
        source.a4["id"],
    ]
    labels = {target: info["label"] for target, info in resolve_latest_labels(copied).items()}
    assert labels == {source.a1["id"]: "checkpoint", source.u4["id"]: "side"}


def test_fork_before_a_non_user_entry_is_refused(source):
    p = source.provider
    sessions_before = p.get_session("src")
    with pytest.raises(InvalidEntry, match=rf"{source.a2['id']}.*'assistant' message.*user message"):
        fork_session(
            provider=p,
            session_id="src",
            entry_id=source.a2["id"],
            position="before",
            actor="system",
            channel="internal",
        )
    with pytest.raises(InvalidEntry, match="'label' entry"):
        fork_session(provider=p, session_id="src", entry_id=source.label_a1["id"], actor="system", channel="internal")
    assert p.get_session("src") == sessions_before


def test_invalid_position_is_refused(source):
    with pytest.raises(InvalidEntry, match="Invalid fork position 'after'"):
        fork_session(
            provider=source.provider,
            session_id="src",
            entry_id=source.u2["id"],
            position="after",
            actor="system",
            channel="internal",
        )


def test_unknown_entry_or_session(source):
    with pytest.raises(EntryNotFound, match="zzzz0000"):
        fork_session(
            provider=source.provider,
            session_id="src",
            entry_id="zzzz0000",
            position="at",
            actor="system",
            channel="internal",
        )
    with pytest.raises(SessionNotFound):
        fork_session(
            provider=source.provider, session_id="missing", entry_id=source.u2["id"], actor="system", channel="internal"
        )


def test_fork_of_a_fork_keeps_the_lineage(source):
    p = source.provider
    child = fork_session(
        provider=p,
        session_id="src",
        entry_id=source.a2["id"],
        position="at",
        new_session_id="child",
        actor="system",
        channel="internal",
    )
    grandchild = fork_session(
        provider=p,
        session_id="child",
        entry_id=source.u2["id"],
        position="before",
        new_session_id="grandchild",
        actor="system",
        channel="internal",
    )
    assert grandchild["parent_session_id"] == "child"
    assert ids([e for e in p.list_entries("grandchild") if e["type"] == "message"]) == [
        source.u1["id"],
        source.a1["id"],
    ]
    assert child["parent_session_id"] == "src"


def test_fork_before_a_message_whose_parent_is_missing_is_an_empty_child(provider):
    # Pi's own forks leave entries whose parent is not in the file; every path
    # walk treats such an entry as a root, and so does a fork "before" it.
    orphan = {
        "type": "message",
        "id": "aaaa0001",
        "parentId": "gone0000",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": user("left over"),
    }
    reply = {
        "type": "message",
        "id": "aaaa0002",
        "parentId": "aaaa0001",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": assistant("ok"),
    }
    provider.create_session(session_id="broken", entries=[orphan, reply])
    fork = fork_session(provider=provider, session_id="broken", entry_id="aaaa0001", actor="system", channel="internal")
    assert fork["parent_session_id"] == "broken"
    assert provider.list_entries(fork["session_id"]) == []
