"""Deploy and operate, on the real local cluster: the kustomize config renders and passes a server-side
dry run; two operators elect one leader on a Lease (only it reconciles; SIGKILL hands over within the
lease duration, SIGTERM at once; a stolen Lease stops the leader; a leader paused past its Lease writes
nothing once it resumes and exits 1); probes and Prometheus metrics
answer; the operator runs to Complete with nothing but its ServiceAccount's RBAC from config/. The image
and the chart's Deployment run in e2e/test_incluster.py.

This module's operator (the ``operator`` fixture, "A") runs with ``--leader-elect`` on the Lease
``default/e2e-operate`` (``trainer-system/e2e-operate`` with ``TRAINER_E2E_OPERATOR_SA=1``); the
tests start rivals and restart A as they go, and leave A running.
Measured hand-over times are printed and written to ``<cluster state>/logs/handover.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.helpers import ROOT, log_events, size
from e2e.test_mpijob import mpijob
from localcluster import ExternalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from localcluster.operator_sa import NAMESPACE, install_identity, render, token_kubeconfig
from trainer.api.kinds import CONFIGMAPS, JOBS, LEASES, MPIJOBS, SECRETS, SERVICES, TRAINJOBS
from trainer.framework.clock import format_micro_time
from trainer.framework.json_codec import JSON
from trainer.framework.kube.leader import LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD
from trainer.wiring import Settings

pytestmark = pytest.mark.e2e
# Under TRAINER_E2E_OPERATOR_SA the module's operator may only hold Leases in its own namespace.
LEASE_NS = NAMESPACE if os.environ.get("TRAINER_E2E_OPERATOR_SA") else "default"
LEASE = "e2e-operate"
A_METRICS, A_PROBES, B_METRICS, B_PROBES, C_METRICS, C_PROBES, I_METRICS, I_PROBES = reserved_ports(8)
OPERATOR_ARGS = [
    "--leader-elect",
    f"--leader-election-namespace={LEASE_NS}",
    f"--leader-election-id={LEASE}",
    f"--metrics-bind-address=127.0.0.1:{A_METRICS}",
    f"--health-probe-bind-address=127.0.0.1:{A_PROBES}",
]
B_ARGS = [*OPERATOR_ARGS[:3], f"--metrics-bind-address=127.0.0.1:{B_METRICS}"]
B_ARGS += [f"--health-probe-bind-address=127.0.0.1:{B_PROBES}"]
HANDOVER: dict[str, float] = {}


# ----------------------------------------------------------------------------- helpers


async def identity(path: Path, offset: int = 0) -> str:
    """The leader-election identity an operator logged at its latest start (after ``offset``)."""

    async def probe() -> str | None:
        for e in reversed(log_events(path, offset)):
            if e.get("event") == "starting" and e.get("identity"):
                return str(e["identity"])
        return None

    return await wait_for(probe, f"the identity in {path}", timeout=30)


async def get_status(url: str) -> int:
    """The HTTP status of GET ``url``; 0 when nothing answers."""
    try:
        async with aiohttp.ClientSession() as http, http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
            return r.status
    except (aiohttp.ClientError, OSError, TimeoutError):
        return 0


async def wait_ready(port: int, timeout: float = 60) -> None:
    async def ready() -> bool:
        return await get_status(f"http://127.0.0.1:{port}/readyz") == 200

    await wait_for(ready, f"/readyz on {port}", timeout=timeout)


async def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of ``/metrics`` on ``port``: (name, labels) -> value."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        assert r.status == 200
        text = await r.text()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str, **labels: str) -> float:
    """The sum of ``metric`` over the series whose labels include ``labels`` (KeyError if none)."""
    found = [v for (n, ls), v in samples.items() if n == metric and set(labels.items()) <= ls]
    if not found:
        raise KeyError(f"{metric}{labels} not exposed")
    return sum(found)


async def holder(client: Client, namespace: str = LEASE_NS, name: str = LEASE) -> str | None:
    lease = await client.kube.get_or_none(LEASES, namespace, name)
    return None if lease is None else str((lease.get("spec") or {}).get("holderIdentity") or "")


async def until_holder(client: Client, who: str, timeout: float, namespace: str = LEASE_NS, name: str = LEASE) -> float:
    """Seconds until the Lease is held by ``who`` (polled every 0.1 s)."""
    began = time.monotonic()

    async def probe() -> bool:
        return await holder(client, namespace, name) == who

    await wait_for(probe, f"lease {namespace}/{name} held by {who}", timeout=timeout, interval=0.1)
    return time.monotonic() - began


def reap(op: Operator, timeout: float) -> int:
    """Wait for ``op``'s process to end (it was signalled); forget it so it can be started again."""
    assert op.proc is not None
    code = op.proc.wait(timeout=timeout)
    op.proc = None
    return code


