"""Shared test helpers: lint source text or files with options as fixtures declare them."""

from __future__ import annotations

import ast
import json
import re
import warnings
from importlib import resources
from pathlib import Path

from cslint.config import Config, config_from_table, parse_test_options
from cslint.engine import LintResult, lint

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
RULE_PAGES = REPO / "rules"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>CS\d{3}(?:\s*,\s*CS\d{3})*)")
OPTIONS_MARK = "# cslint-test:"


def options_in(text: str) -> dict:
    for line in text.splitlines():
        if line.strip().startswith(OPTIONS_MARK):
            return parse_test_options(line.strip())
    return {}


def config_for(options: dict) -> Config:
    return config_from_table(options, None)


def lint_files(paths: list[Path], options: dict | None = None,
               root: Path | None = None) -> LintResult:
    return lint([str(p) for p in paths], config_for(options or {}), project_root=root)


def lint_source(text: str, tmp_path: Path, name: str = "example.py",
                options: dict | None = None) -> LintResult:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return lint([str(path)], config_for(options if options is not None else options_in(text)),
                project_root=tmp_path)


def expected_findings(path: Path) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for code in re.split(r"\s*,\s*", match.group("codes")):
                found.add((number, code))
    return found


def codes(result: LintResult) -> list[str]:
    return [f.code for f in result.findings]


def official_api_table() -> dict:
    """The packaged table of the official API (`data/official_api.json`), as plain data."""
    return json.loads(resources.files("cslint").joinpath("data/official_api.json")
                      .read_text("utf-8"))


# ---- the released cerebras-pytorch sources (the `cerebras_pytorch` fixture) ----------------

# The folder holding `cerebras/pytorch` of the released cerebras-pytorch wheel, unpacked.
# .ci/run downloads and unpacks it; on a laptop the tests that read it skip without it.
SOURCES_VARIABLE = "CSLINT_CEREBRAS_PYTORCH_SOURCES"
SOURCES_RELEASE = "2.10.0"

REQUIRED = "<required>"


def init_signatures(optim: Path) -> dict[str, list[tuple[str, object, bool]]]:
    """`__init__` parameters of every class defined in `optim/*.py`, read with `ast`
    (nothing imported): {class name: [(name, default or REQUIRED, keyword-only)]},
    without `self`. Defaults that are not literals are kept as their source text."""
    def value(node):
        if node is None:
            return REQUIRED
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError):
            return ast.unparse(node)

    found = {}
    for path in sorted(optim.glob("*.py")):
        with warnings.catch_warnings():  # the release has "\\s" in plain strings
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args
                    positional = args.posonlyargs + args.args
                    defaults = [None] * (len(positional) - len(args.defaults)) + args.defaults
                    found[node.name] = (
                        [(a.arg, value(d), False) for a, d in zip(positional, defaults)][1:]
                        + [(a.arg, value(d), True)
                           for a, d in zip(args.kwonlyargs, args.kw_defaults)])
    return found
