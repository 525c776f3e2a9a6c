"""``trainer`` on the real local cluster under Volcano, for jobs that do not run: one whose runtime
is missing, one whose gang cannot fit and one naming a queue that does not exist each show the
condition that holds them as STATE in ``list`` (with its reason under ``-o wide``), and ``describe``
names it and has a Pods section; an MPIJob is listed and described. Manifests go in as a directory
(``apply -f DIR -R``).

Jobs whose pods wait, with no condition holding them: one whose pod asks for more CPU than any node
has (Volcano admits its gang, then cannot place the pod: the scheduler's ``Insufficient cpu``) and
one whose image cannot be pulled. KWOK pulls no image, so the second pod is kept from starting (a
long KWOK ``pod-create`` delay) and the test writes the ``ImagePullBackOff`` status a kubelet would
(``kubelet`` ``pkg/kubelet/images``: ``Back-off pulling image``). ``get -o wide``, ``describe``,
``why``, ``wait`` and ``logs`` name the cause."""

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
from localcluster.client import Client, wait_for
from trainer.api.kinds import PODS
from trainer.framework.json_codec import JSON

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


NOT_STARTED = {"pod-create.stage.kwok.x-k8s.io/delay": "1h", "pod-create.stage.kwok.x-k8s.io/jitter-delay": "3601s"}
"""KWOK leaves a bound pod Pending for an hour: the stand-in for a kubelet that cannot start it."""
MISSING_IMAGE = "registry.invalid/no-such-image:1"


def image_pull_backoff(pod: JSON) -> JSON:
    """The status a kubelet reports for a pod whose image cannot be pulled."""
    container = pod["spec"]["containers"][0]
    waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{container["image"]}"'}
    status = {"name": container["name"], "image": container["image"], "imageID": "", "ready": False}
    return {"phase": "Pending", "containerStatuses": [{**status, "restartCount": 0, "state": {"waiting": waiting}}]}


async def started_pods(client: Client, ns: str, name: str, bound: bool) -> list[JSON]:
    async def found() -> list[JSON] | None:
        pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
        return [p for p in pods if bool(p["spec"].get("nodeName")) == bound] or None

    return await wait_for(found, f"a {'bound' if bound else 'pending'} pod of {name}", timeout=90)


async def test_a_pod_no_node_can_take_is_named_with_the_schedulers_message(
    client: Client, trainer: Trainer, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(sized("wide", 1, "7"), ns)  # 7 CPU: the gang fits the cluster, the pod no 6-CPU node

    async def unschedulable() -> JSON | None:
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=wide")
        conds = [c for p in pods for c in p.get("status", {}).get("conditions") or []]
        return next((c for c in conds if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"), None)

    said = await wait_for(unschedulable, "the pod of wide Unschedulable", timeout=120)
    assert "Insufficient cpu" in said["message"], said

    wide = trainer("get", "tj", "wide", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-2:] == ["REASON", "MESSAGE"]
    assert wide[1].split()[:2] == ["wide", "Created"] and " Unschedulable " in wide[1], wide
    assert "Insufficient cpu" in wide[1], wide

    why = trainer("why", "wide")
    assert why.returncode == 0, why.stderr
    assert "Reason:  Unschedulable" in why.stdout and "Insufficient cpu" in why.stdout, why.stdout
    assert "docs/troubleshooting.md#pods-that-cannot-be-scheduled" in why.stdout, why.stdout
    assert "Why:" in trainer("describe", "wide").stdout

    waited = trainer("wait", "wide", "--timeout", "2")
    assert waited.returncode == 3, waited.stderr
    assert "last seen: Created; why: Unschedulable: pod wide-node-" in waited.stderr, waited.stderr
    assert "Insufficient cpu" in waited.stderr


async def test_a_pod_whose_image_cannot_be_pulled_is_named_and_logs_stop_waiting(
    client: Client, trainer: Trainer, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", NOT_STARTED)), ns)
    await client.apply(trainjob("pull", "rt", trainer={"numNodes": 1, "image": MISSING_IMAGE}), ns)
    pod = (await started_pods(client, ns, "pull", bound=True))[0]
    await client.kube.patch_status(PODS, ns, pod["metadata"]["name"], image_pull_backoff(pod))

    wide = trainer("get", "tj", "-o", "wide").stdout.splitlines()
    line = next(x for x in wide if x.startswith("pull "))
    assert " ImagePullBackOff " in line and "Back-off pulling image" in line, wide

    why = trainer("why", "pull")
    assert why.returncode == 0, why.stderr
    assert why.stdout.splitlines()[0] == "pull: Created", why.stdout
    assert "Reason:  ImagePullBackOff" in why.stdout, why.stdout
    assert "docs/troubleshooting.md#images-that-cannot-be-pulled" in why.stdout, why.stdout

    waited = trainer("wait", "pull", "--timeout", "2")
    assert waited.returncode == 3 and "why: ImagePullBackOff: pod pull-node-" in waited.stderr, waited.stderr

    logs = trainer("logs", "pull", "--pod-timeout", "60")
    assert logs.returncode == 1, logs.stderr
    assert "cannot start: ImagePullBackOff" in logs.stderr, logs.stderr
