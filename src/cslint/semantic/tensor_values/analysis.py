"""The analysis: summaries of traced functions from their entry points, and the facts found."""

from __future__ import annotations

from functools import cached_property

from cslint.source import TOO_DEEP, internal_error
from cslint.semantic.analysis_error import AnalysisError
from cslint.semantic.module_index import FunctionInfo, ModuleIndex, \
    let_go_of_definitions_parsed_alone
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.tensor_values.class_attributes import ClassAttributes
from cslint.semantic.tensor_values.entries import EntryPoints, declares_non_tensor
from cslint.semantic.tensor_values.evidence import ParameterEvidence
from cslint.semantic.tensor_values.facts import (
    TracedFact, fact_kind, fact_order, reading_order, with_chain,
)
from cslint.semantic.tensor_values.values import (
    DEVICE, ArgumentChain, Tensor, Value, argument_chains, filled, filled_chain,
    holds_placeholder, value_signature, with_argument_placeholders, without_class,
)
from cslint.semantic.tensor_values.walker import FunctionWalker, literal_parameters_of
from cslint.semantic.torch_api import tensor_api

MAX_CALL_DEPTH = 24
# Source characters of definitions parsed alone after which, between two entry points,
# those parsed before the previous let-go go (so at most about twice this stays parsed:
# 240 MB of trees). Measured on transformers (20 MB of them; 14.9 s and 1.64 GB before
# the analyses parsed definitions alone): 2 MB 15.6 s / 0.98 GB, 4 MB 14.7 s / 1.07 GB,
# 8 MB 13.6 s / 1.23 GB; letting every one go at 8 MB was 15.9 s / 0.89 GB.
DEFINITIONS_HELD_WHILE_WALKING = 4_000_000


