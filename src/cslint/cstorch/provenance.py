"""Which tensors hold device values, and why.

On a Cerebras system parameters, gradients, optimizer state, scheduled
hyperparameters and everything computed from them live on the device: the
host cannot read them while the step is being traced. A CPU run cannot tell a
device value from a host constant by looking at the tensor, so strict mode
records the origin of each device value here, keyed by tensor identity.

The registry holds weak references only: it never keeps a tensor alive, and the
entries of dead tensors are swept in bulk once it has doubled in size. A tensor attribute would be cheaper to read
but would travel into `torch.save` pickles and break `weights_only` loading.
"""

from __future__ import annotations

import weakref

import torch

__all__ = [
    "Origin",
    "PARAMETER",
    "origin_of",
    "mark",
    "mark_computed",
    "origin_among",
    "origin_of_slice",
    "registry_get",
    "registry",
    "TensorRef",
    "inserted",
    "mark_computed_among",
]


class Origin:
    """Why a tensor is a device value, phrased for error messages.

    `scheduled` is true for scheduled hyperparameters (the lr, any group value
    a scheduler drives) and values computed from them: reading one as a Python
    number is CS205 rather than CS204.
    """

    __slots__ = ("description", "scheduled", "_derived")

    def __init__(self, description: str, scheduled: bool = False) -> None:
        self.description = description
        self.scheduled = scheduled
        self._derived: Origin | None = None

    def derived(self) -> Origin:
        """The origin of a value computed from this one (cached: ops are hot)."""
        if self._derived is None:
            if self.description.startswith("a value computed from "):
                self._derived = self
            else:
                self._derived = Origin(
                    f"a value computed from {self.description}", self.scheduled
                )
        return self._derived

    def __repr__(self) -> str:
        return f"Origin({self.description!r}, scheduled={self.scheduled})"


PARAMETER = Origin("a parameter")

_Tensor = torch.Tensor


class TensorRef(weakref.ref):
    """A weak reference to a device value, with its origin. No callback: a
    callback per temporary costs more than the op it marks; dead entries are
    swept in bulk instead (`_inserted`)."""

    __slots__ = ("origin",)


# id(tensor) -> TensorRef. A plain dict keyed by id is several times faster to
# query than WeakKeyDictionary-style wrappers; the ref check (`ref() is value`)
# guards against a dead tensor's id being reused by a new one.
registry: dict[int, TensorRef] = {}


# For the guard's hot path, which inlines `origin_of` and `mark_computed`.
registry_get = registry.get

# Sweep the dead entries once the registry has doubled since the last sweep.
_MIN_SWEEP_SIZE = 65536
_sweep_at = _MIN_SWEEP_SIZE


def inserted() -> None:
    """After an insertion: drop the entries of tensors that died, when due."""
    global _sweep_at
    if len(registry) > _sweep_at:
        dead = [key for key, ref in registry.items() if ref() is None]
        for key in dead:
            del registry[key]
        _sweep_at = max(2 * len(registry), _MIN_SWEEP_SIZE)


def _new_ref(tensor: torch.Tensor, origin: Origin) -> TensorRef:
    ref = TensorRef(tensor)
    ref.origin = origin
    return ref


def origin_of(value: object) -> Origin | None:
    """The origin of a device value, or None for host values and non-tensors."""
    ref = registry.get(id(value))
    if ref is not None and ref() is value:
        return ref.origin
    # Parameters of any module are device values even when no optimizer or
    # trace has seen them yet. (Plain tensors skip the slow metaclass check.)
    if type(value) is not _Tensor and isinstance(value, torch.nn.Parameter):
        return PARAMETER
    return None


def mark(tensor: torch.Tensor, origin: Origin) -> None:
    """Record `tensor` as a device value.

    A tensor keeps its first origin (the most telling one for messages),
    except that a scheduled origin replaces an unscheduled one.
    """
    key = id(tensor)
    ref = registry.get(key)
    if ref is not None and ref() is tensor:
        if ref.origin.scheduled or not origin.scheduled:
            return
    registry[key] = _new_ref(tensor, origin)
    inserted()


def mark_computed(tensor: torch.Tensor, origin: Origin) -> None:
    """Record the output of an op with a device-value input.

    An output that already is a device value keeps its origin: a parameter
    updated in place with an lr-scaled step stays "a parameter", it does not
    become a scheduled hyperparameter.
    """
    key = id(tensor)
    ref = registry.get(key)
    if ref is not None and ref() is tensor:
        return
    if type(tensor) is not _Tensor and isinstance(tensor, torch.nn.Parameter):
        return
    registry[key] = _new_ref(tensor, origin)
    inserted()


# List versions of origin_of/mark_computed for the `_foreach_*` ops, which
# pass lists of every parameter: one call per list, not one per tensor.


def origin_among(values) -> Origin | None:
    """The origin of the first device value among `values`.

    Lists passed to one op hold tensors of one role (all parameters, all
    exp_avg states), so the first origin found speaks for the list; stopping
    there keeps `_foreach_*` ops cheap.
    """
    get = registry.get
    for value in values:
        if not isinstance(value, _Tensor):
            if type(value) is slice:  # `p[0, :t]`: a bound read on the host
                origin = origin_of_slice(value)
                if origin is not None:
                    return origin
            continue
        ref = get(id(value))
        if ref is not None and ref() is value:
            return ref.origin
        if type(value) is not _Tensor and isinstance(value, torch.nn.Parameter):
            return PARAMETER
    return None


def origin_of_slice(value: slice) -> Origin | None:
    """The origin of the first device value among a slice's bounds."""
    for bound in (value.start, value.stop, value.step):
        if isinstance(bound, _Tensor):
            origin = origin_of(bound)
            if origin is not None:
                return origin
    return None


def mark_computed_among(values, origin: Origin) -> None:
    """`mark_computed` for each tensor in `values`."""
    get = registry.get
    for value in values:
        if not isinstance(value, _Tensor):
            continue
        key = id(value)
        ref = get(key)
        if ref is not None and ref() is value:
            continue
        if type(value) is not _Tensor and isinstance(value, torch.nn.Parameter):
            continue
        registry[key] = _new_ref(value, origin)
    inserted()
