"""docs/plugins.md stays true: its example package is written to disk and run as the page says.

Every code block that follows an HTML comment ``<!-- test: PATH -->`` is written to ``PATH``
under a temporary folder (the package ``my_bench``, its ``pyproject.toml`` and its test
module). The test then loads the entry points the ``pyproject.toml`` declares through
``Registry.discover``, runs the page's own test function (worker processes included), and
runs a wrong variant of the backend to show that the checks catch it. Unmarked Python blocks
must at least parse.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import apex_core
from apex_core import Registry, Status, TimingOptions
from apex_core.registry import FoundPlugin
from tests.conftest import ROOT

DOC = ROOT / "docs" / "plugins.md"
MARKED_BLOCK = re.compile(r"<!-- test: (?P<path>[\w./-]+) -->\n```(?P<lang>\w+)\n(?P<code>.*?)```", re.S)
ANY_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
FAST = TimingOptions(warmup=1, min_iters=3, min_time_s=0.0, max_time_s=0.05)

# Appended by this test, not part of the page: the backend with the classic bug of a forgotten term.
WRONG_VARIANT = '''
from apex_core import Prepared
from my_bench.backend import AxpyBackend


class ForgetsYBackend(AxpyBackend):
    name = "my-axpy-wrong"

    def prepare(self, workload, case, inputs):
        x, a = inputs["x"], inputs["a"]
        return Prepared(lambda: {"out": x * a})
'''


def marked_blocks() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    blocks = {m["path"]: m["code"] for m in MARKED_BLOCK.finditer(text)}
    assert {"pyproject.toml", "my_bench/workload.py", "my_bench/backend.py",
            "tests/test_my_bench.py"} <= set(blocks), sorted(blocks)
    return blocks


@pytest.fixture
def example_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The page's package on disk and importable here and in spawned workers (they inherit sys.path)."""
    for relative, code in marked_blocks().items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
    (tmp_path / "my_bench" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "my_bench_wrong.py").write_text(WRONG_VARIANT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m == "my_bench" or m.startswith(("my_bench.", "my_bench_wrong"))]:
        del sys.modules[name]
    sys.modules.pop("test_my_bench", None)


def test_every_python_block_of_the_page_parses():
    blocks = ANY_PYTHON_BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    for code in blocks:
        ast.parse(code)


def entry_point_loader(pyproject: dict) -> object:
    """A registry loader that resolves the page's entry points as an installed package would."""
    def load(group: str) -> list[FoundPlugin]:
        found = []
        for name, value in pyproject["project"]["entry-points"].get(group, {}).items():
            module, _, attribute = value.partition(":")
            found.append(FoundPlugin(name, value, getattr(importlib.import_module(module), attribute)))
        return found
    return load


def test_the_entry_points_of_the_page_register_its_plugins(example_package: Path):
    pyproject = tomllib.loads((example_package / "pyproject.toml").read_text(encoding="utf-8"))
    registry = Registry.discover(loader=entry_point_loader(pyproject))
    assert registry.broken == ()
    assert sorted(registry.backends) == ["my-axpy"] and sorted(registry.workloads) == ["axpy"]
    assert registry.select_backends(["mine"]) == ["my-axpy"]  # the alias the backend declares
    workload = registry.workloads["axpy"]
    assert workload.profile_names() == ("fixed", "smoke", "large")
    assert [c.name for c in workload.cases(workload.make_params("smoke"))] == ["contiguous", "transposed"]


@pytest.mark.slow
def test_the_page_test_passes_and_a_wrong_backend_is_incorrect(example_package: Path):
    page_test = example_package / "tests" / "test_my_bench.py"
    spec = importlib.util.spec_from_file_location("test_my_bench", page_test)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_every_axpy_cell_passes_both_checks()  # as the page's reader would run it: in a worker

    from my_bench.backend import AxpyBackend
    from my_bench.workload import AxpyWorkload
    from my_bench_wrong import ForgetsYBackend

    registry = Registry.from_objects([AxpyBackend(), ForgetsYBackend()], [AxpyWorkload()])
    report = apex_core.run(["axpy:transposed"], ["my-axpy", "my-axpy-wrong"], device="cpu",
                           dtypes=["fp32", "bf16"], profile="smoke", registry=registry, timing=FAST)
    cells = {(c.backend, c.dtype): c for c in report.cells}
    for dtype in ("fp32", "bf16"):
        good, wrong = cells[("my-axpy", dtype)], cells[("my-axpy-wrong", dtype)]
        assert good.status == Status.OK and all(a.passed for a in good.accuracy), (good.key, good.reason)
        assert good.timing is not None and good.timing.method == "cpu_perf_counter"
        assert wrong.status == Status.INCORRECT, (wrong.key, wrong.status, wrong.reason)
        assert wrong.reason.startswith("wrong result before-timing") and wrong.timing is None
