"""Expand a selection into the cells of one run: workload x case x backend x dtype on one device."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from apex_core.correctness import DTYPES
from apex_core.errors import ParamError, UsageError, did_you_mean
from apex_core.interfaces import FIXED_PROFILE, Workload
from apex_core.params import parse_overrides
from apex_core.registry import Registry
from apex_core.results import Case
from apex_core.timing import TimingOptions

log = logging.getLogger(__name__)


@attrs.frozen
class PlannedCell:
    """One cell to run (or to skip), before probing."""

    case: Case
    backend: str
    dtype: str
    device: str

    @property
    def label(self) -> str:
        return f"{self.case.id} {self.backend} {self.dtype} {self.device}"


@attrs.frozen
class Plan:
    """A fully expanded run: its cells, in order, and the settings they share."""

    cells: tuple[PlannedCell, ...]
    backends: tuple[str, ...]
    workloads: tuple[str, ...]
    broken_workloads: tuple[str, ...]
    device: str
    dtypes: tuple[str, ...]
    profile: str
    overrides: dict[str, Any]
    seed: int
    timing: TimingOptions
    timeout_s: float
    # per backend name, plain data (picklable, JSON-ready): handed to Backend.configure in
    # every process that probes or runs that backend
    backend_options: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    # more of the report's config, merged over the plan's own keys (a sweep names its engine file)
    extra_config: dict[str, Any] = attrs.field(factory=dict)
    # workloads with cells that do not define the plan's profile: they run with their defaults
    profile_fallbacks: tuple[str, ...] = ()

    def options_for(self, backend: str) -> dict[str, Any]:
        """The options of one backend (empty when none were given)."""
        return dict(self.backend_options.get(backend, {}))

    def config(self) -> dict[str, Any]:
        """The settings that make two runs comparable, for the report."""
        return {
            "backends": list(self.backends),
            "workloads": list(self.workloads),
            "device": self.device,
            "dtypes": list(self.dtypes),
            "profile": self.profile,
            "overrides": dict(self.overrides),
            "seed": self.seed,
            "timeout_s": self.timeout_s,
            "timing": attrs.asdict(self.timing),
            "backend_options": {name: dict(opts) for name, opts in self.backend_options.items()},
            # an interrupted report holds fewer: the reader can tell how many never started
            "cells_planned": len(self.cells),
            # only when some workload lacked the profile, so other runs' configs stay as they were
            **({"profile_fallbacks": list(self.profile_fallbacks)} if self.profile_fallbacks else {}),
            **self.extra_config,
        }


# The case name of the rows of a workload whose plugin failed to load (its cases are unknown).
UNLOADED_CASE = "-"


@attrs.frozen
class _Unloaded:
    """The parameters of a workload whose plugin failed to load: none are known."""


def _split_selector(selector: str) -> tuple[str, str | None]:
    """``tileunpack:blend`` selects one case; a bare name selects every case."""
    name, _, case = selector.partition(":")
    return name.strip(), (case.strip() or None)


def _plain_value(backend: str, key: str, value: Any) -> Any:
    """An option value as plain data (paths become strings); anything else is a usage error."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_plain_value(backend, key, item) for item in value]
    raise UsageError(f"option {key!r} of backend {backend!r} is a {type(value).__name__}; options are "
                     "strings, numbers, booleans, paths or lists of those")


