"""Bad input on the real apiserver with the webhook off (this module's operator runs without it, with
``--max-nodes-per-job 4``): every family ends visible, never stuck or spinning.

One case per family: a child the apiserver refuses, pods a quota refuses the Job controller (said on the
TrainJob and the MPIJob as ``ReplicaFailure``), a dependsOn naming no earlier replicated job, numNodes
(and MPI workers) above the operator's limit, a replicated job with ``replicas: 0``, an override naming a
replicated job the runtime lacks, and quantities the apiserver cannot read (refused by the CRD schema when
they are typed there, conditioned when they hide in a runtime's template). Each but the pod quota ends,
within 10 s, in a condition naming the field, with nothing created; and the operator's
``controller_runtime_reconcile_errors_total`` does not grow in the seconds after the condition.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.helpers import deep_json, nested
from e2e.test_mpijob import mpijob, wait_cond
from e2e.test_trainjob import rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from trainer.api.kinds import JOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e

METRICS, PROBES = reserved_ports(2)
LIMIT = 4
OPERATOR_ARGS = [
    "--max-nodes-per-job",
    str(LIMIT),
    "--metrics-bind-address",
    f"127.0.0.1:{METRICS}",
    "--health-probe-bind-address",
    f"127.0.0.1:{PROBES}",
]
QUIET = 3.0
"""Seconds after the condition over which the reconcile error counter must not grow."""


@pytest.fixture(scope="module", autouse=True)
async def operator_ready(operator: Operator) -> AsyncIterator[None]:
    """The operator's caches are synced (``/readyz``), so the 10 s bounds time the operator, not its start."""

    async def ready() -> bool:
        try:
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{PROBES}/readyz") as r:
                return r.status == 200
        except (aiohttp.ClientError, OSError):
            return False

    await wait_for(ready, "the operator's /readyz", timeout=60)
    yield


async def reconcile_errors() -> float:
    """``controller_runtime_reconcile_errors_total`` of the operator, all controllers together."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{METRICS}/metrics") as r:
        assert r.status == 200
        text = await r.text()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "controller_runtime_reconcile_errors_total"
    )


async def assert_quiet() -> None:
    """The reconcile error counter does not grow over :data:`QUIET` seconds."""
    before = await reconcile_errors()
    await asyncio.sleep(QUIET)
    after = await reconcile_errors()
    assert after == before, f"reconcile errors grew from {before} to {after} after the condition"


async def ends_in(client: Client, ns: str, name: str, type_: str) -> JSON:
    """The TrainJob's condition ``type_`` (True) within 10 s; then nothing is created and nothing spins."""
    tj = await client.wait_condition(ns, name, type_, timeout=10)
    cond = condition(tj, type_)
    assert cond is not None
    await assert_quiet()
    assert await client.jobs(ns, name) == []
    return cond


async def test_a_child_the_apiserver_refuses_ends_misconfigured_with_its_message(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(trainjob("long-label", "rt", labels={"team": "x" * 64}), ns)
    cond = await ends_in(client, ns, "long-label", "Misconfigured")
    assert cond["reason"] == "TrainJobResourcesCreationFailed", cond
    assert "metadata.labels" in cond["message"] and "63" in cond["message"], cond["message"]


async def test_a_quota_that_refuses_the_jobs_then_is_raised_lets_the_job_start(client: Client, ns: str) -> None:
    """A 403 (exceeded quota) is retried with backoff, not remembered forever: once the quota is raised
    the TrainJob's Jobs are created without an operator restart, and the condition goes."""
    quotas = f"/api/v1/namespaces/{ns}/resourcequotas"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "jobs"}}
    await client.kube.request("POST", quotas, body={**quota, "spec": {"hard": {"count/jobs.batch": "0"}}})

    async def counted() -> bool:  # quota admission needs the quota controller's first count
        got = await client.kube.request("GET", f"{quotas}/jobs")
        return "count/jobs.batch" in ((got.get("status") or {}).get("hard") or {})

    await wait_for(counted, "the quota's status", timeout=30)
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(trainjob("quota", "rt"), ns)
    tj = await client.wait_condition(ns, "quota", "Misconfigured", timeout=20)
    cond = condition(tj, "Misconfigured")
    assert cond is not None and "exceeded quota" in cond["message"], cond
    raised = {"spec": {"hard": {"count/jobs.batch": "10"}}}
    await client.kube.request("PATCH", f"{quotas}/jobs", body=raised, content_type="application/merge-patch+json")
    await wait_for(lambda: client.jobs(ns, "quota"), "the Jobs once the quota was raised", timeout=40)

    async def said_no_more() -> JSON | None:
        tj = await client.trainjob(ns, "quota")
        return tj if tj is not None and condition(tj, "Misconfigured") is None else None

    await wait_for(said_no_more, "the Misconfigured condition to go", timeout=20)


