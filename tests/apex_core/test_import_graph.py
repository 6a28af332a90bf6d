"""The core never imports the built-in backends: nothing in apex_core imports ``adapters``.

Every module is parsed, and every import statement in it is read wherever it stands
(module level, inside functions and methods, under ``if TYPE_CHECKING``), so a lazy
import inside a function counts as much as one at the top.
"""

import ast
from pathlib import Path

import apex_core

CORE = Path(apex_core.__file__).parent


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import statement anywhere in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_no_module_of_apex_core_imports_adapters():
    modules = sorted(CORE.rglob("*.py"))
    assert len(modules) > 50  # the walk found the package
    offenders = [f"{path.relative_to(CORE.parent)}:{line} imports {module}"
                 for path in modules for line, module in imported_modules(path)
                 if module == "adapters" or module.startswith("adapters.")]
    assert offenders == []


def test_the_check_sees_imports_inside_functions(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    if True:\n        from adapters.lazy_import import try_import\n"
                      "class C:\n    def g(self):\n        import adapters.tensorrt_common as t\n")
    assert imported_modules(sample) == [(3, "adapters.lazy_import"), (6, "adapters.tensorrt_common")]
