"""``moderation.erase_entry`` on both providers: the entry, its copies in the
lineage (also after the source's hard delete), the summaries made from it,
the context edits carrying it, the storage's backups, and every row beside
the tree; dry runs, holds, idempotency keys and the audit."""

from __future__ import annotations

import hashlib
import sys
import types

import orjson
import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType

from sessiontree.core.errors import BadInput, EntryNotFound, SessionNotFound, SessionOnHold
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.core.redaction import ERASED
from sessiontree.models import AgentSession, AuditRecord, IdempotencyRecord, LegalHold, ModerationFlag
from sessiontree.services import entries, erasure, moderation, protection, sessions, tree
from sessiontree.services.audit import SYSTEM_ACTOR, record
from sessiontree.services.idempotency import IdempotencyKeyReused
from sessiontree.summarizers import SummaryRequest

from .session_builders import assistant, user

WHO = {"actor": "mod", "channel": "internal"}
CARD = "4111 1111 1111 1111"
SSN = "078-05-1120"
SECRET_TEXT = f"my card is {CARD} and my SSN is {SSN}"


class QuotingSummarizer:
    """A summary that quotes what it summarized, as a model's often does."""

    name = "quoting"

    def summarize(self, request: SummaryRequest) -> str:
        return f"{request.previous_summary or ''}\nThe user said: {request.conversation_text()}".strip()


def everything(provider, *session_ids) -> str:
    """Every entry of the sessions, and everything the database keeps beside them."""
    stored = [provider.list_entries(sid) for sid in session_ids]
    rows = [
        list(model.objects.values())
        for model in (AgentSession, AuditRecord, IdempotencyRecord, ModerationFlag, LegalHold, LogEntry)
    ]
    return orjson.dumps([stored, rows], default=str).decode()


def gone(text: str) -> bool:
    return CARD not in text and SSN not in text


@pytest.fixture
def chat(provider):
    provider.create_session(session_id="s1", cwd="/w")
    secret = entries.append_message(session_id="s1", message=user(SECRET_TEXT), provider=provider, **WHO)
    answer = entries.append_message(session_id="s1", message=assistant("noted"), provider=provider, **WHO)
    later = entries.append_message(session_id="s1", message=user("thanks"), provider=provider, **WHO)
    return provider, secret, answer, later


def erase(provider, session_id, entry_id, **kwargs):
    return moderation.erase_entry(
        session_id=session_id,
        entry_id=entry_id,
        reason=kwargs.pop("reason", "pii: a card"),
        provider=provider,
        **{**WHO, **kwargs},
    )


def test_the_entry_is_erased_in_place_and_the_tree_still_works(chat):
    provider, secret, answer, later = chat
    result = erase(provider, "s1", secret["id"])
    assert result == {"changed": [{"session_id": "s1", "entry_id": secret["id"], "kind": "entry"}], "outside": []}
    stored = provider.list_entries("s1")
    assert stored[0]["message"] == {"role": "user", "content": ERASED}
    assert [e["id"] for e in stored] == [secret["id"], answer["id"], later["id"]]
    assert [e["parentId"] for e in stored] == [None, secret["id"], answer["id"]]
    context = provider.build_context("s1")
    assert [m["role"] for m in context["messages"]] == ["user", "assistant", "user"]
    assert context["messages"][0]["content"] == ERASED
    assert gone(everything(provider, "s1"))


def test_copies_in_forks_forks_of_forks_and_clones_are_erased(chat):
    provider, secret, answer, later = chat
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    grandchild = tree.fork_session(
        session_id=fork["session_id"], entry_id=answer["id"], position="at", provider=provider, **WHO
    )
    clone = tree.fork_session(session_id="s1", entry_id=later["id"], position="at", provider=provider, **WHO)
    before = tree.fork_session(session_id="s1", entry_id=secret["id"], position="before", provider=provider, **WHO)
    result = erase(provider, fork["session_id"], secret["id"])  # named in a fork: the source is a copy too
    changed = {(c["session_id"], c["kind"]) for c in result["changed"]}
    assert changed == {
        (fork["session_id"], "entry"),
        ("s1", "copy"),
        (grandchild["session_id"], "copy"),
        (clone["session_id"], "copy"),
    }
    assert result["changed"][0] == {"session_id": fork["session_id"], "entry_id": secret["id"], "kind": "entry"}
    assert provider.list_entries(before["session_id"]) == []  # forked before it: holds nothing
    assert gone(everything(provider, "s1", fork["session_id"], grandchild["session_id"], clone["session_id"]))


