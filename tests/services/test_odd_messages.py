"""A hand-edited file may hold anything in a message entry's ``message`` (a
string, a list): readers survive it instead of crashing with AttributeError."""

from __future__ import annotations

import pytest

from sessiontree.core.compaction import CompactionSettings, prepare_compaction
from sessiontree.core.entries import message_of
from sessiontree.core.errors import InvalidEntry
from sessiontree.core.pi_session_file import serialize_line
from sessiontree.providers.file_provider import FileSessionTreeProvider, clear_index_cache
from sessiontree.services import tree


def test_message_of_is_a_dict_whatever_the_entry_holds():
    assert message_of({"message": {"role": "user"}}) == {"role": "user"}
    assert message_of({"message": "hello"}) == {}
    assert message_of({"message": ["x"]}) == {}
    assert message_of({}) == {}


@pytest.mark.django_db
def test_a_string_message_in_a_file_is_survived_by_compaction_navigation_and_edits(tmp_path):
    clear_index_cache()
    provider = FileSessionTreeProvider(root=tmp_path)
    session = provider.create_session(session_id="odd")
    first = provider.append_message("odd", {"role": "user", "content": "a " * 400, "timestamp": 1})
    odd = {"type": "message", "id": "odd00001", "parentId": first["id"], "timestamp": "t", "message": "hand-edited"}
    with open(session["session_file"], "ab") as f:
        f.write(serialize_line(odd))
    last = provider.append_message("odd", {"role": "user", "content": "b " * 400, "timestamp": 1})
    path = provider.get_active_path("odd")
    assert [e["id"] for e in path] == [first["id"], "odd00001", last["id"]]
    prepare_compaction(path, CompactionSettings(keep_recent_tokens=10))  # no AttributeError
    result = tree.navigate_tree(
        provider=provider, session_id="odd", target_id="odd00001", actor="system", channel="internal"
    )  # not a user message: it becomes the leaf
    assert result["leaf_entry_id"] == "odd00001" and result["editor_text"] is None
    with pytest.raises(InvalidEntry, match="not a message whose content"):
        provider.append_context_edit("odd", "odd00001", None)
