"""The ``rp`` management command: thin over roleplay.service, ``--json`` output, clear exit codes."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from io import StringIO
from pathlib import Path

import orjson
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from roleplay import schema, service
from roleplay.context import build_roleplay_context
from roleplay.reducer import CHARACTER_VIEW_HEADING, NON_CANON_BOUNDARY_NOTE
from sessiontree.providers.factory import get_provider
from tests.contract.conftest import PROVIDER_KINDS

from .story import ABANDONED, SHORT_HAIR, Story, add, branch_with_summary, review

PROJECT_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(params=PROVIDER_KINDS)
def story(request, db):
    # Configured from settings, as the command resolves it from the session's meta row.
    return Story(get_provider(request.param))


def rp(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("rp", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def rp_json(*args: str):
    out, _ = rp(*args, "--json")
    return orjson.loads(out)


def rp_error(*args: str) -> CommandError:
    with pytest.raises(CommandError) as caught:
        rp(*args)
    message = str(caught.value)
    assert message and "\n" not in message
    return caught.value


# --- reads ---


def test_inspect_state_human_and_json(story):
    ids = story.haircut_story()
    out, err = rp(story.session_id, "inspect", "state")
    assert out.startswith("Character alice, revision 1, state hash ")
    assert SHORT_HAIR in out and err == ""

    state = rp_json(story.session_id, "inspect", "state")
    assert state == orjson.loads(orjson.dumps(service.inspect_state(story.provider, story.session_id)))
    # --json before the subcommand works too.
    out, _ = rp(story.session_id, "--json", "inspect", "state")
    assert orjson.loads(out) == state

    earlier = rp_json(story.session_id, "inspect", "state", "--entry", ids["reply"])
    assert earlier["revision"] == 0 and earlier["state"] == {}
    assert story.leaf == ids["cut"]


def test_inspect_with_an_explicit_provider(story):
    story.haircut_story()
    state = rp_json(story.session_id, "inspect", "state", "--provider", story.provider.kind)
    assert state["revision"] == 1


def test_context_shows_what_the_roleplay_model_is_sent_human_and_json(story):
    ids = branch_with_summary(story)
    before = story.entries()

    context = rp_json(story.session_id, "context")
    assert context == orjson.loads(orjson.dumps(build_roleplay_context(story.provider, story.session_id)))
    assert context["roleplay"]["removed_branch_summary_entry_ids"] == [ids["summary"]]
    assert context["source_entry_ids"][-1] is None and ids["summary"] not in context["source_entry_ids"]

    out, err = rp(story.session_id, "context")
    lines = out.splitlines()
    assert lines[0].startswith(f"Roleplay context at the session's leaf: {len(context['messages'])} message(s)")
    assert "character alice, revision 1, state hash " in lines[0] and err == ""  # the mood, not the cut
    assert lines[1] == f"Left out of the copy (branch summaries, not canon): {ids['summary']}."
    assert ABANDONED not in out  # the summary's text never reaches the model's copy
    assert any(line.split()[1:3] == ["user", ids["refuse"]] for line in lines)
    assert any(line.split()[1:3] == ["pi-roleplay-character-view", "-"] for line in lines)
    assert CHARACTER_VIEW_HEADING in out and NON_CANON_BOUNDARY_NOTE in out
    assert story.entries() == before  # a read: nothing appended, the leaf where it was


def test_context_at_an_earlier_entry_never_moves_the_leaf(story):
    ids = story.haircut_story()
    earlier = rp_json(story.session_id, "context", "--leaf", ids["reply"])
    assert earlier == orjson.loads(
        orjson.dumps(build_roleplay_context(story.provider, story.session_id, leaf_entry_id=ids["reply"]))
    )
    assert earlier["source_entry_ids"] == [ids["greet"], ids["reply"], None]
    assert (earlier["roleplay"]["revision"], earlier["roleplay"]["character_id"]) == (0, "alice")
    out, _ = rp(story.session_id, "context", "--leaf", ids["reply"])
    assert out.startswith(f"Roleplay context at entry {ids['reply']}: 3 message(s)")
    assert story.leaf == ids["cut"]


def test_review_list_accept_reject_amend(story):
    story.select_character()
    story.user("A wolf!")
    turn = story.turn(
        reviews=[
            review("review-trust", add("/relationship", {"user": {"trust": 0.55}}), "after the rescue"),
            review("review-fear", add("/fear", "wolves")),
        ]
    )
    out, _ = rp(story.session_id, "review", "list")
    assert "review-trust  pending   add /relationship = " in out and "after the rescue" in out
    assert [r["reviewId"] for r in rp_json(story.session_id, "review", "list")] == ["review-trust", "review-fear"]

    out, _ = rp(story.session_id, "review", "amend", "review-trust", '{"user": {"trust": 0.6}}')
    assert out.startswith("Appended amendment of review review-trust as entry ")
    result = rp_json(story.session_id, "review", "accept", "review-trust")
    assert result["entry"]["customType"] == schema.REVIEW_DECISION_TYPE
    assert result["state"]["state"] == {"relationship": {"user": {"trust": 0.6}}}

    rp(story.session_id, "review", "reject", "review-fear")
    reviews = rp_json(story.session_id, "review", "list", "--all")
    assert [(r["reviewId"], r["status"]) for r in reviews] == [
        ("review-trust", "accepted"),
        ("review-fear", "rejected"),
    ]
    assert rp(story.session_id, "review", "list")[0].strip() == "No reviews."

    # accept --value on another branch of the same pending review
    story.provider.switch_leaf(story.session_id, turn)
    result = rp_json(story.session_id, "review", "accept", "review-fear", "--value", '"spiders"')
    assert result["state"]["state"] == {"fear": "spiders"}


# --- writes ---


def test_state_correct_appends_a_correction_and_says_the_tree_did_not_move(story):
    ids = story.haircut_story()
    payload = orjson.dumps(
        {"op": "replace", "path": "/appearance/hair", "value": "chin-length", "reason": "misrecorded"}
    ).decode()
    out, _ = rp(story.session_id, "state", "correct", payload)
    assert "Appended correction commit commit-" in out and "session tree was not moved" in out
    entry = story.entry(story.leaf)
    assert entry["parentId"] == ids["cut"] and entry["data"]["source"] == "manual-correction"

    result = rp_json(
        story.session_id, "state", "correct", '{"op":"add","path":"/location","value":"inn","reason":"forgot"}'
    )
    assert result["state"]["state"]["location"] == "inn"
    assert result["state"]["provenance"]["/location"] == result["entry"]["id"]


def test_checkpoint_turn_repair_and_archive(story):
    story.haircut_story()
    result = rp_json(story.session_id, "checkpoint")
    assert result["entry"]["customType"] == schema.CHECKPOINT_TYPE
    assert result["state"]["checkpoint_entry_id"] == result["entry"]["id"]

    story.mark_incomplete("turn-3")
    out, _ = rp(story.session_id, "turn", "repair", '{"turnId":"turn-3","ops":[{"op":"add","path":"/x","value":1}]}')
    assert out.startswith("Appended repair of turn turn-3 as entry ")
    assert "incomplete" not in out

    out, _ = rp(story.session_id, "archive", "--reason", "the end")
    assert "archived" in out
    error = rp_error(story.session_id, "state", "correct", '{"op":"add","path":"/y","value":1,"reason":"r"}')
    assert error.returncode == 4 and error.args[0].startswith("character_archived: ")


def test_history_goto_and_fork(story):
    ids = story.haircut_story()
    out, _ = rp(story.session_id, "history", "goto", ids["ask_cut"])
    assert f"Leaf is now {ids['reply']}" in out and "revision 0" in out
    assert "Will you cut your hair?" in out
    assert story.leaf == ids["reply"]

    result = rp_json(story.session_id, "history", "fork", ids["cut"], "--position", "at")
    assert result["session"]["parent_session_id"] == story.session_id
    assert result["state"]["revision"] == 1
    assert story.provider.list_entries(result["session"]["session_id"])[-1]["id"] == ids["cut"]

    out, _ = rp(story.session_id, "history", "fork", ids["ask_cut"], "--position", "before")
    assert out.startswith("Created session ") and f"(parent {story.session_id})" in out


# --- errors: one line, non-zero ---


def test_bad_input_exits_2_and_appends_nothing(story):
    story.haircut_story()
    before = story.entries()
    cases = [
        ("state", "correct", "{not json"),
        ("state", "correct", "[1, 2]"),
        ("state", "correct", '{"op":"replace","path":"/appearance/hair","value":"long"}'),
        ("turn", "repair", '{"ops": []}'),
        ("review", "amend", "review-none", "{bad"),
        ("history", "fork", before[-1]["id"], "--position", "before"),
    ]
    for args in cases:
        error = rp_error(story.session_id, *args)
        assert error.returncode == 2, args
    assert "'reason' is required" in str(rp_error(story.session_id, *cases[2]))
    assert story.entries() == before


def test_an_integer_beyond_64_bits_is_refused_not_stored_as_a_float(story):
    story.haircut_story()
    before = story.entries()
    big = 2**64 + 1
    correction = f'{{"op":"add","path":"/coins","value":{big},"reason":"treasure"}}'
    error = rp_error(story.session_id, "state", "correct", correction)
    assert error.returncode == 2 and "64-bit range" in str(error)
    error = rp_error(story.session_id, "state", "correct", '{"op":"add","path":"/x","value":NaN,"reason":"r"}')
    assert error.returncode == 2 and "not valid JSON" in str(error)
    assert story.entries() == before
    rp(story.session_id, "state", "correct", '{"op":"add","path":"/coins","value":9223372036854775807,"reason":"ok"}')
    assert rp_json(story.session_id, "inspect", "state")["state"]["coins"] == 9223372036854775807


def test_unknown_session_or_entry_exits_3(story):
    story.haircut_story()
    assert rp_error("no-such-session", "inspect", "state").returncode == 3
    assert rp_error(story.session_id, "history", "goto", "deadbeef").returncode == 3
    assert rp_error(story.session_id, "inspect", "state", "--entry", "deadbeef").returncode == 3


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("inspect",),
        ("frobnicate",),
        ("history", "fork", "abc"),
        ("history", "fork", "abc", "--position", "after"),
        ("review", "amend", "review-x"),
    ],
)
def test_usage_errors_are_command_errors(story, args):
    with pytest.raises(CommandError):
        rp(story.session_id, *args)


# --- the real process exit code ---


def subprocess_env() -> dict[str, str]:
    """Environment for ``manage.py`` in a child process, on this test's database and file root."""
    env = {**os.environ, "SESSIONTREE_FILE_ROOT": settings.SESSIONTREE_FILE_ROOT}
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        env["SQLITE_PATH"] = db["NAME"]
        env.pop("DATABASE_URL", None)
    else:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        env["DATABASE_URL"] = f"mysql://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{db['NAME']}"
    return env


