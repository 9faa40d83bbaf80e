"""The runtime-only rule's page (CS501) carries examples that run: the bad one raises
CS501 (checked inside the example), the good one passes check_static_graph."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "rules" / "CS501.md"
BLOCK = re.compile(r"^## (Bad|Good)\n.*?```python\n(.*?)```", re.DOTALL | re.MULTILINE)


def examples() -> dict[str, str]:
    return {title: code for title, code in BLOCK.findall(PAGE.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("title", ["Bad", "Good"])
def test_cs501_page_example_runs(title):
    code = examples()[title]
    exec(compile(code, f"{PAGE.name}:{title}", "exec"), {"__name__": f"cs501_{title}"})


def test_bad_example_really_changes_the_graph():
    import cslint.cstorch as cstorch

    namespace: dict = {"__name__": "cs501_probe"}
    source = examples()["Bad"].split("param = torch.nn.Parameter")[0]
    exec(compile(source, "CS501.md:Bad", "exec"), namespace)
    import torch

    param = torch.nn.Parameter(torch.ones(3))
    param.grad = torch.full((3,), 0.5)
    with pytest.raises(cstorch.ComplianceError, match=r"^CS501.*step 2"):
        cstorch.check_static_graph(namespace["DecayingSGD"]([param]), steps=3)
