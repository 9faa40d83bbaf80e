"""CS501 in the linter: a Python counter that traced code changes and decides the graph with.

Each case is a whole small file; the lines that must be reported end with `# expect: CS501`
and no other line may be. Reported cases first, then the ones that must stay clean: a
count that may be reset before each step, one that never decides the graph, one kept on
the host, and values that are not Python counters at all.
"""

from __future__ import annotations

import textwrap

import pytest

from helpers import expected_findings, lint_source

HEADER = "import torch\nimport cerebras.pytorch as cstorch\n\n"

REPORTED = {
    "a state entry computed from the counter, read in a condition": '''
        class RectifiedBelief(cstorch.optim.Optimizer):
            def __init__(self, params, lr=1e-3, betas=(0.9, 0.999)):
                super().__init__(params, dict(lr=lr, betas=betas))

            def preinitialize(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["step"] = 0
                        self.state[p]["rho_t"] = 0.0

            @torch.no_grad()
            def step(self, closure=None):
                for group in self.param_groups:
                    beta1, beta2 = group["betas"]
                    for p in group["params"]:
                        state = self.state[p]
                        state["step"] += 1
                        rho_inf = 2.0 / (1.0 - beta2) - 1.0
                        state["rho_t"] = rho_inf - 2 * state["step"] * beta2 ** state["step"]
                        if state["rho_t"] > 4:  # expect: CS501
                            p.add_(-group["lr"] * p.grad)
        ''',
    "a wrapper's counter in the param groups of the optimizer it wraps": '''
        class Lookahead(cstorch.optim.Optimizer):
            def __init__(self, base_optimizer, k=6):
                defaults = dict(lookahead_k=k, lookahead_step=0)
                self._base_optimizer = base_optimizer
                self.param_groups = base_optimizer.param_groups
                for name, default in defaults.items():
                    for group in self._base_optimizer.param_groups:
                        group.setdefault(name, default)

            def preinitialize(self):
                pass

            @torch.no_grad()
            def step(self, closure=None):
                loss = self._base_optimizer.step(closure)
                for group in self._base_optimizer.param_groups:
                    group["lookahead_step"] += 1
                    if group["lookahead_step"] % group["lookahead_k"] == 0:  # expect: CS501
                        for p in group["params"]:
                            p.mul_(0.5)
                return loss
        ''',
    "optimizer counter reaching an op through a local": '''
        class DecayingSGD(cstorch.optim.Optimizer):
            def __init__(self, params, lr=0.1, decay=0.9):
                super().__init__(params, dict(lr=lr, decay=decay))
                self.steps = 0

            def preinitialize(self):
                pass

            @torch.no_grad()
            def step(self, closure=None):
                self.steps += 1
                for group in self.param_groups:
                    scale = group["decay"] ** self.steps
                    for p in group["params"]:
                        p.sub_(p.grad * scale)  # expect: CS501
                        p.mul_(scale)
        ''',
    "module counter in a branch of forward": '''
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.calls = 0
                self.linear = torch.nn.Linear(4, 4)

            def forward(self, x):
                self.calls = self.calls + 1
                if self.calls > 3:  # expect: CS501
                    x = x * 2
                return self.linear(x)
        ''',
    "counted in a helper of step, read in step; a class-body start": '''
        class Lookahead(cstorch.optim.Optimizer):
            merged = 0

            def preinitialize(self):
                pass

            def count(self):
                self.merged += 1

            def step(self, closure=None):
                self.count()
                while self.merged % 5 == 0:  # expect: CS501
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.mul_(0.5)
                    break
        ''',
    "a count that wraps around under a condition, restored from a checkpoint": '''
        class Periodic(cstorch.optim.Optimizer):
            def __init__(self, params):
                super().__init__(params, dict(lr=0.1))
                self.since_merge = 0

            def load_state_dict(self, state):
                super().load_state_dict(state)
                self.since_merge = state.get("since_merge", 0)

            def preinitialize(self):
                pass

            def step(self, closure=None):
                self.since_merge += 1
                if self.since_merge >= 6:  # expect: CS501
                    self.since_merge = 0
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.zero_()
        ''',
    "nonlocal counter bounding a loop, a closure list in a conditional expression": '''
        def main(model, loss_fn):
            calls = 0
            seen = []

            @cstorch.trace
            def training_step(inputs, targets):
                nonlocal calls
                calls += 1
                seen.append(None)
                loss = loss_fn(model(inputs), targets)
                for _ in range(calls):  # expect: CS501
                    loss = loss * 0.5
                return loss * (1.0 if len(seen) < 3 else 0.5)  # expect: CS501
        ''',
    "global counter in a traced module function, in a comprehension's condition": '''
        STEPS = 0


        @cstorch.trace
        def training_step(layers, inputs):
            global STEPS
            STEPS += 1
            active = [layer for index, layer in enumerate(layers) if index < STEPS]  # expect: CS501
            for layer in active:  # expect: CS501
                inputs = layer(inputs)
            return inputs
        ''',
    "a param group's step count in a bias correction and a branch": '''
        class GroupAdam(cstorch.optim.Optimizer):
            def __init__(self, params, lr=1e-3, betas=(0.9, 0.999)):
                super().__init__(params, dict(lr=lr, betas=betas))

            def preinitialize(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["exp_avg"] = cstorch.zeros_like(p)

            def step(self, closure=None):
                for group in self.param_groups:
                    if "step" not in group:
                        group["step"] = 0
                    group["step"] += 1
                    beta1, _ = group["betas"]
                    bias_correction = 1 - beta1 ** group["step"]
                    for p in group["params"]:
                        exp_avg = self.state[p]["exp_avg"]
                        if group["step"] == 1:  # expect: CS501
                            exp_avg.copy_(p.grad)
                        exp_avg.lerp_(p.grad, 1 - beta1)
                        p.sub_(exp_avg, alpha=group["lr"] / bias_correction)  # expect: CS501
        ''',
    "a parameter's step count kept as a Python number in its state": '''
        class Counted(cstorch.optim.Optimizer):
            def preinitialize(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["step"] = 0

            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        state["step"] += 1
                        p.mul_(1 - 0.5 ** state["step"])  # expect: CS501
        ''',
    "a list of past gradients kept in the state, grown at every step": '''
        from collections import deque


        class ShiftedAdam(cstorch.optim.Optimizer):
            def __init__(self, params, lr=1e-3, keep=3):
                super().__init__(params, dict(lr=lr, keep=keep))

            def preinitialize(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["grads"] = deque(maxlen=group["keep"])

            @torch.no_grad()
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        grads = state["grads"]
                        grads.append(p.grad.clone())
                        average = torch.stack(list(grads)).mean(0)  # expect: CS501
                        p.add_(-group["lr"] * average)
        ''',
}

