"""The plugin API's version, and the check every plugin passes when it loads (docs/plugin-api.md).

As pluggy verifies a hook implementation against its spec when it registers, each method
a plugin overrides is matched here against the interface, once, when the plugin is
loaded: a method the harness could not call as it does (too few or too many positional
arguments, arguments in another order, a required keyword-only argument) makes the
plugin an ``error`` row naming the method, the signature found and the one expected,
before any of its cells is built. An older form that a shim still serves (the first
API's ``Workload.work(case)``) loads, and is listed as a deprecation the report carries.

The harness passes arguments by position, so a parameter may carry another name; a
name that the interface gives to another argument of the same method is an error
(the arguments were swapped).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import attrs

from apex_core.interfaces import Workload, deprecated_uses, takes_dtype_name
from apex_core.results import PluginDeprecation


class ApiVersion(NamedTuple):
    """A plugin API version: a minor version adds, a major version breaks (``str`` gives "1.4")."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: Any) -> ApiVersion:
        """``"1.2"`` (or ``(1, 2)``) as a version; ``ValueError`` for anything else."""
        parts = text.split(".") if isinstance(text, str) else list(text)
        if len(parts) != 2:
            raise ValueError(f"plugin_api {text!r} is not MAJOR.MINOR")
        return cls(int(parts[0]), int(parts[1]))


PLUGIN_API = ApiVersion(1, 5)
# when the shims of deprecated forms may go: the next major version
REMOVAL = ApiVersion(PLUGIN_API.major + 1, 0)


@attrs.frozen
class MethodSpec:
    """How the harness calls one overridable method: positional arguments, and the API that added it."""

    name: str
    args: tuple[str, ...]
    since: str

    def text(self) -> str:
        return f"{self.name}({', '.join(('self', *self.args))})"


def _specs(since: str, *methods: tuple[str, tuple[str, ...]]) -> list[MethodSpec]:
    return [MethodSpec(name, args, since) for name, args in methods]


WORKLOAD_METHODS = (
    *_specs("1.0", ("make_params", ("profile", "overrides")), ("cases", ("params",)),
            ("make_inputs", ("case", "device", "dtype", "seed")), ("reference", ("case", "inputs")),
            ("validate_inputs", ("case", "inputs")), ("tolerance", ("dtype_name",))),
    *_specs("1.2", ("work", ("case", "dtype_name")), ("export_recipe", ("case", "dtype_name")),
            ("unchecked_reason", ("case",)), ("profile_names", ())),
)
BACKEND_METHODS = (
    *_specs("1.0", ("probe", ("device",)), ("supports", ("workload", "case", "dtype_name")),
            ("prepare", ("workload", "case", "inputs"))),
    *_specs("1.1", ("configure", ("options",))),
    *_specs("1.3", ("warm_caches", ("workload", "case", "inputs"))),
)
# A first-API form that a shim still serves: (base, method) -> (the old arguments, since when deprecated)
SHIMMED: dict[tuple[type, str], tuple[tuple[str, ...], str]] = {(Workload, "work"): (("case",), "1.2")}
# a first-API workload without profiles of its own runs under the profiles 1.0 shared (the shim)
_SHARED_PROFILES = ("the profiles plugin API 1.0 shared (smoke)", "Workload.profiles", "1.2")


@attrs.frozen
class PluginCheck:
    """What loading one plugin found: why it cannot run ("" when it can), and its deprecations."""

    error: str = ""
    deprecations: tuple[PluginDeprecation, ...] = ()


def check_plugin(instance: Any, base: type, group: str, name: str) -> PluginCheck:
    """Match the methods ``instance`` overrides, and its declared ``plugin_api``, against the interface."""
    kind = type(instance)
    where = f"{kind.__module__}.{kind.__qualname__}"
    declared = _declared_version_problem(instance) or _implementations_problem(instance)
    if declared:
        return PluginCheck(f"{group} {name!r} ({where}): {declared}")
    deprecations = []
    for spec in WORKLOAD_METHODS if base is Workload else BACKEND_METHODS:
        if getattr(kind, spec.name, None) is getattr(base, spec.name, None):
            continue  # not overridden: the base class's own method
        found = _signature(instance, spec.name)
        if found is None:
            return PluginCheck(f"{group} {name!r} ({where}): {spec.name} is not a method")
        problem = _mismatch(found, spec.args)
        old = SHIMMED.get((base, spec.name))
        if problem and old is not None and not _mismatch(found, old[0]):
            deprecations.append(_deprecation(group, name, spec, old))
            continue
        if problem:
            return PluginCheck(f"{group} {name!r} ({where}): {spec.name}{found} does not match plugin API "
                               f"{PLUGIN_API}: expected {spec.text()} (since {spec.since}); {problem}")
    if base is Workload and not instance.profiles and not takes_dtype_name(instance):
        deprecations.append(_module_deprecation(group, name, _SHARED_PROFILES))
    deprecations += [_module_deprecation(group, name, use) for use in deprecated_uses(_package(kind))]
    return PluginCheck("", tuple(deprecations))


