"""The plugin API: what a workload and a backend must provide.

Third-party packages subclass these and register the classes under the
entry-point groups ``apex_bench.workloads`` and ``apex_bench.backends``.
Construction must be cheap and must not import heavy stacks (triton,
tensorrt, onnxruntime): do that inside ``probe`` or ``prepare``. The guide with a
complete example package is docs/plugins.md; the contract, its version
(``apex_core.PLUGIN_API``), the changelog and the deprecation policy are in
docs/plugin-api.md. Each member says the plugin API version it appeared in.
"""

from __future__ import annotations

import abc
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from apex_core.errors import ApexBenchError, ParamError
from apex_core.results import Availability, Case, SkipKind, Support, Tolerance, Work

if TYPE_CHECKING:
    import torch

    from apex_core.results import Timing
    from apex_core.timing import TimingOptions

Inputs = dict[str, "torch.Tensor"]
Outputs = dict[str, "torch.Tensor"]

# Default tolerances by dtype name (docs/design.md section 7): (atol, rtol).
DEFAULT_TOLERANCES: Mapping[str, tuple[float, float]] = {
    "fp32": (1e-6, 1e-5),
    "fp16": (1e-3, 1e-2),
    "bf16": (2e-3, 2e-2),
    "fp8": (3e-3, 3e-2),
}

FIXED_PROFILE = "fixed"  # every workload's parameter defaults; a workload names its other profiles

# The profiles plugin API 1.0 shared between all workloads (``apex_core.interfaces.PROFILES``), each
# value applied to the fields a workload has. Since 1.2 a workload declares its own
# (``Workload.profiles``); a first-API workload (``work(case)``, no profiles of its own) still gets
# these through the shim, and the report lists that as a deprecation.
_FIRST_API_PROFILES: Mapping[str, Mapping[str, Any]] = {
    FIXED_PROFILE: {},
    "smoke": {"batch": 1, "channels": 8, "height": 16, "width": 16, "tile_size": 4, "kmax": 6,
              "steps": 16, "budget_b1": 4, "budget_b2": 2, "budget_total": 6},
}
_PROFILES_DEPRECATION = ("apex_core.interfaces.PROFILES", "Workload.profiles", "1.2")
# (top-level package of the caller) -> the deprecated names it used: (used, instead, since)
_deprecated_uses: dict[str, set[tuple[str, str, str]]] = {}


def __getattr__(name: str) -> Any:
    """``PROFILES``, which plugin API 1.0 exported, with a DeprecationWarning (PEP 562)."""
    if name != "PROFILES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    note_deprecated_use(sys._getframe(1).f_globals.get("__name__", ""), _PROFILES_DEPRECATION)
    warnings.warn("apex_core.interfaces.PROFILES is deprecated since plugin API 1.2 and goes in 2.0: "
                  "declare the workload's own Workload.profiles", DeprecationWarning, stacklevel=2)
    return _FIRST_API_PROFILES


def note_deprecated_use(caller: str, use: tuple[str, str, str]) -> None:
    """Keep that module ``caller`` used a deprecated module-level name (used, instead, since): the
    report lists it for each plugin of the caller's top-level package."""
    _deprecated_uses.setdefault(str(caller).partition(".")[0], set()).add(use)


def deprecated_uses(package: str) -> list[tuple[str, str, str]]:
    """The deprecated module-level names code of ``package`` used: (used, instead, since)."""
    return sorted(_deprecated_uses.get(package, ()))


def takes_dtype_name(workload: Workload) -> bool:
    """Whether ``workload.work`` takes the cell's dtype (API 1.2), or is the first API's ``work(case)``."""
    try:
        params = inspect.signature(workload.work).parameters.values()  # bound: without self
    except (TypeError, ValueError):
        return True
    kinds = inspect.Parameter
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == kinds.VAR_POSITIONAL for p in params)


