"""examples/train_cstorch.py: a whole training script on cslint.cstorch, clean and
with one planted mistake each, checked by strict mode and by the linter alike."""

from __future__ import annotations

import gc
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import cslint.cstorch as cstorch
from cslint.cli import main as cslint_main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_cstorch.py"
CLEAN_SOURCE = EXAMPLE.read_text(encoding="utf-8")


def load_script(path: Path):
    # configure_optimizer finds the script's optimizer by its class name among the
    # live subclasses: let the copies loaded by earlier tests go first.
    gc.collect()
    spec = importlib.util.spec_from_file_location(f"train_script_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(module, argv: list[str]) -> list[float]:
    cstorch.local_backend.discard_backend()  # a process has one backend; each run makes its own
    return module.main(argv)


def test_the_script_trains_20_steps_and_a_resume_from_step_10_reproduces_steps_11_to_20_bitwise(tmp_path):
    script = load_script(EXAMPLE)
    started = time.perf_counter()
    losses = run_main(script, ["--steps", "20", "--checkpoint-dir", str(tmp_path / "first")])
    resumed = run_main(script, [
        "--steps", "20", "--checkpoint-dir", str(tmp_path / "resumed"),
        "--resume", str(tmp_path / "first" / "checkpoint_10.mdl"),
    ])
    assert time.perf_counter() - started < 30

    assert len(losses) == 20
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
    assert sorted(path.name for path in (tmp_path / "first").iterdir()) == [
        "checkpoint_10.mdl", "checkpoint_20.mdl",
    ]
    assert resumed == losses[10:]
    first = torch.load(tmp_path / "first" / "checkpoint_20.mdl", weights_only=True)
    again = torch.load(tmp_path / "resumed" / "checkpoint_20.mdl", weights_only=True)
    for name, tensor in first["model"].items():
        assert torch.equal(tensor, again["model"][name]), name
    for param_id, state in first["optimizer"]["state"].items():
        assert torch.equal(state["momentum_buffer"], again["optimizer"]["state"][param_id]["momentum_buffer"])
    assert first["lr_scheduler"]["last_epoch"] == again["lr_scheduler"]["last_epoch"]


def test_the_script_runs_from_the_command_line():
    completed = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "2"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("| step   1  loss ")
    assert "| step   2  loss " in completed.stdout


def test_the_linter_finds_nothing_in_the_clean_script():
    result = CliRunner().invoke(cslint_main, ["check", "--format", "json", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert linter_codes(result.output) == []


# -- planted mistakes -------------------------------------------------------------------------

# code -> (a line of the clean script, what replaces it); the planted line ends with `# planted`.
PLANTED = {
    "CS201": (
        "        loss = loss_fn(outputs, targets)\n",
        "        loss = loss_fn(outputs, targets)\n"
        "        if loss > 1:  # planted\n"
        "            loss = loss / 2\n",
    ),
    "CS204": (
        "        loss = loss_fn(outputs, targets)\n",
        "        loss = loss_fn(outputs, targets)\n"
        "        print('loss', loss.item())  # planted\n",
    ),
    "CS501": (
        "        loss = loss_fn(outputs, targets)\n",
        "        steps_taken.append(None)\n"
        "        loss = loss_fn(outputs, targets) * (1.0 if len(steps_taken) < 3 else 0.5)  # planted\n",
    ),
    "CS403": (
        "        return self.output(hidden)\n",
        "        return self.output(hidden).double()  # planted\n",
    ),
    "CS205": (
        "                p.sub_(buffer * lr)\n",
        "                p.add_(buffer, alpha=-lr)  # planted\n",
    ),
}
# The counter lives beside the step, as a Python list the step appends to.
COUNTER_HOME = ("    @cstorch.trace\n", "    steps_taken = []\n\n    @cstorch.trace\n")

def planted_copy(tmp_path: Path, code: str) -> tuple[Path, int]:
    """The clean script with the mistake for `code` planted; its path and the planted line."""
    source = CLEAN_SOURCE
    replacements = [PLANTED[code]] + ([COUNTER_HOME] if code == "CS501" else [])
    for old, new in replacements:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = tmp_path / "train_cstorch.py"
    path.write_text(source, encoding="utf-8")
    line = next(n for n, text in enumerate(source.splitlines(), 1) if text.endswith("# planted"))
    return path, line


@pytest.mark.parametrize("code", sorted(PLANTED))
def test_each_planted_mistake_fails_in_strict_mode_naming_its_code_file_and_line(tmp_path, code):
    path, line = planted_copy(tmp_path, code)
    script = load_script(path)
    with pytest.raises(cstorch.ComplianceError) as caught:
        run_main(script, ["--steps", "4"])
    error = caught.value
    assert error.code == code, str(error)
    assert (error.filename, error.lineno) == (str(path), line), str(error)
    assert f"{path}:{line}" in str(error)


@pytest.mark.parametrize("code", list(PLANTED))
def test_each_planted_mistake_runs_with_strict_mode_off(tmp_path, code):
    path, _ = planted_copy(tmp_path, code)
    script = load_script(path)
    with cstorch.strict(False):
        losses = run_main(script, ["--steps", "4"])
    assert len(losses) == 4


def linter_codes(json_output: str) -> list[str]:
    import json

    return sorted(finding["code"] for finding in json.loads(json_output))


@pytest.mark.parametrize("code", list(PLANTED))
def test_the_linter_reports_exactly_the_planted_mistake(tmp_path, code):
    path, line = planted_copy(tmp_path, code)
    result = CliRunner().invoke(cslint_main, ["check", "--format", "json", str(path)])
    assert linter_codes(result.output) == [code], result.output
    assert f'"line": {line}' in result.output
