"""`cslint port` over every optimizer class of pytorch-optimizer 4.1.0, each port verified.

    python benchmarks/port_pytorch_optimizer.py WHEEL_OR_PACKAGE_FOLDER [--steps N] [--json OUT]
        [--name IMPORT_NAME] [--classes NAME...] [--keep FOLDER]

The package is copied twice into a temporary folder: `pytorch_optimizer` (the original)
and `ported_pytorch_optimizer` (ported in place, as `cslint port --write` would, then its
imports of `pytorch_optimizer` renamed), so that one verifier process imports both: each
original class from the original package, its port from the ported one. All files are
verified in one subprocess. Prints one row per class (ported, numbers equal, strict clean,
the codes that remain), the totals, and the causes of failure grouped by count.
`--name` measures another package's optimizers the same way: a folder of them (timm's
`optim`, say) is imported under that name. `--keep` leaves both packages in a folder of
yours (new or empty), to read the ports or run them again.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from cslint.config import Config
from cslint.port.command import run_port
from cslint.port.verify import verify_ports

PACKAGE = "pytorch_optimizer"
PORTED = "ported_" + PACKAGE


def _unpack(given: Path, root: Path) -> Path:
    """The original package under `root` (from a wheel or a package folder)."""
    target = root / PACKAGE
    if given.is_file():
        with zipfile.ZipFile(given) as wheel:
            members = [m for m in wheel.namelist() if m.startswith(PACKAGE + "/")]
            wheel.extractall(root, members)
    else:
        shutil.copytree(given, target)
    return target


def _cause(row: dict) -> str:
    """One short line for why a class is not fully ported."""
    if row["remaining"]:
        return "codes remain: " + " ".join(row["remaining"])
    problem = row.get("problem") or ""
    if row["numbers_equal"] is False and row["strict_clean"] is True:
        return "numbers differ"  # (the problem says from which step and where)
    if not problem:
        return "strict mode fails"
    return _short(problem)


def _short(problem: str) -> str:
    """The problem without the option set and the details that differ between classes."""
    problem = re.sub(r" with [^:]*?: ", ": ", problem, count=1)
    # The class and the temporary folder differ; the file and line of the problem say
    # where it is (a shared helper of the package, or the class's own file).
    problem = re.sub(rf" in \w+\.(\w+) at \S*?(ported_)?{PACKAGE}/", r" in <class>.\1 at ",
                     problem)
    problem = re.sub(r"\.cslint-port-\w+\.py", "<its file>", problem)
    problem = re.sub(r"'[^']*'|`[^`]*`|(?<![\w/])\d+(?![\w.])", "…", problem)
    return problem[:150]


def main() -> int:
    global PACKAGE, PORTED
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help="the wheel, or the unpacked package folder")
    parser.add_argument("--name", default=PACKAGE,
                        help="the package's import name (another package's optimizers: "
                             "a folder of them, imported under this name)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--json", type=Path, help="write the rows here as JSON")
    parser.add_argument("--classes", nargs="+", metavar="NAME",
                        help="verify and list these classes only (every file is ported)")
    parser.add_argument("--keep", type=Path, metavar="FOLDER",
                        help="port into this folder (new or empty) and leave it there")
    args = parser.parse_args()
    PACKAGE, PORTED = args.name, "ported_" + args.name

    if args.keep:
        if args.keep.exists() and any(args.keep.iterdir()):
            parser.error(f"--keep: {args.keep} is not empty")
        args.keep.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext(str(args.keep.resolve())) if args.keep else \
            tempfile.TemporaryDirectory(prefix="cslint-port-bench-") as folder:
        root = Path(folder)
        original = _unpack(args.package, root)
        # Ported under its own name (its absolute imports resolve in the project), then
        # copied with those imports renamed next to the original.
        work = root / "work" / PACKAGE
        shutil.copytree(original, work)
        started = time.perf_counter()
        run = run_port([str(work)], Config(), write=True, verify=False,
                       runtime_reference=False)
        port_seconds = time.perf_counter() - started
        for problem in run.problems:
            print(problem, file=sys.stderr)
        ported = root / PORTED
        shutil.copytree(work, ported)
        files = []
        for file in run.ported:
            relative = Path(file.path).relative_to(work)
            text = (ported / relative).read_text()
            renamed = re.sub(rf"\b{PACKAGE}\b", PORTED, text)
            (ported / relative).write_text(renamed)
            files.append((str(original / relative), renamed.encode(),
                          [c.name for c in file.classes
                           if not args.classes or c.name in args.classes]))
        # The verifier imports both packages from the folder that holds them.
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [folder, *filter(None, [os.environ.get("PYTHONPATH")])])
        started = time.perf_counter()
        verified = verify_ports(files, steps=args.steps)
        verify_seconds = time.perf_counter() - started

    rows = []
    for file, results in zip(run.ported, verified):
        relative = Path(file.path).relative_to(work)
        for found in file.classes:
            if args.classes and found.name not in args.classes:
                continue
            result = results.get(found.name)
            rows.append({
                "file": str(relative), "class": found.name, "ported": found.ported,
                "numbers_equal": result.numbers_equal if result else None,
                "strict_clean": result.strict_clean if result else None,
                "remaining": list(found.remaining),
                "problem": result.problem if result else None})
    for row in rows:
        row["fully_ported"] = bool(row["ported"] and row["numbers_equal"]
                                   and row["strict_clean"])

    print("| class | file | ported | numbers equal | strict clean | remaining |")
    print("|---|---|---|---|---|---|")
    mark = {True: "yes", False: "no", None: "-"}
    for row in rows:
        print(f"| {row['class']} | {row['file']} | {mark[row['ported']]} | "
              f"{mark[row['numbers_equal']]} | {mark[row['strict_clean']]} | "
              f"{' '.join(row['remaining'])} |")
    total = len(rows)
    full = sum(r["fully_ported"] for r in rows)
    # Ported, run to the end, and different: verify says so (nothing stopped the run).
    silent = [r for r in rows if r["ported"] and r["numbers_equal"] is False
              and r["strict_clean"] is True]
    print()
    print(f"classes: {total}; ported (no code remains): {sum(r['ported'] for r in rows)}; "
          f"numbers equal: {sum(r['numbers_equal'] is True for r in rows)}; "
          f"strict clean: {sum(r['strict_clean'] is True for r in rows)}; "
          f"fully ported: {full} ({100 * full / max(total, 1):.0f}%)")
    print(f"ported with no code left, run to the end, numbers that differ: {len(silent)}"
          + (" (" + ", ".join(r["class"] for r in silent) + ")" if silent else ""))
    print(f"port {port_seconds:.1f} s, verify {verify_seconds:.1f} s ({args.steps} steps)")
    print()
    print("causes of failure, by count:")
    causes = collections.Counter(_cause(r) for r in rows if not r["fully_ported"])
    for cause, count in causes.most_common():
        print(f"{count:4d}  {cause}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
