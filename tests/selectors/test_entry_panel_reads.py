"""The entry panel and its moderation block read what they show (issue 23):
the context's segment, the end of the path, the children, the label and the
subtree under the entry, never the whole path; and they show what the whole
path says (checked against a reference computed from it), on every storage
(the memory one has none of the keyed reads: the generic fallbacks)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessiontree.core.context_builder import build_context_from_path
from sessiontree.core.path import resolve_latest_labels
from sessiontree.selectors.entry_context import PATH_TAIL, context_steps, entry_context
from sessiontree.selectors.hidden import hidden_on_branches
from tests.providers.test_history_reads import long_session

pytestmark = pytest.mark.django_db


def with_labels_and_edits(count: int) -> list[dict]:
    """``long_session`` plus labels (one cleared, one changed) and a context edit of a kept message."""
    entries = long_session(count)
    last = entries[-1]["id"]
    kept = entries[-5]["id"]
    extra = [
        {"type": "label", "targetId": kept, "label": "first"},
        {"type": "label", "targetId": entries[3]["id"], "label": "gone"},
        {"type": "label", "targetId": entries[3]["id"], "label": ""},
        {"type": "label", "targetId": kept, "label": "second"},
        {"type": "context_edit", "targetId": kept, "replacement": None},
        {"type": "message", "message": {"role": "user", "content": "after the edit"}},
    ]
    for i, entry in enumerate(extra):
        entry_id = f"e{i:07x}"
        entries.append({"id": entry_id, "parentId": last, "timestamp": "2026-04-19T00:00:00.000Z", **entry})
        last = entry_id
    return entries


def reference(provider, sid: str, entry_id: str) -> dict:
    """What the panel showed when it read the whole path (before issue 23)."""
    path = provider.get_active_path(sid, entry_id)
    everything = provider.list_entries(sid)
    context = build_context_from_path(path)
    steps, compaction_id = context_steps(path, context)
    cut = 0
    if compaction_id is not None:
        ids = [e["id"] for e in path]
        at = ids.index(compaction_id)
        first_kept = path[at].get("firstKeptEntryId")
        cut = ids.index(first_kept) if first_kept in ids[:at] else at
    leaf = provider.get_session(sid)["leaf_entry_id"]
    active = [e["id"] for e in provider.get_active_path(sid, leaf)]
    return {
        "context": context,
        "steps": [(s.entry["id"], s.status, s.message, s.compacted_by, s.tokens) for s in steps[cut:]],
        "left_out": cut + sum(1 for s in steps[cut:] if s.status == "compacted"),
        "compaction_id": compaction_id,
        "depth": len(path) - 1,
        "tail": [e["id"] for e in path][-PATH_TAIL:],
        "children": [e["id"] for e in everything if e.get("parentId") == entry_id],
        "label": resolve_latest_labels(everything).get(entry_id),
        "on_active_path": entry_id in active,
    }


def shown(detail) -> dict:
    return {
        "context": detail.context,
        "steps": [(s.entry["id"], s.status, s.message, s.compacted_by, s.tokens) for s in detail.steps],
        "left_out": detail.left_out,
        "compaction_id": detail.compaction_id,
        "depth": detail.depth,
        "tail": detail.path_tail,
        "children": detail.children,
        "label": detail.label,
        "on_active_path": detail.on_active_path,
    }


def test_the_panel_shows_what_the_whole_path_says(any_provider):
    provider = any_provider
    # Longer than a recursive statement's default 1,000 steps on MariaDB
    # (beyond them it stops silently): the walks must still reach the leaf.
    entries = with_labels_and_edits(2500)
    provider.create_session(session_id="p", entries=entries)
    leaf = provider.get_session("p")["leaf_entry_id"]
    ids = [e["id"] for e in entries]
    # the leaf, a labelled message under a context edit, a compaction, the
    # entry it keeps from, a side entry, a branch point, the root, a label
    for entry_id in (leaf, entries[-7]["id"], ids[2000], ids[1860], ids[75], ids[74], ids[0], ids[3], "e0000000"):
        assert shown(entry_context(provider, "p", entry_id)) == reference(provider, "p", entry_id), entry_id
    detail = entry_context(provider, "p", entries[-11]["id"])
    assert detail.label is not None and detail.label["label"] == "second"


def test_a_streaming_entry_reads_its_whole_path(any_provider):
    provider = any_provider
    provider.create_session(session_id="s", entries=long_session(450))
    started = provider.begin_in_flight_entry("s", {"type": "message", "message": {"role": "user", "content": "…"}})
    assert shown(entry_context(provider, "s", started["id"])) == reference(provider, "s", started["id"])


def test_hiding_per_branch_reads_only_below_the_message(any_provider):
    provider = any_provider
    entries = with_labels_and_edits(900)
    target = entries[-11]["id"]
    # a branch under the message that left before the edit
    entries.append(
        {
            "id": "side0001",
            "parentId": target,
            "timestamp": "2026-04-19T00:00:00.000Z",
            "type": "message",
            "message": {"role": "user", "content": "elsewhere"},
        }
    )
    provider.create_session(session_id="h", entries=entries)
    hiding = hidden_on_branches(provider, "h", target)
    by_tip = {branch.tip_id: (branch.hidden, branch.edit_id) for branch in hiding.branches}
    assert by_tip == {entries[-2]["id"]: (True, "e0000004"), "side0001": (False, None)}
    assert not hidden_on_branches(provider, "h", entries[0]["id"]).hidden_count
    # The entry panel's form: no edit names the message, so no branch is read.
    unedited = hidden_on_branches(provider, "h", entries[0]["id"], branches_when_unedited=False)
    assert unedited.hideable and unedited.branches == [] and unedited.more == 0
    assert hidden_on_branches(provider, "h", target, branches_when_unedited=False).branches == hiding.branches


def test_hiding_near_the_root_of_a_long_session_finds_every_tip(any_provider):
    provider = any_provider
    entries = long_session(2500)
    early = entries[2]["id"]
    provider.create_session(session_id="r", entries=entries)
    leaf = provider.get_session("r")["leaf_entry_id"]
    edit = provider.append_entry("r", {"type": "context_edit", "targetId": early, "replacement": None})
    hiding = hidden_on_branches(provider, "r", early)
    side_tips = [e["id"] for e in entries if e["type"] == "message" and e["message"]["content"].startswith("side")]
    assert hiding.branches[0].tip_id == edit["id"] and hiding.branches[0].is_leaf and hiding.branches[0].hidden
    assert leaf != edit["id"] and len(hiding.branches) + hiding.more == 1 + len(side_tips)
    assert [b.tip_id for b in hiding.branches[1:]] == list(reversed(side_tips))[: len(hiding.branches) - 1]
    assert not any(b.hidden for b in hiding.branches[1:])


def statements(read) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as captured:
        result = read()
    return len(captured.captured_queries), result


def test_the_panel_reads_do_not_grow_with_the_history(provider):
    counts = {}
    for size in (50, 2000):
        sid = f"s{size}"
        provider.create_session(session_id=sid, entries=with_labels_and_edits(size))
        leaf = provider.get_session(sid)["leaf_entry_id"]
        panel, _ = statements(lambda sid=sid, leaf=leaf: entry_context(provider, sid, leaf))
        message = provider.get_active_path(sid)[-7]["id"]
        hiding, _ = statements(lambda sid=sid, message=message: hidden_on_branches(provider, sid, message))
        counts[size] = (panel, hiding)
    assert counts[50] == counts[2000], counts


def test_the_panel_reads_the_segment_only_on_mysql(provider, monkeypatch):
    if provider.kind != "mysql":
        pytest.skip("counts the mysql provider's decoded rows")
    from sessiontree.providers import entry_rows, mysql_provider

    entries = with_labels_and_edits(2000)
    provider.create_session(session_id="big", entries=entries)
    leaf = provider.get_session("big")["leaf_entry_id"]
    decoded = []
    real_decode = entry_rows.decode_row
    monkeypatch.setattr(entry_rows, "decode_row", lambda row: decoded.append(1) or real_decode(row))

    def no_skeleton(*args, **kwargs):
        raise AssertionError("the whole skeleton was read")

    monkeypatch.setattr(mysql_provider, "_skeleton", no_skeleton)
    detail = entry_context(provider, "big", leaf)
    hiding = hidden_on_branches(provider, "big", entries[-11]["id"])
    # The last compaction (1600) keeps from 1460: ~550 entries, never the whole history.
    assert len(decoded) < 700
    assert detail.depth > 1900 and detail.left_out > 1400 and len(detail.path_tail) == PATH_TAIL
    assert hiding.hidden_count == 1


def test_walks_up_and_down_cross_the_statement_limit(any_provider):
    """``path_ids`` and ``subtree`` at and around the mysql provider's steps per statement."""
    from sessiontree.providers import keyed_reads

    provider = any_provider
    entries = long_session(2100)
    provider.create_session(session_id="w", entries=entries)
    leaf = provider.get_session("w")["leaf_entry_id"]
    path = [e["id"] for e in provider.get_active_path("w")]
    with provider.read("w") as view:
        for steps in (0, 1, 899, 900, 901, 902, 1801, 1802, len(path) - 1, len(path), 10_000):
            assert keyed_reads.path_ids(view, leaf, steps) == path[-(steps + 1) :], steps
        below = keyed_reads.subtree(view, path[1])
    expected = {e["id"]: e["parentId"] for e in entries if e["id"] != path[0]}
    assert below == expected and list(below) == list(expected)


def test_custom_entries_of_some_types_are_those_of_every_custom_entry(any_provider):
    from sessiontree.providers import keyed_reads

    provider = any_provider
    entries = long_session(300)
    last = entries[-1]["id"]
    for i, (kind, custom_type) in enumerate(
        [("custom", "x-a"), ("custom_message", "x-a"), ("custom", "x-b"), ("custom", "x-a"), ("custom", "x-c")]
    ):
        entry = {"id": f"c{i:07x}", "parentId": last, "timestamp": "2026-04-19T00:00:00.000Z", "type": kind}
        entry["customType"] = custom_type
        entry.update({"data": {"n": i}} if kind == "custom" else {"content": "note", "display": True})
        entries.append(entry)
        last = entry["id"]
    provider.create_session(session_id="c", entries=entries)
    with provider.read("c") as view:
        every = view.all_entries(types=("custom",))
        for wanted in (("x-a",), ("x-a", "x-c"), ("x-none",), ()):
            expected = [e for e in every if e.get("customType") in wanted]
            assert keyed_reads.custom_entries(view, wanted) == expected, wanted
    assert [e["id"] for e in expected] == [] and len(every) == 4
