"""Handwritten digits (scikit-learn's bundled 8x8 set, 1,797 images) with PyTorch DDP over gloo.

Run by ``torchrun`` on every node of the TrainJob: each process joins the process group from the
``PET_*`` variables the operator sets, trains a small convolutional network on its shard of 80% of the
images, and every epoch all-reduces the loss and measures accuracy on the held-out 20%. Rank 0 posts
progress (percent, seconds left, loss and accuracy) to the TrainJob's status endpoint when the
operator gives one (``KUBEFLOW_TRAINER_SERVER_URL``, with the pod's projected token and the CA it
mounts), prints one line per epoch, and ends with the held-out accuracy. Nothing is downloaded.

Environment: ``EPOCHS`` (default 20), ``BATCH`` (default 32 per process), ``LR`` (default 0.05).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import time
import urllib.error
import urllib.request

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def post_status(progress: int, remaining: int | None, metrics: dict[str, float]) -> None:
    """Post ``trainerStatus`` to the operator's status server, when it gives one; never fatal."""
    url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
    if not url:
        return
    status: dict[str, object] = {
        "progressPercentage": progress,
        "metrics": [{"name": k, "value": f"{v:.4f}"} for k, v in metrics.items()],
    }
    if remaining is not None:
        status["estimatedRemainingSeconds"] = remaining
    with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
        token = f.read().strip()
    context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    request = urllib.request.Request(
        url,
        data=json.dumps({"trainerStatus": status}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            response.read()
    except (OSError, urllib.error.HTTPError) as e:
        print(f"progress post failed: {e}", flush=True)


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


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
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
    optimizer = torch.optim.SGD(model.parameters(), lr=float(os.environ.get("LR", "0.05")), momentum=0.9)
    epochs, batch = int(os.environ.get("EPOCHS", "20")), int(os.environ.get("BATCH", "32"))
    began = time.monotonic()
    loss_value, accuracy = 0.0, 0.0
    for epoch in range(1, epochs + 1):
        model.train()
        shuffled = mine[torch.randperm(len(mine), generator=torch.Generator().manual_seed(epoch))]
        total = torch.zeros(2)
        for start in range(0, len(shuffled), batch):
            idx = shuffled[start : start + batch]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(idx), float(len(idx))])
        dist.all_reduce(total)
        loss_value = (total[0] / total[1]).item()
        model.eval()
        with torch.no_grad():
            accuracy = (model(x[test]).argmax(1) == y[test]).float().mean().item()
        if rank == 0:
            elapsed = time.monotonic() - began
            remaining = round(elapsed / epoch * (epochs - epoch))
            print(f"epoch {epoch}/{epochs} loss {loss_value:.4f} test accuracy {accuracy:.4f}", flush=True)
            post_status(epoch * 100 // epochs, remaining, {"loss": loss_value, "accuracy": accuracy})
    if rank == 0:
        print(f"held-out accuracy {accuracy:.4f} on {len(test)} images, {world} processes", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
