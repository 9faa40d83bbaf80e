"""How much the rules cost over parsing: all rules in one process vs `ast.parse` alone.

    pip download --no-deps pytorch-optimizer -d /tmp/po && unzip -o /tmp/po/*.whl -d /tmp/po
    python benchmarks/lint_speed.py /tmp/po/pytorch_optimizer
    python benchmarks/lint_speed.py "$(python -c 'import torch, os; print(os.path.dirname(torch.__file__))')" \
        --libcst-sample 300

Prints, for the folder: the seconds to read and `ast.parse` every file, the seconds of a
whole `cslint check` of it in this process (reading, parsing, indexing, every rule), the
ratio of the two (target: at most 3), and the seconds `libcst.parse_module` takes on the
same files (on a sample, scaled up, when --libcst-sample is given). Median of --repeat runs.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
import warnings
from pathlib import Path

from cslint.config import Config
from cslint.discovery import ExcludeMatcher, walk_python_files
from cslint.engine import lint


def parse_all(files: list[Path]) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in files:
            try:
                ast.parse(path.read_bytes())
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
    return time.perf_counter() - start


def lint_all(folder: Path) -> tuple[float, int]:
    start = time.perf_counter()
    result = lint([str(folder)], Config(select=("ALL",)), project_root=folder)
    return time.perf_counter() - start, len(result.findings)


def libcst_all(files: list[Path]) -> float:
    import libcst

    start = time.perf_counter()
    for path in files:
        try:
            libcst.parse_module(path.read_bytes())
        except Exception:  # libcst rejects some valid files; they still cost their time
            pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--libcst-sample", type=int, default=0,
                        help="parse only every N-th file with libcst and scale up (0: all)")
    args = parser.parse_args()
    files = walk_python_files(args.folder, ExcludeMatcher((), None))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    parse_times, lint_times = [], []
    findings = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    for _ in range(args.repeat):
        parse_times.append(parse_all(files))
        seconds, findings = lint_all(args.folder)
        lint_times.append(seconds)
    parse_s, lint_s = statistics.median(parse_times), statistics.median(lint_times)
    sample = files[:: args.libcst_sample] if args.libcst_sample else files
    libcst_s = libcst_all(sample) * (len(files) / max(len(sample), 1))
    print(f"folder: {args.folder} ({len(files)} files, {lines} lines)")
    print(f"ast.parse alone:        {parse_s:8.2f} s")
    print(f"cslint, all rules:      {lint_s:8.2f} s   ({findings} findings)")
    print(f"ratio cslint/ast.parse: {lint_s / parse_s:8.2f}   (target <= 3)")
    note = f" (every {args.libcst_sample}th file, scaled)" if args.libcst_sample else ""
    print(f"libcst.parse_module:    {libcst_s:8.2f} s{note}")
    print(f"ratio cslint/libcst:    {lint_s / libcst_s:8.2f}")


if __name__ == "__main__":
    main()
