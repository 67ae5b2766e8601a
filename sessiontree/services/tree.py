"""Moving in the tree: switch/reset the leaf, labels, navigate (Pi's ``/tree``,
with an optional branch summary), fork, compact.

Each operation reads what it needs, asks a summarizer when it needs one, and
only then writes, in one unit under the session's lock with the leaf it read
as the expected leaf: a summarizer that fails, a leaf moved meanwhile
(``LeafConflict``) or any refused step leaves the session exactly as it was.
The rules are Pi's (``navigateTree``, ``fork``, ``compact`` of its agent
session); ``docs/compaction.md`` ("Services") explains them and where we differ.

Like every operation, each is keyword-only and needs an ``actor`` and a
``channel``; ``provider`` is resolved from the session when omitted.

Each reads the session once (one consistent ``provider.read``) and passes on
what it read: the unit of writes then reads the meta row once more, under the
session's lock, and what it leaves (the leaf, the session) comes back from the
writer instead of a third read. docs/mysql-provider.md ("Queries per call")
lists the statements each costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from sessiontree.core import entries as build
from sessiontree.core.branch_summary import collect_entries_for_branch_summary
from sessiontree.core.compaction import CompactionSettings, prepare_compaction
from sessiontree.core.entries import message_of
from sessiontree.core.errors import BadInput, EntryNotFound, InvalidEntry, LeafConflict
from sessiontree.core.types import UNSET, Entry, SessionTreeSession, Unset
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import provider_for
from sessiontree.providers.template import SessionWriter, fork_copies, read_path
from sessiontree.summarizers import Summarizer, generate_branch_summary, generate_compaction_summary, get_summarizer

from . import hooks
from .audit import audit_writer, record, who
from .idempotency import idempotent
from .operations import Operation

Expected = str | None | Unset
ForkPosition = Literal["before", "at"]
FORK_POSITIONS: tuple[str, ...] = ("before", "at")


class NavigateResult(TypedDict):
    leaf_entry_id: str | None
    editor_text: str | None
    summary_entry: Entry | None
    label_entry: Entry | None


# --- helpers -------------------------------------------------------------------------


def _check_expected_leaf(session_id: str, leaf_id: str | None, expected_leaf_id: Expected) -> None:
    if not isinstance(expected_leaf_id, Unset) and expected_leaf_id != leaf_id:
        raise LeafConflict(f"Leaf of session {session_id} is {leaf_id!r}, not the expected {expected_leaf_id!r}")


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
    return entry.get("type") == "message" and message_of(entry).get("role") == "user"


def _check_optional_text(value: Any, what: str) -> None:
    """Refuse a non-text option before anything is read or written."""
    if value is not None and not isinstance(value, str):
        raise BadInput(f"{what} must be a string or None, got {type(value).__name__}")


def _describe(entry: Entry) -> str:
    if entry.get("type") == "message":
        return f"a {(entry.get('message') or {}).get('role')!r} message"
    return f"a {entry.get('type')!r} entry"


# --- leaf and labels -------------------------------------------------------------------


@idempotent()  # answers the session after the move: kept once it returns
def switch_leaf(
    *,
    session_id: str,
    entry_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
) -> SessionTreeSession:
    """Move the leaf to ``entry_id`` (history is never rewritten)."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)

    def work(writer: SessionWriter) -> SessionWriter:
        writer.switch_leaf(entry_id)
        return writer

    done = provider.transact(
        session_id,
        work,
        expected_leaf_id=expected_leaf_id,
        before_commit=audit_writer(acting, channel, Operation.SWITCH_LEAF, detail={"entry_id": entry_id}),
    )
    return done.session()  # as stored: no second read


