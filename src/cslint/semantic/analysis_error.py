"""What an analysis could not analyse: reported against the file, which exits 2."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cslint.semantic.module_index import ModuleIndex


@dataclass(frozen=True)
class AnalysisError:
    """A part of a file an analysis could not analyse (too deeply nested, or a bug of
    ours): the file is reported with `problem`, the other files are still checked."""

    module: "ModuleIndex"
    problem: str
