"""The packages' imports form no circle and run only downwards between rooms (docs/design.md).

An import circle makes the order of imports matter and hides which module a thing belongs to;
one hidden behind an import inside a function is still a circle, so an import inside a
function is allowed only where it waits for an optional heavy stack.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("apex_core", "adapters", "apex_kernels")
# the optional heavy stacks, imported only where a cell or a command needs them (the extras); a
# module of the packages that imports one at module level is waited for the same way
HEAVY_STACKS = ("triton", "tensorrt", "onnxruntime", "onnx", "jax", "jaxlib", "ray", "pynvml", "yaml")
# modules whose imports wait for the process to be set up, not for a stack
LATE_BY_DESIGN = {
    "apex_core.running.worker_process": "the worker sets its environment (the GPU it is pinned to, the "
                                        "compile caches) and its stderr before anything can read them",
    "apex_core.running.ray_task": "the same, in a Ray worker process",
}


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


def _module_level_imports(path: Path, type_checking: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements a module runs when it is imported (and, with ``type_checking``, those
    made for type checking alone)."""
    body: list[ast.stmt] = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.If) and (type_checking or not _is_type_checking(node)):
            body.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            body.extend(node.body + node.orelse + node.finalbody)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _graph() -> dict[str, set[str]]:
    """Each module's module-level imports of the packages' modules."""
    modules = _modules()
    # an import for type checking alone counts: a circle hidden there is still one in the design
    return {name: {target for node in _module_level_imports(path, type_checking=True)
                   for target in _targets(node, name, modules)}
            for name, path in modules.items()}


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
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _top_level_imports(path: Path) -> set[str]:
    """The names a module imports at module level (not for type checking alone)."""
    found: set[str] = set()
    for node in _module_level_imports(path):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif node.module:
            found.update({node.module, *(f"{node.module}.{alias.name}" for alias in node.names)})
    return found


def _is_heavy(name: str) -> bool:
    return any(name == stack or name.startswith(f"{stack}.") for stack in HEAVY_STACKS)


def _heavy_modules(modules: dict[str, Path]) -> set[str]:
    """The packages' modules that import a heavy stack at module level, themselves or through others."""
    imports = {name: _top_level_imports(path) for name, path in modules.items()}
    heavy = {name for name, found in imports.items() if any(_is_heavy(i) for i in found)}
    while True:
        more = {name for name, found in imports.items() if name not in heavy
                and any(i in heavy or i.rpartition(".")[0] in heavy for i in found)}
        if not more:
            return heavy
        heavy |= more


def test_an_import_inside_a_function_waits_only_for_a_heavy_stack() -> None:
    modules = _modules()
    heavy = _heavy_modules(modules)
    hidden = []
    for name, path in modules.items():
        if name in LATE_BY_DESIGN:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    names = [alias.name for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom) and inner.module:
                    names = [inner.module]
                else:
                    continue
                own = list(_targets(inner, name, modules))
                if not any(_is_heavy(n) for n in names) and not (own and all(t in heavy for t in own)):
                    hidden.append(f"{path.relative_to(ROOT)}:{inner.lineno} imports {', '.join(names)}")
    assert hidden == [], ("imports inside functions that wait for no heavy stack: import them at the top, "
                          "and remove the circle that made them wait:\n" + "\n".join(hidden))


# apex_core's rooms, each named for its job, and the rooms each may import (docs/design.md,
# "Direction of imports"): the plugin contract at the top of the package is the ground floor.
ROOMS = {
    "contract": (),
    "measure": ("contract",),
    "workloads": ("contract",),
    "discovery": ("contract",),
    # the records: a report reads the history and the baseline, the history files runs by the gate's key
    "baseline": ("contract", "measure"),
    "history": ("contract", "measure", "baseline"),
    "report": ("contract", "measure", "baseline", "history"),
    "running": ("contract", "measure"),
    "engine": ("contract", "measure", "workloads", "report", "running"),
    "library": ("contract", "measure", "running", "report"),
    # the apex_bench pytest fixture: a test's call measured as a cell, written as a report
    "pytest_plugin": ("contract", "measure", "baseline", "history", "report", "running"),
    "cli": ("contract", "measure", "workloads", "discovery", "baseline", "history", "report", "running",
            "engine", "library"),
}
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
    return parts[1]


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
