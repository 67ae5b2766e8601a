"""Property-based API testing with Schemathesis against the served schema.

The schema is loaded from ``/api/schema/`` of the Django WSGI application and
every operation gets generated requests (valid and invalid ones), sent
through WSGI with a token. Each generated request is sent twice: as
generated (random ids: mostly 400/404), and aimed at a real session of the
caller (on the ``file`` and the ``mysql`` provider in turn, example by
example) with one of its entries as the entry id, so that validation, tree
operations and conflicts are reached too. The real sessions are a plain
one and a roleplay one (a character, a checkpoint, pending and decided
reviews, an incomplete turn) per provider: the roleplay endpoints aim
mostly at the roleplay session, with one of its review ids and its entries
as ``leaf``/``from``/``to``, and now and then at the plain one (no
character); the other endpoints take both kinds in turn. Checks: no 5xx,
status codes, content types, headers and bodies as the schema documents them.

Bounded: ``SCHEMATHESIS_MAX_EXAMPLES`` examples per operation (default 50;
CI runs the default). It runs in ``make test`` on both database legs.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from hypothesis.errors import FlakyStrategyDefinition
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig

from roleplay import service as roleplay_service
from roleplay.reducer import RoleplayState
from sessiontree import services
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider
from sessiontree.providers.file_provider import clear_index_cache
from tests.contract.conftest import PROVIDER_KINDS

from .conftest import assistant_message, user_message

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "50"))
STATEFUL_EXAMPLES = int(os.environ.get("SCHEMATHESIS_STATEFUL_EXAMPLES", str(max(5, MAX_EXAMPLES // 2))))
# Every check Schemathesis has, with one addition to what two of them expect:
# 412 is how a well-formed conditional request with a version that is not the
# current one is answered (a generated If-Match names a random version), and a
# refusal like any other 4xx for a request that breaks the schema.
# 422 too: an Idempotency-Key the generator hands out again (it draws from a
# small alphabet) with another request is refused as reused, as documented.
POSITIVE = ["2xx", "3xx", "401", "403", "404", "409", "412", "422"]
# Where a request the schema allows can still be bad input, because what
# makes it good depends on what is stored, which no schema can say: a
# correction's or a repair's ops must apply to the state at the leaf, and a
# subtree export needs the entry it starts at (a query parameter that
# depends on another one).
STATE_DEPENDENT_INPUT = [
    r"^/api/sessions/\{session_id\}/roleplay/(corrections|repairs)/$",
    r"^/api/sessions/\{session_id\}/export/(manifest/)?$",
]
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {"expected-statuses": POSITIVE},
            "negative_data_rejection": {
                "expected-statuses": ["400", "401", "403", "404", "405", "406", "409", "412", "415", "422"]
            },
        },
        "operations": [
            *(
                {
                    "include-path-regex": pattern,
                    "checks": {"positive_data_acceptance": {"expected-statuses": [*POSITIVE, "400"]}},
                }
                for pattern in STATE_DEPENDENT_INPUT
            ),
            # DELETE of a session is a soft delete (DESIGN.md §9): the session stays
            # readable, with status "deleted", until restored or deleted for good. A
            # read after it is the documented answer, not a deleted resource served.
            {
                "include-path-regex": r"^/api/sessions/\{session_id\}/",
                "checks": {"use_after_free": {"enabled": False}},
            },
        ],
    }
)


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


# The caller's token, for Schemathesis' auth provider (below): set per test.
TOKEN: dict[str, str] = {}


@pytest.fixture
def caller(db) -> Iterator[tuple[User, dict[str, str]]]:
    # A superuser: every permission, so every code path (hard delete included) is reachable.
    user = User.objects.create_superuser("fuzzer", password="pw")
    token = Token.objects.create(user=user)
    TOKEN["key"] = token.key
    try:
        yield user, {"Authorization": f"Token {token.key}"}
    finally:
        TOKEN.clear()


@dataclass
class Target:
    """A real session to aim an example at, and ids to put in its path and query."""

    session_id: str
    entry_id: str  # the leaf, or the first entry
    entry_ids: list[str]  # on the path to the leaf, root first
    review_ids: list[str]  # pending and decided
    turn_ids: list[str]  # incomplete


def custom(custom_type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "custom", "customType": custom_type, "data": data}


def turn_result(commit: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": f"call-{commit['commitId']}",
        "toolName": "roleplay_finalize_turn",
        "content": [{"type": "text", "text": "Turn finalized."}],
        "details": {"characterId": "alice", "commit": commit},
        "isError": False,
        "timestamp": 3,
    }


class RealSessions:
    """Small sessions of the caller, per provider: a plain one (two turns, a
    label) and a roleplay one. Examples take ``file`` and ``mysql`` in turn.
    A session an example closed or removed is made again, and so is a
    roleplay session whose character was archived or that has no pending
    review or incomplete turn left."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.plain_kinds = itertools.cycle(PROVIDER_KINDS)
        # Roleplay endpoints: the roleplay session twice as often as the plain one.
        self.roleplay_targets = itertools.cycle(
            [("roleplay", kind) for kind in PROVIDER_KINDS] * 2 + [("plain", kind) for kind in PROVIDER_KINDS]
        )
        self.other_targets = itertools.cycle(
            [(flavour, kind) for flavour in ("plain", "roleplay") for kind in PROVIDER_KINDS]
        )
        self.picks = itertools.count()
        self.session_ids: dict[tuple[str, str], str] = {}

    def _write(self, **kwargs: Any) -> dict[str, Any]:
        return {"actor": self.user, "channel": "api", **kwargs}

    def _create_plain(self, kind: str) -> str:
        session = services.sessions.create_session(**self._write(kind=kind, user_id="fuzzer"))
        sid = str(session["session_id"])
        first = services.entries.append_message(**self._write(session_id=sid, message=user_message("hi")))
        services.entries.append_message(**self._write(session_id=sid, message=assistant_message("hello")))
        services.tree.set_label(**self._write(session_id=sid, target_id=first["id"], label="start"))
        services.entries.append_message(**self._write(session_id=sid, message=user_message("more")))
        return sid

    def _create_roleplay(self, kind: str) -> str:
        session = services.sessions.create_session(**self._write(kind=kind, user_id="fuzzer", title="roleplay"))
        sid = str(session["session_id"])
        add = services.entries.append_entry
        say = services.entries.append_message
        add(**self._write(session_id=sid, entry=custom("pi-roleplay-identity", {"characterId": "alice"})))
        say(**self._write(session_id=sid, message=user_message("Will you cut your hair?")))
        say(**self._write(session_id=sid, message=assistant_message("Alice cuts her hair.")))
        cut = {"commitId": "commit-cut", "ops": [{"op": "add", "path": "/appearance", "value": {"hair": "short"}}]}
        say(**self._write(session_id=sid, message=turn_result({**cut, "events": ["the haircut"]})))
        roleplay_service.create_checkpoint(provider=get_provider(kind), session_id=sid, actor=self.user, channel="api")
        reviews = [
            {"reviewId": f"review-{name}", "op": {"op": "add", "path": f"/{name}", "value": 1}, "note": name}
            for name in ("a", "b", "c", "d")
        ]
        say(
            **self._write(
                session_id=sid, message=turn_result({"commitId": "commit-rescue", "ops": [], "reviews": reviews})
            )
        )
        status = {"characterId": "alice", "turnId": "turn-9", "status": "incomplete"}
        add(**self._write(session_id=sid, entry=custom("pi-roleplay-turn-status", status)))
        roleplay_service.decide_review(
            provider=get_provider(kind),
            session_id=sid,
            review_id="review-d",
            decision="accept",
            actor=self.user,
            channel="api",
        )
        return sid

    def _usable(self, flavour: str, kind: str) -> tuple[str, RoleplayState | None] | None:
        row = AgentSession.objects.filter(session_id=self.session_ids.get((flavour, kind)), status="active").first()
        if row is None or row.entry_count == 0:
            return None
        if flavour == "plain":
            return str(row.session_id), None
        state = roleplay_service.inspect_state(get_provider(kind), row.session_id)
        if state["character_id"] != "alice" or state["archived"]:
            return None
        if not state["pending_reviews"] or not state["incomplete_turns"]:
            return None
        return str(row.session_id), state

    def get(self, *, roleplay: bool) -> Target:
        flavour, kind = next(self.roleplay_targets if roleplay else self.other_targets)
        usable = self._usable(flavour, kind)
        if usable is None:
            create = self._create_roleplay if flavour == "roleplay" else self._create_plain
            self.session_ids[(flavour, kind)] = create(kind)
            usable = self._usable(flavour, kind)
            assert usable is not None, (flavour, kind)
        sid, state = usable
        row = AgentSession.objects.get(session_id=sid)
        path = [entry["id"] for entry in get_provider(kind).get_active_path(sid)] if roleplay else []
        reviews = [r["reviewId"] for r in state["pending_reviews"] + state["decided_reviews"]] if state else []
        turns = [t["turnId"] for t in state["incomplete_turns"]] if state else []
        return Target(sid, row.leaf_entry_id or str(row.root_entry_id), path, reviews, turns)

    def pick(self, ids: list[str]) -> str | None:
        return ids[next(self.picks) % len(ids)] if ids else None


