"""`cstorch.amp`: mixed precision (half dtype, autocast) and loss scaling."""

from cslint.cstorch.amp.grad_scaler import GradScaler, optimizer_step
from cslint.cstorch.amp.half_dtype import (
    autocast,
    get_half_dtype,
    get_half_dtype_str,
    mixed_precision,
    set_half_dtype,
)

__all__ = [
    "GradScaler",
    "autocast",
    "get_half_dtype",
    "get_half_dtype_str",
    "mixed_precision",
    "optimizer_step",
    "set_half_dtype",
]
