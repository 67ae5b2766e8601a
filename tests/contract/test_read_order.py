"""A consistent read lists the skeleton in append order on every provider
(``StoredView.parents()``): the API's entry pages slice it."""

from __future__ import annotations


def test_parents_iterate_in_append_order_whatever_the_branches(provider):
    session_id = provider.create_session()["session_id"]
    appended = []
    for i in range(30):
        if i % 7 == 6:  # a branch point: append order differs from any path order
            provider.switch_leaf(session_id, appended[i // 2])
        appended.append(provider.append_message(session_id, {"role": "user", "content": f"m{i}"})["id"])
    with provider.read(session_id) as view:
        assert list(view.parents()) == appended
        assert [entry["id"] for entry in view.all_entries()] == appended
