"""`cstorch.save` and `cstorch.load`: checkpoints of state dicts.

A checkpoint holds tensors, numbers, strings, None, and lists, tuples and
dicts of them: a model's, an optimizer's, a scheduler's and a GradScaler's
state dict. `save` refuses anything else before writing, so that every file
it writes loads with `torch.load(path, weights_only=True)`, which runs no
code from the file. The file is written next to its final name and renamed
into place, so a crash never leaves half a checkpoint under that name.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import torch

__all__ = ["load", "save"]

_PLAIN_VALUES = (str, int, float, bool, complex, type(None), torch.dtype, torch.device, torch.Size)


def _check_storable(value, where: str) -> None:
    if isinstance(value, (torch.Tensor, *_PLAIN_VALUES)):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool, type(None))):
                raise TypeError(f"{where} has a key of type {type(key).__name__}: keys must be strings or numbers")
            _check_storable(item, f"{where}[{key!r}]")
        return
    if isinstance(value, (list, tuple)):
        for position, item in enumerate(value):
            _check_storable(item, f"{where}[{position}]")
        return
    raise TypeError(
        f"{where} is a {type(value).__name__}: a checkpoint holds tensors, numbers, "
        "strings, None, and lists, tuples and dicts of them (save its state_dict())"
    )


def save(state_dict, checkpoint_file) -> None:
    """Write `state_dict` to `checkpoint_file`."""
    _check_storable(state_dict, "the saved object")
    target = Path(checkpoint_file)
    partial = target.with_name(f".{target.name}.partial")
    try:
        torch.save(state_dict, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def load(checkpoint_file, map_location=None):
    """Read a checkpoint `save` wrote; tensors go to `map_location` (default: where they were saved)."""
    path = Path(checkpoint_file)
    if not path.is_file():
        raise FileNotFoundError(f"cstorch.load: no checkpoint file at {path}")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, zipfile.BadZipFile, RuntimeError, EOFError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(
            f"cstorch.load: {path} is not a readable checkpoint ({first_line})"
        ) from None
