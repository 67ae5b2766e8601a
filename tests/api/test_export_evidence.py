"""Exports over HTTP are audited and carry a manifest: the session, scope,
entry count, SHA-256 of the JSONL bytes, exporter and time, on both providers."""

from __future__ import annotations

import base64
import hashlib

from sessiontree.models import AuditRecord

from .conftest import Api, assert_audited


def body_of(response) -> bytes:
    return b"".join(response.streaming_content)


def test_an_export_is_audited_with_the_hash_of_its_bytes(api: Api, kind: str, users) -> None:
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    api.say(sid, "hi", role="assistant")
    response = api.get(f"/api/sessions/{sid}/export/", HTTP_ACCEPT="application/x-ndjson")
    data = body_of(response)
    digest = hashlib.sha256(data).hexdigest()
    assert response["Repr-Digest"] == f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"
    record = assert_audited(sid, "export_session", users.alice)
    assert record.detail == {"scope": "full", "entries": 2, "bytes": len(data), "sha256": digest}


def test_the_manifest_describes_the_export_it_was_made_with(api: Api, kind: str, users) -> None:
    sid = api.create_session(kind)["session_id"]
    first = api.say(sid, "hello")
    api.say(sid, "hi", role="assistant")
    data = body_of(
        api.get(f"/api/sessions/{sid}/export/?scope=active&entry={first['id']}", HTTP_ACCEPT="application/x-ndjson")
    )
    manifest = api.get(f"/api/sessions/{sid}/export/manifest/?scope=active&entry={first['id']}")
    assert manifest["exported_at"].endswith("Z")
    assert {key: value for key, value in manifest.items() if key != "exported_at"} == {
        "format": "pi-jsonl",
        "session_id": sid,
        "scope": "active",
        "entry_id": first["id"],
        "entry_count": 1,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "exporter": "alice",
        "channel": "api",
    }
    record = assert_audited(sid, "export_session", users.alice)
    assert record.detail["manifest_only"] is True and record.detail["sha256"] == manifest["sha256"]
    assert record.entry_ids == [first["id"]]


def test_refused_exports_leave_no_record(api_for, users, kind: str) -> None:
    alice, bob = api_for(users.alice), api_for(users.bob)
    sid = alice.create_session(kind)["session_id"]
    alice.say(sid, "hello")
    assert bob.client.get(f"/api/sessions/{sid}/export/").status_code == 404
    assert bob.client.get(f"/api/sessions/{sid}/export/manifest/").status_code == 404
    for query, status in [("?scope=subtree", 400), ("?scope=subtree&entry=nothere1", 404), ("?scope=x", 400)]:
        assert alice.client.get(f"/api/sessions/{sid}/export/manifest/{query}").status_code == status
        assert alice.client.get(f"/api/sessions/{sid}/export/{query}").status_code == status
    assert not AuditRecord.objects.filter(operation="export_session").exists()


def test_a_viewer_exports_another_users_session_as_themself(api_for, users, kind: str) -> None:
    alice, viewer = api_for(users.alice), api_for(users.viewer)
    sid = alice.create_session(kind)["session_id"]
    alice.say(sid, "hello")
    manifest = viewer.get(f"/api/sessions/{sid}/export/manifest/")
    assert manifest["exporter"] == "viewer"
    assert_audited(sid, "export_session", users.viewer)


def test_odd_entry_ids_never_reach_a_header(api: Api, kind: str, users) -> None:
    """Schemathesis: ``?entry=\\x1eĀ`` with the full scope went into the
    manifest's file name and broke the Content-Disposition header."""
    sid = api.create_session(kind)["session_id"]
    api.say(sid, "hello")
    response = api.client.get(f"/api/sessions/{sid}/export/manifest/", {"entry": "\x1e\u0100"})
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="{sid}.manifest.json"'
    assert response.json()["entry_id"] is None  # the whole tree starts at no entry


def test_download_names_keep_plain_characters() -> None:
    from sessiontree.services.exports import SessionExport

    manifest = {"session_id": "s1", "scope": "subtree", "entry_id": 'a"b\nc'}
    made = SessionExport(data=b"", manifest=manifest)  # type: ignore[arg-type]
    assert made.filename == "s1-subtree-a_b_c.jsonl" and made.manifest_filename == "s1-subtree-a_b_c.manifest.json"