def test_copies_are_found_after_their_source_was_deleted_for_good(chat):
    provider, secret, answer, _later = chat
    first = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    second = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    sessions.delete_session(session_id="s1", hard=True, provider=provider, **WHO)
    assert AgentSession.objects.get(session_id=first["session_id"]).parent is None  # detached
    result = erase(provider, first["session_id"], secret["id"])
    assert {(c["session_id"], c["kind"]) for c in result["changed"]} == {
        (first["session_id"], "entry"),
        (second["session_id"], "copy"),  # its sibling, through the source both still name
    }
    assert gone(everything(provider, first["session_id"], second["session_id"]))


def test_a_same_id_entry_that_is_no_copy_is_left_alone(chat):
    provider, secret, _answer, _later = chat
    fork = tree.fork_session(session_id="s1", entry_id=secret["id"], position="before", provider=provider, **WHO)
    other = entries.append_entry(
        session_id=fork["session_id"],
        entry={"type": "message", "id": secret["id"], "message": user("a different message")},
        provider=provider,
        **WHO,
    )
    erase(provider, "s1", secret["id"])
    assert provider.get_entry(fork["session_id"], other["id"])["message"]["content"] == "a different message"


def test_summaries_made_from_it_are_erased_and_others_are_not(chat):
    provider, secret, _answer, _later = chat
    quoting = {"summarizer": QuotingSummarizer(), "provider": provider, **WHO}
    for n in range(3):
        entries.append_message(session_id="s1", message=assistant(f"reply {n} " + "x " * 200), provider=provider, **WHO)
    compaction = tree.compact_session(session_id="s1", settings=small(), **quoting)
    assert CARD in compaction["summary"]
    # A side question after it, left with a summary: that summary is of the side question alone.
    side = entries.append_message(session_id="s1", message=user("a side question"), provider=provider, **WHO)
    navigated = tree.navigate_tree(session_id="s1", target_id=compaction["id"], summarize=True, **quoting)
    unrelated = navigated["summary_entry"]
    assert unrelated["fromId"] == side["id"] and CARD not in unrelated["summary"]
    # A later compaction takes the first one's summary over: derived too.
    for n in range(3):
        entries.append_message(session_id="s1", message=assistant(f"more {n} " + "y " * 200), provider=provider, **WHO)
    second = tree.compact_session(session_id="s1", settings=small(), **quoting)
    assert CARD in second["summary"]
    fork = tree.fork_session(session_id="s1", entry_id=compaction["id"], position="at", provider=provider, **WHO)
    dry = erase(provider, "s1", secret["id"], dry_run=True)
    result = erase(provider, "s1", secret["id"])
    assert result == dry
    assert result["changed"] == [
        {"session_id": "s1", "entry_id": secret["id"], "kind": "entry"},
        {"session_id": "s1", "entry_id": compaction["id"], "kind": "summary"},
        {"session_id": "s1", "entry_id": second["id"], "kind": "summary"},
        {"session_id": fork["session_id"], "entry_id": secret["id"], "kind": "copy"},
        {"session_id": fork["session_id"], "entry_id": compaction["id"], "kind": "summary"},  # a summary's copy
    ]
    assert provider.get_entry("s1", compaction["id"])["summary"] == ERASED
    assert provider.get_entry("s1", unrelated["id"])["summary"] == unrelated["summary"]
    assert provider.get_entry("s1", side["id"])["message"]["content"] == "a side question"
    assert gone(everything(provider, "s1", fork["session_id"]))
    # Pi's context of the erased session still starts with the (erased) summary.
    context = provider.build_context("s1")
    assert context["messages"][0]["role"] == "compactionSummary" and context["messages"][0]["summary"] == ERASED


def test_a_branch_summary_of_the_branch_that_held_it_is_erased(chat):
    provider, _secret, answer, later = chat
    tree.switch_leaf(session_id="s1", entry_id=answer["id"], provider=provider, **WHO)
    side = entries.append_message(session_id="s1", message=user(f"aside: {SECRET_TEXT}"), provider=provider, **WHO)
    navigated = tree.navigate_tree(
        session_id="s1", target_id=later["id"], summarize=True, summarizer=QuotingSummarizer(), provider=provider, **WHO
    )  # the side branch is left, and summarized
    summary = navigated["summary_entry"]
    assert CARD in summary["summary"] and summary["fromId"] == side["id"]
    result = erase(provider, "s1", side["id"])
    assert result["changed"] == [
        {"session_id": "s1", "entry_id": side["id"], "kind": "entry"},
        {"session_id": "s1", "entry_id": summary["id"], "kind": "summary"},
    ]
    assert provider.get_entry("s1", summary["id"])["summary"] == ERASED
    assert provider.get_entry("s1", summary["id"])["fromId"] == side["id"]


