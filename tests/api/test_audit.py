"""Every write of the API leaves audit records: channel ``api``, the request's
user as actor, in the same transaction as the change; a refused write leaves none."""

from __future__ import annotations

from sessiontree.models import AuditRecord

from .conftest import assistant_message
from .test_access import alice_session, send, writes

EXPECTED_OPERATIONS = {
    "/": "update_session",
    "/entries/": "append_entry",
    "/labels/": "set_label",
    "/navigate/": "navigate_tree",
    "/switch-leaf/": "switch_leaf",
    "/reset-leaf/": "reset_leaf",
    "/fork/": "fork_session",
    "/in-flight/": "begin_in_flight",
    "/archive/": "archive_session",
    "/restore/": "restore_session",
}


def test_every_write_is_audited_as_the_user_from_the_api(api, kind, users):
    sid, entry_id = alice_session(api, kind)
    assert AuditRecord.objects.filter(session_id=sid, operation="create_session").count() == 1
    in_flight_id = None
    for method, url, body in writes(sid, entry_id):
        if url.endswith(f"/entries/{entry_id}/") and in_flight_id:
            url = url.replace(entry_id, in_flight_id)
        last = AuditRecord.objects.order_by("-id").values_list("id", flat=True).first() or 0
        response = send(api.client, method, url, body)
        assert response.status_code < 300, (method, url, response.content[:300])
        if url.endswith("in-flight/"):
            in_flight_id = response.json()["id"]
        new = list(AuditRecord.objects.filter(id__gt=last))
        if url.endswith("/compact/"):  # nothing to compact in this short session: nothing changed
            assert response.json() == {"compacted": False} and new == []
            continue
        assert new, (method, url)
        assert {(r.channel, r.actor, r.user_id) for r in new} == {("api", "alice", users.alice.pk)}
        operations = {r.operation for r in new}
        suffix = url.removeprefix(f"/api/sessions/{sid}")
        if method == "delete":
            assert operations == {"delete_session"}
        elif method == "patch" and "/entries/" in suffix:
            assert operations == {"complete_in_flight"}
        else:
            assert EXPECTED_OPERATIONS[suffix] in operations, (suffix, operations)


def test_a_refused_write_leaves_no_record(api, kind, users):
    sid, entry_id = alice_session(api, kind)
    before = AuditRecord.objects.count()
    api.post(f"/api/sessions/{sid}/switch-leaf/", {"entry_id": entry_id, "expected_leaf_id": "stale123"}, 409)
    api.post(f"/api/sessions/{sid}/entries/", {"entry": {"type": "mystery"}}, 400)
    api.post(f"/api/sessions/{sid}/in-flight/", {"entry": {"type": "message", "message": assistant_message("")}}, 201)
    api.post(f"/api/sessions/{sid}/labels/", {"target_id": entry_id, "label": "x"}, 409)  # in flight: refused
    assert AuditRecord.objects.count() == before + 1
