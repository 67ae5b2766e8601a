"""What an erase touches, decided without storage (``core/erasure.py``)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontree.core.erasure import (
    CONTEXT_EDIT,
    MIN_RUN,
    SUMMARY,
    TARGET,
    ErasedText,
    ErasureRule,
    select_for_erasure,
    signature,
    summarized_ids,
)
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.core.redaction import ERASED, erase_entry

SECRET = "4111 1111 1111 1111"


def entry(kind, entry_id, parent, second=0, **fields):
    return {
        "type": kind,
        "id": entry_id,
        "parentId": parent,
        "timestamp": f"2026-12-01T00:00:{second:02d}.000Z",
        **fields,
    }


def message(entry_id, parent, role, text, second=0):
    content = text if role == "user" else [{"type": "text", "text": text}]
    return entry("message", entry_id, parent, second, message={"role": role, "content": content})


def tree():
    """u1 → a1 → u2 → a2 → c1 (compaction keeping u2) → u3;
    a1 → x1 → x2 (a side branch, left with a branch summary b1 under a1)."""
    return [
        message("u1", None, "user", f"my card is {SECRET}", 1),
        message("a1", "u1", "assistant", "noted", 2),
        message("x1", "a1", "user", "side question", 3),
        message("x2", "x1", "assistant", "side answer", 4),
        entry("branch_summary", "b1", "a1", 5, fromId="x2", summary="the side branch"),
        message("u2", "b1", "user", "next", 6),
        message("a2", "u2", "assistant", "fine", 7),
        entry("compaction", "c1", "a2", 8, summary=f"user gave {SECRET}", firstKeptEntryId="u2", tokensBefore=5),
        message("u3", "c1", "user", "later", 9),
        entry("compaction", "c2", "u3", 10, summary="all of it", firstKeptEntryId="u3", tokensBefore=5),
        entry("context_edit", "e1", "c2", 11, targetId="u1", replacement={"content": "[removed by a moderator]"}),
        entry("context_edit", "e2", "e1", 12, targetId="u1", replacement={"content": f"my card is {SECRET}"}),
        entry("context_edit", "e3", "e2", 13, targetId="u3", replacement=None),
    ]


def parents(entries):
    return {e["id"]: e["parentId"] for e in entries}


def test_what_a_compaction_and_a_branch_summary_summarized():
    entries = tree()
    by_id = {e["id"]: e for e in entries}
    assert summarized_ids(by_id["c1"], parents(entries)) == {"u1", "a1", "b1"}  # before its first kept entry
    assert summarized_ids(by_id["c2"], parents(entries)) == {"u1", "a1", "b1", "u2", "a2", "c1"}
    assert summarized_ids(by_id["b1"], parents(entries)) == {"x1", "x2"}  # the branch it left
    keeps_none = entry("compaction", "c3", "u3", firstKeptEntryId=None, summary="s")
    assert summarized_ids(keeps_none, parents([*entries, keeps_none])) >= {"u1", "u3"}
    from_elsewhere = entry("branch_summary", "b2", "u3", fromId="gone", summary="s")  # a fork's copy
    assert summarized_ids(from_elsewhere, parents([*entries, from_elsewhere])) == set()


def test_an_erase_touches_the_entry_its_summaries_transitively_and_its_context_edits():
    entries = tree()
    tainted = {"u1": signature(entries[0])}
    chosen = {e["id"]: role for e, role in select_for_erasure(entries, tainted, derived=True)}
    assert chosen == {"u1": TARGET, "c1": SUMMARY, "c2": SUMMARY, "e1": CONTEXT_EDIT, "e2": CONTEXT_EDIT}
    # A side branch's entry: the branch summary that left it, and the compaction that took that summary in.
    side = {"x1": signature(entries[2])}
    assert {e["id"] for e, _ in select_for_erasure(entries, side, derived=True)} == {"x1", "b1", "c1", "c2"}
    # Scope "entry": the entry alone.
    assert [e["id"] for e, _ in select_for_erasure(entries, tainted, derived=False)] == ["u1"]


def test_a_copy_has_the_same_id_type_and_time():
    entries = tree()
    same_id_other_entry = {**entries[0], "timestamp": "2027-01-01T00:00:00.000Z"}
    assert select_for_erasure([same_id_other_entry], {"u1": signature(entries[0])}, derived=True) == []


def test_erased_text_is_found_raw_escaped_and_collapsed():
    text = ErasedText([f"my card is {SECRET}\nand my SSN is 078-05-1120"])
    assert text.scrub(f"Text to re-send: my card is {SECRET}") == f"Text to re-send: {ERASED}"
    assert text.scrub("ssn 078-05-1120?") == f"ssn{ERASED}?"
    assert ERASED in text.scrub(orjson.dumps(f"{SECRET}\nand my").decode())  # as a JSON line holds it
    assert text.scrub(f"my   card is\t{SECRET}") == f"my   card is\t{ERASED}"
    spaced = ErasedText(["ab  cd\tef gh\nij kl"])  # no run of ten characters, until whitespace is collapsed
    assert spaced.scrub("ab cd ef gh ij kl") == ERASED
    assert ErasedText(["ab cd ef gh ij kl"]).scrub("ab  cd\tef gh ij\n kl") == ERASED
    assert text.scrub("my SSN is") == "my SSN is"  # nine characters: shorter than a run
    assert text.scrub("the weather is fine today") == "the weather is fine today"
    assert not ErasedText([]).holds(SECRET) and not ErasedText(["short"]).holds("short text")


@given(st.text(min_size=MIN_RUN, max_size=60), st.text(max_size=30), st.text(max_size=30))
def test_any_run_of_the_erased_text_goes(secret, before, after):
    scrubbed = ErasedText([secret]).scrub(before + secret + after)
    assert secret not in scrubbed or secret in before + ERASED + after


def test_a_rule_cleans_lines_of_files_the_store_does_not_read():
    first = tree()[0]
    rule = ErasureRule({"u1": signature(first)}, ErasedText([f"my card is {SECRET}"]))
    assert orjson.loads(rule.erase_line(serialize_line(first))) == erase_entry(first)
    assert rule.erase_line(serialize_line({**first, "timestamp": "other"})) is None  # another entry, same id
    v1 = {"type": "message", "timestamp": "x", "message": {"role": "user", "content": f"my card is {SECRET}!"}}
    assert SECRET not in rule.erase_line(serialize_line(v1)).decode()  # no id: by its text
    header = serialize_line({"type": "session", "id": "u1", "cwd": f"my card is {SECRET}"})
    assert rule.erase_line(header) is None  # a header is not an entry
    torn = f'{{"type":"message","id":"u1","message":{{"content":"my card is {SECRET[:9]}'.encode()
    assert SECRET[:9].encode() not in rule.erase_line(torn)
    assert rule.erase_line(b"\n") is None and rule.erase_line(b"garbage but harmless\n") is None


@pytest.mark.parametrize("kept", [None, 5, "short", ["a"], {"k": "v"}])
def test_values_beside_the_tree_keep_what_holds_no_erased_text(kept):
    rule = ErasureRule({}, ErasedText([SECRET + " end"]))
    assert rule.scrub_value(kept, {}) is kept


def test_values_beside_the_tree_lose_erased_entries_and_quotes():
    first = tree()[0]
    rule = ErasureRule({"u1": signature(first)}, ErasedText([f"my card is {SECRET}"]))
    answer = {"entry": first, "editor_text": f"my card is {SECRET}", "n": 3}
    scrubbed = rule.scrub_value(answer, {"u1": signature(first)})
    assert scrubbed == {"entry": erase_entry(first), "editor_text": ERASED, "n": 3}
    assert answer["entry"] == first  # a new value, the old one untouched
