"""The typed ``append_*`` methods of the contract, for every provider.

Each builds an entry with ``sessiontree.core.entries`` and sends it through
the provider's one ``append_entry`` channel, so validation, locking and leaf
handling are never duplicated per entry type.
"""

from __future__ import annotations

from typing import Any

from sessiontree.core import entries as build
from sessiontree.core.context_builder import UNSET, _Unset
from sessiontree.core.errors import EntryNotFound, InvalidEntry, SessionNotFound
from sessiontree.core.pi_session_file import encode_entry_line
from sessiontree.core.types import Entry, SessionTreeSession


class TypedAppends:
    def append_entry(
        self, session_id: str, entry: Entry, *, expected_leaf_id: str | None | _Unset = UNSET
    ) -> Entry:  # pragma: no cover - implemented by the provider
        raise NotImplementedError

    def switch_leaf(self, session_id: str, entry_id: str) -> SessionTreeSession:  # pragma: no cover
        raise NotImplementedError

    def reset_leaf(self, session_id: str) -> SessionTreeSession:  # pragma: no cover
        raise NotImplementedError

    def get_session(self, session_id: str) -> SessionTreeSession | None:  # pragma: no cover
        raise NotImplementedError

    def get_active_path(self, session_id: str, leaf_entry_id: Any = UNSET) -> list[Entry]:  # pragma: no cover
        raise NotImplementedError

    def append_message(
        self, session_id: str, message: dict[str, Any], *, expected_leaf_id: str | None | _Unset = UNSET
    ) -> Entry:
        return self.append_entry(session_id, build.message_entry(message), expected_leaf_id=expected_leaf_id)

    def append_thinking_level_change(self, session_id: str, thinking_level: str) -> Entry:
        return self.append_entry(session_id, build.thinking_level_change_entry(thinking_level))

    def append_model_change(self, session_id: str, provider: str, model_id: str) -> Entry:
        return self.append_entry(session_id, build.model_change_entry(provider, model_id))

    def append_compaction(
        self,
        session_id: str,
        *,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
        usage: Any = None,
        system_message: Any = None,
    ) -> Entry:
        """``first_kept_entry_id=None``: keep nothing from before the compaction."""
        return self.append_entry(
            session_id,
            build.compaction_entry(
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                from_hook=from_hook,
                usage=usage,
                system_message=system_message,
            ),
        )

    def append_branch_summary(
        self,
        session_id: str,
        *,
        branch_from_entry_id: str | None,
        summary: str,
        details: Any = None,
        from_hook: bool | None = None,
    ) -> Entry:
        """Pi's ``branchWithSummary``: move the leaf to ``branch_from_entry_id``
        (``None`` = before the root) and append the summary there. Its
        ``fromId`` is the leaf being left (``"root"`` when there was none)."""
        session = self.get_session(session_id)
        entry = build.branch_summary_entry(
            branch_from_entry_id=branch_from_entry_id,
            summary=summary,
            details=details,
            from_hook=from_hook,
            from_id=(session or {}).get("leaf_entry_id") or "root",
        )
        # The leaf move and the append are two writes: refuse a bad summary
        # before the first, so a refused call leaves the leaf where it was.
        build.validate_entry_shape(entry, {})
        encode_entry_line(entry)
        if branch_from_entry_id is None:
            self.reset_leaf(session_id)
        else:
            self.switch_leaf(session_id, branch_from_entry_id)
        return self.append_entry(session_id, entry, expected_leaf_id=branch_from_entry_id)

    def append_custom_entry(self, session_id: str, custom_type: str, data: Any = None) -> Entry:
        return self.append_entry(session_id, build.custom_entry(custom_type, data))

    def append_custom_message(
        self, session_id: str, custom_type: str, content: Any, *, display: bool = True, details: Any = None
    ) -> Entry:
        return self.append_entry(
            session_id, build.custom_message_entry(custom_type, content, display=display, details=details)
        )

    def append_label_change(self, session_id: str, target_id: str, label: str | None) -> Entry:
        return self.append_entry(session_id, build.label_entry(target_id, label))

    def append_session_info(self, session_id: str, name: str) -> Entry:
        return self.append_entry(session_id, build.session_info_entry(name))

    def append_context_edit(self, session_id: str, target_id: str, replacement: Any) -> Entry:
        """Pi's ``appendContextEdit``: from here on, the context shows the
        target (a user, assistant, tool-result or custom message on the
        active path) with ``replacement["content"]``, or omits it
        (``replacement=None``). A string given for an assistant or tool result
        is stored as one text block, as those roles need block lists."""
        session = self.get_session(session_id)
        if session is None:
            raise SessionNotFound(f"Session {session_id} not found")
        leaf_id = session["leaf_entry_id"]
        path = self.get_active_path(session_id, leaf_id)
        target = next((e for e in path if e.get("id") == target_id), None)
        if target is None:
            raise EntryNotFound(f"Entry {target_id} is not on the active path of session {session_id}")
        role = (target.get("message") or {}).get("role") if target.get("type") == "message" else None
        if target.get("type") != "custom_message" and role not in ("user", "assistant", "toolResult"):
            raise InvalidEntry(f"Entry {target_id} is not a message whose content the model sees")
        if (
            isinstance(replacement, dict)
            and role in ("assistant", "toolResult")
            and isinstance(replacement.get("content"), str)
        ):
            replacement = {"content": [{"type": "text", "text": replacement["content"]}]}
        entry = build.context_edit_entry(target_id, replacement)
        # The path was read at this leaf: refuse to append if it moved since.
        return self.append_entry(session_id, entry, expected_leaf_id=leaf_id)

    def append_usage(
        self, session_id: str, kind: str, provider: str, model: str, usage: Any, note: str | None = None
    ) -> Entry:
        return self.append_entry(session_id, build.usage_entry(kind, provider, model, usage, note))
