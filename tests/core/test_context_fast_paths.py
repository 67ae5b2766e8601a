"""The fast way to a context answers what the reference definitions answer.

``build_context_from_path`` takes message entries' messages in one pass and
reads the settings from the end of the path; it is compared here with the
plain definitions on random paths (any entry type, odd contents, escaped
ids). ``session_trees`` also feeds the file storage's property test
(tests/providers/test_file_provider_properties.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.core.context_builder import (
    DEFAULT_THINKING_LEVEL,
    build_context_from_path,
    context_settings,
    project_path,
)
from sessiontree.core.path import get_path_to_leaf

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_settings(path):
    """The forward definition: the last word on each setting wins."""
    thinking_level = DEFAULT_THINKING_LEVEL
    model = None
    for entry in path:
        entry_type = entry.get("type")
        if entry_type == "thinking_level_change":
            thinking_level = entry.get("thinkingLevel", thinking_level)
        elif entry_type == "model_change":
            model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
        elif entry_type == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                model = {"provider": message.get("provider"), "modelId": message.get("model")}
    return thinking_level, model


def reference_context(path):
    thinking_level, model = reference_settings(path)
    messages, sources = [], []
    for entry, entry_messages in project_path(path):
        for message in entry_messages:
            messages.append(message)
            sources.append(entry["id"])
    return {"messages": messages, "thinking_level": thinking_level, "model": model, "source_entry_ids": sources}


ROLES = ["user", "assistant", "toolResult", "system", "custom", "bashExecution"]
CONTENTS = [None, "text", [], [{"type": "text", "text": "block"}]]


@st.composite
def entry_bodies(draw, earlier_ids, ancestors, odd):
    """One entry without id and parentId; ``odd``: also messages without
    content or without a message object, context edits, odd types (each
    hands the path to ``build_context_from_path``)."""
    kind = draw(
        st.sampled_from(
            [
                *["message"] * 8,
                "thinking_level_change",
                "model_change",
                *["compaction"] * 2,
                "branch_summary",
                "custom_message",
                "label",
                "custom",
                "session_info",
                *(["odd_message", "odd_type", "context_edit"] if odd else []),
            ]
        )
    )
    stamp = draw(st.sampled_from(["2026-11-01T00:00:01.250Z", "2026-11-01T00:00:01", "not a time"]))
    target = draw(st.sampled_from(earlier_ids)) if earlier_ids else "nowhere"
    if kind == "message":
        role = draw(st.sampled_from(ROLES))
        message = {"role": role, "content": draw(st.sampled_from(CONTENTS if odd else CONTENTS[1:]))}
        if odd and draw(st.booleans()):
            del message["content"]
        if role == "assistant":
            message.update(provider=draw(st.sampled_from(["p", "q"])), model=draw(st.sampled_from(["m1", "m2"])))
        return {"type": "message", "timestamp": stamp, "message": message}
    if kind == "odd_message":
        return {"type": "message", "timestamp": stamp, "message": draw(st.sampled_from([None, "text", [1], 5]))}
    if kind == "thinking_level_change":
        body = {"type": kind, "timestamp": stamp}
        if draw(st.integers(0, 3)):
            body["thinkingLevel"] = draw(st.sampled_from(["low", "high", None]))
        return body
    if kind == "model_change":
        return {"type": kind, "timestamp": stamp, "provider": "mp", "modelId": draw(st.sampled_from(["x", "y"]))}
    if kind == "compaction":
        body = {
            "type": kind,
            "timestamp": stamp,
            "summary": "summary",
            "firstKeptEntryId": draw(st.sampled_from([*ancestors[-6:], target, None, "nowhere"])),
            "tokensBefore": 10,
        }
        if draw(st.booleans()):
            body["systemMessage"] = {"role": "system", "content": "checkpoint"}
        return body
    if kind == "branch_summary":
        return {"type": kind, "timestamp": stamp, "fromId": target, "summary": draw(st.sampled_from(["", "went"]))}
    if kind == "custom_message":
        return {"type": kind, "timestamp": stamp, "customType": "n", "content": draw(st.sampled_from(CONTENTS))}
    if kind == "context_edit":
        replacement = draw(st.sampled_from([None, {"content": "edited"}, {"content": [{"type": "text", "text": "e"}]}]))
        return {"type": kind, "timestamp": stamp, "targetId": target, "replacement": replacement}
    if kind == "label":
        return {"type": kind, "timestamp": stamp, "targetId": target, "label": "l"}
    if kind == "odd_type":
        return {"type": draw(st.sampled_from([None, 3, ["message"], {"a": 1}])), "timestamp": stamp}
    return {"type": kind, "timestamp": stamp, "data": {"id": "nested", "parentId": None}}


ID_STYLES = st.sampled_from(["hex", "hex", "hex", "quote", "unicode", "backslash"])


def entry_id(index, style):
    return {"hex": f"{index:08x}", "quote": f'q"{index}', "unicode": f"ü{index}🚀", "backslash": f"b\\{index}"}[style]


def ancestry(entry_id, entries):
    """Root-first ids of ``entry_id``'s path (a compaction keeps from one of them)."""
    parents = {e["id"]: e["parentId"] for e in entries}
    chain = []
    while entry_id is not None:
        chain.append(entry_id)
        entry_id = parents[entry_id]
    return chain[::-1]


@st.composite
def session_trees(draw, max_entries=30):
    """Entries in append order, each attached to an earlier one (mostly the
    latest), or a new root."""
    count = draw(st.integers(1, max_entries))
    odd = draw(st.booleans())
    entries: list[dict] = []
    for index in range(count):
        ids = [e["id"] for e in entries]
        if not ids or draw(st.integers(0, 15)) == 0:
            parent = None
        elif draw(st.integers(0, 3)):
            parent = ids[-1]
        else:
            parent = draw(st.sampled_from(ids))
        body = draw(entry_bodies(ids, ancestry(parent, entries), odd))
        entries.append({"type": body.pop("type"), "id": entry_id(index, draw(ID_STYLES)), "parentId": parent, **body})
    return entries


@PROPERTY_SETTINGS
@given(session_trees())
def test_build_context_from_path_is_the_projection(entries):
    for leaf in entries[-3:]:
        path = get_path_to_leaf(entries, leaf["id"])
        assert build_context_from_path(path) == reference_context(path)
        assert context_settings(path) == reference_settings(path)


def test_message_entries_give_their_own_message_objects():
    entries = [
        {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "hi"}},
        {"type": "message", "id": "b", "parentId": "a", "message": {"role": "user", "content": None}},
    ]
    context = build_context_from_path(entries)
    assert context["messages"][0] is entries[0]["message"]
    assert context["messages"][1] == {"role": "user", "content": []}  # filled in, the entry unchanged
    assert entries[1]["message"]["content"] is None