def test_hide_and_unhide_edits_are_erased_with_it(chat):
    provider, secret, _answer, _later = chat
    hidden = moderation.hide_entry(session_id="s1", entry_id=secret["id"], provider=provider, **WHO)
    shown = moderation.unhide_entry(session_id="s1", entry_id=secret["id"], provider=provider, **WHO)
    assert shown["replacement"]["content"] == SECRET_TEXT
    result = erase(provider, "s1", secret["id"])
    assert [c["entry_id"] for c in result["changed"]] == [secret["id"], hidden["id"], shown["id"]]
    assert [c["kind"] for c in result["changed"]] == ["entry", "copy", "copy"]
    assert provider.get_entry("s1", shown["id"])["replacement"] == {"content": ERASED}
    sent = dict(
        zip(provider.build_context("s1")["source_entry_ids"], provider.build_context("s1")["messages"], strict=True)
    )
    assert sent[secret["id"]]["content"] == ERASED
    assert gone(everything(provider, "s1"))


def test_scope_entry_erases_only_that_entry(chat):
    provider, secret, answer, _later = chat
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    hidden = moderation.hide_entry(session_id="s1", entry_id=secret["id"], provider=provider, **WHO)
    result = erase(provider, "s1", secret["id"], scope="entry")
    assert result["changed"] == [{"session_id": "s1", "entry_id": secret["id"], "kind": "entry"}]
    assert CARD in provider.get_entry(fork["session_id"], secret["id"])["message"]["content"]
    assert provider.get_entry("s1", hidden["id"])["replacement"]["content"] == moderation.DEFAULT_NOTICE


def test_a_dry_run_lists_what_the_erase_then_changes_and_changes_nothing(chat):
    provider, secret, answer, _later = chat
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    moderation.hide_entry(session_id="s1", entry_id=secret["id"], provider=provider, **WHO)
    before = everything(provider, "s1", fork["session_id"])
    files = {sid: _file_bytes(provider, sid) for sid in ("s1", fork["session_id"])}
    dry = erase(provider, "s1", secret["id"], dry_run=True)
    assert everything(provider, "s1", fork["session_id"]) == before
    assert {sid: _file_bytes(provider, sid) for sid in files} == files
    assert not AuditRecord.objects.filter(operation="erase_entry").exists()
    done = erase(provider, "s1", secret["id"])
    assert done == dry and len(done["changed"]) == 3
    assert erase(provider, "s1", secret["id"]) == {"changed": [], "outside": []}  # twice: nothing more


def test_a_held_session_refuses_the_erase(chat):
    provider, secret, answer, _later = chat
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    protection.place_hold(session_id=fork["session_id"], reason="litigation", **WHO)
    before = everything(provider, "s1", fork["session_id"])
    for dry_run in (True, False):
        with pytest.raises(SessionOnHold, match=fork["session_id"]):
            erase(provider, "s1", secret["id"], dry_run=dry_run)
    assert everything(provider, "s1", fork["session_id"]) == before
    # Only this session's entry: the held fork is not touched, so it is not refused.
    assert erase(provider, "s1", secret["id"], scope="entry")["changed"][0]["session_id"] == "s1"
    protection.place_hold(session_id="s1", reason="litigation", **WHO)
    with pytest.raises(SessionOnHold):
        erase(provider, "s1", answer["id"], scope="entry")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"reason": ""}, BadInput),
        ({"reason": " \n\t"}, BadInput),
        ({"reason": None}, BadInput),
        ({"reason": "x" * 201}, BadInput),
        ({"reason": "a\x00b"}, BadInput),
        ({"scope": "everything"}, BadInput),
        ({"dry_run": "yes"}, BadInput),
        ({"entry_id": "missing"}, EntryNotFound),
        ({"session_id": "nope"}, SessionNotFound),
    ],
)
def test_bad_input_erases_nothing(chat, kwargs, error):
    provider, secret, _answer, _later = chat
    before = everything(provider, "s1")
    call = {"session_id": "s1", "entry_id": secret["id"], "reason": "pii", "provider": provider, **WHO, **kwargs}
    if "session_id" in kwargs:
        call.pop("provider")
    with pytest.raises(error):
        moderation.erase_entry(**call)
    assert everything(provider, "s1") == before


