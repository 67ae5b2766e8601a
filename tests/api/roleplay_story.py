"""A roleplay session written and read over HTTP only, for the roleplay API tests.

The entries a roleplay runtime writes are plain Pi entries sent to
``POST entries/`` (a ``roleplay_finalize_turn`` tool result, ``custom``
entries), spelled out here as they go over the wire; everything roleplay
reads and writes goes through ``/api/sessions/{id}/roleplay/``.
"""

from __future__ import annotations

import itertools
from typing import Any

from .conftest import Api, assistant_message, user_message

SHORT_HAIR = "ear-length"
LONG_HAIR = "shoulder-length black"


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def review(review_id: str, op: dict[str, Any], note: str = "") -> dict[str, Any]:
    return {"reviewId": review_id, "op": op, "note": note}


def hair(state: dict[str, Any]) -> Any:
    return state["state"].get("appearance", {}).get("hair")


class ApiStory:
    """One roleplay session of the caller of ``api``, on the provider ``kind``."""

    def __init__(self, api: Api, kind: str, character_id: str = "alice", **fields: Any) -> None:
        self.api = api
        self.character_id = character_id
        self.sid: str = api.create_session(kind, **fields)["session_id"]
        self._seq = itertools.count(1)

    @property
    def base(self) -> str:
        return f"/api/sessions/{self.sid}/roleplay"

    # --- the session ---
    @property
    def leaf(self) -> str | None:
        return self.api.get(f"/api/sessions/{self.sid}/")["leaf_entry_id"]  # type: ignore[no-any-return]

    def entries(self) -> list[dict[str, Any]]:
        return self.api.get(f"/api/sessions/{self.sid}/entries/?page_size=1000")["results"]  # type: ignore[no-any-return]

    def entry(self, entry_id: str) -> dict[str, Any]:
        return self.api.get(f"/api/sessions/{self.sid}/entries/{entry_id}/")  # type: ignore[no-any-return]

    # --- what the roleplay runtime appends ---
    def user(self, text: str) -> str:
        return str(self.api.append(self.sid, message=user_message(text))["id"])

    def assistant(self, text: str) -> str:
        return str(self.api.append(self.sid, message=assistant_message(text))["id"])

    def custom(self, custom_type: str, data: dict[str, Any]) -> str:
        return str(self.api.append(self.sid, entry={"type": "custom", "customType": custom_type, "data": data})["id"])

    def select_character(self) -> str:
        return self.custom("pi-roleplay-identity", {"characterId": self.character_id})

    def mark_incomplete(self, turn_id: str, reason: str | None = None) -> str:
        data = {"characterId": self.character_id, "turnId": turn_id, "status": "incomplete"}
        return self.custom("pi-roleplay-turn-status", {**data, **({"reason": reason} if reason else {})})

    def turn(
        self,
        ops: list[dict[str, Any]] | None = None,
        *,
        events: list[Any] | None = None,
        memories: list[Any] | None = None,
        reviews: list[dict[str, Any]] | None = None,
        commit_id: str | None = None,
    ) -> str:
        """The ``roleplay_finalize_turn`` tool result carrying the turn's commit."""
        n = next(self._seq)
        commit: dict[str, Any] = {"commitId": commit_id or f"commit-{n}", "ops": ops or []}
        for key, value in (("events", events), ("memories", memories), ("reviews", reviews)):
            if value:
                commit[key] = value
        message = {
            "role": "toolResult",
            "toolCallId": f"call-{n}",
            "toolName": "roleplay_finalize_turn",
            "content": [{"type": "text", "text": "Turn finalized."}],
            "details": {"characterId": self.character_id, "commit": commit},
            "isError": False,
            "timestamp": 3,
        }
        return str(self.api.append(self.sid, message=message)["id"])

    def haircut_story(self) -> dict[str, str]:
        """``identity → greet → reply → ask for the cut → reply → turn: hair ear-length``; returns the ids."""
        ids = {"identity": self.select_character()}
        ids["greet"] = self.user("Hello, Alice.")
        ids["reply"] = self.assistant(f"Alice smiles, her {LONG_HAIR} hair in the wind.")
        ids["ask_cut"] = self.user("Will you cut your hair?")
        ids["cut_reply"] = self.assistant("Alice cuts her hair short, just below the ears.")
        ids["cut"] = self.turn(
            [add("/appearance", {"hair": SHORT_HAIR})], events=["Alice cut her hair"], commit_id="commit-haircut"
        )
        return ids

    # --- roleplay over HTTP ---
    def state(self, expected: int = 200, **query: str) -> Any:
        return self.api.get(f"{self.base}/state/", expected, data=query)

    def diff(self, expected: int = 200, **query: str) -> Any:
        return self.api.get(f"{self.base}/diff/", expected, data=query)

    def reviews(self, expected: int = 200, **query: str) -> Any:
        return self.api.get(f"{self.base}/reviews/", expected, data=query)

    def context(self, expected: int = 200, **query: str) -> Any:
        return self.api.get(f"{self.base}/context/", expected, data=query)

    def checkpoints(self, expected: int = 200, **query: str) -> Any:
        return self.api.get(f"{self.base}/checkpoints/", expected, data=query)

    def decide(self, review_id: str, body: dict[str, Any], expected: int = 201) -> Any:
        return self.api.post(f"{self.base}/reviews/{review_id}/decide/", body, expected)

    def amend(self, review_id: str, body: dict[str, Any], expected: int = 201) -> Any:
        return self.api.post(f"{self.base}/reviews/{review_id}/amend/", body, expected)

    def correct(self, body: dict[str, Any], expected: int = 201) -> Any:
        return self.api.post(f"{self.base}/corrections/", body, expected)

    def checkpoint(self, body: dict[str, Any] | None = None, expected: int = 201) -> Any:
        return self.api.post(f"{self.base}/checkpoints/", body or {}, expected)

    def repair(self, body: dict[str, Any], expected: int = 201) -> Any:
        return self.api.post(f"{self.base}/repairs/", body, expected)

    def archive(self, body: dict[str, Any] | None = None, expected: int = 201) -> Any:
        return self.api.post(f"{self.base}/archive/", body or {}, expected)

    # --- the tree, over the API's own endpoints ---
    def navigate(self, target_id: str, **body: Any) -> Any:
        return self.api.post(f"/api/sessions/{self.sid}/navigate/", {"target_id": target_id, **body})

    def fork(self, entry_id: str, position: str) -> Any:
        return self.api.post(
            f"/api/sessions/{self.sid}/fork/", {"entry_id": entry_id, "position": position}, expected=201
        )

    def on(self, session_id: str) -> ApiStory:
        """The same caller and character on another session (a fork)."""
        other = ApiStory.__new__(ApiStory)
        other.__dict__.update(self.__dict__, sid=session_id)
        return other
