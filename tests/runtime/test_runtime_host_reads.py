"""CS201-CS206: host conversions of device values inside an optimizer step.

Each violating body raises its code at the marked line; each compliant
look-alike runs five steps clean.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cslint.cstorch as cstorch
from cslint import advice
from cslint.cstorch import source_position
from cstorch_helpers import BodyOptimizer, assert_compliance_error, make_params, run_steps

HERE = __file__


# -- CS201: truth value in an if/elif test --------------------------------------


def if_on_state(opt, group, p, state):
    if state["exp_avg"].sum() > 0:  # cs201-if
        pass


def elif_on_grad(opt, group, p, state):
    if group["momentum"] == 0:
        pass
    elif p.grad.norm() > 1.0:  # cs201-elif
        pass


def if_with_and(opt, group, p, state):
    if group["momentum"] > 0 and p.grad.max() > -100:  # cs201-and
        pass


def if_not(opt, group, p, state):
    if not state["step"]:  # cs201-not
        pass


def if_on_lr(opt, group, p, state):
    if group["lr"] > 0.001:  # cs201-lr
        pass


def if_membership(opt, group, p, state):
    if 0.5 in p.grad:  # cs201-in
        pass


# -- CS202: while tests and range() ------------------------------------------------


def while_on_state(opt, group, p, state):
    while state["exp_avg"].abs().max() > -1.0:  # cs202-while
        break


def range_of_step(opt, group, p, state):
    for _ in range(state["step"].int()):  # cs202-range
        pass


# -- CS203: truth value anywhere else ---------------------------------------------


def and_expression(opt, group, p, state):
    flag = p.grad.sum() > 0 and group["momentum"] > 0  # cs203-and
    del flag


def ternary(opt, group, p, state):
    scale = 2.0 if p.grad.mean() > 0 else 1.0  # cs203-ternary
    del scale


def builtin_max(opt, group, p, state):
    biggest = max(p.grad.max(), state["exp_avg"].max())  # cs203-max
    del biggest


def assert_on_tensor(opt, group, p, state):
    assert torch.isfinite(p.grad).all()  # cs203-assert


# -- CS204: values forced to the host ----------------------------------------------


def item(opt, group, p, state):
    norm = p.grad.norm().item()  # cs204-item
    del norm


def float_of_state(opt, group, p, state):
    count = float(state["step"])  # cs204-float
    del count


def int_of_state(opt, group, p, state):
    count = int(state["step"])  # cs204-int
    del count


def complex_of_state(opt, group, p, state):
    value = complex(state["step"])  # cs204-complex
    del value


def tolist(opt, group, p, state):
    values = p.grad.tolist()  # cs204-tolist
    del values


def to_numpy(opt, group, p, state):
    values = p.grad.numpy()  # cs204-numpy
    del values


def numpy_array(opt, group, p, state):
    values = np.asarray(p.grad)  # cs204-array
    del values


def format_tensor(opt, group, p, state):
    text = f"norm {p.grad.norm():.3f}"  # cs204-format
    del text


def print_tensor(opt, group, p, state):
    print(p.grad)  # cs204-print


def repr_tensor(opt, group, p, state):
    text = repr(state["exp_avg"])  # cs204-repr
    del text


def equal(opt, group, p, state):
    same = torch.equal(p.grad, state["exp_avg"])  # cs204-equal
    del same


def allclose(opt, group, p, state):
    close = torch.allclose(p.grad, state["exp_avg"])  # cs204-allclose
    del close


def list_index(opt, group, p, state):
    choice = [0.1, 0.2, 0.3][state["step"].long()]  # cs204-index
    del choice


def alpha_from_state(opt, group, p, state):
    p.add_(p.grad, alpha=state["step"])  # cs204-alpha
    del p


def slice_bound(opt, group, p, state):
    head = p.grad.view(-1)[: state["step"].long() + 1]  # cs204-slice
    del head


def full_of_state(opt, group, p, state):
    filled = torch.full((2,), state["step"])  # cs204-full
    del filled


# -- CS205: scheduled hyperparameter read as a Python number ---------------------


def alpha_lr(opt, group, p, state):
    p.add_(p.grad, alpha=-group["lr"])  # cs205-alpha


def value_lr(opt, group, p, state):
    p.addcdiv_(p.grad, p.grad.abs() + 1, value=-group["lr"])  # cs205-value


def full_of_lr(opt, group, p, state):
    filled = torch.full(p.shape, group["lr"])  # cs205-full
    del filled


# -- CS206: data-dependent shapes ----------------------------------------------------


def nonzero(opt, group, p, state):
    indices = torch.nonzero(p.grad)  # cs206-nonzero
    del indices


def boolean_mask(opt, group, p, state):
    positives = p.grad[p.grad > 0]  # cs206-mask
    del positives


def unique(opt, group, p, state):
    values = torch.unique(p.grad)  # cs206-unique
    del values


def masked_select(opt, group, p, state):
    values = torch.masked_select(p.grad, p.grad > 0)  # cs206-masked-select
    del values


def one_argument_where(opt, group, p, state):
    indices = torch.where(p.grad > 0)  # cs206-where
    del indices


VIOLATIONS = [
    ("CS201", if_on_state, "cs201-if"),
    ("CS201", elif_on_grad, "cs201-elif"),
    ("CS201", if_with_and, "cs201-and"),
    ("CS201", if_not, "cs201-not"),
    ("CS201", if_on_lr, "cs201-lr"),
    ("CS201", if_membership, "cs201-in"),
    ("CS202", while_on_state, "cs202-while"),
    ("CS202", range_of_step, "cs202-range"),
    ("CS203", and_expression, "cs203-and"),
    ("CS203", ternary, "cs203-ternary"),
    ("CS203", builtin_max, "cs203-max"),
    ("CS203", assert_on_tensor, "cs203-assert"),
    ("CS204", item, "cs204-item"),
    ("CS204", float_of_state, "cs204-float"),
    ("CS204", int_of_state, "cs204-int"),
    ("CS204", complex_of_state, "cs204-complex"),
    ("CS204", tolist, "cs204-tolist"),
    ("CS204", to_numpy, "cs204-numpy"),
    ("CS204", numpy_array, "cs204-array"),
    ("CS204", format_tensor, "cs204-format"),
    ("CS204", print_tensor, "cs204-print"),
    ("CS204", repr_tensor, "cs204-repr"),
    ("CS204", equal, "cs204-equal"),
    ("CS204", allclose, "cs204-allclose"),
    ("CS204", list_index, "cs204-index"),
    ("CS204", alpha_from_state, "cs204-alpha"),
    ("CS204", slice_bound, "cs204-slice"),
    ("CS204", full_of_state, "cs204-full"),
    ("CS205", alpha_lr, "cs205-alpha"),
    ("CS205", value_lr, "cs205-value"),
    ("CS205", full_of_lr, "cs205-full"),
    ("CS206", nonzero, "cs206-nonzero"),
    ("CS206", boolean_mask, "cs206-mask"),
    ("CS206", unique, "cs206-unique"),
    ("CS206", masked_select, "cs206-masked-select"),
    ("CS206", one_argument_where, "cs206-where"),
]


@pytest.mark.parametrize(
    "code, body, marker", VIOLATIONS, ids=[marker for _, _, marker in VIOLATIONS]
)
def test_violation_raises_its_code_at_the_line(code, body, marker):
    optimizer = BodyOptimizer(make_params(), body)
    error = assert_compliance_error(
        code, HERE, marker, optimizer.step, owner="BodyOptimizer.step"
    )
    assert isinstance(error, cstorch.TracedValueError)


@pytest.mark.parametrize(
    "code, body, marker", VIOLATIONS, ids=[marker for _, _, marker in VIOLATIONS]
)
def test_violation_runs_with_strict_off(code, body, marker):
    optimizer = BodyOptimizer(make_params(), body)
    with cstorch.strict(False):
        run_steps(optimizer, steps=2)


def test_messages_say_where_the_device_value_comes_from():
    cases = [
        (if_on_state, "optimizer state 'exp_avg'"),
        (elif_on_grad, "a gradient"),
        (alpha_lr, "the scheduled hyperparameter 'lr'"),
        (if_not, "optimizer state 'step'"),
    ]
    for body, origin in cases:
        with pytest.raises(cstorch.ComplianceError, match=origin):
            BodyOptimizer(make_params(), body).step()


def test_fix_hints_name_the_compliant_pattern():
    with pytest.raises(cstorch.ComplianceError) as caught:
        BodyOptimizer(make_params(), alpha_lr).step()
    assert "p.add_(-lr * g)" in str(caught.value)
    with pytest.raises(cstorch.ComplianceError) as caught:
        BodyOptimizer(make_params(), if_on_state).step()
    assert "torch.where" in str(caught.value)
    with pytest.raises(cstorch.ComplianceError) as caught:
        BodyOptimizer(make_params(), item).step()
    assert "step_closure" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "fix"),
    [
        (if_on_state, advice.TRUTH_TEST),
        (while_on_state, advice.TRUTH_TEST),
        (ternary, advice.TRUTH_TEST),
        (range_of_step, advice.TENSOR_LOOP_BOUND),
        (item, advice.HOST_READ),
        (print_tensor, advice.HOST_READ),
        (list_index, advice.TENSOR_AS_INDEX),
        (alpha_from_state, advice.TENSOR_AS_NUMBER),
        (alpha_lr, advice.SCHEDULED_AS_SCALAR_ARGUMENT),
        (boolean_mask, advice.BOOLEAN_MASK),
        (nonzero, advice.DATA_DEPENDENT_SHAPE),
        (masked_select, advice.DATA_DEPENDENT_SHAPE),
    ],
)
def test_fix_comes_from_advice(body, fix):
    with pytest.raises(cstorch.ComplianceError) as caught:
        BodyOptimizer(make_params(), body).step()
    assert caught.value.fix == fix


# -- compliant look-alikes: five steps clean ----------------------------------------


def host_constant_tensors(opt, group, p, state):
    # Tensors built in the step from Python values are host constants, even
    # moved to the parameter's device (production RAdam passes alpha=1 - beta1).
    beta1 = torch.tensor(0.9)
    state["exp_avg"].mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
    threshold = torch.tensor(0.5, device=p.device).to(p.device)
    if threshold < 1:
        state["exp_avg"].mul_(float(threshold) + 0.5)
    zeros = torch.zeros_like(p)
    if zeros.sum() == 0:
        pass


def python_conditions(opt, group, p, state):
    if group["momentum"] != 0:
        state["exp_avg"].mul_(group["momentum"]).add_(p.grad)
    if p.grad is None:
        return
    if p.dim() > 1 and p.shape[0] > 2:
        state["exp_avg"].mul_(1.0)
    for _ in range(3):
        state["step"].add_(1)
    if len(state) == 3 and "exp_avg" in state:
        pass
    if state["count"] == 0:  # a Python number in state, read only
        pass


def tensor_selections(opt, group, p, state):
    update = torch.where(p.grad > 0, p.grad, torch.zeros_like(p.grad))
    clipped = torch.clamp(update, -1.0, 1.0)
    state["exp_avg"].masked_fill_(p.grad.abs() > 10, 0.0)
    state["exp_avg"].copy_(torch.maximum(state["exp_avg"], clipped))
    p.add_(-group["lr"] * clipped)
    p.addcdiv_(-group["lr"] * state["exp_avg"], state["exp_avg"].abs() + 1.0)


@cstorch.step_closure
def log_norm(norm, history):
    history.append(f"{norm:.4f} {norm.item():.4f} {float(norm)}")
    print(norm)


def logging_in_step_closure(opt, group, p, state):
    log_norm(p.grad.norm(), opt.logged)


@pytest.mark.parametrize(
    "body",
    [host_constant_tensors, python_conditions, tensor_selections, logging_in_step_closure],
)
def test_compliant_look_alike_runs_five_steps(body):
    optimizer = BodyOptimizer(make_params(), body)
    optimizer.logged = []
    run_steps(optimizer, steps=5)
    if body is logging_in_step_closure:
        assert len(optimizer.logged) == 5 * 2


def test_step_closure_returns_none_like_production():
    @cstorch.step_closure
    def closure(value):
        return value.item()

    assert closure(torch.tensor(1.0)) is None
    assert closure.is_step_closure


def test_checkpoint_closure_runs_host_side_on_checkpoint_steps(cpu_backend):
    saved = []

    @cstorch.checkpoint_closure
    def save(value):
        saved.append(value.item())

    def body(opt, group, p, state):
        save(state["step"])

    optimizer = BodyOptimizer(make_params(shapes=((2,),)), body)
    loader = cstorch.utils.data.DataLoader(lambda: [torch.zeros(1)] * 4)
    for _ in cstorch.utils.data.DataExecutor(loader, num_steps=4, checkpoint_steps=2):
        optimizer.step()
    assert saved == [0.0, 0.0]  # steps 2 and 4


def test_loss_closure_runs_outside_the_guard():
    params = make_params()
    seen = []

    def closure():
        loss = sum((p**2).sum() for p in params)
        seen.append(loss.item())  # allowed: the closure is host-side
        return loss

    def body(opt, group, p, state):
        p.sub_(group["lr"] * p.grad)

    optimizer = BodyOptimizer(params, body)
    loss = optimizer.step(closure)
    assert len(seen) == 1 and loss.item() == pytest.approx(seen[0])


def test_strict_false_is_a_global_setter_and_a_context_manager():
    assert cstorch.is_strict()
    with cstorch.strict(False):
        assert not cstorch.is_strict()
        BodyOptimizer(make_params(), item).step()
        with cstorch.strict(True):
            with pytest.raises(cstorch.ComplianceError):
                BodyOptimizer(make_params(), item).step()
        assert not cstorch.is_strict()
    assert cstorch.is_strict()

    try:
        cstorch.strict(False)
        assert not cstorch.is_strict()
        BodyOptimizer(make_params(), item).step()
    finally:
        cstorch.strict(True)
    assert cstorch.is_strict()


def test_strict_off_inside_a_step_allows_a_read():
    def body(opt, group, p, state):
        with cstorch.strict(False):
            p.grad.norm().item()

    run_steps(BodyOptimizer(make_params(), body), steps=1)


def test_python_310_fallback_reports_truth_values_as_if_tests(monkeypatch):
    # Without instruction positions (Python 3.10) a truth value counts as an
    # `if` test, and range() is recognised on the line's text.
    monkeypatch.setattr(source_position, "HAS_INSTRUCTION_POSITIONS", False)
    assert_compliance_error(
        "CS201", HERE, "cs202-while", BodyOptimizer(make_params(), while_on_state).step
    )
    assert_compliance_error(
        "CS201", HERE, "cs203-ternary", BodyOptimizer(make_params(), ternary).step
    )
    assert_compliance_error(
        "CS202", HERE, "cs202-range", BodyOptimizer(make_params(), range_of_step).step
    )


def test_provenance_sweeps_dead_marks_and_keeps_live_ones(monkeypatch):
    """Marks hold no callback: the dead ones go in bulk once the registry passes a
    threshold, which then becomes twice what is left. (A dead tensor's id is often
    reused by the next temporary, whose mark then replaces it; the sweep is for the
    ones that are not.)"""
    from cslint.cstorch import provenance

    monkeypatch.setattr(provenance, "registry", {})
    monkeypatch.setattr(provenance, "_MIN_SWEEP_SIZE", 8)
    monkeypatch.setattr(provenance, "_sweep_at", 100)  # no sweep while planting
    live = [torch.zeros(1) for _ in range(3)]
    dying = [torch.zeros(1) for _ in range(6)]  # alive together: six distinct ids
    for tensor in live + dying:
        provenance.mark(tensor, provenance.PARAMETER)
    del dying, tensor
    assert sum(ref() is None for ref in provenance.registry.values()) == 6
    monkeypatch.setattr(provenance, "_sweep_at", 8)
    provenance.mark(torch.zeros(1), provenance.PARAMETER)  # the tenth mark: a sweep
    assert len(provenance.registry) == 4  # the live three and the one being marked
    assert all(provenance.origin_of(t) is provenance.PARAMETER for t in live)
    assert provenance._sweep_at == 8  # twice what was left, at least the floor


def test_a_traced_step_leaves_marks_that_the_sweep_bounds(monkeypatch):
    """Forty steps with a small threshold: the registry never grows past twice what was
    alive at its last sweep (with the threshold's floor)."""
    from cslint.cstorch import provenance

    monkeypatch.setattr(provenance, "_MIN_SWEEP_SIZE", 64)
    monkeypatch.setattr(provenance, "_sweep_at", 64)
    optimizer = BodyOptimizer(make_params(), tensor_selections)
    run_steps(optimizer, steps=40)
    assert len(provenance.registry) <= provenance._sweep_at + 1
    assert provenance._sweep_at >= 64


def test_compliance_errors_pickle():
    import pickle

    with pytest.raises(cstorch.ComplianceError) as caught:
        BodyOptimizer(make_params(), item).step()
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is cstorch.TracedValueError
    assert (copy.code, copy.lineno, str(copy)) == ("CS204", caught.value.lineno, str(caught.value))


def test_guard_is_off_outside_step():
    optimizer = BodyOptimizer(make_params(), tensor_selections)
    optimizer.step()
    # Reading state and lr after the step is host code.
    for group in optimizer.param_groups:
        assert float(group["lr"]) == pytest.approx(0.01)
        for p in group["params"]:
            assert optimizer.state[p]["exp_avg"].abs().sum().item() >= 0


# -- A one-element device value where a signature may take a number ------------------------
# The guard watches a C op's aten calls only where one of its overloads (or a deprecated
# scalar-first binding) takes a number at that argument; where every overload takes a
# tensor, torch reads nothing, and the op runs without the watch.

def _device_scalar() -> torch.Tensor:
    value = torch.tensor(2)
    cstorch.provenance.mark(value, cstorch.provenance.Origin("optimizer state 'n'"))
    return value


READ_AS_NUMBER = {
    "a spread size": lambda x, n: x.view(2, n),
    "a size list": lambda x, n: x.view([2, n]),
    "a leading size": lambda x, n: torch.zeros(n, 2),
    "a fill value": lambda x, n: torch.full((2,), n),
    "a length": lambda x, n: x.narrow(0, 0, n),
    "a count": lambda x, n: x.flatten().topk(n),
    "alpha=": lambda x, n: x.add_(x, alpha=n),
    "value=": lambda x, n: x.addcdiv_(x, x + 1, value=n),
    "a deprecated scalar-first add_": lambda x, n: x.add_(n, x),
    "a deprecated scalar-first addcdiv_": lambda x, n: x.addcdiv_(n, x, x + 1),
    "a foreach scalar": lambda x, n: torch._foreach_add_([x, x], n),
    "a foreach lerp weight": lambda x, n: torch._foreach_lerp_([x], [x], n),
    "a dropout rate": lambda x, n: torch.nn.functional.dropout(x, p=n / 10),
    "a leaky_relu slope": lambda x, n: torch.nn.functional.leaky_relu(x, n / 10),
}
TAKEN_AS_TENSOR = {
    "clamp bounds": lambda x, n: x.clamp(min=n),
    "a multiplier": lambda x, n: x.mul_(n),
    "a lerp weight": lambda x, n: x.lerp_(x + 1, n.float()),
    "a foreach multiplier": lambda x, n: torch._foreach_mul_([x, x], n),
    "a foreach list of divisors": lambda x, n: torch._foreach_div_([x, x], [n, n]),
    "stacked one-element values": lambda x, n: torch.stack([n, n]),
    "a one-element bias": lambda x, n: torch.nn.functional.linear(x, torch.ones(1, 2), n.float().view(1)),
    "a loss of two device values": lambda x, n: torch.nn.functional.mse_loss(n.float(), n.float()),
    "an activation": lambda x, n: torch.nn.functional.relu(n),
}


@pytest.mark.parametrize("case", sorted(READ_AS_NUMBER))
def test_a_device_value_where_a_number_is_taken_is_a_host_read(case):
    with pytest.raises(cstorch.ComplianceError, match=r"^CS20[45]"):
        with cstorch.guard.guarded_region("Test.step"):
            READ_AS_NUMBER[case](torch.ones(4, 2), _device_scalar())


@pytest.mark.parametrize("case", sorted(TAKEN_AS_TENSOR))
def test_a_device_value_where_only_tensors_are_taken_runs(case):
    with cstorch.guard.guarded_region("Test.step"):
        TAKEN_AS_TENSOR[case](torch.ones(4, 2), _device_scalar())
