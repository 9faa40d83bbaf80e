"""The project-wide analyses of one run, built by the engine in a fixed order.

Each analysis reads the project index and produces code-free facts about the project's
functions (what creates optimizer state, which values are device tensors, what the
traced methods of schedulers reach); rules turn facts into findings. An analysis runs
only when a selected rule reads it, and records what it could not analyse as errors.
"""

from __future__ import annotations

from typing import Collection

from cslint.semantic.analysis_error import AnalysisError
from cslint.semantic.optimizer_state import OptimizerStateAnalysis
from cslint.semantic.project import ProjectIndex
from cslint.semantic.scheduler import SchedulerAnalysis
from cslint.semantic.tensor_values import TensorValueAnalysis
from cslint.source import TOO_DEEP


class Analyses:
    """Optimizer state, tensor values, scheduler reach: run in this order, each only
    when `wanted` names its class."""

    def __init__(self, project: ProjectIndex, wanted: Collection[type]):
        self.optimizer_state = OptimizerStateAnalysis(project)
        self.tensor_values = TensorValueAnalysis(project)
        self.scheduler = SchedulerAnalysis(project)
        self._ran = [analysis for analysis in (self.optimizer_state, self.tensor_values,
                                               self.scheduler) if type(analysis) in wanted]
        for analysis in self._ran:
            analysis.run()

        self._project = project

    def of(self, kind: type):
        """The analysis of class `kind`."""
        return next(analysis for analysis in (self.optimizer_state, self.tensor_values,
                                              self.scheduler) if type(analysis) is kind)

    @property
    def errors(self) -> list[AnalysisError]:
        if not self._ran:
            return []
        unclassifiable = [AnalysisError(ref.info.module, TOO_DEEP)
                          for ref in self._project.unclassifiable_classes]
        return unclassifiable + [error for analysis in self._ran for error in analysis.errors]
