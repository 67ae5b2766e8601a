"""The card-number case from end to end, on both providers, with the pinned
Pi 1.6.0 reading our files.

A user pastes a card number and an SSN. The message is flagged (a note
quoting the number), forked, the fork compacted (its summary quotes the
number), a repair keeps a copy of the session's file, the message is hidden
(Pi's context shows the notice), shown again (a context edit restoring the
text) and hidden again, a navigation hands the text back to re-send (kept
as the stored answer of an idempotent write), and then it is erased with
scope ``all`` through the API. Afterwards no byte of the number or the SSN
is left in any file under the file root (backups included) or in any table
of the database, and Pi opens every affected file with the same tree and
the same contexts as ours, the marker where the text was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from sessiontree.core.compaction import CompactionSettings
from sessiontree.core.path import build_tree
from sessiontree.core.redaction import ERASED
from sessiontree.providers.factory import get_provider
from sessiontree.services import repair, tree
from sessiontree.summarizers import ExtractiveSummarizer
from tests.api.conftest import Api, token_client

from .messages import assistant, user
from .views import context_view, json_value, tree_view, write_session_file

pytestmark = pytest.mark.django_db

CARD = "4111 1111 1111 1111"
SSN = "078-05-1120"
NEEDLES = [CARD.encode(), CARD.replace(" ", "").encode(), SSN.encode(), SSN.replace("-", "").encode()]
NOTICE = "[removed by a moderator]"


def held_needles(data: bytes) -> list[bytes]:
    return [needle for needle in NEEDLES if needle in data]


def files_holding(root: Path) -> dict[str, list[bytes]]:
    """Every file under ``root`` (session files, backups, anything) that holds a needle."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and (held := held_needles(path.read_bytes())):
            found[str(path)] = held
    return found


def tables_holding() -> dict[str, list[bytes]]:
    """Every table of the database (each row, raw SQL) that holds a needle."""
    found = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            data = b"\n".join(
                b"|".join(value if isinstance(value, bytes) else str(value).encode() for value in row)
                for row in cursor.fetchall()
            )
            if held := held_needles(data):
                found[table] = held
    return found


def pi_file(provider: Any, kind: str, session_id: str, tmp_path: Path) -> Path:
    if kind == "file":
        return provider.path_for(session_id)  # Pi opens our own file
    return write_session_file(
        tmp_path / f"{session_id}.jsonl", provider.get_header(session_id), provider.list_entries(session_id)
    )


def pi_context_at_leaf(pi: Any, path: Path, leaf: str) -> dict[str, Any]:
    return pi.read(path, leaves=[leaf])["contexts"][0]


