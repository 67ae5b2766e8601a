"""The classifiers' incremental scan (``services.classification``, the
``moderate_sessions`` command's service): flags opened through the
operations layer with source ``classifier:<name>``, a cursor per classifier
so that nothing is scanned twice, no second open flag for an entry, late
commits caught as gaps, a failing back end reported; on both providers."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from sessiontree.classifiers.base import Finding
from sessiontree.models import AuditRecord, ClassifierCursor, ModerationFlag, SearchEntry
from sessiontree.providers import search_index
from sessiontree.services import classification, entries, moderation
from tests.fake_openai import serve_fake_openai

WHO = {"actor": "cli:ops", "channel": "cli"}
CARD = "4111 1111 1111 1111"


def user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def say(provider, session_id, text):
    return entries.append_message(
        session_id=session_id, message=user(text), provider=provider, actor="t", channel="internal"
    )


def scan(**options):
    report = classification.scan_entries(**WHO, **{"classifiers": ["pii"], **options})
    (only,) = report["classifiers"]
    return only


def test_a_card_number_opens_one_flag_and_a_rerun_scans_nothing(provider):
    provider.create_session(session_id="s1")
    card = say(provider, "s1", f"my card is {CARD}")
    say(provider, "s1", "nothing personal here")
    first = scan()
    assert (first["scanned"], first["with_findings"], first["flags_opened"]) == (2, 1, 1)
    (flag,) = ModerationFlag.objects.all()
    assert (flag.session_id, flag.entry_id, flag.category, flag.source, flag.status) == (
        "s1",
        card["id"],
        "pii",
        "classifier:pii",
        "open",
    )
    assert "4111" not in flag.note and "card number" in flag.note
    record = AuditRecord.objects.get(operation="flag_entry")
    assert (record.actor, record.channel, record.entry_ids) == ("cli:ops", "cli", [card["id"]])
    again = scan()
    assert (again["scanned"], again["flags_opened"]) == (0, 0)
    later = say(provider, "s1", "mail me at someone@example.org")
    third = scan()
    assert (third["scanned"], third["flags_opened"]) == (1, 1)
    assert ModerationFlag.objects.get(entry_id=later["id"]).note == "Personal data: e-mail address"
    assert ClassifierCursor.objects.get(classifier="pii").position == SearchEntry.objects.order_by("-id")[0].id


def test_a_restart_never_opens_a_second_open_flag(provider):
    provider.create_session(session_id="s1")
    card = say(provider, "s1", f"card {CARD}")
    scan()
    again = scan(restart=True)
    assert (again["scanned"], again["flags_opened"], again["already_open"]) == (1, 0, 1)
    assert ModerationFlag.objects.count() == 1
    # A flag dismissed by a moderator is closed: a later full rescan opens a new one.
    flag = ModerationFlag.objects.get()
    moderation.resolve_flag(flag_id=flag.pk, status="dismissed", actor="lead", channel="admin")
    third = scan(restart=True)
    assert third["flags_opened"] == 1
    assert ModerationFlag.objects.filter(entry_id=card["id"], status="open").count() == 1


def test_a_dry_run_opens_nothing_and_moves_no_cursor(provider):
    provider.create_session(session_id="s1")
    say(provider, "s1", f"card {CARD}")
    dry = scan(dry_run=True)
    assert (dry["scanned"], dry["flags_opened"]) == (1, 1)
    assert not ModerationFlag.objects.exists() and not AuditRecord.objects.filter(operation="flag_entry").exists()
    assert not ClassifierCursor.objects.filter(position__gt=0).exists()
    assert scan()["flags_opened"] == 1


def test_limit_and_batches(provider):
    provider.create_session(session_id="s1")
    for i in range(7):
        say(provider, "s1", f"line {i}")
    first = scan(limit=3, batch_size=2)
    assert first["scanned"] == 3
    rest = scan(batch_size=2)
    assert rest["scanned"] == 4


def test_entries_gone_since_they_were_indexed_are_skipped(provider, monkeypatch):
    provider.create_session(session_id="s1")
    say(provider, "s1", f"card {CARD}")

    def vanished(**kwargs):
        from sessiontree.core.errors import SessionNotFound

        raise SessionNotFound("gone")

    monkeypatch.setattr(moderation, "flag_entry", vanished)
    report = scan()
    assert (report["flags_opened"], report["skipped"]) == (0, 1)


class Fixed:
    """A classifier that finds what it is told to."""

    name = "fixed"

    def __init__(self, category: str) -> None:
        self.category = category

    def classify(self, texts):
        return [[Finding(self.category, "found")] for _ in texts]


def test_a_category_outside_the_configured_ones_becomes_other(provider, monkeypatch, settings):
    provider.create_session(session_id="s1")
    say(provider, "s1", "anything")
    monkeypatch.setattr(classification, "get_classifiers", lambda names: [Fixed("weird")])
    report = classification.scan_entries(**WHO)["classifiers"][0]
    assert report["flags_opened"] == 1 and ModerationFlag.objects.get().category == "other"
    settings.SESSIONTREE_MODERATION_CATEGORIES = ["pii"]
    say(provider, "s1", "more")
    report = classification.scan_entries(**WHO)["classifiers"][0]
    assert (report["flags_opened"], report["skipped"]) == (0, 1)


def test_one_run_at_a_time_per_classifier(provider):
    ClassifierCursor.objects.create(
        classifier="pii", lease_owner="someone (host:1)", lease_until=timezone.now() + timedelta(minutes=5)
    )
    with pytest.raises(classification.ScanInProgress):
        scan()
    ClassifierCursor.objects.filter(classifier="pii").update(lease_until=timezone.now() - timedelta(seconds=1))
    scan()  # an expired lease is taken over
    assert ClassifierCursor.objects.get(classifier="pii").lease_owner == ""


def test_rows_committed_after_a_later_id_are_scanned_as_gaps(provider, monkeypatch):
    """InnoDB hands out ids before commit: row 3 may commit after row 5 was
    scanned. The cursor keeps 3..4 as a gap and reads them when they appear."""
    monkeypatch.setattr(search_index, "ids_commit_in_order", lambda: False)
    provider.create_session(session_id="s1")
    for entry_id in ("e1", "e2", "e5"):
        SearchEntry.objects.create(
            id={"e1": 1, "e2": 2, "e5": 5}[entry_id], session_id="s1", entry_id=entry_id, entry_type="message", text="x"
        )
    scan()
    cursor = ClassifierCursor.objects.get(classifier="pii")
    assert cursor.position == 5 and [gap[:2] for gap in cursor.gaps] == [[3, 4]]
    SearchEntry.objects.create(id=3, session_id="s1", entry_id="e3", entry_type="message", text=f"card {CARD}")
    late = scan()
    assert (late["scanned"], late["flags_opened"]) == (1, 0)  # e3 names no stored entry: skipped
    assert late["skipped"] == 1
    cursor.refresh_from_db()
    assert [gap[:2] for gap in cursor.gaps] == [[4, 4]]
    # A gap older than SESSIONTREE_MODERATION_GAP_SECONDS is a rollback's or a deletion's: dropped.
    old = (timezone.now() - timedelta(hours=2)).isoformat()
    ClassifierCursor.objects.filter(classifier="pii").update(gaps=[[4, 4, old]])
    SearchEntry.objects.create(id=6, session_id="s1", entry_id="e6", entry_type="message", text="y")
    scan()
    cursor.refresh_from_db()
    assert cursor.gaps == [] and cursor.position == 6


def test_the_cursor_logic():
    state = classification._Cursor(0, [])
    state.advance([1, 2, 5, 9], "t1", "t0")
    assert state.position == 9 and state.gaps == [[3, 4, "t1"], [6, 8, "t1"]]
    state.advance([4, 7], "t2", "t0")
    assert state.position == 9 and state.gaps == [[3, 3, "t1"], [6, 6, "t1"], [8, 8, "t1"]]
    state.advance([10, 12], "t3", "t2")  # gaps first seen before the cutoff are dropped
    assert state.position == 12 and state.gaps == [[11, 11, "t3"]]
    ordered = classification._Cursor(0, [])
    ordered.advance([1, 5], "t1", "t0", track_gaps=False)
    assert ordered.position == 5 and ordered.gaps == []


def moderation_reply(body):
    flagged = {"flagged": True, "categories": {"harassment": True}, "category_scores": {"harassment": 0.9}}
    clean = {"flagged": False, "categories": {}, "category_scores": {}}
    results = [flagged if "worthless" in text else clean for text in body["input"]]
    return 200, json.dumps({"id": "m", "model": "x", "results": results}).encode(), 0.0


def test_the_openai_compatible_classifier_opens_flags(provider, settings):
    provider.create_session(session_id="s1")
    bad = say(provider, "s1", "you are worthless")
    say(provider, "s1", "hello")
    with serve_fake_openai(moderation_reply) as fake:
        settings.SESSIONTREE_MODERATION_OPENAI_BASE_URL = fake.url
        report = classification.scan_entries(classifiers=["openai_moderation"], **WHO)["classifiers"][0]
    assert (report["scanned"], report["flags_opened"], report["error"]) == (2, 1, None)
    flag = ModerationFlag.objects.get()
    assert (flag.entry_id, flag.category, flag.source) == (bad["id"], "harassment", "classifier:openai_moderation")


def test_a_failing_back_end_stops_that_classifier_keeping_the_batches_done(provider, settings):
    provider.create_session(session_id="s1")
    for i in range(3):
        say(provider, "s1", f"you are worthless {i}")
    calls = []

    def reply(body):
        calls.append(1)
        return (503, b"{}", 0.0) if len(calls) > 1 else moderation_reply(body)

    settings.SESSIONTREE_MODERATION_OPENAI_RETRIES = 1
    with serve_fake_openai(reply) as fake:
        settings.SESSIONTREE_MODERATION_OPENAI_BASE_URL = fake.url
        report = classification.scan_entries(classifiers=["openai_moderation", "pii"], batch_size=1, **WHO)[
            "classifiers"
        ]
    failed, pii = report
    assert failed["scanned"] == 1 and failed["flags_opened"] == 1
    assert failed["error"]["code"] == "classifier_failed" and failed["error"]["exit_code"] == 7
    assert pii["scanned"] == 3 and pii["error"] is None  # the next classifier still ran
    cursor = ClassifierCursor.objects.get(classifier="openai_moderation")
    assert cursor.position == SearchEntry.objects.order_by("id")[0].id and cursor.lease_owner == ""
