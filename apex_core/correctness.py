"""Compare a backend's outputs with the workload's reference (docs/design.md section 7)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from apex_core.results import Accuracy, OutputAccuracy, Tolerance

DTYPES: Mapping[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


def reference_dtype(device: str) -> torch.dtype:
    """The precision the reference runs in: float64 on the CPU (cheap there), float32 on GPUs."""
    return torch.float64 if device == "cpu" else torch.float32


def upcast_inputs(inputs: Mapping[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Copies of the inputs with every floating tensor in ``dtype``; integer tensors unchanged."""
    return {
        k: v.to(dtype) if v.is_floating_point() else v.clone() for k, v in inputs.items()
    }


def poison_(outputs: Mapping[str, torch.Tensor]) -> None:
    """Fill preallocated output buffers with values no correct kernel leaves behind."""
    for tensor in outputs.values():
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
        else:
            tensor.fill_(-(2**30) if tensor.dtype != torch.uint8 else 255)


def write_inputs_(inputs: Mapping[str, torch.Tensor], values: Mapping[str, torch.Tensor]) -> None:
    """Copy ``values`` into the input tensors in place: their addresses stay valid for the call."""
    for name, tensor in inputs.items():
        tensor.copy_(values[name])


def output_problem(outputs: Any, cell_dtype: torch.dtype) -> str:
    """Why the call's result is not a valid answer in form ("" when it is).

    It must be a mapping of names to tensors; a floating output must be in the cell's dtype
    or float32 (a state or accumulator kept wider), never wider than float32 or in another
    16-bit type: a backend that computes in float64 is not timing the cell's precision.
    """
    if not isinstance(outputs, Mapping):
        return f"the call returned {type(outputs).__name__}, expected a dict of output tensors"
    for name, value in outputs.items():
        if not isinstance(value, torch.Tensor):
            return f"output {name!r} is {type(value).__name__}, expected a torch.Tensor"
        if value.is_floating_point() and value.dtype not in (cell_dtype, torch.float32):
            return (f"output {name!r} is {str(value.dtype).removeprefix('torch.')}, the cell is "
                    f"{str(cell_dtype).removeprefix('torch.')}")
    return ""


def changed_inputs(inputs: Mapping[str, torch.Tensor], before: Mapping[str, torch.Tensor]) -> str:
    """The first input the call changed in place ("" when none): a backend may not write its inputs."""
    for name, tensor in inputs.items():
        old = before[name]
        same = (torch.equal(tensor.view(_BITS[tensor.element_size()]), old.view(_BITS[old.element_size()]))
                if tensor.is_floating_point() and tensor.element_size() in _BITS else torch.equal(tensor, old))
        if not same:
            return f"the call changed its input {name!r} (a backend must not write its inputs)"
    return ""


# floating tensors compare by their bits, so NaN inputs (fusiongate's proxies) equal themselves
_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


# Values compared per pass: a chunk's float64 temporaries stay small (128 MB each) however large
# the output. The large profile's outputs hold 0.5 G values; compared whole on the CPU in
# float64 they took seconds a pass, a dozen passes a check, and over ten checks a cell.
COMPARE_CHUNK = 1 << 24


