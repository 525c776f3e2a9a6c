"""Handwritten digits (scikit-learn's bundled 8x8 set, 1,797 images) with PyTorch DDP over gloo.

Run by ``torchrun`` on every node of the TrainJob: each process joins the process group from the
``PET_*`` variables the operator sets, trains a small convolutional network on its shard of 80% of the
images, and every epoch all-reduces the loss and measures accuracy on the held-out 20%. Rank 0 posts
progress (percent, seconds left, loss and accuracy) to the TrainJob's status endpoint when the
operator gives one (``KUBEFLOW_TRAINER_SERVER_URL``, with the pod's projected token and the CA it
mounts), prints one line per epoch, and ends with the held-out accuracy. Nothing is downloaded.

Checkpoints, when ``CHECKPOINT_DIR`` names a directory (a volume that outlives the pods, e.g. one of
the TrainJob's ``volumeClaimPolicies``): rank 0 saves the model and optimizer there after every epoch
and when it gets SIGTERM (a suspend, a preemption, a resize or a node drain stops pods with SIGTERM
and their grace period), as ``epoch-<N>.pt`` written whole then renamed, keeping the newest two, and
reports each as ``trainerStatus.lastCheckpoint``. A run that finds one starts from the newest: its
first epoch is the checkpoint's epoch + 1, at any number of nodes (rank 0 loads it and every process
takes rank 0's weights and optimizer state).

Environment: ``EPOCHS`` (default 20), ``BATCH`` (default 32 per process), ``LR`` (default 0.05),
``MOMENTUM`` (SGD's, default 0.9), ``CHECKPOINT_DIR`` (default: none, no checkpoints),
``COLLECTIVE_TIMEOUT`` (seconds, default 120: a collective whose peer went without closing its
connections fails after that long, so torchrun restarts the group instead of waiting gloo's default
30 minutes). As a trial of an
OptimizationJob (``optimizationjob.yaml`` beside this file) it takes the learning rate and momentum the
search chose, ``KUBEFLOW_TRAINER_OPT_LR`` and ``KUBEFLOW_TRAINER_OPT_MOMENTUM``, over ``LR`` and
``MOMENTUM``, and its accuracy is the search's objective.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import ssl
import time
import urllib.error
import urllib.request
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def post_status(
    progress: int | None,
    remaining: int | None,
    metrics: dict[str, float],
    checkpoint: dict[str, object] | None = None,
    timeout: float = 5,
    attempts: int = 1,
) -> None:
    """Post ``trainerStatus`` to the operator's status server, when it gives one; never fatal. The last
    report is tried ``attempts`` times, 1 to 5 s apart: it is the objective an OptimizationJob reads, and
    the status server is down while its operator restarts."""
    url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
    if not url:
        return
    status: dict[str, object] = {"metrics": [{"name": k, "value": f"{v:.4f}"} for k, v in metrics.items()]}
    if progress is not None:
        status["progressPercentage"] = progress
    if remaining is not None:
        status["estimatedRemainingSeconds"] = remaining
    if checkpoint is not None:
        status["lastCheckpoint"] = checkpoint
    with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
        token = f.read().strip()
    context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    request = urllib.request.Request(
        url,
        data=json.dumps({"trainerStatus": status}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
                response.read()
            return
        except (OSError, urllib.error.HTTPError) as e:
            print(f"progress post failed: {e}", flush=True)
        if attempt + 1 < attempts:
            time.sleep(min(2**attempt, 5))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Checkpoints:
    """Rank 0's checkpoints in ``CHECKPOINT_DIR`` (none when unset): ``epoch-<N>.pt`` with the model,
    the optimizer, the epochs complete and the optimizer steps."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.dir = os.environ.get("CHECKPOINT_DIR") or None
        self.model, self.optimizer = model, optimizer
        self.epoch, self.step = 0, 0  # complete so far

    def newest(self) -> str | None:
        """The newest checkpoint file, None when there is none."""
        if self.dir is None:
            return None
        found = glob.glob(os.path.join(self.dir, "epoch-*.pt"))
        return max(found, key=lambda f: int(os.path.basename(f)[6:-3]), default=None)

    def save(self, why: str) -> dict[str, object] | None:
        """Write the current state (after ``self.epoch`` epochs, ``self.step`` steps); what to report
        as ``lastCheckpoint`` (None without ``CHECKPOINT_DIR``)."""
        if self.dir is None:
            return None
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, f"epoch-{self.epoch}.pt")
        # Tensors only, so that it loads with weights_only (no pickled code runs on load).
        momentum = [self.optimizer.state[p].get("momentum_buffer") for p in self.model.parameters()]
        state = {
            "model": self.model.state_dict(),
            "momentum": [
                torch.zeros_like(p) if b is None else b for p, b in zip(self.model.parameters(), momentum, strict=True)
            ],
            "done": torch.tensor([self.epoch, self.step]),
        }
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        for old in sorted(glob.glob(os.path.join(self.dir, "epoch-*.pt")), key=os.path.getmtime)[:-2]:
            os.remove(old)
        print(f"checkpoint {path} ({why}): epoch {self.epoch}, step {self.step}", flush=True)
        return {"epoch": self.epoch, "step": self.step, "path": path}


