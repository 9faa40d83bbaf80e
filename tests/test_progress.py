"""The progress line: on a terminal only, after a delay, erased at the end."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

from cslint.progress import Progress, terminal_progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_counts_files_and_is_erased_at_the_end():
    stream = Terminal()
    progress = Progress(stream, delay=0)
    progress("reading", 3, 10)
    progress("checking", 10, 10)
    progress.close()
    text = stream.getvalue()
    assert "cslint: reading 3/10 files" in text and "cslint: checking 10/10 files" in text
    assert text.endswith("\r" + " " * len("cslint: checking 10/10 files, 0.0 s") + "\r")


def test_a_short_run_shows_nothing():
    stream = Terminal()
    progress = Progress(stream)  # the default delay: a second
    progress("reading", 1, 2)
    progress.close()
    assert stream.getvalue() == ""


def test_no_line_in_pipes_or_when_quiet(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert terminal_progress(quiet=False) is None
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert terminal_progress(quiet=True) is None
    assert terminal_progress(quiet=False) is not None


def test_a_run_on_a_terminal_prints_the_line(tmp_path):
    """A real pseudo-terminal as stderr; a run long enough to show the line (the delay
    shortened through the module's constant, read when the progress starts)."""
    (tmp_path / "a.py").write_text("import torch\n")
    probe = ("import cslint.progress as p; p._DELAY_SECONDS = 0.0; "
             "from cslint.cli import main; main(['check', '--no-cache', 'a.py'])")
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", probe], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    process.communicate(timeout=60)
    seen = b""
    try:
        while chunk := os.read(leader, 4096):
            seen += chunk
    except OSError:  # the terminal closed with the process
        pass
    os.close(leader)
    assert b"cslint: reading 0/1 files" in seen
    assert seen.endswith(b"\r")
