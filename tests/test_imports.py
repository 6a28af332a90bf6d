"""The packages' imports at module level form no circle (docs/design.md, "Layout").

An import circle makes the order of imports matter and hides which module a thing belongs to;
one hidden behind an import inside a function is still a circle, so the imports inside
functions are counted too and may only fall, never grow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("apex_core", "adapters", "apex_kernels")
# imports of the packages' own modules inside functions, on 2026-11-27: only fewer from here on
MAX_IMPORTS_IN_FUNCTIONS = 115


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _targets(node: ast.Import | ast.ImportFrom, here: str, modules: dict[str, Path]) -> Iterator[str]:
    """The package modules an import statement loads (a name imported from a package that is
    one of its submodules counts as that submodule). The packages use no relative imports."""
    assert not (isinstance(node, ast.ImportFrom) and node.level), f"{here}: a relative import"
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != here:
            yield name


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _graph() -> tuple[dict[str, set[str]], int]:
    """Each module's module-level imports of the packages' modules, and how many sit in functions."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    inside = 0
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top: list[ast.stmt] = list(tree.body)
        while top:
            node = top.pop()
            if isinstance(node, ast.If) and not _is_type_checking(node):
                top.extend(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                top.extend(node.body + node.orelse + node.finalbody)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name].update(_targets(node, name, modules))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside += sum(1 for inner in ast.walk(node) if isinstance(inner, (ast.Import, ast.ImportFrom))
                              and any(True for _ in _targets(inner, name, modules)))
    return graph, inside


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_at_module_level() -> None:
    graph, _ = _graph()
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_inside_functions_only_fall() -> None:
    _, inside = _graph()
    assert inside <= MAX_IMPORTS_IN_FUNCTIONS, (
        f"{inside} imports of the packages' own modules inside functions (at most {MAX_IMPORTS_IN_FUNCTIONS}): "
        "import at the top of the module, and remove the circle that made it wait")


# apex_core's rooms, each named for its job, and the rooms each may import (docs/design.md,
# "Direction of imports"): the plugin contract at the top of the package is the ground floor.
ROOMS = {
    "contract": (),
    "measure": ("contract",),
    "workloads": ("contract",),
    "discovery": ("contract",),
    "records": ("contract", "measure"),
    "running": ("contract", "measure"),
    "engine": ("contract", "measure", "workloads", "records", "running"),
    "library": ("contract", "measure", "running", "records"),
    "cli": ("contract", "measure", "workloads", "discovery", "records", "running", "engine", "library"),
}
RECORDS = ("report", "baseline", "history")
ENTRY = ("apex_core", "apex_core.api")
# old module paths kept as deprecated aliases for plugins (docs/plugin-api.md); they go in 2.0
SHIMS = ("apex_core.workloads.engine_file",)


def room_of(module: str) -> str | None:
    """The room of one of apex_core's modules (None outside apex_core)."""
    parts = module.split(".")
    if parts[0] != "apex_core":
        return None
    if module in ENTRY:
        return "library"
    if len(parts) == 2 and (ROOT / "apex_core" / f"{parts[1]}.py").is_file():
        return "contract"
    return "records" if parts[1] in RECORDS else parts[1]


def _all_imports() -> Iterator[tuple[str, str]]:
    """Every (importer, imported) pair of apex_core's modules, inside functions too; not the
    imports made for type checking alone."""
    modules = _modules()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        checking = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node)
                    for inner in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in checking:
                for target in _targets(node, name, modules):
                    yield name, target


def test_every_module_of_apex_core_is_in_a_room() -> None:
    rooms = {room_of(name) for name in _modules() if name.startswith("apex_core")}
    assert rooms <= set(ROOMS), f"modules in no room: {rooms - set(ROOMS)}"


def test_imports_run_only_from_a_room_to_the_rooms_below_it() -> None:
    wrong = sorted(f"{here} ({room_of(here)}) -> {there} ({room_of(there)})"
                   for here, there in _all_imports()
                   if here not in SHIMS and (a := room_of(here)) and (b := room_of(there))
                   and a != b and b not in ROOMS[a])
    assert wrong == [], "imports that run back up or across between rooms:\n" + "\n".join(wrong)
