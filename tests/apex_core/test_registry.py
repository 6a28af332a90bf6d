"""Registry failure handling with a replaced loader, and real discovery of the built-ins."""

from apex_core.registry import BACKEND_GROUP, FoundPlugin, Registry
from tests.apex_core.fakes import Axpy, Eager


class NotABackend:
    name = "odd"


class ExplodingBackend(Eager):
    name = "boom"

    def __init__(self):
        raise RuntimeError("needs a license server")


def fake_loader(group):
    if group == BACKEND_GROUP:
        return [
            FoundPlugin("eager", "fakes:Eager (pkg-a)", Eager),
            FoundPlugin("broken", "pkg.broken:Backend (pkg-b)", error="ImportError: no module x"),
            FoundPlugin("boom", "fakes:ExplodingBackend (pkg-c)", ExplodingBackend),
            FoundPlugin("odd", "fakes:NotABackend (pkg-d)", NotABackend),
            FoundPlugin("twin", "one:Backend (pkg-e)", Eager),
            FoundPlugin("twin", "two:Backend (pkg-f)", Eager),
        ]
    return [FoundPlugin("axpy", "fakes:Axpy", Axpy)]


def test_failures_become_error_rows_and_good_plugins_load():
    registry = Registry.discover(loader=fake_loader)
    assert set(registry.backends) == {"eager"}
    rows = {row.name: row for row in registry.broken}
    assert rows["broken"].status == "error" and "ImportError: no module x" in rows["broken"].reason
    assert "needs a license server" in rows["boom"].reason
    assert "not a subclass" in rows["odd"].reason
    assert "one:Backend (pkg-e) and two:Backend (pkg-f)" in rows["twin"].reason
    # Broken plugins stay selectable so a run shows them as error cells.
    assert registry.backend_names() == ["boom", "broken", "eager", "odd", "twin"]


def test_instance_name_follows_the_entry_point_name():
    registry = Registry.discover(loader=lambda g: [FoundPlugin("renamed", "x", Eager)]
                                 if g == BACKEND_GROUP else [])
    assert registry.backends["renamed"].name == "renamed"


def test_builtins_are_found_through_entry_points():
    registry = Registry.discover()
    assert {"torch-reference", "torch-compile", "triton", "tensorrt-plugin",
            "tensorrt-engine"} <= set(registry.backends)
    assert {"tilepack", "tileunpack", "fusiongate", "tilessm-scan", "tile-stage1",
            "ff-infer"} <= set(registry.workloads)


def test_third_party_package_lands_as_it_should(plugin_on_path):
    registry = Registry.discover()
    assert {"test-working", "test-unavailable", "test-crash"} <= set(registry.backends)
    assert "test-scale" in registry.workloads
    broken = registry.broken_row("backend", "test-broken")
    assert broken is not None and broken.status == "error"
    assert "apex_testplugin_missing_dependency" in broken.reason
    assert "apex_testplugin.broken:BrokenBackend" in broken.source
    assert not registry.backends["test-unavailable"].probe("cpu").ok
