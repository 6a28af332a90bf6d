"""Immutable result and description values shared by the core, backends and reports.

Every class here is a frozen attrs class. Serialization to JSON lives in
``apex_core.report.records``, not on the classes.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import attrs

from apex_core.stats import Stats


class Status(enum.StrEnum):
    """What happened to one cell of the workload x backend cross-product."""

    OK = "ok"
    SKIPPED = "skipped"
    INCORRECT = "incorrect"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    # the harness caught the backend tampering with the measurement (apex_core/measure/integrity.py,
    # docs/anti-cheat.md): its timing is not reported, the reason says what was caught
    SUSPECT = "suspect"


class SkipKind(enum.StrEnum):
    """Why a cell was skipped: the backend cannot run here, or does not implement the case."""

    UNAVAILABLE = "unavailable"
    UNSUPPORTED = "unsupported"


# Statuses that make a run fail (exit code 1) when they appear in requested cells.
FAILING_STATUSES = frozenset({Status.INCORRECT, Status.ERROR, Status.TIMEOUT, Status.CRASHED, Status.SUSPECT})


@attrs.frozen
class Availability:
    """Whether a backend can run on a device here, and if not, a reason a person can act on."""

    ok: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> Availability:
        return cls(True, "")

    @classmethod
    def no(cls, reason: str) -> Availability:
        return cls(False, reason)


@attrs.frozen
class Support:
    """Whether a backend implements one workload case in one dtype."""

    ok: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> Support:
        return cls(True, "")

    @classmethod
    def no(cls, reason: str) -> Support:
        return cls(False, reason)


@attrs.frozen
class Case:
    """One named case of a workload with its fully resolved parameters."""

    workload: str
    name: str
    params: Any  # the workload's frozen attrs parameter instance

    @property
    def id(self) -> str:
        return f"{self.workload}/{self.name}"

    def params_dict(self) -> dict[str, Any]:
        return attrs.asdict(self.params)


# A throughput unit: a plural noun in lower case (the report's key is ``<units>_per_s``).
UNITS_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,39}")


@attrs.frozen
class Work:
    """The minimal work one call does: bytes moved, FLOPs, and throughput units."""

    bytes_moved: int
    flops: int
    units: str  # free text: tiles, tokens, elements, frames, images, queries...
    count: int  # units processed per call

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.units, str) or not UNITS_PATTERN.fullmatch(self.units):
            raise ValueError(f"throughput unit {self.units!r} must be a lower-case word of letters, digits "
                             "and '_' (at most 40), e.g. 'tiles' or 'images'")


@attrs.frozen
class Tolerance:
    """Comparison bounds: a mismatch is ``|out - ref| > atol + rtol * |ref|``."""

    atol: float
    rtol: float
    max_mismatch_ratio: float = 0.0
    reason: str = ""  # why a workload widened the default, if it did


@attrs.frozen
class OutputAccuracy:
    """Comparison of one output tensor against the reference."""

    name: str
    max_abs_error: float
    max_rel_error: float
    mismatches: int
    elements: int
    nonfinite_mismatches: int  # NaN/Inf where the reference is finite (or the reverse)
    # root mean square of out - ref over the elements finite in both (0 when there are none)
    rmse: float = 0.0

    @property
    def mismatch_ratio(self) -> float:
        return self.mismatches / self.elements if self.elements else 0.0


@attrs.frozen
class Accuracy:
    """The correctness verdict of one check run."""

    passed: bool
    atol: float
    rtol: float
    max_mismatch_ratio: float
    outputs: tuple[OutputAccuracy, ...]
    stage: str  # "before-timing" or "after-timing"
    message: str = ""

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for o in self.outputs), default=0.0)


@attrs.frozen
class KernelActivity:
    """What the profiler saw per call: kernel count, first-start-to-last-end span, streams."""

    kernels_per_call: float  # median over the profiled calls
    span_p50_ms: float  # first device activity's start to the last one's end, median
    streams: int  # distinct streams the calls' device work ran on
    calls: int  # calls profiled


def _optional_tuple(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(value)


# A cell is flagged ``throttled`` when more than this share of its batches of samples ran throttled,
# or a limit held the clocks for more than this share of its sampling window.
# nvbench sets a throttled trial aside and samples on (measure_cold), so a few set aside leave the kept
# samples clean; past a tenth, the card was held down for a real part of the cell, and what was kept
# was sampled between the limit's bouts (docs/timing.md, "Throttled samples").
THROTTLED_BATCHES_LIMIT = 0.10


@attrs.frozen
class ThrottledBatches:
    """Per batch of samples, whether a limit held the card's clocks (apex_core/measure/throttle.py).

    A throttled batch's samples are set aside: counted here, not in ``samples_ms`` nor the stats.
    ``kept_throttled`` counts throttled samples kept in the stats all the same (every batch ran
    throttled, or ``--fixed-iters``). Spreads are (min, median, max) of the per-batch readings;
    ``unavailable`` says why the batches were not read, instead of any number.
    """

    unavailable: str = ""
    method: str = ""  # "reasons_mask": what said per batch that a power or thermal limit held
    batches: int = 0  # batches read
    throttled: int = 0  # of them, throttled
    set_aside: int = 0  # samples set aside
    kept_throttled: int = 0
    reasons: tuple[str, ...] = ()
    # the clock rule's bound: 0.75 of the card's max SM clock (nvbench's); None: the rule did not apply
    clock_floor_mhz: float | None = None
    sm_clock_mhz: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    mem_clock_mhz: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    power_w: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    violation_share: float | None = None  # most of the window a limit held the clocks (NVML's counters)

    @property
    def over_limit(self) -> bool:
        """Too many batches (or too much of the window) throttled for the kept samples to stand unflagged."""
        held = self.violation_share is not None and self.violation_share > THROTTLED_BATCHES_LIMIT
        return held or (bool(self.batches) and (self.throttled / self.batches > THROTTLED_BATCHES_LIMIT
                                                or self.kept_throttled > 0))


@attrs.frozen
class Telemetry:
    """NVML readings over a cell's timing, and its energy per call (telemetry.py).

    Spreads are (min, median, max); ``unavailable`` / ``energy_unavailable`` say why a
    part is missing instead of any number.
    """

    unavailable: str = ""
    readings: int = 0
    sm_clock_mhz: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    mem_clock_mhz: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    temperature_c: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    power_w: tuple[float, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    throttled_share: float | None = None  # share of readings while a power or thermal limit held clocks
    throttle_reasons: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    energy_j_per_call: float | None = None
    average_w: float | None = None
    energy_method: str = ""  # "nvml_total_energy" or "nvml_power_x_time"
    energy_calls: int = 0
    energy_window_s: float | None = None
    energy_unavailable: str = ""
    # per batch of samples (None: not read, as in reports from before it was)
    batches: ThrottledBatches | None = None

    @property
    def throttled(self) -> bool:
        """The ``throttled`` flag: too many batches throttled where they were read; else (older
        reports, or no batch read) any NVML reading of the timing taken while a limit held the clocks."""
        if self.batches is not None and self.batches.batches:
            return self.batches.over_limit
        return bool(self.throttled_share)


@attrs.frozen
class Timing:
    """How a cell was measured and what came out of it."""

    # e.g. "cuda_event_held", "cuda_graph_held", "kernel_profiler", "cpu_perf_counter" (docs/timing.md)
    method: str
    cache: str  # "cold" or "warm" (CPU: "n/a")
    samples_ms: tuple[float, ...]
    stats: Stats
    stop_reason: str  # "noise", "converged", "time_cap", "sample_cap"
    note: str = ""
    # median host time to issue one call (perf_counter around the call, no sync); CUDA only
    host_ms: float | None = None
    kernel: KernelActivity | None = None  # the kernel timer's per-call activity
    # the method's p50 for one empty kernel, already subtracted from every sample; None: not subtracted;
    # floor_rounds_ms (last, so the fields before it keep their places): this cell's short rounds' p50s
    floor_ms: float | None = None
    placements: int = 1  # input placements sampled in turn (apex_core/measure/placements.py)
    floor_rounds_ms: tuple[float, ...] = ()


@attrs.frozen
class Derived:
    """Rates derived from the median time and the workload's work counts."""

    units: str
    units_per_s: float
    gbps: float
    tflops: float
    bytes_moved: int
    flops: int


