"""The strict-mode switch, one per thread.

`strict(False)` turns strict mode off at once, so it works both as a plain
call (a setter) and as a context manager that restores the previous setting
on exit, the pattern of `torch.set_grad_enabled`. Like torch's grad mode (and
the torch modes the guard pushes) the setting is thread-local: a thread that
turns strict mode off never turns it off for another thread stepping its own
optimizer, and every thread starts strict.
"""

from __future__ import annotations

import threading

__all__ = ["strict", "is_strict"]


class _StrictSetting(threading.local):
    # A class attribute: each thread reads True until it sets its own value.
    enabled = True


_setting = _StrictSetting()


def is_strict() -> bool:
    """Whether strict mode is on in this thread (it is by default)."""
    return _setting.enabled


class strict:  # noqa: N801 - lower case like torch.set_grad_enabled / torch.no_grad
    """Turn strict mode on or off in the calling thread.

    `cstorch.strict(False)` turns it off for the rest of the thread;
    `with cstorch.strict(False): ...` turns it off for the block only.
    Strict mode covers optimizer steps, scheduler closed forms and `trace`d
    functions, and also decides whether an optimizer's lr becomes a 0-dim
    tensor when its step runs.
    """

    def __init__(self, enabled: bool = True) -> None:
        self._previous = _setting.enabled
        self.enabled = bool(enabled)
        _setting.enabled = self.enabled

    def __enter__(self) -> strict:
        return self

    def __exit__(self, *exc_info: object) -> None:
        _setting.enabled = self._previous

    def __repr__(self) -> str:
        return f"cstorch.strict({self.enabled})"
