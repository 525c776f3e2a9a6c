"""The operator as users install it: the image built by buildah from the Dockerfile, ``helm install`` of
``charts/trainer`` with it (2 replicas, leader election, webhooks and the status server behind the chart's
Service), on a local cluster with two real nodes (and two KWOK nodes for bursts). No operator process runs
on the host in this module.

- The image: buildah's config (entrypoint, numeric non-root user), and in the running pod uid 65532, a
  read-only root file system and the image's entrypoint as PID 1.
- Admission through the in-cluster webhook: a bad TrainJob created with ``kubectl`` is refused with the
  webhook's message.
- Training: the digits sample trains on the real nodes; its progress reaches ``status.trainerStatus``
  through the in-cluster status server; metrics are read through the metrics Service.
- Failover: the leader pod deleted mid-burst of 50 TrainJobs; the other replica leads within the Lease
  time, every TrainJob completes, and no child is recreated or written again by the new leader.
- ``helm upgrade`` to a new image tag while a TrainJob runs: it completes, its Jobs are not recreated.
- ``helm uninstall``: no webhook configuration, Deployment, Service, ServiceAccount or RBAC is left; the
  CRDs stay (Helm never deletes a chart's ``crds/``).

Its own cluster (ServiceAccount admission on: the operator's pods need their tokens), not the session's.
Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`); ``TRAINER_E2E_REAL=0`` skips it.
Figures (image build, install, hand-over) are printed and written to ``<cluster state>/logs/incluster.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from e2e import doc_blocks
from e2e.helpers import ROOT, connected, own_cluster, shell_env
from e2e.test_trainjob import trainjob
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.incluster import NAMESPACE, Release, installed
from localcluster.operator_image import REPOSITORY, chart_version
from localcluster.realnode.images import image_config
from localcluster.realnode.node import NODE_SELECTOR, unavailable
from trainer.api.kinds import JOBS, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.kube.leader import LEASE_DURATION
from trainer.framework.kube.projection import FIELD_MANAGER

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"in-cluster operator: {WHY_NOT}"),
    pytest.mark.builds("helm"),
]
DIGITS = ROOT / "config" / "samples" / "digits"
CRDS = ROOT / "config" / "crd" / "bases"
NS = "default"
BURST = 50
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def ic_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """This module's cluster: 2 KWOK nodes, ServiceAccount admission, the CRDs."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("incluster"), nodes=2, service_account_admission=True, extra_crds=[CRDS]
    )
    with own_cluster(cluster):
        try:
            yield cluster
        finally:
            (cluster.state_dir / "logs").mkdir(parents=True, exist_ok=True)
            (cluster.state_dir / "logs" / "incluster.json").write_text(json.dumps(FIGURES, indent=2) + "\n")
            print(f"\nin-cluster figures: {json.dumps(FIGURES)}")


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No operator process on the host: the chart's pods are the operator here."""
    yield None


@pytest.fixture(scope="module")
def release(ic_cluster: LocalCluster, real_node_store: Path) -> Iterator[Release]:
    """Two real nodes with the training image (from the session's image store), and the chart installed on
    them with the built image."""
    work = Path(tempfile.mkdtemp(prefix="icnodes-"))  # short: containerd's socket paths must fit
    try:
        with installed(ic_cluster, work, ("busybox", "training"), real_node_store) as release:
            FIGURES["install"] = dict(release.timings)
            yield release
    finally:
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
async def kube(ic_cluster: LocalCluster, release: Release) -> AsyncIterator[Client]:
    async with connected(ic_cluster) as client:
        yield client


