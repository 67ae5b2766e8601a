"""``roleplay.service`` is the public module over ``roleplay/services/``: every
public function and type of the package is re-exported there, as the same
object (so a caller of ``service.X`` and the package's own modules run the
same code)."""

from __future__ import annotations

import inspect

import pytest

from roleplay import service
from roleplay.services import branch, history, planning, reads, writes

MODULES = (reads, writes, planning, history)
# The writes' one append point and planning's hook in it, and the keyed path
# reads that ``branch.py`` shares with ``reads.py``: machinery, not operations.
INTERNAL = {"append", "intercept", "reduce_keyed", "KeyedPath", "PathUnclear", "walked_path_ids"}


def _public(module) -> dict[str, object]:
    """What ``module`` itself defines (not what it imports), without private names."""
    names = {}
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == module.__name__:
            names[name] = value
    return names


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_of_the_package_is_re_exported_by_roleplay_service(module):
    defined = {name: value for name, value in _public(module).items() if name not in INTERNAL}
    assert defined, module.__name__
    for name, value in defined.items():
        assert name in service.__all__, f"{module.__name__}.{name} is not in roleplay.service.__all__"
        assert getattr(service, name) is value


def test_every_name_roleplay_service_exports_exists():
    for name in service.__all__:
        assert hasattr(service, name), name
    assert service.Branch is branch.Branch
    assert service.inspect_state is reads.inspect_state
    assert service.plan_write is planning.plan_write