CLEAN = {
    "a branch that only logs": '''
        import logging

        logger = logging.getLogger(__name__)


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                if self.calls % 100 == 0:
                    logger.info("forward %d", self.calls)
                elif self.calls > 10**9:
                    raise RuntimeError("too many calls")
                return x * 2
        ''',
    "reset by a method traced code does not run (it may run before each step)": '''
        class StableDropout(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.count = 0
                self.masks = []

            def init_context(self):
                self.count = 0

            def forward(self, x):
                self.count += 1
                if self.count >= 2:
                    return x * 0.5
                return x
        ''',
    "reset at the top of each call": '''
        class Blocks(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.depth = 0
                self.scales = [1.0, 0.5, 0.25]

            def forward(self, x):
                self.depth = 0
                for _ in range(3):
                    x = self.block(x)
                return x

            def block(self, x):
                x = x * self.scales[self.depth]
                self.depth += 1
                if self.depth > 2:
                    x = x + 1
                return x
        ''',
    "reset on the object elsewhere in the file": '''
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                if self.calls > 3:
                    x = x * 2
                return x


        def train(model, batches):
            for batch in batches:
                model.calls = 0
                model(batch)
        ''',
    "a tensor buffer counted in place": '''
        class Ema(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("updates", torch.zeros((), dtype=torch.long))
                self.updates = torch.zeros((), dtype=torch.long)

            def forward(self, x):
                self.updates += 1
                return x * torch.where(self.updates > 10, 0.5, 1.0)
        ''',
    "counted and never decided with": '''
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.calls = 0
                self.history = []

            def forward(self, x):
                self.calls += 1
                self.history.append(self.calls)
                print("call", self.calls)
                return x * 2
        ''',
    "counted in a step closure, on the host": '''
        def main(model):
            logged = []

            @cstorch.step_closure
            def log(loss):
                logged.append(loss.item())
                if len(logged) % 10 == 0:
                    torch.save(torch.tensor(logged), "losses.pt")

            @cstorch.trace
            def training_step(inputs):
                loss = model(inputs).sum()
                log(loss)
                return loss
        ''',
    "a local count, a local list, a counter outside traced code": '''
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.epochs = 0

            def forward(self, x):
                steps = 0
                outputs = []
                for _ in range(3):
                    steps += 1
                    outputs.append(x * steps)
                    if steps > 1:
                        x = x + 1
                return torch.stack(outputs)

            def next_epoch(self):
                self.epochs += 1
                if self.epochs > 3:
                    torch.nn.init.zeros_(torch.empty(3))
        ''',
    "a step count kept in a tensor, as torch.optim does": '''
        class TensorSteps(cstorch.optim.Optimizer):
            def preinitialize(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["step"] = torch.tensor(0.0)

            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        state["step"] += 1
                        p.mul_(1 - 0.5 ** state["step"])
        ''',
    "a group count reset by a method traced code does not run": '''
        class Restartable(cstorch.optim.Optimizer):
            def preinitialize(self):
                pass

            def restart(self):
                for group in self.param_groups:
                    group["step"] = 0

            def step(self, closure=None):
                for group in self.param_groups:
                    group["step"] += 1
                    for p in group["params"]:
                        p.mul_(1 - 0.5 ** group["step"])
        ''',
    "a group count started afresh at each step": '''
        class Fresh(cstorch.optim.Optimizer):
            def preinitialize(self):
                pass

            def step(self, closure=None):
                for group in self.param_groups:
                    group["seen"] = 0
                    for p in group["params"]:
                        group["seen"] += 1
                        p.mul_(1 - 0.5 ** group["seen"])
        ''',
    "a name rebound in the enclosing scope": '''
        def main(model, batches):
            calls = 0

            @cstorch.trace
            def training_step(inputs):
                nonlocal calls
                calls += 1
                if calls > 3:
                    inputs = inputs * 2
                return model(inputs)

            for batch in batches:
                calls = 0
                training_step(batch)
        ''',
    "a list in the state emptied at each step": '''
        class NormLog(cstorch.optim.Optimizer):
            def __init__(self, params, lr=1e-3):
                super().__init__(params, dict(lr=lr))

            def preinitialize(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["norms"] = []

            @torch.no_grad()
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        norms = self.state[p]["norms"]
                        norms.clear()
                        norms.append(p.grad.norm())
                        if len(norms) == 1:
                            p.add_(-group["lr"] * p.grad)
        ''',
}