def exec_python(release: Release, pod: str, code: str) -> str:
    """Run ``python -c code`` in the operator container of ``pod``; its stdout."""
    result = release.kubectl("exec", pod, "-c", "manager", "--", "python", "-c", code, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


async def leader_of(release: Release, other_than: str | None = None, timeout: float = 60) -> str:
    async def probe() -> str | None:
        name = await asyncio.to_thread(release.leader)
        return name if name and name != other_than else None

    return await wait_for(probe, f"a leader other than {other_than}", timeout=timeout, interval=0.5)


def children_of(jobs: list[JSON]) -> dict[str, tuple[str, int, str]]:
    """Each Job: (uid, generation, the time our field manager last changed it)."""
    out = {}
    for job in jobs:
        meta = job["metadata"]
        times = [m.get("time", "") for m in meta.get("managedFields") or [] if m.get("manager") == FIELD_MANAGER]
        out[f"{meta['namespace']}/{meta['name']}"] = (meta["uid"], meta.get("generation", 0), max(times, default=""))
    return out


# ----------------------------------------------------------------------------- the image


def test_the_image_is_built_by_buildah_from_the_dockerfile(release: Release) -> None:
    built = release.image
    assert built is not None and built.archive.exists()
    image = image_config(built.archive)  # what the nodes imported
    config = image["config"]
    assert config["Entrypoint"] == ["trainer-operator"]
    assert config["User"] == "65532:65532"
    assert built.layers >= 2 and len(image["rootfs"]["diff_ids"]) == built.layers
    steps = [h.get("created_by", "") for h in image["history"]]
    assert steps[0] == "localcluster/realnode/images.py", steps  # the base made here from Debian packages
    assert any("useradd --system --uid 65532" in step for step in steps), steps  # the Dockerfile's RUN, by buildah
    facts = json.loads(built.archive.with_suffix(".json").read_text())
    FIGURES["image"] = {"layers": built.layers, "archive_mib": built.size >> 20, **facts}
    print(f"\nimage {built.name}: {built.layers} layers, {built.size >> 20} MiB archive, {facts}")


def test_the_pod_runs_the_images_entrypoint_as_65532_on_a_read_only_root(release: Release) -> None:
    pods = release.pods()
    assert len(pods) == 2 and {p["spec"]["nodeName"] for p in pods} <= {"realnode-0", "realnode-1"}
    code = (
        "import os, errno\n"
        "print(os.getuid(), os.getgid())\n"
        "print(open('/proc/1/cmdline').read().split(chr(0))[:2])\n"
        "try:\n    open('/probe', 'w')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n"
    )
    out = exec_python(release, pods[0]["metadata"]["name"], code).splitlines()
    assert out[0] == "65532 65532"
    assert out[1] == "['/opt/venv/bin/python', '/opt/venv/bin/trainer-operator']"
    assert out[2] == "EROFS"


# ----------------------------------------------------------------------------- admission, training, metrics


def test_a_bad_trainjob_is_refused_by_the_in_cluster_webhook(release: Release, tmp_path: Path) -> None:
    bad = trainjob("refused", "no-such-runtime", kind="ClusterTrainingRuntime")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = release.cluster.run_kubectl("create", "-n", NS, "-f", str(path), check=False)
    assert result.returncode != 0
    assert 'admission webhook "validate.trainjobs.trainer.kubeflow.org" denied the request' in result.stderr
    assert "ClusterTrainingRuntime 'no-such-runtime' not found" in result.stderr


def digits_runtime() -> list[JSON]:
    """The digits sample's objects (``kubectl kustomize``), its pods kept on the real nodes."""
    docs = [d for d in yaml.safe_load_all((DIGITS / "runtime.yaml").read_text()) if d]
    for doc in docs:
        for rj in doc["spec"]["template"]["spec"]["replicatedJobs"]:
            rj["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"type": "realnode"}
    return docs


async def test_digits_trains_with_progress_through_the_in_cluster_status_server(kube: Client, release: Release) -> None:
    script = (DIGITS / "train.py").read_text()
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "digits-train"}}
    await kube.apply({**configmap, "data": {"train.py": script}}, NS)
    for doc in digits_runtime():
        await kube.apply(doc, NS)
    job = yaml.safe_load((DIGITS / "trainjob.yaml").read_text())
    job["spec"]["trainer"]["env"] = [{"name": "EPOCHS", "value": "8"}]
    created = await kube.kube.create(TRAINJOBS, NS, job)
    name = created["metadata"]["name"]
    seen: list[float] = []

    async def ended() -> JSON | None:
        tj = await kube.trainjob(NS, name) or {}
        progress = ((tj.get("status") or {}).get("trainerStatus") or {}).get("progressPercentage")
        if progress is not None and (not seen or seen[-1] != progress):
            seen.append(progress)
        done = condition(tj, "Complete") or condition(tj, "Failed")
        return tj if done and done.get("status") == "True" else None

    tj = await wait_for(ended, f"TrainJob {name} to end", timeout=600, interval=1)
    assert condition(tj, "Complete"), tj["status"]
    status = tj["status"]["trainerStatus"]
    assert status["progressPercentage"] == 100 and len(seen) >= 2, seen
    assert {m["name"] for m in status.get("metrics") or []} >= {"loss", "accuracy"}, status
    pods = await kube.pods(NS, f"jobset.sigs.k8s.io/jobset-name={name}")
    assert {p["spec"]["nodeName"] for p in pods} == {"realnode-0", "realnode-1"}
    FIGURES["digits_progress_reports"] = len(seen)


