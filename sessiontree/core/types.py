"""Typed shapes of Pi's session format and of our session meta.

Entries stay plain dicts with Pi's camelCase keys (decoded once, passed around
unchanged, so unknown fields survive). These TypedDicts document and type-check
them; they add no runtime cost. ``total=False`` marks Pi's optional keys.
"""

# No ``from __future__ import annotations`` here: under it Python 3.11 cannot see
# ``NotRequired`` at run time and reports every key as required.

from typing import Any, Final, Literal, NotRequired, TypedDict


class Unset:
    """The type of ``UNSET``: "argument omitted" where ``None`` has a meaning
    of its own (``expected_leaf_id=None`` expects no leaf; omitted, nothing is
    expected)."""

    _instance: "Unset | None" = None

    def __new__(cls) -> "Unset":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = Unset()

CURRENT_SESSION_VERSION = 3

# A storage kind the provider registry knows (``SESSIONTREE_PROVIDERS``:
# ``file`` and ``mysql`` by default); kinds are never listed here, so a third
# storage needs no change to the kernel.
SessionTreeProviderKind = str
SessionStatus = Literal["active", "archived", "deleted"]

ENTRY_TYPES: frozenset[str] = frozenset(
    {
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        # Pi 1.x
        "context_edit",
        "usage",
    }
)


class SessionHeader(TypedDict):
    type: Literal["session"]
    version: NotRequired[int]  # absent in v1 files
    id: str
    timestamp: str
    cwd: str
    parentSession: NotRequired[str]


class AgentMessage(TypedDict, total=False):
    """A Pi agent message: ``user``, ``assistant``, ``toolResult``, ``bashExecution``, ``custom``…"""

    role: str
    content: Any
    provider: str
    model: str
    api: str
    usage: dict[str, Any]
    stopReason: str
    timestamp: int
    toolCallId: str
    toolName: str
    details: Any
    isError: bool


class SessionEntryBase(TypedDict):
    type: str
    id: str
    parentId: str | None
    timestamp: str


class SessionMessageEntry(SessionEntryBase):
    message: AgentMessage


class ThinkingLevelChangeEntry(SessionEntryBase):
    thinkingLevel: str


class ModelChangeEntry(SessionEntryBase):
    provider: str
    modelId: str


class CompactionEntry(SessionEntryBase):
    summary: str
    # The first entry kept from before the compaction; the compaction's own id
    # (or null) keeps none (Pi's retain-none compaction).
    firstKeptEntryId: str | None
    tokensBefore: int
    details: NotRequired[Any]
    fromHook: NotRequired[bool]
    usage: NotRequired[dict[str, Any]]  # the summarizer's usage
    systemMessage: NotRequired[dict[str, Any]]  # prompt and tools in force, replayed first


class BranchSummaryEntry(SessionEntryBase):
    fromId: str
    summary: str
    details: NotRequired[Any]
    fromHook: NotRequired[bool]


class CustomEntry(SessionEntryBase):
    customType: str
    data: NotRequired[Any]


class CustomMessageEntry(SessionEntryBase):
    customType: str
    content: Any
    display: bool
    details: NotRequired[Any]


class LabelEntry(SessionEntryBase):
    targetId: str
    label: NotRequired[str | None]


class SessionInfoEntry(SessionEntryBase):
    name: NotRequired[str]  # empty clears the session name


class ContextReplacement(TypedDict):
    content: Any  # a string or a list of content blocks


class ContextEditEntry(SessionEntryBase):
    targetId: str
    replacement: ContextReplacement | None  # null omits the target from the context


class UsageEntry(SessionEntryBase):
    kind: str
    provider: str
    model: str
    usage: dict[str, Any]
    note: NotRequired[str]


SessionTreeEntry = (
    SessionMessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | ContextEditEntry
    | UsageEntry
)
# Entries are handled as plain dicts everywhere; this alias is what signatures use.
Entry = dict[str, Any]


class ModelRef(TypedDict):
    provider: str
    modelId: str


class SessionContext(TypedDict):
    messages: list[dict[str, Any]]
    thinking_level: str
    model: ModelRef | None
    source_entry_ids: list[str]


class SessionTreeSession(TypedDict):
    session_id: str
    provider: SessionTreeProviderKind
    root_entry_id: str | None
    leaf_entry_id: str | None
    cwd: str | None
    session_file: str | None
    parent_session_id: str | None
    agent_id: int | None
    user_id: str | None
    title: str | None
    status: SessionStatus
    metadata: dict[str, Any]
    # Tree stats every provider reports (beyond the plan's contract names).
    entry_count: NotRequired[int]
    branch_count: NotRequired[int]  # tips: entries without children (1 for a linear session)
    compaction_count: NotRequired[int]
    created_at: str
    updated_at: str


class LabelInfo(TypedDict):
    label: str
    label_entry_id: str
    timestamp: str


class TreeNode(TypedDict):
    entry: Entry
    children: list["TreeNode"]
    label: str | None


class SessionSnapshot(TypedDict):
    session: SessionTreeSession
    entries: list[Entry]
    active_path: list[str]
    root_entry_ids: list[str]  # entries without a parent, in append order
    children_by_parent_id: dict[str, list[str]]  # real parent ids only
    labels_by_entry_id: dict[str, LabelInfo]
    runtime_context: SessionContext
