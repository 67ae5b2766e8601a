"""Load a small demo data set: branched coding sessions, a fork, a compaction
and a roleplay session, written through the provider API only.

Idempotent: sessions have fixed ids and one that already exists is left as
it is; ``--reset`` deletes the demo sessions first and builds them again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessiontree.core.errors import SessionAlreadyExists, SessionNotFound, SessionTreeError
from sessiontree.models import Agent
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import PROVIDER_KINDS, get_provider, get_provider_for_session

MODEL_SONNET = ("anthropic", "claude-sonnet-4-5")
MODEL_CODEX = ("openai", "gpt-5.1-codex")


# --- messages in Pi's shapes ----------------------------------------------------


def _now_ms() -> int:
    return int(time.time() * 1000)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": _now_ms()}


def assistant(
    text: str,
    *,
    model: tuple[str, str] = MODEL_SONNET,
    tool_calls: Sequence[tuple[str, str, dict[str, Any]]] = (),
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [
        {"type": "toolCall", "id": call_id, "name": name, "arguments": args} for call_id, name, args in tool_calls
    ]
    output = max(1, len(text) // 4)
    return {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages" if model[0] == "anthropic" else "openai-responses",
        "provider": model[0],
        "model": model[1],
        "usage": {"input": 1200, "output": output, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1200 + output},
        "stopReason": "toolUse" if tool_calls else "stop",
        "timestamp": _now_ms(),
    }


def tool_result(call_id: str, tool_name: str, text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool_name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": _now_ms(),
    }


# --- the demo sessions ------------------------------------------------------------


@dataclass(frozen=True)
class DemoSession:
    session_id: str
    title: str
    agent: str
    user_id: str
    build: Callable[[SessionTreeProvider, DemoSession, int | None], None]


def build_coding_1(provider: SessionTreeProvider, spec: DemoSession, agent_id: int | None) -> None:
    """Three branches from one answer: Decimal (labelled), integer cents
    (abandoned, summarized), rounding at the edge (the leaf, another model)."""
    sid = spec.session_id
    provider.create_session(session_id=sid, cwd="/srv/shop", agent_id=agent_id, user_id=spec.user_id, title=spec.title)
    provider.append_model_change(sid, *MODEL_SONNET)
    provider.append_thinking_level_change(sid, "medium")
    bug = provider.append_message(
        sid, user("Invoice totals are off by one cent for some orders. Can you find out why?")
    )
    provider.append_message(
        sid,
        assistant(
            "Let me read the invoice code first.",
            tool_calls=[("call_read_1", "read", {"path": "billing/invoice.py"})],
        ),
    )
    provider.append_message(
        sid,
        tool_result(
            "call_read_1", "read", "def total(lines):\n    return sum(line.price * line.qty for line in lines)\n"
        ),
    )
    options = provider.append_message(
        sid,
        assistant(
            "`total()` sums binary floats, so 0.1 + 0.2 style errors leak into the cents. "
            "Two fixes: compute with `Decimal`, or store amounts as integer cents."
        ),
    )
    provider.append_label_change(sid, bug["id"], "bug report")

    # Branch A: Decimal.
    provider.append_message(sid, user("Use Decimal with ROUND_HALF_UP."))
    decimal_fix = provider.append_message(
        sid, assistant("Done: `total()` now sums `Decimal` amounts and quantizes to cents. All 212 tests pass.")
    )
    provider.append_label_change(sid, decimal_fix["id"], "decimal fix")

    # Branch B: integer cents, abandoned.
    provider.switch_leaf(sid, options["id"])
    provider.append_message(sid, user("Store amounts as integer cents instead."))
    provider.append_message(
        sid, assistant("That touches 14 files and needs a schema migration for three tables. Shall I go ahead?")
    )

    # Branch C: back to the options with a summary of B, on another model.
    provider.append_branch_summary(
        sid,
        branch_from_entry_id=options["id"],
        summary="Explored storing amounts as integer cents: it needs a schema migration across 14 files; "
        "abandoned in favour of a smaller change.",
    )
    provider.append_thinking_level_change(sid, "high")
    provider.append_model_change(sid, *MODEL_CODEX)
    provider.append_message(sid, user("Keep floats in the model but round at the edge: quantize in total()."))
    provider.append_message(
        sid,
        assistant(
            "Rounded once at the end of `total()` with `round(x, 2)` via Decimal; added a regression test.",
            model=MODEL_CODEX,
        ),
    )


def build_coding_1_fork(provider: SessionTreeProvider, spec: DemoSession, agent_id: int | None) -> None:
    """A fork of demo-coding-1 at its "decimal fix" answer, continued on its own."""
    source_id = "demo-coding-1"
    labels = provider.get_snapshot(source_id)["labels_by_entry_id"]
    target = next((entry_id for entry_id, info in labels.items() if info["label"] == "decimal fix"), None)
    if target is None:
        raise CommandError(f"Session {source_id} has no entry labelled 'decimal fix' to fork from")
    provider.create_branched_session(source_id, target, new_session_id=spec.session_id)
    provider.update_session(spec.session_id, title=spec.title)
    provider.append_message(spec.session_id, user("Also add a regression test for the 0.1 + 0.2 case."))
    provider.append_message(
        spec.session_id, assistant("Added `test_total_rounds_half_up` with three line items of 0.10, 0.20 and 0.35.")
    )


def build_coding_2(provider: SessionTreeProvider, spec: DemoSession, agent_id: int | None) -> None:
    """A long investigation, compacted, with a side branch left behind."""
    sid = spec.session_id
    provider.create_session(
        session_id=sid, cwd="/srv/exporter", agent_id=agent_id, user_id=spec.user_id, title=spec.title
    )
    provider.append_model_change(sid, *MODEL_SONNET)
    provider.append_message(sid, user("CI fails about one run in ten on test_export. Find the cause."))
    provider.append_message(
        sid,
        assistant(
            "Running it repeatedly to reproduce.",
            tool_calls=[("call_bash_1", "bash", {"command": "pytest tests/test_export.py --count 20 -q"})],
        ),
    )
    provider.append_message(sid, tool_result("call_bash_1", "bash", "2 failed, 18 passed in 9.81s"))
    provider.append_message(sid, assistant("Both failures compare export dates around midnight UTC."))
    provider.append_message(sid, user("Show me the fixture."))
    provider.append_message(
        sid,
        assistant("Reading it.", tool_calls=[("call_read_2", "read", {"path": "tests/conftest.py"})]),
    )
    provider.append_message(
        sid,
        tool_result("call_read_2", "read", "@pytest.fixture\ndef export_day():\n    return datetime.now().date()\n"),
    )
    cause = provider.append_message(
        sid, assistant("The fixture uses local `datetime.now()` while the exporter uses UTC: they disagree at night.")
    )
    keep_from = provider.append_message(sid, user("Fix it with a frozen clock."))
    provider.append_message(sid, assistant("Froze the clock at 2024-03-01T23:59:30Z in the fixture; 20/20 passed."))
    provider.append_compaction(
        sid,
        summary="## Goal\nFix the flaky test_export.\n\n## Progress\n- Reproduced: 2 of 20 runs fail.\n"
        "- Cause: the fixture's local date vs the exporter's UTC date around midnight.\n\n"
        "## Next steps\n- Freeze the clock, then run the suite repeatedly.",
        first_kept_entry_id=keep_from["id"],
        tokens_before=48211,
    )
    provider.append_message(sid, user("Now run the whole suite 50 times."))
    green = provider.append_message(sid, assistant("50/50 runs passed."))
    provider.append_custom_message(sid, "ci-status", "Pipeline #1842 passed on main.", display=True)
    tip = provider.append_label_change(sid, green["id"], "green")

    # A side branch from the diagnosis, then back to the compacted line.
    provider.switch_leaf(sid, cause["id"])
    provider.append_message(sid, user("Could we inject a clock instead of freezing time?"))
    provider.append_message(sid, assistant("Yes: pass `today=` into `export()`; the fixture then supplies it."))
    provider.switch_leaf(sid, tip["id"])


ROLEPLAY_COMMIT = {
    "commitId": "c1",
    "characterId": "alice",
    "source": "turn",
    "ops": [{"op": "add", "path": "/hair", "value": "short"}],
}


def build_roleplay(provider: SessionTreeProvider, spec: DemoSession, agent_id: int | None) -> None:
    """A scene with one state commit, then a reroll of the next exchange."""
    sid = spec.session_id
    provider.create_session(
        session_id=sid,
        cwd="",
        agent_id=agent_id,
        user_id=spec.user_id,
        title=spec.title,
        metadata={"characterId": "alice"},
    )
    provider.append_session_info(sid, "Alice at the Crossroads Inn")
    provider.append_message(sid, user("*I push open the inn door.* Alice? You cut your hair!"))
    provider.append_message(
        sid, assistant("*Alice runs a hand through her newly cropped hair and grins.* Shorter is easier on the road.")
    )
    commit = provider.append_custom_entry(sid, "pi-roleplay-commit", ROLEPLAY_COMMIT)
    provider.append_label_change(sid, commit["id"], "haircut")
    provider.append_message(sid, user("It suits you. Any news from the north road?"))
    provider.append_message(
        sid, assistant("*She lowers her voice.* Bandits at the old bridge. Three caravans this month.")
    )

    # Reroll: the same moment, a different question.
    provider.switch_leaf(sid, commit["id"])
    provider.append_message(sid, user("Let's sit by the fire. Tell me where you've been."))
    provider.append_message(
        sid, assistant("*She pulls two stools closer to the hearth.* South, mostly. The salt marshes.")
    )


DEMO_SESSIONS: tuple[DemoSession, ...] = (
    DemoSession("demo-coding-1", "Invoice totals off by a cent", "demo-coder", "demo-user", build_coding_1),
    DemoSession("demo-coding-1-fork", "Decimal fix, continued", "demo-coder", "demo-user", build_coding_1_fork),
    DemoSession("demo-coding-2", "Flaky CI: test_export", "demo-coder", "demo-user", build_coding_2),
    DemoSession("demo-roleplay-1", "Alice at the Crossroads Inn", "demo-roleplay", "demo-player", build_roleplay),
)


class Command(BaseCommand):
    help = "Load a small demo data set of branched sessions (idempotent: existing demo sessions are kept)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--provider",
            choices=PROVIDER_KINDS,
            default=None,
            help="Storage for the demo sessions (default: SESSIONTREE_DEFAULT_PROVIDER).",
        )
        parser.add_argument("--reset", action="store_true", help="Delete the demo sessions first, then rebuild them.")
        parser.add_argument("--dry-run", action="store_true", help="Say what would be done, change nothing.")

    def handle(self, *args: Any, provider: str | None, reset: bool, dry_run: bool, **options: Any) -> None:
        store = get_provider(provider)
        created = present = registered = 0
        if reset:
            self._reset(dry_run=dry_run)
        for spec in DEMO_SESSIONS:
            owner = None if reset else self._owner(spec.session_id)
            if owner is not None:
                present += 1
                where = "" if owner.kind == store.kind else f" (in the {owner.kind} provider)"
                self.stdout.write(f"Exists {spec.session_id}{where}")
                continue
            if dry_run:
                self.stdout.write(f"Would create {spec.session_id}")
                created += 1
                continue
            agent, _ = Agent.objects.get_or_create(name=spec.agent, defaults={"session_provider": store.kind})
            try:
                spec.build(store, spec, agent.pk)
            except SessionAlreadyExists:
                self._register_orphan_file(store, spec, agent.pk)
                registered += 1
                continue
            except SessionTreeError as exc:
                raise CommandError(f"Could not build demo session {spec.session_id}: {exc}") from exc
            created += 1
            self.stdout.write(f"Created {spec.session_id}")
        verb = "would be created" if dry_run else "created"
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo data ({store.kind} provider): {len(DEMO_SESSIONS)} sessions, "
                f"{created} {verb}, {present} already present"
                + (f", {registered} registered from existing files." if registered else ".")
            )
        )

    @staticmethod
    def _owner(session_id: str) -> SessionTreeProvider | None:
        try:
            return get_provider_for_session(session_id)
        except SessionNotFound:
            return None

    def _reset(self, *, dry_run: bool) -> None:
        # Forks first, then their sources.
        for spec in reversed(DEMO_SESSIONS):
            owner = self._owner(spec.session_id)
            if owner is None:
                continue
            if dry_run:
                self.stdout.write(f"Would delete {spec.session_id}")
                continue
            owner.delete_session(spec.session_id, hard=True)
            self.stdout.write(f"Deleted {spec.session_id}")

    def _register_orphan_file(self, store: SessionTreeProvider, spec: DemoSession, agent_id: int | None) -> None:
        """The session's file exists but its row does not (the database was
        reset): adopt the file as the sync command would, leaf = last entry."""
        register = getattr(store, "register_existing_file", None)
        if register is None:
            raise CommandError(f"Demo session {spec.session_id} already exists in the {store.kind} provider")
        register(spec.session_id, title=spec.title, agent_id=agent_id, user_id=spec.user_id)
        self.stdout.write(f"Registered the existing file of {spec.session_id}")