@idempotent()  # answers the session after the move: kept once it returns
def reset_leaf(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
) -> SessionTreeSession:
    """Move the leaf before the root: the next entry starts a new root."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)

    def work(writer: SessionWriter) -> SessionWriter:
        writer.reset_leaf()
        return writer

    done = provider.transact(
        session_id,
        work,
        expected_leaf_id=expected_leaf_id,
        before_commit=audit_writer(acting, channel, Operation.RESET_LEAF),
    )
    return done.session()


@idempotent(Operation.SET_LABEL, Operation.CLEAR_LABEL)
def set_label(
    *,
    session_id: str,
    target_id: str,
    label: str | None,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
) -> Entry:
    """Label ``target_id`` (``None`` or ``""`` clears its label): a ``label``
    entry appended at the leaf; the target itself is never modified."""
    _check_optional_text(label, "label")
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    operation = Operation.SET_LABEL if label else Operation.CLEAR_LABEL
    return provider.transact(
        session_id,
        lambda writer: writer.append(build.label_entry(target_id, label)),
        expected_leaf_id=expected_leaf_id,
        before_commit=audit_writer(acting, channel, operation, detail={"target_id": target_id, "label": label}),
    )


@idempotent(Operation.CLEAR_LABEL)
def clear_label(
    *,
    session_id: str,
    target_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    expected_leaf_id: Expected = UNSET,
) -> Entry:
    return set_label(
        session_id=session_id,
        target_id=target_id,
        label=None,
        actor=actor,
        channel=channel,
        provider=provider,
        expected_leaf_id=expected_leaf_id,
    )


# --- compaction ------------------------------------------------------------------------


@idempotent(Operation.COMPACT_SESSION)
def compact_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    summarizer: Summarizer | None = None,
    settings: CompactionSettings | None = None,
    custom_instructions: str | None = None,
    expected_leaf_id: Expected = UNSET,
) -> Entry | None:
    """Compact the active path: summarize its older part and append a
    ``compaction`` entry at the leaf. Returns the entry, or ``None`` when
    there is nothing to compact (empty path, the path already ends in a
    compaction, or the kept region would not move).

    Like Pi's manual ``/compact`` this ignores ``settings.enabled`` (that
    switch governs automatic compaction). The entry is appended only if the
    leaf is still where it was when the path was read. ``before_compact``
    hooks may refuse; ``after_compact`` hooks (the roleplay checkpoint) run
    once the compaction is stored. ``expected_leaf_id``: the leaf the caller
    saw; another one is ``LeafConflict`` before anything is summarized.
    """
    _check_optional_text(custom_instructions, "custom_instructions")
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    settings = settings if settings is not None else CompactionSettings()
    with provider.read(session_id) as view:  # the leaf and its path, in one consistent read
        leaf_id = view.state.leaf_entry_id
        _check_expected_leaf(session_id, leaf_id, expected_leaf_id)
        path = read_path(view, leaf_id)
    hooks.run_before(
        hooks.HookEvent(
            "before_compact",
            provider,
            session_id,
            acting,
            channel,
            data={"leaf_entry_id": leaf_id, "custom_instructions": custom_instructions},
        )
    )
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
    compaction = provider.transact(
        session_id,
        lambda writer: writer.append(entry),
        expected_leaf_id=leaf_id,
        before_commit=audit_writer(
            acting,
            channel,
            Operation.COMPACT_SESSION,
            detail={"first_kept_entry_id": result.first_kept_entry_id, "tokens_before": result.tokens_before},
        ),
    )
    hooks.run_after(
        hooks.HookEvent(
            "after_compact",
            provider,
            session_id,
            acting,
            channel,
            data={"leaf_entry_id": leaf_id, "custom_instructions": custom_instructions},
            result=compaction,
        )
    )
    return compaction


# --- tree navigation --------------------------------------------------------------------


class _NothingToDo(Exception):
    """Navigating to the leaf itself: ends the unit without a write (not an error)."""

    def __init__(self, leaf_entry_id: str | None) -> None:
        super().__init__(leaf_entry_id)
        self.leaf_entry_id = leaf_entry_id


def _destination(target: Entry, target_id: str) -> tuple[str | None, str | None]:
    """Where the leaf goes for ``target`` and the text to re-edit, as Pi's
    ``/tree`` does: a user or custom message → its parent, and its text."""
    if _is_user_message(target):
        return target.get("parentId"), _text_of(message_of(target).get("content"))
    if target.get("type") == "custom_message":
        return target.get("parentId"), _text_of(target.get("content"))
    return target_id, None


def _move_and_append(
    writer: SessionWriter,
    *,
    target_id: str,
    new_leaf_id: str | None,
    old_leaf_id: str | None,
    branch: Any,
    label: str | None,
) -> tuple[Entry | None, Entry | None]:
    """The writes of a navigate: the leaf move, the summary, the label."""
    if new_leaf_id is None:
        writer.reset_leaf()
    else:
        writer.switch_leaf(new_leaf_id)
    summary_entry: Entry | None = None
    if branch is not None:
        summary_entry = writer.append(
            build.branch_summary_entry(
                branch_from_entry_id=new_leaf_id,
                summary=branch.summary,
                details=branch.details,
                from_id=old_leaf_id or "root",
            )
        )
    label_entry: Entry | None = None
    if label:
        labelled_id = summary_entry["id"] if summary_entry is not None else target_id
        label_entry = writer.append(build.label_entry(labelled_id, label))
    return summary_entry, label_entry


def _navigate_in_one_unit(
    provider: SessionTreeProvider,
    session_id: str,
    target_id: str,
    *,
    acting: Any,
    channel: str,
    label: str | None,
    expected_leaf_id: Expected,
) -> NavigateResult:
    """A navigate with nothing to ask between reading and writing: the leaf,
    the target, the move and the label in one unit (one read of the session)."""

    def work(writer: SessionWriter) -> tuple[str | None, str | None, Entry | None, str | None]:
        old_leaf_id = writer.leaf_entry_id if isinstance(expected_leaf_id, Unset) else expected_leaf_id
        if target_id == old_leaf_id:
            raise _NothingToDo(old_leaf_id)
        writer.check_expected_leaf(expected_leaf_id)
        new_leaf_id, editor_text = _destination(writer.get_entry(target_id), target_id)
        _summary, label_entry = _move_and_append(
            writer, target_id=target_id, new_leaf_id=new_leaf_id, old_leaf_id=old_leaf_id, branch=None, label=label
        )
        return old_leaf_id, editor_text, label_entry, writer.leaf_entry_id

    audit = audit_writer(
        acting,
        channel,
        Operation.NAVIGATE_TREE,
        detail={"target_id": target_id, "summarized": False, "label": label},
    )
    try:
        old_leaf_id, editor_text, label_entry, leaf_after = provider.transact(session_id, work, before_commit=audit)
    except _NothingToDo as nothing:
        return {"leaf_entry_id": nothing.leaf_entry_id, "editor_text": None, "summary_entry": None, "label_entry": None}
    data = {"target_id": target_id, "old_leaf_id": old_leaf_id, "summarize": False, "label": label}
    result: NavigateResult = {
        "leaf_entry_id": leaf_after,
        "editor_text": editor_text,
        "summary_entry": None,
        "label_entry": label_entry,
    }
    hooks.run_after(hooks.HookEvent("after_navigate", provider, session_id, acting, channel, data=data, result=result))
    return result


@idempotent()
def navigate_tree(
    *,
    session_id: str,
    target_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    summarize: bool = False,
    summarizer: Summarizer | None = None,
    label: str | None = None,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    expected_leaf_id: Expected = UNSET,
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

    The leaf move, the summary and the label are one unit: all stored, or
    (a refused step, a leaf moved while summarizing: ``LeafConflict``) none.
    ``leaf_entry_id`` in the result is the session's leaf afterwards. Raises
    ``EntryNotFound`` for an unknown target, ``SummarizerError`` (with nothing
    written) when summarizing fails, ``InvalidEntry`` (before anything is
    written) for a ``label`` or ``custom_instructions`` that is not a string.
    ``before_navigate`` hooks may refuse; ``after_navigate`` hooks run after.

    Without a summary to ask for and without ``before_navigate`` hooks,
    nothing needs to happen between reading and writing: the whole navigate
    is one unit, which reads the session once (under its lock).
    """
    _check_optional_text(label, "label")
    _check_optional_text(custom_instructions, "custom_instructions")
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    if not summarize and not hooks.has_hooks("before_navigate"):
        return _navigate_in_one_unit(
            provider,
            session_id,
            target_id,
            acting=acting,
            channel=channel,
            label=label,
            expected_leaf_id=expected_leaf_id,
        )

    # One consistent read for everything before the writes: the leaf, the
    # target and (to summarize) both paths. Hooks and the summarizer run
    # after it, with no lock held.
    old_path: list[Entry] = []
    target_path: list[Entry] = []
    with provider.read(session_id) as view:
        old_leaf_id = view.state.leaf_entry_id if isinstance(expected_leaf_id, Unset) else expected_leaf_id
        if target_id == old_leaf_id:
            return {"leaf_entry_id": old_leaf_id, "editor_text": None, "summary_entry": None, "label_entry": None}
        target = view.get(target_id) if isinstance(target_id, str) else None
        if target is None:
            raise EntryNotFound(f"Entry {target_id} not found in session {session_id}")
        if summarize:
            old_path = read_path(view, old_leaf_id) if old_leaf_id is not None else []
            target_path = read_path(view, target_id)
    data = {"target_id": target_id, "old_leaf_id": old_leaf_id, "summarize": summarize, "label": label}
    hooks.run_before(hooks.HookEvent("before_navigate", provider, session_id, acting, channel, data=dict(data)))
    new_leaf_id, editor_text = _destination(target, target_id)

    branch = None
    if summarize:
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

    # Every summarizer call is done: from here on one unit of writes, refused
    # whole if the leaf moved while we were summarizing.
    def work(writer: SessionWriter) -> tuple[Entry | None, Entry | None, str | None]:
        summary_entry, label_entry = _move_and_append(
            writer, target_id=target_id, new_leaf_id=new_leaf_id, old_leaf_id=old_leaf_id, branch=branch, label=label
        )
        return summary_entry, label_entry, writer.leaf_entry_id

    summary_entry, label_entry, leaf_after = provider.transact(
        session_id,
        work,
        expected_leaf_id=old_leaf_id,
        before_commit=audit_writer(
            acting,
            channel,
            Operation.NAVIGATE_TREE,
            detail={"target_id": target_id, "summarized": branch is not None, "label": label},
        ),
    )
    result: NavigateResult = {
        "leaf_entry_id": leaf_after,
        "editor_text": editor_text,
        "summary_entry": summary_entry,
        "label_entry": label_entry,
    }
    hooks.run_after(hooks.HookEvent("after_navigate", provider, session_id, acting, channel, data=data, result=result))
    return result


