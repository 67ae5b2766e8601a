"""What text an entry holds, and erasing it in place (pure kernel)."""

from __future__ import annotations

import copy

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.core.context_builder import build_session_context
from sessiontree.core.redaction import ERASED, ERASED_BLOCK, erase_entry, is_erased
from sessiontree.core.text import entry_pieces, entry_role, entry_text

SECRET = "4111 1111 1111 1111"


def base(kind: str, entry_id: str, parent: str | None, **fields):
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": "2026-12-01T00:00:00.000Z", **fields}


def assistant_with_tool_call():
    return base(
        "message",
        "a1",
        "u1",
        message={
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"the card is {SECRET}", "thinkingSignature": "sig"},
                {"type": "text", "text": f"Charging {SECRET}"},
                {"type": "toolCall", "id": "call-1", "name": "charge", "arguments": {"card": SECRET}},
            ],
            "provider": "p",
            "model": "m",
            "usage": {"input": 5, "output": 7},
            "stopReason": "toolUse",
            "timestamp": 2,
        },
    )


def tool_result():
    return base(
        "message",
        "t1",
        "a1",
        message={
            "role": "toolResult",
            "toolCallId": "call-1",
            "toolName": "charge",
            "content": [
                {"type": "text", "text": f"charged {SECRET}"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            ],
            "details": {"card": SECRET},
            "isError": False,
            "timestamp": 3,
        },
    )


ENTRIES = [
    base("message", "u1", None, message={"role": "user", "content": f"my card is {SECRET}", "timestamp": 1}),
    assistant_with_tool_call(),
    tool_result(),
    base(
        "message",
        "b1",
        "t1",
        message={"role": "bashExecution", "command": f"echo {SECRET}", "output": SECRET, "exitCode": 0},
    ),
    base(
        "custom_message",
        "c1",
        "b1",
        customType="note",
        content=[{"type": "text", "text": SECRET}],
        display=True,
        details={"x": SECRET},
    ),
    base("custom", "d1", "c1", customType="ext", data={"card": SECRET}),
    base(
        "compaction",
        "k1",
        "d1",
        summary=f"The user gave {SECRET}.",
        firstKeptEntryId="t1",
        tokensBefore=99,
        details={"readFiles": ["/a"]},
    ),
    base("branch_summary", "s1", "k1", fromId="u1", summary=f"Tried {SECRET}"),
    base("context_edit", "e1", "s1", targetId="u1", replacement={"content": f"original: {SECRET}"}),
    base("label", "l1", "e1", targetId="u1", label="checked"),
]


def test_entry_text_holds_every_piece_of_conversation():
    texts = {entry["id"]: entry_text(entry) for entry in ENTRIES}
    for entry_id in ("u1", "a1", "t1", "b1", "c1", "k1", "s1", "e1"):
        assert SECRET in texts[entry_id], entry_id
    assert "charge" in texts["a1"]  # the tool's name is text the model wrote
    assert texts["d1"] == "" and texts["l1"] == ""  # custom data and labels are not conversation
    assert entry_role(ENTRIES[2]) == "toolResult" and entry_role(ENTRIES[5]) is None


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_an_erased_entry_keeps_its_place_and_loses_its_text(entry):
    original = copy.deepcopy(entry)
    erased = erase_entry(entry)
    assert entry == original  # a copy: the input is untouched
    assert {k: erased[k] for k in ("type", "id", "parentId", "timestamp")} == {
        k: entry[k] for k in ("type", "id", "parentId", "timestamp")
    }
    if entry["type"] != "label":
        assert SECRET not in orjson.dumps(erased).decode()
    assert is_erased(erased) and erase_entry(erased) == erased  # erasing twice changes nothing


def test_erased_messages_keep_roles_and_the_ids_pairing_calls_with_results():
    assistant = erase_entry(assistant_with_tool_call())["message"]
    assert assistant["role"] == "assistant" and assistant["usage"] == {"input": 5, "output": 7}
    assert assistant["content"] == [
        {"type": "thinking", "thinking": ERASED},
        ERASED_BLOCK,
        {"type": "toolCall", "id": "call-1", "name": "charge", "arguments": None},
    ]
    result = erase_entry(tool_result())["message"]
    assert (result["toolCallId"], result["toolName"], result["details"]) == ("call-1", "charge", None)
    assert result["content"] == [ERASED_BLOCK]  # text and image: one marker
    user = erase_entry(ENTRIES[0])["message"]
    assert user == {"role": "user", "content": ERASED, "timestamp": 1}


def test_a_context_built_through_erased_entries_is_the_same_shape_without_the_text():
    path = ENTRIES[:3]
    before = build_session_context(path)
    after = build_session_context([erase_entry(entry) for entry in path])
    assert after["source_entry_ids"] == before["source_entry_ids"]
    assert [m["role"] for m in after["messages"]] == [m["role"] for m in before["messages"]]
    assert SECRET not in orjson.dumps(after).decode()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["message", "custom", "custom_message", "compaction", "branch_summary", "weird_kind"]),
    extra=st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda k: k not in ("type", "id", "parentId", "timestamp")),
        json_values,
        max_size=4,
    ),
)
def test_erasing_is_idempotent_and_keeps_the_base_fields_for_any_entry(kind, extra):
    entry = {**base(kind, "x1", None), **extra}  # extra may hold any key, "parent" too
    erased = erase_entry(entry)
    assert erase_entry(erased) == erased
    assert (erased["type"], erased["id"], erased["parentId"]) == (kind, "x1", None)
    strings = [v for v in orjson.loads(orjson.dumps(erased)).values() if isinstance(v, str)]
    assert all(
        v in (kind, "x1", entry["timestamp"], ERASED) or k in ("customType",)
        for k, v in zip(erased, strings, strict=False)
    )


@settings(max_examples=300, deadline=None)
@given(
    role=st.sampled_from(
        ["user", "assistant", "toolResult", "bashExecution", "branchSummary", "compactionSummary", "custom", None]
    ),
    content=st.one_of(
        st.text(max_size=12),
        st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=6)}), max_size=2),
        json_values,
    ),
    extra=st.dictionaries(
        st.sampled_from(["errorMessage", "summary", "command", "output"]),
        st.one_of(st.text(max_size=6), st.none(), st.integers()),
        max_size=3,
    ),
)
def test_a_message_s_text_is_its_pieces_joined_whatever_its_shape(role, content, extra):
    """``entry_text``'s short way for a message of one string (what every
    append's search row is built from) gives what the pieces give."""
    message = {"content": content, **extra} if role is None else {"role": role, "content": content, **extra}
    entry = {**base("message", "m1", None), "message": message}
    assert entry_text(entry) == "\n".join(entry_pieces(entry))
