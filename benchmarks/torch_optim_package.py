"""Copy the installed torch's own optimizers into a package of their own, to port them.

    python benchmarks/torch_optim_package.py OUT_FOLDER
    python benchmarks/port_pytorch_optimizer.py OUT_FOLDER/torch_optim --name torch_optim

The modules of `torch/optim` that define optimizers are copied as they are, into
`OUT_FOLDER/torch_optim/`, as a user copies one to port it: their imports of the rest of
torch.optim (`from .optimizer import Optimizer, _get_value`) become absolute
(`from torch.optim.optimizer import ...`); those of each other (`from .adam import Adam`)
stay relative. Prints the files written.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

# torch.optim's modules that define optimizer classes (the others are helpers, the
# base class and the schedulers).
OPTIMIZER_MODULES = ("adadelta", "_adafactor", "adagrad", "adam", "adamax", "adamw", "asgd",
                     "lbfgs", "nadam", "radam", "rmsprop", "rprop", "sgd", "sparse_adam")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    source = Path(torch.__file__).parent / "optim"
    target = args.out / "torch_optim"
    target.mkdir(parents=True, exist_ok=True)
    (target / "__init__.py").write_text("")
    copied = {name for name in OPTIMIZER_MODULES if (source / f"{name}.py").is_file()}

    def absolute(match: re.Match) -> str:
        module = match.group(1)
        if module.lstrip(".") in copied:
            return match.group(0)
        return f"from torch.optim.{module}" if module else "from torch.optim"

    for name in sorted(copied):
        text = (source / f"{name}.py").read_text(encoding="utf-8")
        text = re.sub(r"^from \.(\w*)(?= import)", absolute, text, flags=re.MULTILINE)
        (target / f"{name}.py").write_text(text, encoding="utf-8")
        print(target / f"{name}.py")
    print(f"torch {torch.__version__}: {len(copied)} modules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
