"""Whole-process time and peak memory of cslint: cold, with jobs, with a warm cache,
after one edit, as a pre-commit hook; beside `ast.parse` alone on the same files.

    python benchmarks/cache_and_jobs.py /tmp/corpus/pytorch_optimizer [more folders]

Each folder is copied into a fresh temporary project (a `pyproject.toml` at its root,
so the project is that folder) and checked with every rule, as `cslint check --select
ALL --exit-zero` from the command line. Each figure is the median of --repeat runs of
`/usr/bin/time -f "%e %M"` (seconds, peak resident memory of the process and its
workers' largest). The edits append a comment to a file (a changed digest; the findings
stay the same): the "typical" file is the median file by size, the "base" file the one
whose module the most other files import. "pre-commit" checks only the edited file, the
cache warm, as a hook over a staged file does; "lone file" checks one file with no
project around it (no pyproject.toml, .git or package above it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PARSE = """
import ast, sys, time, warnings
from pathlib import Path
files = sorted(Path(sys.argv[1]).rglob("*.py"))
warnings.simplefilter("ignore")
for path in files:
    try:
        ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
"""


# As on a user's machine, cslint's modules load from cached bytecode (some sandboxes set
# PYTHONDONTWRITEBYTECODE, which would bill every run for compiling cslint itself: 0.13 s
# of pytorch-optimizer's profile).
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """(seconds, peak MB) of one whole-process run."""
    result = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", *command], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=ENVIRONMENT)
    line = [l for l in result.stderr.splitlines() if l.startswith("TIME ")][-1]
    seconds, kilobytes = line.split()[1:]
    return float(seconds), int(kilobytes) / 1024


def median_of(runs: int, command: list[str], cwd: Path, before=None) -> tuple[float, float]:
    figures = []
    for _ in range(runs):
        if before is not None:
            before()
        figures.append(timed(command, cwd))
    return (statistics.median(f[0] for f in figures), statistics.median(f[1] for f in figures))


def most_imported(root: Path, files: list[Path]) -> Path:
    """The file whose module name the most other files import."""
    names = {}
    for path in files:
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            continue
        names[".".join(parts)] = path
    counts = dict.fromkeys(names, 0)
    pattern = re.compile(r"^\s*(?:from|import)\s+([\w.]+)", re.M)
    for path in files:
        for module in set(pattern.findall(path.read_text(errors="replace"))):
            if module in counts:
                counts[module] += 1
    return names[max(counts, key=lambda name: (counts[name], name))]


def bench(folder: Path, runs: int) -> None:
    cslint = [sys.executable, "-m", "cslint", "check", "--no-config", "--select", "ALL",
              "--exit-zero", "--quiet"]
    with tempfile.TemporaryDirectory() as temporary:
        project = Path(temporary) / "project"
        shutil.copytree(folder, project / folder.name)
        (project / "pyproject.toml").write_text("")
        root = project / folder.name
        files = sorted(root.rglob("*.py"))
        lines = sum(p.read_bytes().count(b"\n") for p in files)
        typical = sorted(files, key=lambda p: p.stat().st_size)[len(files) // 2]
        base = most_imported(root, files)
        print(f"\n{folder.name}: {len(files)} files, {lines / 1000:.0f}k lines; "
              f"typical edit {typical.relative_to(project)}, base edit "
              f"{base.relative_to(project)}; {os.cpu_count()} CPUs; median of {runs}")

        def clear_cache():
            shutil.rmtree(project / ".cslint_cache", ignore_errors=True)

        def touch(path: Path):
            return lambda: path.write_text(path.read_text() + "# edited\n")

        figures = {}
        figures["ast.parse alone"] = median_of(runs, [sys.executable, "-c", PARSE, str(root)],
                                               project)
        figures["cold, --jobs 1, no cache"] = median_of(
            runs, [*cslint, "--no-cache", "--jobs", "1", folder.name], project)
        figures["cold, default jobs, no cache"] = median_of(
            runs, [*cslint, "--no-cache", folder.name], project)
        figures["cold, cache written"] = median_of(runs, [*cslint, folder.name], project,
                                                   clear_cache)
        figures["warm, nothing changed"] = median_of(runs, [*cslint, folder.name], project)
        figures["warm, typical file edited"] = median_of(runs, [*cslint, folder.name], project,
                                                         touch(typical))
        figures["warm, base file edited"] = median_of(runs, [*cslint, folder.name], project,
                                                      touch(base))
        relative = str(typical.relative_to(project))
        figures["pre-commit, edited file, warm"] = median_of(runs, [*cslint, relative],
                                                             project, touch(typical))
        lone = Path(temporary) / "lone"
        lone.mkdir()
        shutil.copy(typical, lone / "alone.py")
        figures["lone file, no project"] = median_of(runs, [*cslint, "alone.py"], lone)
        # The same file in the folder that holds the project's copy (a crowded folder
        # with no project marked: a downloads folder, /tmp): what it can import is read.
        shutil.copy(typical, Path(temporary) / "beside.py")
        figures["lone file beside other trees"] = median_of(runs, [*cslint, "beside.py"],
                                                            Path(temporary))

        parse = figures["ast.parse alone"][0]
        cold = figures["cold, default jobs, no cache"][0]
        print(f"{'':32} {'seconds':>8} {'peak MB':>8} {'/ parse':>8} {'/ cold':>8}")
        for name, (seconds, megabytes) in figures.items():
            print(f"{name:32} {seconds:8.2f} {megabytes:8.0f} {seconds / parse:8.2f} "
                  f"{seconds / cold:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    for folder in arguments.folders:
        bench(folder.resolve(), arguments.repeat)


if __name__ == "__main__":
    main()
