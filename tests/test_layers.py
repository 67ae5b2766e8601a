"""The layer rules, checked: what may import what, and who may write how.

- The import-linter contracts in ``pyproject.toml`` (also run by ``make
  lint``) pass, and they do fail when a module breaks one.
- The kernel imports only the standard library, orjson and uuid6.
- No module outside ``tests/`` and ``bench/`` calls the provider's unaudited
  one-step writes (``providers/one_step.py``): production writes go through
  ``sessiontree.services``.
- Outside ``sessiontree/providers/`` no code names a storage's own table or
  columns (the mysql storage's entry rows and leaf cache, the file storage's
  in-flight column).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessiontree.providers.one_step import ONE_STEP_WRITES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sessiontree", "roleplay", "config")
CONTRACTS = (
    "pure-kernel",
    "pure-reducer",
    "storages-behind-the-port",
    "faces-call-services",
    "sessiontree-without-roleplay",
)


def python_files(*roots: str) -> Iterator[Path]:
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


# --- import-linter ------------------------------------------------------------------


def run_contracts(cwd: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the packages under ``cwd`` (nothing else on the path)."""
    code = (
        "import sys\n"
        "from importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_every_contract_is_configured():
    import tomllib

    configured = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert {contract["id"] for contract in configured} == set(CONTRACTS)


def test_the_import_contracts_are_kept():
    result = run_contracts(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


@pytest.fixture(scope="module")
def broken_copy(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """The packages copied, with one offending import per contract."""
    copy = tmp_path_factory.mktemp("layers")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    offences = {
        "sessiontree/core/ids.py": "import django.conf",
        "roleplay/reducer.py": "from django.db import models",
        "sessiontree/services/audit.py": "from sessiontree.providers import mysql_provider",
        "sessiontree/api/views.py": "from sessiontree.providers.entry_rows import decode_row",
        "sessiontree/selectors/export.py": "import roleplay.schema",
    }
    for name, line in offences.items():
        path = copy / name
        path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # offending\n", encoding="utf-8")
    return run_contracts(copy)


@pytest.mark.parametrize(
    "contract",
    [
        "sessiontree.core is pure",
        "roleplay.reducer is pure",
        "Only sessiontree.providers imports a storage module",
        "Faces (admin, API, commands) import no storage module",
        "sessiontree imports nothing from roleplay",
    ],
)
def test_the_contracts_fail_on_an_offending_import(broken_copy, contract):
    assert broken_copy.returncode == 1, broken_copy.stdout + broken_copy.stderr
    verdicts = [line for line in broken_copy.stdout.splitlines() if line.startswith(contract)]
    assert verdicts and " BROKEN" in verdicts[0] and " KEPT" not in verdicts[0], broken_copy.stdout
    assert "Contracts: 0 kept, 5 broken." in broken_copy.stdout


# --- the kernel's allow-list ------------------------------------------------------------

KERNEL_MAY_IMPORT = {"orjson", "uuid6"}  # besides the standard library and itself


def kernel_imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def foreign(names: set[str]) -> set[str]:
    return {
        name
        for name in names
        if name.split(".")[0] not in sys.stdlib_module_names
        and name.split(".")[0] not in KERNEL_MAY_IMPORT
        and not (name == "sessiontree.core" or name.startswith("sessiontree.core."))
    }


def test_the_kernel_imports_only_the_standard_library_orjson_and_uuid6():
    found = {path.name: foreign(kernel_imports(parse(path))) for path in python_files("sessiontree/core")}
    assert {name: names for name, names in found.items() if names} == {}


def test_the_allow_list_check_sees_a_foreign_import():
    tree = ast.parse("import os\nimport orjson\nfrom django.db import models\nfrom sessiontree.models import X\n")
    assert foreign(kernel_imports(tree)) == {"django.db", "sessiontree.models"}


# --- no one-step writes outside tests and tools ---------------------------------------------

# ``writer`` is the unit's SessionWriter, whose steps share some of these names
# (``switch_leaf``, ``append_context_edit``); ``one_step.py`` defines the writes.
WRITER_NAMES = {"writer"}
DEFINED_IN = ROOT / "sessiontree" / "providers" / "one_step.py"


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def one_step_calls(tree: ast.Module) -> list[str]:
    """Calls of a one-step write on anything but an imported module (the
    services share some names: ``services.tree.switch_leaf``) or a writer."""
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.update(alias.asname or alias.name for alias in node.names)
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ONE_STEP_WRITES:
            receiver = node.func.value
            root = _root_name(receiver)
            if isinstance(receiver, ast.Name) and receiver.id in WRITER_NAMES:
                continue
            if root in modules and not isinstance(receiver, ast.Call):
                continue
            calls.append(f"{node.lineno}: {ast.unparse(node.func)}")
    return calls


def test_no_module_outside_tests_and_bench_calls_a_one_step_write():
    found = {
        str(path.relative_to(ROOT)): calls
        for path in python_files(*PACKAGES)
        if path != DEFINED_IN and (calls := one_step_calls(parse(path)))
    }
    assert found == {}


def test_the_one_step_check_sees_a_provider_write():
    tree = ast.parse(
        "from sessiontree import services\n"
        "from sessiontree.providers.factory import get_provider\n"
        "services.tree.switch_leaf(session_id='s', entry_id='e', actor='a', channel='cli')\n"
        "writer.switch_leaf('e')\n"
        "provider.append_message('s', {})\n"
        "self.provider().reset_leaf('s')\n"
        "get_provider('file').switch_leaf('s', 'e')\n"
    )
    assert one_step_calls(tree) == [
        "5: provider.append_message",
        "6: self.provider().reset_leaf",
        "7: get_provider('file').switch_leaf",
    ]


# --- storage tables and columns stay in providers/ -----------------------------------------

STORAGE_NAMES = {
    "AgentSessionEntry",  # the mysql storage's entry rows
    "leaf_depth",  # the mysql storage's leaf cache
    "leaf_in_flight",
    "leaf_has_children",
    "rows_in_order",  # the mysql storage's rows stored in order
    "in_flight_entry",  # the file storage's streaming entry
}
# The admin's "Storage" fieldset shows the meta row's raw columns read-only.
ALLOWED = {("sessiontree/admin/sessions.py", "in_flight_entry")}


def storage_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.alias):
            value = node.id if isinstance(node, ast.Name) else node.name
        elif isinstance(node, ast.Attribute):
            value = node.attr
        elif isinstance(node, ast.keyword):
            value = node.arg or ""
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
        else:
            continue
        names.update(name for name in STORAGE_NAMES if value == name or value.startswith(name + "__"))
    return names


def test_no_code_outside_providers_names_a_storage_table_or_column():
    found = {}
    for path in python_files(*PACKAGES):
        relative = str(path.relative_to(ROOT))
        if relative.startswith("sessiontree/providers/") or relative == "sessiontree/models.py":
            continue
        names = {name for name in storage_names(parse(path)) if (relative, name) not in ALLOWED}
        if names:
            found[relative] = names
    assert found == {}


def test_the_storage_name_check_sees_a_column():
    tree = ast.parse("AgentSession.objects.update(leaf_depth=None)\nrow.in_flight_entry\nx = 'leaf_in_flight'\n")
    assert storage_names(tree) == {"leaf_depth", "in_flight_entry", "leaf_in_flight"}
