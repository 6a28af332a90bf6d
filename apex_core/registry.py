"""Discover backends and workloads through entry points (the only module that imports stevedore).

A plugin that fails to import or construct, or whose name clashes with another,
becomes a ``PluginRow`` with status ``error`` and the reason; it never stops
discovery and never disappears silently.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import signal
import threading
from collections.abc import Iterable, Iterator, Sequence
from importlib.metadata import entry_points
from typing import Any

from stevedore import ExtensionManager

from apex_core.errors import UsageError, did_you_mean
from apex_core.interfaces import Backend, Workload
from apex_core.plugin_api import check_plugin
from apex_core.providers import FoundPlugin, expand_providers
from apex_core.results import PluginDeprecation, PluginRow

log = logging.getLogger(__name__)

BACKEND_GROUP = "apex_bench.backends"
WORKLOAD_GROUP = "apex_bench.workloads"
# Entry points that make several plugins from configuration (apex_core/providers.py).
BACKEND_PROVIDER_GROUP = "apex_bench.backend_providers"
WORKLOAD_PROVIDER_GROUP = "apex_bench.workload_providers"

# Stands for every backend (or workload); other group names come from ``Backend.aliases``.
ALL = "all"


def _source_of(entry_point: Any) -> str:
    dist = getattr(entry_point, "dist", None)
    dist_name = getattr(dist, "name", None) if dist is not None else None
    return f"{entry_point.value} ({dist_name})" if dist_name else str(entry_point.value)


def load_entry_points(group: str) -> list[FoundPlugin]:
    """Load every entry point of ``group`` with stevedore, keeping failures as rows."""
    failures: list[FoundPlugin] = []

    def on_failure(_manager: Any, entry_point: Any, exc: BaseException) -> None:
        failures.append(FoundPlugin(entry_point.name, _source_of(entry_point),
                                    error=f"{type(exc).__name__}: {exc}"))
        log.debug("plugin %s failed to load", entry_point.name, exc_info=exc)

    # stevedore caches entry points per process; drop ours so a newly installed
    # package is seen by a later discovery in the same process.
    ExtensionManager.ENTRY_POINT_CACHE.pop(group, None)
    try:
        with _interrupts_counted() as interrupts:
            manager = ExtensionManager(group, invoke_on_load=False, on_load_failure_callback=on_failure)
    except (SystemExit, GeneratorExit, AssertionError, KeyboardInterrupt) as exc:
        # stevedore guards each import against Exception only, and passes AssertionError and
        # KeyboardInterrupt on: a plugin module that raises one of these (or calls sys.exit())
        # at import would end the run. Load one by one instead, so only that plugin fails; a
        # real Ctrl-C (a SIGINT arrived) still ends the command.
        if isinstance(exc, KeyboardInterrupt) and interrupts.count:
            raise
        log.debug("a plugin of %s raised %s at import; loading one by one", group, type(exc).__name__)
        return _load_one_by_one(group)
    found = [FoundPlugin(ext.name, _source_of(ext.entry_point), ext.plugin)
             for ext in manager.extensions]
    return found + failures


def _load_one_by_one(group: str) -> list[FoundPlugin]:
    """Every entry point of ``group`` imported on its own; anything but Ctrl-C becomes a failure row."""
    found = []
    for entry_point in entry_points(group=group):
        try:
            with _interrupts_counted() as interrupts:
                found.append(FoundPlugin(entry_point.name, _source_of(entry_point), entry_point.load()))
        except BaseException as exc:  # SystemExit at import included: that plugin is broken, not the run
            if isinstance(exc, KeyboardInterrupt) and interrupts.count:
                raise  # the user's Ctrl-C, not the plugin's
            found.append(FoundPlugin(entry_point.name, _source_of(entry_point),
                                     error=f"{type(exc).__name__} at import: {exc}".rstrip(": ")))
    return found


class _Interrupts:
    count = 0


@contextlib.contextmanager
def _interrupts_counted() -> Iterator[_Interrupts]:
    """Count the SIGINTs that arrive inside the block, so that a KeyboardInterrupt a plugin raises
    itself at import tells apart from the user's Ctrl-C (only the main thread can watch)."""
    interrupts = _Interrupts()
    if threading.current_thread() is not threading.main_thread():
        interrupts.count = 1  # cannot tell here: treat every KeyboardInterrupt as the user's
        yield interrupts
        return
    previous = signal.getsignal(signal.SIGINT)

    def counted(signum: int, frame: Any) -> None:
        interrupts.count += 1
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, counted)
    try:
        yield interrupts
    finally:
        signal.signal(signal.SIGINT, previous)


