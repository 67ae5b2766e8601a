"""Storage failures over HTTP (issue 24 #3): a write that lost a race inside
the database is 409 ``storage_conflict`` with ``Retry-After``; a database
that cannot serve is 503 ``storage_unavailable``, a commit whose outcome is
unknown 503 ``commit_outcome_unknown``, both with ``Retry-After``; the admin's
pages answer the same statuses, never a 500."""

from __future__ import annotations

import pytest
from django.db import connection

from sessiontree.api.errors import exception_handler
from sessiontree.models import AuditRecord
from sessiontree.providers import db_errors

from .conftest import Api, user_message

AUDIT_TABLE = AuditRecord._meta.db_table


def failing_audit_insert(code: int):
    def wrapper(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("INSERT") and AUDIT_TABLE in sql:
            with connection.wrap_database_errors:
                raise connection.Database.OperationalError(code, "injected")
        return execute(sql, params, many, context)

    return connection.execute_wrapper(wrapper)


def test_a_write_that_lost_a_race_is_409_with_retry_after(api: Api, kind):
    sid = api.create_session(kind)["session_id"]
    with failing_audit_insert(1213):
        response = api.client.post(f"/api/sessions/{sid}/entries/", {"message": user_message("x")}, format="json")
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "storage_conflict"
    assert response.json()["error"]["details"] == {"category": "conflict"}
    assert int(response["Retry-After"]) >= 1
    assert api.get(f"/api/sessions/{sid}/entries/")["results"] == []


@pytest.mark.parametrize("code", [1047, 2013])
def test_a_database_that_cannot_serve_is_503_with_retry_after(api: Api, kind, code):
    sid = api.create_session(kind)["session_id"]
    with failing_audit_insert(code):
        response = api.client.post(f"/api/sessions/{sid}/entries/", {"message": user_message("x")}, format="json")
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "storage_unavailable"
    assert int(response["Retry-After"]) >= 1
    assert "injected" not in response.content.decode()  # the server's words stay in the log


def test_a_commit_whose_outcome_is_unknown_is_503_naming_it():
    unknown = db_errors.DatabaseCommitUnknown(2013, "Lost connection to server during query")
    response = exception_handler(unknown, {})
    assert response is not None and response.status_code == 503
    assert response.data["error"]["code"] == "commit_outcome_unknown"
    assert "idempotency key" in response.data["error"]["message"]
    assert int(response["Retry-After"]) >= 1


def test_an_admin_page_whose_database_fails_is_503_not_500(admin_client, monkeypatch):
    from sessiontree.admin import sessions as session_admin

    def unavailable(*args, **kwargs):
        with connection.wrap_database_errors:
            raise connection.Database.OperationalError(2006, "MySQL server has gone away")

    monkeypatch.setattr(session_admin.AgentSessionAdmin, "get_queryset", unavailable)
    response = admin_client.get("/admin/sessiontree/agentsession/")
    assert response.status_code == 503
    assert response["Retry-After"]
    assert b"Storage unavailable" in response.content
