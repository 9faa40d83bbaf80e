"""How much the rules cost over parsing: all rules in one process vs `ast.parse` alone.

    pip download --no-deps pytorch-optimizer -d /tmp/po && unzip -o /tmp/po/*.whl -d /tmp/po
    python benchmarks/lint_speed.py /tmp/po/pytorch_optimizer
    python benchmarks/lint_speed.py "$(python -c 'import torch, os; print(os.path.dirname(torch.__file__))')" \
        --libcst-sample 20

Each measurement runs in a fresh Python process (a cold heap, as a real run has) and
times only the work, not the interpreter's start or the imports: reading and
`ast.parse`-ing every file; a whole `cslint check` of the folder with every rule
(reading, parsing, indexing, all analyses); and `libcst.parse_module` on the same files
(on every N-th file, scaled up, with --libcst-sample N). Prints the medians of --repeat
runs and the ratios (target for cslint / ast.parse: at most 3), and the median of the
per-pair ratios (each lint run against the parse run just before it), which a machine
whose speed drifts during the runs disturbs less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

# Each snippet prints the seconds its work took; FILES/FOLDER/SAMPLE are filled in.
PARSE = """
import ast, sys, time, warnings
from cslint.discovery import ExcludeMatcher, walk_python_files
files = walk_python_files(FOLDER, ExcludeMatcher((), None))
warnings.simplefilter("ignore")
start = time.perf_counter()
for path in files:
    try:
        ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
print(time.perf_counter() - start)
"""
LINT = """
import time
from cslint.config import Config
from cslint.engine import lint
start = time.perf_counter()
result = lint([str(FOLDER)], Config(select=("ALL",)), project_root=FOLDER)
print(time.perf_counter() - start, len(result.findings))
"""
LIBCST = """
import time, libcst
from cslint.discovery import ExcludeMatcher, walk_python_files
files = walk_python_files(FOLDER, ExcludeMatcher((), None))[::SAMPLE]
start = time.perf_counter()
for path in files:
    try:
        libcst.parse_module(path.read_bytes())
    except Exception:  # libcst rejects some valid files; they still cost their time
        pass
print(time.perf_counter() - start)
"""


def measure(snippet: str, folder: Path, sample: int = 1) -> list[str]:
    code = f"from pathlib import Path\nFOLDER = Path({str(folder)!r})\nSAMPLE = {sample}\n"
    # As on a user's machine, modules load from cached bytecode (some sandboxes turn the
    # cache off, which would bill cslint for compiling itself).
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    output = subprocess.run([sys.executable, "-c", code + snippet], capture_output=True,
                            text=True, check=True, env=environment).stdout.split()
    return output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--libcst-sample", type=int, default=1,
                        help="parse only every N-th file with libcst and scale up (1: all)")
    args = parser.parse_args()
    folder = args.folder.resolve()
    from cslint.discovery import ExcludeMatcher, walk_python_files

    files = walk_python_files(folder, ExcludeMatcher((), None))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    parse_times, lint_times, findings = [], [], "0"
    measure(LINT, folder)  # warm-up: writes the bytecode caches
    for _ in range(args.repeat):  # alternate, so a drift in the machine's speed hits both
        parse_times.append(float(measure(PARSE, folder)[0]))
        seconds, findings = measure(LINT, folder)
        lint_times.append(float(seconds))
    parse_s, lint_s = statistics.median(parse_times), statistics.median(lint_times)
    sampled = len(files[:: args.libcst_sample])
    libcst_s = float(measure(LIBCST, folder, args.libcst_sample)[0]) * len(files) / max(sampled, 1)
    print(f"folder: {folder} ({len(files)} files, {lines} lines), medians of {args.repeat} "
          "fresh processes")
    print(f"ast.parse alone:        {parse_s:8.2f} s   (min {min(parse_times):.2f}, "
          f"max {max(parse_times):.2f})")
    print(f"cslint, all rules:      {lint_s:8.2f} s   (min {min(lint_times):.2f}, "
          f"max {max(lint_times):.2f}; {findings} findings)")
    print(f"ratio cslint/ast.parse: {lint_s / parse_s:8.2f}   (target <= 3)")
    # Each lint run against the parse run just before it: robust to a drifting machine.
    paired = statistics.median(lint / parse for lint, parse in zip(lint_times, parse_times))
    print(f"  median of the {args.repeat} paired ratios: {paired:.2f}")
    note = f" (every {args.libcst_sample}th file, scaled)" if args.libcst_sample > 1 else ""
    print(f"libcst.parse_module:    {libcst_s:8.2f} s{note}")
    print(f"ratio cslint/libcst:    {lint_s / libcst_s:8.2f}")


if __name__ == "__main__":
    main()
