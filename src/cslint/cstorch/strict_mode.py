"""The process-wide strict-mode switch.

`strict(False)` turns strict mode off at once, so it works both as a plain
call (a global setter) and as a context manager that restores the previous
setting on exit, the pattern of `torch.set_grad_enabled`.
"""

from __future__ import annotations

__all__ = ["strict", "is_strict"]

# One flag for the process: strictness is a property of the test run, not of a
# thread. Read on every guarded event, so kept as a bare module global.
_enabled = True


def is_strict() -> bool:
    """Whether strict mode is on (it is by default)."""
    return _enabled


class strict:  # noqa: N801 - lower case like torch.set_grad_enabled / torch.no_grad
    """Turn strict mode on or off.

    `cstorch.strict(False)` turns it off for the rest of the process;
    `with cstorch.strict(False): ...` turns it off for the block only.
    Strict mode covers optimizer steps, scheduler closed forms and `trace`d
    functions, and also decides whether an optimizer's lr becomes a 0-dim
    tensor at construction.
    """

    def __init__(self, enabled: bool = True) -> None:
        global _enabled
        self._previous = _enabled
        self.enabled = bool(enabled)
        _enabled = self.enabled

    def __enter__(self) -> strict:
        return self

    def __exit__(self, *exc_info: object) -> None:
        global _enabled
        _enabled = self._previous

    def __repr__(self) -> str:
        return f"cstorch.strict({self.enabled})"