async def test_metrics_are_read_through_the_metrics_service(release: Release) -> None:
    service = json.loads(release.kubectl("get", "service", "trainer-operator-metrics", "-o", "json").stdout)
    url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}/metrics"
    async with aiohttp.ClientSession() as http, http.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r:
        text = await r.text()
    assert r.status == 200 and "trainer_" in text


# ----------------------------------------------------------------------------- failover, upgrade, uninstall


def burst_runtime() -> JSON:
    """The torch-distributed sample, its pods on the KWOK nodes (they complete without running)."""
    runtime: JSON = yaml.safe_load((ROOT / "config" / "samples" / "torch-distributed.yaml").read_text())
    runtime["metadata"]["name"] = "burst"
    for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        rj["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"type": "kwok"}
    return runtime


async def create_through_webhook(kube: Client, obj: JSON, retried: list[str]) -> None:
    """Create ``obj``; a call to the webhook that failed on the way (the apiserver's connection to a
    replica that just went away) is retried, as ``kubectl`` users would, and noted in ``retried``."""
    for _ in range(10):
        try:
            await kube.kube.create(TRAINJOBS, NS, obj)
            return
        except ApiError as e:
            if e.status != 500 or "failed calling webhook" not in str(e):
                raise
            retried.append(f"{obj['metadata']['name']}: {e}")
            await asyncio.sleep(1)
    raise AssertionError(f"the webhook kept failing for {obj['metadata']['name']}: {retried[-1]}")


@pytest.mark.parametrize("how", ["graceful", "forced"])
async def test_the_other_replica_leads_when_the_leader_dies_mid_burst(kube: Client, release: Release, how: str) -> None:
    """``graceful``: ``kubectl delete pod``; ``forced``: ``--grace-period=0 --force`` (the object goes at
    once and the kubelet stops the container with the shortest grace it allows). Either way the leader
    gets SIGTERM and releases the Lease; a leader that could not would be waited out (the Lease time)."""
    await kube.apply(burst_runtime())
    await asyncio.to_thread(release.wait_ready)
    leader = await leader_of(release)
    names = [f"{how}-{i:02d}" for i in range(BURST)]
    retried: list[str] = []
    for name in names[: BURST // 2]:
        await create_through_webhook(kube, trainjob(name, "burst", kind="ClusterTrainingRuntime"), retried)
    before = {k: v for k, v in children_of((await kube.kube.list(JOBS, NS))[0]).items() if how in k}
    killed_at = time.time()
    t = time.monotonic()
    force = ["--grace-period=0", "--force"] if how == "forced" else []
    release.kubectl("delete", "pod", leader, "--wait=false", *force)
    for name in names[BURST // 2 :]:
        await create_through_webhook(kube, trainjob(name, "burst", kind="ClusterTrainingRuntime"), retried)
    new = await leader_of(release, other_than=leader, timeout=LEASE_DURATION + 30)
    handover = time.monotonic() - t
    FIGURES[f"handover_seconds_{how}"] = round(handover, 1)
    FIGURES[f"webhook_calls_retried_{how}"] = len(retried)
    print(f"\nleader {leader} deleted ({how}); {new} leads after {handover:.1f}s (Lease {LEASE_DURATION}s)")
    print(f"creates retried after a failed webhook call: {len(retried)}", *retried[:3], sep="\n  ")
    assert handover <= LEASE_DURATION + 10

    async def all_complete() -> bool:
        items, _ = await kube.kube.list(TRAINJOBS, NS)
        done = [t for t in items if t["metadata"]["name"] in names and condition(t, "Complete")]
        return len(done) == BURST

    await wait_for(all_complete, f"{BURST} TrainJobs Complete", timeout=300, interval=1)
    after = children_of((await kube.kube.list(JOBS, NS))[0])
    for key, (uid, generation, _written) in before.items():
        assert after[key][0] == uid, f"{key} was recreated"
        assert after[key][1] == generation, f"{key}'s spec was written again"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(killed_at))
    rewritten = [k for k, (_, _, written) in after.items() if k in before and written > stamp]
    assert not rewritten, f"written by the new leader: {rewritten}"
    burst_jobs = [k for k in after if k.split("/")[1].startswith(f"{how}-")]
    assert len(burst_jobs) == BURST, sorted(burst_jobs)  # one Job per TrainJob: none twice


async def test_helm_upgrade_while_a_trainjob_runs_keeps_its_jobs(kube: Client, release: Release) -> None:
    runtime = burst_runtime()
    runtime["metadata"]["name"] = "sleeper"
    spec = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"type": "realnode"}
    spec["containers"][0].update(
        image="localhost/realnode/busybox:1", imagePullPolicy="Never", command=["sh", "-c", "sleep 40"]
    )
    await kube.apply(runtime)
    await kube.kube.create(TRAINJOBS, NS, trainjob("upgraded", "sleeper", kind="ClusterTrainingRuntime"))
    await kube.wait_running(NS, "upgraded", timeout=90)
    before = children_of(await kube.jobs(NS, "upgraded"))
    old = {p["metadata"]["name"] for p in release.pods()}
    await asyncio.to_thread(release.install, "0.1.0-next")  # helm upgrade --install: an upgrade here
    pods = release.pods()
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"trainer-operator:0.1.0-next"}
    assert not old & {p["metadata"]["name"] for p in pods}
    tj = await kube.wait_condition(NS, "upgraded", "Complete", timeout=180)
    assert tj["status"]["conditions"]
    after = children_of(await kube.jobs(NS, "upgraded"))
    assert {k: v[:2] for k, v in after.items()} == {k: v[:2] for k, v in before.items()}


