"""Operations over any provider: compact, navigate the tree, fork.

Each one reads what it needs through the ``SessionTreeProvider`` contract,
asks a summarizer when the operation needs one, and only then writes. A
summarizer that fails raises ``SummarizerError`` before anything was
appended or the leaf moved, so a failed call leaves the session exactly as
it was. The rules are Pi's (``AgentSession.compact``, ``navigateTree`` and
``fork`` in badlogic/pi-mono); ``docs/compaction.md`` ("Services") explains
them and the few places where we differ.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict

from sessiontree.core import entries as build
from sessiontree.core.branch_summary import collect_entries_for_branch_summary
from sessiontree.core.compaction import CompactionSettings, prepare_compaction
from sessiontree.core.errors import EntryNotFound, InvalidEntry, LeafConflict, SessionNotFound
from sessiontree.core.types import Entry, SessionTreeSession
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.summarizers import (
    Summarizer,
    generate_branch_summary,
    generate_compaction_summary,
    get_summarizer,
)

__all__ = [
    "FORK_POSITIONS",
    "NavigateResult",
    "compact_session",
    "fork_session",
    "navigate_tree",
    "register_compaction_hook",
    "unregister_compaction_hook",
]

logger = logging.getLogger(__name__)

# Called with (provider, session_id, compaction_entry) after every compaction
# that compact_session writes — Pi's "session_compact" extension event. The
# roleplay app registers its automatic checkpoint here (roleplay/apps.py).
CompactionHook = Callable[[SessionTreeProvider, str, Entry], object]
_compaction_hooks: list[CompactionHook] = []


def register_compaction_hook(hook: CompactionHook) -> None:
    """Run ``hook`` after each compaction ``compact_session`` appends (once, however often registered)."""
    if hook not in _compaction_hooks:
        _compaction_hooks.append(hook)


def unregister_compaction_hook(hook: CompactionHook) -> None:
    if hook in _compaction_hooks:
        _compaction_hooks.remove(hook)


ForkPosition = Literal["before", "at"]
FORK_POSITIONS: tuple[str, ...] = ("before", "at")


class NavigateResult(TypedDict):
    leaf_entry_id: str | None
    editor_text: str | None
    summary_entry: Entry | None
    label_entry: Entry | None


# --- helpers -------------------------------------------------------------------------


def _leaf_of(provider: SessionTreeProvider, session_id: str) -> str | None:
    session = provider.get_session(session_id)
    if session is None:
        raise SessionNotFound(f"Session {session_id} not found")
    return session["leaf_entry_id"]


def _check_leaf_unchanged(provider: SessionTreeProvider, session_id: str, expected: str | None) -> None:
    """Summarizing can take a while: refuse to write on a leaf that moved meanwhile,
    since the summary would describe a state the session is no longer in."""
    current = _leaf_of(provider, session_id)
    if current != expected:
        raise LeafConflict(
            f"Leaf of session {session_id} moved from {expected!r} to {current!r} while summarizing; nothing was written"
        )


def _text_of(content: Any) -> str:
    """The text a user would re-edit: a string, or the text blocks joined (images dropped)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block["text"]
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
    return ""


def _is_user_message(entry: Entry) -> bool:
    return entry.get("type") == "message" and (entry.get("message") or {}).get("role") == "user"


def _check_optional_text(value: Any, what: str) -> None:
    """Refuse a non-text option before anything is written: found only at the
    end, after the leaf moved or a summary was appended, it would leave the
    operation half done."""
    if value is not None and not isinstance(value, str):
        raise InvalidEntry(f"{what} must be a string or None, got {type(value).__name__}")


def _describe(entry: Entry) -> str:
    if entry.get("type") == "message":
        return f"a {(entry.get('message') or {}).get('role')!r} message"
    return f"a {entry.get('type')!r} entry"


# --- compaction ------------------------------------------------------------------------


def compact_session(
    provider: SessionTreeProvider,
    session_id: str,
    *,
    summarizer: Summarizer | None = None,
    settings: CompactionSettings | None = None,
    custom_instructions: str | None = None,
) -> Entry | None:
    """Compact the active path: summarize its older part and append a
    ``compaction`` entry at the leaf. Returns the entry, or ``None`` when
    there is nothing to compact (empty path, the path already ends in a
    compaction, or the kept region would not move).

    Like Pi's manual ``/compact`` this ignores ``settings.enabled`` (that
    switch governs automatic compaction). The entry is appended only if the
    leaf is still where it was when the path was read.
    """
    _check_optional_text(custom_instructions, "custom_instructions")
    settings = settings if settings is not None else CompactionSettings()
    leaf_id = _leaf_of(provider, session_id)
    path = provider.get_active_path(session_id, leaf_id)
    preparation = prepare_compaction(path, settings)
    if preparation is None or not preparation.has_content:
        return None
    result = generate_compaction_summary(
        summarizer if summarizer is not None else get_summarizer(),
        preparation,
        custom_instructions=custom_instructions,
    )
    entry = build.compaction_entry(
        summary=result.summary,
        first_kept_entry_id=result.first_kept_entry_id,
        tokens_before=result.tokens_before,
        details=result.details,
        system_message=preparation.system_message,
    )
    compaction = provider.append_entry(session_id, entry, expected_leaf_id=leaf_id)
    for hook in list(_compaction_hooks):
        try:
            hook(provider, session_id, compaction)
        except Exception:
            # The compaction is stored and correct; a hook (e.g. an automatic
            # checkpoint) is an optimisation that must not make it look failed.
            logger.exception("compaction hook %r failed for session %s", hook, session_id)
    return compaction


