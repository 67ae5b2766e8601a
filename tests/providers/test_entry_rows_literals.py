"""``entry_rows.payload_literals``' one-pass encoder writes exactly what
``encode_entry`` + ``_row_literal`` write, and refuses what they refuse."""

from __future__ import annotations

import pytest

from sessiontree.core.errors import InvalidEntry
from sessiontree.providers import entry_rows as rows


def literal(value: bytes) -> bytes:  # any escaping will do: both paths must call it on the same bytes
    return b"<" + value.hex().encode() + b">"


def reference(entry: dict) -> bytes:
    return rows._row_literal(rows._payload_values(rows.encode_entry(entry)), literal)


class Text(str):
    pass


class Number(int):
    pass


ENTRIES = [
    {"type": "message", "id": "a", "parentId": None, "timestamp": "t", "message": {"role": "user", "content": "é😀"}},
    {"type": "message", "id": "b", "parentId": "a", "timestamp": "t", "message": None, "odd": [1, {"x": None}]},
    {
        "type": "compaction",
        "id": "c",
        "parentId": "b",
        "timestamp": "t",
        "summary": "s",
        "firstKeptEntryId": "a",
        "tokensBefore": 2**63,
        "fromHook": True,
        "details": {"k": float("nan")},
    },
    {"type": "compaction", "id": "c2", "parentId": "b", "timestamp": "t", "tokensBefore": 5, "fromHook": 1},
    {"type": "compaction", "id": "c3", "parentId": None, "timestamp": None, "tokensBefore": None, "fromHook": None},
    {"type": "label", "id": "d", "parentId": "c", "timestamp": "t", "targetId": "x" * 300, "label": None},
    {"type": "session_info", "id": "e", "parentId": "d", "timestamp": 5, "name": ""},
    {"type": "model_change", "id": "f", "parentId": "e", "timestamp": "t", "provider": 3, "modelId": "m"},
    {"type": "brand_new", "id": "g", "parentId": "f", "timestamp": "t", "provider": "p", "data": {"a": 1}},
    {"type": {"not": "a string"}, "id": "h", "parentId": "g", "timestamp": "t"},
    {"id": "i", "parentId": "h"},
    {"type": None, "id": None, "parentId": 7, "timestamp": "t", "sourceRuntime": "pi"},
    {
        "type": "custom_message",
        "id": "j",
        "parentId": "i",
        "timestamp": "t",
        "customType": "c",
        "content": "x",
        "display": False,
        "details": None,
    },
    {"type": "usage", "id": "k", "parentId": "j", "timestamp": "t", "provider": "p", "model": "m", "tokens": 1},
    {"type": "context_edit", "id": "l", "parentId": "k", "timestamp": "t", "targetId": "a", "replacement": None},
]


@pytest.mark.parametrize("entry", ENTRIES, ids=[str(i) for i in range(len(ENTRIES))])
def test_the_one_pass_encoder_writes_what_encode_entry_writes(entry):
    assert rows._payload_literal(entry, literal) == reference(entry)


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "message", "id": "a", "parentId": None, "timestamp": "t", "message": {1, 2}},
        {"type": "message", "id": "a", "parentId": None, "timestamp": "lone \ud800", "message": {}},
        {"type": "message", "id": "a", "parentId": None, "timestamp": "t", "odd": 2**70},
        {"type": "message", "id": "a", "parentId": None, "timestamp": "t", 1: "int key"},
    ],
    ids=["set", "surrogate", "bigint", "int-key"],
)
def test_the_one_pass_encoder_refuses_what_encode_entry_refuses(entry):
    with pytest.raises(InvalidEntry) as ours:
        rows._payload_literal(entry, literal)
    with pytest.raises(InvalidEntry) as theirs:
        reference(entry)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("value", [Text("sub"), Number(3)], ids=["str-subclass", "int-subclass"])
def test_subclasses_are_left_to_the_general_path(value):
    entry = {"type": "compaction", "id": "a", "parentId": None, "timestamp": "t", "summary": "s", "tokensBefore": 1}
    entry["summary" if isinstance(value, str) else "tokensBefore"] = value
    with pytest.raises(rows._NotInlinable):
        rows._payload_literal(entry, literal)
