"""Where in the user's source a guarded event happened, and in which context.

The rule codes for a tensor's truth value depend on syntax: `if`/`elif` tests
(CS201), `while` tests (CS202) and anything else (CS203); `__index__` in a
`range(...)` call is CS202. Python 3.11+ exposes the source span of the
instruction a frame is executing (`co_positions`); matching that span against
the `ast` of the file tells the context. Python 3.10 has no spans: truth values
then count as `if` tests (CS201) and `range` is recognised on the line's text.
"""

from __future__ import annotations

import ast
import functools
import itertools
import linecache
import re
import sys
from dataclasses import dataclass
from types import FrameType

__all__ = [
    "SourceSite",
    "is_internal_frame",
    "is_range_call",
    "truth_test_context",
    "user_site",
]

HAS_INSTRUCTION_POSITIONS = sys.version_info >= (3, 11)

# Frames of these modules are machinery, never the user's line. Library
# optimizers added to cslint.cstorch later are user-facing code and are NOT
# listed, so a violation inside one points at its own line.
_INTERNAL_MODULES = frozenset(
    {
        "cslint.cstorch",
        "cslint.cstorch.closures",
        "cslint.cstorch.creation_ops",
        "cslint.cstorch.device_values",
        "cslint.cstorch.errors",
        "cslint.cstorch.graph_check",
        "cslint.cstorch.guard",
        "cslint.cstorch.provenance",
        "cslint.cstorch.source_position",
        "cslint.cstorch.state_freeze",
        "cslint.cstorch.strict_mode",
        "cslint.cstorch.tracing",
        "cslint.cstorch.optim",
        "cslint.cstorch.optim.optimizer",
        "cslint.cstorch.optim.scheduler",
        "cslint.cstorch.optim.lr_scheduler",
        "cslint.cstorch.optim.weight_decay_scheduler",
        "contextlib",
        "functools",
    }
)


@dataclass(frozen=True)
class SourceSite:
    """A user source line, plus the span of the instruction running there."""

    filename: str
    lineno: int
    code_line: str
    # (lineno, end_lineno, col, end_col) of the executing instruction, or None.
    position: tuple | None = None

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


def is_internal_frame(frame: FrameType) -> bool:
    module = frame.f_globals.get("__name__", "")
    return (
        module in _INTERNAL_MODULES
        or module == "torch"
        or module.startswith("torch.")
    )


def _instruction_position(frame: FrameType) -> tuple | None:
    if not HAS_INSTRUCTION_POSITIONS or frame.f_lasti < 0:
        return None
    # One position per 2-byte code unit; f_lasti is a byte offset.
    positions = frame.f_code.co_positions()
    position = next(itertools.islice(positions, frame.f_lasti // 2, None), None)
    if position is None or position[0] is None or position[2] is None:
        return None
    return position


def user_site(skip_frames: int = 1) -> SourceSite | None:
    """The innermost frame that is neither torch's nor cstorch's machinery."""
    frame: FrameType | None = sys._getframe(skip_frames)
    while frame is not None and is_internal_frame(frame):
        frame = frame.f_back
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    lineno = frame.f_lineno
    code_line = linecache.getline(filename, lineno, frame.f_globals).strip()
    return SourceSite(filename, lineno, code_line, _instruction_position(frame))


@functools.lru_cache(maxsize=64)
def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _module_tree(filename: str) -> ast.Module | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    return _parse("".join(lines))


def _span(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def _encloses(outer: tuple, inner: tuple) -> bool:
    return outer[:2] <= inner[:2] and inner[2:] <= outer[2:]


def _position_span(position: tuple) -> tuple:
    lineno, end_lineno, col, end_col = position
    return (lineno, col, end_lineno, end_col)


def truth_test_context(site: SourceSite | None) -> str | None:
    """'if', 'while' or 'other' for a truth value taken at `site`; None if unknown."""
    if site is None or site.position is None:
        return None
    tree = _module_tree(site.filename)
    if tree is None:
        return None
    target = _position_span(site.position)
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)):
            # CPython 3.11 gives the conditional jump the whole statement's
            # span; other versions give the test's. Both mean "in the test".
            if _span(node) == target or _encloses(_span(node.test), target):
                return "if" if isinstance(node, ast.If) else "while"
    return "other"


_RANGE_CALL_TEXT = re.compile(r"\brange\s*\(")


def is_range_call(site: SourceSite | None) -> bool:
    """Whether the instruction at `site` is a call of the builtin name `range`."""
    if site is None:
        return False
    if site.position is None:
        return bool(_RANGE_CALL_TEXT.search(site.code_line))
    tree = _module_tree(site.filename)
    if tree is None:
        return bool(_RANGE_CALL_TEXT.search(site.code_line))
    target = _position_span(site.position)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "range"
            and _span(node) == target
        ):
            return True
    return False
