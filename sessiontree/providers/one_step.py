"""The provider's one-step writes: each call is one whole write of its own,
and none of them writes an audit record.

They are Pi's ``SessionManager`` methods under the names of the Python API
(DESIGN.md §7: ``append_message``, ``append_compaction``, ``switch_leaf``,
``begin_in_flight_entry`` …), kept for tests, benchmarks and tools that
work below the operations layer. **No face and no service calls them**:
every production write goes through ``sessiontree.services`` (actor,
channel, audit record in the same transaction), which composes
``TreeProvider.transact`` steps instead. ``tests/test_layers.py`` fails when
a module outside ``tests/`` and ``bench/`` calls one.

Each builds its entry with ``sessiontree.core.entries`` and runs one
``transact`` step, so validation, locking and leaf handling are never
duplicated per entry type. Every one accepts ``expected_leaf_id``
(``LeafConflict`` before anything is written).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sessiontree.core import entries as build
from sessiontree.core.types import UNSET, Entry, SessionTreeSession, Unset

Expected = str | None | Unset
T = TypeVar("T")

# The names below, for the layer check (tests/test_layers.py).
ONE_STEP_WRITES: tuple[str, ...] = (
    "append_entry",
    "append_message",
    "append_thinking_level_change",
    "append_model_change",
    "append_compaction",
    "append_branch_summary",
    "append_custom_entry",
    "append_custom_message",
    "append_label_change",
    "append_session_info",
    "append_context_edit",
    "append_usage",
    "begin_in_flight_entry",
    "update_in_flight_entry",
    "abort_in_flight_entry",
    "switch_leaf",
    "reset_leaf",
)


class OneStepWrites:
    """Unaudited one-step writes, for tests and tools (see the module docstring)."""

    storage: Any

    def transact(
        self,
        session_id: str,
        work: Callable[[Any], T],
        *,
        expected_leaf_id: Expected = UNSET,
        before_commit: Callable[[Any], None] | None = None,
    ) -> T:  # pragma: no cover - TreeProvider's
        raise NotImplementedError

    def append_entry(self, session_id: str, entry: Entry, *, expected_leaf_id: Expected = UNSET) -> Entry:
        return self.transact(session_id, lambda w: w.append(entry, expected_leaf_id=expected_leaf_id))

    def begin_in_flight_entry(self, session_id: str, entry: Entry, *, expected_leaf_id: Expected = UNSET) -> Entry:
        return self.transact(session_id, lambda w: w.begin_in_flight(entry, expected_leaf_id=expected_leaf_id))

    def update_in_flight_entry(
        self, session_id: str, entry_id: str, patch: dict[str, Any], *, complete: bool = False
    ) -> Entry:
        return self.transact(session_id, lambda w: w.update_in_flight(entry_id, patch, complete=complete))

    def abort_in_flight_entry(self, session_id: str, entry_id: str) -> Entry:
        return self.transact(session_id, lambda w: w.abort_in_flight(entry_id))

    def append_branch_summary(
        self,
        session_id: str,
        *,
        branch_from_entry_id: str | None,
        summary: str,
        details: Any = None,
        from_hook: bool | None = None,
        expected_leaf_id: Expected = UNSET,
    ) -> Entry:
        """Pi's ``branchWithSummary``: move the leaf to ``branch_from_entry_id``
        (``None`` = before the root) and append the summary there, in one step.
        Its ``fromId`` is the leaf being left (``"root"`` when there was none)."""

        def work(writer: Any) -> Entry:
            entry = build.branch_summary_entry(
                branch_from_entry_id=branch_from_entry_id,
                summary=summary,
                details=details,
                from_hook=from_hook,
                from_id=writer.leaf_entry_id or "root",
            )
            if branch_from_entry_id is None:
                writer.reset_leaf()
            else:
                writer.switch_leaf(branch_from_entry_id)
            return writer.append(entry)

        return self.transact(session_id, work, expected_leaf_id=expected_leaf_id)

    def append_context_edit(
        self,
        session_id: str,
        target_id: str,
        replacement: Any,
        *,
        expected_leaf_id: Expected = UNSET,
    ) -> Entry:
        """Pi's ``appendContextEdit``: from here on the context shows the target
        (a user, assistant, tool-result or custom message on the active path)
        with ``replacement["content"]``, or omits it (``replacement=None``).
        The check and the append are one step under the session's lock."""
        return self.transact(
            session_id,
            lambda writer: writer.append_context_edit(target_id, replacement),
            expected_leaf_id=expected_leaf_id,
        )

    def switch_leaf(self, session_id: str, entry_id: str, *, expected_leaf_id: Expected = UNSET) -> SessionTreeSession:
        def work(writer: Any) -> Any:
            writer.switch_leaf(entry_id, expected_leaf_id=expected_leaf_id)
            return writer

        # The writer knows the session as stored: no second read.
        session: SessionTreeSession = self.transact(session_id, work).session()
        return session

    def reset_leaf(self, session_id: str, *, expected_leaf_id: Expected = UNSET) -> SessionTreeSession:
        def work(writer: Any) -> Any:
            writer.reset_leaf(expected_leaf_id=expected_leaf_id)
            return writer

        session: SessionTreeSession = self.transact(session_id, work).session()
        return session

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