@attrs.frozen
class ExportRecipe:
    """How one workload case exports to ONNX (``Workload.export_recipe``).

    ``dynamic_axes`` maps an input name to ``{axis: symbolic name}`` for the axes that may
    change size in the exported graph (only where the traced graph stays correct at other
    sizes); ``note`` says what stays fixed and why. ``unsupported`` (non-empty) says why this
    case has no export in the asked dtype, e.g. an exporter that fails on bf16.
    """

    dynamic_axes: Mapping[str, Mapping[int, str]] = attrs.field(factory=dict)
    note: str = ""
    unsupported: str = ""

    @classmethod
    def refused(cls, reason: str) -> ExportRecipe:
        return cls(unsupported=reason)


class Workload(abc.ABC):
    """A computation with a torch reference: the single source of truth for its semantics.

    Since plugin API 1.0 unless a member says otherwise.
    """

    name: ClassVar[str]  # 1.0; the entry-point name wins
    description: ClassVar[str]  # 1.0
    params_type: ClassVar[type]  # 1.0: a frozen attrs class; its defaults are the fixed profile
    case_names: ClassVar[tuple[str, ...]] = ("default",)  # 1.0
    # 1.2: named parameter profiles besides "fixed" (the defaults): {"smoke": {"channels": 8, ...}}.
    # Values name fields of params_type. A run under a profile this workload lacks runs it
    # with its defaults and records that in the report (docs/workloads.md).
    profiles: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    # 1.4, optional: the plugin API this plugin was written against ("1.2"); a plugin that
    # declares a major version other than apex-bench's, or a later minor one, fails to load
    plugin_api: ClassVar[str | None] = None
    # 1.5, optional: the code this workload brings for backends that run an implementation
    # written per workload, by the backend's kind ("triton", "jax", "tensorrt-plugin"): each a
    # "module:attribute" path, imported only when such a backend meets the workload
    # (plugin_api.implementation; docs/plugins.md, "Bringing implementations")
    implementations: ClassVar[Mapping[str, str]] = {}

    def _own_profiles(self) -> Mapping[str, Mapping[str, Any]]:
        """This workload's profiles; a first-API workload without any gets the 1.0 shared ones (shim)."""
        if not self.profiles and not takes_dtype_name(self):
            return _FIRST_API_PROFILES
        return self.profiles

    def profile_names(self) -> tuple[str, ...]:
        """``fixed`` and the profiles this workload defines (since 1.2)."""
        return (FIXED_PROFILE, *(name for name in self._own_profiles() if name != FIXED_PROFILE))

    def make_params(self, profile: str = FIXED_PROFILE, overrides: Mapping[str, Any] | None = None) -> Any:
        """Resolve the parameters for one of this workload's profiles plus ``--set`` overrides (typed).

        Overrides of fields this workload does not have are ignored (they are meant for
        another workload of the run); a profile it does not define is a ``ParamError``.
        """
        fields = {f.name for f in attrs.fields(self.params_type)}
        if profile not in self.profile_names():
            raise ParamError(f"{self.name} has no profile {profile!r}; its profiles: "
                             f"{', '.join(self.profile_names())}")
        profiles = self._own_profiles()
        values = dict(profiles.get(profile, {}))
        if profiles is _FIRST_API_PROFILES:  # shared values: each workload took the fields it has
            values = {k: v for k, v in values.items() if k in fields}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ParamError(f"{self.name}: profile {profile!r} sets {unknown[0]!r}, which is not a "
                             f"parameter; valid: {', '.join(sorted(fields))}")
        values.update({k: v for k, v in (overrides or {}).items() if k in fields})
        try:
            return self.params_type(**values)
        except (TypeError, ValueError) as exc:
            raise ParamError(f"{self.name}: {exc}") from None

    def cases(self, params: Any) -> list[Case]:
        """Every named case of this workload at the given parameters."""
        return [Case(self.name, case_name, params) for case_name in self.case_names]

    @abc.abstractmethod
    def make_inputs(self, case: Case, device: str, dtype: torch.dtype, seed: int) -> Inputs:
        """Fresh random inputs (never zeros) for one case, every value a tensor.

        Generated on the CPU from ``seed`` and then moved, so the same seed gives the
        same data on every device. Floating inputs take ``dtype``; index inputs stay
        integer. Scalars are 0-d tensors so that a check can refresh them in place.
        """

    @abc.abstractmethod
    def reference(self, case: Case, inputs: Inputs) -> Outputs:
        """Compute the outputs in plain torch, in the dtype of the inputs given."""

    @abc.abstractmethod
    def work(self, case: Case, dtype_name: str) -> Work:
        """Minimal bytes moved, FLOPs and throughput units of one call in ``dtype_name`` (since 1.2).

        Count the bytes of the dtypes the inputs really take in that cell (data tensors in
        ``dtype_name``, fixed-dtype ones such as int32 indices in theirs), so GB/s is right
        for fp32 cells as for fp16 ones. ``units`` is free text: the plural noun a throughput
        is counted in (``tiles``, ``images``, ``queries``). The first API's ``work(case)`` is
        deprecated since 1.2 and still served by a shim until 2.0 (docs/plugin-api.md).
        """

    def export_recipe(self, case: Case, dtype_name: str) -> ExportRecipe | None:
        """How ``case`` exports to ONNX in ``dtype_name`` (since 1.2; ``apex-bench export-onnx``, the
        ``onnxruntime`` and ``tensorrt-engine --trt-build`` backends); ``None``: no export.

        The export traces ``reference`` as it is; return ``ExportRecipe.refused(reason)`` for
        a case or dtype that does not export.
        """
        return None

    def validate_inputs(self, case: Case, inputs: Inputs) -> None:  # noqa: B027 - optional hook
        """Raise ``InputValidationError`` when inputs break the contract (checked once, untimed)."""

    def unchecked_reason(self, case: Case) -> str:
        """Why outputs of ``case`` cannot be checked (there is no reference); "" when they are (since 1.2).

        A workload that answers here is timed but never checked: its ``ok`` cells are
        reported with correctness ``unchecked`` and this reason, and ``reference`` is
        never called for them.
        """
        return ""

    def tolerance(self, dtype_name: str) -> Tolerance:
        """Comparison bounds for outputs computed in ``dtype_name``."""
        atol, rtol = DEFAULT_TOLERANCES[dtype_name]
        return Tolerance(atol, rtol)