@pytest.mark.parametrize("kind", ["file", "mysql"])
def test_a_card_number_leaves_no_byte_anywhere_and_pi_still_reads_every_file(pi, kind, tmp_path, settings):
    root = Path(settings.SESSIONTREE_FILE_ROOT)
    provider = get_provider(kind)
    alice = Api(token_client(User.objects.create_user("alice", password="pw")))
    dpo = Api(token_client(User.objects.create_superuser("dpo", password="pw")))

    sid = alice.create_session(kind, cwd="/srv/shop")["session_id"]
    secret = alice.append(sid, message=user(f"Please charge my card {CARD}, my SSN is {SSN}."))
    answer = alice.append(sid, message=assistant("I will not store that, but noted.", tokens=300))
    for n in range(4):
        alice.append(sid, message=user(f"Question {n}: " + "tell me more " * 40))
        alice.append(sid, message=assistant(f"Answer {n}: " + "details " * 60, tokens=900 + n))

    # Flagged, with a note quoting the number.
    alice.post(
        f"/api/sessions/{sid}/entries/{secret['id']}/flags/", {"category": "pii", "note": f"it says {CARD}"}, 201
    )
    # Forked after it; the fork compacted, its summary quoting it.
    fork = alice.post(f"/api/sessions/{sid}/fork/", {"entry_id": answer["id"], "position": "at"}, 201)
    fid = fork["session_id"]
    alice.append(fid, message=user("In the fork: " + "more please " * 60))
    alice.append(fid, message=assistant("Fork answer " + "words " * 80, tokens=1500))
    compaction = tree.compact_session(
        session_id=fid,
        provider=provider,
        summarizer=ExtractiveSummarizer(),
        settings=CompactionSettings(keep_recent_tokens=100),
        actor="alice",
        channel="internal",
    )
    assert CARD in compaction["summary"]
    # A repair copies the whole file before it cuts a torn line: a backup holding the number.
    if kind == "file":
        with provider.path_for(sid).open("ab") as handle:
            handle.write(b'{"type":"message","id":"torn0001","message":{"role":"user","content":"card ' + CARD.encode())
        plan = repair.repair_session(session_id=sid, actor="ops", channel="cli", apply=True)
        assert plan.backup is not None and held_needles(Path(plan.backup).read_bytes())
    # Hidden: Pi, opening the file, sends the notice instead of the text.
    dpo.post(f"/api/sessions/{sid}/entries/{secret['id']}/hide/", {}, 201)
    leaf = alice.get(f"/api/sessions/{sid}/")["leaf_entry_id"]
    path = pi_file(provider, kind, sid, tmp_path)
    sent = pi_context_at_leaf(pi, path, leaf)["messages"]
    assert sent[0]["content"] == NOTICE and not held_needles(str(sent).encode())
    # Shown again (a context edit carrying the text), hidden again.
    dpo.post(f"/api/sessions/{sid}/entries/{secret['id']}/unhide/", {}, 201)
    dpo.post(f"/api/sessions/{sid}/entries/{secret['id']}/hide/", {}, 201)
    # A navigation hands the text back to re-send; its answer is kept under an idempotency key.
    nav = alice.post(f"/api/sessions/{sid}/navigate/", {"target_id": secret["id"]}, 200, HTTP_IDEMPOTENCY_KEY="nav-1")
    assert CARD in nav["editor_text"]
    alice.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": leaf})
    assert files_holding(root) if kind == "file" else tables_holding()  # the number is everywhere now

    dry = dpo.post(f"/api/sessions/{sid}/entries/{secret['id']}/erase/", {"reason": "PII (card, SSN)", "dry_run": True})
    result = dpo.post(f"/api/sessions/{sid}/entries/{secret['id']}/erase/", {"reason": "PII (card, SSN)"})
    assert result == dry
    kinds = {(place["session_id"], place["entry_id"]): place["kind"] for place in result["changed"]}
    assert kinds[(sid, secret["id"])] == "entry"
    assert kinds[(fid, secret["id"])] == "copy"
    assert kinds[(fid, compaction["id"])] == "summary"
    assert sum(1 for (s, _), k in kinds.items() if s == sid and k == "copy") == 3  # hide, unhide, hide
    assert result["outside"] == []

    # No byte left: every file under the root (session files, the repair's backup), every table.
    assert files_holding(root) == {}
    assert tables_holding() == {}
    export = alice.get(f"/api/sessions/{sid}/export/")
    assert not held_needles(b"".join(export.streaming_content))

    # Pi opens every affected file: the same entries, tree and contexts as ours, the marker in place.
    for session_id in (sid, fid):
        path = pi_file(provider, kind, session_id, tmp_path)
        ours = provider.list_entries(session_id)
        answer_ = pi.read(path)
        assert answer_["entries"] == json_value(ours)
        assert answer_["tree"] == tree_view(build_tree(ours))
        for at, context in zip(answer_["leaves"][1:], answer_["contexts"][1:], strict=True):
            assert context == context_view(provider.build_context(session_id, at)), f"context at {at}"
    source_leaf = alice.get(f"/api/sessions/{sid}/")["leaf_entry_id"]
    sent = pi_context_at_leaf(pi, pi_file(provider, kind, sid, tmp_path), source_leaf)["messages"]
    assert sent[0]["content"] == ERASED  # the hide's notice is the erased content's replacement now
    fork_leaf = alice.get(f"/api/sessions/{fid}/")["leaf_entry_id"]
    fork_sent = pi_context_at_leaf(pi, pi_file(provider, kind, fid, tmp_path), fork_leaf)["messages"]
    assert fork_sent[0]["role"] == "compactionSummary" and fork_sent[0]["summary"] == ERASED
