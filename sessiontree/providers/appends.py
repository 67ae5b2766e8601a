"""The typed ``append_*`` methods of the contract, for every provider.

Each builds an entry with ``sessiontree.core.entries`` and sends it through
the provider's one ``append_entry`` channel, so validation, locking and leaf
handling are never duplicated per entry type. Every one accepts
``expected_leaf_id`` (``LeafConflict`` before anything is written).
"""

from __future__ import annotations

from typing import Any

from sessiontree.core import entries as build
from sessiontree.core.context_builder import UNSET, _Unset
from sessiontree.core.types import Entry

Expected = str | None | _Unset


class TypedAppends:
    def append_entry(
        self, session_id: str, entry: Entry, *, expected_leaf_id: Expected = UNSET
    ) -> Entry:  # pragma: no cover - implemented by the provider
        raise NotImplementedError

    def append_message(self, session_id: str, message: dict[str, Any], *, expected_leaf_id: Expected = UNSET) -> Entry:
        return self.append_entry(session_id, build.message_entry(message), expected_leaf_id=expected_leaf_id)

    def append_thinking_level_change(
        self, session_id: str, thinking_level: str, *, expected_leaf_id: Expected = UNSET
    ) -> Entry:
        return self.append_entry(
            session_id, build.thinking_level_change_entry(thinking_level), expected_leaf_id=expected_leaf_id
        )

    def append_model_change(
        self, session_id: str, provider: str, model_id: str, *, expected_leaf_id: Expected = UNSET
    ) -> Entry:
        return self.append_entry(
            session_id, build.model_change_entry(provider, model_id), expected_leaf_id=expected_leaf_id
        )

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
        expected_leaf_id: Expected = UNSET,
    ) -> Entry:
        """``first_kept_entry_id=None``: keep nothing from before the compaction
        (stored with the compaction's own id, as Pi writes it)."""
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
            expected_leaf_id=expected_leaf_id,
        )

    def append_custom_entry(
        self, session_id: str, custom_type: str, data: Any = None, *, expected_leaf_id: Expected = UNSET
    ) -> Entry:
        return self.append_entry(session_id, build.custom_entry(custom_type, data), expected_leaf_id=expected_leaf_id)

    def append_custom_message(
        self,
        session_id: str,
        custom_type: str,
        content: Any,
        *,
        display: bool = True,
        details: Any = None,
        expected_leaf_id: Expected = UNSET,
    ) -> Entry:
        return self.append_entry(
            session_id,
            build.custom_message_entry(custom_type, content, display=display, details=details),
            expected_leaf_id=expected_leaf_id,
        )

    def append_label_change(
        self, session_id: str, target_id: str, label: str | None, *, expected_leaf_id: Expected = UNSET
    ) -> Entry:
        return self.append_entry(session_id, build.label_entry(target_id, label), expected_leaf_id=expected_leaf_id)

    def append_session_info(self, session_id: str, name: str, *, expected_leaf_id: Expected = UNSET) -> Entry:
        return self.append_entry(session_id, build.session_info_entry(name), expected_leaf_id=expected_leaf_id)

    def append_usage(
        self,
        session_id: str,
        kind: str,
        provider: str,
        model: str,
        usage: Any,
        note: str | None = None,
        *,
        expected_leaf_id: Expected = UNSET,
    ) -> Entry:
        """Usage a model reported outside any assistant message: stored, never in the context."""
        return self.append_entry(
            session_id, build.usage_entry(kind, provider, model, usage, note), expected_leaf_id=expected_leaf_id
        )