def _callable_or_none(_instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"Prepared.{attribute.name} must be a callable or None, got {value!r}: since plugin "
                        "API 1.4 timer, work and measure are keyword-only (e.g. Prepared(fn, timer='kernel'))")


@attrs.frozen
class Prepared:
    """What a backend built for one cell: a zero-argument callable to time.

    ``fn`` returns the outputs as a dict keyed like the reference's outputs. When
    the backend writes into buffers it allocated once, it lists them in
    ``outputs`` so the runner can poison them before each check run.

    The fields of API 1.0 and 1.1 keep their positions; the later ones are keyword-only
    (since 1.4), so a positional call written for any earlier API binds as it did.
    """

    fn: Callable[[], Outputs]  # 1.0
    outputs: Outputs | None = None  # 1.0
    metadata: dict[str, Any] = attrs.field(factory=dict)  # 1.0
    timing_note: str = ""  # 1.0; e.g. "interpreted: not comparable"
    timing_method: str | None = None  # 1.0; overrides the runner's method name when set
    # 1.1: called once after the cell's last call; its dict is merged into the metadata
    # (e.g. what an autotuner selected and how many launches hit its cache).
    report_metadata: Callable[[], dict[str, Any]] | None = attrs.field(default=None,
                                                                       validator=_callable_or_none)
    # 1.2: the CUDA timer this cell needs whatever the run's --timer says ("kernel": the work runs on
    # streams of its own, which events on the timing stream would not see); None: the run's timer
    timer: str | None = attrs.field(default=None, kw_only=True)
    # 1.2: the work of one call when only the built callable knows it (an engine file's output
    # shapes follow from running it); None: the workload's ``work`` counts it.
    work: Work | None = attrs.field(default=None, kw_only=True)
    # 1.2: for a backend whose calls our timers cannot see into (an external process that times
    # itself): called once instead of the runner's timer with the cell's TimingOptions, it
    # returns the Timing (method named, e.g. "external"). None: the runner times ``fn``.
    measure: Callable[[TimingOptions], Timing] | None = attrs.field(default=None, kw_only=True,
                                                                  validator=_callable_or_none)