def _construct(found: FoundPlugin, base: type, group: str) -> tuple[Any, str, tuple[PluginDeprecation, ...]]:
    """Instantiate a loaded plugin class and check it against the plugin API; returns
    (instance, error, deprecations)."""
    if found.error:
        return None, found.error, ()
    instance: Any
    try:
        instance = found.plugin()
    except Exception as exc:
        return None, f"constructing {found.source} failed: {type(exc).__name__}: {exc}", ()
    if not isinstance(instance, base):
        return None, f"{found.source} is not a subclass of apex_core.interfaces.{base.__name__}", ()
    # The entry-point name is what users type; keep the instance's name in step with it.
    if getattr(instance, "name", None) != found.name:
        with contextlib.suppress(AttributeError):  # a read-only property keeps its own name
            setattr(instance, "name", found.name)  # noqa: B010 - instance is typed as object here
    checked = check_plugin(instance, base, group, found.name)
    if checked.error:
        return None, checked.error, ()
    return instance, "", checked.deprecations


class Registry:
    """Every discovered backend and workload, plus a row for each one that failed."""

    def __init__(self, backends: dict[str, Backend], workloads: dict[str, Workload],
                 broken: Sequence[PluginRow] = (), sources: dict[tuple[str, str], str] | None = None,
                 deprecations: Sequence[PluginDeprecation] = ()):
        self.backends = dict(backends)
        self.workloads = dict(workloads)
        self.broken = tuple(broken)
        self.sources = dict(sources or {})
        # what the loaded plugins use that a shim still serves (docs/plugin-api.md)
        self.deprecations = tuple(deprecations)
        # objects given in memory (from_objects): a worker process gets them pickled
        self.in_memory: tuple[tuple[Backend, ...], tuple[Workload, ...]] = ((), ())

    @classmethod
    def discover(cls, loader: Any = load_entry_points, provider_loader: Any = None) -> Registry:
        """Load both entry-point groups and what the providers make; the loaders are replaceable for tests.

        ``provider_loader`` loads the provider groups; by default the entry-point loader does,
        unless ``loader`` was replaced (a test's fake loader then describes the whole registry).
        """
        if provider_loader is None:
            provider_loader = loader if loader is load_entry_points else (lambda _group: [])
        found_backends = loader(BACKEND_GROUP) + expand_providers(provider_loader(BACKEND_PROVIDER_GROUP))
        found_workloads = loader(WORKLOAD_GROUP) + expand_providers(provider_loader(WORKLOAD_PROVIDER_GROUP))
        backends, b_broken, b_src, b_old = _collect(found_backends, Backend, "backend")
        workloads, w_broken, w_src, w_old = _collect(found_workloads, Workload, "workload")
        return cls(backends, workloads, b_broken + w_broken, {**b_src, **w_src}, b_old + w_old)

    @classmethod
    def from_objects(cls, backends: Iterable[Backend], workloads: Iterable[Workload]) -> Registry:
        """A registry of in-memory objects, for library users who skip entry points.

        With process isolation the objects are pickled to the worker (their classes must be
        importable there: defined at module level, in a module or the main script);
        ``in_memory_blob`` says why not when they cannot be.
        """
        backends, workloads = tuple(backends), tuple(workloads)
        good_backends, b_broken, b_old = _checked_objects(backends, Backend, "backend")
        good_workloads, w_broken, w_old = _checked_objects(workloads, Workload, "workload")
        registry = cls(good_backends, good_workloads, b_broken + w_broken, deprecations=b_old + w_old)
        registry.in_memory = (tuple(good_backends.values()), tuple(good_workloads.values()))
        return registry

    def in_memory_blob(self) -> bytes:
        """The in-memory objects pickled for a worker process (b"" when there are none).

        Raises ``UsageError`` naming the object that cannot cross to another process.
        """
        if not any(self.in_memory):
            return b""

        for obj in (*self.in_memory[0], *self.in_memory[1]):
            try:
                pickle.dumps(obj)
            except Exception as exc:
                kind = type(obj)
                raise UsageError(
                    f"{kind.__module__}.{kind.__qualname__} ({getattr(obj, 'name', '?')!r}) cannot be sent to "
                    f"the worker process ({type(exc).__name__}: {exc}); define the class at module level "
                    "(not inside a function), or run with isolation='inline'") from None
        return pickle.dumps(self.in_memory)

    def add_in_memory(self, blob: bytes) -> None:
        """In a worker: add the objects of ``in_memory_blob`` over what discovery found."""
        if not blob:
            return

        backends, workloads = pickle.loads(blob)
        self.backends.update({b.name: b for b in backends})
        self.workloads.update({w.name: w for w in workloads})
        self.in_memory = (backends, workloads)

    def broken_names(self, group: str) -> list[str]:
        return [row.name for row in self.broken if row.group == group]

    def backend_names(self) -> list[str]:
        return sorted({*self.backends, *self.broken_names("backend")})

    def workload_names(self) -> list[str]:
        return sorted({*self.workloads, *self.broken_names("workload")})

    def broken_row(self, group: str, name: str) -> PluginRow | None:
        return next((r for r in self.broken if r.group == group and r.name == name), None)

    def select_backends(self, requested: Sequence[str] | None) -> list[str]:
        """Expand names and aliases in order, without repeats; unknown names are a usage error."""
        known = self.backend_names()
        aliases = {**self.backend_aliases(), ALL: tuple(known)}
        return _expand(requested, known, aliases, "backend")

    def backend_aliases(self) -> dict[str, tuple[str, ...]]:
        """Each alias the backends declare (``Backend.aliases``) -> its members, by name.

        A name that is itself a backend's is never an alias (the backend wins).
        """
        aliases: dict[str, list[str]] = {}
        names = set(self.backend_names())  # broken plugins' names included
        for name in sorted(self.backends):
            for alias in getattr(self.backends[name], "aliases", ()):
                if alias not in names and alias != ALL:
                    aliases.setdefault(alias, []).append(name)
        return {alias: tuple(members) for alias, members in sorted(aliases.items())}

    def select_workloads(self, requested: Sequence[str] | None) -> list[str]:
        known = self.workload_names()
        return _expand(requested, known, {ALL: tuple(known)}, "workload")


