"""The abstract values of traced code: joining them, their chains, their signatures."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, Union

from cslint.semantic.module_index import source_snippet
from cslint.semantic.project import ClassRef


# ---- abstract values ---------------------------------------------------------------
# Immutable by convention: `frozen=True` makes each creation ~4x slower (a setattr call
# per field), and one is created per evaluated node.

@dataclass(slots=True, unsafe_hash=True)
class Tensor:
    """A tensor. `device` False: a host constant built from Python values in traced code.
    `why` is the chain back to the source, newest step first."""

    device: bool
    why: tuple[str, ...]
    scheduled: bool = False  # a scheduled hyperparameter (the lr) or computed from one
    boolean: bool = False  # provably of dtype bool (for CS206)
    # A param-group tensor the class makes (`group["step"]` made in preinitialize), or
    # computed from one: an exact source, whatever a callee's annotation says (`why`
    # keeps only the last steps of the chain, so it cannot tell).
    grouped: bool = False

    def changed(self, *, device: bool | None = None, why: tuple | None = None,
                scheduled: bool | None = None, boolean: bool | None = None) -> "Tensor":
        """A copy with some fields changed (`dataclasses.replace` costs several times more)."""
        return Tensor(self.device if device is None else device,
                      self.why if why is None else why,
                      self.scheduled if scheduled is None else scheduled,
                      self.boolean if boolean is None else boolean, self.grouped)


@dataclass(slots=True, unsafe_hash=True)
class Marker:
    """Structural values of optimizers and modules."""

    kind: str  # param_groups, group, params, state_map, param_state, module, module_list,
    # optimizer_self, scheduler_self, module_self, object_self
    # The class; for `module` (a submodule) and `module_list` (its elements): a project
    # class, None (a torch.nn layer), UNSEEN_MODULE_CLASS, or a tuple of those when
    # conditional assignments or mixed elements give several (`()`: an empty container,
    # its elements appended later).
    ref: ClassRef | None | tuple = None


@dataclass(slots=True, unsafe_hash=True)
class Sequence:
    items: tuple


@dataclass(slots=True, unsafe_hash=True)
class Container:
    """A list or dict whose entries hold `element` (a list of tensors, a dict's values).
    A dict's keys are `key`: iterating it gives them, and looking one up hashes it (no
    value is read), so a dict of tensors keyed by names has Python keys."""

    element: object
    mapping: bool = False  # a dict
    key: object = None  # a dict's keys (parameters, when keyed by them)
    # A dict display's entries under string keys written in it, ((key, value), ...):
    # `d["indices"]` is what was written there, not any entry's value (the others are
    # in `element` too). Lost where the dict changes or joins another of other keys.
    keyed: tuple = ()


@dataclass(slots=True, unsafe_hash=True)
class Function:
    targets: tuple  # (FunctionInfo, class ref or None, closure env or None, bound self)


@dataclass(slots=True, unsafe_hash=True)
class Items:
    owner: object
    view: str


Value = Union[None, Tensor, Marker, Sequence, Container, Function, Items]

# A device named in traced code (`p.device`, `"cuda"`, `cstorch.current_torch_device()`):
# what makes a tensor built from Python values a device tensor. Any other device value
# (`None`, `"cpu"`, one we cannot name) leaves it a host constant.
DEVICE = Marker("device")


def is_device(value: Value) -> bool:
    return value.__class__ is Tensor and value.device


# What one path knows survives "nothing known" on the other (a helper that returns a
# tuple of state tensors on one path and nothing on another); a tensor on any path stays
# a tensor.
_KEPT_OVER_NOTHING = frozenset({Tensor, Marker, Function, Sequence, Container})


def join(a: Value, b: Value) -> Value:
    # (Class identity tests: joins run at every branch and call, isinstance costs more.)
    if a is b:
        return a
    if a is None:
        return b if b.__class__ in _KEPT_OVER_NOTHING else None
    if b is None:
        return a if a.__class__ in _KEPT_OVER_NOTHING else None
    if a == b:
        return a
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a.device != b.device:
            return a if a.device else b
        return Tensor(a.device, a.why, a.scheduled or b.scheduled, a.boolean and b.boolean,
                      a.grouped or b.grouped)
    if isinstance(a, Tensor):
        return a  # a tensor on any path stays a tensor
    if isinstance(b, Tensor):
        return b
    if isinstance(a, Container) and isinstance(b, Container):
        if a.mapping != b.mapping:
            return None  # a list on one path, a dict on the other: its entries are unknown
        return Container(join(a.element, b.element), a.mapping, join(a.key, b.key),
                         _joined_keys(a.keyed, b.keyed))
    if a.__class__ is Marker and b.__class__ is Marker and a.kind == b.kind \
            and a.kind in MODULE_KINDS:
        return Marker(a.kind, union_classes(a.ref, b.ref))
    if isinstance(a, Function) and isinstance(b, Function):
        targets = list(a.targets)
        known = {(id(t[0]), id(t[2])) for t in targets}
        targets += [t for t in b.targets if (id(t[0]), id(t[2])) not in known]
        return Function(tuple(targets))
    if isinstance(a, Sequence) and isinstance(b, Sequence) and len(a.items) == len(b.items):
        return Sequence(tuple(join(x, y) for x, y in zip(a.items, b.items)))
    return None



def _joined_keys(a: tuple, b: tuple) -> tuple:
    """The string keys two dict displays both wrote, each holding what either path
    wrote there. A key one path did not write is left out: looking it up gives any
    entry's value (on that path it fails), as for a key no display wrote."""
    if a == b or not a or not b:
        return a if a == b else ()
    theirs = dict(b)
    return tuple((key, join(value, theirs[key])) for key, value in a if key in theirs)