async def pod_quota(client: Client, ns: str, pods: int) -> str:
    """A ResourceQuota ``pods`` of ``count/pods: <pods>`` in ``ns``, counted by the quota controller (quota
    admission needs its first count); returns its path."""
    path = f"/api/v1/namespaces/{ns}/resourcequotas/pods"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"}}
    await client.kube.request(
        "POST", path.rsplit("/", 1)[0], body={**quota, "spec": {"hard": {"count/pods": str(pods)}}}
    )

    async def counted() -> bool:
        got = await client.kube.request("GET", path)
        return "count/pods" in ((got.get("status") or {}).get("hard") or {})

    await wait_for(counted, "the quota's status", timeout=30)
    return path


async def test_pods_a_quota_refuses_are_said_on_the_trainjob_until_the_quota_is_raised(client: Client, ns: str) -> None:
    """The Job controller cannot create the pods of the TrainJob's Job (``count/pods: 0``): within 15 s the
    TrainJob carries ``ReplicaFailure`` (``FailedCreate``) naming the Job and the quota's message, told by
    one Warning event; once the quota is raised the pods are created, the condition goes, and the job
    completes."""
    path = await pod_quota(client, ns, 0)
    run_20s = {"pod-complete.stage.kwok.x-k8s.io/delay": "20s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "21s"}
    await client.apply(runtime("rt", rjob("node", "trainer", run_20s)), ns)
    await client.apply(trainjob("podquota", "rt"), ns)
    tj = await client.wait_condition(ns, "podquota", "ReplicaFailure", timeout=15)
    cond = condition(tj, "ReplicaFailure")
    assert cond is not None and cond["reason"] == "FailedCreate", cond
    assert cond["message"].startswith("Job podquota-node-0: Error creating: pods "), cond["message"]
    assert "exceeded quota: pods" in cond["message"], cond["message"]
    events = await client.wait_events(
        ns, "podquota", lambda es: any(e.get("reason") == "FailedCreate" for e in es), "the FailedCreate event"
    )
    told = [e for e in events if e.get("reason") == "FailedCreate"]
    assert [(e["type"], e["involvedObject"]["kind"]) for e in told] == [("Warning", "TrainJob")], told

    raised = {"spec": {"hard": {"count/pods": "10"}}}
    await client.kube.request("PATCH", path, body=raised, content_type="application/merge-patch+json")

    async def running_without_it() -> JSON | None:
        tj = await client.trainjob(ns, "podquota")
        counts = (tj or {}).get("status", {}).get("jobsStatus") or [{}]
        return tj if condition(tj, "ReplicaFailure") is None and counts[0].get("active") else None

    await wait_for(running_without_it, "the pods created and the condition gone", timeout=90)
    done = await client.wait_condition(ns, "podquota", "Complete", timeout=60)
    assert condition(done, "ReplicaFailure") is None, done["status"]


async def test_pods_a_quota_refuses_are_said_on_the_mpijob(client: Client, ns: str) -> None:
    await pod_quota(client, ns, 0)
    await client.apply(mpijob("podquota"), ns)
    obj = await wait_cond(client, ns, "podquota", "ReplicaFailure", timeout=15)
    cond = condition(obj, "ReplicaFailure")
    assert cond is not None and cond["reason"] == "FailedCreate", cond
    assert cond["message"].startswith("Job podquota-"), cond["message"]
    assert "exceeded quota: pods" in cond["message"], cond["message"]


async def test_depends_on_naming_no_earlier_replicated_job_fails_the_job(client: Client, ns: str) -> None:
    node = rjob("node", "trainer", dependsOn=[{"name": "missing", "status": "Complete"}])
    await client.apply(runtime("rt", rjob("init"), node), ns)
    await client.apply(trainjob("orphan", "rt"), ns)
    cond = await ends_in(client, ns, "orphan", "Failed")
    assert "replicatedJobs[1].dependsOn: replicatedJob: node cannot depend on replicatedJob: missing" in cond["message"]


async def test_num_nodes_and_mpi_workers_above_the_limit_fail_with_nothing_created(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(trainjob("huge", "rt", trainer={"numNodes": 100000}), ns)
    message = (await ends_in(client, ns, "huge", "Failed"))["message"]
    assert message.startswith(f"spec.trainer.numNodes: 100000 nodes is more than this operator's limit of {LIMIT}")
    assert "--max-nodes-per-job" in message
    assert await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=huge") == []

    workers = mpijob("many")
    workers["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = LIMIT + 1
    await client.apply(workers, ns)
    obj = await wait_cond(client, ns, "many", "Failed", timeout=10)
    failed = condition(obj, "Failed")
    assert failed is not None and "spec.mpiReplicaSpecs.Worker.replicas" in failed["message"], failed
    await assert_quiet()
    jobs, _ = await client.kube.list(JOBS, ns, "training.kubeflow.org/job-name=many")
    assert jobs == []


async def test_a_replicated_job_with_no_replicas_fails_the_job(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer"), rjob("aux", replicas=0)), ns)
    await client.apply(trainjob("nothing", "rt"), ns)
    cond = await ends_in(client, ns, "nothing", "Failed")
    assert "replicatedJobs[1].replicas: must be at least 1 (got 0)" in cond["message"], cond["message"]


async def test_an_override_naming_a_missing_replicated_job_fails_the_job(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    override = [{"targetJobs": [{"name": "ghost"}], "nodeSelector": {"pool": "a"}}]
    await client.apply(trainjob("aimless", "rt", podSpecOverrides=override), ns)
    cond = await ends_in(client, ns, "aimless", "Failed")
    assert (
        "spec.podSpecOverrides[0].targetJobs: replicated job 'ghost' is not in runtime 'rt' (it has node)"
        in cond["message"]
    ), cond["message"]


async def test_quantities_the_apiserver_cannot_read_are_refused_or_conditioned(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    with pytest.raises(ApiError) as refusal:  # typed in the TrainJob's schema: refused at create
        await client.apply(trainjob("lots", "rt", trainer={"resourcesPerNode": {"limits": {"cpu": "lots"}}}), ns)
    assert refusal.value.status == 422
    assert "spec.trainer.resourcesPerNode.limits.cpu" in refusal.value.message, refusal.value.message
    assert await client.trainjob(ns, "lots") is None

    # Opaque in a runtime's Pod template (the apiserver would answer the Job's apply with a 500).
    opaque = rjob("node", "trainer")
    opaque["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "lots"}}
    await client.apply(runtime("opaque", opaque), ns)
    await client.apply(trainjob("hidden", "opaque"), ns)
    cond = await ends_in(client, ns, "hidden", "Failed")
    assert "containers[0].resources.limits[cpu]: 'lots' is not a quantity" in cond["message"], cond["message"]


async def test_a_trainjob_nested_a_thousand_levels_deep_stops_no_one_else(
    client: Client, ns: str, operator: Operator
) -> None:
    """Without the webhook the apiserver stores it; the operator's caches take it, the process stays up and
    ready, and the next TrainJob gets its Jobs."""
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    override = [{"targetJobs": [{"name": "node"}], "metadata": nested(1000)}]
    with deep_json():
        await client.apply(trainjob("deep", "rt", podTemplateOverrides=override), ns)
    await client.apply(trainjob("next", "rt"), ns)
    await wait_for(lambda: client.jobs(ns, "next"), "the next TrainJob's Jobs", timeout=10)
    assert operator.proc is not None and operator.proc.poll() is None, "the operator kept running"
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{PROBES}/readyz") as r:
        assert r.status == 200, await r.text()
