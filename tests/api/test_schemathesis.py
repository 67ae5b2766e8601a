"""Property-based API testing with Schemathesis against the served schema.

The schema is loaded from ``/api/schema/`` of the Django WSGI application and
every operation gets generated requests (valid and invalid ones), sent
through WSGI with a token. Each generated request is sent twice: as
generated (random ids: mostly 400/404), and aimed at a real session of the
caller (on the ``file`` and the ``mysql`` provider in turn, example by
example) with one of its entries as the entry id, so that validation, tree
operations and conflicts are reached too. Checks: no 5xx, status codes,
content types, headers and bodies as the schema documents them.

Bounded: ``SCHEMATHESIS_MAX_EXAMPLES`` examples per operation (default 50;
CI runs the default). It runs in ``make test`` on both database legs.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sessiontree import services
from sessiontree.models import AgentSession
from sessiontree.providers.file_provider import clear_index_cache
from tests.contract.conftest import PROVIDER_KINDS

from .conftest import assistant_message, user_message

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "50"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(autouse=True)
def _keep_the_test_connection(db) -> Iterator[None]:
    # As Django's test client does: a finished request must not close the
    # connection, which holds the test's transaction.
    clear_index_cache()
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def caller(db) -> tuple[User, dict[str, str]]:
    # A superuser: every permission, so every code path (hard delete included) is reachable.
    user = User.objects.create_superuser("fuzzer", password="pw")
    token = Token.objects.create(user=user)
    return user, {"Authorization": f"Token {token.key}"}


class RealSessions:
    """Small sessions of the caller (two turns, a label), one per provider;
    examples take ``file`` and ``mysql`` in turn. A session an example closed
    or removed is made again."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.kinds = itertools.cycle(PROVIDER_KINDS)
        self.session_ids: dict[str, str] = {}

    def _create(self, kind: str) -> str:
        user = self.user
        session = services.sessions.create_session(actor=user, channel="api", kind=kind, user_id="fuzzer")
        sid = session["session_id"]
        first = services.entries.append_message(session_id=sid, message=user_message("hi"), actor=user, channel="api")
        services.entries.append_message(session_id=sid, message=assistant_message("hello"), actor=user, channel="api")
        services.tree.set_label(session_id=sid, target_id=first["id"], label="start", actor=user, channel="api")
        services.entries.append_message(session_id=sid, message=user_message("more"), actor=user, channel="api")
        return str(sid)

    def get(self) -> tuple[str, str]:
        """A session's id and an entry id of it (the leaf, or the first entry)."""
        kind = next(self.kinds)
        row = AgentSession.objects.filter(session_id=self.session_ids.get(kind), status="active").first()
        if row is None or row.entry_count == 0:
            self.session_ids[kind] = self._create(kind)
            row = AgentSession.objects.get(session_id=self.session_ids[kind])
        return row.session_id, row.leaf_entry_id or str(row.root_entry_id)


@pytest.fixture
def real_sessions(caller: tuple[User, dict[str, str]]) -> RealSessions:
    return RealSessions(caller[0])


# The served schema (no database needed to serve it: it is public and static).
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, caller, real_sessions):
    _user, headers = caller
    case.call_and_validate(headers=headers, checks=CHECKS)
    if "session_id" in (case.path_parameters or {}):
        sid, entry_id = real_sessions.get()
        case.path_parameters["session_id"] = sid
        if "entry_id" in case.path_parameters:
            case.path_parameters["entry_id"] = entry_id
        case.call_and_validate(headers=headers, checks=CHECKS)
