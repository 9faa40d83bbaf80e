"""Train a small MLP the way the Cerebras documentation writes a training script.

Everything is the `cerebras.pytorch` API: a backend, a compiled model, an
optimizer built by `configure_optimizer` (here the script's own optimizer,
found by its class name), a learning-rate scheduler, a `@cstorch.trace`
training step, a `@cstorch.step_closure` that logs the loss, a DataLoader and
DataExecutor with checkpoint steps, `cstorch.save` on checkpoint steps and a
resume from a checkpoint with `cstorch.load`.

It imports `cslint.cstorch`, the runtime reference, so it runs on a laptop
(CPU, or CUDA with `--backend GPU`) with strict mode checking every traced
step; on the system, the one import line is the only change.

    python examples/train_cstorch.py --steps 20 --checkpoint-dir /tmp/ckpt
    python examples/train_cstorch.py --steps 20 --checkpoint-dir /tmp/ckpt \\
        --resume /tmp/ckpt/checkpoint_10.mdl
"""

from __future__ import annotations

import argparse
import os

import torch

import cslint.cstorch as cstorch  # on the system: import cerebras.pytorch as cstorch

INPUT_SIZE = 16
HIDDEN_SIZE = 32
BATCH_SIZE = 8
DATASET_BATCHES = 8  # the loader restarts after this many steps


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(INPUT_SIZE, HIDDEN_SIZE)
        self.output = torch.nn.Linear(HIDDEN_SIZE, 1)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.hidden(inputs))
        return self.output(hidden)


class MomentumSGD(cstorch.optim.Optimizer):
    """SGD with momentum, written by the Cerebras rules: its state is made in
    `preinitialize`, and the learning rate (a tensor the scheduler writes) is
    used only in tensor arithmetic."""

    def __init__(self, params, lr=0.01, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["momentum_buffer"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                buffer = self.state[p]["momentum_buffer"]
                buffer.mul_(group["momentum"]).add_(p.grad)
                p.sub_(buffer * lr)
        return loss


def regression_data(seed: int = 0) -> torch.utils.data.TensorDataset:
    """A fixed noisy linear target: the same samples on every run."""
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(DATASET_BATCHES * BATCH_SIZE, INPUT_SIZE, generator=generator)
    true_weights = torch.randn(INPUT_SIZE, 1, generator=generator) / INPUT_SIZE**0.5
    targets = inputs @ true_weights + 0.1 * torch.randn(len(inputs), 1, generator=generator)
    return torch.utils.data.TensorDataset(inputs, targets)


def input_fn(batch_size: int, steps_done: int) -> torch.utils.data.DataLoader:
    """The training batches in a fixed order, starting after `steps_done` steps
    (a resumed run sees the batches the first run would have seen next)."""
    dataset = regression_data()
    start = (steps_done % DATASET_BATCHES) * batch_size
    order = [(start + index) % len(dataset) for index in range(len(dataset))]
    return torch.utils.data.DataLoader(
        torch.utils.data.Subset(dataset, order), batch_size=batch_size, drop_last=True
    )


def train(steps: int, checkpoint_dir: str | None = None, resume: str | None = None,
          checkpoint_steps: int = 10, backend_type: str = "CPU") -> list[float]:
    """Train until step `steps` (counted from 1, across resumes); return the losses
    of the steps this run took, as the step closure logged them."""
    torch.manual_seed(0)
    backend = cstorch.backend(backend_type)
    model = MLP()
    compiled_model = cstorch.compile(model, backend)
    loss_fn = torch.nn.MSELoss()

    optimizer = cstorch.optim.configure_optimizer(
        "MomentumSGD", model.parameters(), learning_rate=0.05, momentum=0.9
    )
    lr_scheduler = cstorch.optim.configure_lr_scheduler(
        optimizer,
        {"scheduler": "Linear", "initial_learning_rate": 0.05,
         "end_learning_rate": 0.001, "total_iters": steps},
    )

    steps_done = 0
    if resume:
        state = cstorch.load(resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        lr_scheduler.load_state_dict(state["lr_scheduler"])
        steps_done = state["step"]

    @cstorch.trace
    def training_step(inputs, targets):
        outputs = compiled_model(inputs)
        loss = loss_fn(outputs, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        lr_scheduler.step()
        return loss

    losses: list[float] = []

    @cstorch.step_closure
    def log_loss(loss, step):
        losses.append(loss.item())
        print(f"| step {step:3d}  loss {loss.item():.6f}")

    @cstorch.checkpoint_closure
    def save_checkpoint(step):
        path = os.path.join(checkpoint_dir, f"checkpoint_{step}.mdl")
        cstorch.save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "lr_scheduler": lr_scheduler.state_dict(),
                "step": step,
            },
            path,
        )
        print(f"| saved {path}")

    if steps <= steps_done:
        return losses
    dataloader = cstorch.utils.data.DataLoader(input_fn, BATCH_SIZE, steps_done)
    executor = cstorch.utils.data.DataExecutor(
        dataloader, num_steps=steps - steps_done,
        checkpoint_steps=checkpoint_steps if checkpoint_dir else None,
    )
    for inputs, targets in executor:
        loss = training_step(inputs, targets)
        step = steps_done + executor.user_iteration
        log_loss(loss, step)
        if checkpoint_dir:
            save_checkpoint(step)
    return losses


def main(argv: list[str] | None = None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="train until this step")
    parser.add_argument("--checkpoint-dir", help="save a checkpoint here every 10 steps")
    parser.add_argument("--checkpoint-steps", type=int, default=10)
    parser.add_argument("--resume", help="a checkpoint to continue from")
    parser.add_argument("--backend", default="CPU", choices=["CPU", "GPU"])
    args = parser.parse_args(argv)
    if args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
    return train(args.steps, args.checkpoint_dir, args.resume, args.checkpoint_steps, args.backend)


if __name__ == "__main__":
    main()
