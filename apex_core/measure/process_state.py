"""The process state a backend can change behind a cell's back, captured before and restored after.

Cells share a worker process (and, inline, the caller's). A backend that changes torch's
default dtype, its thread count, deterministic mode or grad mode, the random generator,
the working directory, the environment or the address-space limit would change every
later cell. ``execute_cell`` captures this state first and restores it afterwards; what
was changed is named in the cell's metadata, and what could not be put back (a lowered
hard limit) makes the worker hand over to a fresh one.
"""

from __future__ import annotations

import os
import resource
from typing import Any

import attrs
import torch


@attrs.frozen
class ProcessState:
    default_dtype: torch.dtype
    threads: int
    deterministic: bool
    deterministic_warn_only: bool
    grad_enabled: bool
    cpu_rng: torch.Tensor = attrs.field(eq=False)
    cwd: str
    environ: dict[str, str]
    rlimit_as: tuple[int, int]


def capture() -> ProcessState:
    return ProcessState(
        default_dtype=torch.get_default_dtype(),
        threads=torch.get_num_threads(),
        deterministic=torch.are_deterministic_algorithms_enabled(),
        deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
        grad_enabled=torch.is_grad_enabled(),
        cpu_rng=torch.get_rng_state(),
        cwd=os.getcwd(),
        environ=dict(os.environ),
        rlimit_as=resource.getrlimit(resource.RLIMIT_AS),
    )


def _restore_environ(saved: dict[str, str]) -> bool:
    if dict(os.environ) == saved:
        return False
    os.environ.clear()
    os.environ.update(saved)
    return True


def restore(saved: ProcessState) -> tuple[list[str], list[str]]:
    """Put ``saved`` back; returns (what had changed and was restored, what could not be restored)."""
    now = capture()
    changed: list[str] = []
    lost: list[str] = []
    if now.default_dtype != saved.default_dtype:
        torch.set_default_dtype(saved.default_dtype)
        changed.append("torch default dtype")
    if now.threads != saved.threads:
        torch.set_num_threads(saved.threads)
        changed.append("torch thread count")
    if (now.deterministic, now.deterministic_warn_only) != (saved.deterministic, saved.deterministic_warn_only):
        torch.use_deterministic_algorithms(saved.deterministic, warn_only=saved.deterministic_warn_only)
        changed.append("torch deterministic mode")
    if now.grad_enabled != saved.grad_enabled:
        torch.set_grad_enabled(saved.grad_enabled)
        changed.append("torch grad mode")
    if not torch.equal(now.cpu_rng, saved.cpu_rng):
        torch.set_rng_state(saved.cpu_rng)  # the cell seeds its own draws; the caller's stream goes on
    if now.cwd != saved.cwd:
        _restore_cwd(saved.cwd, changed, lost)
    if _restore_environ(saved.environ):
        changed.append("environment variables")
    if now.rlimit_as != saved.rlimit_as:
        try:
            resource.setrlimit(resource.RLIMIT_AS, saved.rlimit_as)
            changed.append("address-space limit")
        except (ValueError, OSError):  # a lowered hard limit cannot be raised again
            lost.append("address-space limit")
    return changed, lost


def _restore_cwd(path: str, changed: list[str], lost: list[str]) -> None:
    try:
        os.chdir(path)
        changed.append("working directory")
    except OSError:
        lost.append("working directory")


def describe(changed: list[str], lost: list[str]) -> dict[str, Any]:
    """The cell metadata that records a backend's changes to the process (empty when none)."""
    out: dict[str, Any] = {}
    if changed:
        out["process_state_restored"] = changed
    if lost:
        out["process_state_unrestorable"] = lost
    return out
