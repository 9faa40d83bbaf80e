"""Sharing per-file work among forked worker processes.

The project index and the analyses' facts are large webs of objects, built once: a
worker forked after they are built inherits them as they are (copy-on-write) and sends
back only its files' findings, which are small plain data. Where processes cannot be
forked (Windows, macOS's default), the work runs in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Callable, TypeVar

Result = TypeVar("Result")

# The work of the pool being run, for the forked workers to find (a closure cannot be
# sent to them; a fork inherits it).
_work: Callable[[int], object] | None = None


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def _run_slice(indices: list[int]) -> list[tuple[int, object]]:
    assert _work is not None
    return [(index, _work(index)) for index in indices]


def map_in_workers(work: Callable[[int], Result], count: int, jobs: int,
                   report: Callable[[int], None]) -> list[Result]:
    """[work(0), ..., work(count - 1)], computed by `jobs` forked processes, in order;
    `report` is told how many are done."""
    global _work
    if not can_fork():
        results = []
        for index in range(count):
            report(index)
            results.append(work(index))
        return results
    # Interleaved slices: neighbouring files (one package) cost alike, so each worker
    # gets a share of every part of the tree. Several slices a worker smooth the load.
    pieces = jobs * 4
    slices = [list(range(start, count, pieces)) for start in range(pieces)]
    results: list = [None] * count
    _work = work
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            done = 0
            for part in pool.imap_unordered(_run_slice, [s for s in slices if s]):
                for index, result in part:
                    results[index] = result
                done += len(part)
                report(done)
    finally:
        _work = None
    return results


def run_beside(work: Callable[[], Result]) -> Callable[[], Result]:
    """Start `work()` in a process forked from this one, which goes on meanwhile; the
    function returned waits for its result. Where processes cannot be forked, or the
    child fails (raises, is killed), the work runs here when the result is asked for."""
    if not can_fork():
        return work
    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)

    def child() -> None:
        try:
            outcome = (True, work())
        except BaseException:  # told as a failure: the work is done again here
            outcome = (False, None)
        try:
            sending.send(outcome)
        except BaseException:  # not sendable, or the parent stopped: it runs the work
            pass
        finally:
            sending.close()

    process = context.Process(target=child, daemon=True)
    process.start()
    sending.close()

    def result() -> Result:
        try:
            done, value = receiving.recv()
        except (EOFError, OSError):  # it died before sending anything
            done, value = False, None
        finally:
            receiving.close()
            process.join()
        return value if done else work()

    return result
