"""Room for deep syntax trees: linting runs in a thread with a large stack and a raised
recursion limit.

The analyses walk syntax trees recursively, two or three Python calls per level, and
CPython compiles expressions nested some 3,000 levels deep (a sum of 2,990 terms, a chain
of 1,490 method calls), while its default recursion limit of 1,000 stopped the walks at a
few hundred (a sum of 487 terms was "too deeply nested to analyse"). Measured on CPython
3.11: linting the deepest sums, calls, attribute chains and unary operators CPython
compiles needs a limit of about 6,000. The limit here is 50,000: deeper trees (which
CPython does not compile) are still reported as too deep (`cslint.source.TOO_DEEP`).

A raised limit is safe only with the stack to hold it, else the process dies of a
segmentation fault: a level of Python recursion that passes through C costs 0.6 to 0.8
KiB of C stack, 5 KiB through `sorted(key=...)`, the worst measured; 50,000 levels of that
are 250 MiB, and the thread has 512 MiB (reserved, not used: a walk touches only the
pages it reaches). The main thread's stack is 8 MiB, too small to raise its limit.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Callable, TypeVar

STACK_SIZE = 512 * 1024 * 1024
RECURSION_LIMIT = 50_000

T = TypeVar("T")

_in_deep_thread = threading.local()
_lock = threading.Lock()  # over the process-wide stack size and recursion limit
_deep_runs = 0  # runs holding the raised limit (threads of one process may overlap)
_limit_before = 0


def with_deep_stack(function: Callable[..., T]) -> Callable[..., T]:
    """`function` run in a thread with a STACK_SIZE stack, under RECURSION_LIMIT; the
    caller waits for it and gets its result or its exception. A call made from such a
    thread runs in it; where no such thread can start, the call runs as it is."""

    @functools.wraps(function)
    def run_deep(*args, **kwargs):
        if getattr(_in_deep_thread, "active", False):
            return function(*args, **kwargs)
        outcome: list = []

        def work() -> None:
            _in_deep_thread.active = True
            try:
                outcome.append((True, function(*args, **kwargs)))
            except BaseException as error:  # raised again in the caller's thread
                outcome.append((False, error))

        # A daemon: Ctrl-C in the waiting thread ends the process without waiting for it.
        worker = threading.Thread(target=work, name="cslint-deep-stack", daemon=True)
        _raise_limit()
        try:
            started = _start(worker)
            if started:
                worker.join()
        finally:
            _restore_limit()
        if not started:
            return function(*args, **kwargs)
        succeeded, value = outcome[0]
        if succeeded:
            return value
        raise value

    return run_deep


def _start(worker: threading.Thread) -> bool:
    """Start `worker` with a STACK_SIZE stack (the size is process-wide: set for it
    alone); False where the platform refuses the size or the memory."""
    with _lock:
        try:
            previous = threading.stack_size(STACK_SIZE)
        except (ValueError, RuntimeError):
            return False
        try:
            worker.start()
        except RuntimeError:  # "can't start new thread"
            return False
        finally:
            threading.stack_size(previous)
    return True


def _raise_limit() -> None:
    global _deep_runs, _limit_before
    with _lock:
        if _deep_runs == 0:
            _limit_before = sys.getrecursionlimit()
            sys.setrecursionlimit(max(RECURSION_LIMIT, _limit_before))
        _deep_runs += 1


def _restore_limit() -> None:
    global _deep_runs
    with _lock:
        _deep_runs -= 1
        if _deep_runs == 0:
            sys.setrecursionlimit(_limit_before)