@pytest.mark.django_db(transaction=True)
def test_exit_codes_of_a_real_process():
    story = Story(get_provider("file"))
    story.haircut_story()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "rp", *args],
            cwd=PROJECT_DIR,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )

    ok = run(story.session_id, "inspect", "state", "--json")
    assert ok.returncode == 0, ok.stderr
    assert orjson.loads(ok.stdout)["state"] == {"appearance": {"hair": SHORT_HAIR}}

    bad = run(story.session_id, "state", "correct", '{"op":"add","path":"/x","value":1}')
    assert bad.returncode == 2
    assert bad.stdout == ""
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("CommandError: invalid_roleplay_entry: ") and "'reason' is required" in line

    missing = run("no-such-session", "inspect", "state")
    assert missing.returncode == 3 and "session_not_found" in missing.stderr


# --- every subcommand: --json output, and a bad input that exits non-zero ---


def test_json_output_of_review_amend_reject_turn_repair_and_archive(story):
    story.haircut_story()
    story.user("A wolf!")
    story.turn(reviews=[review("review-trust", add("/trust", 0.5)), review("review-fear", add("/fear", "wolves"))])
    story.mark_incomplete("turn-9")

    amended = rp_json(story.session_id, "review", "amend", "review-trust", "0.7")
    assert amended["entry"]["customType"] == schema.REVIEW_AMENDMENT_TYPE
    assert amended["entry"]["data"]["value"] == 0.7
    assert [r["amendment"]["value"] for r in amended["state"]["pending_reviews"] if "amendment" in r] == [0.7]

    rejected = rp_json(story.session_id, "review", "reject", "review-fear")
    assert rejected["entry"]["customType"] == schema.REVIEW_DECISION_TYPE
    assert rejected["entry"]["data"]["decision"] == "reject"
    assert [r["reviewId"] for r in rejected["state"]["decided_reviews"]] == ["review-fear"]
    assert "fear" not in rejected["state"]["state"]

    repaired = rp_json(
        story.session_id, "turn", "repair", '{"turnId":"turn-9","ops":[{"op":"add","path":"/x","value":1}]}'
    )
    assert repaired["entry"]["customType"] == schema.REPAIR_TYPE and repaired["entry"]["data"]["turnId"] == "turn-9"
    assert repaired["state"]["incomplete_turns"] == [] and repaired["state"]["state"]["x"] == 1

    archived = rp_json(story.session_id, "archive", "--reason", "the end")
    assert archived["entry"]["customType"] == schema.ARCHIVE_TYPE
    assert archived["state"]["archived"] is True
    assert archived["state"]["archive"] == {"entryId": archived["entry"]["id"], "reason": "the end"}


