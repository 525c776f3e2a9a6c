"""``trainer`` on the real local cluster under Volcano, for jobs that do not run: one whose runtime
is missing, one whose gang cannot fit and one naming a queue that does not exist each show the
condition that holds them as STATE in ``list`` (with its reason under ``-o wide``), and ``describe``
names it and has a Pods section; an MPIJob is listed and described. Manifests go in as a directory
(``apply -f DIR -R``)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.test_cli import Trainer
from e2e.test_gang_volcano import sized, with_queue
from e2e.test_mpijob import mpijob
from e2e.test_trainjob import rjob, runtime, trainjob

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "volcano"
HELD = {"big": "WaitingForGang", "lost": "RuntimeNotFound", "nowhere": "Misconfigured"}


@pytest.fixture
def trainer(cluster: Any, ns: str) -> Trainer:
    return Trainer(cluster.kubeconfig, ns)


def states(trainer: Trainer, *args: str) -> dict[str, str]:
    lines = trainer("list", *args).stdout.splitlines()[1:]
    return {line.split()[0]: line.split()[1] for line in lines}


def test_list_and_describe_say_what_holds_each_job(trainer: Trainer, tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime("rt", rjob("node", "trainer"))))
    jobs = [
        sized("big", 8, "6"),  # 48 CPU: more than the cluster's 24, even overcommitted
        trainjob("lost", "no-such-runtime"),
        with_queue(sized("nowhere", 1, "1"), "no-such-queue"),
    ]
    (tmp_path / "jobs" / "held.yaml").write_text(yaml.safe_dump_all(jobs))
    applied = trainer("apply", "-f", str(tmp_path), "-R")
    assert applied.returncode == 0, applied.stderr
    assert len(applied.stdout.splitlines()) == 4

    deadline = time.monotonic() + 90
    while states(trainer) != HELD and time.monotonic() < deadline:
        time.sleep(1)
    assert states(trainer) == HELD

    wide = trainer("list", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-2:] == ["REASON", "MESSAGE"]
    assert any(line.startswith("big") and "minMember 8" in line for line in wide), wide
    assert any(line.startswith("nowhere") and "no-such-queue" in line for line in wide), wide

    for name, state in HELD.items():
        described = trainer("describe", name)
        assert described.returncode == 0, described.stderr
        assert re.search(rf"^State:\s+{state} \(", described.stdout, re.MULTILINE), described.stdout
        assert "Pods:" in described.stdout and "Events:" in described.stdout
    assert "no-such-queue" in trainer("describe", "nowhere").stdout

    waiting = trainer("wait", "big", "--timeout", "2")
    assert waiting.returncode == 3 and "big: WaitingForGang (" in waiting.stderr


def test_an_mpijob_is_listed_and_described(trainer: Trainer, tmp_path: Path) -> None:
    path = tmp_path / "mpi.yaml"
    path.write_text(yaml.safe_dump(mpijob("why-pi")))
    applied = trainer("apply", "-f", str(path))
    assert (applied.returncode, applied.stdout) == (0, "mpijobs.kubeflow.org/why-pi applied\n"), applied.stderr

    deadline = time.monotonic() + 90
    while states(trainer, "mpijobs").get("why-pi") not in ("Running", "Succeeded") and time.monotonic() < deadline:
        time.sleep(1)
    listed = trainer("list", "mpijobs").stdout.splitlines()
    assert listed[0].split() == ["NAME", "STATE", "WORKERS", "REPLICAS", "QUEUE", "AGE"]
    assert listed[1].split()[0] == "why-pi" and listed[1].split()[1] in ("Running", "Succeeded"), listed

    described = trainer("describe", "mpijob/why-pi")
    assert described.returncode == 0, described.stderr
    for text in ("Kind:", "MPIJob", "Replica statuses:", "Pods:", "why-pi-launcher", "Events:"):
        assert text in described.stdout, described.stdout
    assert trainer("get", "mpijob", "why-pi", "-o", "name").stdout == "mpijob.kubeflow.org/why-pi\n"
    deleted = trainer("delete", "mpijob/why-pi")
    assert (deleted.returncode, deleted.stdout) == (0, "mpijobs.kubeflow.org/why-pi deleted\n")
    assert trainer("delete", "mpijob/why-pi", "--ignore-not-found").returncode == 0
