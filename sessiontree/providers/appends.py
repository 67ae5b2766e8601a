"""The typed ``append_*`` methods of the contract, for every provider.

Each builds an entry with ``sessiontree.core.entries`` and sends it through
the provider's one ``append_entry`` channel, so validation, locking and leaf
handling are never duplicated per entry type.
"""

from __future__ import annotations

from typing import Any

from sessiontree.core import entries as build
from sessiontree.core.context_builder import UNSET, _Unset
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
        first_kept_entry_id: str,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
    ) -> Entry:
        return self.append_entry(
            session_id,
            build.compaction_entry(
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                from_hook=from_hook,
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
        (``None`` = before the root) and append the summary there."""
        entry = build.branch_summary_entry(
            branch_from_entry_id=branch_from_entry_id, summary=summary, details=details, from_hook=from_hook
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
