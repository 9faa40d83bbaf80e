"""The analysis: summaries of traced functions from their entry points, and the facts found."""

from __future__ import annotations

from functools import cached_property

from cslint.source import TOO_DEEP, internal_error
from cslint.semantic.analysis_error import AnalysisError
from cslint.semantic.module_index import FunctionInfo, ModuleIndex
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.tensor_values.class_attributes import ClassAttributes
from cslint.semantic.tensor_values.entries import EntryPoints, declares_non_tensor
from cslint.semantic.tensor_values.evidence import ParameterEvidence
from cslint.semantic.tensor_values.facts import TracedFact, fact_kind
from cslint.semantic.tensor_values.values import Value, value_signature, without_class
from cslint.semantic.tensor_values.walker import FunctionWalker

MAX_CALL_DEPTH = 24


class TensorValueAnalysis:
    """The facts of every traced function of a project."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        config = project.config
        self.tensor_keys = frozenset(config.tensor_hyperparameters)
        self.errors: list[AnalysisError] = []
        self.class_attributes = ClassAttributes(project)
        self.evidence = ParameterEvidence(project, self.class_attributes)
        self.entry_points = EntryPoints(project, self.evidence)
        # Bound once: summaries and walkers call these often, and a method of another
        # object would cost one attribute lookup more per call.
        self.is_host_function = self.entry_points.is_host_function
        self.attributes_of = self.class_attributes.attributes_of
        self.forward_of = self.class_attributes.forward_of
        self.python_state_keys = self.class_attributes.python_state_keys
        self._summaries: dict[tuple, Value] = {}
        self._class_dependent: dict[tuple, bool] = {}
        self._class_free_summaries: dict[tuple, Value] = {}
        self._class_use: list[bool] = []  # per summary being computed: did it use its class?
        self._in_progress: set[tuple] = set()
        self._facts: dict[tuple, TracedFact] = {}  # the first fact of each kind and place
        self._facts_by_module: dict[int, list[TracedFact]] | None = None
        self._depth = 0
        self._non_tensor_parameters: dict[int, frozenset[str]] = {}
        self._walked: set[int] = set()  # the nodes of the functions walked: traced code

    def non_tensor_parameters(self, function: FunctionInfo) -> frozenset[str]:
        """Parameters annotated with a non-tensor type (`num_steps: int = 5`)."""
        found = self._non_tensor_parameters.get(id(function.node))
        if found is None:
            args = function.node.args
            found = self._non_tensor_parameters[id(function.node)] = frozenset(
                arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
                if arg.annotation is not None and declares_non_tensor(arg.annotation))
        return found

    def walked(self, function: FunctionInfo) -> bool:
        """Whether traced code runs `function`: the analysis walked it from an entry point."""
        return id(function.node) in self._walked

    def run(self) -> None:
        for entry in self.entry_points.find():
            try:
                self.summary(entry.function, entry.ref, entry.bindings, entry.closure)
            except RecursionError:
                self.errors.append(AnalysisError(entry.function.module,
                                                 TOO_DEEP))
            except Exception as error:  # a bug of ours must not stop the other files
                self.errors.append(AnalysisError(entry.function.module,
                                                 internal_error(error, entry.description)))
        grouped: dict[int, list[TracedFact]] = {}
        for fact in self._facts.values():
            grouped.setdefault(id(fact.function.module), []).append(fact)
        self._facts_by_module = grouped

    def facts_in(self, module: ModuleIndex) -> list[TracedFact]:
        """The module's facts, in the order the analysis found them."""
        if self._facts_by_module is None:
            raise RuntimeError("TensorValueAnalysis.run() has not run")
        return self._facts_by_module.get(id(module), [])

    def record(self, fact: TracedFact) -> None:
        # Summaries under several argument values find the same fact again.
        node = fact.node
        key = (id(fact.function.module), node.lineno, node.col_offset, fact_kind(fact))
        if key not in self._facts:
            self._facts[key] = fact

    # ---- summaries ----------------------------------------------------------------------

    def summary(self, function: FunctionInfo, ref: ClassRef | None, bindings: tuple,
                closure: dict | None = None) -> Value:
        """Analyse `function` under these argument values; its return value."""
        if self.is_host_function(function):
            return None  # step closures run on the host with real values
        signature = tuple(value_signature(b) for b in bindings)
        closure_id = id(closure) if closure else None
        key = (id(function), id(ref), signature, closure_id)
        # A summary that never looked at the class (no `self.x`, no MRO lookup) holds for
        # every class that inherits the function.
        class_free_key = (id(function), tuple(without_class(s) for s in signature), closure_id)
        if key in self._summaries:
            self.note_class_use(self._class_dependent[key])
            return self._summaries[key]
        if class_free_key in self._class_free_summaries:
            return self._class_free_summaries[class_free_key]
        if key in self._in_progress or self._depth >= MAX_CALL_DEPTH:
            return None  # recursion: assume nothing
        self._in_progress.add(key)
        self._walked.add(id(function.node))
        self._depth += 1
        self._class_use.append(False)
        try:
            walker = FunctionWalker(self, function, ref, bindings, closure)
            walker.run()
            result = walker.returned
        finally:
            self._depth -= 1
            self._in_progress.discard(key)
            used_class = self._class_use.pop()
        self._summaries[key] = result
        self._class_dependent[key] = used_class
        if used_class:
            self.note_class_use(True)
        else:
            self._class_free_summaries[class_free_key] = result
        return result

    def note_class_use(self, used: bool) -> None:
        """The function being analysed depends on its class (directly or via a callee)."""
        if used and self._class_use:
            self._class_use[-1] = True

    @cached_property
    def python_keys_anywhere(self) -> frozenset[str]:
        """State keys any optimizer class of the project stores Python numbers under."""
        return self.class_attributes.python_keys_anywhere
