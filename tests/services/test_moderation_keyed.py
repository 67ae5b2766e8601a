"""Hide and unhide read by key (issue 23): whether the message lies on the
active path and which context edits aimed at it lie there are answered by
the path facts (the edits aimed at it, each one's place by the jumps), not
by reading the whole active path. On random trees with edits on and off the
active branch, ``check_hide``, ``hiding_on_active_path``, ``hide_entry`` and
``unhide_entry`` answer (and refuse) as the whole-path reading does."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sessiontree.core.path import get_path_to_leaf
from sessiontree.providers import keyed_reads, template
from sessiontree.services import moderation

pytestmark = pytest.mark.django_db

WHO = {"actor": "mod", "channel": "internal"}
TS = "2026-04-19T00:00:00.000Z"


def edited_tree(seed: int, count: int) -> list[dict[str, Any]]:
    """Messages with branches, and context edits (hiding, restoring, omitting) aimed at earlier messages."""
    rng = random.Random(seed)
    entries: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for i in range(count):
        parent = None
        if entries:
            parent = entries[-1]["id"] if rng.random() < 0.93 else rng.choice(entries)["id"]
        entry_id = f"h{seed:02d}{i:05x}"
        if messages and rng.random() < 0.15:
            target = rng.choice(messages[-30:])
            content = target["message"]["content"]
            replacement = rng.choice([{"content": "[removed]"}, {"content": content}, None])
            entry = {"type": "context_edit", "targetId": target["id"], "replacement": replacement}
        elif rng.random() < 0.05:
            entry = {"type": "model_change", "provider": "p", "modelId": f"m{i}"}
        else:
            role = rng.choice(["user", "assistant"])
            content: Any = f"m{i}" if role == "user" else [{"type": "text", "text": f"m{i}"}]
            entry = {"type": "message", "message": {"role": role, "content": content}}
        entries.append({"id": entry_id, "parentId": parent, "timestamp": TS, **entry})
        if entry["type"] == "message":
            messages.append(entries[-1])
    return entries


def outcome(call) -> Any:
    try:
        return call()
    except Exception as exc:  # compared with the whole-path reading's error
        return (type(exc).__name__, str(exc))


class NoWholePath:
    """The whole active path, refused (the provider's and the write unit's)."""

    def __init__(self, monkeypatch, provider) -> None:
        self.monkeypatch, self.provider = monkeypatch, provider

    def __enter__(self) -> None:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the whole active path was read")

        self.context = self.monkeypatch.context()
        patch = self.context.__enter__()
        patch.setattr(self.provider, "get_active_path", refused)
        patch.setattr(template.SessionWriter, "active_path", refused)

    def __exit__(self, *exc: Any) -> None:
        self.context.__exit__(*exc)


def whole_path_answer(entries: list[dict[str, Any]], leaf: str, entry_id: str) -> tuple[bool, bool]:
    path = get_path_to_leaf(entries, leaf)
    return any(e["id"] == entry_id for e in path), moderation.hidden_on_path(path, entry_id)


@pytest.mark.parametrize("seed", range(3))
def test_hiding_reads_by_key_what_the_whole_path_says(provider, monkeypatch, seed):
    entries = edited_tree(seed, 260)
    provider.create_session(session_id="s1", entries=entries)
    leaf = provider.get_session("s1")["leaf_entry_id"]
    probes = [*(e["id"] for e in entries), "nope"]

    def checks() -> dict[tuple[str, bool], Any]:
        return {
            (entry_id, unhide): outcome(
                lambda entry_id=entry_id, unhide=unhide: moderation.check_hide(
                    session_id="s1", entry_id=entry_id, unhide=unhide, provider=provider
                )
            )
            for entry_id in probes
            for unhide in (False, True)
        }

    # The whole-path reading: the facts never say, every answer comes from the active path.
    with monkeypatch.context() as patch:
        patch.setattr(keyed_reads, "on_path", lambda *args: None)
        walked = checks()
    with NoWholePath(monkeypatch, provider):
        assert checks() == walked
        for entry_id in probes:
            answer = moderation.hiding_on_active_path(session_id="s1", entry_id=entry_id, provider=provider)
            assert answer == whole_path_answer(entries, leaf, entry_id)
    # The probes meet every answer: hidden, shown, and refused.
    kinds = {
        ("hidden" if result[1] else "shown") if isinstance(result[0], dict) else result[0] for result in walked.values()
    }
    assert {"hidden", "shown", "EntryNotFound", "NotHidden"} <= kinds, kinds


def test_hide_and_unhide_on_a_long_branch_never_read_the_whole_path(provider, monkeypatch):
    entries = edited_tree(9, 1500)
    provider.create_session(session_id="s1", entries=entries)
    leaf = provider.get_session("s1")["leaf_entry_id"]
    path = get_path_to_leaf(entries, leaf)
    shown = [
        e for e in path if e["type"] == "message" and not moderation.hidden_on_path(path, e["id"]) and e["id"] != leaf
    ]
    target = shown[len(shown) // 3]["id"]
    off_path = next(e["id"] for e in entries if e["type"] == "message" and e not in path)
    with NoWholePath(monkeypatch, provider):
        edit = moderation.hide_entry(session_id="s1", entry_id=target, provider=provider, **WHO)
        assert edit["type"] == "context_edit" and edit["targetId"] == target
        assert moderation.hiding_on_active_path(session_id="s1", entry_id=target, provider=provider) == (True, True)
        restore = moderation.unhide_entry(session_id="s1", entry_id=target, provider=provider, **WHO)
        assert restore["replacement"] == {"content": next(e for e in path if e["id"] == target)["message"]["content"]}
        assert moderation.hiding_on_active_path(session_id="s1", entry_id=target, provider=provider) == (True, False)
        with pytest.raises(moderation.NotHidden):
            moderation.unhide_entry(session_id="s1", entry_id=target, provider=provider, **WHO)
        with pytest.raises(moderation.EntryNotFound, match="not on the active path"):
            moderation.hide_entry(session_id="s1", entry_id=off_path, provider=provider, **WHO)
    new_path = provider.get_active_path("s1")
    assert moderation.hidden_on_path(new_path, target) is False
    assert [e["id"] for e in new_path[-2:]] == [edit["id"], restore["id"]]