def test_json_output_of_history_goto_and_fork_before(story):
    ids = story.haircut_story()
    moved = rp_json(story.session_id, "history", "goto", ids["ask_cut"])
    assert moved["leaf_entry_id"] == ids["reply"] == story.leaf
    assert moved["editor_text"] == "Will you cut your hair?"
    assert moved["summary_entry"] is None and moved["state"]["revision"] == 0

    forked = rp_json(story.session_id, "history", "fork", ids["ask_cut"], "--position", "before")
    new_id = forked["session"]["session_id"]
    assert forked["session"]["parent_session_id"] == story.session_id
    assert forked["state"]["revision"] == 0 and forked["state"]["character_id"] == "alice"
    assert [e["id"] for e in story.provider.list_entries(new_id)] == [ids["identity"], ids["greet"], ids["reply"]]


BAD_INPUT = {
    # subcommand: (arguments, expected exit code)
    "inspect state": (("inspect", "state", "--entry", "deadbeef"), 3),
    "inspect state --provenance": (("inspect", "state", "--provenance", "--entry", "deadbeef"), 3),
    "state diff": (("state", "diff", "deadbeef", "leaf"), 3),
    "context": (("context", "--leaf", "deadbeef"), 3),
    "review list": (("review", "list"), 3),  # run on an unknown session
    "review amend": (("review", "amend", "review-none", "1"), 3),
    "review accept": (("review", "accept", "review-none"), 3),
    "review reject": (("review", "reject", "review-none"), 3),
    "checkpoint": (("checkpoint",), 4),  # run on a session without a character
    "state correct": (("state", "correct", '{"op":"add","path":"/x","value":1,"reason":"  "}'), 2),
    "turn repair": (("turn", "repair", '{"turnId":"never-incomplete","ops":[]}'), 2),
    "archive": (("archive",), 4),  # run on an already archived character
    "history goto": (("history", "goto", "deadbeef"), 3),
    "history fork at": (("history", "fork", "deadbeef", "--position", "at"), 3),
    "history fork before": (("history", "fork", "ASSISTANT", "--position", "before"), 2),
}


