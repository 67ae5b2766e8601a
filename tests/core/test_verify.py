"""The kernel's tree checks (sessiontree.core.verify): pure, no database."""

from __future__ import annotations

import orjson

from sessiontree.core.verify import (
    MetaCounts,
    file_problems,
    meta_problems,
    scan_session_bytes,
    sorted_problems,
    tree_problems,
)
from tests.sync import pi_folder as pi


def codes(problems) -> list[tuple[str, str | None]]:
    return [(p.code, p.entry_id) for p in problems]


def test_a_healthy_branched_session_has_no_problem():
    entries = pi.branched_entries()
    assert tree_problems(entries, leaf_entry_id="s0000002") == []
    assert meta_problems(MetaCounts(11, 2, 0, "s0000002"), entries) == []


def test_dangling_parents_duplicates_and_missing_ids():
    entries = pi.branched_entries()[:4]
    entries[2] = {**entries[2], "parentId": "gone0001"}
    entries.append({**entries[0]})
    entries.append({"type": "custom", "customType": "x"})
    problems = tree_problems(entries)
    assert ("dangling_parent", "a0000001") in codes(problems)
    assert ("duplicate_id", "m0000001") in codes(problems)
    assert ("missing_id", None) in codes(problems)
    dangling = next(p for p in problems if p.code == "dangling_parent")
    assert dangling.message == "entry a0000001 names parent gone0001, which is not in the session (read as a root)"


def test_a_cycle_is_reported_once():
    entries = [
        {"type": "custom", "customType": "x", "id": "aaaa0001", "parentId": "aaaa0003"},
        {"type": "custom", "customType": "x", "id": "aaaa0002", "parentId": "aaaa0001"},
        {"type": "custom", "customType": "x", "id": "aaaa0003", "parentId": "aaaa0002"},
        {"type": "custom", "customType": "x", "id": "aaaa0004", "parentId": "aaaa0003"},
    ]
    problems = tree_problems(entries)
    assert codes(problems) == [("cycle", "aaaa0001")]
    assert "aaaa0001 -> aaaa0003 -> aaaa0002" in problems[0].message


def test_compaction_labels_and_tool_results():
    entries = pi.branched_entries()
    entries.append(
        {
            "type": "compaction",
            "id": "c0000001",
            "parentId": "s0000002",
            "summary": "s",
            "firstKeptEntryId": "a0000002",
            "tokensBefore": 1,
        }  # a0000002 is on the other branch
    )
    entries.append(
        {
            "type": "compaction",
            "id": "c0000002",
            "parentId": "c0000001",
            "summary": "s",
            "firstKeptEntryId": "u0000002",
            "tokensBefore": 1,
        }  # on its path: fine
    )
    entries.append({"type": "label", "id": "l0000009", "parentId": "c0000002", "targetId": "nope0001", "label": "x"})
    entries.append(pi.tool_result("t0000009", "l0000009", "call_404"))  # no call before it
    entries.append(pi.assistant("a0000009", "t0000009", "calls", calls=("call_9",)))
    entries.append(pi.tool_result("t0000010", "a0000009", "call_9"))
    entries.append(pi.tool_result("t0000011", "t0000010", "call_9"))  # a second result after the first: fine
    entries.append(pi.user("u0000009", "t0000011", "next"))
    entries.append(pi.tool_result("t0000012", "u0000009", "call_9"))  # a user message in between: orphan
    problems = tree_problems(entries, leaf_entry_id="zzzz0000")
    assert codes(problems) == [
        ("first_kept_not_on_path", "c0000001"),
        ("label_target_missing", "l0000009"),
        ("orphan_tool_result", "t0000009"),
        ("orphan_tool_result", "t0000012"),
        ("leaf_missing", "zzzz0000"),
    ]


def test_meta_counts_and_leaf():
    entries = pi.branched_entries()
    problems = meta_problems(MetaCounts(10, 1, 0, "gone0001"), entries)
    assert [p.code for p in problems] == ["meta_mismatch", "leaf_missing"]
    assert problems[0].message == ("the meta row says entry_count 10 (entries say 11), branch_count 1 (entries say 2)")


def test_scan_sees_malformed_and_torn_lines_like_pi_skips_them():
    entries = pi.branched_entries()[:3]
    data = pi.lines([pi.header("s"), entries[0]]) + b"\n{broken\n" + b"42\n" + pi.lines(entries[1:]) + b'{"type":"mes'
    scanned = scan_session_bytes(data)
    assert scanned.header == pi.header("s")
    assert scanned.entries == entries
    assert scanned.malformed_lines == [4, 5]
    assert scanned.torn_bytes == len(b'{"type":"mes')
    assert [p.code for p in sorted_problems(file_problems(scanned))] == [
        "torn_last_line",
        "malformed_line",
        "malformed_line",
    ]


def test_scan_of_a_headerless_or_empty_file():
    assert scan_session_bytes(b"").header is None
    headerless = scan_session_bytes(orjson.dumps(pi.branched_entries()[0]) + b"\n")
    assert headerless.header is None and headerless.entries == []
    assert [p.code for p in file_problems(headerless)] == ["not_a_session"]
    assert scan_session_bytes(pi.lines([pi.header("s")]) + b"  \n").torn_bytes == 0


def test_the_real_pi_fixtures_are_clean():
    from sessiontree.core.pi_session_file import migrate_to_current_version, parse_session_entries
    from tests.pi_fixtures import fixture_path

    for name in ("large-session.jsonl", "before-compaction.jsonl"):
        objs = parse_session_entries(fixture_path(name).read_bytes())
        migrate_to_current_version(objs)
        assert tree_problems(objs[1:]) == [], name