def test_the_audit_keeps_who_why_which_and_a_hash_never_the_content(chat):
    provider, secret, answer, _later = chat
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    line = serialize_line(provider.get_entry("s1", secret["id"])).rstrip(b"\n")
    erase(provider, "s1", secret["id"], reason="GDPR art. 17, ticket 42", actor="dpo", channel="cli")
    records = {r.session_id: r for r in AuditRecord.objects.filter(operation="erase_entry")}
    assert set(records) == {"s1", fork["session_id"]}
    own = records["s1"]
    assert (own.actor, own.channel, own.entry_ids) == ("dpo", "cli", [secret["id"]])
    assert own.detail["reason"] == "GDPR art. 17, ticket 42" and own.detail["scope"] == "all"
    assert own.detail["erased"] == [
        {"entry_id": secret["id"], "kind": "entry", "sha256": hashlib.sha256(line).hexdigest()}
    ]
    assert records[fork["session_id"]].detail["erased"][0]["kind"] == "copy"
    assert gone(orjson.dumps([r.detail for r in records.values()]).decode())


def test_rows_beside_the_tree_keep_nothing_of_it(chat):
    provider, secret, _answer, later = chat
    on_it = moderation.flag_entry(session_id="s1", entry_id=secret["id"], category="pii", note="a card: " + CARD, **WHO)
    moderation.resolve_flag(flag_id=on_it["id"], status="actioned", note=f"it was {CARD}", **WHO)
    other = moderation.flag_entry(
        session_id="s1", entry_id=later["id"], category="other", note=f"repeated: {SSN} again", **WHO
    )
    benign = moderation.flag_entry(session_id="s1", entry_id=later["id"], category="spam", note="just spam", **WHO)
    record(
        actor=SYSTEM_ACTOR,
        channel="internal",
        operation="update_session",
        session_id="s1",
        detail={"quote": SECRET_TEXT},
    )
    protection.place_hold(session_id="s1", reason=f"court order about {CARD}", **WHO)
    protection.release_hold(session_id="s1", **WHO)
    sessions.update_session(
        session_id="s1", title=f"card {CARD}", metadata={"note": SSN + " here"}, provider=provider, **WHO
    )
    keyed = entries.append_message(
        session_id="s1", message=user(f"again: {SECRET_TEXT}"), provider=provider, idempotency_key="k-append", **WHO
    )
    navigated = tree.navigate_tree(
        session_id="s1", target_id=secret["id"], provider=provider, idempotency_key="k-nav", **WHO
    )
    assert navigated["editor_text"] == SECRET_TEXT
    row = AgentSession.objects.get(session_id="s1")
    LogEntry.objects.create(
        user_id=_staff().pk,
        content_type=ContentType.objects.get_for_model(AgentSession),
        object_id=str(row.pk),
        object_repr=str(row),
        action_flag=CHANGE,
        change_message=f"Navigated. Text to re-send: {SECRET_TEXT[:25]}",
    )
    assert not gone(everything(provider, "s1"))
    erase(provider, "s1", secret["id"])
    erase(provider, "s1", keyed["id"])
    assert gone(everything(provider, "s1")), everything(provider, "s1")
    flags = {f.pk: f for f in ModerationFlag.objects.all()}
    assert (flags[on_it["id"]].note, flags[on_it["id"]].resolution_note) == (ERASED, ERASED)  # notes on it: gone whole
    assert flags[other["id"]].note == f"repeated:{ERASED} again"  # a quote elsewhere: the quote goes
    assert flags[benign["id"]].note == "just spam"
    # A replayed keyed write answers the erased entry, never the text.
    replay = entries.append_message(
        session_id="s1", message=user(f"again: {SECRET_TEXT}"), provider=provider, idempotency_key="k-append", **WHO
    )
    assert replay["id"] == keyed["id"] and replay["message"]["content"] == ERASED
    detail = AuditRecord.objects.filter(operation="erase_entry", session_id="s1").first().detail
    assert detail["cleaned_beside"]["idempotency_records"] >= 1


def test_the_first_message_preview_loses_the_text(chat):
    provider, secret, _answer, _later = chat
    assert CARD in AgentSession.objects.get(session_id="s1").first_message_preview
    erase(provider, "s1", secret["id"])
    assert AgentSession.objects.get(session_id="s1").first_message_preview == ERASED