def compare_tensor(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> OutputAccuracy:
    """Element-wise comparison in float64 (on the output's GPU, else the CPU); NaN/Inf must appear
    exactly where the reference has them."""
    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"output {name!r} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    device = out.device if out.device.type == "cuda" else torch.device("cpu")
    outs, refs = out.detach().to(device).reshape(-1), ref.detach().to(device).reshape(-1)
    totals = torch.zeros(4, dtype=torch.float64, device=device)  # finite, finite bad, non-finite bad, sq
    highs = torch.zeros(2, dtype=torch.float64, device=device)  # max abs error, max rel error
    for begin in range(0, outs.numel(), COMPARE_CHUNK):
        o = outs[begin:begin + COMPARE_CHUNK].to(torch.float64)
        r = refs[begin:begin + COMPARE_CHUNK].to(torch.float64)
        both_finite = torch.isfinite(o) & torch.isfinite(r)
        same_special = (torch.isnan(o) & torch.isnan(r)) | (~torch.isnan(o) & ~torch.isnan(r) & (o == r))
        nonfinite_bad = ~both_finite & ~same_special
        diff = torch.where(both_finite, (o - r).abs(), torch.zeros_like(o))
        finite_bad = both_finite & (diff > tol.atol + tol.rtol * r.abs())
        rel = torch.where(both_finite & (r != 0), diff / r.abs(), torch.zeros_like(o))
        # float64 sum of squares, so one large error among many small ones is not lost to rounding
        totals += torch.stack([both_finite.sum(), finite_bad.sum(), nonfinite_bad.sum(), diff.square().sum()]
                              ).to(torch.float64)
        highs = torch.maximum(highs, torch.stack([diff.max(), rel.max()]))
    finite_count, finite_bad_count, nonfinite_count, squares = totals.tolist()
    max_abs, max_rel = highs.tolist()
    return OutputAccuracy(
        name=name,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        mismatches=int(finite_bad_count + nonfinite_count),
        elements=outs.numel(),
        nonfinite_mismatches=int(nonfinite_count),
        rmse=math.sqrt(squares / finite_count) if finite_count else 0.0,
    )


def compare_outputs(
    outputs: Mapping[str, torch.Tensor],
    reference: Mapping[str, torch.Tensor],
    tol: Tolerance,
    stage: str,
) -> Accuracy:
    """Compare every reference output; a missing output, any non-finite mismatch or a degenerate
    output (``degenerate_output``: no answer at all, whatever the tolerance) fails."""
    missing = sorted(set(reference) - set(outputs))
    if missing:
        return Accuracy(False, tol.atol, tol.rtol, tol.max_mismatch_ratio, (), stage,
                        f"missing outputs: {', '.join(missing)}")
    results = tuple(compare_tensor(k, outputs[k], reference[k], tol) for k in reference)
    problems = {o.name: degenerate_output(outputs[o.name], reference[o.name], tol, o) for o in results}
    failures = [
        o for o in results
        if o.nonfinite_mismatches > 0 or o.mismatch_ratio > tol.max_mismatch_ratio or problems[o.name]
    ]
    for o in failures:
        problems[o.name] = problems[o.name] or precision_hint(outputs[o.name], reference[o.name])
    message = "; ".join(
        f"{o.name}: {o.mismatches}/{o.elements} elements off (max abs err {o.max_abs_error:.3g}"
        f", rmse {o.rmse:.3g}, {o.nonfinite_mismatches} non-finite)"
        + (f": {problems[o.name]}" if problems[o.name] else "")
        for o in failures
    )
    return Accuracy(not failures, tol.atol, tol.rtol, tol.max_mismatch_ratio, results, stage, message)


def precision_hint(out: torch.Tensor, ref: torch.Tensor) -> str:
    """For a float32 output that failed: whether every value is exactly a float16 (or bfloat16)
    number while the reference's are not, the mark of a cell computed in half precision and
    cast back ("" when not).

    Only words for a failure already found: the tolerance, not this, decides the status.
    """
    if out.dtype != torch.float32 or tuple(out.shape) != tuple(ref.shape):
        return ""
    keep = torch.isfinite(out.detach())
    values = out.detach()[keep]
    expected = ref.detach().to(out.device, torch.float32)[keep]
    if values.numel() < 2:
        return ""
    for half in (torch.bfloat16, torch.float16):  # a bfloat16 value is a float16 one too, mostly
        if _exactly_in(values, half) and not _exactly_in(expected, half):
            name = str(half).removeprefix("torch.")
            return (f"every value is exactly a {name} number: the float32 cell looks computed in "
                    f"{name} and cast back (a precision downgrade)")
    return ""


def _exactly_in(values: torch.Tensor, dtype: torch.dtype) -> bool:
    return torch.equal(values.to(dtype).to(values.dtype), values)


# A reference varies when its values spread over more than this many units in the last place
# of the output's dtype (at its largest value): below that an honest output may round to one value.
_CONSTANT_SPREAD_ULPS = 16


def degenerate_output(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, accuracy: OutputAccuracy) -> str:
    """Why ``out`` is no answer to ``ref`` however loose ``tol`` is ("" when it may be one).

    A workload may widen atol and rtol until all zeros, a constant or noise pass the
    element-wise bound, so these checks hold whatever the bound: NaN/Inf where the reference
    is finite; all zeros, or one constant, where the reference varies beyond rounding to the
    output's dtype; and, over the elements the tolerance accepts (the mismatches it allows
    are judged by the ratio), an error as large as the reference itself (``||out - ref|| >=
    ||ref||``: no closer to it than all zeros are). Honest output never trips them; a
    reference too small for the output's dtype (its root mean square below the smallest
    normal number, where rounding to zero is honest) is left to the tolerance. ``accuracy``
    (``compare_tensor``'s) spares the passes it already answers: a few passes over the output
    on its own device, against the dozen of the element-wise comparison.
    """
    if not (ref.is_floating_point() and out.is_floating_point()) or tuple(out.shape) != tuple(ref.shape):
        return ""
    o, r = out.detach(), ref.detach().to(out.device)
    if accuracy.nonfinite_mismatches:
        lost = int((torch.isfinite(r) & ~torch.isfinite(o)).sum())
        if lost:
            return (f"{lost} NaN/Inf value(s) where the reference is finite (an overflow, a division "
                    f"by zero, or an output never written)")
    finite = torch.isfinite(r)
    if not bool(finite.all()):
        o, r = o[finite], r[finite]
    info = torch.finfo(out.dtype)
    ref_norm = float(torch.linalg.vector_norm(r, dtype=torch.float64)) if r.numel() else 0.0
    if ref_norm <= info.tiny * math.sqrt(max(r.numel(), 1)):
        return ""
    low, high = (float(v) for v in torch.aminmax(o))
    problem = _constant_problem(low, r, info) if low == high else ""
    if problem:
        return problem
    error = o.to(torch.float64) - r
    if accuracy.mismatches:  # the allowed mismatches are the ratio's to judge
        accepted = error.abs() <= tol.atol + tol.rtol * r.abs()
        error, ref_norm = error[accepted], float(torch.linalg.vector_norm(r[accepted], dtype=torch.float64))
    error_norm = float(torch.linalg.vector_norm(error))
    if ref_norm > 0.0 and error_norm >= ref_norm:
        return (f"no closer to the reference than all zeros are (error norm {error_norm:.3g} >= reference "
                f"norm {ref_norm:.3g} over the elements within tolerance): the values are wrong, not "
                f"merely imprecise, and only the loose tolerance let them pass")
    return ""


def _constant_problem(value: float, r: torch.Tensor, info: torch.finfo) -> str:
    """An output of one value everywhere, for a reference that is not all zeros: a problem when
    it is zero, or when the (finite) reference is not one value beyond rounding."""
    if value == 0.0:
        return "all zeros where the reference is not (an output left unwritten, or work skipped)"
    r_low, r_high = (float(v) for v in torch.aminmax(r))
    if r.numel() < 2 or r_high - r_low <= _CONSTANT_SPREAD_ULPS * info.eps * max(abs(r_low), abs(r_high)):
        return ""
    return (f"one constant value {value:.6g} where the reference varies from {r_low:.6g} to {r_high:.6g} "
            f"(a placeholder, not a computed answer)")
