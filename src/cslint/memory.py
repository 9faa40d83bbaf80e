"""Giving freed memory back to the system.

CPython returns what a large run frees (file contents received from worker processes,
syntax trees let go) to the C allocator, which keeps most of it mapped: holes between
the objects that stay. glibc's `malloc_trim` hands those pages back, so the resident
size follows what the run holds, not what it once held. Elsewhere this does nothing.
"""

from __future__ import annotations

from typing import Callable

_trim: Callable[[int], int] | None = None
_looked_up = False


def give_back_freed_memory() -> None:
    """Return the C heap's free pages to the system (glibc only; cheap: a walk of the
    heap's free lists)."""
    global _trim, _looked_up
    if not _looked_up:
        _looked_up = True
        try:
            import ctypes

            _trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError, ImportError):  # not glibc (macOS, Windows, musl)
            _trim = None
    if _trim is not None:
        _trim(0)