def _lint(tmp_path, body: str):
    source = HEADER + textwrap.dedent(body).lstrip("\n")
    result = lint_source(source, tmp_path, options={"select": ["CS501"]})
    assert not result.errors, [e.render() for e in result.errors]
    path = tmp_path / "example.py"
    found = {(f.location.line, f.code) for f in result.findings}
    return found, expected_findings(path), result


@pytest.mark.parametrize("case", sorted(REPORTED))
def test_reported(tmp_path, case):
    found, expected, _ = _lint(tmp_path, REPORTED[case])
    assert expected, "a reported case marks its lines"
    assert found == expected


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_clean(tmp_path, case):
    found, _, result = _lint(tmp_path, CLEAN[case])
    assert found == set(), [f.message for f in result.findings]


def test_the_message_names_the_counter_its_counting_and_the_fix(tmp_path):
    _, _, result = _lint(tmp_path, REPORTED["optimizer counter reaching an op through a local"])
    (finding,) = result.findings
    message = finding.message[0].lower() + finding.message[1:]
    assert message.startswith(
        "an argument of a torch op `p.grad * scale` reads `self.steps` (through `scale`), "
        "a Python counter that traced code changes at every step (`self.steps += 1`, line 14)")
    assert "torch.where" in finding.message


def test_a_list_of_past_values_is_told_to_keep_them_in_a_tensor(tmp_path):
    _, _, result = _lint(tmp_path, REPORTED[
        "a list of past gradients kept in the state, grown at every step"])
    (finding,) = result.findings
    assert "reads `state['grads']`" in finding.message
    assert "(`grads.append(p.grad.clone())`, line" in finding.message
    assert "so the list keeps its first step's length" in finding.message
    assert "k slots, one written in place at each step" in finding.message


def test_a_param_group_tensor_made_in_preinitialize_is_a_device_value(tmp_path):
    """The compliant form of a group counter: a tensor made where the optimizer is set
    up. It is no Python counter, and reading it on the host is a host read."""
    source = HEADER + textwrap.dedent('''\
        import math


        class GroupSteps(cstorch.optim.Optimizer):
            def preinitialize(self):
                for group in self.param_groups:
                    group["step"] = cstorch.zeros(())

            def step(self, closure=None):
                for group in self.param_groups:
                    group["step"] += 1
                    correction = math.sqrt(1 - 0.9 ** group["step"])
                    for p in group["params"]:
                        p.mul_(1 - 0.9 ** group["step"])
                        p.div_(correction)
        ''')
    result = lint_source(source, tmp_path, options={"select": ["CS204", "CS501"]})
    assert [(f.code, f.location.line) for f in result.findings] == [("CS204", 15)]
    assert "param-group tensor" in result.findings[0].message
