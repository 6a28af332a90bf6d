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


def test_a_plugin_that_exits_at_import_is_one_error_row_not_the_end_of_the_run(monkeypatch):
    import types

    from apex_core import registry as registry_module

    class Exiting:
        def __init__(self, *args, **kwargs):
            raise SystemExit(0)  # what stevedore lets through when a module calls sys.exit()

    def entry_point(name, load):
        return types.SimpleNamespace(name=name, value=f"pkg.{name}:Thing", dist=None, load=load)

    def exits():
        raise SystemExit(0)

    monkeypatch.setattr(registry_module, "ExtensionManager", Exiting)
    Exiting.ENTRY_POINT_CACHE = {}
    monkeypatch.setattr(registry_module, "entry_points",
                        lambda group: [entry_point("good", lambda: Eager), entry_point("exits", exits)])
    found = {f.name: f for f in registry_module.load_entry_points(BACKEND_GROUP)}
    assert found["good"].plugin is Eager and found["good"].error == ""
    assert found["exits"].error == "SystemExit at import: 0"


def test_a_probe_that_raises_makes_error_cells_not_skips():
    from apex_core.api import run
    from apex_core.results import Status
    from apex_core.timing import TimingOptions

    class Crashy(Eager):
        name = "crashy"

        def probe(self, device):
            raise RuntimeError("probe bug")

    report = run(["axpy"], ["crashy"], device="cpu", isolation="inline",
                 timing=TimingOptions(warmup=1, min_iters=2, min_time_s=0.0, max_time_s=0.1),
                 registry=Registry.from_objects([Crashy()], [Axpy()]))
    assert {c.status for c in report.cells} == {Status.ERROR}
    assert all("probe() raised RuntimeError: probe bug" in c.reason for c in report.cells)
