"""The repository's shape: who may import whom, and how long a module may grow (docs/design.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 400
# Modules allowed past the limit until the work named beside each lands; remove an entry
# when its module is split.
LONG_MODULE_EXCEPTIONS: set[str] = set()
SKIPPED_DIRS = {"tests", "build", "dist", "__pycache__", "node_modules"}


def python_files(folder: Path) -> list[Path]:
    """Every ``.py`` file under ``folder``, outside hidden, build and test folders."""
    return sorted(
        path for path in folder.rglob("*.py")
        if not any(part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info")
                   for part in path.relative_to(ROOT).parts[:-1])
    )


def imported_modules(source: str) -> set[str]:
    """Every module a source file imports, at any depth (function-level imports included),
    and every constant name passed to ``importlib.import_module`` or ``__import__``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def test_imported_modules_sees_every_kind_of_import() -> None:
    source = (
        "import apex_core.results as r\n"
        "from apex_core.workloads import tilepack\n"
        "def late():\n"
        "    from apex_core import cuda_timer\n"
        "    importlib.import_module('apex_core.correctness')\n"
    )
    assert imported_modules(source) == {"apex_core.results", "apex_core.workloads", "apex_core",
                                        "apex_core.correctness"}


@pytest.mark.parametrize("harness", ["apex_core", "adapters"])
def test_apex_kernels_imports_nothing_from_the_harness(harness: str) -> None:
    files = python_files(ROOT / "apex_kernels")
    assert len(files) >= 10, "apex_kernels not found where expected"
    offenders = {
        str(path.relative_to(ROOT)): sorted(name for name in imported_modules(path.read_text())
                                            if name == harness or name.startswith(f"{harness}."))
        for path in files
    }
    offenders = {path: names for path, names in offenders.items() if names}
    assert not offenders, f"apex_kernels must stand alone; {harness} imported by {offenders}"


def test_no_module_outside_tests_is_over_the_limit() -> None:
    lengths = {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
               for path in python_files(ROOT)}
    assert "apex_kernels/tilepack.py" in lengths
    too_long = {path: n for path, n in lengths.items()
                if n > MAX_MODULE_LINES and path not in LONG_MODULE_EXCEPTIONS}
    assert not too_long, f"split these modules (limit {MAX_MODULE_LINES} lines): {too_long}"
    stale = sorted(path for path in LONG_MODULE_EXCEPTIONS if lengths.get(path, 0) <= MAX_MODULE_LINES)
    assert not stale, f"within the limit now, remove them from LONG_MODULE_EXCEPTIONS: {stale}"
