"""Orderings by time never assume the rows' pks grow with time (issue 24 #5):
on a multi-primary cluster each node allocates its own pks (1, 4, 7… and 2,
5, 8…), so a row made later on one node may have a smaller pk than one made
earlier on another. Here the pks run against time on purpose: every list
that says "oldest first" or "newest first" still follows the creation time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessiontree.models import AgentSession
from sessiontree.selectors.verify import session_ids
from sessiontree.sync.export import export_tasks
from sessiontree.sync.options import SyncOptions
from tests.contract.conftest import PROVIDER_KINDS, make_provider

from .conftest import Api

pytestmark = pytest.mark.django_db


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)


def make_against_time(provider, names: list[str]) -> list[str]:
    """Sessions created in ``names`` order, then given creation times in the
    reverse order: the last made (largest pk) is the oldest. Returns the names oldest first."""
    start = timezone.now() - timedelta(days=1)
    for name in names:
        provider.create_session(session_id=name)
    for offset, name in enumerate(reversed(names)):
        AgentSession.objects.filter(session_id=name).update(created_at=start + timedelta(minutes=offset))
    return list(reversed(names))


def test_verify_walks_sessions_oldest_first_by_creation_time(provider):
    oldest_first = make_against_time(provider, ["s-a", "s-b", "s-c", "s-d"])
    pks = dict(AgentSession.objects.values_list("session_id", "pk"))
    assert sorted(oldest_first, key=pks.__getitem__) != oldest_first  # the pks do run against time
    assert list(session_ids()) == oldest_first


def test_export_writes_sessions_oldest_first_by_creation_time(provider, tmp_path):
    oldest_first = make_against_time(provider, ["x-1", "x-2", "x-3"])
    tasks = export_tasks(tmp_path, SyncOptions(mode="export", layout="flat", dry_run=True))
    assert [task().path for task in tasks] == [f"{name}.jsonl" for name in oldest_first]


def test_the_session_list_and_a_sessions_forks_follow_creation_time(api: Api, kind):
    from sessiontree.providers.factory import get_provider

    provider = get_provider(kind)
    oldest_first = make_against_time(provider, ["p-1", "p-2", "p-3"])
    AgentSession.objects.update(user_id="alice")
    listed = [s["session_id"] for s in api.get("/api/sessions/?page_size=2")["results"]]
    assert listed == list(reversed(oldest_first))[:2]
    source = api.create_session(kind)["session_id"]
    entry = api.client.post(
        f"/api/sessions/{source}/entries/", {"message": {"role": "user", "content": "hi"}}, format="json"
    ).json()
    forks = [
        api.client.post(
            f"/api/sessions/{source}/fork/", {"entry_id": entry["id"], "position": "at"}, format="json"
        ).json()["session_id"]
        for _ in range(3)
    ]
    start = timezone.now() - timedelta(hours=1)
    for offset, fork in enumerate(reversed(forks)):  # the last fork is the oldest
        AgentSession.objects.filter(session_id=fork).update(created_at=start + timedelta(minutes=offset))
    assert api.get(f"/api/sessions/{source}/")["children"] == list(reversed(forks))
