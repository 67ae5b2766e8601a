"""The ``provider`` fixture of the contract suite, for the roleplay service tests:
every provider (``file``, and ``mysql`` once it exists) on the run's database."""

from __future__ import annotations

import pytest

from tests.contract.conftest import PROVIDER_KINDS, make_provider


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)