# Submodules and module containers: joined by the union of their classes.
MODULE_KINDS = frozenset({"module", "module_list"})
# `self` in the methods of an optimizer, a scheduler, a module, or an object of a plain
# project class that an optimizer keeps in its state (a projector): `self.x` is what its
# class sets up, `self.f(...)` runs its method.
SELF_KINDS = frozenset({"optimizer_self", "scheduler_self", "module_self", "object_self"})
# The class of a module built by a call we cannot follow (`make_block(cfg)`, elements of
# `nn.ModuleList(blocks)`): not a torch.nn layer, whose inputs are known to be tensors.
UNSEEN_MODULE_CLASS = ClassRef("<a module class we cannot see>")


def module_classes(ref: ClassRef | None | tuple) -> tuple:
    """The classes a `module`/`module_list` marker's `ref` stands for."""
    return ref if ref.__class__ is tuple else (ref,)


def union_classes(a: ClassRef | None | tuple, b: ClassRef | None | tuple
                  ) -> ClassRef | None | tuple:
    classes = list(module_classes(a))
    classes += [c for c in module_classes(b) if not any(c is d for d in classes)]
    return classes[0] if len(classes) == 1 else tuple(classes)  # (no class: `()`)


def combine(values: Iterable[Value], step) -> Value:
    """A tensor computed from `values` (arithmetic, torch ops): device if any input is."""
    tensors = []
    for value in values:
        if value is None:
            continue
        if value.__class__ is Container:
            value = value.element  # torch.cat([...]), a dict of tensors as `**kwargs`
        elif value.__class__ is Sequence:
            value = element_of(value)  # torch.stack((a, b))
        if value.__class__ is Tensor:
            tensors.append(value)
    if not tensors:
        return None
    device = [t for t in tensors if t.device]
    base = device[0] if device else tensors[0]
    step = source_step(step) if isinstance(step, ast.AST) else step
    return Tensor(bool(device), (step, *base.why)[:4],
                  scheduled=any(t.scheduled for t in tensors),
                  grouped=any(t.grouped for t in tensors))


def element_of(value: Value) -> Value:
    """What iterating `value` gives: a dict's keys, a list's elements, a view's entries."""
    if isinstance(value, Tensor):
        return value.changed(why=("an element of it", *value.why)[:4], boolean=value.boolean)
    if isinstance(value, Container):
        return value.key if value.mapping else value.element
    if isinstance(value, Items):
        return _view_entry(value)
    if isinstance(value, Sequence):
        result = None
        for item in value.items:
            result = join(result, item)
        return result
    if isinstance(value, Marker):
        return {"param_groups": Marker("group"), "params": Tensor(True, ("a parameter",)),
                "module_list": Marker("module", value.ref)}.get(value.kind)
    return None


def stored_into(container: Container, key: Value, value: Value) -> Container:
    """`container` once `container[key] = value` (or `.setdefault(key, value)`) ran."""
    if container.mapping:
        return Container(join(container.element, value), True, join(container.key, key))
    return Container(join(container.element, value))


