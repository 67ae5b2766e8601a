"""A small builder of Pi entry trees with roleplay entries, for reducer tests.

Entries are appended as children of the current leaf (as Pi does); ``go_to``
moves the leaf like ``/tree``. Paths come from the kernel's ``get_path_to_leaf``.
"""

from __future__ import annotations

from typing import Any

from roleplay import schema
from roleplay.reducer import RoleplayState, make_checkpoint_data, reduce_branch
from sessiontree.core.path import get_path_to_leaf
from sessiontree.core.types import Entry


class EntryTree:
    def __init__(self, character_id: str = "alice") -> None:
        self.character_id = character_id
        self.entries: list[Entry] = []
        self.leaf: str | None = None
        self._commit_seq = 0

    # --- plumbing ---
    def append(self, entry: dict[str, Any]) -> str:
        entry_id = f"{len(self.entries) + 1:08x}"
        full = {
            "id": entry_id,
            "parentId": self.leaf,
            "timestamp": f"2026-04-19T00:00:{len(self.entries) % 60:02d}.000Z",
            **entry,
        }
        self.entries.append(full)
        self.leaf = entry_id
        return entry_id

    def go_to(self, entry_id: str | None) -> None:
        self.leaf = entry_id

    def path(self, leaf_id: str | None = None) -> list[Entry]:
        return get_path_to_leaf(self.entries, self.leaf if leaf_id is None else leaf_id)

    def reduce(self, leaf_id: str | None = None, character_id: str | None = "") -> RoleplayState:
        """Reduce the path to ``leaf_id`` (default: the leaf) for this tree's character;
        pass ``character_id=None`` to let the reducer resolve the identity."""
        return reduce_branch(self.path(leaf_id), self.character_id if character_id == "" else character_id)

    def next_commit_id(self) -> str:
        self._commit_seq += 1
        return f"commit-{self._commit_seq}"

    def custom(self, custom_type: str, data: Any) -> str:
        return self.append({"type": "custom", "customType": custom_type, "data": data})

    # --- ordinary entries ---
    def user(self, text: str) -> str:
        return self.append({"type": "message", "message": {"role": "user", "content": text, "timestamp": 0}})

    def assistant(self, text: str) -> str:
        return self.append(
            {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}
        )

    def branch_summary(self, from_id: str, summary: str) -> str:
        return self.append({"type": "branch_summary", "fromId": from_id, "summary": summary})

    def compaction(self, summary: str, first_kept_entry_id: str) -> str:
        return self.append(
            {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept_entry_id, "tokensBefore": 1000}
        )

    # --- roleplay entries ---
    def turn(
        self,
        ops: list[dict[str, Any]] | None = None,
        *,
        events: list[Any] | None = None,
        memories: list[Any] | None = None,
        reviews: list[dict[str, Any]] | None = None,
        character_id: str | None = None,
        commit_id: str | None = None,
        is_error: bool = False,
    ) -> str:
        commit = {
            "commitId": commit_id or self.next_commit_id(),
            "ops": ops or [],
            "events": events or [],
            "memories": memories or [],
            "reviews": reviews or [],
        }
        message = {
            "role": "toolResult",
            "toolCallId": f"call-{len(self.entries)}",
            "toolName": schema.TURN_TOOL_NAME,
            "content": [{"type": "text", "text": "ok"}],
            "details": {"characterId": character_id or self.character_id, "commit": commit},
            "isError": is_error,
        }
        return self.append({"type": "message", "message": message})

    def commit(
        self,
        ops: list[dict[str, Any]],
        *,
        source: str = "turn",
        reason: str | None = None,
        character_id: str | None = None,
        **extra: Any,
    ) -> str:
        data: dict[str, Any] = {
            "commitId": self.next_commit_id(),
            "characterId": character_id or self.character_id,
            "source": source,
            "ops": ops,
            **extra,
        }
        if reason is not None:
            data["reason"] = reason
        return self.custom(schema.COMMIT_TYPE, data)

    def decide(self, review_id: str, decision: str, *, character_id: str | None = None) -> str:
        return self.custom(
            schema.REVIEW_DECISION_TYPE,
            {"reviewId": review_id, "characterId": character_id or self.character_id, "decision": decision},
        )

    def amend(self, review_id: str, value: Any) -> str:
        return self.custom(
            schema.REVIEW_AMENDMENT_TYPE, {"reviewId": review_id, "characterId": self.character_id, "value": value}
        )

    def turn_status(self, turn_id: str, status: str) -> str:
        return self.custom(
            schema.TURN_STATUS_TYPE, {"characterId": self.character_id, "turnId": turn_id, "status": status}
        )

    def repair(self, turn_id: str, ops: list[dict[str, Any]]) -> str:
        commit = {"commitId": self.next_commit_id(), "source": "repair", "ops": ops}
        return self.custom(schema.REPAIR_TYPE, {"characterId": self.character_id, "turnId": turn_id, "commit": commit})

    def archive(self, reason: str | None = None) -> str:
        return self.custom(schema.ARCHIVE_TYPE, {"characterId": self.character_id, "reason": reason})

    def identity(self, character_id: str) -> str:
        return self.custom(schema.IDENTITY_TYPE, {"characterId": character_id})

    def checkpoint(self, character_id: str | None = None) -> str:
        """A checkpoint of the current path, appended as the leaf's child (as the service will)."""
        state = reduce_branch(self.path(), character_id or self.character_id)
        return self.custom(schema.CHECKPOINT_TYPE, make_checkpoint_data(state))


def review(review_id: str, op: dict[str, Any], note: str = "") -> dict[str, Any]:
    return {"reviewId": review_id, "op": op, "note": note}