async def test_helm_uninstall_leaves_only_the_crds(release: Release) -> None:
    release.uninstall()
    cluster = release.cluster

    async def pods_gone() -> bool:  # helm returns once the Deployment is deleted; its pods then stop
        out = await asyncio.to_thread(release.kubectl, "get", "pods", "-o", "name")
        return not [n for n in out.stdout.split() if n.startswith("pod/trainer-operator-")]

    await wait_for(pods_gone, "the operator's pods gone", timeout=60, interval=1)
    for kind in (
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "clusterroles",
        "clusterrolebindings",
    ):
        names = cluster.run_kubectl("get", kind, "-o", "name").stdout.split()
        assert not [n for n in names if "trainer" in n.split("/")[1] and "system:" not in n], names
    for kind in ("deployments", "services", "serviceaccounts", "roles", "rolebindings"):
        names = release.kubectl("get", kind, "-o", "name").stdout.split()
        assert not [n for n in names if "trainer" in n and not n.endswith("/default")], (kind, names)
    # What the operator made at run time stays until the namespace goes (docs/operating.md): the Lease,
    # whose holder no longer exists (helm deletes the RBAC beside the pods, so a leader stopping may
    # not be allowed to release it: it expires), and the two certificate Secrets.
    lease = json.loads(release.kubectl("get", "lease", "trainer-operator", "-o", "json").stdout)
    holder = lease["spec"].get("holderIdentity") or ""
    assert not holder or holder.split("_")[0] not in release.kubectl("get", "pods", "-o", "name").stdout
    secrets = release.kubectl("get", "secrets", "-o", "name").stdout.split()
    assert sorted(secrets) == ["secret/trainer-status-server-certs", "secret/trainer-webhook-certs"], secrets
    crds = cluster.run_kubectl("get", "crds", "-o", "name").stdout
    assert "trainjobs.trainer.kubeflow.org" in crds
    assert NAMESPACE in cluster.run_kubectl("get", "namespaces", "-o", "name").stdout


def test_the_readmes_install_block_runs_as_written(release: Release, tmp_path: Path) -> None:
    """README.md's "Install on an existing cluster", after the module's release is gone: ``docker build``
    and ``push`` stand for the image buildah built from the same Dockerfile, tagged as the README tags it
    (the chart's appVersion) and imported into the nodes; ``REGISTRY`` is where that image is
    (``docker.io/library``); the install adds only what this cluster needs: ``pullPolicy: Never`` (no
    registry) and the real nodes' selector (KWOK nodes run no image)."""
    written = doc_blocks.commands((ROOT / "README.md").read_text(), "install")
    tag = chart_version()

    def substitute(command: str) -> doc_blocks.Step | None:
        if command.startswith("docker build"):
            assert f"REGISTRY/{REPOSITORY}:{tag} " in command, f"the README builds another tag than {tag}"
            built = release.import_image(tag)
            return lambda: f"{built.name} imported into the nodes"
        command = command.replace("REGISTRY/", "docker.io/library/")
        if command.startswith("helm install "):
            node = " ".join(f"--set nodeSelector.{k}={v}" for k, v in NODE_SELECTOR.items())
            return f"{command} --set image.pullPolicy=Never {node}"
        return command

    ran = doc_blocks.run(written, substitute, shell_env(release.cluster, tmp_path), ROOT)
    try:
        for r in ran:
            print(f"$ {r.written}\n{r.output}")
        assert [r.rc for r in ran] == [0] * len(written), ran[-1].output
        pods = release.pods()
        assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods), pods
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {f"docker.io/library/{REPOSITORY}:{tag}"}
    finally:
        release.helm("uninstall", "trainer", "-n", "trainer-system", "--wait", check=False)
