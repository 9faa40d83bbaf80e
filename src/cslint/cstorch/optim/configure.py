"""Optimizers and schedulers built from configuration dicts (`cstorch.optim.configure_*`).

The configure helpers of `cerebras.pytorch.optim`, which the 2.10 wheel no
longer ships; the documented behaviour (the seed reference) is the spec, older
releases decide what it leaves open. They turn the `optimizer:` section of a
Cerebras model zoo params file into objects:

* `configure_optimizer("AdamW", model.parameters(), learning_rate=..., ...)`;
* `configure_lr_scheduler(optimizer, learning_rate)` for the `learning_rate`
  entry (a number, a `{"scheduler": name, ...}` dict, or a list of them);
* `configure_scheduler(optimizer, {"SequentialLR": {...}})` for the newer,
  generic form, learning-rate and weight-decay schedulers alike.

Classes are looked up by name when called, so optimizers and schedulers
defined anywhere (a user's subclass of `cstorch.optim.Optimizer` or of a
scheduler base) are found as well as the library's. Names are matched without
regard to case. A name the library exports wins over user classes of the same
name (with a warning naming them); two user classes of one name are an error.
Classes whose name starts with "_", and abstract ones, are never matched.

Each class's constructor signature decides which keywords it gets. Bad
configurations raise ValueError naming the offending key or value and the
accepted ones; nothing in the caller's configuration is modified.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Mapping, Sequence

from cslint.cstorch.optim.lr_scheduler import LRScheduler
from cslint.cstorch.optim.optimizer import Optimizer
from cslint.cstorch.optim.scheduler import Scheduler
from cslint.cstorch.optim.weight_decay_scheduler import WeightDecayScheduler

__all__ = [
    "configure_lr_scheduler",
    "configure_optimizer",
    "configure_optimizer_params",
    "configure_scheduler",
    "configure_scheduler_params",
]

# The modules whose exported classes are "the library's" (and win name clashes).
_LIBRARY_MODULES = (
    "cslint.cstorch.optim",
    "cslint.cstorch.optim.lr_scheduler",
    "cslint.cstorch.optim.scheduler",
    "cslint.cstorch.optim.weight_decay_scheduler",
)
_BASES = (Optimizer, Scheduler, LRScheduler, WeightDecayScheduler)

# The classes configure_lr_scheduler builds around the configured schedules.
_CONSTANT_LR = "ConstantLR"
_SEQUENTIAL_LR = "SequentialLR"
_CHAINED_LR = "ChainedLR"
_SCALE_PER_PARAM_LR = "ScalePerParamLR"

# `main_scheduler` values of a learning_rate list (compared lower-cased). The
# documentation spells the chained one "ChainedLR"; production also took "chained".
_CHAINED_VALUES = ("chained", "chainedlr", "chainedscheduler")
_SEQUENTIAL_VALUES = ("sequential", "sequentiallr")

# An optimizer whose lr has no default still needs one when the learning rate
# is a schedule: the scheduler overwrites it at construction (production's value).
_PLACEHOLDER_LR = 0.1

_NESTED_LIST = "schedulers"
_NESTED_ONE = "scheduler"
_TAGS = "param_group_tags"


# -- finding classes by name ---------------------------------------------------


def _usable(cls: type, base: type) -> bool:
    return (
        issubclass(cls, base)
        and cls not in _BASES
        and not inspect.isabstract(cls)
        and not cls.__name__.startswith("_")
    )


def _library_classes(base: type) -> dict[str, tuple[str, type]]:
    """Lower-cased exported name -> (exported name, class), aliases included."""
    found: dict[str, tuple[str, type]] = {}
    for module_name in _LIBRARY_MODULES:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if isinstance(value, type) and not name.startswith("_") and _usable(value, base):
                found.setdefault(name.lower(), (name, value))
    return found


def _user_classes(base: type, library: set[type]) -> dict[str, list[type]]:
    """Lower-cased name -> the subclasses of `base`, defined anywhere, not in the library."""
    found: dict[str, list[type]] = {}
    seen: set[type] = set()
    pending = [base]
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass in seen:
                continue
            seen.add(subclass)
            pending.append(subclass)
            if subclass not in library and _usable(subclass, base):
                found.setdefault(subclass.__name__.lower(), []).append(subclass)
    return found


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _find_class(name, base: type, what: str, where: str, suffix: str = "") -> type:
    """The class called `name` (any case; `suffix` may be left off) among `base`'s."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: the {what} name must be a non-empty string, got {name!r}")
    library = _library_classes(base)
    users = _user_classes(base, {cls for _, cls in library.values()})
    keys = [name.lower()]
    if suffix and not keys[0].endswith(suffix.lower()):
        keys.append(keys[0] + suffix.lower())
    for key in keys:
        if key in library:
            cls = library[key][1]
            shadowed = users.get(key, [])
            if shadowed:
                warnings.warn(
                    f"{where}: {what} {name!r} is the library's {_qualified(cls)}; "
                    f"the class(es) of the same name {sorted(map(_qualified, shadowed))} "
                    "are not used (rename them to configure them)",
                    UserWarning,
                    stacklevel=4,
                )
            return cls
        if key in users:
            if len(users[key]) > 1:
                raise ValueError(
                    f"{where}: {what} {name!r} is ambiguous: "
                    f"{sorted(map(_qualified, users[key]))} share the name; rename one"
                )
            return users[key][0]
    known = sorted(
        {exported for exported, _ in library.values()}
        | {cls.__name__ for classes in users.values() for cls in classes}
    )
    also = f" (with or without the {suffix!r} suffix)" if suffix else ""
    raise ValueError(
        f"{where}: unknown {what} {name!r}; expected one of {known}{also}, "
        "in any case"
    )


