"""Services run over every provider, exactly as the contract suite does."""

from __future__ import annotations

import pytest

from tests.contract.conftest import PROVIDER_KINDS, make_provider


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)
