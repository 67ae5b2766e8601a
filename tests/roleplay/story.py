"""Writing roleplay sessions through a real provider, for service, context, command and E2E tests.

Everything goes through the provider contract (``append_message``,
``append_custom_entry``…), as the roleplay runtime would, so the tests see
each provider's own ids, parents and leaf handling.
"""

from __future__ import annotations

import itertools
from typing import Any

from roleplay import schema
from sessiontree.core.types import Entry
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.summarizers.base import SummaryRequest

SHORT_HAIR = "ear-length"
LONG_HAIR = "shoulder-length black"
ABANDONED = "On the abandoned branch Alice cut her hair ear-length and reached the royal capital."


class Story:
    """One roleplay session: the player's messages, Alice's replies and turn results."""

    def __init__(self, provider: SessionTreeProvider, character_id: str = "alice", **session_fields: Any) -> None:
        self.provider = provider
        self.character_id = character_id
        self.session_id = provider.create_session(**session_fields)["session_id"]
        self._seq = itertools.count(1)

    @property
    def at(self) -> dict[str, Any]:
        """The keyword arguments every roleplay write takes for this session."""
        return {"provider": self.provider, "session_id": self.session_id, "actor": "system", "channel": "internal"}

    # --- reads ---
    @property
    def leaf(self) -> str | None:
        session = self.provider.get_session(self.session_id)
        assert session is not None
        return session["leaf_entry_id"]

    def entries(self) -> list[Entry]:
        return self.provider.list_entries(self.session_id)

    def entry(self, entry_id: str) -> Entry:
        return self.provider.get_entry(self.session_id, entry_id)

    # --- ordinary messages ---
    def user(self, text: str) -> str:
        message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_700_000_000_000}
        return self.provider.append_message(self.session_id, message)["id"]

    def assistant(self, text: str) -> str:
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "stopReason": "stop",
            "timestamp": 1_700_000_000_000,
        }
        return self.provider.append_message(self.session_id, message)["id"]

    # --- roleplay entries ---
    def turn(
        self,
        ops: list[dict[str, Any]] | None = None,
        *,
        events: list[Any] | None = None,
        memories: list[Any] | None = None,
        reviews: list[dict[str, Any]] | None = None,
        commit_id: str | None = None,
        turn_id: str | None = None,
    ) -> str:
        """The ``roleplay_finalize_turn`` tool result carrying a commit."""
        n = next(self._seq)
        commit: dict[str, Any] = {"commitId": commit_id or f"commit-{n}", "ops": ops or []}
        for key, value in (("events", events), ("memories", memories), ("reviews", reviews)):
            if value:
                commit[key] = value
        message = schema.build_turn_result_message(
            tool_call_id=f"call-{n}", character_id=self.character_id, commit=commit, turn_id=turn_id
        )
        return self.provider.append_message(self.session_id, message)["id"]

    def select_character(self) -> str:
        """The session's role selection, made before Alice's first reply."""
        data = schema.build_identity_data(character_id=self.character_id)
        return self.provider.append_custom_entry(self.session_id, schema.IDENTITY_TYPE, data)["id"]

    def mark_incomplete(self, turn_id: str) -> str:
        data = schema.build_turn_status_data(character_id=self.character_id, turn_id=turn_id, status="incomplete")
        return self.provider.append_custom_entry(self.session_id, schema.TURN_STATUS_TYPE, data)["id"]

    # --- the seed's opening: Alice meets the player, then cuts her hair ---
    def haircut_story(self) -> dict[str, str]:
        """``identity → greet → reply → ask for the cut → reply → turn: hair ear-length``; returns the ids.

        Alice's long hair is her starting look, not a commit: revision 0 before the cut.
        """
        ids = {"identity": self.select_character()}
        ids["greet"] = self.user("Hello, Alice.")
        ids["reply"] = self.assistant(f"Alice smiles, her {LONG_HAIR} hair in the wind.")
        ids["ask_cut"] = self.user("Will you cut your hair?")
        ids["cut_reply"] = self.assistant("Alice cuts her hair short, just below the ears.")
        ids["cut"] = self.turn(
            [{"op": "add", "path": "/appearance", "value": {"hair": SHORT_HAIR}}],
            events=["Alice cut her hair"],
            commit_id="commit-haircut",
        )
        return ids


def branch_with_summary(story: Story) -> dict[str, str]:
    """Cut the hair, then go back before the cut with a branch summary, and refuse it."""
    ids = story.haircut_story()
    summary = story.provider.append_branch_summary(
        story.session_id, branch_from_entry_id=ids["reply"], summary=ABANDONED
    )
    ids["summary"] = summary["id"]
    ids["refuse"] = story.user("Please keep your hair as it is.")
    ids["refuse_reply"] = story.assistant("Alice keeps her long hair.")
    ids["mood"] = story.turn([add("/mood", "relieved")])
    return ids


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def review(review_id: str, op: dict[str, Any], note: str = "") -> dict[str, Any]:
    return {"reviewId": review_id, "op": op, "note": note}


class FakeSummarizer:
    """A summarizer that returns fixed text and remembers what it was asked."""

    name = "fake"

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return self.text
