"""cstorch schedulers: closed forms of last_epoch written as tensors (and CS305)."""

from __future__ import annotations

import gc
import io

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import (
    BodyOptimizer,
    CompliantSGD,
    StraightLineLR,
    assert_compliance_error,
    make_params,
    set_new_grads,
)

HERE = __file__


def lr_of(optimizer, group_index=0) -> float:
    return float(optimizer.param_groups[group_index]["lr"])


def test_lr_scheduler_is_also_a_torch_lr_scheduler():
    scheduler = StraightLineLR(CompliantSGD(make_params()), start=0.1, end=0.0, total_iters=4)
    assert isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler)
    assert isinstance(scheduler, cstorch.optim.scheduler.Scheduler)
    assert scheduler.param_group_key == "lr"


def test_last_epoch_is_an_int64_zero_dim_tensor():
    scheduler = StraightLineLR(CompliantSGD(make_params()), start=0.1, end=0.0, total_iters=4)
    assert isinstance(scheduler.last_epoch, torch.Tensor)
    assert scheduler.last_epoch.dtype == torch.int64 and scheduler.last_epoch.dim() == 0
    assert scheduler.last_epoch.item() == 0


def test_value_used_at_optimizer_step_k_is_f_of_k():
    params = make_params()
    seen = []

    def record_lr(opt, group, p, state):
        # The optimizer sees a 0-dim tensor; recording it is host-side work.
        cstorch.step_closure(lambda lr: seen.append(lr.item()))(group["lr"])
        p.sub_(group["lr"] * p.grad)

    optimizer = BodyOptimizer(params[:1], record_lr, lr=99.0)
    scheduler = StraightLineLR(optimizer, start=0.1, end=0.02, total_iters=4)
    # Construction writes f(0) into the groups, as a tensor.
    assert isinstance(optimizer.param_groups[0]["lr"], torch.Tensor)
    assert lr_of(optimizer) == pytest.approx(0.1)
    for step in range(6):
        optimizer.step()
        scheduler.step()
        set_new_grads(params[:1], seed=step)
    assert seen == pytest.approx([scheduler.expected(k) for k in range(6)])
    assert scheduler.last_epoch.item() == 6
    assert [float(v) for v in scheduler.get_last_lr()] == pytest.approx([scheduler.expected(6)])


def test_schedulers_register_with_their_optimizer_weakly():
    optimizer = CompliantSGD(make_params())
    scheduler = StraightLineLR(optimizer, start=0.1, end=0.0, total_iters=4)
    assert optimizer.registered_schedulers() == [scheduler]
    del scheduler
    gc.collect()
    assert optimizer.registered_schedulers() == []


def test_param_group_tags_select_the_scheduled_groups():
    p1, p2, p3 = make_params(shapes=((2,), (2,), (2,)))
    optimizer = CompliantSGD(
        [
            {"params": [p1], "tags": ["decay"]},
            {"params": [p2], "tags": "no_decay", "lr": 0.5},
            {"params": [p3], "lr": 0.7},
        ],
        lr=0.3,
    )
    scheduler = StraightLineLR(optimizer, start=0.1, end=0.0, total_iters=10, param_group_tags="decay")
    assert [lr_of(optimizer, i) for i in range(3)] == pytest.approx([0.1, 0.5, 0.7])
    values = scheduler.get_last_value()
    assert values[1] is None and values[2] is None and float(values[0]) == pytest.approx(0.1)

    untagged = StraightLineLR(optimizer, start=0.9, end=0.0, total_iters=10, param_group_tags=[None])
    assert lr_of(optimizer, 2) == pytest.approx(0.9)
    assert lr_of(optimizer, 1) == pytest.approx(0.5)
    del untagged


def test_tags_matching_no_group_and_duplicate_tags_are_errors():
    optimizer = CompliantSGD([{"params": make_params()[:1], "tags": ["decay"]}])
    with pytest.raises(ValueError, match=r"\['missing'\] match no param group"):
        StraightLineLR(optimizer, 0.1, 0.0, 10, param_group_tags=["decay", "missing"])
    with pytest.raises(ValueError, match="duplicate"):
        StraightLineLR(optimizer, 0.1, 0.0, 10, param_group_tags=["decay", "decay"])


def test_scheduler_needs_a_cstorch_optimizer():
    with pytest.raises(TypeError, match="not a cstorch.optim.Optimizer"):
        StraightLineLR(torch.optim.SGD(make_params(), lr=0.1), 0.1, 0.0, 10)


def test_closed_form_may_be_named_either_way():
    class ByGenericName(cstorch.optim.lr_scheduler.LRScheduler):
        def _get_closed_form(self):
            return torch.tensor(0.5) * (self.last_epoch + 1)

    class ByNeither(cstorch.optim.lr_scheduler.LRScheduler):
        pass

    optimizer = CompliantSGD(make_params())
    scheduler = ByGenericName(optimizer, total_iters=None)
    scheduler.step()
    assert lr_of(optimizer) == pytest.approx(1.0)
    with pytest.raises(TypeError, match="neither _get_closed_form_lr nor _get_closed_form"):
        ByNeither(optimizer, total_iters=None)


