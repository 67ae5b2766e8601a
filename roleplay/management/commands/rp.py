"""``manage.py rp SESSION …``: a roleplay session's character state, from the command line.

The character's state (appearance, relationships, location…) is derived from
the structured roleplay entries on the session's current branch; this
command reads it, compares it between branches, and appends the entries that
change it (corrections, review decisions, repairs, checkpoints, archive), all
through ``roleplay.service``; ``context`` shows what the roleplay model is
sent (``roleplay.context.build_roleplay_context``):

    rp SESSION inspect state [--entry ENTRY] [--provenance] [--character ID]
    rp SESSION state diff FROM TO [--character ID]       (FROM, TO: entry ids or "leaf")
    rp SESSION context [--leaf ENTRY]
    rp SESSION state correct '<json>'
    rp SESSION review list [--all]
    rp SESSION review amend REVIEW VALUE_JSON
    rp SESSION review accept REVIEW [--value VALUE_JSON]
    rp SESSION review reject REVIEW
    rp SESSION turn repair '<json>'
    rp SESSION checkpoint
    rp SESSION compact [--instructions TEXT]
    rp SESSION archive [--reason TEXT]
    rp SESSION history goto ENTRY [--summarize] [--label TEXT]
    rp SESSION history fork ENTRY --position before|at

``--json`` prints machine output; ``--provider`` overrides the session's own
provider. Writes go through the operations layer as ``cli:<os user>`` on the
``cli`` channel (audited). Every failure is a ``CommandError`` with a
one-line reason and the exit code of its category
(``sessiontree.management.base``): 2 bad input, 3 unknown session, entry or
review, 4 conflict (leaf moved, review already decided, no character on the
branch, character archived, session closed), 5 corrupt stored data,
6 storage unavailable, 7 summarizer failed, 1 anything else.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from roleplay import service
from roleplay.context import build_roleplay_context
from roleplay.inspection import ProvenanceRecord, StateRow
from sessiontree.core.context_builder import UNSET
from sessiontree.core.types import Entry
from sessiontree.management.base import EXIT_BAD_INPUT, SessionTreeCommand, one_line
from sessiontree.providers.base import SessionTreeProvider
from sessiontree.providers.factory import get_provider, get_provider_for_session, provider_kinds

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


def _json(value: Any) -> str:
    """A value as short JSON (strings quoted), for one line of output."""
    return _short(orjson.dumps(value).decode())


def _describe_op(op: dict[str, Any]) -> str:
    if "value" in op:
        return f"{op.get('op')} {op.get('path')} = {_short(op['value'])}"
    if "from" in op:
        return f"{op.get('op')} {op.get('from')} -> {op.get('path')}"
    return f"{op.get('op')} {op.get('path')}"


def _state_summary(state: Mapping[str, Any]) -> str:
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


LEAF = "leaf"  # ``state diff``'s name for the session's leaf

EXIT_CODES_HELP = (
    "Writes append entries to the current branch and never edit earlier ones. On failure: one line on stderr "
    "and exit 2 (bad input), 3 (unknown session, entry or review), 4 (conflict: the leaf moved, the review "
    "is decided, the branch has no character or it is archived, the session is closed), 5 (damaged stored "
    "data), 6 (storage unavailable), 7 (summarizer failed)."
)


def _describe_record(record: ProvenanceRecord | None) -> str:
    """A provenance record in words: what kind of write, which commit, which entry."""
    if record is None:
        return "no recorded entry"
    entry = f"entry {record['entry_id']}"
    kind = record["kind"]
    if kind == "unknown":
        return f"{entry} (not on this path)"
    if kind == "review":
        text = f"accepted review {record['review_id']}"
        if record["commit_id"]:
            text += f" of {record['commit_id']}"
        return f"{text}, {entry}"
    text = f"{kind} {record['commit_id'] or '(no commit id)'}"
    if kind == "repair" and record["turn_id"]:
        text += f" of turn {record['turn_id']}"
    text += f", {entry}"
    if record["reason"]:
        text += f": {_short(record['reason'])}"
    return text


def _row_text(row: StateRow) -> str:
    indent = "  " * row["depth"]
    if row["node"] == "object":
        value = f"{{{row['size']} member{'s' if row['size'] != 1 else ''}}}"
    elif row["node"] == "array":
        value = f"[{row['size']} item{'s' if row['size'] != 1 else ''}]"
    else:
        value = _json(row["value"])
    text = f"{indent}{row['key']}: {value}"
    if row["provenance"] is not None and not row["inherited"]:
        text = f"{text:<48}  <- {_describe_record(row['provenance'])}"
    return text


def _detail_text(detail: service.StateDetail) -> str:
    summary = _state_summary(detail).capitalize()
    where = "the session's leaf" if detail["at_session_leaf"] else f"entry {detail['leaf_entry_id']}"
    lines = [f"{summary}; at {where}."]
    if detail["character_id"] is None:
        return lines[0]
    lines += [_row_text(row) for row in detail["rows"]] or ["(the state is empty)"]
    for review in detail["pending_reviews"]:
        lines.append(f"pending review {review['reviewId']}: {_describe_op(review['effectiveOp'])}")
    for turn in detail["incomplete_turns"]:
        lines.append(f"incomplete turn {turn['turnId']} (entry {turn['entryId']}): repair with `turn repair`")
    for problem in detail["problems"]:
        lines.append(f"problem at {problem['entryId']}: {problem['code']}: {problem['reason']}")
    return "\n".join(lines)


def _side_text(records: list[ProvenanceRecord], removed_by: ProvenanceRecord | None) -> str:
    if records:
        return _describe_record(records[0]) + (f" (+{len(records) - 1} below)" if len(records) > 1 else "")
    if removed_by is not None:
        return f"absent since {_describe_record(removed_by)}"
    return "never set on this side"


def _diff_text(diff: service.StateDiff) -> str:
    ends = diff["from"], diff["to"]
    lines = [
        f"State of {diff['character_id'] or '(no character)'} from {ends[0]['entry_id']} (revision "
        f"{ends[0]['revision']}) to {ends[1]['entry_id']} (revision {ends[1]['revision']}); "
        f"common ancestor {diff['common_ancestor_entry_id'] or '(none)'}."
    ]
    for item in diff["changed"]:
        lines.append(f"changed {item['pointer']}: {_json(item['old_value'])} -> {_json(item['new_value'])}")
        lines.append(f"    from: {_side_text(item['from_provenance'], None)}")
        lines.append(f"    to:   {_side_text(item['to_provenance'], None)}")
    for item in diff["added"]:
        lines.append(f"added   {item['pointer']}: {_json(item['new_value'])}")
        lines.append(f"    from: {_side_text([], item.get('from_removed_by'))}")
        lines.append(f"    to:   {_side_text(item['to_provenance'], None)}")
    for item in diff["removed"]:
        lines.append(f"removed {item['pointer']}: {_json(item['old_value'])}")
        lines.append(f"    from: {_side_text(item['from_provenance'], None)}")
        lines.append(f"    to:   {_side_text([], item.get('to_removed_by'))}")
    if len(lines) == 1:
        lines.append("No differences.")
    return "\n".join(lines)


def _content_text(content: Any) -> str:
    """A message's content as one line of text: text blocks, tool calls, images."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "toolCall":
            parts.append(f"-> {block.get('name', '?')}({_short(block.get('arguments', {}), 40)})")
        elif block.get("type") == "image":
            parts.append("[image]")
    return " ".join(parts)