# --- tree navigation --------------------------------------------------------------------


def navigate_tree(
    provider: SessionTreeProvider,
    session_id: str,
    target_id: str,
    *,
    summarize: bool = False,
    summarizer: Summarizer | None = None,
    label: str | None = None,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
) -> NavigateResult:
    """Move the leaf to ``target_id`` as Pi's ``/tree`` does.

    - A user message or a custom message: the leaf goes to its parent (before
      the root when it is a root) and its text comes back as ``editor_text``
      so it can be edited and sent again.
    - Any other entry becomes the leaf.
    - ``summarize=True``: the entries being left behind (old leaf up to the
      common ancestor) are summarized into a ``branch_summary`` appended as a
      child of the new position; it becomes the leaf. Its ``fromId`` is the
      leaf being left (Pi since 0.84.3). Nothing is summarized when nothing
      is left behind.
    - ``label``: a label entry for the summary entry, or for the target when
      there is no summary. Like every entry it is appended at the leaf, so it
      becomes the leaf (no context change: labels are not messages).
    - ``target_id`` equal to the current leaf: nothing happens (Pi's no-op).

    ``leaf_entry_id`` in the result is the session's leaf afterwards.
    Raises ``EntryNotFound`` for an unknown target, ``SummarizerError`` (with
    nothing written) when summarizing fails, ``LeafConflict`` when the leaf
    moved while summarizing, ``InvalidEntry`` (before anything is written)
    for a ``label`` or ``custom_instructions`` that is not a string.
    """
    _check_optional_text(label, "label")
    _check_optional_text(custom_instructions, "custom_instructions")
    old_leaf_id = _leaf_of(provider, session_id)
    if target_id == old_leaf_id:
        return {"leaf_entry_id": old_leaf_id, "editor_text": None, "summary_entry": None, "label_entry": None}
    target = provider.get_entry(session_id, target_id)

    if _is_user_message(target):
        new_leaf_id: str | None = target.get("parentId")
        editor_text: str | None = _text_of((target.get("message") or {}).get("content"))
    elif target.get("type") == "custom_message":
        new_leaf_id = target.get("parentId")
        editor_text = _text_of(target.get("content"))
    else:
        new_leaf_id = target_id
        editor_text = None

    branch = None
    if summarize:
        old_path = provider.get_active_path(session_id, old_leaf_id) if old_leaf_id is not None else []
        target_path = provider.get_active_path(session_id, target_id)
        by_id = {entry["id"]: entry for entry in (*old_path, *target_path)}
        abandoned, _common_ancestor_id = collect_entries_for_branch_summary(
            list(by_id.values()), old_leaf_id, target_id, by_id=by_id
        )
        if abandoned:
            branch = generate_branch_summary(
                summarizer if summarizer is not None else get_summarizer(),
                abandoned,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
            )

    # Every summarizer call is done: from here on only writes.
    _check_leaf_unchanged(provider, session_id, old_leaf_id)
    summary_entry: Entry | None = None
    if branch is not None:
        # The provider records the leaf being left as the summary's fromId.
        summary_entry = provider.append_branch_summary(
            session_id, branch_from_entry_id=new_leaf_id, summary=branch.summary, details=branch.details
        )
    elif new_leaf_id is None:
        provider.reset_leaf(session_id)
    else:
        provider.switch_leaf(session_id, new_leaf_id)

    label_entry: Entry | None = None
    if label:
        labelled_id = summary_entry["id"] if summary_entry is not None else target_id
        label_entry = provider.append_label_change(session_id, labelled_id, label)

    return {
        "leaf_entry_id": _leaf_of(provider, session_id),
        "editor_text": editor_text,
        "summary_entry": summary_entry,
        "label_entry": label_entry,
    }


# --- fork ----------------------------------------------------------------------------------


def fork_session(
    provider: SessionTreeProvider,
    session_id: str,
    entry_id: str,
    *,
    position: ForkPosition = "before",
    new_session_id: str | None = None,
) -> SessionTreeSession:
    """A new session whose parent is ``session_id``, holding the path up to a point.

    ``position="before"`` (Pi's default) needs a user message and forks at
    its parent, so the message can be written again in the new session; on a
    root user message the new session is empty. ``position="at"`` copies the
    path up to and including ``entry_id``, whatever its type. Labels that
    apply to copied entries are re-created; nothing after the fork point is
    copied. Raises ``EntryNotFound`` for an unknown entry and ``InvalidEntry``
    for a bad position or "before" on anything but a user message.
    """
    if position not in FORK_POSITIONS:
        raise InvalidEntry(f"Invalid fork position {position!r}; use 'before' or 'at'")
    entry = provider.get_entry(session_id, entry_id)
    if position == "at":
        fork_leaf_id: str | None = entry_id
    else:
        if not _is_user_message(entry):
            raise InvalidEntry(
                f"Entry {entry_id} is {_describe(entry)}; forking 'before' needs a user message "
                "(use position='at' to fork at any entry)"
            )
        fork_leaf_id = entry.get("parentId")
        if fork_leaf_id is not None:
            try:
                provider.get_entry(session_id, fork_leaf_id)
            except EntryNotFound:
                # A parent missing from the file (left by Pi's own forks) makes
                # the message a root, as every path walk treats it.
                fork_leaf_id = None
    return provider.create_branched_session(session_id, fork_leaf_id, new_session_id=new_session_id)
