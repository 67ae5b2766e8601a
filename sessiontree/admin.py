"""Admin console: agents, session meta rows, audit records, and a tree page per session.

Tree semantics come from the provider (``get_snapshot``), never from the ORM:
the same page shows a ``file`` or a ``mysql`` session. Edits to a session's
meta go through the operations layer (``sessiontree.services``), audited.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from sessiontree import services
from sessiontree.core.errors import SessionTreeError
from sessiontree.core.path import entry_depths
from sessiontree.core.types import Entry, LabelInfo
from sessiontree.models import Agent, AgentSession, AuditRecord
from sessiontree.providers.factory import get_provider_for_session

PREVIEW_CHARS = 140

# --- the tree page: rows built without recursion ---------------------------------


@dataclass
class TreeRow:
    """One line of the tree page: an entry, or the start/end of a folded branch."""

    kind: str  # "entry" | "open" | "close"
    level: int = 0  # branch nesting: how many folded branches enclose this line
    entry_id: str = ""
    entry_type: str = ""
    depth: int = 0  # distance from the root in the entry tree
    preview: str = ""
    marker: str = ""
    label: str = ""
    on_active_path: bool = False
    is_leaf: bool = False
    branch_size: int = 0  # for "open": entries in the folded branch


def _shorten(text: str, limit: int = PREVIEW_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "toolCall":
                arguments = json.dumps(block.get("arguments", {}), ensure_ascii=False, default=str)
                parts.append(f"→ {block.get('name', '?')}({_shorten(arguments, 60)})")
            elif block.get("type") == "image":
                parts.append("[image]")
    return " ".join(parts)


def describe_entry(entry: Entry) -> tuple[str, str]:
    """(marker, preview) for one entry: what kind of line it is and a short text."""
    entry_type = entry.get("type")
    if entry_type == "message":
        message = entry.get("message") or {}
        role = str(message.get("role", "?"))
        if role == "toolResult":
            return role, _shorten(f"{message.get('toolName', '?')}: {_content_text(message.get('content'))}")
        if role == "bashExecution":
            return role, _shorten(f"$ {message.get('command', '')}")
        return role, _shorten(_content_text(message.get("content")))
    if entry_type == "compaction":
        return "compaction", _shorten(
            f"keeps from {entry.get('firstKeptEntryId')}, {entry.get('tokensBefore')} tokens before: "
            f"{entry.get('summary', '')}"
        )
    if entry_type == "branch_summary":
        return "branch summary", _shorten(f"from {entry.get('fromId')}: {entry.get('summary', '')}")
    if entry_type == "model_change":
        return "model", f"{entry.get('provider')}/{entry.get('modelId')}"
    if entry_type == "thinking_level_change":
        return "thinking", str(entry.get("thinkingLevel"))
    if entry_type == "label":
        text = entry.get("label")
        return "label", f'{entry.get("targetId")} ← "{text}"' if text else f"{entry.get('targetId')} (cleared)"
    if entry_type == "session_info":
        return "session name", _shorten(str(entry.get("name") or ""))
    if entry_type == "custom":
        return "custom", _shorten(f"{entry.get('customType')} {entry.get('data', '')}")
    if entry_type == "custom_message":
        return "custom message", _shorten(f"{entry.get('customType')}: {_content_text(entry.get('content'))}")
    return str(entry_type), ""


def build_tree_rows(
    entries: Sequence[Entry], active_path: Sequence[str], labels: Mapping[str, LabelInfo]
) -> list[TreeRow]:
    """The tree as a flat list of rows in display order, iteratively.

    At each branch point the child on the active path (else the first child)
    continues the line at the same level; every other child opens a folded
    branch one level deeper. The active path is thus never folded, and a
    10,000-deep chain stays one level: indentation follows branching, not depth.
    """
    by_id = {entry["id"]: entry for entry in entries}
    depths = entry_depths(entries)
    active = set(active_path)
    leaf_id = active_path[-1] if active_path else None
    children: dict[str | None, list[str]] = {}
    for entry in entries:
        parent_id = entry.get("parentId")
        # As Pi shows a damaged file: a missing (or self) parent makes a root.
        if parent_id not in by_id or parent_id == entry["id"]:
            parent_id = None
        children.setdefault(parent_id, []).append(entry["id"])
    # Parents come before children in append order, so one reverse pass sizes every subtree.
    sizes = dict.fromkeys(by_id, 1)
    for entry in reversed(entries):
        parent_id = entry.get("parentId")
        if parent_id in sizes and parent_id != entry["id"]:
            sizes[parent_id] += sizes[entry["id"]]

    rows: list[TreeRow] = []
    seen: set[str] = set()
    stack: list[tuple[str, str, int]] = []  # (kind, entry id, level), popped last-first

    def schedule(parent_id: str | None, level: int) -> None:
        kids = [kid for kid in children.get(parent_id, []) if kid not in seen]
        if not kids:
            return
        main = next((kid for kid in kids if kid in active), kids[0])
        stack.append(("entry", main, level))
        for kid in reversed([kid for kid in kids if kid != main]):
            stack.extend((("close", kid, level + 1), ("entry", kid, level + 1), ("open", kid, level + 1)))

    schedule(None, 0)
    while stack:
        kind, entry_id, level = stack.pop()
        if kind == "close":
            rows.append(TreeRow(kind=kind, level=level, entry_id=entry_id))
            continue
        if kind == "open":
            marker, preview = describe_entry(by_id[entry_id])
            rows.append(
                TreeRow(
                    kind=kind,
                    level=level,
                    entry_id=entry_id,
                    marker=marker,
                    preview=preview,
                    branch_size=sizes[entry_id],
                )
            )
            continue
        if entry_id in seen:  # a cycle in a corrupt file: show each entry once
            continue
        seen.add(entry_id)
        entry = by_id[entry_id]
        marker, preview = describe_entry(entry)
        label = labels.get(entry_id)
        rows.append(
            TreeRow(
                kind="entry",
                level=level,
                entry_id=entry_id,
                entry_type=str(entry.get("type")),
                depth=depths.get(entry_id, 0),
                preview=preview,
                marker=marker,
                label=label["label"] if label else "",
                on_active_path=entry_id in active,
                is_leaf=entry_id == leaf_id,
            )
        )
        schedule(entry_id, level)
    for entry in entries:  # unreachable from any root (a parent cycle): list them last
        if entry["id"] not in seen:
            seen.add(entry["id"])
            marker, preview = describe_entry(entry)
            rows.append(
                TreeRow(
                    kind="entry",
                    entry_id=entry["id"],
                    entry_type=str(entry.get("type")),
                    preview=preview,
                    marker=f"unreachable {marker}",
                )
            )
    return rows


# --- model admins ---------------------------------------------------------------


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "session_provider", "updated_at")
    list_filter = ("session_provider",)
    search_fields = ("name",)
    readonly_fields = ("created_at", "updated_at")


class AgentSessionForm(forms.ModelForm):
    class Meta:
        model = AgentSession
        fields = ("title", "agent", "user_id", "metadata")

    def clean_metadata(self) -> Any:
        # The provider refuses anything but an object; say so on the form
        # instead of failing the save.
        metadata = self.cleaned_data.get("metadata")
        if not isinstance(metadata, dict):
            raise forms.ValidationError('Metadata must be a JSON object, e.g. {} or {"team": "billing"}.')
        return metadata


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    form = AgentSessionForm
    list_display = ("session_id", "title", "provider", "status", "entry_count", "leaf_entry_id", "updated_at")
    list_filter = ("provider", "status", "agent")
    search_fields = ("session_id", "title", "user_id")
    list_select_related = ("agent",)
    date_hierarchy = "created_at"
    # The tree and its storage are the provider's: never edited from a form.
    # Status changes (archive, delete) are moderation actions of their own.
    readonly_fields = (
        "session_id",
        "provider",
        "status",
        "root_entry_id",
        "leaf_entry_id",
        "entry_count",
        "parent",
        "parent_session_id",
        "cwd",
        "session_file",
        "header",
        "in_flight_entry",
        "created_at",
        "updated_at",
    )
    fieldsets = (
        (None, {"fields": ("session_id", "title", "provider", "status", "agent", "user_id")}),
        ("Tree", {"fields": ("root_entry_id", "leaf_entry_id", "entry_count", "in_flight_entry")}),
        ("Lineage", {"fields": ("parent", "parent_session_id")}),
        ("Storage", {"fields": ("cwd", "session_file", "header", "metadata"), "classes": ("collapse",)}),
        ("Times", {"fields": ("created_at", "updated_at")}),
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # sessions are created by agents, the API or the sync command

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deleting a row would orphan its file; deletion is a moderation action

    def save_model(self, request: HttpRequest, obj: AgentSession, form: Any, change: bool) -> None:
        # The form edits the in-memory row; the operations layer writes it
        # (and may refuse), with the audit record.
        names = ["agent_id" if name == "agent" else name for name in form.changed_data]
        fields = {name: getattr(obj, name) for name in names}
        if fields:
            services.sessions.update_session(session_id=obj.session_id, actor=request.user, channel="admin", **fields)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/tree/",
                self.admin_site.admin_view(self.tree_view),
                name="{}_{}_tree".format(*info),
            ),
            *super().get_urls(),
        ]

    def tree_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        row = self.get_object(request, object_id)
        if row is None:
            raise Http404(f"No session with primary key {object_id!r}")
        if not self.has_view_permission(request, row):
            raise PermissionDenied
        rows: list[TreeRow] = []
        error = ""
        snapshot: dict[str, Any] = {}
        try:
            snapshot = dict(get_provider_for_session(row.session_id).get_snapshot(row.session_id))
            rows = build_tree_rows(snapshot["entries"], snapshot["active_path"], snapshot["labels_by_entry_id"])
        except SessionTreeError as exc:
            error = f"{exc.code}: {exc}"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": row,
            "title": f"Entry tree of {row}",
            "rows": rows,
            "error": error,
            "entry_count": len(snapshot.get("entries", ())),
            "active_path_length": len(snapshot.get("active_path", ())),
            "branch_count": sum(1 for r in rows if r.kind == "open"),
            "leaf_entry_id": (snapshot.get("session") or {}).get("leaf_entry_id"),
            "context_message_count": len((snapshot.get("runtime_context") or {}).get("messages", ())),
        }
        return TemplateResponse(request, "admin/sessiontree/session_tree.html", context)


@admin.register(AuditRecord)
class AuditRecordAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor", "channel", "operation", "session_id", "leaf_before", "leaf_after")
    list_filter = ("channel", "operation")
    search_fields = ("session_id", "actor", "operation")
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
