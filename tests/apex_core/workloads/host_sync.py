"""A torch function mode that fails on every call which would synchronize the host on a GPU."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

# torch calls that read device data on the host, or give data-dependent shapes
SYNCING = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "argwhere"}
SYNCING |= {"unique", "unique_consecutive", "masked_select", "numpy", "cpu"}


class ForbidHostSync(TorchFunctionMode):
    """Fails on every torch call that reads device data on the host or has a data-dependent shape."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in SYNCING:
            raise AssertionError(f"host sync or data-dependent shape: {name}")
        if name in ("__getitem__", "__setitem__"):
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
                raise AssertionError(f"boolean-mask {name}: data-dependent shape")
        return func(*args, **(kwargs or {}))