def _declared_version_problem(instance: Any) -> str:
    """Why the ``plugin_api`` a plugin declares (optional) rules it out here; "" when it does not."""
    declared = getattr(instance, "plugin_api", None)
    if declared is None:
        return ""
    try:
        version = ApiVersion.parse(declared)
    except (TypeError, ValueError):
        return f"plugin_api {declared!r} is not a version such as '{PLUGIN_API}'"
    if version.major != PLUGIN_API.major or version.minor > PLUGIN_API.minor:
        return (f"written for plugin API {version}; this apex-bench provides {PLUGIN_API} "
                f"(a plugin runs on the same major version, at its minor version or later)")
    return ""


def _implementations_problem(instance: Any) -> str:
    """Why a workload's ``implementations`` cannot be read; "" when they can (or it has none)."""
    found = getattr(instance, "implementations", None) or {}
    if not isinstance(found, Mapping) or not all(
            isinstance(kind, str) and isinstance(path, str) and path.count(":") == 1 and all(path.split(":"))
            for kind, path in found.items()):
        return (f"implementations {found!r} is not a mapping of backend kind to 'module:attribute' "
                "(e.g. {'triton': 'mypackage.kernels:MY_OP'})")
    return ""


def implementation(workload: Workload, kind: str) -> Any | None:
    """The implementation ``workload`` brings for backends of ``kind``, imported; None when it
    brings none. An import that fails raises, and the cell that needed it says why."""
    path = (getattr(workload, "implementations", None) or {}).get(kind)
    if path is None:
        return None
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _signature(instance: Any, method: str) -> inspect.Signature | None:
    member = getattr(instance, method, None)
    if not callable(member):
        return None
    try:
        return inspect.signature(member)  # bound: without self
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def _mismatch(found: inspect.Signature, expected: tuple[str, ...]) -> str:
    """Why the harness's positional call with ``expected`` would fail on ``found`` ("" when it would not)."""
    kinds = inspect.Parameter
    params = list(found.parameters.values())
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind == kinds.VAR_POSITIONAL for p in params)
    required = [p for p in positional if p.default is p.empty]
    count = len(expected)
    if len(required) > count:
        return f"it requires {len(required)} arguments, the harness passes {count}"
    if len(positional) < count and not variadic:
        return f"it takes {len(positional)} arguments, the harness passes {count}"
    keyword_only = [p.name for p in params if p.kind == kinds.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only:
        return f"it requires the keyword argument {keyword_only[0]!r}, which the harness never passes"
    for position, param in enumerate(positional[:count]):
        if param.name != expected[position] and param.name in expected:
            return f"its argument {param.name!r} stands where the harness passes {expected[position]!r}"
    return ""


def _deprecation(group: str, name: str, spec: MethodSpec,
                 old: tuple[tuple[str, ...], str]) -> PluginDeprecation:
    old_form = MethodSpec(spec.name, old[0], "1.0").text()
    return PluginDeprecation(group=group, plugin=name, used=old_form, instead=spec.text(), since=old[1],
                             removal=str(REMOVAL))


def _module_deprecation(group: str, name: str, use: tuple[str, str, str]) -> PluginDeprecation:
    used, instead, since = use
    return PluginDeprecation(group=group, plugin=name, used=used, instead=instead, since=since,
                             removal=str(REMOVAL))


def _package(kind: type) -> str:
    """The top-level package of a plugin class: its module's deprecated uses count for it."""
    return kind.__module__.partition(".")[0]


def work_of(workload: Workload, case: Any, dtype_name: str) -> Any:
    """``workload.work`` as the plugin defines it: ``work(case, dtype_name)``, or the first API's
    ``work(case)`` (its bytes counted as that plugin counts them) through the shim."""
    if takes_dtype_name(workload):
        return workload.work(case, dtype_name)
    return workload.work(case)  # type: ignore[call-arg]  # the first API's form


def deprecation_lines(deprecations: Iterable[PluginDeprecation]) -> list[str]:
    """One line per deprecation, for the terminal and the log."""
    return [f"{d.group} {d.plugin!r} uses {d.used}, deprecated since plugin API {d.since}; use {d.instead} "
            f"(the shim goes in {d.removal})" for d in deprecations]