@attrs.frozen
class DeviceInfo:
    """One GPU a run used: its index on its host (PCI bus order), model name and UUID."""

    index: int
    name: str
    uuid: str
    host: str = ""  # the node's host name, where cells ran on several hosts (the Ray executor)

    @property
    def label(self) -> str:
        return f"{self.host + ':' if self.host else ''}cuda:{self.index}"


@attrs.frozen
class DeviceUse:
    """How a run used one of its GPUs: cells run there, and why it left the rotation, if it did."""

    device: DeviceInfo
    cells: int
    retired: str = ""  # "" while it stayed in the rotation


@attrs.frozen
class ReplayArtifact:
    """One (workload, case, dtype) at a seed, as the cell that ran it pins it for replay:
    the inputs' sha256 and the CPU reference's fingerprint (apex_core/measure/replay_artifacts.py).

    ``inputs_sha256`` is ``None`` when the data cannot be generated (the cell itself says
    why); ``reference`` is ``None`` then, and when the inputs are too large for the float64
    CPU reference or the workload has none (``inputs_only``).
    """

    inputs_sha256: str | None
    reference: dict[str, Any] | None = None
    inputs_only: bool = False
    # what the hashes depend on besides the code, where they were made: torch, its CPU kernel level
    platform: dict[str, Any] | None = None


