"""The 16-bit float type of mixed precision, and `autocast`.

On the system "cbfloat16" is a Cerebras 16-bit format that torch does not
have; off the system the nearest torch type, bfloat16, stands in for it (the
same exponent range; the mantissa differs, so losses may differ slightly).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

from cslint.cstorch.local_backend import require_backend

__all__ = ["autocast", "get_half_dtype", "get_half_dtype_str", "mixed_precision", "set_half_dtype"]

_HALF_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "cbfloat16": torch.bfloat16}


class _MixedPrecisionSetting:
    half_dtype_name = "float16"
    enabled = False
    warned_about_cbfloat16 = False


_setting = _MixedPrecisionSetting()


def set_half_dtype(value) -> torch.dtype:
    """Use `value` ("float16", "bfloat16", "cbfloat16" or the torch type) as
    the 16-bit float type, which turns mixed precision on; returns the torch
    type to build the model with."""
    if value is torch.float16 or value is torch.bfloat16:
        name = str(value).replace("torch.", "")
    elif isinstance(value, str) and value in _HALF_DTYPES:
        name = value
    else:
        raise ValueError(
            f"invalid half dtype {value!r}: expected \"float16\", \"bfloat16\", "
            "\"cbfloat16\", torch.float16 or torch.bfloat16"
        )
    if name == "cbfloat16" and not _setting.warned_about_cbfloat16:
        _setting.warned_about_cbfloat16 = True
        warnings.warn(
            "cbfloat16 exists on the Cerebras system only: the local reference runs "
            "it as torch.bfloat16",
            stacklevel=2,
        )
    _setting.half_dtype_name = name
    _setting.enabled = True
    return _HALF_DTYPES[name]


def get_half_dtype() -> torch.dtype:
    """The torch type of the 16-bit floats (bfloat16 for "cbfloat16")."""
    return _HALF_DTYPES[_setting.half_dtype_name]


def get_half_dtype_str() -> str:
    """The name given to `set_half_dtype` ("float16" until it is called)."""
    return _setting.half_dtype_name


def mixed_precision() -> bool:
    """Whether `set_half_dtype` turned mixed precision on."""
    return _setting.enabled


@contextlib.contextmanager
def autocast(dtype: torch.dtype | None = None) -> Iterator[object]:
    """`torch.autocast` on the backend's device with the half dtype (or `dtype`).

    As in production a CPU backend autocasts to bfloat16 only.
    """
    current = require_backend()
    if dtype is None:
        dtype = get_half_dtype()
    if current.is_cpu and dtype != torch.bfloat16:
        raise ValueError(
            f"mixed precision on the CPU runs in bfloat16 only, not {dtype}: call "
            "cstorch.amp.set_half_dtype(torch.bfloat16) or pass dtype=torch.bfloat16 "
            "to cstorch.amp.autocast"
        )
    with torch.autocast(current.torch_device.type, dtype=dtype) as context:
        yield context
