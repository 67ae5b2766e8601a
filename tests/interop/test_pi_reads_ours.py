"""We write, Pi reads: sessions made through our providers and services open
in the published Pi with a context equal to ours at every entry as leaf, the
same labels, tree and session name; the compactions we chose are the ones
Pi's ``prepareCompaction`` chooses there.

Every scenario runs on both providers: the ``file`` provider's own JSONL file
is what Pi opens; the ``mysql`` provider's session is exported (header +
entries, as the export writes them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.entries import resolve_session_name
from sessiontree.core.path import build_tree
from sessiontree.providers import file_sidecar
from sessiontree.providers.file_provider import FileSessionTreeProvider
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider
from sessiontree.services import compact_session, fork_session, navigate_tree

from .messages import assistant, bash, image, system, text, tool_result, user
from .pi_scenarios import UNICODE
from .views import labels_view, tree_view, write_session_file

pytestmark = pytest.mark.django_db

Builder = Callable[[Any, str], list[str]]  # builds a session, returns extra session ids (forks) to check


def tools_turn(p: Any, sid: str, index: int, big: int = 20) -> None:
    p.append_message(sid, user(f"Fix module {index}"))
    call = assistant(
        f"Reading {index}",
        tools=[("read", {"path": f"m{index}.py"}), ("write", {"path": f"out{index}.py", "content": "x"})],
        thinking="think first",
        tokens=3000 + 200 * index,
    )
    p.append_message(sid, call)
    p.append_message(sid, tool_result(call, f"line {index}\n" * big))
    p.append_message(sid, tool_result(call, "written", index=1))
    p.append_message(sid, assistant(f"Done with {index}.", tokens=3500 + 200 * index))


def every_entry_type(p: Any, sid: str) -> list[str]:
    p.append_thinking_level_change(sid, "medium")
    p.append_model_change(sid, "anthropic", "claude-opus-4-5")
    first = p.append_message(sid, user("Start"))
    answer = p.append_message(sid, assistant("Started.", tokens=800))
    p.append_label_change(sid, first["id"], "start")
    p.append_label_change(sid, answer["id"], "tmp")
    p.append_label_change(sid, answer["id"], None)
    p.append_session_info(sid, "Our\nsession")
    p.append_custom_entry(sid, "ext", {"state": [1, 2, {"deep": None}]})
    note = p.append_custom_message(sid, "note", "a note", display=True)
    p.append_custom_message(sid, "note", [text("blocks"), image()], display=False, details={"k": "v"})
    p.append_usage(
        sid, "cache_warm", "anthropic", "claude-opus-4-5", {"input": 0, "cacheRead": 900, "totalTokens": 900}
    )
    tools_turn(p, sid, 1, big=500)
    p.append_message(sid, bash("make", "ok"))
    p.append_message(sid, bash("whoami", "root", exclude=True))
    p.append_context_edit(sid, answer["id"], {"content": "edited start"})
    p.append_context_edit(sid, note["id"], None)
    p.append_message(sid, user(UNICODE))
    p.append_message(sid, assistant("🚀 " * 50, tokens=9000))
    p.append_session_info(sid, "")
    return []


def navigation(p: Any, sid: str) -> list[str]:
    q1 = p.append_message(sid, user("Plan"))
    a1 = p.append_message(sid, assistant("A plan.", tokens=1000))
    p.append_message(sid, user("Try A"))
    a2 = p.append_message(sid, assistant("A half works", tools=[("read", {"path": "a.txt"})], tokens=1500))
    p.append_message(sid, tool_result(a2["message"], "contents of a"))
    navigate_tree(
        provider=p, session_id=sid, target_id=a1["id"], actor="system", channel="internal"
    )  # without a summary
    p.append_message(sid, user("Try B"))
    b = p.append_message(sid, assistant("B works", tokens=1800))
    navigate_tree(
        provider=p,
        session_id=sid,
        target_id=a2["id"],
        summarize=True,
        label="back to A",
        actor="system",
        channel="internal",
    )  # with a summary
    p.append_message(sid, user("Continue A"))
    navigate_tree(
        provider=p, session_id=sid, target_id=q1["id"], summarize=True, actor="system", channel="internal"
    )  # to the root user message: before the root
    p.append_message(sid, user("A new root"))
    p.append_message(sid, assistant("Rooted.", tokens=300))
    p.reset_leaf(sid)
    p.append_message(sid, user("Yet another root"))
    navigate_tree(
        provider=p,
        session_id=sid,
        target_id=b["id"],
        summarize=False,
        label="B result",
        actor="system",
        channel="internal",
    )
    p.append_label_change(sid, b["id"], "")
    p.append_message(sid, user("After B"))
    return []


def compactions(p: Any, sid: str) -> list[str]:
    p.append_message(sid, system("", sections={"preamble": "You help.", "cwd": "/srv"}, added=["read", "write"]))
    for index in range(1, 5):
        tools_turn(p, sid, index, big=300)
    assert (
        compact_session(
            provider=p,
            session_id=sid,
            settings=CompactionSettings(keep_recent_tokens=400),
            actor="system",
            channel="internal",
        )
        is not None
    )
    p.append_message(sid, system("More rules.", sections={"cwd": None}, removed=["write"]))
    for index in range(5, 8):
        tools_turn(p, sid, index, big=300)
    assert (
        compact_session(
            provider=p,
            session_id=sid,
            settings=CompactionSettings(keep_recent_tokens=120),
            actor="system",
            channel="internal",
        )
        is not None
    )
    kept = p.append_message(sid, assistant("after", tokens=20000))
    p.append_context_edit(sid, kept["id"], None)
    tools_turn(p, sid, 8)
    assert (
        compact_session(
            provider=p,
            session_id=sid,
            settings=CompactionSettings(keep_recent_tokens=1),
            actor="system",
            channel="internal",
        )
        is not None
    )
    p.append_compaction(sid, summary="retain none", first_kept_entry_id=None, tokens_before=5)
    p.append_message(sid, user("the end"))
    return []


def forks(p: Any, sid: str) -> list[str]:
    r = p.append_message(sid, user("Root"))
    p.append_label_change(sid, r["id"], "root label")
    p.append_message(sid, assistant("root answer", tokens=400))
    s = p.append_message(sid, user("Second"))
    p.append_label_change(sid, s["id"], "second")
    p.append_message(sid, assistant("second answer", tokens=900))
    tools_turn(p, sid, 1)
    compact_session(
        provider=p,
        session_id=sid,
        settings=CompactionSettings(keep_recent_tokens=50),
        actor="system",
        channel="internal",
    )
    t = p.append_message(sid, user("Third"))
    p.append_message(sid, assistant("third answer", tokens=1200))
    before = fork_session(
        provider=p, session_id=sid, entry_id=t["id"], position="before", actor="system", channel="internal"
    )
    at = fork_session(provider=p, session_id=sid, entry_id=s["id"], position="at", actor="system", channel="internal")
    return [before["session_id"], at["session_id"]]


def unicode_and_large(p: Any, sid: str) -> list[str]:
    p.append_message(sid, user([text(UNICODE * 3), image()]))
    call = assistant(UNICODE, tools=[("read", {"path": "日本/ファイル.md"})], tokens=5000)
    p.append_message(sid, call)
    p.append_message(sid, tool_result(call, "x" * 1999 + "😀" + "長い出力 " * 20000))
    p.append_message(sid, assistant("✅ done", tokens=60000))
    p.append_session_info(sid, "会话 🏷️")
    compact_session(
        provider=p,
        session_id=sid,
        settings=CompactionSettings(keep_recent_tokens=10),
        actor="system",
        channel="internal",
    )
    p.append_message(sid, user("tail 🧵"))
    return []


SCENARIOS: dict[str, Builder] = {
    "every_entry_type": every_entry_type,
    "navigation": navigation,
    "compactions": compactions,
    "forks": forks,
    "unicode_and_large": unicode_and_large,
}


def provider_of(kind: str) -> Any:
    return FileSessionTreeProvider() if kind == "file" else MySQLSessionTreeProvider()


def file_for_pi(provider: Any, kind: str, session_id: str, tmp_path: Path) -> Path:
    if kind == "file":
        return provider.path_for(session_id)  # Pi opens our own file
    return write_session_file(
        tmp_path / f"{session_id}.jsonl", provider.get_header(session_id), provider.list_entries(session_id)
    )


@pytest.mark.parametrize("kind", ["file", "mysql"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_pi_reads_what_we_wrote(pi, kind, scenario, tmp_path):
    provider = provider_of(kind)
    session_id = provider.create_session(cwd="/srv/project")["session_id"]
    extra = SCENARIOS[scenario](provider, session_id)
    for sid in [session_id, *extra]:
        path = file_for_pi(provider, kind, sid, tmp_path)
        entries = provider.list_entries(sid)
        answer = pi.read(path)
        assert answer["entries"] == entries
        assert answer["header"]["id"] == sid
        assert answer["name"] == resolve_session_name(entries)
        assert answer["labels"] == labels_view(entries)
        assert answer["tree"] == tree_view(build_tree(entries))
        assert answer["contexts"][0]["messages"] == []  # leaf reset before the first entry
        for leaf, context in zip(answer["leaves"][1:], answer["contexts"][1:], strict=True):
            ours = provider.build_context(sid, leaf)
            assert {"messages": ours["messages"], "thinkingLevel": ours["thinking_level"], "model": ours["model"]} == (
                context
            ), f"context at {leaf}"


@pytest.mark.parametrize("kind", ["file", "mysql"])
def test_our_compactions_cut_where_pi_would(pi, kind, tmp_path):
    provider = provider_of(kind)
    session_id = provider.create_session()["session_id"]
    compactions(provider, session_id)
    entries = provider.list_entries(session_id)
    written = [e for e in entries if e["type"] == "compaction" and e["summary"] != "retain none"]
    assert len(written) == 3
    path = file_for_pi(provider, kind, session_id, tmp_path)
    for compaction, keep in zip(written, (400, 120, 1), strict=True):
        (prep,) = pi.read(path, leaves=[compaction["parentId"]], keep=[keep])["preparations"][0]
        assert prep["firstKeptEntryId"] == compaction["firstKeptEntryId"]
        assert prep["tokensBefore"] == compaction["tokensBefore"]
        assert prep["details"] == compaction["details"]
        assert prep["previousSummary"] is None or compaction["summary"]  # an update of the previous one
    # Each carries the system prompt and tools in force, as Pi writes it.
    assert [c["systemMessage"]["toolsAdded"][0]["name"] for c in written] == ["read", "read", "read"]
    assert "write" in [tool["name"] for tool in written[0]["systemMessage"]["toolsAdded"]]
    assert "write" not in [tool["name"] for tool in written[1]["systemMessage"]["toolsAdded"]]


def test_pi_lists_a_forks_parent_session(pi, tmp_path, settings):
    """Pi's session list (its /resume picker) follows a fork's ``parentSession``
    to the parent's file: we write the file path there, as Pi does."""
    settings.SESSIONTREE_FILE_ROOT = str(tmp_path / "sessions")
    provider = FileSessionTreeProvider()
    source = provider.create_session(cwd="/srv/project")["session_id"]
    provider.append_message(source, user("Root"))
    provider.append_message(source, assistant("answer", tokens=50))
    second = provider.append_message(source, user("Second"))
    fork = fork_session(
        provider=provider, session_id=source, entry_id=second["id"], position="at", actor="interop", channel="internal"
    )
    grandchild = fork_session(
        provider=provider,
        session_id=fork["session_id"],
        entry_id=second["id"],
        position="before",
        actor="system",
        channel="internal",
    )
    # The storage's persisted indexes lie in the same folder (a hidden one): Pi lists the sessions alone.
    assert list((provider.root / file_sidecar.FOLDER).glob("*.idx"))
    listed = {info["id"]: info for info in pi.list(provider.root, cwd="/srv/project")}
    assert set(listed) == {source, fork["session_id"], grandchild["session_id"]}
    assert listed[source]["parentSessionPath"] is None
    assert listed[fork["session_id"]]["parentSessionPath"] == str(provider.path_for(source))
    assert listed[grandchild["session_id"]]["parentSessionPath"] == str(provider.path_for(fork["session_id"]))
    assert listed[fork["session_id"]]["path"] == str(provider.path_for(fork["session_id"]))
    # Our lineage resolves the path Pi wrote back to the session.
    assert provider.get_session(fork["session_id"])["parent_session_id"] == source
    assert provider.get_header(fork["session_id"])["parentSession"] == str(provider.path_for(source))
