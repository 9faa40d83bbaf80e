"""The project-wide analyses of one run, built by the engine in a fixed order.

Each analysis reads the project index and produces code-free facts about the project's
functions (what creates optimizer state, which values are device tensors, what the
traced methods of schedulers reach); rules turn facts into findings. An analysis runs
only when a selected rule reads it, and records what it could not analyse as errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Collection

if TYPE_CHECKING:
    from cslint.semantic.module_index import ModuleIndex
    from cslint.semantic.project import ProjectIndex


@dataclass(frozen=True)
class AnalysisError:
    """A part of a file an analysis could not analyse (the file is reported, exit 2)."""

    module: "ModuleIndex"
    problem: str


class Analyses:
    """Optimizer state, tensor values, scheduler reach: run in this order, each only
    when `wanted` names its class."""

    def __init__(self, project: "ProjectIndex", wanted: Collection[type]):
        from cslint.semantic.optimizer_state import OptimizerStateAnalysis
        from cslint.semantic.scheduler import SchedulerAnalysis
        from cslint.semantic.tensor_values import TensorValueAnalysis

        self.optimizer_state = OptimizerStateAnalysis(project)
        self.tensor_values = TensorValueAnalysis(project)
        self.scheduler = SchedulerAnalysis(project)
        self._ran = [analysis for analysis in (self.optimizer_state, self.tensor_values,
                                               self.scheduler) if type(analysis) in wanted]
        for analysis in self._ran:
            analysis.run()

    @property
    def errors(self) -> list[AnalysisError]:
        return [error for analysis in self._ran for error in analysis.errors]