def resume(checkpoints: Checkpoints, model: nn.Module, optimizer: torch.optim.SGD) -> int:
    """Rank 0 loads the newest checkpoint, if any; every process then takes its epoch, weights and
    momentum (DDP keeps gradients equal, so the optimizer state must be too). The epochs complete."""
    found = checkpoints.newest() if dist.get_rank() == 0 else None
    done = torch.tensor([0, 0])
    if found is not None:
        state = torch.load(found, weights_only=True)
        model.load_state_dict(state["model"])
        for p, buffer in zip(model.parameters(), state["momentum"], strict=True):
            optimizer.state[p]["momentum_buffer"] = buffer
        done = state["done"]
        print(f"resuming from {found}: epoch {int(done[0])}, step {int(done[1])}", flush=True)
    dist.broadcast(done, 0)
    checkpoints.epoch, checkpoints.step = int(done[0]), int(done[1])
    if checkpoints.epoch or checkpoints.step:
        for p in model.parameters():
            dist.broadcast(p.data, 0)
            buffer = optimizer.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
            dist.broadcast(buffer, 0)
    return checkpoints.epoch


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("COLLECTIVE_TIMEOUT", "120"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    node = os.environ.get("GROUP_RANK", "?")
    # One write per line: the node's processes share one stdout.
    print(f"rank {rank}/{world} (node {node}) on {socket.gethostname()}\n", end="", flush=True)

    images, labels = load_digits(return_X_y=True)
    x = torch.tensor(images, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
    y = torch.tensor(labels)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    cut = int(len(y) * 0.8)
    train, test = order[:cut], order[cut:]
    mine = train[rank::world]  # this process's shard

    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = DistributedDataParallel(Net())
    lr = float(os.environ.get("KUBEFLOW_TRAINER_OPT_LR") or os.environ.get("LR", "0.05"))
    momentum = float(os.environ.get("KUBEFLOW_TRAINER_OPT_MOMENTUM") or os.environ.get("MOMENTUM", "0.9"))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    epochs, batch = int(os.environ.get("EPOCHS", "20")), int(os.environ.get("BATCH", "32"))
    if rank == 0:
        print(f"lr {lr} momentum {momentum} epochs {epochs} batch {batch}", flush=True)

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            return (model(x[test]).argmax(1) == y[test]).float().mean().item()

    checkpoints = Checkpoints(model.module, optimizer)
    first = resume(checkpoints, model.module, optimizer) + 1

    progress: int | None = None  # rank 0's last report, posted again with a SIGTERM checkpoint
    metrics: dict[str, float] = {}

    def stop(signum: int, _frame: object) -> None:
        # SIGTERM: rank 0 keeps what this run learnt (the epochs complete; the current one starts over).
        if rank == 0:
            saved = checkpoints.save("SIGTERM")
            if saved is not None:
                post_status(progress, None, metrics, saved, timeout=2)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    began = time.monotonic()
    loss_value, accuracy = 0.0, 0.0
    for epoch in range(first, epochs + 1):
        model.train()
        shuffled = mine[torch.randperm(len(mine), generator=torch.Generator().manual_seed(epoch))]
        total = torch.zeros(2)
        for start in range(0, len(shuffled), batch):
            idx = shuffled[start : start + batch]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            checkpoints.step += 1
            total += torch.tensor([loss.item() * len(idx), float(len(idx))])
        dist.all_reduce(total)
        loss_value = (total[0] / total[1]).item()
        accuracy = evaluate()
        checkpoints.epoch = epoch
        if rank == 0:
            elapsed = time.monotonic() - began
            remaining = round(elapsed / (epoch - first + 1) * (epochs - epoch))
            print(f"epoch {epoch}/{epochs} loss {loss_value:.4f} test accuracy {accuracy:.4f}", flush=True)
            progress, metrics = epoch * 100 // epochs, {"loss": loss_value, "accuracy": accuracy}
            last = 24 if epoch == epochs else 1  # the last report: tried for about 2 minutes
            post_status(progress, remaining, metrics, checkpoints.save("epoch"), attempts=last)
    if first > epochs:  # resumed from the last epoch's checkpoint: nothing left to train
        accuracy = evaluate()
    if rank == 0:
        print(f"held-out accuracy {accuracy:.4f} on {len(test)} images, {world} processes", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