def normalize_backend_options(options: Mapping[str, Mapping[str, Any]] | None, known: Sequence[str],
                              selected: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Check option names against the known backends; keep those of the selected ones, as plain data."""
    normalized: dict[str, dict[str, Any]] = {}
    for backend, values in (options or {}).items():
        if backend not in known:
            raise UsageError(f"options given for unknown backend {backend!r}; valid backends: "
                             f"{', '.join(known)}")
        if not isinstance(values, Mapping):
            raise UsageError(f"options of backend {backend!r} must be a mapping of names to values, "
                             f"got {type(values).__name__}")
        if backend in selected and values:
            normalized[backend] = {str(k): _plain_value(backend, str(k), v) for k, v in values.items()}
    return normalized


def known_profiles(workloads: Sequence[Workload]) -> list[str]:
    """``fixed`` and every profile some of ``workloads`` defines, in order of appearance."""
    names = dict.fromkeys([FIXED_PROFILE])
    for workload in workloads:
        names.update(dict.fromkeys(workload.profile_names()))
    return list(names)


def check_profile(profile: str, workloads: Sequence[Workload]) -> None:
    """A profile no selected workload defines is a usage error naming the valid ones."""
    valid = known_profiles(workloads)
    if workloads and profile not in valid:
        raise ParamError(f"unknown profile {profile!r}; valid profiles: {', '.join(valid)}")


def params_for(workload: Workload, profile: str, overrides: Mapping[str, Any]) -> tuple[Any, bool]:
    """The workload's parameters under ``profile``; a profile it does not define gives its
    defaults (``fixed``), never another workload's values. Returns (params, fell back)."""
    if profile in workload.profile_names():
        return workload.make_params(profile, overrides), False
    return workload.make_params(FIXED_PROFILE, overrides), True


def build_plan(
    registry: Registry,
    *,
    workloads: Sequence[str] | None = None,
    backends: Sequence[str] | None = None,
    device: str = "cpu",
    dtypes: Sequence[str] = ("fp32",),
    profile: str = "fixed",
    overrides: Sequence[str] | dict[str, Any] = (),
    seed: int = 0,
    timing: TimingOptions | None = None,
    timeout_s: float = 600.0,
    backend_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Plan:
    """Resolve names, aliases, dtypes and parameters into cells; every mistake is a UsageError."""
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise UsageError(f"unknown dtype {dtype!r}{did_you_mean(dtype, DTYPES)}; valid dtypes: "
                             f"{', '.join(DTYPES)}")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {device!r}; valid devices: cpu, cuda")
    if timeout_s <= 0:
        raise UsageError(f"timeout must be positive, got {timeout_s}")
    backend_names = registry.select_backends(backends)
    options = normalize_backend_options(backend_options, registry.backend_names(), backend_names)
    selectors = [_split_selector(s) for s in (workloads or [])]
    workload_names = registry.select_workloads([name for name, _ in selectors] or None)
    wanted_cases: dict[str, set[str]] = {}
    for name, case_name in selectors:
        if case_name:
            wanted_cases.setdefault(name, set()).add(case_name)
    live = [registry.workloads[n] for n in workload_names if n in registry.workloads]
    typed = overrides if isinstance(overrides, dict) else parse_overrides(overrides, live)
    check_profile(profile, live)
    cells: list[PlannedCell] = []
    fallbacks: list[str] = []
    for name in workload_names:
        if name not in registry.workloads:
            # a broken plugin: no cases to expand, but one row per backend and dtype says why
            for case_name in sorted(wanted_cases.get(name, {UNLOADED_CASE})):
                placeholder = Case(name, case_name, _Unloaded())
                cells.extend(PlannedCell(placeholder, b, d, device) for b in backend_names for d in dtypes)
            continue
        workload = registry.workloads[name]
        params, fell_back = params_for(workload, profile, typed)
        cases = workload.cases(params)
        if fell_back and cases:
            fallbacks.append(workload.name)
            log.warning("%s has no %r profile: it runs with its defaults", workload.name, profile)
        wanted = wanted_cases.get(workload.name)
        if wanted:
            unknown = wanted - {c.name for c in cases}
            if unknown:
                first = sorted(unknown)[0]
                hint = did_you_mean(first, [c.name for c in cases])
                raise UsageError(f"unknown case {first!r} of {workload.name}{hint}; valid "
                                 f"cases: {', '.join(c.name for c in cases)}")
            cases = [c for c in cases if c.name in wanted]
        for case in cases:
            for backend in backend_names:
                for dtype in dtypes:
                    cells.append(PlannedCell(case, backend, dtype, device))
    return Plan(
        cells=tuple(cells),
        backends=tuple(backend_names),
        workloads=tuple(workload_names),
        broken_workloads=tuple(n for n in workload_names if n not in registry.workloads),
        device=device,
        dtypes=tuple(dtypes),
        profile=profile,
        overrides=dict(typed),
        seed=seed,
        timing=timing or TimingOptions(),
        timeout_s=timeout_s,
        backend_options=options,
        profile_fallbacks=tuple(fallbacks),
    )