@pytest.fixture
def real_sessions(caller: tuple[User, dict[str, str]]) -> RealSessions:
    return RealSessions(caller[0])


# The served schema (no database needed to serve it: it is public and static).
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler(), config=CONFIG)


@schema.auth(refresh_interval=None)  # a new token every test: never cached
class TokenAuth:
    """The caller's token, given the way Schemathesis knows how to take away
    (its ignored_auth check sends requests without it and with a bad one)."""

    def get(self, case: Any, ctx: Any) -> str:
        return TOKEN.get("key", "no-token-outside-a-test")

    def set(self, case: Any, data: str, ctx: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Token {data}"}


def current_tag(session_id: str) -> str:
    session = get_provider(AgentSession.objects.get(session_id=session_id).provider).get_session(session_id)
    assert session is not None
    return services.versions.session_etag(session)


def negated(case: Any) -> bool:
    """An example that breaks the schema on purpose (in its path, query,
    headers or body). Its refusal was checked as generated; aimed at a real
    session, the ids and the expected leaf put in could mend what was broken,
    and a request made valid again would be reported as "accepted"."""
    components = case.meta.components if case.meta is not None else {}
    return any(component.mode.is_negative for component in components.values())


def aim_conditions(case: Any, target: Target, picks: Iterator[int]) -> None:
    """If-Match at the session's current version every other time (a stale
    one stays otherwise). With expected_leaf_id in the body too, the two must
    agree: a rule across a header and a body that no schema can state (its
    own test is in test_conditional.py), so the example is made to keep it."""
    headers = case.headers or {}
    if "If-Match" in headers and next(picks) % 2:
        headers["If-Match"] = current_tag(target.session_id)
    if "If-Match" in headers and isinstance(case.body, dict) and "expected_leaf_id" in case.body:
        headers["If-Match"] = current_tag(target.session_id)
        case.body["expected_leaf_id"] = target.entry_id


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, caller, real_sessions):
    case.call_and_validate()
    if "session_id" in (case.path_parameters or {}) and not negated(case):
        target = real_sessions.get(roleplay="/roleplay/" in case.path)
        case.path_parameters["session_id"] = target.session_id
        if "entry_id" in case.path_parameters:
            case.path_parameters["entry_id"] = target.entry_id
        if "review_id" in case.path_parameters:
            case.path_parameters["review_id"] = real_sessions.pick(target.review_ids) or "review-none"
        if "/roleplay/" in case.path:
            for name in ("leaf", "from", "to"):
                if name in (case.query or {}):
                    case.query[name] = real_sessions.pick(target.entry_ids) or case.query[name]
            if isinstance(case.body, dict):
                # The leaf the caller saw (every other time: a stale one stays), a turn that is incomplete.
                if "expected_leaf_id" in case.body and next(real_sessions.picks) % 2:
                    case.body["expected_leaf_id"] = target.entry_id
                if "turnId" in case.body:
                    case.body["turnId"] = real_sessions.pick(target.turn_ids) or case.body["turnId"]
                if "correctsCommitId" in case.body and next(real_sessions.picks) % 2:
                    case.body["correctsCommitId"] = "commit-cut"  # the roleplay session's first commit
        aim_conditions(case, target, real_sessions.picks)
        case.call_and_validate()


def test_api_conforms_to_its_schema_statefully(caller):
    """Sequences that follow the schema's links (create a session, append,
    read the entry, page after it, patch the in-flight entry …), every
    answer checked against the schema with every check."""
    Flows = schema.as_state_machine()
    # The links feed each step with what the server answered (new random ids
    # every time), so Hypothesis, replaying a prefix of steps, can now and then
    # meet a different draw there and stop with FlakyStrategyDefinition: an
    # engine inconsistency, not a finding. Such a run is run again (at most
    # three times); a failed check is reported at once, never retried.
    for attempt in range(3):
        try:
            Flows.run(
                settings=settings(
                    max_examples=STATEFUL_EXAMPLES,
                    stateful_step_count=8,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
            )
            return
        except FlakyStrategyDefinition:
            if attempt == 2:
                raise