# -- matching keywords to a constructor ----------------------------------------


def _constructor_parameters(cls: type) -> list[inspect.Parameter]:
    """The parameters of `cls.__init__` after self."""
    return list(inspect.signature(cls.__init__).parameters.values())[1:]


def _named(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    return [
        p for p in parameters
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def _takes_any_keyword(parameters: list[inspect.Parameter]) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _check_required(cls: type, parameters, given: Mapping, where: str, leading: int) -> None:
    """ValueError naming the required keywords missing from `given`."""
    named = _named(parameters)[leading:]
    missing = [
        p.name for p in named
        if p.default is inspect.Parameter.empty and p.name not in given
    ]
    if missing:
        raise ValueError(
            f"{where}: {cls.__name__} requires {missing}, which the configuration "
            f"does not give; it takes {[p.name for p in named]}"
        )


def _as_number(value, key: str, where: str) -> float:
    """A learning rate from a config: a number, or a string YAML left unparsed ("1e-3")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(
        f"{where}: {key} must be a number, a schedule dict or a list of schedule "
        f"dicts, got {value!r}"
    )


# -- optimizers ------------------------------------------------------------------


def configure_optimizer_params(optimizer_type: str, kwargs: dict) -> tuple[type, dict]:
    """The optimizer class named `optimizer_type` and the keywords to build it with.

    Args:
        optimizer_type: the class name, in any case ("adamw", "SGD", or a
            user subclass of `cstorch.optim.Optimizer` defined anywhere).
        kwargs: the configuration (e.g. a model zoo `optimizer:` section
            without its `optimizer_type`).

    The class's constructor must take `params` first. Of `kwargs`, the keywords
    the constructor names are kept; `learning_rate` becomes `lr` (or
    `learning_rate` where the class takes that). A `learning_rate` that is a
    schedule (a dict or list, for `configure_lr_scheduler`) leaves the class's
    default lr (0.1 where it has none): the scheduler sets the lr. The others
    are left out with one warning naming them and the class, as production
    does; a class taking `**kwargs` gets them all.

    Returns:
        (cls, cls_kwargs), with `cls(params, **cls_kwargs)` the optimizer.

    Raises:
        ValueError: unknown optimizer (the known ones are listed), a constructor
            that does not take `params` first, both `lr` and `learning_rate`,
            a learning rate that is not a number, or a required keyword missing.
    """
    where = "configure_optimizer"
    cls = _find_class(optimizer_type, Optimizer, "optimizer_type", where)
    parameters = _constructor_parameters(cls)
    named = _named(parameters)
    if not named or named[0].name != "params":
        raise ValueError(
            f"{where}: {cls.__name__} must take `params` as its first argument to be "
            f"configured; its constructor is {cls.__name__}{inspect.signature(cls.__init__)}"
        )
    remaining = dict(kwargs)
    learning_rate = remaining.pop("learning_rate", None)
    if learning_rate is not None and "lr" in remaining:
        raise ValueError(
            f"{where}: give either `learning_rate` or `lr`, not both "
            f"(got learning_rate={learning_rate!r}, lr={remaining['lr']!r})"
        )
    names = [p.name for p in named[1:]]
    takes_any = _takes_any_keyword(parameters)
    chosen = {name: remaining.pop(name) for name in names if name in remaining}
    if learning_rate is not None:
        lr_name = "learning_rate" if "learning_rate" in names else "lr"
        is_schedule = isinstance(learning_rate, (Mapping, list, tuple))
        if lr_name in names or takes_any:
            if not is_schedule:
                chosen[lr_name] = _as_number(learning_rate, "learning_rate", where)
            elif lr_name in names:
                lr_parameter = named[1 + names.index(lr_name)]
                if lr_parameter.default is inspect.Parameter.empty:
                    chosen[lr_name] = _PLACEHOLDER_LR
        elif not is_schedule:
            remaining["learning_rate"] = learning_rate
    if takes_any:
        chosen.update(remaining)
    elif remaining:
        warnings.warn(
            f"{where}: {cls.__name__} does not take {sorted(remaining)}; they are not "
            f"passed to it (it takes {names})",
            UserWarning,
            stacklevel=3,
        )
    _check_required(cls, parameters, chosen, where, leading=1)
    return cls, chosen


def configure_optimizer(optimizer_type: str, params, **kwargs) -> Optimizer:
    """The optimizer named `optimizer_type` over `params`, configured from `kwargs`.

    `configure_optimizer_params(optimizer_type, kwargs)` chooses the class and
    its keywords (see there: case-insensitive names, user subclasses,
    `learning_rate` -> `lr`, unknown keywords warned and left out).
    """
    cls, cls_kwargs = configure_optimizer_params(optimizer_type, kwargs)
    return cls(params, **cls_kwargs)


# -- building one scheduler ----------------------------------------------------------


def _takes_optimizer_first(cls: type) -> bool:
    named = _named(_constructor_parameters(cls))
    return bool(named) and named[0].name == "optimizer"


def _check_scheduler_keywords(cls: type, given: Mapping, where: str) -> None:
    """ValueError for keywords the scheduler does not take, or required ones missing."""
    parameters = _constructor_parameters(cls)
    leading = 1 if _takes_optimizer_first(cls) else 0
    accepted = [p.name for p in _named(parameters)[leading:]]
    if not _takes_any_keyword(parameters):
        unknown = sorted(set(given) - set(accepted))
        if unknown:
            raise ValueError(
                f"{where}: {cls.__name__} does not take {unknown}; it takes {accepted}"
            )
    _check_required(cls, parameters, given, where, leading)


def _construct(cls: type, optimizer, kwargs: dict) -> Scheduler:
    # ChainedLR and its kin take their schedulers, not the optimizer, first.
    if _takes_optimizer_first(cls):
        return cls(optimizer, **kwargs)
    return cls(**kwargs)


def _milestones(schedulers: Sequence[Scheduler], names: Sequence[str], where: str) -> list[int]:
    """Where each scheduler after the first starts: the running sum of total_iters."""
    milestones = []
    start = 0
    for index, (scheduler, name) in enumerate(zip(schedulers[:-1], names)):
        total_iters = getattr(scheduler, "total_iters", None)
        if total_iters is None:
            raise ValueError(
                f"{where}[{index}] ({name}) has no total_iters: every scheduler but the "
                "last of a sequence needs one, as the next one starts after it "
                "(give total_iters, or the milestones)"
            )
        if not isinstance(total_iters, int) or isinstance(total_iters, bool) or total_iters < 0:
            raise ValueError(
                f"{where}[{index}] ({name}) has total_iters={total_iters!r}; "
                "a sequence needs a non-negative integer"
            )
        start += total_iters
        milestones.append(start)
    return milestones


# -- the generic form: {Name: kwargs} ---------------------------------------------------


def _entry(config, where: str) -> tuple[str, dict]:
    """The (name, kwargs) of a `{Name: kwargs}` scheduler entry."""
    if not isinstance(config, Mapping) or len(config) != 1:
        shown = sorted(map(str, config)) if isinstance(config, Mapping) else repr(config)
        raise ValueError(
            f"{where}: a scheduler is configured as a dict with a single key, the "
            f"scheduler's name, mapping to its arguments; got {shown}"
        )
    (name, arguments), = config.items()
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ValueError(
            f"{where}: the arguments of {name!r} must be a dict of keyword "
            f"arguments, got {arguments!r}"
        )
    return name, dict(arguments)


def _build(optimizer, config, where: str, nested: bool = False, parent_tags=None) -> Scheduler:
    name, kwargs = _entry(config, where)
    cls = _find_class(name, Scheduler, "scheduler", where)
    where = f"{where}[{name!r}]"
    if nested:
        # As in production: the schedulers inside one share its tags.
        if _TAGS in kwargs:
            raise ValueError(
                f"{where}: a nested scheduler takes the {_TAGS} of the scheduler "
                f"around it; set {_TAGS} there, not here (got {kwargs[_TAGS]!r})"
            )
        if parent_tags is not None:
            kwargs[_TAGS] = parent_tags
    accepted = {p.name for p in _named(_constructor_parameters(cls))}
    tags = kwargs.get(_TAGS)
    if _NESTED_LIST in accepted:
        entries = kwargs.get(_NESTED_LIST)
        if not isinstance(entries, (list, tuple)) or not entries:
            raise ValueError(
                f"{where}: {cls.__name__} takes `{_NESTED_LIST}`, a non-empty list of "
                f"scheduler dicts ({{Name: arguments}}), got {entries!r}"
            )
        entries_where = f"{where}[{_NESTED_LIST!r}]"
        schedulers = [
            _build(optimizer, entry, f"{entries_where}[{index}]", True, tags)
            for index, entry in enumerate(entries)
        ]
        kwargs[_NESTED_LIST] = schedulers
        if "milestones" in accepted and "milestones" not in kwargs:
            names = [type(scheduler).__name__ for scheduler in schedulers]
            kwargs["milestones"] = _milestones(schedulers, names, entries_where)
    elif _NESTED_ONE in accepted:
        kwargs[_NESTED_ONE] = _build(
            optimizer, kwargs.get(_NESTED_ONE), f"{where}[{_NESTED_ONE!r}]", True, tags
        )
    _check_scheduler_keywords(cls, kwargs, where)
    return _construct(cls, optimizer, kwargs)


def configure_scheduler(optimizer, schedulers_params: dict) -> Scheduler:
    """The scheduler configured by `{Name: {argument: value, ...}}`, on `optimizer`.

    Any scheduler, learning-rate or weight-decay, the library's or a user's
    subclass of a cstorch scheduler base; the name in any case (exact names
    only: "Constant" could be ConstantLR or ConstantWD). The arguments are the
    constructor's, except the optimizer.

    Schedulers built from others nest their dicts:

    * a `schedulers` list (SequentialLR, SequentialWD, ChainedLR, ...): each
      element is itself `{Name: arguments}`; where the class also takes
      `milestones` and they are not given, they are the running sums of the
      elements' `total_iters` (every element but the last needs one);
    * a `scheduler` dict (ScalePerParamLR, ScalePerParamWD): the wrapped one.

    Nested schedulers take the `param_group_tags` of the one around them
    (giving their own is an error, as in production).

    Raises:
        ValueError: an entry that is not a one-key dict, an unknown scheduler
            (the known ones are listed), keywords the class does not take or
            required ones missing (naming the class and its arguments), or a
            sequence element without total_iters.
    """
    return _build(optimizer, schedulers_params, "configure_scheduler: schedulers_params")


# -- the learning_rate form: {"scheduler": name, ...} -----------------------------------


def configure_scheduler_params(learning_rate: dict) -> tuple[type, dict]:
    """The scheduler class and keywords of one `learning_rate` schedule dict.

    Args:
        learning_rate: `{"scheduler": name, argument: value, ...}`; the name in
            any case, with or without the "LR" suffix ("Linear", "linearlr" and
            "LinearLR" all name LinearLR), as production accepts.

    Returns:
        (cls, cls_kwargs), with `cls(optimizer, **cls_kwargs)` the scheduler.

    Raises:
        ValueError: no `scheduler` key, an unknown scheduler (the known ones are
            listed), one built from other schedulers (configure those with
            `configure_scheduler` or a `learning_rate` list), or keywords the
            class does not take or required ones missing.
    """
    return _schedule_params(learning_rate, "configure_scheduler_params")


def _schedule_params(learning_rate, where: str) -> tuple[type, dict]:
    if not isinstance(learning_rate, Mapping):
        raise ValueError(
            f"{where}: a schedule is a dict with the key 'scheduler', got {learning_rate!r}"
        )
    kwargs = dict(learning_rate)
    if "scheduler" not in kwargs:
        raise ValueError(
            f"{where}: a schedule dict needs the key 'scheduler' naming the scheduler "
            f"class; got the keys {sorted(map(str, kwargs))}"
        )
    cls = _find_class(kwargs.pop("scheduler"), Scheduler, "scheduler", where, suffix="LR")
    accepted = {p.name for p in _named(_constructor_parameters(cls))}
    if not _takes_optimizer_first(cls) or accepted & {_NESTED_LIST, _NESTED_ONE}:
        raise ValueError(
            f"{where}: {cls.__name__} is built from other schedulers; configure it "
            f"with configure_scheduler({{{cls.__name__!r}: ...}}), or give the "
            "learning_rate as a list of schedule dicts"
        )
    _check_scheduler_keywords(cls, kwargs, where)
    return cls, kwargs


def _learning_rate_entries(learning_rate, where: str) -> list[Mapping]:
    if isinstance(learning_rate, Mapping):
        return [learning_rate]
    if isinstance(learning_rate, (list, tuple)):
        if not learning_rate:
            raise ValueError(
                f"{where}: learning_rate is an empty list; give at least one schedule"
            )
        for index, entry in enumerate(learning_rate):
            if not isinstance(entry, Mapping):
                raise ValueError(
                    f"{where}: learning_rate[{index}] must be a schedule dict with the "
                    f"key 'scheduler', got {entry!r}"
                )
        return list(learning_rate)
    value = _as_number(learning_rate, "learning_rate", where)
    return [{"scheduler": _CONSTANT_LR, "learning_rate": value}]


def _main_scheduler(entries: list[Mapping], where: str) -> str | None:
    """'chained', 'sequential' or None, from the entries' `main_scheduler` keys."""
    given = [entry["main_scheduler"] for entry in entries if "main_scheduler" in entry]
    accepted = (*_CHAINED_VALUES, *_SEQUENTIAL_VALUES)
    for value in given:
        if not isinstance(value, str) or value.lower() not in accepted:
            raise ValueError(
                f"{where}: main_scheduler {value!r} is not one of {list(accepted)} "
                "(in any case)"
            )
    kinds = {"chained" if value.lower() in _CHAINED_VALUES else "sequential" for value in given}
    if len(kinds) > 1:
        raise ValueError(
            f"{where}: the learning_rate entries give conflicting main_scheduler values "
            f"{sorted(set(given))}; give the same one"
        )
    return kinds.pop() if kinds else None


def _check_adjustments(adjust_learning_rate, optimizer, where: str) -> None:
    if not isinstance(adjust_learning_rate, Mapping):
        raise ValueError(
            f"{where}: adjust_learning_rate must be a dict of layer type -> lr "
            f"scaling factor, got {adjust_learning_rate!r}"
        )
    for layer_type, factor in adjust_learning_rate.items():
        if not isinstance(factor, (int, float)) or isinstance(factor, bool):
            raise ValueError(
                f"{where}: adjust_learning_rate[{layer_type!r}] must be a number "
                f"(the lr scaling factor), got {factor!r}"
            )
    if not any("adjust_learning_rate" in group for group in optimizer.param_groups):
        # The wrapper reads each group's factor; the dict cannot say which
        # parameters are of which layer type.
        warnings.warn(
            f"{where}: adjust_learning_rate names {sorted(map(str, adjust_learning_rate))}, "
            "but no param group of the optimizer has an 'adjust_learning_rate' factor, "
            f"so {_SCALE_PER_PARAM_LR} scales every group by 1.0; put each layer "
            "type's parameters in a group with its factor",
            UserWarning,
            stacklevel=3,
        )


def configure_lr_scheduler(optimizer, learning_rate, adjust_learning_rate=None):
    """The learning-rate scheduler a model zoo `learning_rate` entry describes.

    `learning_rate` is one of:

    * a number (or a numeric string, as YAML leaves "1e-3"): ConstantLR with
      that learning rate;
    * a dict `{"scheduler": name, argument: value, ...}`: that scheduler (see
      `configure_scheduler_params` for the name);
    * a list of such dicts: a SequentialLR over them, each one starting when the
      previous one's `total_iters` are done (every dict but the last needs
      `total_iters`); or, when an entry has `main_scheduler: ChainedLR` (also
      "chained", any case), a ChainedLR over them. `main_scheduler:
      SequentialLR` (or "sequential") asks for the default explicitly;
    * None: no scheduler (None is returned). Unlike production, a learning
      rate of 0 gives a ConstantLR of 0, not None.

    `adjust_learning_rate` (layer type -> lr scaling factor), when given and
    not empty, wraps the result in ScalePerParamLR, which scales each param
    group's lr by the group's own `adjust_learning_rate` factor, as in
    production: the groups must carry the factors (a warning says so when
    none does). A chained schedule cannot be scaled (production's rule).

    Raises:
        ValueError: a learning rate of another type, an empty list, an entry
            that is not a dict, a bad or conflicting `main_scheduler`, a
            weight-decay scheduler, a sequence entry without total_iters, a
            chained schedule with adjust_learning_rate, or a bad schedule dict.
    """
    where = "configure_lr_scheduler"
    if learning_rate is None:
        return None
    entries = _learning_rate_entries(learning_rate, where)
    main = _main_scheduler(entries, where)
    scaled = bool(adjust_learning_rate) or (
        adjust_learning_rate is not None and not isinstance(adjust_learning_rate, Mapping)
    )
    if scaled:
        _check_adjustments(adjust_learning_rate, optimizer, where)
    if main == "chained" and scaled:
        raise ValueError(
            f"{where}: main_scheduler ChainedLR cannot be combined with "
            "adjust_learning_rate; use a sequence, or drop adjust_learning_rate"
        )

    schedulers = []
    names = []
    for index, entry in enumerate(entries):
        entry_where = f"{where}: learning_rate[{index}]" if len(entries) > 1 else where
        entry = {key: value for key, value in entry.items() if key != "main_scheduler"}
        cls, kwargs = _schedule_params(entry, entry_where)
        if not issubclass(cls, LRScheduler):
            raise ValueError(
                f"{entry_where}: {cls.__name__} is not a learning-rate scheduler (a "
                f"subclass of cstorch.optim.lr_scheduler.LRScheduler); learning_rate "
                "takes those only"
            )
        schedulers.append(cls(optimizer, **kwargs))
        names.append(cls.__name__)

    if main == "chained":
        chained = _find_class(_CHAINED_LR, LRScheduler, "scheduler", where)
        return _construct(chained, optimizer, {_NESTED_LIST: schedulers})
    if len(schedulers) == 1:
        scheduler = schedulers[0]
    else:
        sequential = _find_class(_SEQUENTIAL_LR, LRScheduler, "scheduler", where)
        milestones = _milestones(schedulers, names, f"{where}: learning_rate")
        scheduler = _construct(
            sequential, optimizer, {_NESTED_LIST: schedulers, "milestones": milestones}
        )
    if scaled:
        scale_per_param = _find_class(_SCALE_PER_PARAM_LR, LRScheduler, "scheduler", where)
        scheduler = _construct(scale_per_param, optimizer, {_NESTED_ONE: scheduler})
    return scheduler
