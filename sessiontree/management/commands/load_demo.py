"""Load a demo data set: branched coding sessions, forks (and a fork of a
fork), compactions, a roleplay session, a long session of about 2,000
entries, and sessions stored in the ``mysql`` provider.

Every write goes through the operations layer (``sessiontree.services``) as
``cli:<os user>`` on the ``cli`` channel, in batches, so each session's
history shows how it was made. Idempotent: sessions have fixed ids and one
that already exists is left as it is; ``--reset`` deletes the demo sessions
for good first and builds them again.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import CommandError, CommandParser

from sessiontree import services
from sessiontree.core import entries as build
from sessiontree.core.compaction import estimate_tokens
from sessiontree.core.errors import SessionAlreadyExists, SessionNotFound
from sessiontree.core.ids import new_entry_id
from sessiontree.core.types import Entry
from sessiontree.management.base import SessionTreeCommand
from sessiontree.models import Agent
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider, get_provider_for_session, provider_kinds
from sessiontree.services.audit import Actor

MODEL_SONNET = ("anthropic", "claude-sonnet-4-5")
MODEL_CODEX = ("openai", "gpt-5.1-codex")
CHANNEL = "cli"


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
    input_tokens: int = 1200,
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
        "usage": {
            "input": input_tokens,
            "output": output,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": input_tokens + output,
        },
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


msg = build.message_entry


# --- writing through the operations layer ---------------------------------------------


class DemoWriter:
    """One demo session's writes, each a service call as the command's actor."""

    def __init__(self, session_id: str, actor: Actor) -> None:
        self.session_id = session_id
        self.actor = actor

    def add(self, *entries: Entry) -> list[Entry]:
        """Append ``entries`` in one batch (each a child of the one before)."""
        return services.entries.append_entries(
            session_id=self.session_id, entries=list(entries), actor=self.actor, channel=CHANNEL
        )

    def switch(self, entry_id: str) -> None:
        services.tree.switch_leaf(session_id=self.session_id, entry_id=entry_id, actor=self.actor, channel=CHANNEL)


@dataclass(frozen=True)
class DemoSession:
    session_id: str
    title: str
    agent: str
    user_id: str
    build: Callable[[DemoSession, str, Agent, Actor], None]
    provider: str | None = None  # None: the command's --provider (default SESSIONTREE_DEFAULT_PROVIDER)
    source: str | None = None  # a fork's source session


def _create(spec: DemoSession, kind: str, agent: Agent, actor: Actor, **fields: Any) -> DemoWriter:
    services.sessions.create_session(
        actor=actor,
        channel=CHANNEL,
        kind=kind,
        agent=agent,
        session_id=spec.session_id,
        user_id=spec.user_id,
        title=spec.title,
        **fields,
    )
    return DemoWriter(spec.session_id, actor)


def build_coding_1(spec: DemoSession, kind: str, agent: Agent, actor: Actor) -> None:
    """Three branches from one answer: Decimal (labelled), integer cents
    (abandoned, summarized), rounding at the edge (the leaf, another model)."""
    demo = _create(spec, kind, agent, actor, cwd="/srv/shop")
    _bug, _call, _result, options = demo.add(
        build.model_change_entry(*MODEL_SONNET),
        build.thinking_level_change_entry("medium"),
        msg(user("Invoice totals are off by one cent for some orders. Can you find out why?")),
        msg(
            assistant(
                "Let me read the invoice code first.",
                tool_calls=[("call_read_1", "read", {"path": "billing/invoice.py"})],
            )
        ),
        msg(
            tool_result(
                "call_read_1", "read", "def total(lines):\n    return sum(line.price * line.qty for line in lines)\n"
            )
        ),
        msg(
            assistant(
                "`total()` sums binary floats, so 0.1 + 0.2 style errors leak into the cents. "
                "Two fixes: compute with `Decimal`, or store amounts as integer cents."
            )
        ),
    )[2:]
    # Branch A: Decimal (the bug report's label is appended here, on this branch, as Pi would).
    demo.add(build.label_entry(_bug["id"], "bug report"), msg(user("Use Decimal with ROUND_HALF_UP.")))
    decimal_fix = demo.add(
        msg(assistant("Done: `total()` now sums `Decimal` amounts and quantizes to cents. All 212 tests pass."))
    )[0]
    demo.add(build.label_entry(decimal_fix["id"], "decimal fix"))

    # Branch B: integer cents, abandoned.
    demo.switch(options["id"])
    demo.add(
        msg(user("Store amounts as integer cents instead.")),
        msg(assistant("That touches 14 files and needs a schema migration for three tables. Shall I go ahead?")),
    )

    # Branch C: back to the options with a summary of B, on another model.
    demo.switch(options["id"])
    demo.add(
        build.branch_summary_entry(
            branch_from_entry_id=options["id"],
            summary="Explored storing amounts as integer cents: it needs a schema migration across 14 files; "
            "abandoned in favour of a smaller change.",
        ),
        build.thinking_level_change_entry("high"),
        build.model_change_entry(*MODEL_CODEX),
        msg(user("Keep floats in the model but round at the edge: quantize in total().")),
        msg(
            assistant(
                "Rounded once at the end of `total()` with `round(x, 2)` via Decimal; added a regression test.",
                model=MODEL_CODEX,
            )
        ),
    )


def _fork(spec: DemoSession, label: str, actor: Actor) -> DemoWriter:
    """Fork ``spec.source`` at the entry labelled ``label`` into ``spec.session_id``."""
    assert spec.source is not None
    provider = get_provider_for_session(spec.source)
    labels = provider.get_snapshot(spec.source)["labels_by_entry_id"]
    target = next((entry_id for entry_id, info in labels.items() if info["label"] == label), None)
    if target is None:
        raise CommandError(f"Session {spec.source} has no entry labelled {label!r} to fork from")
    services.tree.fork_session(
        provider=provider,
        session_id=spec.source,
        entry_id=target,
        position="at",
        new_session_id=spec.session_id,
        title=spec.title,
        actor=actor,
        channel=CHANNEL,
    )
    return DemoWriter(spec.session_id, actor)


def build_coding_1_fork(spec: DemoSession, kind: str, agent: Agent, actor: Actor) -> None:
    """A fork of demo-coding-1 at its "decimal fix" answer, continued on its own."""
    demo = _fork(spec, "decimal fix", actor)
    demo.add(
        msg(user("Also add a regression test for the 0.1 + 0.2 case.")),
        msg(assistant("Added `test_total_rounds_half_up` with three line items of 0.10, 0.20 and 0.35.")),
    )
    tested = demo.add(msg(user("Does it cover refunds too?")), msg(assistant("Not yet: refunds use `credit()`.")))
    demo.add(build.label_entry(tested[1]["id"], "refunds next"))


def build_coding_1_fork_of_fork(spec: DemoSession, kind: str, agent: Agent, actor: Actor) -> None:
    """A fork of the fork: the refunds work split off on its own."""
    demo = _fork(spec, "refunds next", actor)
    demo.add(
        msg(user("Apply the same Decimal rounding in credit().")),
        msg(assistant("`credit()` now quantizes like `total()`; refunds of 0.35 round to 0.35, not 0.34.")),
    )


def build_coding_2(spec: DemoSession, kind: str, agent: Agent, actor: Actor) -> None:
    """A long investigation, compacted, with a side branch left behind."""
    demo = _create(spec, kind, agent, actor, cwd="/srv/exporter")
    written = demo.add(
        build.model_change_entry(*MODEL_SONNET),
        msg(user("CI fails about one run in ten on test_export. Find the cause.")),
        msg(
            assistant(
                "Running it repeatedly to reproduce.",
                tool_calls=[("call_bash_1", "bash", {"command": "pytest tests/test_export.py --count 20 -q"})],
            )
        ),
        msg(tool_result("call_bash_1", "bash", "2 failed, 18 passed in 9.81s")),
        msg(assistant("Both failures compare export dates around midnight UTC.")),
        msg(user("Show me the fixture.")),
        msg(assistant("Reading it.", tool_calls=[("call_read_2", "read", {"path": "tests/conftest.py"})])),
        msg(
            tool_result("call_read_2", "read", "@pytest.fixture\ndef export_day():\n    return datetime.now().date()\n")
        ),
        msg(assistant("The fixture uses local `datetime.now()` while the exporter uses UTC: they disagree at night.")),
        msg(user("Fix it with a frozen clock.")),
        msg(assistant("Froze the clock at 2024-03-01T23:59:30Z in the fixture; 20/20 passed.")),
    )
    cause, keep_from = written[8], written[9]
    green = demo.add(
        build.compaction_entry(
            summary="## Goal\nFix the flaky test_export.\n\n## Progress\n- Reproduced: 2 of 20 runs fail.\n"
            "- Cause: the fixture's local date vs the exporter's UTC date around midnight.\n\n"
            "## Next steps\n- Freeze the clock, then run the suite repeatedly.",
            first_kept_entry_id=keep_from["id"],
            tokens_before=48211,
        ),
        msg(user("Now run the whole suite 50 times.")),
        msg(assistant("50/50 runs passed.")),
        build.custom_message_entry("ci-status", "Pipeline #1842 passed on main.", display=True),
    )[2]
    tip = demo.add(build.label_entry(green["id"], "green"))[0]

    # A side branch from the diagnosis, then back to the compacted line.
    demo.switch(cause["id"])
    demo.add(
        msg(user("Could we inject a clock instead of freezing time?")),
        msg(assistant("Yes: pass `today=` into `export()`; the fixture then supplies it.")),
    )
    demo.switch(tip["id"])


ROLEPLAY_COMMIT = {
    "commitId": "c1",
    "characterId": "alice",
    "source": "turn",
    "ops": [{"op": "add", "path": "/hair", "value": "short"}],
}


def build_roleplay(spec: DemoSession, kind: str, agent: Agent, actor: Actor) -> None:
    """A scene with one state commit, then a reroll of the next exchange."""
    demo = _create(spec, kind, agent, actor, cwd="", metadata={"characterId": "alice"})
    commit = demo.add(
        build.session_info_entry("Alice at the Crossroads Inn"),
        msg(user("*I push open the inn door.* Alice? You cut your hair!")),
        msg(assistant("*Alice runs a hand through her newly cropped hair and grins.* Shorter is easier on the road.")),
        build.custom_entry("pi-roleplay-commit", ROLEPLAY_COMMIT),
    )[-1]
    demo.add(
        build.label_entry(commit["id"], "haircut"),
        msg(user("It suits you. Any news from the north road?")),
        msg(assistant("*She lowers her voice.* Bandits at the old bridge. Three caravans this month.")),
    )
    # Reroll: the same moment, a different question.
    demo.switch(commit["id"])
    demo.add(
        msg(user("Let's sit by the fire. Tell me where you've been.")),
        msg(assistant("*She pulls two stools closer to the hearth.* South, mostly. The salt marshes.")),
    )


# --- the long session: built whole, then created in one call -----------------------------------

LONG_TURNS = 470  # four entries a turn, plus branches, compactions and labels: about 2,000 entries
TOPICS = ("invoice", "ledger", "refund", "tax", "currency", "report", "export", "webhook", "audit", "customer")


class _LongBuilder:
    """Entries of a long refactoring session, with ids, parents and timestamps."""

    def __init__(self, seed: int = 11) -> None:
        self.random = random.Random(seed)
        self.entries: list[Entry] = []
        self.ids: set[str] = set()
        self.clock = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
        self.tokens = 0

    def add(self, entry: Entry, parent_id: str | None) -> Entry:
        entry_id = new_entry_id(self.ids)
        self.ids.add(entry_id)
        self.clock += timedelta(seconds=self.random.randint(5, 90))
        stamp = self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"
        rest = {key: value for key, value in entry.items() if key != "type"}
        full: Entry = {"type": entry["type"], "id": entry_id, "parentId": parent_id, "timestamp": stamp, **rest}
        message = full.get("message")
        if isinstance(message, dict):
            self.tokens += estimate_tokens(message)
        self.entries.append(full)
        return full

    def turn(self, parent_id: str | None, number: int, *, note: str = "") -> list[Entry]:
        topic = TOPICS[number % len(TOPICS)]
        path = f"billing/{topic}_{number % 37}.py"
        call = f"call_{number}"
        asked = self.add(msg(user(f"Step {number}{note}: move the {topic} rounding out of `{path}`.")), parent_id)
        acting = self.add(
            msg(
                assistant(
                    f"Reading `{path}` before changing the {topic} code.",
                    tool_calls=[(call, "read", {"path": path})],
                    input_tokens=1200 + self.tokens,
                )
            ),
            asked["id"],
        )
        result = self.add(
            msg(tool_result(call, "read", f"def {topic}_total(items):\n    return round(sum(items), 2)\n" * 3)),
            acting["id"],
        )
        answer = self.add(
            msg(
                assistant(
                    f"Moved the {topic} rounding into `money.quantize()`; {path} now calls it. "
                    f"{self.random.randint(20, 300)} tests pass.",
                    input_tokens=1400 + self.tokens,
                )
            ),
            result["id"],
        )
        return [asked, acting, result, answer]

    def build(self) -> list[Entry]:
        tip = self.add(build.model_change_entry(*MODEL_SONNET), None)["id"]
        tip = self.add(build.thinking_level_change_entry("medium"), tip)["id"]
        first_of_turn: list[str] = []
        for number in range(1, LONG_TURNS + 1):
            if number % 60 == 0:
                # An abandoned attempt from the last answer: a side branch, left folded.
                side = tip
                for attempt in range(1 + number % 3):
                    side = self.turn(side, number, note=f" (attempt {attempt + 1}, abandoned)")[-1]["id"]
            if number % 90 == 0:
                tip = self.add(
                    build.branch_summary_entry(
                        branch_from_entry_id=tip,
                        summary=f"Tried a per-module rounding helper around step {number}; "
                        "dropped it: the shared `money.quantize()` is simpler.",
                    ),
                    tip,
                )["id"]
            turn = self.turn(tip, number)
            first_of_turn.append(turn[0]["id"])
            tip = turn[-1]["id"]
            if number % 50 == 0:
                tip = self.add(build.label_entry(turn[-1]["id"], f"milestone {number // 50}"), tip)["id"]
            if number % 120 == 0:
                kept = first_of_turn[-8]
                tip = self.add(
                    build.compaction_entry(
                        summary=f"## Goal\nOne rounding rule for the billing service.\n\n## Progress\n"
                        f"- Steps 1 to {number - 8} moved their rounding into `money.quantize()`.\n\n"
                        "## Next steps\n- Keep going module by module.",
                        first_kept_entry_id=kept,
                        tokens_before=self.tokens,
                    ),
                    tip,
                )["id"]
        return self.entries


def build_long(spec: DemoSession, kind: str, agent: Agent, actor: Actor) -> None:
    """About 2,000 entries in one go (one write, one audit record): compactions,
    folded side branches, branch summaries and labels, for the tree page at scale."""
    _create(spec, kind, agent, actor, cwd="/srv/billing", entries=_LongBuilder().build())


DEMO_SESSIONS: tuple[DemoSession, ...] = (
    DemoSession("demo-coding-1", "Invoice totals off by a cent", "demo-coder", "demo-user", build_coding_1),
    DemoSession(
        "demo-coding-1-fork",
        "Decimal fix, continued",
        "demo-coder",
        "demo-user",
        build_coding_1_fork,
        source="demo-coding-1",
    ),
    DemoSession(
        "demo-coding-1-fork-2",
        "Refunds, split off the fork",
        "demo-coder",
        "demo-user",
        build_coding_1_fork_of_fork,
        source="demo-coding-1-fork",
    ),
    DemoSession("demo-coding-2", "Flaky CI: test_export", "demo-coder", "demo-user", build_coding_2),
    DemoSession("demo-roleplay-1", "Alice at the Crossroads Inn", "demo-roleplay", "demo-player", build_roleplay),
    DemoSession("demo-long-1", "Billing refactor, step by step (long)", "demo-coder", "demo-user", build_long),
    DemoSession(
        "demo-mysql-coding-1", "Invoice totals off by a cent (database)", "demo-db-coder", "demo-user",
        build_coding_1, provider="mysql",
    ),
    DemoSession(
        "demo-mysql-coding-2", "Flaky CI: test_export (database)", "demo-db-coder", "demo-user",
        build_coding_2, provider="mysql",
    ),
    DemoSession(
        "demo-mysql-coding-1-fork",
        "Decimal fix, continued (database)",
        "demo-db-coder",
        "demo-user",
        build_coding_1_fork,
        provider="mysql",
        source="demo-mysql-coding-1",
    ),
)  # fmt: skip


class Command(SessionTreeCommand):
    help = (
        "Load the demo data set (branched sessions, forks of forks, compactions, a roleplay session, "
        "a ~2,000-entry session, sessions in the mysql provider). Idempotent: existing demo sessions are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--provider",
            choices=provider_kinds(),
            default=None,
            help="Storage for the demo sessions that do not name one (default: SESSIONTREE_DEFAULT_PROVIDER); "
            "the database demo sessions are always in the mysql provider.",
        )
        parser.add_argument(
            "--reset", action="store_true", help="Delete the demo sessions for good first, then rebuild them."
        )
        parser.add_argument("--dry-run", action="store_true", help="Say what would be done, change nothing.")

    def handle(self, *args: Any, provider: str | None, reset: bool, dry_run: bool, **options: Any) -> None:
        default_kind = get_provider(provider).kind
        actor = self.actor
        created = present = registered = 0
        kinds: Counter[str] = Counter()  # where each demo session is (or would be)
        if reset:
            self._reset(dry_run=dry_run, actor=actor)
        for spec in DEMO_SESSIONS:
            kind = spec.provider or default_kind
            owner = None if reset and not dry_run else self._owner(spec.session_id)
            if owner is not None:
                present += 1
                kinds[owner.kind] += 1
                where = "" if owner.kind == kind else f" (in the {owner.kind} provider)"
                self.stdout.write(f"Exists {spec.session_id}{where}")
                continue
            kinds[kind] += 1
            if dry_run:
                self.stdout.write(f"Would create {spec.session_id} ({kind})")
                created += 1
                continue
            agent, _ = Agent.objects.get_or_create(name=spec.agent, defaults={"session_provider": kind})
            try:
                spec.build(spec, kind, agent, actor)
            except SessionAlreadyExists:
                self._register_orphan_file(get_provider(kind), spec, agent.pk)
                registered += 1
                continue
            created += 1
            self.stdout.write(f"Created {spec.session_id} ({kind})")
        verb = "would be created" if dry_run else "created"
        where = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo data: {len(DEMO_SESSIONS)} sessions ({where}), "
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

    def _reset(self, *, dry_run: bool, actor: Actor) -> None:
        # Forks first, then their sources.
        for spec in reversed(DEMO_SESSIONS):
            if self._owner(spec.session_id) is None:
                continue
            if dry_run:
                self.stdout.write(f"Would delete {spec.session_id}")
                continue
            services.sessions.delete_session(session_id=spec.session_id, actor=actor, channel=CHANNEL, hard=True)
            self.stdout.write(f"Deleted {spec.session_id}")

    def _register_orphan_file(self, store: SessionTreeProvider, spec: DemoSession, agent_id: int | None) -> None:
        """The session's file exists but its row does not (the database was
        reset): adopt the file as the sync command would, leaf = last entry."""
        register = getattr(store, "register_existing_file", None)
        if register is None:
            raise CommandError(f"Demo session {spec.session_id} already exists in the {store.kind} provider")
        register(spec.session_id, title=spec.title, agent_id=agent_id, user_id=spec.user_id)
        self.stdout.write(f"Registered the existing file of {spec.session_id}")