def _checked_objects(objects: Sequence[Any], base: type, group: str
                     ) -> tuple[dict[str, Any], list[PluginRow], list[PluginDeprecation]]:
    """In-memory plugins checked against the plugin API as loaded ones are: (usable, errors, deprecations)."""
    usable: dict[str, Any] = {}
    broken: list[PluginRow] = []
    deprecations: list[PluginDeprecation] = []
    for obj in objects:
        checked = check_plugin(obj, base, group, obj.name)
        if checked.error:
            kind = type(obj)
            broken.append(PluginRow(group, obj.name, f"{kind.__module__}.{kind.__qualname__}", "error",
                                    checked.error))
        else:
            usable[obj.name] = obj
            deprecations += checked.deprecations
    return usable, broken, deprecations


def _collect(found: list[FoundPlugin], base: type, group: str):
    """Sort loaded plugins into instances and error rows (clashing names are errors), and their
    deprecations."""
    by_name: dict[str, list[FoundPlugin]] = {}
    for item in found:
        by_name.setdefault(item.name, []).append(item)
    instances: dict[str, Any] = {}
    broken: list[PluginRow] = []
    sources: dict[tuple[str, str], str] = {}
    deprecations: list[PluginDeprecation] = []
    for name, items in sorted(by_name.items()):
        if len(items) > 1:
            both = " and ".join(i.source for i in items)
            broken.append(PluginRow(group, name, both, "error",
                                    f"duplicate {group} name {name!r} registered by {both}"))
            continue
        instance, error, old = _construct(items[0], base, group)
        sources[(group, name)] = items[0].source
        if error:
            broken.append(PluginRow(group, name, items[0].source, "error", error))
        else:
            instances[name] = instance
            deprecations += old
    return instances, broken, sources, deprecations


def _expand(requested: Sequence[str] | None, known: list[str],
            aliases: dict[str, tuple[str, ...]], kind: str) -> list[str]:
    if not requested:
        return list(known)
    selected: list[str] = []
    for raw in requested:
        name = raw.strip()
        if not name:
            continue
        members = aliases.get(name, (name,))
        for member in members:
            if member not in known:
                valid = ", ".join([*known, *sorted(aliases)])
                hint = did_you_mean(member, [*known, *aliases])
                raise UsageError(f"unknown {kind} {member!r}{hint}; valid {kind}s: {valid}")
            if member not in selected:
                selected.append(member)
    if not selected:
        raise UsageError(f"no {kind} selected")
    return selected
