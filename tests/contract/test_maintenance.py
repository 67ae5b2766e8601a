"""The storage port's maintenance methods and the meta row's preview, on
every storage (the two we ship and the in-memory one of the tests)."""

from __future__ import annotations

import pytest

from sessiontree.core.entries import PREVIEW_LENGTH
from sessiontree.models import AgentSession


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "p", "model": "m"}


def preview_of(session_id: str) -> str | None:
    return AgentSession.objects.get(session_id=session_id).first_message_preview


def test_the_first_user_message_becomes_the_rows_preview(provider):
    provider.create_session(session_id="s1")
    assert preview_of("s1") is None
    provider.append_custom_entry("s1", "setup", {"x": 1})
    provider.append_message("s1", assistant("hello first"))
    assert preview_of("s1") is None  # no user message yet
    provider.append_message("s1", {"role": "user", "content": [{"type": "text", "text": " Fix   the\nbug "}]})
    provider.append_message("s1", user("a later question"))
    assert preview_of("s1") == "Fix the bug"


def test_a_long_first_message_is_cut_and_an_image_only_one_is_empty(provider):
    provider.create_session(session_id="long")
    provider.append_message("long", user("word " * 100))
    preview = preview_of("long")
    assert len(preview) == PREVIEW_LENGTH and preview.endswith("…")
    provider.create_session(session_id="image")
    provider.append_message("image", {"role": "user", "content": [{"type": "image", "data": "x", "mimeType": "p"}]})
    provider.append_message("image", user("text after the image"))
    assert preview_of("image") == ""  # the first user message had no text: later ones do not replace it


def test_copies_and_completed_in_flight_messages_set_the_preview(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", assistant("intro"))
    question = provider.append_message("s1", user("the question"))
    fork = provider.create_branched_session("s1", question["id"])
    assert preview_of(fork["session_id"]) == "the question"
    provider.create_session(session_id="stream")
    streaming = provider.begin_in_flight_entry("stream", {"type": "message", "message": user("")})
    provider.update_in_flight_entry("stream", streaming["id"], {"message": user("streamed")}, complete=True)
    assert preview_of("stream") == "streamed"


def test_scan_gives_the_entries_and_the_rows_counts(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("q"))
    a = provider.append_message("s1", assistant("a"))
    provider.switch_leaf("s1", u["id"])
    b = provider.append_message("s1", assistant("b"))
    scanned = provider.scan("s1")
    assert scanned.session_id == "s1" and scanned.provider == provider.kind
    assert [e["id"] for e in scanned.entries] == [u["id"], a["id"], b["id"]]
    assert (scanned.counts.entry_count, scanned.counts.branch_count, scanned.counts.leaf_entry_id) == (3, 2, b["id"])
    assert scanned.missing is None


def test_scan_leaves_an_in_flight_leaf_out_of_the_counts(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("q"))
    provider.begin_in_flight_entry("s1", {"type": "message", "message": assistant("")})
    assert provider.scan("s1").counts.leaf_entry_id is None


def test_recount_and_recompute_restore_a_damaged_meta_row(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("q"))
    a = provider.append_message("s1", assistant("a"))
    AgentSession.objects.filter(session_id="s1").update(
        entry_count=2, branch_count=7, compaction_count=3, leaf_entry_id="gone", first_message_preview=None
    )
    recount = provider.recount("s1")
    assert recount.recorded.branch_count == 7 and recount.recorded.leaf_entry_id == "gone"
    assert recount.stored.as_dict() == {
        "entry_count": 2,
        "branch_count": 1,
        "compaction_count": 0,
        "root_entry_id": u["id"],
        "leaf_entry_id": a["id"],
    }
    assert set(recount.changes()) == {"branch_count", "compaction_count", "leaf_entry_id"}
    seen = []
    done = provider.recompute_meta("s1", before_commit=seen.append)
    assert seen == [done] and done.stored == recount.stored
    row = AgentSession.objects.get(session_id="s1")
    assert (row.branch_count, row.compaction_count, row.leaf_entry_id) == (1, 0, a["id"])
    assert row.first_message_preview == "q"
    assert provider.recount("s1").changes() == {}
    # The storage's own view of the leaf is right again: the next append hangs from it.
    assert provider.append_message("s1", user("next"))["parentId"] == a["id"]
    assert provider.get_session("s1")["branch_count"] == 1


def test_a_failing_before_commit_leaves_the_row_as_it_was(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("q"))
    AgentSession.objects.filter(session_id="s1").update(branch_count=7)

    def refuse(_recount):
        raise RuntimeError("audit failed")

    with pytest.raises(RuntimeError):
        provider.recompute_meta("s1", before_commit=refuse)
    assert AgentSession.objects.get(session_id="s1").branch_count == 7


def test_nothing_is_torn_in_a_session_written_through_the_provider(provider):
    provider.create_session(session_id="s1")
    provider.append_message("s1", user("q"))
    called = []
    assert provider.cut_torn_tail("s1", before_commit=called.append) is None
    assert called == []
    assert len(provider.list_entries("s1")) == 1


def test_a_write_returns_the_session_as_stored(provider):
    provider.create_session(session_id="s1")
    u = provider.append_message("s1", user("q"))
    provider.append_message("s1", assistant("a"))
    moved = provider.switch_leaf("s1", u["id"])
    assert moved == provider.get_session("s1")
    assert moved["leaf_entry_id"] == u["id"]
