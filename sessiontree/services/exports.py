"""A session exported as Pi JSONL, audited, with its manifest (docs/moderation.md,
"Evidence and audit").

Every face exports through ``export_session``: the API (``GET …/export/``
and ``…/export/manifest/``), the admin (the tree page's download and its
manifest link) and ``manage.py export_session``. Each export writes an
``export_session`` audit record (who, from which face, the scope, how many
entries, the SHA-256 and size of the bytes handed out), and comes with a
manifest that says the same: session, scope, entry count, SHA-256 of the
JSONL bytes, exporter and time, so a file can be checked later against both.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, TypedDict

from django.db import transaction
from django.utils import timezone

from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import provider_for
from sessiontree.selectors.export import export_jsonl

from .audit import record, who
from .operations import Operation

MANIFEST_FORMAT = "pi-jsonl"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class ExportManifest(TypedDict):
    format: str
    session_id: str
    scope: str
    entry_id: str | None
    entry_count: int
    bytes: int
    sha256: str
    exporter: str
    channel: str
    exported_at: str


@dataclass(frozen=True)
class SessionExport:
    """The JSONL bytes of one export and their manifest."""

    data: bytes
    manifest: ExportManifest

    @property
    def filename(self) -> str:
        """A file name for a download: session id, scope and entry id (only
        the characters a file name and an HTTP header take plainly)."""
        manifest = self.manifest
        suffix = "" if manifest["scope"] == "full" else f"-{manifest['scope']}"
        if manifest["entry_id"]:
            suffix += "-" + _SAFE.sub("_", manifest["entry_id"])
        return f"{manifest['session_id']}{suffix}.jsonl"

    @property
    def manifest_filename(self) -> str:
        return self.filename.removesuffix(".jsonl") + ".manifest.json"


def build_export(
    provider: SessionTreeProvider, session_id: str, *, scope: str = "full", entry_id: str | None = None
) -> tuple[bytes, int]:
    """The export's bytes and its entry count (a read: nothing audited)."""
    lines = list(export_jsonl(provider, session_id, scope=scope, entry_id=entry_id))
    return b"".join(lines), len(lines) - 1


def export_session(
    *,
    session_id: str,
    actor: Any,
    channel: str,
    scope: str = "full",
    entry_id: str | None = None,
    manifest_only: bool = False,
    provider: SessionTreeProvider | None = None,
) -> SessionExport:
    """Export ``session_id`` (``scope`` ``full``, ``active`` or ``subtree``;
    ``entry_id`` as ``selectors.export`` takes it) and audit it. The audit
    record's detail holds the scope, entry count, size and SHA-256 of the
    bytes; ``manifest_only`` notes that only the manifest was handed out."""
    acting, channel = who(actor, channel)
    provider = provider_for(provider, session_id)
    data, entry_count = build_export(provider, session_id, scope=scope, entry_id=entry_id)
    if scope == "full":
        entry_id = None  # a whole tree starts at no entry (one given is not used)
    digest = hashlib.sha256(data).hexdigest()
    now = timezone.now()
    manifest: ExportManifest = {
        "format": MANIFEST_FORMAT,
        "session_id": session_id,
        "scope": scope,
        "entry_id": entry_id,
        "entry_count": entry_count,
        "bytes": len(data),
        "sha256": digest,
        "exporter": acting.name,
        "channel": channel,
        "exported_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    detail: dict[str, Any] = {"scope": scope, "entries": entry_count, "bytes": len(data), "sha256": digest}
    if manifest_only:
        detail["manifest_only"] = True
    with transaction.atomic():
        record(
            actor=acting,
            channel=channel,
            operation=Operation.EXPORT_SESSION,
            session_id=session_id,
            entry_ids=[entry_id] if entry_id else [],
            detail=detail,
        )
    return SessionExport(data=data, manifest=manifest)


__all__ = ["MANIFEST_FORMAT", "ExportManifest", "SessionExport", "build_export", "export_session"]
