"""The GPUs of this host, as ``--devices`` names them, and the environment that pins a worker to one.

Cards are listed in PCI bus order (the order ``nvidia-smi`` shows), through NVML when
nvidia-ml-py is installed, else ``nvidia-smi``, else torch (with ``CUDA_DEVICE_ORDER``
set to ``PCI_BUS_ID`` so its indices agree). A worker is pinned to its card by the card's
UUID in ``CUDA_VISIBLE_DEVICES``, set before torch initialises CUDA in that worker, so it
sees exactly one device, ``cuda:0``.

Tests on machines without GPUs set ``APEX_BENCH_FAKE_GPUS`` (``name|uuid;name|uuid``):
those cards replace the real list, and ``--devices`` may then shard CPU cells over them.
It exists for tests only; no measurement should be taken with it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from apex_core.errors import UsageError
from apex_core.measure.environment import command_output
from apex_core.measure.telemetry import start_nvml
from apex_core.results import DeviceInfo

FAKE_GPUS_ENV = "APEX_BENCH_FAKE_GPUS"


def fake_gpus() -> tuple[DeviceInfo, ...] | None:
    """The cards ``APEX_BENCH_FAKE_GPUS`` declares (tests only); None when it is unset."""
    text = os.environ.get(FAKE_GPUS_ENV)
    if text is None:
        return None
    items = [part.partition("|") for part in text.split(";") if part.strip()]
    return tuple(DeviceInfo(index, name.strip() or "fake GPU", uuid.strip() or f"GPU-fake-{index}")
                 for index, (name, _, uuid) in enumerate(items))


def _nvml_gpus() -> tuple[DeviceInfo, ...] | None:
    nvml, _why = start_nvml()
    if nvml is None:
        return None
    try:
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(index) for index in range(nvml.nvmlDeviceGetCount())]
            return tuple(DeviceInfo(index, _text(nvml.nvmlDeviceGetName(h)), _text(nvml.nvmlDeviceGetUUID(h)))
                         for index, h in enumerate(handles))
        finally:
            nvml.nvmlShutdown()
    except Exception:  # NVML present but unusable (a container without the library)
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _smi_gpus() -> tuple[DeviceInfo, ...] | None:
    out = command_output(["nvidia-smi", "--query-gpu=index,name,uuid", "--format=csv,noheader"], timeout_s=30)
    if out is None:
        return None
    rows = [[field.strip() for field in line.split(",")] for line in out.splitlines()]
    return tuple(DeviceInfo(int(row[0]), row[1], row[2]) for row in rows if len(row) == 3 and row[0].isdigit())


def _torch_gpus() -> tuple[DeviceInfo, ...]:
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # indices as nvidia-smi counts them
    if not torch.cuda.is_available():
        return ()
    cards = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        uuid = str(getattr(props, "uuid", "") or "")
        cards.append(DeviceInfo(index, props.name, f"GPU-{uuid}" if uuid and not uuid.startswith("GPU-")
                                else uuid))
    return tuple(cards)


def host_gpus() -> tuple[DeviceInfo, ...]:
    """Every GPU of this host in PCI bus order (the fake list under ``APEX_BENCH_FAKE_GPUS``)."""
    fake = fake_gpus()
    if fake is not None:
        return fake
    for lister in (_nvml_gpus, _smi_gpus):
        cards = lister()
        if cards:
            return cards
    return _torch_gpus()


def parse_devices(text: str) -> tuple[int, ...] | None:
    """``all`` (None) or a comma list of distinct card indices; anything else is a UsageError."""
    text = text.strip()
    if text == "all":
        return None
    items = [item.strip() for item in text.split(",")]
    if not text or not all(item.isdigit() for item in items):
        raise UsageError(f"--devices {text!r}: expected 'all' or a comma list of GPU indices such as 0,1")
    indices = tuple(int(item) for item in items)
    if len(set(indices)) != len(indices):
        raise UsageError(f"--devices {text!r}: a GPU is named twice (one worker per GPU)")
    return indices


def select_devices(wanted: Sequence[int] | None, cards: Sequence[DeviceInfo]) -> tuple[DeviceInfo, ...]:
    """The cards ``--devices`` names, checked: each must exist, and all must be one model.

    Cells of different GPU models are not comparable (the report and the gate key every
    number to one model), so a run over mixed models is refused rather than averaged.
    """
    if not cards:
        raise UsageError("--devices: no GPU found on this host (nvidia-smi, NVML and torch see none)")
    by_index = {card.index: card for card in cards}
    valid = ", ".join(str(card.index) for card in cards)
    if wanted is None:
        chosen = tuple(cards)
    else:
        missing = [index for index in wanted if index not in by_index]
        if missing:
            raise UsageError(f"--devices: no GPU {missing[0]} on this host; valid: all, {valid}")
        chosen = tuple(by_index[index] for index in wanted)
    models = sorted({card.name for card in chosen})
    if len(models) > 1:
        listing = "; ".join(f"{card.index}: {card.name}" for card in chosen)
        raise UsageError(f"--devices: the cards are of different models ({listing}); a report compares "
                         "cells of one model: name the cards of one model")
    return chosen


def pinning_env(card: DeviceInfo) -> dict[str, str]:
    """The environment that makes ``card`` the only device a fresh worker's CUDA sees."""
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": card.uuid or str(card.index)}
