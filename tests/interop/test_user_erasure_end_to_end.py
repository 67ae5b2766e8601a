"""A person's data erased from end to end, on both providers, with the
pinned Pi 1.6.0 reading what is left.

alice writes two sessions (a title quoting her, an idempotent append whose
answer is kept, a repair's backup of her file), flags one of bob's entries
with a note quoting herself, and bob forks her session, compacts the fork
(its summary quoting her) and goes on in it with his own words. A superuser
erases alice through the API. Afterwards no byte of her text is left in any
file under the file root (backups included) or in any row of any table the
project writes (the search index and its FTS5 tables included), bob's own
words are all there, and Pi opens bob's fork with the same entries, tree
and contexts as ours, the marker where her text was.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection

from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.path import build_tree
from sessiontree.core.redaction import ERASED
from sessiontree.models import AgentSession, SearchEntry
from sessiontree.providers.factory import get_provider
from sessiontree.services import moderation, repair, sessions, tree
from sessiontree.summarizers import ExtractiveSummarizer
from tests.api.conftest import Api, grant, token_client

from .messages import assistant, user
from .test_erase_end_to_end import pi_file
from .views import context_view, json_value, tree_view

pytestmark = pytest.mark.django_db

# alice's words: a single rare word (what a full-text index keeps as a token) and phrases.
WORD = "Quixotrelmanzibar"
PHRASES = ["my flat is at 12 Rue Oberkampf", "alice.martin@example.org", "blood type AB negative"]
NEEDLES = [WORD.encode(), WORD.lower().encode(), *(p.encode() for p in PHRASES)]
BOB = "Bob's own follow-up about the Tuesday deploy"


def held(data: bytes) -> list[bytes]:
    return [needle for needle in NEEDLES if needle in data]


def files_holding(root: Path) -> dict[str, list[bytes]]:
    return {str(p): found for p in root.rglob("*") if p.is_file() and (found := held(p.read_bytes()))}


def tables_holding() -> dict[str, list[bytes]]:
    found = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            data = b"\n".join(
                b"|".join(value if isinstance(value, bytes) else str(value).encode() for value in row)
                for row in cursor.fetchall()
            )
            if hits := held(data):
                found[table] = hits
    return found


@pytest.mark.parametrize("kind", ["file", "mysql"])
def test_erasing_a_user_leaves_no_byte_of_them_and_pi_still_reads_the_other_users_fork(pi, kind, tmp_path, settings):
    root = Path(settings.SESSIONTREE_FILE_ROOT)
    provider = get_provider(kind)
    alice_user = User.objects.create_user("alice", password="pw")
    alice = Api(token_client(alice_user))
    bob_user = grant(
        User.objects.create_user("bob", password="pw", is_staff=True), "view_agentsession", "moderate_session"
    )
    bob = Api(token_client(bob_user))
    dpo = Api(token_client(User.objects.create_superuser("dpo", password="pw")))

    sid = alice.create_session(kind, cwd="/home/alice", title=f"About {WORD}")["session_id"]
    first = alice.append(sid, message=user(f"Hi, I am {WORD}; {PHRASES[0]}."))
    answer = alice.append(sid, message=assistant(f"Noted, {WORD}. Write to {PHRASES[1]}?", tokens=300))
    alice.post(
        f"/api/sessions/{sid}/entries/",
        {"message": user(f"Also: {PHRASES[2]}.")},
        201,
        HTTP_IDEMPOTENCY_KEY="alice-append-1",
    )
    alice.append(sid, message=assistant("Understood " + "and recorded " * 30, tokens=700))
    other = alice.create_session(kind, title="second")["session_id"]
    alice.append(other, message=user(f"{WORD} again: " + "more words " * 20))
    if kind == "file":  # a repair's backup of her file, holding her words
        with provider.path_for(sid).open("ab") as handle:
            handle.write(b'{"type":"message","id":"torn0001","message":{"role":"user","content":"' + WORD.encode())
        plan = repair.repair_session(session_id=sid, actor="ops", channel="cli", apply=True)
        assert plan.backup is not None and held(Path(plan.backup).read_bytes())

    # bob: his own session, flagged by alice with a note quoting her.
    bobs = bob.create_session(kind, title="deploys")["session_id"]
    bob_entry = bob.append(bobs, message=user("When do we deploy?"))
    # alice reports it (she may not see bob's session over HTTP: the report is made by the service).
    moderation.flag_entry(
        session_id=bobs,
        entry_id=bob_entry["id"],
        category="other",
        note=f"{WORD} reports this",
        source="user_report",
        actor=alice_user,
        channel="api",
    )
    # bob forks alice's session (it becomes his), compacts the fork, goes on in it.
    fork = bob.post(f"/api/sessions/{sid}/fork/", {"entry_id": answer["id"], "position": "at"}, 201)
    fid = fork["session_id"]
    sessions.update_session(session_id=fid, user_id="bob", actor="dpo", channel="internal")
    bob.append(fid, message=user(BOB + " " + "please " * 40))
    bob.append(fid, message=assistant("Bob's answer " + "words " * 80, tokens=1500))
    compaction = tree.compact_session(
        session_id=fid,
        provider=provider,
        summarizer=ExtractiveSummarizer(),
        settings=CompactionSettings(keep_recent_tokens=100),
        actor="bob",
        channel="internal",
    )
    assert WORD in compaction["summary"]
    bob.append(fid, message=user(BOB))
    assert (files_holding(root) if kind == "file" else {}) or tables_holding()  # her words are everywhere now
    assert SearchEntry.objects.filter(session_id=fid, text__contains=WORD).exists()

    dry = dpo.post("/api/users/alice/erase/", {"dry_run": True})
    report = dpo.post("/api/users/alice/erase/", {})
    assert report == {**dry, "dry_run": False}
    assert {s["session_id"] for s in report["sessions"]} == {sid, other}
    places = {(p["session_id"], p["entry_id"]): p["kind"] for p in report["copies"]}
    assert places[(fid, first["id"])] == "copy" and places[(fid, answer["id"])] == "copy"
    assert places[(fid, compaction["id"])] == "summary"
    assert all(session == fid for session, _ in places)

    # No byte of her left: every file under the root, every row of every table.
    assert files_holding(root) == {}
    assert tables_holding() == {}
    assert not AgentSession.objects.filter(user_id="alice").exists()
    # bob's words all stay.
    fork_entries = provider.list_entries(fid)
    assert sum(1 for e in fork_entries if BOB in str(e)) == 2
    assert "When do we deploy?" in str(provider.list_entries(bobs))

    # Pi opens bob's fork: the same entries, tree and contexts as ours, the marker in place.
    path = pi_file(provider, kind, fid, tmp_path)
    ours = provider.list_entries(fid)
    read = pi.read(path)
    assert read["entries"] == json_value(ours)
    assert read["tree"] == tree_view(build_tree(ours))
    for at, context in zip(read["leaves"][1:], read["contexts"][1:], strict=True):
        assert context == context_view(provider.build_context(fid, at)), f"context at {at}"
    leaf = bob.get(f"/api/sessions/{fid}/")["leaf_entry_id"]
    sent = pi.read(path, leaves=[leaf])["contexts"][0]["messages"]
    assert sent[0]["role"] == "compactionSummary" and sent[0]["summary"] == ERASED
    assert BOB in str(sent)
