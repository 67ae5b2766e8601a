"""Fixtures shared by the tests that run one test on several storages
(a plugin of tests/conftest.py; a module's own fixture of the same name wins).

- ``any_provider``: every storage of the contract suite, the in-memory third
  one included (registered as a storage is);
- ``provider``: the project's own storages (``file``, and ``mysql``).
"""

from __future__ import annotations

import pytest

from tests.contract.conftest import CONTRACT_KINDS, PROVIDER_KINDS, make_provider, register_memory_storage


@pytest.fixture(params=CONTRACT_KINDS)
def any_provider(request, db, tmp_path, settings):
    register_memory_storage(settings)
    return make_provider(request.param, tmp_path)


@pytest.fixture(params=PROVIDER_KINDS)
def provider(request, db, tmp_path):
    return make_provider(request.param, tmp_path)