# --- fork ----------------------------------------------------------------------------------


@idempotent(Operation.FORK_SESSION)
def fork_session(
    *,
    session_id: str,
    entry_id: str,
    actor: Any,
    channel: str,
    provider: SessionTreeProvider | None = None,
    position: ForkPosition = "before",
    new_session_id: str | None = None,
    title: str | None = None,
    expected_leaf_id: Expected = UNSET,
) -> SessionTreeSession:
    """A new session whose parent is ``session_id``, holding the path up to a point.

    ``position="before"`` (Pi's default) needs a user message and forks at
    its parent, so the message can be written again in the new session; on a
    root user message the new session is empty. ``position="at"`` copies the
    path up to and including ``entry_id``, whatever its type. Labels that
    apply to copied entries are re-created; nothing after the fork point is
    copied. Raises ``EntryNotFound`` for an unknown entry and ``InvalidEntry``
    for a bad position or "before" on anything but a user message.
    ``before_fork`` hooks may refuse; ``after_fork`` hooks get the new session.
    ``expected_leaf_id``: the source's leaf the caller saw (``LeafConflict``
    otherwise). A fork copies completed entries, which never change, so the
    check is made when the fork starts; the source is not locked meanwhile.
    """
    if position not in FORK_POSITIONS:
        raise BadInput(f"Invalid fork position {position!r}; use 'before' or 'at'")
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    # One read: the entry, where the fork ends, and what the new session holds.
    with provider.read(session_id) as view:
        _check_expected_leaf(session_id, view.state.leaf_entry_id, expected_leaf_id)
        entry = view.get(entry_id) if isinstance(entry_id, str) else None
        if entry is None:
            raise EntryNotFound(f"Entry {entry_id} not found in session {session_id}")
        if position == "at":
            fork_leaf_id: str | None = entry_id
        else:
            if not _is_user_message(entry):
                raise InvalidEntry(
                    f"Entry {entry_id} is {_describe(entry)}; forking 'before' needs a user message "
                    "(use position='at' to fork at any entry)"
                )
            fork_leaf_id = entry.get("parentId")
            if fork_leaf_id is not None and view.get(fork_leaf_id) is None:
                # A parent missing from the file (left by Pi's own forks) makes
                # the message a root, as every path walk treats it.
                fork_leaf_id = None
        source = view.session()
        copied = fork_copies(view, fork_leaf_id)
    data = {"entry_id": entry_id, "position": position, "fork_leaf_id": fork_leaf_id}
    hooks.run_before(hooks.HookEvent("before_fork", provider, session_id, acting, channel, data=dict(data)))

    def audit(new: SessionTreeSession) -> None:
        # Two records, one transaction: the source's history names the fork,
        # the fork's history names where it came from.
        record(
            actor=acting,
            channel=channel,
            operation=Operation.FORK_SESSION,
            session_id=session_id,
            entry_ids=[entry_id],
            detail={"new_session_id": new["session_id"], "position": position},
            result=new,
        )
        record(
            actor=acting,
            channel=channel,
            operation=Operation.CREATE_SESSION,
            session_id=new["session_id"],
            leaf_after=new["leaf_entry_id"],
            detail={"forked_from": session_id, "entry_id": entry_id, "position": position, "provider": provider.kind},
        )

    fields = {"title": title} if title is not None else {}
    new_session = provider.create_fork(source, copied, new_session_id=new_session_id, before_commit=audit, **fields)
    hooks.run_after(hooks.HookEvent("after_fork", provider, session_id, acting, channel, data=data, result=new_session))
    return new_session