class _Summary:
    """A function's analysis under one argument signature. `returned`, `open_facts`
    (facts whose chain ends in an argument's chain) and `filled` (what the lists and
    dicts given as arguments hold after the call, by position in the bindings: torch's
    `self._init_group(group, params, grads, state_steps)` appends to the caller's
    lists) hold placeholders of `owner`, filled in at each call site."""

    __slots__ = ("returned", "open_facts", "owner", "per_call", "filled")

    def __init__(self, returned: Value, open_facts: list, owner: object,
                 filled: tuple = ()):
        self.returned = returned
        self.open_facts = open_facts
        self.owner = owner
        self.filled = filled
        self.per_call = bool(open_facts) or holds_placeholder(returned, owner) or any(
            holds_placeholder(value, owner) for _, value in filled)


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
        self.object_state_class = self.class_attributes.object_state_class
        self.group_tensor_keys = self.class_attributes.group_tensor_keys
        self.shared_state_keys = self.class_attributes.shared_state_keys
        self.has_global_step = project.has_global_step
        self.tensor_attributes, self.tensor_methods = tensor_api()
        self._summaries: dict[tuple, _Summary] = {}
        self._class_dependent: dict[tuple, bool] = {}
        self._class_free_summaries: dict[tuple, _Summary] = {}
        # Per summary being computed: its placeholder owner and the facts left open.
        self._open: list[tuple[object, list[TracedFact]]] = []
        self._class_use: list[bool] = []  # per summary being computed: did it use its class?
        self._in_progress: set[tuple] = set()
        self._facts: dict[tuple, TracedFact] = {}  # one fact of each kind and place
        self._fact_orders: dict[tuple, tuple] = {}
        self._facts_by_module: dict[int, list[TracedFact]] | None = None
        self._depth = 0
        self._non_tensor_parameters: dict[int, frozenset[str]] = {}
        self._literal_parameters: dict[int, frozenset[str]] = {}
        self._walked: set[int] = set()  # the nodes of the functions walked: traced code

    def non_tensor_parameters(self, function: FunctionInfo) -> frozenset[str]:
        """Parameters annotated with a non-tensor type (`num_steps: int = 5`)."""
        found = self._non_tensor_parameters.get(function.key)
        if found is None:
            args = function.node.args
            found = self._non_tensor_parameters[function.key] = frozenset(
                arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
                if arg.annotation is not None and declares_non_tensor(arg.annotation))
        return found

    def _declared(self, function: FunctionInfo, bindings: tuple) -> tuple:
        """`bindings` with no tensor in a parameter declared `int`, `float`, ..., whatever
        a call site seems to pass (a joined function value, a misread starred call),
        except a scheduled hyperparameter (`lr: float` is exactly the mistake CS205 is
        for), a param-group tensor the class makes (`debias(beta, step: int)` given
        `group["step"]`: an exact source) and a device (`device: torch.device`). Read
        here, before the arguments' chains become placeholders."""
        annotated = None  # read only when a value is passed
        result = list(bindings)
        for index, (name, value) in enumerate(zip(function.parameter_names, bindings)):
            if value is None or value is DEVICE or (
                    value.__class__ is Tensor and (value.scheduled or value.grouped)):
                continue
            if annotated is None:
                annotated = self.non_tensor_parameters(function)
                if not annotated:
                    return bindings
            if name in annotated:
                result[index] = None
        return tuple(result) if annotated else bindings

    def literal_parameters(self, function: FunctionInfo) -> frozenset[str]:
        """The parameters `function` tests alone against constants (`if output_type ==
        "np":`, `if flag:`) and never binds again: a literal a call gives one decides
        the test (`FunctionWalker._decided`). Most functions have none, and their
        summaries stay one per argument values."""
        found = self._literal_parameters.get(function.key)
        if found is None:
            found = literal_parameters_of(function.node)
            self._literal_parameters[function.key] = found
        return found

    def walked(self, function: FunctionInfo) -> bool:
        """Whether traced code runs `function`: the analysis walked it from an entry point."""
        return function.key in self._walked

    def run(self) -> None:
        # Between entry points (and while they are found) nothing walks a tree: the
        # definitions parsed alone may go (transformers' forwards alone are about 770 MB
        # of trees).
        def let_go() -> None:
            let_go_of_definitions_parsed_alone(DEFINITIONS_HELD_WHILE_WALKING)

        for entry in self.entry_points.find(let_go):
            let_go()
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
        for facts in grouped.values():
            facts.sort(key=reading_order)  # not the order of the callers walked first
        self._facts_by_module = grouped

    def facts_in(self, module: ModuleIndex) -> list[TracedFact]:
        """The module's facts, by place in the file."""
        if self._facts_by_module is None:
            raise RuntimeError("TensorValueAnalysis.run() has not run")
        return self._facts_by_module.get(id(module), [])

    def record(self, fact: TracedFact) -> None:
        chain = getattr(fact, "chain", None)
        if chain and chain[-1].__class__ is ArgumentChain:
            # From an argument: reported once a call site fills the chain in.
            owner = chain[-1].owner
            for open_owner, open_facts in reversed(self._open):
                if open_owner is owner:
                    open_facts.append(fact)
                    return
            fact = with_chain(fact, chain[:-1])  # escaped its summary: no known origin
        node = fact.node
        key = (id(fact.function.module), node.lineno, node.col_offset, fact_kind(fact))
        found = self._facts.get(key)
        if found is None:
            self._facts[key] = fact
            return
        # Summaries under several argument values, and callers, find the same fact again.
        if found is fact or found == fact:
            return
        order = fact_order(fact)
        found_order = self._fact_orders.get(key)
        if found_order is None:
            found_order = self._fact_orders[key] = fact_order(found)
        if order < found_order:
            self._facts[key] = fact
            self._fact_orders[key] = order

    # ---- summaries ----------------------------------------------------------------------

    def summary(self, function: FunctionInfo, ref: ClassRef | None, bindings: tuple,
                closure: dict | None = None, literals: tuple = (),
                filled_out: list | None = None) -> Value:
        """Analyse `function` under these argument values (and the literals the call
        gives the parameters it tests: `literal_parameters`); its return value. What
        the lists and dicts given as arguments hold after the call goes to
        `filled_out`, as (position in `bindings`, value)."""
        if self.is_host_function(function):
            return None  # step closures run on the host with real values
        bindings = self._declared(function, bindings)
        signature = tuple(value_signature(b) for b in bindings)
        closure_id = id(closure) if closure else None
        key = (id(function), id(ref), signature, closure_id, literals)
        # A summary that never looked at the class (no `self.x`, no MRO lookup) holds for
        # every class that inherits the function.
        class_free_key = (id(function), tuple(without_class(s) for s in signature), closure_id,
                          literals)
        found = self._summaries.get(key)
        if found is not None:
            self.note_class_use(self._class_dependent[key])
        else:
            found = self._class_free_summaries.get(class_free_key)
        if found is None:
            if key in self._in_progress or self._depth >= MAX_CALL_DEPTH:
                return None  # recursion: assume nothing
            found = self._computed(key, class_free_key, function, ref, bindings, closure,
                                   literals)
        if not found.per_call:
            if filled_out is not None:
                filled_out.extend(found.filled)
            return found.returned
        chains = argument_chains(bindings)
        owner = found.owner
        for fact in found.open_facts:
            self.record(with_chain(fact, filled_chain(fact.chain, owner, chains)))
        if filled_out is not None:
            filled_out.extend((index, filled(value, owner, chains))
                              for index, value in found.filled)
        return filled(found.returned, owner, chains)

    def _computed(self, key: tuple, class_free_key: tuple, function: FunctionInfo,
                  ref: ClassRef | None, bindings: tuple, closure: dict | None,
                  literals: tuple) -> _Summary:
        owner = object()
        open_facts: list[TracedFact] = []
        self._in_progress.add(key)
        self._walked.add(function.key)
        self._depth += 1
        self._class_use.append(False)
        self._open.append((owner, open_facts))
        try:
            walker = FunctionWalker(self, function, ref,
                                    with_argument_placeholders(bindings, owner), closure,
                                    literals)
            walker.run()
            result = walker.returned
            kept = walker.filled_arguments()
        finally:
            self._depth -= 1
            self._in_progress.discard(key)
            used_class = self._class_use.pop()
            self._open.pop()
        computed = _Summary(result, open_facts, owner, kept)
        self._summaries[key] = computed
        self._class_dependent[key] = used_class
        if used_class:
            self.note_class_use(True)
        else:
            self._class_free_summaries[class_free_key] = computed
        return computed

    def note_class_use(self, used: bool) -> None:
        """The function being analysed depends on its class (directly or via a callee)."""
        if used and self._class_use:
            self._class_use[-1] = True

    def group_key_made_at_setup(self, ref, key: str, function) -> bool:
        """Whether the class of `ref` makes the param-group entry `key` outside
        `function` (`ClassAttributes.group_key_made_elsewhere`)."""
        self.note_class_use(True)
        return self.class_attributes.group_key_made_elsewhere(ref, key, function)

    @cached_property
    def group_keys_anywhere(self) -> frozenset[str]:
        """Param-group keys any optimizer class of the project makes tensors under."""
        return self.class_attributes.group_keys_anywhere

    @cached_property
    def shared_keys_anywhere(self) -> frozenset[str]:
        """Keys any optimizer class of the project makes a shared state tensor under."""
        return self.class_attributes.shared_keys_anywhere

    @cached_property
    def object_keys_anywhere(self) -> frozenset[str]:
        """State keys any optimizer class of the project keeps an object of a plain
        project class under."""
        return self.class_attributes.object_keys_anywhere

    @cached_property
    def python_keys_anywhere(self) -> frozenset[str]:
        """State keys any optimizer class of the project stores Python numbers under."""
        return self.class_attributes.python_keys_anywhere

    @cached_property
    def global_step_anywhere(self) -> bool:
        """Whether any optimizer class of the project has cstorch's global step."""
        return self.class_attributes.global_step_anywhere