class CellSkipped(ApexBenchError):
    """Raised by ``prepare`` (or a workload's ``make_inputs``) when a cell cannot run here (since 1.1).

    For what only the build can tell (an engine builder that rejects the network, a
    serialized engine that will not load): the cell becomes ``skipped`` with this
    reason instead of ``error``. Anything else that goes wrong stays an error.
    """

    def __init__(self, reason: str, kind: SkipKind = SkipKind.UNSUPPORTED) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


class Backend(abc.ABC):
    """One way of running workloads: an eager reference, a compiler, a kernel library...

    Since plugin API 1.0 unless a member says otherwise.
    """

    name: ClassVar[str]  # 1.0; the entry-point name wins
    description: ClassVar[str]  # 1.0
    devices: ClassVar[frozenset[str]] = frozenset({"cpu", "cuda"})  # 1.0
    # 1.2: the options this backend takes (apex_core.backend_options.BackendOption): offered on the
    # command line as --backend-opt NAME.KEY=VALUE, shown by --list, handed to configure()
    option_specs: ClassVar[tuple[Any, ...]] = ()
    # 1.2: group names users may type for this backend together with others that declare the
    # same one (``trt`` selects tensorrt-plugin and tensorrt-engine). A backend's own name
    # always wins over an alias.
    aliases: ClassVar[tuple[str, ...]] = ()
    # 1.3: true when ``prepare`` may run again for the same cell in one process, on a second set
    # of inputs, cheaply and with every callable it returned before still valid: the CUDA
    # timer then takes the cell's samples in turn from several input placements
    # (TimingOptions.placements). False (the default) times the first placement alone, as for
    # a backend whose prepare compiles anew or resets state that earlier callables rely on.
    reprepares: ClassVar[bool] = False
    # 1.4, optional: the plugin API this plugin was written against (see ``Workload.plugin_api``)
    plugin_api: ClassVar[str | None] = None

    def configure(self, options: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Take this backend's run options (``backend_options[name]``, empty when none were given; since 1.1).

        Called in every process that probes or runs the backend, before ``probe`` and
        ``prepare``, with the same plain-data options each time: keep it cheap and
        idempotent (store the values; do heavy work in ``probe``/``prepare``). Raise
        ``UsageError`` for an unknown option or a bad value.
        """

    @abc.abstractmethod
    def probe(self, device: str) -> Availability:
        """Say once whether this backend can run on ``device`` here, with an actionable reason."""

    def supports(self, workload: Workload, case: Case, dtype_name: str) -> Support:
        """Say whether this backend implements one case in one dtype (default: yes)."""
        return Support.yes()

    @abc.abstractmethod
    def prepare(self, workload: Workload, case: Case, inputs: Inputs) -> Prepared:
        """Build whatever is needed (compile, autotune, engine) and return the callable.

        The callable must read ``inputs`` each call (the runner refreshes them in
        place between checks) and must not synchronize the host.
        """

    def warm_caches(self, workload: Workload, case: Case, inputs: Inputs) -> str | None:
        """Fill the persistent compile caches for one cell ahead of it, without running it (since 1.3).

        Called in a builder process (``--build-workers``, docs/scale.md) while another
        cell is being timed on the same GPU, with the cell's own inputs on its device,
        after ``configure``. It must launch none of the cell's kernels and benchmark
        nothing (autotuning is measurement: it stays in ``prepare``): compile what
        ``prepare`` will compile so that its compiler finds it in the caches
        (``TRITON_CACHE_DIR``, ``TORCHINDUCTOR_CACHE_DIR``). Return None once the caches
        hold the build, or a one-line reason why this cell was not warmed. Whatever it
        raises or however it fails, the measuring worker builds the cell as if it had not
        been called; backends without this hook are simply not warmed.
        """
        return NO_WARM_HOOK


# What ``Backend.warm_caches`` answers when a backend does not implement it.
NO_WARM_HOOK = "the backend has no warm_caches hook"


def warms_caches(backend: Backend) -> bool:
    """Whether ``backend`` implements ``warm_caches`` (builders only take cells of such backends)."""
    return type(backend).warm_caches is not Backend.warm_caches