@pytest.mark.parametrize("subcommand", sorted(BAD_INPUT))
@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
def test_every_subcommand_exits_non_zero_on_bad_input_and_appends_nothing(story, subcommand, as_json):
    ids = story.haircut_story()
    session_id = story.session_id
    if subcommand == "review list":
        session_id = "no-such-session"
    elif subcommand == "checkpoint":
        session_id = Story(story.provider).session_id  # no roleplay entries at all
    elif subcommand == "archive":
        service.archive(provider=story.provider, session_id=story.session_id, actor="system", channel="internal")
    args, code = BAD_INPUT[subcommand]
    args = tuple(ids["reply"] if arg == "ASSISTANT" else arg for arg in args)
    before = story.entries()
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("rp", session_id, *args, *(("--json",) if as_json else ()), stdout=out)
    assert caught.value.returncode == code, str(caught.value)
    assert "\n" not in str(caught.value) and out.getvalue() == ""
    assert story.entries() == before


def test_compact_appends_the_compaction_and_its_checkpoint(story):
    story.haircut_story()
    out, _ = rp(story.session_id, "compact")
    assert out == "Nothing to compact on this branch.\n"
    for n in range(12):
        story.user(f"Chapter {n}: " + "They walk on through the hills. " * 400)
        story.assistant(f"Alice tells story {n}. " + "The road is long and the sky is grey. " * 400)
    before = service.inspect_state(story.provider, story.session_id)
    result = rp_json(story.session_id, "compact", "--instructions", "keep the hair")
    compaction, checkpoint = result["compaction"], result["checkpoint"]
    assert compaction["type"] == "compaction"
    assert checkpoint["parentId"] == compaction["id"]
    assert checkpoint["customType"] == schema.CHECKPOINT_TYPE
    assert result["state"]["state_hash"] == before["state_hash"]
    assert story.leaf == checkpoint["id"]
    with pytest.raises(CommandError):
        rp("no-such-session", "compact")