@attrs.frozen
class CellResult:
    """Everything recorded for one cell: workload x case x backend x dtype x device."""

    workload: str
    case: str
    backend: str
    dtype: str
    device: str
    status: Status
    params: dict[str, Any] = attrs.field(factory=dict)
    reason: str = ""
    skip_kind: SkipKind | None = None
    timing: Timing | None = None
    derived: Derived | None = None
    accuracy: tuple[Accuracy, ...] = ()
    build_time_s: float | None = None
    peak_memory_mb: float | None = None
    # how peak_memory_mb was read: "cuda_max_memory_allocated", or on the CPU "rss_hwm_delta" /
    # "ru_maxrss_delta" (apex_core/measure/cpu_memory.py); the CPU and CUDA numbers do not compare
    peak_memory_method: str = ""
    input_memory_mb: float | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)
    wall_time_s: float | None = None
    log: str = ""  # traceback or worker output; goes to the log file, not the report
    telemetry: Telemetry | None = None  # CUDA cells: NVML clocks, throttling, energy
    # a crashed or timed-out cell: the worker's last stderr lines (faulthandler's stacks included)
    worker_output: str = ""
    # why the outputs were not checked (the workload has no reference, e.g. an engine file
    # swept over shape cases); "" when they were checked or the cell never got that far
    unchecked: str = ""
    device_info: DeviceInfo | None = None  # the card it ran on, when the run named cards (--devices, Ray)
    wait_time_s: float | None = None  # from the run's start until a worker took the cell
    # seconds a builder process spent filling this cell's compile caches ahead of it
    # (--build-workers, apex_core/running/prebuild.py); None when no builder started on it
    warm_time_s: float | None = None
    # its data pinned for the report's replay block; None for a cell that never reached a worker
    replay: ReplayArtifact | None = None

    @property
    def key(self) -> str:
        return f"{self.workload}/{self.case}/{self.backend}/{self.dtype}/{self.device}"


@attrs.frozen
class PluginRow:
    """One discovered plugin (backend or workload) as ``--list`` shows it."""

    group: str  # "backend" or "workload"
    name: str
    source: str  # entry point value and the distribution that provides it
    status: str  # "ok", "unavailable", "error"
    reason: str = ""
    description: str = ""


@attrs.frozen
class PluginDeprecation:
    """A deprecated form of the plugin API that a plugin uses, served by a shim (docs/plugin-api.md)."""

    group: str  # "backend" or "workload"
    plugin: str
    used: str  # e.g. "work(self, case)"
    instead: str  # e.g. "work(self, case, dtype_name)"
    since: str  # the plugin API version that deprecated it
    removal: str  # the version whose shims may be gone


@attrs.frozen
class Report:
    """A whole run: environment, configuration and every cell, in plan order."""

    suite: str
    timestamp_utc: str
    environment: dict[str, Any]
    config: dict[str, Any]
    status: str  # "running", "complete", "interrupted"
    cells: tuple[CellResult, ...]
    plugins: tuple[PluginRow, ...] = ()
    triton_autotune: dict[str, Any] = attrs.field(factory=dict)
    devices: tuple[DeviceUse, ...] = ()  # the cards the cells were sharded over (--devices, Ray)
    deprecations: tuple[PluginDeprecation, ...] = ()  # what the run's plugins use that a shim serves

    def by_status(self, status: Status) -> tuple[CellResult, ...]:
        return tuple(c for c in self.cells if c.status == status)
