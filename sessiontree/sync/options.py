"""What a run of ``sync_sessions`` is asked to do (``SyncOptions``)."""

from __future__ import annotations

from dataclasses import dataclass

from sessiontree.core.errors import BadInput
from sessiontree.providers.factory import check_kind
from sessiontree.services.audit import SYNC_ACTOR, Actor

MODES: tuple[str, ...] = ("index", "import", "export")
ON_REWRITE: tuple[str, ...] = ("report", "reimport")
LAYOUTS: tuple[str, ...] = ("pi", "flat")
CHANNEL = "sync"


@dataclass
class SyncOptions:
    mode: str = "import"
    provider: str | None = None  # None: file for index, mysql for import, every provider for export
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
        if self.mode == "index" and self.provider not in (None, "file"):
            raise BadInput("index registers files in place as file sessions: --provider must be file")

    @property
    def target_kind(self) -> str:
        if self.provider is not None:
            return self.provider
        return "file" if self.mode == "index" else "mysql"
