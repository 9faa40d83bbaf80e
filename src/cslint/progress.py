"""A progress line on a terminal for long runs: files done of the total, time so far.

Shown only on an interactive stderr, only once a run has taken more than a second (a
pre-commit hook over a few files prints nothing), at most ten times a second, and
erased when the run ends, so what follows starts on a clean line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_DELAY_SECONDS = 1.0
_INTERVAL_SECONDS = 0.1


class Progress:
    """Call it with (what is being done, files done, files in all)."""

    def __init__(self, stream: TextIO, delay: float | None = None):
        self.stream = stream
        self.started = time.monotonic()
        self.delay = _DELAY_SECONDS if delay is None else delay
        self.last_shown = 0.0
        self.last_doing = ""
        self.width = 0

    def __call__(self, doing: str, done: int, total: int) -> None:
        now = time.monotonic()
        elapsed = now - self.started
        if elapsed < self.delay or (now - self.last_shown < _INTERVAL_SECONDS
                                    and done < total and doing == self.last_doing):
            return
        self.last_shown, self.last_doing = now, doing
        line = f"cslint: {doing} {done}/{total} files, {elapsed:.1f} s"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def terminal_progress(quiet: bool) -> Progress | None:
    """A progress line on stderr when it is a terminal and `quiet` is not asked for."""
    stream = sys.stderr
    if quiet or not hasattr(stream, "isatty") or not stream.isatty():
        return None
    return Progress(stream)
