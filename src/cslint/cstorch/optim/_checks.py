"""Argument checks shared by the optimizers' constructors: one wording for each."""

from __future__ import annotations

__all__ = ["betas_below_one", "non_negative"]


def non_negative(**values) -> None:
    """ValueError naming the first of `values` (by argument name) that is below 0."""
    for name, value in values.items():
        if value < 0.0:
            raise ValueError(f"Invalid {name}: {value} (must be >= 0)")


def betas_below_one(betas) -> None:
    """ValueError naming the first beta outside [0, 1)."""
    for index, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {beta} (must be in [0, 1))")