# --- the state panel and the diff, from the command line ---


def test_inspect_state_with_provenance_human_and_json(story):
    ids = story.haircut_story()
    correction = service.correct_state(
        provider=story.provider,
        session_id=story.session_id,
        payload={"op": "add", "path": "/location", "value": "inn", "reason": "at the inn"},
        actor="system",
        channel="internal",
    )
    out, _ = rp(story.session_id, "inspect", "state", "--provenance")
    lines = out.splitlines()
    assert lines[0] == f"Character alice, revision 2, state hash {story_hash(story)[:12]}; at the session's leaf."
    assert lines[1].startswith("appearance: {1 member}") and lines[1].endswith(
        f"<- turn commit-haircut, entry {ids['cut']}"
    )
    assert lines[2] == f'  hair: "{SHORT_HAIR}"'  # covered by /appearance: no marker of its own
    assert lines[3].startswith('location: "inn"')
    assert lines[3].endswith(f"<- correction {correction['data']['commitId']}, entry {correction['id']}: at the inn")

    detail = rp_json(story.session_id, "inspect", "state", "--provenance")
    expected = service.inspect_state_detail(story.provider, story.session_id)
    assert detail == orjson.loads(orjson.dumps(expected))
    assert detail["provenance"]["/location"]["kind"] == "correction"

    earlier, _ = rp(story.session_id, "inspect", "state", "--provenance", "--entry", ids["reply"])
    assert f"at entry {ids['reply']}" in earlier and "revision 0" in earlier


def story_hash(story) -> str:
    return service.inspect_state(story.provider, story.session_id)["state_hash"]


def test_state_diff_between_two_branches_human_and_json(story):
    ids = story.haircut_story()
    service.history_goto(
        provider=story.provider,
        session_id=story.session_id,
        entry_id=ids["ask_cut"],
        actor="system",
        channel="internal",
    )
    story.user("Braid it instead?")
    braid = story.turn([add("/appearance", {"hair": "braided"}), add("/location", "river")], commit_id="commit-braid")

    out, _ = rp(story.session_id, "state", "diff", ids["cut"], "leaf")
    assert out.splitlines() == [
        f"State of alice from {ids['cut']} (revision 1) to {braid} (revision 1); common ancestor {ids['reply']}.",
        f'changed /appearance/hair: "{SHORT_HAIR}" -> "braided"',
        f"    from: turn commit-haircut, entry {ids['cut']}",
        f"    to:   turn commit-braid, entry {braid}",
        'added   /location: "river"',
        "    from: never set on this side",
        f"    to:   turn commit-braid, entry {braid}",
    ]
    diff = rp_json(story.session_id, "state", "diff", ids["cut"], braid)
    assert diff == orjson.loads(orjson.dumps(service.diff_states(story.provider, story.session_id, ids["cut"], braid)))
    assert [c["pointer"] for c in diff["changed"]] == ["/appearance/hair"]
    assert diff["from"]["entry_id"] == ids["cut"] and diff["to"]["entry_id"] == braid

    same, _ = rp(story.session_id, "state", "diff", "leaf", braid)
    assert same.splitlines()[-1] == "No differences."


