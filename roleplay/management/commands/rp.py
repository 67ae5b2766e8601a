"""``manage.py rp SESSION …``: the seed's ``/rp …`` commands, over ``roleplay.service``.

    rp SESSION inspect state [--entry ENTRY]
    rp SESSION review list [--all]
    rp SESSION review amend REVIEW VALUE_JSON
    rp SESSION review accept REVIEW [--value VALUE_JSON]
    rp SESSION review reject REVIEW
    rp SESSION checkpoint
    rp SESSION state correct '<json>'
    rp SESSION turn repair '<json>'
    rp SESSION archive [--reason TEXT]
    rp SESSION history goto ENTRY [--summarize] [--label TEXT]
    rp SESSION history fork ENTRY --position before|at

``--json`` prints machine output; ``--provider`` overrides the session's own
provider. Writes go through the operations layer as ``cli:<os user>`` on the
``cli`` channel (audited). Every failure is a ``CommandError`` with a
one-line reason and the exit code of its category
(``sessiontree.management.base``): 2 bad input, 3 unknown session/entry,
4 conflict (leaf moved, character archived, session deleted), 5 corrupt
stored data, 6 storage unavailable, 7 summarizer failed, 1 anything else.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from roleplay import service
from roleplay.reducer import RoleplayState
from sessiontree.core.context_builder import UNSET
from sessiontree.core.types import Entry
from sessiontree.management.base import EXIT_BAD_INPUT, SessionTreeCommand, one_line
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import PROVIDER_KINDS, get_provider, get_provider_for_session

CORRECTION_NOTE = (
    "This appended a correction on the current branch; the session tree was not moved. "
    "To rewrite the story from an earlier point, use `rp SESSION history goto` or `history fork`."
)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_argument(raw: str, what: str) -> Any:
    """Parsed exactly: an integer beyond 64 bits stays an integer (and is then
    refused by the roleplay schema, as the provider API refuses it) instead of
    silently becoming a float; NaN and Infinity are not JSON."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise CommandError(f"{what} is not valid JSON ({one_line(str(exc))})", returncode=EXIT_BAD_INPUT) from None


def _json_object(raw: str, what: str) -> dict[str, Any]:
    value = _json_argument(raw, what)
    if not isinstance(value, dict):
        raise CommandError(f"{what} must be one JSON object, got {type(value).__name__}", returncode=EXIT_BAD_INPUT)
    return value


def _short(value: Any, limit: int = 60) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe_op(op: dict[str, Any]) -> str:
    if "value" in op:
        return f"{op.get('op')} {op.get('path')} = {_short(op['value'])}"
    if "from" in op:
        return f"{op.get('op')} {op.get('from')} -> {op.get('path')}"
    return f"{op.get('op')} {op.get('path')}"


def _state_summary(state: RoleplayState) -> str:
    if state["character_id"] is None:
        return "no roleplay character on this branch"
    parts = [
        f"character {state['character_id']}",
        f"revision {state['revision']}",
        f"state hash {state['state_hash'][:12]}",
    ]
    if state["pending_reviews"]:
        parts.append(f"{len(state['pending_reviews'])} pending review(s)")
    if state["incomplete_turns"]:
        parts.append(f"{len(state['incomplete_turns'])} incomplete turn(s)")
    if state["archived"]:
        parts.append("archived")
    if state.get("problems"):
        parts.append(f"{len(state['problems'])} problem(s)")
    return ", ".join(parts)


