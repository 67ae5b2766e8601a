"""Database tables.

``AgentSession`` is the session meta row of both providers (leaf, status,
title…); for the ``mysql`` provider the entries live in ``AgentSessionEntry``,
for the ``file`` provider in the session's JSONL file. Session lineage (which
session was forked from which) is an MPTT tree over ``AgentSession`` whose
tree ids are their roots' own keys (``providers/lineage.py``); entries are a
plain adjacency list (see docs/architecture.md for why).
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.fields.json import KT
from django.db.models.functions import Left
from mptt.models import MPTTModel, TreeForeignKey

from sessiontree.core.entry_keys import MAX_KEY_LENGTH as ENTRY_KEY_LENGTH
from sessiontree.providers.factory import default_provider_kind, provider_choices

# Provider kinds come from the registry (``SESSIONTREE_PROVIDERS``), evaluated
# when a form, filter or check needs them: a third storage changes no model.
PROVIDER_CHOICES = provider_choices


class Agent(models.Model):  # type: ignore[django-manager-missing]  # the related model is an MPTT model
    """An agent configuration; ``session_provider`` picks where its sessions live."""

    name = models.CharField(max_length=200, unique=True)
    session_provider = models.CharField(
        max_length=16,
        choices=PROVIDER_CHOICES,
        blank=True,
        default="",
        help_text=(
            "Storage of this agent's session trees: a JSONL file per session, or database tables. "
            "Empty: SESSIONTREE_DEFAULT_PROVIDER."
        ),
    )
    config = models.JSONField(default=dict, blank=True)
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=(
            "Sessions of this agent idle for longer than this many days are deleted by apply_retention. "
            "Empty: SESSIONTREE_RETENTION_DAYS (unset there: keep)."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AgentSession(MPTTModel):
    class Status(models.TextChoices):
        ACTIVE = "active"
        ARCHIVED = "archived"
        DELETED = "deleted"

    session_id = models.CharField(max_length=64, unique=True)
    provider = models.CharField(max_length=16, choices=PROVIDER_CHOICES, default=default_provider_kind, db_index=True)
    root_entry_id = models.CharField(max_length=64, null=True, blank=True)
    leaf_entry_id = models.CharField(max_length=64, null=True, blank=True)
    cwd = models.TextField(blank=True, default="")
    session_file = models.CharField(max_length=1024, blank=True, default="")
    # The raw reference a header's ``parentSession`` holds (a session id, or a
    # file path in Pi's own files); ``parent`` is the resolved lineage link.
    parent_session_id = models.CharField(max_length=1024, null=True, blank=True, db_index=True)
    parent = TreeForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions")
    user_id = models.CharField(max_length=191, null=True, blank=True, db_index=True)
    title = models.CharField(max_length=255, null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    metadata = models.JSONField(default=dict, blank=True)
    # The session's Pi header line, kept whole by the mysql provider so that an
    # export to JSONL is lossless (the file provider keeps it in the file).
    header = models.JSONField(default=dict, blank=True)
    # Number of entries; the mysql provider's next entry_seq is entry_count + 1.
    # For the file provider, also how much of the file the row has seen: a file
    # holding more entries was appended to behind the row's back (Pi itself),
    # and its last entry is the leaf; and what tells whether a dead writer's
    # lines were committed (file_provider, "a writer's intent").
    entry_count = models.PositiveIntegerField(default=0)
    # Tips of the tree (entries without children; 1 for a linear session) and
    # compactions: what the session list shows and filters on.
    branch_count = models.PositiveIntegerField(default=0)
    compaction_count = models.PositiveIntegerField(default=0)
    # The mysql storage's leaf, cached for its writes so that locking the row
    # is one plain read: the leaf entry's depth, whether it is in flight and
    # whether it has children. ``leaf_depth`` NULL under a non-NULL leaf means
    # "not cached" (anything that moves the leaf outside the storage sets it
    # so), and the lock then reads the leaf's row instead.
    leaf_depth = models.PositiveIntegerField(null=True, blank=True)
    leaf_in_flight = models.BooleanField(default=False)
    leaf_has_children = models.BooleanField(default=False)
    # The mysql storage: every entry row was stored after its parent (so its
    # path facts are exact) and after the entry it aims at (a label, a
    # context edit): an entry's children and the entries aimed at it all lie
    # among the rows appended after it, which a tree window's line reads in
    # one range (``MySQLView.path_and_children``). A copy of entries in another
    # order (an import naming a parent or target not stored yet) clears it
    # for good; False (the default, and for a row that predates it unless its
    # entries say otherwise, migrations 0023-0024) only means "read by key".
    rows_in_order = models.BooleanField(default=False, db_default=False)
    # The file provider's streaming entry, kept outside the JSONL until it is
    # completed (the file is append-only and never rewritten).
    in_flight_entry = models.JSONField(null=True, blank=True)
    # A short preview of the session's first user message, for lists of
    # untitled sessions without opening their storage. NULL: no user message
    # yet. Written only from ``core.entries.first_message_preview`` (by the
    # provider template when the first user message is stored, by session
    # creation from entries): whatever erases a message's text must clear it.
    first_message_preview = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    # The lineage tree (django-mptt's lft/rght/level/tree_id): each tree's id
    # is its root's own pk, never allocated as MAX + 1, and forks are
    # appended as last children: creating a session shifts no other tree
    # (providers/lineage.py writes these columns).
    tree_id = models.PositiveBigIntegerField(db_index=True, editable=False)

    class Meta:
        # The kernel plan's table names (docs/mysql-provider.md, "Tables").
        db_table = "neta_agent_session"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["agent", "status", "-updated_at"], name="session_agent_status_idx")]
        permissions = [
            ("moderate_session", "Can moderate sessions (move the leaf, label, fork, compact, archive, delete)"),
            ("hard_delete_session", "Can delete sessions and their entries for good"),
        ]

    def __str__(self) -> str:
        return self.title or self.session_id


class AgentSessionEntry(models.Model):
    """One entry of a ``mysql``-provider session: Pi's fields as typed columns.

    ``extra`` keeps what the typed columns cannot: unknown fields (``fields``)
    and the entry's key order (``keys``), so an entry read back equals, as
    JSON, the entry written.
    """

    class Status(models.TextChoices):
        COMPLETED = "completed"
        IN_FLIGHT = "in_flight"

    # Keyed by the session's own id (its public key, not the row's pk), so that
    # every statement of an entry operation names the session by one key: what
    # a session-sharded keyspace routes by (docs/scale-out.md).
    session = models.ForeignKey(
        AgentSession, on_delete=models.CASCADE, related_name="entries", to_field="session_id", db_column="session_id"
    )
    entry_id = models.CharField(max_length=64)
    parent_entry_id = models.CharField(max_length=64, null=True, blank=True)
    entry_seq = models.PositiveIntegerField()
    depth = models.PositiveIntegerField(default=0)
    type = models.CharField(max_length=32)
    timestamp = models.CharField(max_length=40, blank=True, default="")
    message = models.JSONField(null=True, blank=True)
    summary = models.TextField(null=True, blank=True)
    first_kept_entry_id = models.CharField(max_length=64, null=True, blank=True)
    tokens_before = models.BigIntegerField(null=True, blank=True)
    thinking_level = models.CharField(max_length=32, null=True, blank=True)
    provider = models.CharField(max_length=128, null=True, blank=True)
    model_id = models.CharField(max_length=255, null=True, blank=True)
    custom_type = models.CharField(max_length=128, null=True, blank=True)
    data = models.JSONField(null=True, blank=True)
    content = models.JSONField(null=True, blank=True)
    display = models.BooleanField(null=True, blank=True)
    target_entry_id = models.CharField(max_length=64, null=True, blank=True)
    label = models.CharField(max_length=255, null=True, blank=True)
    from_id = models.CharField(max_length=64, null=True, blank=True)
    from_hook = models.BooleanField(null=True, blank=True)
    name = models.CharField(max_length=255, null=True, blank=True)
    details = models.JSONField(null=True, blank=True)
    source_runtime = models.CharField(max_length=64, null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETED)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Facts about the root→entry path, fixed when the entry is stored
    # (core/path_facts.py; ``depth`` is one): the nearest compaction, the
    # nearest entries that set the model and the thinking level, and whether
    # the facts are exact (a row written without them is not: its reads walk
    # the whole path).
    path_compaction_id = models.CharField(max_length=64, null=True, blank=True)
    path_model_id = models.CharField(max_length=64, null=True, blank=True)
    path_thinking_id = models.CharField(max_length=64, null=True, blank=True)
    path_exact = models.BooleanField(default=False, db_default=False)
    # An ancestor to jump to and its depth (Myers' skew-binary jumps): the
    # ancestor of an entry at any depth is found in O(log depth) steps.
    path_jump_id = models.CharField(max_length=64, null=True, blank=True)
    path_jump_depth = models.PositiveIntegerField(null=True, blank=True)
    # A message's ``toolName`` (a tool result's tool; its first 64 characters),
    # computed by the database from ``message`` and never written: the tool
    # results of one tool are read by key (``keyed_reads.tool_results``).
    # Callers check what they read: a false match only costs a row.
    tool_name = models.GeneratedField(
        expression=Left(KT("message__toolName"), 64),
        output_field=models.CharField(max_length=64, null=True, blank=True),
        db_persist=False,
    )
    # The entry's key (``core/entry_keys.py``: a roleplay commit's id, say),
    # written with the row: such entries are read by key
    # (``keyed_reads.entries_with_key``), not by reading a path back.
    entry_key = models.CharField(max_length=ENTRY_KEY_LENGTH, null=True, blank=True)

    class Meta:
        db_table = "neta_agent_session_entry"
        ordering = ["session", "entry_seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "entry_id"], name="entry_unique_id_per_session"),
            models.UniqueConstraint(fields=["session", "entry_seq"], name="entry_unique_seq_per_session"),
        ]
        indexes = [
            models.Index(fields=["session", "parent_entry_id"], name="entry_parent_idx"),
            # Covers the mysql provider's skeleton read (every entry's id and
            # parent, to walk a path) without touching the payload rows.
            models.Index(fields=["session", "entry_seq", "entry_id", "parent_entry_id"], name="entry_skeleton_idx"),
            # Entries of a type, in append order (a page of them from a seq on,
            # ``ids_in_order``; counts by type).
            models.Index(fields=["session", "type", "entry_seq"], name="entry_type_idx"),
            models.Index(fields=["session", "custom_type"], name="entry_custom_type_idx"),
            models.Index(fields=["session", "tool_name"], name="entry_tool_name_idx"),
            # The labels and context edits aimed at some entries (the tree page's
            # window, the entry panel), by key: not every label of the session.
            models.Index(fields=["session", "target_entry_id"], name="entry_target_idx"),
            models.Index(fields=["session", "entry_key"], name="entry_key_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.entry_id}"


class AuditRecord(models.Model):
    """One state change of a session: who did what, from which face.

    Written by the operations layer (``sessiontree/services/``) in the same
    transaction as the change, so a record exists if and only if the change
    happened. ``actor`` is who acted (a username, or a system actor such as
    ``cli:alice`` or ``sync``); ``user`` links the account when there is one.
    """

    class Channel(models.TextChoices):
        ADMIN = "admin"
        API = "api"
        CLI = "cli"
        SYNC = "sync"
        INTERNAL = "internal"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.CharField(max_length=191, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_records"
    )
    channel = models.CharField(max_length=16, choices=Channel.choices)
    operation = models.CharField(max_length=64, db_index=True)
    session_id = models.CharField(max_length=64, db_index=True)
    entry_ids = models.JSONField(default=list, blank=True)
    leaf_before = models.CharField(max_length=64, null=True, blank=True)
    leaf_after = models.CharField(max_length=64, null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["session_id", "-created_at"], name="audit_session_time_idx")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.operation} {self.session_id} by {self.actor}"


class SyncedFile(models.Model):
    """How far ``sync_sessions`` has synced one Pi file, per mode.

    ``index``: the file registered in place as a ``file`` session; ``import``:
    its entries copied into a provider; ``export``: a session written to it.
    ``offset`` is how many bytes were read (everything up to the last complete
    line), ``entry_count`` the entries in them, ``prefix_sha256`` the SHA-256
    of those bytes: a file that only grew is read from ``offset`` on, a file
    whose prefix changed is reported, never mixed. ``size``/``mtime_ns``/
    ``inode`` let a re-run skip an unchanged file without reading it.
    ``session_entry_count`` is the session's entry count after the sync: a
    session that holds more was written to since, in the database.
    """

    class Mode(models.TextChoices):
        INDEX = "index"
        IMPORT = "import"
        EXPORT = "export"

    mode = models.CharField(max_length=16, choices=Mode.choices)
    # SHA-256 of the resolved path: a unique key a long path cannot overflow.
    path_key = models.CharField(max_length=64)
    path = models.TextField()
    session_id = models.CharField(max_length=64, db_index=True)
    provider = models.CharField(max_length=16, choices=PROVIDER_CHOICES)
    size = models.BigIntegerField(default=0)
    mtime_ns = models.BigIntegerField(default=0)
    inode = models.BigIntegerField(default=0)
    offset = models.BigIntegerField(default=0)
    entry_count = models.PositiveIntegerField(default=0)
    prefix_sha256 = models.CharField(max_length=64, blank=True, default="")
    last_entry_id = models.CharField(max_length=64, null=True, blank=True)
    session_entry_count = models.PositiveIntegerField(default=0)
    malformed_lines = models.PositiveIntegerField(default=0)
    version = models.PositiveSmallIntegerField(default=3)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["mode", "path_key"], name="synced_file_unique_path")]

    def __str__(self) -> str:
        return f"{self.mode} {self.path}"


class ModerationFlag(models.Model):
    """An operator's (or a user's, or a classifier's) note that an entry needs
    a look: operator data beside the tree, never an entry in it, so flagging
    moves no leaf and changes no context (docs/moderation.md).

    ``session_id`` and ``entry_id`` name the entry as the audit does (a flag
    outlives a hard-deleted session as a record of what was decided).
    ``source`` is ``operator``, ``user_report`` or ``classifier:<name>``.
    """

    class Status(models.TextChoices):
        OPEN = "open"
        ACTIONED = "actioned"
        DISMISSED = "dismissed"

    session_id = models.CharField(max_length=64, db_index=True)
    entry_id = models.CharField(max_length=64)
    category = models.CharField(max_length=32, db_index=True)
    note = models.TextField(blank=True, default="")
    source = models.CharField(max_length=64, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    opened_by = models.CharField(max_length=191)
    opened_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    opened_at = models.DateTimeField(db_index=True)
    resolved_by = models.CharField(max_length=191, blank=True, default="")
    resolved_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_note = models.TextField(blank=True, default="")

    class Meta:
        db_table = "neta_moderation_flag"
        ordering = ["opened_at", "id"]
        indexes = [
            models.Index(fields=["status", "opened_at"], name="flag_queue_idx"),
            models.Index(fields=["session_id", "entry_id"], name="flag_entry_idx"),
        ]
        permissions = [
            ("flag_entry", "Can flag entries of any session for moderation"),
            ("resolve_flag", "Can resolve moderation flags (action or dismiss them)"),
            ("erase_entry", "Can erase entries in place, with every copy (irreversible)"),
        ]

    def __str__(self) -> str:
        return f"{self.category} flag on {self.session_id}/{self.entry_id} ({self.status})"


class LegalHold(models.Model):
    """A legal hold on one session: while it stands, nothing deletes or erases
    the session (hard delete, erase, user erasure, retention); appends, moves
    and reads go on. Placing and releasing are audited (docs/data-protection.md)."""

    session_id = models.CharField(max_length=64, unique=True)
    reason = models.TextField()
    placed_by = models.CharField(max_length=191)
    placed_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    placed_at = models.DateTimeField()

    class Meta:
        db_table = "neta_legal_hold"
        ordering = ["-placed_at", "-id"]
        permissions = [("place_hold", "Can place and release legal holds on sessions")]

    def __str__(self) -> str:
        return f"legal hold on {self.session_id}"


class IdempotencyRecord(models.Model):
    """A write made with an idempotency key, and what it answered.

    Inserted in the same transaction as the write it records (with its audit
    record), so a key is taken exactly when the write happened; a retry with
    the same key and the same request gets ``result`` back and writes nothing
    (``sessiontree/services/idempotency.py``). ``scope`` is whose key it is
    (a user, or a system actor). Kept ``SESSIONTREE_IDEMPOTENCY_TTL_SECONDS``.
    """

    scope = models.CharField(max_length=200)
    key = models.CharField(max_length=255)
    operation = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=64)
    session_id = models.CharField(max_length=64, blank=True, default="")
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "neta_idempotency_record"
        constraints = [models.UniqueConstraint(fields=["scope", "key"], name="idempotency_scope_key")]

    def __str__(self) -> str:
        return f"{self.operation} by {self.scope} ({self.key})"


class SearchEntry(models.Model):
    """The text of one entry, for search across sessions (docs/moderation.md,
    "Search"): what ``core.text.entry_text`` reads of it, kept by the write
    path of every storage in the same transaction as the entry
    (``providers/search_index.py``). Entries without text have no row.

    The database's own full-text engine indexes ``text``: an FTS5 table over
    this one on SQLite (kept by triggers), an InnoDB ``FULLTEXT`` index on
    MySQL/MariaDB (migration 0014). ``id`` grows with every row indexed: the
    classifiers' cursor (``ClassifierCursor``) follows it.
    """

    id = models.BigAutoField(primary_key=True)
    session_id = models.CharField(max_length=64)
    entry_id = models.CharField(max_length=64)
    entry_type = models.CharField(max_length=32)
    role = models.CharField(max_length=32, null=True, blank=True)
    text = models.TextField()

    class Meta:
        db_table = "neta_search_entry"
        constraints = [
            models.UniqueConstraint(fields=["session_id", "entry_id"], name="search_entry_unique_per_session")
        ]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.entry_id}"


class ClassifierCursor(models.Model):
    """How far ``moderate_sessions`` has scanned the search index for one
    classifier: every ``SearchEntry`` up to ``position`` was read, except the
    ids in ``gaps`` (ranges ``[low, high, first_seen]`` not yet committed when
    the scan passed them, looked at again until ``SESSIONTREE_MODERATION_GAP_SECONDS``
    have passed). ``lease_owner``/``lease_until``: the run scanning it now
    (one at a time per classifier)."""

    classifier = models.CharField(max_length=64, unique=True)
    position = models.BigIntegerField(default=0)
    gaps = models.JSONField(default=list, blank=True)
    scanned = models.BigIntegerField(default=0)
    flagged = models.BigIntegerField(default=0)
    lease_owner = models.CharField(max_length=191, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "neta_classifier_cursor"

    def __str__(self) -> str:
        return f"{self.classifier} at {self.position}"
