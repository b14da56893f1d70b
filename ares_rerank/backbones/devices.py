"""Where a backbone runs: the torch device and dtype a user's ``device=`` / ``dtype=`` names.

A leaf module: it imports nothing of the package (:mod:`~ares_rerank.backbones.hub` and
:mod:`~ares_rerank.backbones.loading` re-export both functions); torch is imported inside them.
"""

from __future__ import annotations

from typing import Any


__all__ = ["DTYPES", "select_device", "select_dtype"]

# The dtype names select_dtype takes (besides a torch.dtype and the aliases fp32 / bf16 / fp16), as the CLI offers them.
DTYPES = ("auto", "float32", "bfloat16", "float16")


def select_device(device: Any = "auto") -> Any:
    """``"auto"`` -> CUDA if available, else Apple MPS, else CPU; otherwise ``torch.device(device)``."""
    import torch

    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a torch device: use 'auto', 'cpu', 'cuda' or 'cuda:0'.") from err
    if resolved.type == "cuda" and torch.cuda.device_count() <= (resolved.index or 0):
        raise ValueError(f"device={device!r}: this machine has {torch.cuda.device_count()} usable CUDA GPU(s) (a CUDA "
                         "build of torch and a visible GPU are needed): use 'auto' or 'cpu', or a GPU index it has.")
    if resolved.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"device={device!r}: Apple MPS is not available here: use 'auto' or 'cpu'.")
    return resolved


def select_dtype(dtype: Any, device: Any) -> Any:
    """``"auto"`` -> bfloat16 on a CUDA device that supports it, else float32.

    On a CPU, ``"auto"`` stays float32: bfloat16 is fast only where the CPU computes it natively (``avx512_bf16`` or
    ``amx_bf16`` in /proc/cpuinfo; about 1.7x the steps per second for the default head there, docs/SCALING.md) and
    slower where it is emulated. Pass ``dtype="bfloat16"`` to take it.
    """
    import torch

    if dtype is None or dtype == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    named = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if dtype not in named:
        raise ValueError(f"dtype={dtype!r} is not supported: use one of {list(DTYPES)} or a torch.dtype.")
    return named[dtype]