def entry_of(container: Container, key: ast.expr | None) -> Value:
    """`container[key]`: the value written under a string key in its display, else any
    entry's."""
    if container.keyed and isinstance(key, ast.Constant) and isinstance(key.value, str):
        for written, value in container.keyed:
            if written == key.value:
                return value
    return container.element


def is_collection(value: Value) -> bool:
    """A list, tuple or dict (what `+`, `*` and `|` concatenate, repeat or merge)."""
    return value.__class__ is Container or value.__class__ is Sequence


def collection_operation(op: ast.operator, left: Value, right: Value) -> Value:
    """`xs + ys`, `xs * n`, `d | e` on lists, tuples and dicts: the collection they give."""
    kind = op.__class__
    if kind is ast.Add:
        if left.__class__ is Sequence and right.__class__ is Sequence:
            return Sequence(left.items + right.items)
        return Container(join(element_of(left), element_of(right)))
    if kind is ast.Mult:
        return Container(element_of(left if is_collection(left) else right))
    if kind is ast.BitOr and isinstance(left, Container) and left.mapping:
        return merged_into(left, right)
    return None


def merged_into(mapping: Container, other: Value) -> Container:
    """`mapping` once the entries of `other` are added (`{**other}`, `.update(other)`):
    another dict's, or those of key-value pairs (`zip(names, tensors)`, `d.items()`)."""
    if isinstance(other, Container) and other.mapping:
        return Container(join(mapping.element, other.element), True,
                         join(mapping.key, other.key))
    pair = element_of(other)
    if isinstance(pair, Sequence) and len(pair.items) == 2:
        return stored_into(mapping, pair.items[0], pair.items[1])
    return mapping


def sliced(value: Container | Sequence, bounds: ast.Slice) -> Value:
    """`xs[i:j]`: a list's slice is a list like it; a tuple's keeps its positions where
    the bounds are numbers."""
    if isinstance(value, Sequence):
        try:
            lower, upper, step = (None if b is None else ast.literal_eval(b)
                                  for b in (bounds.lower, bounds.upper, bounds.step))
            return Sequence(value.items[lower:upper:step])
        except (ValueError, TypeError):
            return Container(element_of(value))
    return value


def _view_entry(items: Items) -> Value:
    """An entry of `.items()`, `.values()` or `.keys()` of a dict or of optimizer state."""
    owner, view = items.owner, items.view
    if isinstance(owner, Marker) and owner.kind == "state_map":
        parameter = Tensor(True, ("a parameter",))
        state = Marker("param_state")
        return {"items": Sequence((parameter, state)), "values": state, "keys": parameter}[view]
    if isinstance(owner, Marker) and owner.kind == "param_state":
        tensor = Tensor(True, ("optimizer state",))
        return {"items": Sequence((None, tensor)), "values": tensor, "keys": None}[view]
    if isinstance(owner, Container):
        return {"items": Sequence((owner.key, owner.element)), "values": owner.element,
                "keys": owner.key}[view]
    return None


class ChainStep:
    """A step of a value's chain, rendered only when a finding is reported (unparsing
    every expression eagerly would cost more than the analysis)."""

    __slots__ = ("template", "parts")

    def __init__(self, template: str, *parts):
        self.template = template
        self.parts = parts

    def __str__(self) -> str:
        return self.template.format(*(p if isinstance(p, str) else source_snippet(p)
                                      for p in self.parts))


def source_step(node: ast.AST) -> ChainStep:
    return ChainStep("{}", node)


# ---- argument chains ---------------------------------------------------------------------
# A summary is shared by every call site with the same signature, but each call site's
# arguments came from somewhere else. So a summary is computed with each argument tensor's
# chain replaced by a placeholder, and the call site puts its own chain in its place (in
# the returned value and in the facts found inside): an explanation never follows the
# caller that happened to compute the summary first.

class ArgumentChain:
    """The chain an argument tensor brings into a summary: `slot` in the order of
    `argument_chains()`. It is always the oldest step of a chain (chains grow newest
    first) and is replaced before any finding is reported."""

    __slots__ = ("owner", "slot")

    def __init__(self, owner: object, slot: int):
        self.owner = owner  # the summary computation it belongs to
        self.slot = slot

    def __str__(self) -> str:
        return "an argument"  # only if a value escaped its summary (a returned closure)