class WarmupWD(cstorch.optim.weight_decay_scheduler.WeightDecayScheduler):
    def _get_closed_form(self):
        return torch.minimum(self.last_epoch / 4.0, torch.tensor(1.0)) * 0.01


def test_weight_decay_scheduler_drives_weight_decay():
    params = make_params()

    def body(opt, group, p, state):
        # weight_decay is a scheduled device tensor: multiply, never branch.
        p.sub_(group["lr"] * (p.grad + group["weight_decay"] * p))

    optimizer = BodyOptimizer(params, body, weight_decay=0.0)
    scheduler = WarmupWD(optimizer, total_iters=4)
    assert scheduler.param_group_key == "weight_decay"
    assert float(optimizer.param_groups[0]["weight_decay"]) == 0.0
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    assert float(optimizer.param_groups[0]["weight_decay"]) == pytest.approx(0.0075)


def branch_on_weight_decay(opt, group, p, state):
    if group["weight_decay"] != 0:  # cs201-weight-decay
        p.sub_(group["weight_decay"] * p)


def test_scheduled_weight_decay_cannot_drive_a_python_branch():
    optimizer = BodyOptimizer(make_params(), branch_on_weight_decay, weight_decay=0.0)
    WarmupWD(optimizer, total_iters=4)
    error = assert_compliance_error("CS201", HERE, "cs201-weight-decay", optimizer.step)
    assert "the scheduled hyperparameter 'weight_decay'" in str(error)


def test_scheduler_state_dict_round_trips_through_weights_only_load():
    optimizer = CompliantSGD(make_params())
    scheduler = StraightLineLR(optimizer, start=0.1, end=0.0, total_iters=10)
    for _ in range(3):
        scheduler.step()
    buffer = io.BytesIO()
    torch.save(scheduler.state_dict(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert "optimizer" not in loaded

    fresh = StraightLineLR(CompliantSGD(make_params()), start=0.1, end=0.0, total_iters=10)
    fresh.load_state_dict(loaded)
    assert fresh.last_epoch.item() == 3 and fresh.last_epoch.dtype == torch.int64
    fresh.step()
    assert lr_of(fresh.optimizer) == pytest.approx(fresh.expected(4))
    assert fresh._step_count == 2  # this run's count is not overwritten


class ConstantFloatLR(cstorch.optim.lr_scheduler.LRScheduler):
    def _get_closed_form_lr(self):
        return 0.1  # cs305-float


class BranchingLR(cstorch.optim.lr_scheduler.LRScheduler):
    def _get_closed_form_lr(self):
        if self.last_epoch < 5:  # cs201-closed-form
            return torch.tensor(0.1)
        return torch.tensor(0.01)


class LoggingLR(cstorch.optim.lr_scheduler.LRScheduler):
    def _get_closed_form_lr(self):
        return torch.tensor(0.1) * 0.5 ** self.last_epoch.item()  # cs204-closed-form


def test_closed_form_returning_a_number_raises_cs305():
    optimizer = CompliantSGD(make_params())
    error = assert_compliance_error(
        "CS305",
        HERE,
        "cs305-float",
        lambda: ConstantFloatLR(optimizer, total_iters=None),
        owner="ConstantFloatLR._get_closed_form_lr",
    )
    assert isinstance(error, cstorch.SchedulerError)
    assert "float 0.1" in str(error)


def test_closed_forms_run_under_the_guard():
    assert_compliance_error(
        "CS201",
        HERE,
        "cs201-closed-form",
        lambda: BranchingLR(CompliantSGD(make_params()), total_iters=None),
        owner="BranchingLR._get_closed_form_lr",
    )
    error = assert_compliance_error(
        "CS204",
        HERE,
        "cs204-closed-form",
        lambda: LoggingLR(CompliantSGD(make_params()), total_iters=None),
    )
    assert "the scheduler's last_epoch" in str(error)


def test_non_compliant_closed_forms_run_with_strict_off():
    with cstorch.strict(False):
        optimizer = CompliantSGD(make_params())
        ConstantFloatLR(optimizer, total_iters=None)
        assert optimizer.param_groups[0]["lr"] == 0.1
        scheduler = BranchingLR(optimizer, total_iters=None)
        scheduler.step()
        assert lr_of(optimizer) == pytest.approx(0.1)


def test_get_warns_outside_step_and_step_arguments_are_ignored_with_a_warning():
    scheduler = StraightLineLR(CompliantSGD(make_params()), start=0.1, end=0.0, total_iters=10)
    with pytest.warns(UserWarning, match="get_last_value"):
        values = scheduler.get()
    assert float(values[0]) == pytest.approx(0.1)
    with pytest.warns(UserWarning, match="ignores its arguments"):
        scheduler.step(5)
    assert scheduler.last_epoch.item() == 1