def keys_in(events: list[JSON], key: str) -> list[JSON]:
    return [e for e in events if e.get("trainjob") == key or e.get("mpijob") == key]


async def run_sample_trainjob(client: Client, ns: str, name: str = "pytorch-simple", timeout: float = 90) -> JSON:
    """The sample TrainJob (named ``name``) in ``ns``, once Complete."""
    obj = yaml.safe_load((ROOT / "config" / "samples" / "trainjob.yaml").read_text())
    obj["metadata"]["name"] = name
    await client.apply(obj, ns)
    return await client.wait_condition(ns, name, "Complete", timeout=timeout)


def record(what: str, seconds: float, cluster: Any) -> None:
    HANDOVER[what] = round(seconds, 2)
    print(f"\n[hand-over] {what}: {seconds:.2f} s")
    path = Path(cluster.state_dir) / "logs" / "handover.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(HANDOVER, indent=2))


# ----------------------------------------------------------------------------- (a) config


@pytest.mark.parametrize("overlay", ["default", "overlays/volcano", "overlays/kueue", "overlays/scheduler-plugins"])
def test_config_renders_and_passes_a_server_side_dry_run(cluster: Any, overlay: str, tmp_path: Path) -> None:
    docs = render(cluster, overlay)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {
        ("Namespace", NAMESPACE),
        ("ServiceAccount", "trainer-operator"),
        ("ClusterRole", "trainer-operator"),
        ("ClusterRoleBinding", "trainer-operator"),
        ("Role", "trainer-leader-election"),
        ("RoleBinding", "trainer-leader-election"),
        ("Deployment", "trainer-operator"),
        ("Service", "trainer-operator-metrics"),
    } <= kinds
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    gang = "none" if overlay == "default" else overlay.split("/")[1]
    assert container["args"][:2] == [f"--gang-scheduler-name={gang}", "--leader-elect"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    groups = {g for rule in role["rules"] for g in rule["apiGroups"]}
    assert ("scheduling.volcano.sh" in groups) == (gang == "volcano")
    assert ("scheduling.x-k8s.io" in groups) == (gang == "scheduler-plugins")
    assert all(d["metadata"].get("namespace") in (None, NAMESPACE) for d in docs)

    # The namespace must exist for a dry run of what goes in it (a dry run creates nothing).
    cluster.run_kubectl("create", "namespace", NAMESPACE, check=False)
    path = tmp_path / "all.yaml"
    path.write_text(cluster.run_kubectl("kustomize", str(ROOT / "config" / overlay)).stdout)
    # --force-conflicts: the CRDs in it were installed by the test cluster under another field manager.
    result = cluster.run_kubectl(
        "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(path), check=False
    )
    assert result.returncode == 0, result.stderr
    assert "deployment.apps/trainer-operator serverside-applied (server dry run)" in result.stdout


# ----------------------------------------------------------------------------- (c) probes and metrics


async def test_probes_answer_and_metrics_count_a_trainjob(
    client: Client, samples: None, ns: str, operator: Operator
) -> None:
    await wait_ready(A_PROBES)
    assert await get_status(f"http://127.0.0.1:{A_PROBES}/healthz") == 200
    outcome = {"kind": "TrainJob", "namespace": ns, "runtime": "torch-distributed"}
    before = await scrape(A_METRICS)
    await run_sample_trainjob(client, ns)
    s = await scrape(A_METRICS)
    # The outcome counters move as the job is created and completes (labels: no job names).
    with pytest.raises(KeyError):
        sample(before, "trainer_jobs_created_total", **outcome)
    assert sample(s, "trainer_jobs_created_total", **outcome) == 1
    assert sample(s, "trainer_jobs_succeeded_total", **outcome) == 1
    assert sample(s, "controller_runtime_reconcile_total", controller="trainjob", result="success") > 0
    assert sample(s, "controller_runtime_reconcile_errors_total", controller="trainjob") >= 0
    assert sample(s, "controller_runtime_reconcile_time_seconds_count", controller="trainjob") > 0
    assert sample(s, "controller_runtime_reconcile_time_seconds_sum", controller="trainjob") > 0
    workers = Settings().max_concurrent_reconciles  # the declared default
    assert sample(s, "controller_runtime_max_concurrent_reconciles", controller="trainjob") == workers
    assert sample(s, "workqueue_depth", name="trainjob") >= 0
    assert sample(s, "workqueue_adds_total", name="trainjob") > 0
    assert sample(s, "workqueue_queue_duration_seconds_count", name="trainjob") > 0
    assert sample(s, "workqueue_work_duration_seconds_count", name="trainjob") > 0
    assert sample(s, "rest_client_requests_total", code="200", method="GET") > 0
    assert sample(s, "rest_client_requests_total", code="200", method="PATCH") > 0  # server-side apply
    assert sample(s, "rest_client_requests_total", code="201", method="POST") > 0  # events
    assert sample(s, "leader_election_master_status", name=LEASE) == 1


# ----------------------------------------------------------------------------- (b) leader election


async def test_only_the_leader_reconciles_and_hands_over(
    client: Client, cluster: Any, samples: None, ns: str, operator: Operator
) -> None:
    a = operator
    a_id = await identity(a.log_path)
    await until_holder(client, a_id, timeout=30)

    b = Operator(cluster.kubeconfig, cluster.state_dir / "logs" / "operator-operate-b.log", B_ARGS)
    b_offset = size(b.log_path)
    b.start()
    try:
        b_id = await identity(b.log_path, b_offset)
        await wait_ready(B_PROBES)  # a standby is ready: caches synced, waiting to lead
        assert sample(await scrape(B_METRICS), "leader_election_master_status", name=LEASE) == 0
        assert await holder(client) == a_id

        # Only the leader writes.
        a_offset = size(a.log_path)
        await run_sample_trainjob(client, ns)
        key = f"{ns}/pytorch-simple"
        a_lines, b_lines = keys_in(log_events(a.log_path, a_offset), key), log_events(b.log_path, b_offset)
        assert any(e.get("event") == "applied" for e in a_lines), "the leader applied the children"
        assert all(e.get("controller") == "trainjob" for e in a_lines)
        assert not [e for e in b_lines if e.get("event") == "applied" or "trainjob" in e or "mpijob" in e]
        assert any(e.get("event") == "waiting to lead" for e in b_lines)

        # SIGKILL of the leader: the standby takes over once the Lease expires.
        assert a.proc is not None
        a.proc.kill()
        took = await until_holder(client, b_id, timeout=LEASE_DURATION + 3 * RETRY_PERIOD + 5)
        assert reap(a, 5) == -signal.SIGKILL
        record("SIGKILL of the leader -> standby leads", took, cluster)
        assert LEASE_DURATION - 2 * RETRY_PERIOD <= took <= LEASE_DURATION + 2.5 * RETRY_PERIOD + 2
        await run_sample_trainjob(client, ns, "second")
        assert keys_in(log_events(b.log_path, b_offset), f"{ns}/second"), "the new leader reconciles"

        # A restarts as a standby; SIGTERM of the leader B releases the Lease and A leads at once.
        a_offset = size(a.log_path)
        a.start()
        a_id = await identity(a.log_path, a_offset)
        await wait_ready(A_PROBES)
        assert await holder(client) == b_id
        assert b.proc is not None
        b_proc, began = b.proc, time.monotonic()
        b_proc.send_signal(signal.SIGTERM)
        exited = asyncio.create_task(asyncio.to_thread(lambda: (b_proc.wait(10), time.monotonic())))

        async def released() -> bool:
            return await holder(client) in ("", a_id)

        await wait_for(released, "the Lease released", timeout=10, interval=0.05)
        record("SIGTERM of the leader -> Lease released", time.monotonic() - began, cluster)
        await until_holder(client, a_id, timeout=10)
        took = time.monotonic() - began
        record("SIGTERM of the leader -> standby leads", took, cluster)
        code, ended = await exited
        b.proc = None
        assert code == 0
        record("SIGTERM of the leader -> it exited", ended - began, cluster)
        assert took <= RETRY_PERIOD * 1.2 + 1.5
        assert any(e.get("event") == "released lease" for e in log_events(b.log_path, b_offset))
    finally:
        if b.proc is not None:
            b.proc.kill()
            reap(b, 10)


async def test_a_stolen_lease_stops_the_leader_at_once(client: Client, cluster: Any, operator: Operator) -> None:
    a = operator
    await until_holder(client, await identity(a.log_path), timeout=30)
    offset = size(a.log_path)
    lease = await client.kube.get(LEASES, LEASE_NS, LEASE)
    now = format_micro_time(datetime.now(UTC))
    lease["spec"] = {**lease["spec"], "holderIdentity": "thief", "leaseDurationSeconds": 3600, "renewTime": now}
    began = time.monotonic()
    await client.kube.update(LEASES, LEASE_NS, lease)
    assert a.proc is not None
    code = await asyncio.to_thread(a.proc.wait, 3 * RETRY_PERIOD + 5)
    record("stolen Lease -> leader exits", time.monotonic() - began, cluster)
    assert code == 1, "a lost Lease ends the process with 1"
    a.proc = None
    lost = [e for e in log_events(a.log_path, offset) if e.get("event") == "leader election lost"]
    assert lost and "held by thief" in lost[0]["error"]
    await client.kube.delete(LEASES, LEASE_NS, LEASE)
    a.start()
    await wait_ready(A_PROBES)


async def footprint(client: Client, ns: str, name: str) -> JSON:
    """Everything the operator writes for TrainJob ``ns/name``: its status and field managers, the
    children carrying its ``jobset-name`` label, and the Events about it."""
    tj = await client.kube.get(TRAINJOBS, ns, name)
    managers = sorted(
        (str(m.get("manager")), str(m.get("operation")), str(m.get("subresource", "")))
        for m in tj["metadata"].get("managedFields") or []
    )
    children = []
    for res in (JOBS, SERVICES, CONFIGMAPS, SECRETS):
        items, _ = await client.kube.list(res, ns, f"jobset.sigs.k8s.io/jobset-name={name}")
        children += [f"{res.plural}/{o['metadata']['name']}" for o in items]
    events = [f"{e.get('reason')}: {e.get('message')}" for e in await client.events(ns, name)]
    return {"status": tj.get("status") or {}, "managers": managers, "children": children, "events": events}


async def test_a_leader_paused_past_its_lease_writes_nothing_when_it_resumes(
    client: Client, cluster: Any, samples: None, ns: str, operator: Operator
) -> None:
    """SIGSTOP the leader A for longer than the Lease: B takes over. B is then paused too, briefly (well
    within its renew deadline), so that whatever lands on the apiserver meanwhile can only be A's. A
    TrainJob is created, then A resumes with its timers all due and the TrainJob in its watch: it must
    exit 1 and have written nothing (no status, no field manager, no child, no Event); every write it
    tried is logged as fenced. B then resumes, still leading, and runs the TrainJob to Complete."""
    a = operator
    await until_holder(client, await identity(a.log_path), timeout=30)
    b = Operator(cluster.kubeconfig, cluster.state_dir / "logs" / "operator-operate-b.log", B_ARGS)
    b_offset = size(b.log_path)
    b.start()
    a_proc, b_proc = a.proc, b.proc
    assert a_proc is not None and b_proc is not None
    try:
        b_id = await identity(b.log_path, b_offset)
        await wait_ready(B_PROBES)
        a_proc.send_signal(signal.SIGSTOP)
        took = await until_holder(client, b_id, timeout=LEASE_DURATION + 3 * RETRY_PERIOD + 5)
        record("SIGSTOP of the leader -> standby leads", took, cluster)
        b_proc.send_signal(signal.SIGSTOP)
        b_paused = time.monotonic()
        obj = yaml.safe_load((ROOT / "config" / "samples" / "trainjob.yaml").read_text())
        obj["metadata"]["name"] = "fenced"
        await client.apply(obj, ns)
        before = await footprint(client, ns, "fenced")
        assert before["status"] == {} and before["children"] == [] and before["events"] == []

        a_offset = size(a.log_path)
        a_proc.send_signal(signal.SIGCONT)
        code = await asyncio.to_thread(a_proc.wait, 10)
        a.proc = None
        assert code == 1, "a leader that finds itself past its renew deadline exits 1"
        assert await footprint(client, ns, "fenced") == before, "the resumed leader wrote something"
        b_proc.send_signal(signal.SIGCONT)
        paused_for = time.monotonic() - b_paused
        assert paused_for < RENEW_DEADLINE - RETRY_PERIOD - 1, f"B was paused {paused_for:.1f}s: it would be fenced too"

        events = log_events(a.log_path, a_offset)
        lost = [e for e in events if e.get("event") == "leader election lost"]
        assert lost, "A said why it stopped"
        fenced = [e for e in events if e.get("event") == "write fenced"]
        assert all(e["reason"].startswith("lease not renewed") or e["reason"] == "not leading" for e in fenced)
        assert not [e for e in events if e.get("event") == "applied"], "no child applied after the resume"
        print(f"\n[fencing] A exited 1 ({lost[0]['error']}); {len(fenced)} write(s) refused")

        await client.wait_condition(ns, "fenced", "Complete", timeout=90)
        assert keys_in(log_events(b.log_path, b_offset), f"{ns}/fenced"), "the new leader ran it"
    finally:
        for proc in (a_proc, b_proc):
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        if a.proc is not None and a_proc.poll() is None:
            a_proc.kill()
            reap(a, 10)
        a.proc = None
        b.stop()  # SIGTERM: B releases the Lease, and A, started again, leads at once
        restarted = size(a.log_path)
        a.start()
    await until_holder(client, await identity(a.log_path, restarted), timeout=LEASE_DURATION + 10)
    await wait_ready(A_PROBES)


# ----------------------------------------------------------------------------- (d) RBAC from config/


@pytest.mark.parametrize(("gang", "overlay"), [("none", "default"), ("volcano", "overlays/volcano")])
async def test_the_operator_runs_with_only_its_service_account(
    client: Client, cluster: Any, samples: None, ns: str, operator: Operator, gang: str, overlay: str, tmp_path: Path
) -> None:
    if isinstance(cluster, ExternalCluster):
        pytest.skip("kubectl create token against an external cluster is not this test's business")
    install_identity(cluster, overlay, tmp_path)
    kubeconfig = token_kubeconfig(cluster, tmp_path / "sa.kubeconfig")
    can = subprocess.run(  # the token is the ServiceAccount's, not admin's
        [str(cluster.kubectl), f"--kubeconfig={kubeconfig}", "auth", "can-i", "create", "namespaces"],
        capture_output=True,
        text=True,
    )
    assert can.stdout.strip() == "no", can.stdout + can.stderr
    operator.stop()  # the admin operator of this module steps aside
    sa = Operator(
        kubeconfig,
        cluster.state_dir / "logs" / f"operator-operate-sa-{gang}.log",
        [
            f"--gang-scheduler-name={gang}",
            "--leader-elect",
            f"--leader-election-namespace={NAMESPACE}",
            f"--metrics-bind-address=127.0.0.1:{C_METRICS}",
            f"--health-probe-bind-address=127.0.0.1:{C_PROBES}",
        ],
    )
    offset = size(sa.log_path)
    sa.start()
    try:
        sa_id = await identity(sa.log_path, offset)
        await until_holder(client, sa_id, timeout=LEASE_DURATION + 10, namespace=NAMESPACE, name="trainer-operator")
        await run_sample_trainjob(client, ns, timeout=120)
        if gang == "none":
            await client.apply(mpijob("pi"), ns)

            async def succeeded() -> JSON | None:
                obj = await client.kube.get_or_none(MPIJOBS, ns, "pi")
                c = condition(obj, "Succeeded")
                return obj if c and c.get("status") == "True" else None

            await wait_for(succeeded, "MPIJob pi Succeeded", timeout=90)
        events = log_events(sa.log_path, offset)
        refused = [e for e in events if str(e.get("error", "")).startswith("403") or "forbidden" in str(e).lower()]
        assert not refused, refused[:3]
        assert any(e.get("event") == "applied" for e in events)
        # A refused write of a child is reported as an Event, not retried: there must be none.
        warnings = [
            e
            for e in await client.events(ns, "pytorch-simple")
            if e.get("type") == "Warning" and e.get("reportingComponent") == "trainer"
        ]
        assert not warnings, [e.get("message") for e in warnings]
    finally:
        sa.stop()
        operator.start()
    await wait_ready(A_PROBES)


def test_report_hand_over_times() -> None:
    """Printed for the record (``pytest -s`` shows them; also in logs/handover.json)."""
    print("\n" + json.dumps(HANDOVER, indent=2))
    assert not HANDOVER or all(v >= 0 for v in HANDOVER.values())