def test_not_found_exits_3_for_every_subcommand_on_an_unknown_session(story):
    story.haircut_story()
    for args in [
        ("inspect", "state"),
        ("inspect", "state", "--provenance"),
        ("state", "diff", "leaf", "leaf"),
        ("context",),
        ("state", "correct", '{"op":"add","path":"/x","value":1,"reason":"r"}'),
        ("review", "list"),
        ("review", "amend", "review-x", "1"),
        ("review", "accept", "review-x"),
        ("review", "reject", "review-x"),
        ("turn", "repair", '{"turnId":"t","ops":[]}'),
        ("checkpoint",),
        ("compact",),
        ("archive",),
        ("history", "goto", "deadbeef"),
        ("history", "fork", "deadbeef", "--position", "at"),
    ]:
        error = rp_error("no-such-session", *args)
        assert error.returncode == 3, (args, str(error))
        assert str(error).startswith("session_not_found: "), args


def test_unknown_and_decided_reviews(story):
    story.haircut_story()
    story.turn(reviews=[review("review-trust", add("/trust", 0.5))])
    error = rp_error(story.session_id, "review", "accept", "review-typo")
    assert error.returncode == 3 and str(error).startswith("review_not_found: ") and "review-typo" in str(error)
    rp(story.session_id, "review", "reject", "review-trust")
    before = story.entries()
    error = rp_error(story.session_id, "review", "accept", "review-trust")
    assert error.returncode == 4 and str(error).startswith("review_already_decided: ")
    assert story.entries() == before


def test_help_speaks_of_the_product_not_the_seed():
    from roleplay.management.commands.rp import Command

    parser = Command().create_parser("manage.py", "rp")
    text = parser.format_help()
    assert "seed" not in text.lower() and "/rp" not in text
    assert "exit 2 (bad input), 3 (unknown session, entry or review), 4 (conflict" in " ".join(text.split())
    for sub in ("inspect", "review", "state", "context", "turn", "checkpoint", "compact", "archive", "history"):
        assert sub in text


# --- the README's examples, on the demo data ---


def readme_rp_lines(session_id: str) -> list[list[str]]:
    """The ``rp`` lines of README.md's Commands section that name ``session_id``."""
    prefix = f".venv/bin/python manage.py rp {session_id} "
    readme = (PROJECT_DIR / "README.md").read_text(encoding="utf-8")
    return [shlex.split(line)[3:] for line in readme.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("kind", PROVIDER_KINDS)
def test_the_readme_examples_work_on_the_demo_data(db, kind):
    call_command("load_demo", "--provider", kind, stdout=StringIO())
    lines = readme_rp_lines("demo-roleplay-1")
    assert any(args[1:3] == ["state", "correct"] for args in lines), lines
    provider = get_provider(kind)
    before = service.inspect_state(provider, "demo-roleplay-1")
    for args in lines:
        rp(*args)  # raises CommandError (non-zero) on failure
    after = service.inspect_state_detail(provider, "demo-roleplay-1")
    assert after["revision"] == before["revision"] + sum(args[1:3] == ["state", "correct"] for args in lines)
    assert after["provenance"]["/location"]["kind"] == "correction"


def test_inspect_and_diff_for_a_named_character(story):
    ids = story.haircut_story()
    assert rp_json(story.session_id, "inspect", "state", "--character", "alice")["revision"] == 1
    other, _ = rp(story.session_id, "inspect", "state", "--character", "bob")
    assert other.startswith("Character bob, revision 0,")
    detail = rp_json(story.session_id, "inspect", "state", "--provenance", "--character", "bob")
    assert detail["character_id"] == "bob" and detail["rows"] == []
    diff = rp_json(story.session_id, "state", "diff", ids["reply"], "leaf", "--character", "bob")
    assert diff["character_id"] == "bob" and diff["changed"] == diff["added"] == diff["removed"] == []