class Command(SessionTreeCommand):
    help = "Inspect and correct roleplay state on a session's current branch (the seed's /rp commands)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_id", metavar="SESSION", help="session id")
        self._add_common(parser, suppress=False)
        groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)

        def leaf(subparsers: Any, name: str, help_text: str, handler: Callable[..., Any]) -> argparse.ArgumentParser:
            sub = subparsers.add_parser(name, help=help_text, description=help_text)
            self._add_common(sub, suppress=True)
            sub.set_defaults(handler=handler)
            return sub

        inspect = groups.add_parser("inspect", help="read the state").add_subparsers(
            dest="what", metavar="state", required=True
        )
        sub = leaf(inspect, "state", "reduced state at the leaf, or at --entry", self.inspect_state)
        sub.add_argument("--entry", dest="entry_id", help="reduce the path to this entry instead of the leaf")

        review = groups.add_parser("review", help="list and decide reviews").add_subparsers(
            dest="action", metavar="list|amend|accept|reject", required=True
        )
        sub = leaf(review, "list", "pending reviews on the current branch", self.review_list)
        sub.add_argument("--all", action="store_true", dest="include_decided", help="include decided reviews")
        sub = leaf(review, "amend", "replace a pending review's proposed value", self.review_amend)
        sub.add_argument("review_id", metavar="REVIEW")
        sub.add_argument("value", metavar="VALUE_JSON")
        sub = leaf(review, "accept", "accept a pending review (optionally with an amended value)", self.review_accept)
        sub.add_argument("review_id", metavar="REVIEW")
        sub.add_argument("--value", dest="value", metavar="VALUE_JSON", help="amend the value, then accept")
        sub = leaf(review, "reject", "reject a pending review", self.review_reject)
        sub.add_argument("review_id", metavar="REVIEW")

        leaf(groups, "checkpoint", "append a checkpoint of the current state", self.checkpoint)

        sub = leaf(groups, "compact", "compact the branch; a checkpoint follows the compaction", self.compact)
        sub.add_argument("--instructions", dest="custom_instructions", help="extra instructions for the summary")

        state = groups.add_parser("state", help="correct the state").add_subparsers(
            dest="action", metavar="correct", required=True
        )
        sub = leaf(state, "correct", "append a correction commit on the current branch", self.state_correct)
        sub.add_argument("payload", metavar="JSON", help='{"op","path","value","from"?,"reason","correctsCommitId"?}')

        turn = groups.add_parser("turn", help="repair an incomplete turn").add_subparsers(
            dest="action", metavar="repair", required=True
        )
        sub = leaf(turn, "repair", "append the missing commit of an incomplete turn", self.turn_repair)
        sub.add_argument("proposal", metavar="JSON", help='{"turnId","ops","events"?,"memories"?,"reviews"?,"reason"?}')

        sub = leaf(groups, "archive", "archive the character on this branch", self.archive)
        sub.add_argument("--reason", help="why")

        history = groups.add_parser("history", help="move in the session tree").add_subparsers(
            dest="action", metavar="goto|fork", required=True
        )
        sub = leaf(history, "goto", "move the leaf to ENTRY (the state follows the branch)", self.history_goto)
        sub.add_argument("entry_id", metavar="ENTRY")
        sub.add_argument("--summarize", action="store_true", help="summarize the branch left behind")
        sub.add_argument("--label", help="label the new position")
        sub = leaf(history, "fork", "a new session from ENTRY", self.history_fork)
        sub.add_argument("entry_id", metavar="ENTRY")
        sub.add_argument("--position", choices=("before", "at"), required=True)

    @staticmethod
    def _add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
        # On the main parser and on every subcommand, so the options work before or after it.
        default: Any = argparse.SUPPRESS if suppress else None
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            default=argparse.SUPPRESS if suppress else False,
            help="machine output (JSON)",
        )
        parser.add_argument("--provider", choices=PROVIDER_KINDS, default=default, help="override the provider")

    # --- plumbing ---------------------------------------------------------------------

    def handle(self, *args: Any, **options: Any) -> None:
        self.as_json = bool(options.get("as_json"))
        session_id = options["session_id"]
        provider = get_provider(options["provider"]) if options.get("provider") else None
        if provider is None:
            provider = get_provider_for_session(session_id)
        self.who: dict[str, Any] = {"actor": self.actor, "channel": self.channel}
        options["handler"](provider, session_id, options)

    def emit(self, payload: Any, human: str) -> None:
        if self.as_json:
            self.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
        else:
            self.stdout.write(human)

    def emit_write(
        self, provider: SessionTreeProvider, session_id: str, entry: Entry, what: str, note: str | None = None
    ) -> None:
        state = service.inspect_state(provider, session_id)
        human = f"Appended {what} as entry {entry['id']}. Now: {_state_summary(state)}."
        if note:
            human += f"\n{note}"
        self.emit({"entry": entry, "state": state}, human)

    # --- subcommands -------------------------------------------------------------------

    def inspect_state(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry_id = options.get("entry_id")
        state = service.inspect_state(provider, session_id, leaf_entry_id=entry_id if entry_id else UNSET)
        lines = [_state_summary(state).capitalize() + "."]
        if state["character_id"] is not None:
            lines.append(orjson.dumps(state["state"], option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())
            for problem in state.get("problems") or []:
                lines.append(f"problem at {problem['entryId']}: {problem['code']}: {problem['reason']}")
        self.emit(state, "\n".join(lines))

    def review_list(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        reviews = service.list_reviews(provider, session_id, include_decided=options.get("include_decided", False))
        lines = [
            f"{review['reviewId']}  {review['status']:<8}  {_describe_op(review['op'])}"
            + (f"  (amended: {_short(review['amendment']['value'])})" if "amendment" in review else "")
            + (f"  — {review['note']}" if review.get("note") else "")
            for review in reviews
        ]
        self.emit(reviews, "\n".join(lines) if lines else "No reviews.")

    def review_amend(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        value = _json_argument(options["value"], "VALUE_JSON")
        entry = service.amend_review(provider, session_id, options["review_id"], value, **self.who)
        self.emit_write(provider, session_id, entry, f"amendment of review {options['review_id']}")

    def review_accept(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        raw = options.get("value")
        value = _json_argument(raw, "--value") if raw is not None else UNSET
        entry = service.decide_review(provider, session_id, options["review_id"], "accept", value=value, **self.who)
        self.emit_write(provider, session_id, entry, f"acceptance of review {options['review_id']}")

    def review_reject(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry = service.decide_review(provider, session_id, options["review_id"], "reject", **self.who)
        self.emit_write(provider, session_id, entry, f"rejection of review {options['review_id']}")

    def checkpoint(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry = service.create_checkpoint(provider, session_id, **self.who)
        self.emit_write(provider, session_id, entry, f"checkpoint at revision {entry['data']['revision']}")

    def compact(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        result = service.compact_with_checkpoint(
            provider, session_id, custom_instructions=options.get("custom_instructions"), **self.who
        )
        compaction, checkpoint = result["compaction"], result["checkpoint"]
        if compaction is None:
            human = "Nothing to compact on this branch."
        else:
            human = f"Appended compaction {compaction['id']} (kept from {compaction['firstKeptEntryId']})."
            if checkpoint is not None:
                human += f" Checkpoint {checkpoint['id']} at revision {checkpoint['data']['revision']} follows it."
        self.emit({**result, "state": service.inspect_state(provider, session_id)}, human)

    def state_correct(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        payload = _json_object(options["payload"], "the correction")
        entry = service.correct_state(provider, session_id, payload, **self.who)
        self.emit_write(
            provider, session_id, entry, f"correction commit {entry['data']['commitId']}", note=CORRECTION_NOTE
        )

    def turn_repair(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        proposal = _json_object(options["proposal"], "the repair proposal")
        entry = service.repair_turn(provider, session_id, proposal, **self.who)
        self.emit_write(provider, session_id, entry, f"repair of turn {entry['data']['turnId']}")

    def archive(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry = service.archive(provider, session_id, reason=options.get("reason"), **self.who)
        self.emit_write(provider, session_id, entry, "archive of the character")

    def history_goto(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        result = service.history_goto(
            provider,
            session_id,
            options["entry_id"],
            summarize=options["summarize"],
            label=options.get("label"),
            **self.who,
        )
        human = f"Leaf is now {result['leaf_entry_id']}. State: {_state_summary(result['state'])}."
        if result.get("summary_entry"):
            human += f"\nSummarized the branch left behind as entry {result['summary_entry']['id']}."
        if result.get("editor_text"):
            human += f"\nText to edit and send again: {result['editor_text']}"
        self.emit(result, human)

    def history_fork(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        result = service.history_fork(
            provider, session_id, options["entry_id"], position=options["position"], **self.who
        )
        new = result["session"]
        human = (
            f"Created session {new['session_id']} (parent {new['parent_session_id']}). "
            f"State: {_state_summary(result['state'])}."
        )
        self.emit(result, human)
