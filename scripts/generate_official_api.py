"""Regenerate src/cslint/data/official_api.json from released sources.

    pip download --no-deps cerebras-pytorch==2.10.0 -d /tmp/csp && unzip -o /tmp/csp/*.whl -d /tmp/csp
    python scripts/generate_official_api.py --cerebras /tmp/csp/cerebras/pytorch

Torch's classes come from the installed torch. The facts are read with cslint's own
index and state analysis; release differences older sources no longer show are
listed in RELEASE_DIFFERENCES below.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from cslint.config import DEFAULT_MAX_FILE_SIZE, Config
from cslint.semantic.module_index import build_module_index
from cslint.semantic.official import OfficialApi
from cslint.semantic.optimizer_state import OptimizerStateAnalysis
from cslint.semantic.project import ProjectIndex
from cslint.source import SourceFile

OUTPUT = Path(__file__).resolve().parents[1] / "src" / "cslint" / "data" / "official_api.json"
BASE_OPTIMIZER = "cerebras.pytorch.optim.optimizer.Optimizer"
BASE_LR_SCHEDULER = "cerebras.pytorch.optim.lr_scheduler.LRScheduler"

# Releases before 2.5 (the seed docs) made state_names_to_sparsify abstract and every
# official optimizer defined it; LR schedulers gave `_get_closed_form_lr`.
RELEASE_DIFFERENCES = {
    "optimizer_base": {"2.5": {"abstract": ["state_names_to_sparsify"]}},
    "optimizer": {"2.5": {"methods": ["state_names_to_sparsify"]}},
    "lr_scheduler_base": {"2.5": {"abstract": ["_get_closed_form_lr"]}},
    "lr_scheduler": {"2.5": {"methods": ["_get_closed_form_lr"]}},
}
RETURNS_TENSOR = {BASE_OPTIMIZER: ["increment_global_step"]}


def load(path: Path, module_name: str):
    source = SourceFile.read(path, str(path), DEFAULT_MAX_FILE_SIZE)
    return build_module_index(source.parse(), path, str(path), module_name)


def index_tree(root: Path, package: str):
    modules = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        parts = [p for p in relative.parts if p != "__init__"]
        modules.append(load(path, ".".join([package, *parts])))
    return modules


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cerebras", type=Path, required=True,
                        help="the unpacked cerebras/pytorch folder of the release")
    args = parser.parse_args()
    torch_root = Path(torch.__file__).parent
    modules = index_tree(args.cerebras / "optim", "cerebras.pytorch.optim")
    modules += index_tree(torch_root / "optim", "torch.optim")
    modules.append(load(torch_root / "nn" / "modules" / "module.py", "torch.nn.modules.module"))
    project = ProjectIndex(modules, OfficialApi(classes={}), Config())
    analysis = OptimizerStateAnalysis(project)
    analysis.run()  # records the keys each class's preinitialize creates

    public = {
        "cerebras.pytorch.optim": "cerebras.pytorch.optim",
        "torch.optim": "torch.optim",
        "torch.optim.lr_scheduler": "torch.optim.lr_scheduler",
    }
    classes = {}
    for module in modules:
        for info in module.classes.values():
            if "<locals>" in info.qualname or info.name.startswith("_") and \
                    info.name != "_LRScheduler":
                continue
            ref = project.ref_for_info(info)
            kinds = project.kinds(ref)
            is_cerebras = info.qualname.startswith("cerebras.")
            if not is_cerebras and not (kinds.optimizer or kinds.torch_scheduler
                                        or info.qualname == "torch.nn.modules.module.Module"):
                continue
            entry = {
                "bases": [b.name for b in project.bases(ref)],
                "methods": sorted(n for n, f in info.methods.items() if not f.is_abstract),
                "abstract": sorted(n for n, f in info.methods.items() if f.is_abstract),
            }
            if kinds.cstorch_optimizer and info.qualname != BASE_OPTIMIZER:
                keys, _ = analysis.created_keys.get(id(ref), (frozenset(), False))
                entry["state_keys"] = sorted(keys - {"step"})
                entry["global_step"] = "step" in keys
                entry["before"] = RELEASE_DIFFERENCES["optimizer"]
            if info.qualname == BASE_OPTIMIZER:
                entry["before"] = RELEASE_DIFFERENCES["optimizer_base"]
            if info.qualname == BASE_LR_SCHEDULER:
                entry["before"] = RELEASE_DIFFERENCES["lr_scheduler_base"]
            elif kinds.cstorch_scheduler and BASE_LR_SCHEDULER in project.known_ancestors(ref):
                entry["before"] = RELEASE_DIFFERENCES["lr_scheduler"]
            if info.qualname in RETURNS_TENSOR:
                entry["returns_tensor"] = RETURNS_TENSOR[info.qualname]
            aliases = [
                f"{package}.{name}"
                for package in public
                for module_ in project.modules_by_name.get(package, [])
                for name, target in module_.imports.items()
                if target == info.qualname
            ]
            if info.qualname == "torch.nn.modules.module.Module":
                aliases.append("torch.nn.Module")
            if aliases:
                entry["aliases"] = sorted(set(aliases))
            classes[info.qualname] = entry
    data = {
        "releases": {"cerebras-pytorch": "2.10.0", "torch": torch.__version__.split("+")[0]},
        "classes": dict(sorted(classes.items())),
    }
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(classes)} classes to {OUTPUT}")


if __name__ == "__main__":
    main()