def _message_text(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    if role == "toolResult":
        return f"{message.get('toolName', '?')}: {_content_text(message.get('content'))}"
    if role == "bashExecution":
        return f"$ {message.get('command', '')}"
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary") or "")
    return _content_text(message.get("content"))


def _context_text(context: Mapping[str, Any], at: str) -> str:
    info = context["roleplay"]
    model = context.get("model")
    character = (
        f"character {info['character_id']}, revision {info['revision']}, state hash {info['state_hash'][:12]}"
        if info["character_id"] is not None
        else "no roleplay character on this branch"
    )
    model_name = f"{model.get('provider')}/{model.get('modelId')}" if model else "none"
    lines = [
        f"Roleplay context at {at}: {len(context['messages'])} message(s) for the model, thinking level "
        f"{context.get('thinking_level')}, model {model_name}; {character}."
    ]
    removed = info["removed_branch_summary_entry_ids"]
    if removed:
        lines.append(f"Left out of the copy (branch summaries, not canon): {', '.join(removed)}.")
    roles = [str(message.get("customType") or message.get("role", "?")) for message in context["messages"]]
    width = max(map(len, roles), default=0)
    for number, (message, role, source) in enumerate(
        zip(context["messages"], roles, context["source_entry_ids"], strict=True), 1
    ):
        text = " ".join(_message_text(message).split())
        lines.append(f"{number:>4}. {role:<{width}}  {source or '-':<8}  {_short(text, 100)}")
    lines += ["", info["character_view"], "", info["boundary_note"]]
    return "\n".join(lines)


class Command(SessionTreeCommand):
    help = (
        "Show, compare and correct a roleplay character's state on a session's current branch: "
        "state with provenance, diffs between branches, corrections with a reason, the review queue, "
        "repairs of incomplete turns, checkpoints, archive, and moving in the session tree."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = EXIT_CODES_HELP
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_id", metavar="SESSION", help="id of the roleplay session")
        self._add_common(parser, suppress=False)
        groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)

        def leaf(subparsers: Any, name: str, help_text: str, handler: Callable[..., Any]) -> argparse.ArgumentParser:
            sub = subparsers.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
            self._add_common(sub, suppress=True)
            sub.set_defaults(handler=handler)
            return sub

        inspect = groups.add_parser(
            "inspect", help="show the character's state", description="Show the character's state."
        ).add_subparsers(dest="what", metavar="state", required=True)
        sub = leaf(
            inspect,
            "state",
            "show the character's state at the session's leaf (or at --entry): revision, state hash, "
            "the state document, reviews, incomplete turns and problems; reading never moves the leaf",
            self.inspect_state,
        )
        sub.add_argument("--entry", dest="entry_id", metavar="ENTRY", help="show the state as of this entry instead")
        sub.add_argument(
            "--provenance",
            action="store_true",
            help="show, for every value, the entry that last set it (turn, correction, repair, accepted review)",
        )
        sub.add_argument("--character", dest="character_id", metavar="ID", help="another character's state")

        review = groups.add_parser(
            "review",
            help="the review queue: state changes a turn proposed for an operator to decide",
            description="The review queue: state changes a turn proposed for an operator to decide.",
        ).add_subparsers(dest="action", metavar="list|amend|accept|reject", required=True)
        sub = leaf(review, "list", "list the pending reviews on the current branch", self.review_list)
        sub.add_argument("--all", action="store_true", dest="include_decided", help="decided reviews too")
        sub = leaf(review, "amend", "replace the value a pending review proposes (it stays pending)", self.review_amend)
        sub.add_argument("review_id", metavar="REVIEW", help="review id")
        sub.add_argument("value", metavar="VALUE_JSON", help="the new proposed value, as JSON")
        sub = leaf(review, "accept", "accept a pending review: its change is applied to the state", self.review_accept)
        sub.add_argument("review_id", metavar="REVIEW", help="review id")
        sub.add_argument("--value", dest="value", metavar="VALUE_JSON", help="amend the value first, then accept")
        sub = leaf(review, "reject", "reject a pending review: the state stays as it is", self.review_reject)
        sub.add_argument("review_id", metavar="REVIEW", help="review id")

        sub = leaf(
            groups,
            "context",
            "show what the roleplay model is sent at the session's leaf (or at --leaf): the session's context "
            "without branch summaries, then the Current Character View and the non-canon boundary note",
            self.context,
        )
        sub.add_argument("--leaf", dest="leaf_entry_id", metavar="ENTRY", help="as if ENTRY were the leaf")

        leaf(
            groups,
            "checkpoint",
            "store the current state as a checkpoint entry (later reads start from it)",
            self.checkpoint,
        )

        sub = leaf(
            groups,
            "compact",
            "compact the branch's context for the model; a checkpoint of the state follows the compaction",
            self.compact,
        )
        sub.add_argument("--instructions", dest="custom_instructions", help="extra instructions for the summary")

        state = groups.add_parser(
            "state",
            help="compare the state between entries, or correct it",
            description="Compare the state between two entries, or correct it on the current branch.",
        ).add_subparsers(dest="action", metavar="diff|correct", required=True)
        sub = leaf(
            state,
            "diff",
            "compare the state at two entries (e.g. the leaves of two branches): changed, added and removed "
            "values, and the entries that made them",
            self.state_diff,
        )
        sub.add_argument("from_entry_id", metavar="FROM", help='entry id, or "leaf" for the session\'s leaf')
        sub.add_argument("to_entry_id", metavar="TO", help='entry id, or "leaf" for the session\'s leaf')
        sub.add_argument("--character", dest="character_id", metavar="ID", help="compare this character's state")
        sub = leaf(
            state,
            "correct",
            "correct a recorded value: appends a correction (JSON Patch ops and a required reason) "
            "on the current branch; nothing earlier is edited",
            self.state_correct,
        )
        sub.add_argument(
            "payload",
            metavar="JSON",
            help='{"op","path","value","from"?,"reason","correctsCommitId"?} or {"ops":[...],"reason"}',
        )

        turn = groups.add_parser(
            "turn",
            help="repair a turn that ended without recording its state change",
            description="Repair a turn that ended without recording its state change.",
        ).add_subparsers(dest="action", metavar="repair", required=True)
        sub = leaf(turn, "repair", "append the missing state change of an incomplete turn", self.turn_repair)
        sub.add_argument("proposal", metavar="JSON", help='{"turnId","ops","events"?,"memories"?,"reviews"?,"reason"?}')

        sub = leaf(
            groups,
            "archive",
            "archive the character on this branch: its state becomes read-only from here on",
            self.archive,
        )
        sub.add_argument("--reason", help="why")

        history = groups.add_parser(
            "history",
            help="move in the session tree; the state follows the branch",
            description="Move in the session tree; the state follows the branch.",
        ).add_subparsers(dest="action", metavar="goto|fork", required=True)
        sub = leaf(
            history,
            "goto",
            "move the session's leaf to ENTRY (back before a change, or to another branch)",
            self.history_goto,
        )
        sub.add_argument("entry_id", metavar="ENTRY")
        sub.add_argument("--summarize", action="store_true", help="summarize the branch left behind")
        sub.add_argument("--label", help="label the new position")
        sub = leaf(history, "fork", "start a new session from ENTRY; this session is not changed", self.history_fork)
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
        parser.add_argument(
            "--provider",
            choices=provider_kinds(),
            default=default,
            help="use this storage instead of the session's own",
        )

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
        at = entry_id if entry_id else UNSET
        character_id = options.get("character_id")
        if options.get("provenance"):
            detail = service.inspect_state_detail(provider, session_id, leaf_entry_id=at, character_id=character_id)
            self.emit(detail, _detail_text(detail))
            return
        state = service.inspect_state(provider, session_id, leaf_entry_id=at, character_id=character_id)
        lines = [_state_summary(state).capitalize() + "."]
        if state["character_id"] is not None:
            lines.append(orjson.dumps(state["state"], option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())
            for problem in state.get("problems") or []:
                lines.append(f"problem at {problem['entryId']}: {problem['code']}: {problem['reason']}")
        self.emit(state, "\n".join(lines))

    def state_diff(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        ends = [UNSET if options[key] == LEAF else options[key] for key in ("from_entry_id", "to_entry_id")]
        diff = service.diff_states(provider, session_id, ends[0], ends[1], character_id=options.get("character_id"))
        self.emit(diff, _diff_text(diff))

    def context(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry_id = options.get("leaf_entry_id")
        context = build_roleplay_context(provider, session_id, leaf_entry_id=entry_id if entry_id else UNSET)
        self.emit(context, _context_text(context, f"entry {entry_id}" if entry_id else "the session's leaf"))

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
        entry = service.amend_review(
            provider=provider, session_id=session_id, review_id=options["review_id"], value=value, **self.who
        )
        self.emit_write(provider, session_id, entry, f"amendment of review {options['review_id']}")

    def review_accept(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        raw = options.get("value")
        value = _json_argument(raw, "--value") if raw is not None else UNSET
        entry = service.decide_review(
            provider=provider,
            session_id=session_id,
            review_id=options["review_id"],
            decision="accept",
            value=value,
            **self.who,
        )
        self.emit_write(provider, session_id, entry, f"acceptance of review {options['review_id']}")

    def review_reject(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry = service.decide_review(
            provider=provider, session_id=session_id, review_id=options["review_id"], decision="reject", **self.who
        )
        self.emit_write(provider, session_id, entry, f"rejection of review {options['review_id']}")

    def checkpoint(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry = service.create_checkpoint(provider=provider, session_id=session_id, **self.who)
        self.emit_write(provider, session_id, entry, f"checkpoint at revision {entry['data']['revision']}")

    def compact(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        result = service.compact_with_checkpoint(
            provider=provider, session_id=session_id, custom_instructions=options.get("custom_instructions"), **self.who
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
        entry = service.correct_state(provider=provider, session_id=session_id, payload=payload, **self.who)
        self.emit_write(
            provider, session_id, entry, f"correction commit {entry['data']['commitId']}", note=CORRECTION_NOTE
        )

    def turn_repair(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        proposal = _json_object(options["proposal"], "the repair proposal")
        entry = service.repair_turn(provider=provider, session_id=session_id, proposal=proposal, **self.who)
        self.emit_write(provider, session_id, entry, f"repair of turn {entry['data']['turnId']}")

    def archive(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        entry = service.archive(provider=provider, session_id=session_id, reason=options.get("reason"), **self.who)
        self.emit_write(provider, session_id, entry, "archive of the character")

    def history_goto(self, provider: SessionTreeProvider, session_id: str, options: dict[str, Any]) -> None:
        result = service.history_goto(
            provider=provider,
            session_id=session_id,
            entry_id=options["entry_id"],
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
            provider=provider,
            session_id=session_id,
            entry_id=options["entry_id"],
            position=options["position"],
            **self.who,
        )
        new = result["session"]
        human = (
            f"Created session {new['session_id']} (parent {new['parent_session_id']}). "
            f"State: {_state_summary(result['state'])}."
        )
        self.emit(result, human)