def test_an_idempotency_key_makes_a_retried_erase_answer_the_same(chat):
    provider, secret, answer, _later = chat
    tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    first = erase(provider, "s1", secret["id"], idempotency_key="erase-1")
    again = erase(provider, "s1", secret["id"], idempotency_key="erase-1")
    assert again == first and len(first["changed"]) == 2
    assert AuditRecord.objects.filter(operation="erase_entry").count() == 2  # one per session, once
    with pytest.raises(IdempotencyKeyReused):
        erase(provider, "s1", answer["id"], idempotency_key="erase-1")
    kept = IdempotencyRecord.objects.get(key="erase-1")
    assert kept.result == {"value": first}


def test_a_failure_midway_leaves_the_key_free_and_a_retry_finishes(chat, monkeypatch):
    provider, secret, answer, _later = chat
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    real = erasure.reindex_erased_entries
    calls = []

    def failing_second(*, session_id, entries):
        calls.append(session_id)
        if session_id == fork["session_id"]:
            raise RuntimeError("the index is down")
        real(session_id=session_id, entries=entries)

    monkeypatch.setattr(erasure, "reindex_erased_entries", failing_second)
    with pytest.raises(RuntimeError):
        erase(provider, "s1", secret["id"], idempotency_key="erase-2")
    assert provider.get_entry("s1", secret["id"])["message"]["content"] == ERASED  # its own unit committed
    assert CARD in provider.get_entry(fork["session_id"], secret["id"])["message"]["content"]  # rolled back
    assert not IdempotencyRecord.objects.filter(key="erase-2").exists()
    monkeypatch.setattr(erasure, "reindex_erased_entries", real)
    retry = erase(provider, "s1", secret["id"], idempotency_key="erase-2")
    assert retry["changed"] == [{"session_id": fork["session_id"], "entry_id": secret["id"], "kind": "copy"}]
    assert gone(everything(provider, "s1", fork["session_id"]))


def test_erased_entries_are_passed_to_the_search_index_in_the_erase_transaction(chat, monkeypatch):
    provider, secret, _answer, _later = chat
    seen = []
    index = types.ModuleType(erasure.SEARCH_INDEX_MODULE)

    def reindex(*, session_id, entries):
        seen.append((session_id, entries, AuditRecord.objects.filter(operation="erase_entry").count()))

    index.reindex = reindex  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, erasure.SEARCH_INDEX_MODULE, index)
    monkeypatch.setattr(erasure.importlib.util, "find_spec", lambda name: object())
    erase(provider, "s1", secret["id"])
    ((session_id, passed, records_before),) = seen
    assert session_id == "s1" and [e["id"] for e in passed] == [secret["id"]]
    assert passed[0]["message"]["content"] == ERASED
    assert records_before == 0  # before its audit record: inside the same unit


def test_without_a_search_index_the_hook_does_nothing(monkeypatch):
    # The module exists now (services/search_index.py): taken away, nothing is called.
    monkeypatch.setattr(erasure.importlib.util, "find_spec", lambda name: None)
    erasure.reindex_erased_entries(session_id="s1", entries=[])


# --- helpers ------------------------------------------------------------------------------------


def small():
    from sessiontree.core.compaction import CompactionSettings

    return CompactionSettings(keep_recent_tokens=50)


def _file_bytes(provider, session_id):
    if provider.kind != "file":
        return None
    return provider.path_for(session_id).read_bytes()


def _staff():
    from django.contrib.auth.models import User

    return User.objects.get_or_create(username="logger", defaults={"is_staff": True})[0]


def test_archived_and_deleted_sessions_are_erased_too(chat):
    provider, secret, answer, _later = chat
    fork = tree.fork_session(session_id="s1", entry_id=answer["id"], position="at", provider=provider, **WHO)
    sessions.archive_session(session_id="s1", provider=provider, **WHO)
    sessions.delete_session(session_id=fork["session_id"], provider=provider, **WHO)  # soft
    result = erase(provider, "s1", secret["id"])
    assert [c["kind"] for c in result["changed"]] == ["entry", "copy"]
    assert gone(everything(provider, "s1", fork["session_id"]))
    assert AgentSession.objects.get(session_id="s1").status == "archived"


def test_an_entry_in_flight_is_refused(chat):
    provider, _secret, _answer, _later = chat
    streaming = entries.begin_in_flight(
        session_id="s1", entry={"type": "message", "message": user(CARD)}, provider=provider, **WHO
    )
    with pytest.raises(erasure.EntryInFlight):
        erase(provider, "s1", streaming["id"])
