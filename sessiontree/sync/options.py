"""What a run of ``sync_sessions`` is asked to do (``SyncOptions``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from sessiontree.core.errors import BadInput
from sessiontree.providers.factory import check_kind, file_registering_provider
from sessiontree.services.audit import SYNC_ACTOR, Actor

MODES: tuple[str, ...] = ("index", "import", "export")
ON_REWRITE: tuple[str, ...] = ("report", "reimport")
LAYOUTS: tuple[str, ...] = ("pi", "flat")
CHANNEL = "sync"


@dataclass
class SyncOptions:
    mode: str = "import"
    # None: the provider that registers files in place for index,
    # SESSIONTREE_SYNC_IMPORT_PROVIDER for import, every provider for export.
    provider: str | None = None
    dry_run: bool = False
    workers: int = 1
    on_rewrite: str = "report"
    migrate: bool = False  # index: let v1/v2 files be migrated to v3 in place
    layout: str = "pi"  # export: Pi's --<cwd>--/<time>_<id>.jsonl, or flat <id>.jsonl
    checksum: bool = False  # re-hash files whose size and mtime did not change
    actor: Actor = SYNC_ACTOR
    channel: str = CHANNEL

    def check(self) -> None:
        if self.mode not in MODES:
            raise BadInput(f"Unknown mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.on_rewrite not in ON_REWRITE:
            raise BadInput(f"Unknown --on-rewrite {self.on_rewrite!r}; use report or reimport")
        if self.layout not in LAYOUTS:
            raise BadInput(f"Unknown layout {self.layout!r}; use one of {', '.join(LAYOUTS)}")
        if self.workers < 1:
            raise BadInput("--workers must be at least 1")
        if self.provider is not None:
            self.provider = check_kind(self.provider)
        if self.mode == "index" and self.provider not in (None, self.registering_kind):
            raise BadInput(
                f"index registers files in place as {self.registering_kind} sessions: "
                f"--provider must be {self.registering_kind}"
            )

    @property
    def registering_kind(self) -> str:
        """The kind of the provider that adopts Pi files where they lie."""
        return file_registering_provider().kind

    @property
    def target_kind(self) -> str:
        if self.provider is not None:
            return self.provider
        if self.mode == "index":
            return self.registering_kind
        return check_kind(settings.SESSIONTREE_SYNC_IMPORT_PROVIDER)
