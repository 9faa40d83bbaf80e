"""Parameters of traced entry points are device tensors only with evidence in their own
function, and a submodule's `forward` runs with what its caller passes: the edges of both
(rebinding, scopes, callee annotations, several possible classes, containers)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from cslint.config import Config
from cslint.engine import lint

HEADER = """\
import torch
import torch.nn as nn
"""


def traced_findings(tmp_path: Path, body: str) -> set[tuple[int, str]]:
    """(line, code) of the CS2xx findings in a module of `body` (lines count from 1 at
    the first line of `body`)."""
    path = tmp_path / "model.py"
    path.write_text(HEADER + textwrap.dedent(body))
    result = lint([str(path)], Config(), project_root=tmp_path)
    assert not result.errors, [e.render() for e in result.errors]
    offset = HEADER.count("\n")
    return {(f.location.line - offset, f.code) for f in result.findings
            if f.code.startswith("CS2")}


def test_a_use_after_the_parameter_is_rebound_is_no_evidence(tmp_path):
    assert traced_findings(tmp_path, """\
        class M(nn.Module):
            def forward(self, n, x):
                if n > 1:
                    x = x * 2
                n = torch.zeros(3)
                if x.sum() > 0:
                    x = x.view(-1)
                return n.view(-1), x
        """) == {(6, "CS201")}  # `n` is rebound before `.view`, `x` only in a branch


def test_a_comprehension_variable_is_not_the_parameter(tmp_path):
    assert traced_findings(tmp_path, """\
        class M(nn.Module):
            def forward(self, x, xs):
                ys = [x.view(-1) for x in xs]
                if x > 0:
                    return ys
                return [y.unsqueeze(0) for y in ys]
        """) == set()


def test_a_callee_gives_evidence_by_its_uses_not_by_its_annotations(tmp_path):
    assert traced_findings(tmp_path, """\
        def annotated(shapes: torch.Tensor):
            return [h * w for h, w in shapes]

        def used(scores):
            return scores.softmax(-1)

        class M(nn.Module):
            def forward(self, shapes, scores):
                areas = annotated(shapes)
                probs = used(scores)
                if shapes[0][0] > 1:
                    probs = probs * 2
                if scores.max() > 1:
                    probs = probs / 2
                return areas, probs
        """) == {(13, "CS201")}


def test_a_call_that_may_reach_either_class_binds_neither_to_its_arguments(tmp_path):
    assert traced_findings(tmp_path, """\
        class Dense(nn.Module):
            def forward(self, x, cache=None):
                if cache:
                    x = cache.update(x)
                return x

        class Sparse(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, x, mask):
                return self.proj(x).masked_fill(mask, 0.0)

        class Block(nn.Module):
            def __init__(self, sparse):
                super().__init__()
                self.attn = Sparse() if sparse else Dense()
                self.norm = nn.LayerNorm(4)

            def forward(self, x):
                mask = self.norm(x) > 0
                return self.attn(x, mask)
        """) == set()  # Dense's `cache` is not Sparse's `mask`


def test_module_containers_built_from_local_lists_run_their_elements(tmp_path):
    assert traced_findings(tmp_path, """\
        class Embed(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Conv2d(3, 4, 2, 2)

            def forward(self, x):
                x = self.proj(x)
                return x.flatten(2), x.shape[-2:]

        class Net(nn.Module):
            def __init__(self, depth):
                super().__init__()
                embeds = []
                for _ in range(depth):
                    embeds.append(Embed())
                self.embeds = nn.ModuleList(embeds)
                self.built = nn.ModuleList(make_embeds(depth))

            def forward(self, x):
                for embed in self.embeds:
                    x, size = embed(x)
                    if size[0] > 2:
                        x = x[..., :4]
                for embed in self.built:
                    x, size = embed(x)
                    if size[0] > 2:
                        x = x[..., :4]
                return x
        """) == set()  # Embed gives Python sizes; make_embeds' modules give nothing known


def test_a_submodule_passed_a_tensor_tests_it_where_it_is(tmp_path):
    assert traced_findings(tmp_path, """\
        class Gate(nn.Module):
            def forward(self, score):
                if score > 0:
                    return 1.0
                return 0.0

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.gate = Gate()

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return self.gate(x.mean()) * x
        """) == {(3, "CS201")}


def test_a_value_computed_from_a_group_tensor_stays_one_through_an_annotation(tmp_path):
    """`group["step"]` made a tensor in preinitialize is an exact source, and so is what
    is computed from it however long the chain (the message keeps only its last steps):
    a helper's `flag: bool` does not hide it, as it hides a value of unknown origin."""
    assert traced_findings(tmp_path, """\
        import cerebras.pytorch as cstorch


        class Switching(cstorch.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))

            def preinitialize(self):
                for group in self.param_groups:
                    group["step"] = cstorch.zeros(())

            def _update(self, p, flag: bool, other: bool):
                if flag:
                    p.mul_(0.5)
                if other:
                    p.mul_(2.0)

            @torch.no_grad()
            def step(self, closure=None):
                for group in self.param_groups:
                    group["step"] += 1
                    rate = torch.clamp(1.0 - group["step"] * 0.1, min=0.0)
                    scaled = rate * 2.0 + 1.0
                    shifted = scaled - 0.5
                    switched = shifted >= 0.5
                    for p in group["params"]:
                        self._update(p, switched, p.grad.norm() > 1)
        """) == {(13, "CS201")}