def with_argument_placeholders(bindings: tuple, owner: object) -> tuple:
    """`bindings` with each tensor's chain a placeholder of `owner`, slot by slot in the
    order `argument_chains()` reads them."""
    slots = [0]

    def placed(value: Value) -> Value:
        kind = value.__class__
        if kind is Tensor:
            slot = slots[0]
            slots[0] += 1
            return Tensor(value.device, (ArgumentChain(owner, slot),), value.scheduled,
                          value.boolean, value.grouped)
        if kind is Sequence:
            return Sequence(tuple(placed(item) for item in value.items))
        if kind is Container:
            return Container(placed(value.element), value.mapping, placed(value.key),
                             tuple((key, placed(entry)) for key, entry in value.keyed))
        return value

    return tuple(placed(binding) for binding in bindings)


def argument_chains(bindings: tuple) -> list[tuple]:
    """The chains of the tensors in `bindings`, slot by slot."""
    chains: list[tuple] = []

    def read(value: Value) -> None:
        kind = value.__class__
        if kind is Tensor:
            chains.append(value.why)
        elif kind is Sequence:
            for item in value.items:
                read(item)
        elif kind is Container:
            read(value.element)
            read(value.key)
            for _, entry in value.keyed:
                read(entry)

    for binding in bindings:
        read(binding)
    return chains


def open_chain(chain: tuple, owner: object) -> bool:
    """Whether `chain` ends in a placeholder of `owner`."""
    return bool(chain) and chain[-1].__class__ is ArgumentChain and chain[-1].owner is owner


def filled_chain(chain: tuple, owner: object, chains: list[tuple]) -> tuple:
    """`chain` with a placeholder of `owner` replaced by the call site's chain."""
    if open_chain(chain, owner):
        return (*chain[:-1], *chains[chain[-1].slot])[:4]
    return chain


def filled(value: Value, owner: object, chains: list[tuple]) -> Value:
    """A summary's returned value with `owner`'s placeholders replaced by the call site's
    chains."""
    kind = value.__class__
    if kind is Tensor:
        if open_chain(value.why, owner):
            return value.changed(why=filled_chain(value.why, owner, chains))
        return value
    if kind is Sequence:
        return Sequence(tuple(filled(item, owner, chains) for item in value.items))
    if kind is Container:
        return Container(filled(value.element, owner, chains), value.mapping,
                         filled(value.key, owner, chains),
                         tuple((key, filled(entry, owner, chains))
                               for key, entry in value.keyed))
    if kind is Items:
        return Items(filled(value.owner, owner, chains), value.view)
    return value


def holds_placeholder(value: Value, owner: object) -> bool:
    """Whether a returned value carries a placeholder of `owner` (else it is returned
    to every call site as it is)."""
    kind = value.__class__
    if kind is Tensor:
        return open_chain(value.why, owner)
    if kind is Sequence:
        return any(holds_placeholder(item, owner) for item in value.items)
    if kind is Container:
        return holds_placeholder(value.element, owner) or \
            holds_placeholder(value.key, owner) or \
            any(holds_placeholder(entry, owner) for _, entry in value.keyed)
    if kind is Items:
        return holds_placeholder(value.owner, owner)
    return False


# ---- signatures --------------------------------------------------------------------------
# A summary is cached under its arguments' signatures: what of each value it depends on.

def without_class(signature: object) -> object:
    """A signature without the class a structural value belongs to."""
    if isinstance(signature, tuple) and signature[:1] == ("M",):
        return signature[:2]
    return signature


def value_signature(value: Value) -> object:
    """What of `value` a summary may depend on (None: nothing)."""
    kind = value.__class__
    if value is None:
        return None
    if kind is Tensor:
        return ("T", value.device, value.scheduled, value.boolean, value.grouped)
    if kind is Marker:
        ref = value.ref
        return ("M", value.kind, tuple(map(id, ref)) if ref.__class__ is tuple else id(ref))
    if kind is Sequence:
        return ("S", tuple(value_signature(v) for v in value.items))
    if kind is Container:
        return ("C", value_signature(value.element), value.mapping, value_signature(value.key),
                tuple((key, value_signature(entry)) for key, entry in value.keyed))
    if kind is Function:
        return ("F", tuple(id(t[0]) for t in value.targets))
    return None
