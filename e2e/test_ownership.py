"""A tenant's own object named like a child, on the real apiserver (the operator runs with Volcano and
its status server): the operator never changes, adopts or deletes it, the job says so (condition
``Misconfigured``/``ErrResourceExists`` and a Warning event naming kind and name), no Pod of the job
starts while a Secret, hostfile, Service, runtime snapshot, claim or PodGroup it needs is someone
else's, and the object keeps its data, uid and owner references through the job's life, its
``ttlSecondsAfterFinished`` and its deletion. Mirrors kubeflow/mpi-operator's refusal
(``pkg/controller/mpi_job_controller.go``: "Resource %q of Kind %q already exists and is not managed by
MPIJob")."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass

import pytest

from e2e.helpers import ROOT
from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from trainer.api.kinds import (
    CONFIGMAPS,
    JOBS,
    PERSISTENT_VOLUME_CLAIMS,
    SECRETS,
    SERVICES,
    TRAINJOBS,
    VOLCANO_PODGROUPS,
    Resource,
)
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e

GANG_SCHEDULER = "volcano"
(PORT,) = reserved_ports(1)
OPERATOR_ARGS = ["--status-server-port", str(PORT), "--status-server-host", "127.0.0.1"]
MPI_RUNTIME = "deepspeed-distributed"


@dataclass(frozen=True)
class Case:
    """A user's object named like a child of TrainJob ``owner-<id>``."""

    id: str
    resource: Resource
    name: str
    """The child's name, ``{}`` standing for the TrainJob's."""
    body: JSON
    runtime: str = "torch"
    """``torch`` (one ``node`` replicated job), ``mpi`` (the DeepSpeed sample) or ``claims`` (torch with a
    ``volumeClaimPolicies`` template ``data`` that the trainer mounts)."""


CASES = [
    Case("secret", SECRETS, "{}-mpi-ssh-auth", {"data": {"ssh-privatekey": base64.b64encode(b"mine").decode()}}, "mpi"),
    Case("hostfile", CONFIGMAPS, "{}-mpi-hostfile", {"data": {"hostfile": "mine slots=64\n"}}, "mpi"),
    Case("snapshot", CONFIGMAPS, "{}-runtime-snapshot", {"data": {"runtime": '{"kind": "mine"}'}}),
    Case("service", SERVICES, "{}", {"spec": {"ports": [{"port": 8080}]}}),
    Case(
        "job",
        JOBS,
        "{}-node-0",
        {"spec": {"suspend": True, "template": rjob("x")["template"]["spec"]["template"]}},
    ),
    Case(
        "claim",
        PERSISTENT_VOLUME_CLAIMS,
        "data-{}",
        {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        "claims",
    ),
    Case("podgroup", VOLCANO_PODGROUPS, "{}", {"spec": {"minMember": 7}}),
]


def user_object(case: Case, name: str) -> JSON:
    """The tenant's object: no owner reference, one label of theirs."""
    meta = {"name": name, "labels": {"owner": "tenant"}}
    body: JSON = {"apiVersion": case.resource.api_version, "kind": case.resource.kind, "metadata": meta}
    body.update(case.body)
    if case.resource == JOBS:
        body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    return body


def kept(obj: JSON) -> JSON:
    """What must not change: uid, owner references, labels, and the payload the tenant wrote."""
    meta = obj["metadata"]
    out: JSON = {k: meta.get(k) for k in ("uid", "ownerReferences", "labels")}
    for key in ("data", "spec"):
        if key in obj:
            out[key] = obj[key]
    if obj["kind"] == JOBS.kind:
        out["spec"] = {"suspend": obj["spec"]["suspend"], "parallelism": obj["spec"].get("parallelism")}
    if obj["kind"] == SERVICES.kind:
        out["spec"] = {"ports": [p["port"] for p in obj["spec"]["ports"]], "clusterIP": obj["spec"].get("clusterIP")}
    if obj["kind"] == VOLCANO_PODGROUPS.kind:
        out["spec"] = {"minMember": obj["spec"]["minMember"]}
    if obj["kind"] == PERSISTENT_VOLUME_CLAIMS.kind:
        out["spec"] = {"resources": obj["spec"]["resources"]}
    return out


async def the_runtime(client: Client, ns: str, kind: str) -> tuple[str, str]:
    """The runtime a case's TrainJob uses: (its kind, its name)."""
    if kind == "mpi":
        await client.apply_file(ROOT / "config" / "samples" / f"{MPI_RUNTIME}.yaml")
        return "ClusterTrainingRuntime", MPI_RUNTIME
    node = rjob("node", "trainer")
    rt = runtime("rt", node)
    if kind == "claims":
        container = node["template"]["spec"]["template"]["spec"]["containers"][0]
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        template = {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        rt["spec"]["template"]["spec"]["volumeClaimPolicies"] = [{"templates": [template]}]
    await client.apply(rt, ns)
    return "TrainingRuntime", "rt"


async def conflict_said(client: Client, ns: str, name: str, kind: str, child: str) -> JSON:
    """The TrainJob's ``Misconfigured`` condition naming ``kind child``, once its Warning event is there too."""
    tj = await client.wait_condition(ns, name, "Misconfigured", timeout=30)
    cond = condition(tj, "Misconfigured")
    assert cond is not None and cond["reason"] == "ErrResourceExists", cond
    assert f"{kind} {child}" in cond["message"], cond["message"]
    return await told(client, ns, name, kind, child)


async def told(client: Client, ns: str, name: str, kind: str, child: str) -> JSON:
    """The Warning event ``ErrResourceExists`` on TrainJob ``name`` in mpi-operator's words."""
    words = f'Resource "{child}" of Kind "{kind}" already exists and is not managed by TrainJob'

    async def event() -> JSON | None:
        return next(
            (
                e
                for e in await client.events(ns, name)
                if e["type"] == "Warning" and e["reason"] == "ErrResourceExists" and e["message"] == words
            ),
            None,
        )

    return await wait_for(event, f"the Warning event naming {kind} {child}", timeout=30)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_a_tenants_object_named_like_a_child_is_never_touched_and_the_job_says_so(
    client: Client, ns: str, case: Case
) -> None:
    tj = f"owner-{case.id}"
    child = case.name.format(tj)
    mine = await client.kube.create(case.resource, ns, {**user_object(case, child)})
    before = kept(mine)
    kind, rt = await the_runtime(client, ns, case.runtime)
    await client.apply(trainjob(tj, rt, kind), ns)
    await conflict_said(client, ns, tj, case.resource.kind, child)
    await asyncio.sleep(3)  # several reconciles and retries
    assert kept(await client.kube.get(case.resource, ns, child)) == before
    assert await client.jobs(ns, tj) == [], "no Job of the TrainJob while a child's name is someone else's"
    assert await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={tj}") == [], "so no Pod of it either"
    # The TrainJob goes; the tenant's object stays as it was.
    await client.kube.delete(TRAINJOBS, ns, tj)
    await wait_for(lambda: _gone(client, ns, tj), f"TrainJob {ns}/{tj} deleted", timeout=30)
    await asyncio.sleep(3)  # the garbage collector's turn
    assert kept(await client.kube.get(case.resource, ns, child)) == before


async def test_a_tenants_ca_config_map_outlives_the_job_its_ttl_and_its_deletion(client: Client, ns: str) -> None:
    tj, child = "owner-ca", "owner-ca-tls-config"
    mine = await client.kube.create(CONFIGMAPS, ns, {**user_object(Case("ca", CONFIGMAPS, child, {}), child)})
    await client.kube.merge_patch(CONFIGMAPS, ns, child, {"data": {"ca.crt": "mine"}})
    before = kept(await client.kube.get(CONFIGMAPS, ns, child))
    assert before["uid"] == mine["metadata"]["uid"]
    node = rjob("node", "trainer")
    node["template"]["spec"]["template"]["spec"]["serviceAccountName"] = "default"  # the projected token's
    rt = runtime("rt", node)
    rt["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = 2
    await client.apply(rt, ns)
    await client.apply(trainjob(tj, "rt"), ns)
    await told(client, ns, tj, "ConfigMap", child)
    await client.wait_condition(ns, tj, "Complete", timeout=60)
    await wait_for(lambda: _no_jobs(client, ns, tj), "the TTL's deletion of the Jobs", timeout=60)
    assert kept(await client.kube.get(CONFIGMAPS, ns, child)) == before, "through the job's life and its TTL"
    await client.kube.delete(TRAINJOBS, ns, tj)
    await wait_for(lambda: _gone(client, ns, tj), f"TrainJob {ns}/{tj} deleted", timeout=30)
    await asyncio.sleep(3)
    assert kept(await client.kube.get(CONFIGMAPS, ns, child)) == before, "and its deletion"


async def _gone(client: Client, ns: str, name: str) -> bool:
    return await client.trainjob(ns, name) is None


async def _no_jobs(client: Client, ns: str, name: str) -> bool:
    return await client.jobs(ns, name) == []


async def test_a_trainjob_created_again_under_its_name_waits_for_the_old_children_and_runs(
    client: Client, ns: str
) -> None:
    """Deleted and created again at once: the old children (controlled by the old uid; a finalizer holds
    the old Job here) are waited for, never taken or refused, and the new TrainJob runs on children of its
    own once they are gone."""
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("again", "rt"), ns)
    (old,) = await wait_for(lambda: client.jobs(ns, "again"), "the first TrainJob's Job", timeout=30)
    name = old["metadata"]["name"]
    await client.kube.merge_patch(JOBS, ns, name, {"metadata": {"finalizers": ["e2e.test/hold"]}})
    await client.kube.delete(TRAINJOBS, ns, "again")
    await wait_for(lambda: _gone(client, ns, "again"), "the first TrainJob deleted", timeout=30)
    await client.apply(trainjob("again", "rt"), ns)
    new = await client.trainjob(ns, "again")
    assert new is not None and new["metadata"]["uid"] != old["metadata"]["ownerReferences"][0]["uid"]
    await asyncio.sleep(3)
    held = await client.kube.get(JOBS, ns, name)
    assert held["metadata"]["uid"] == old["metadata"]["uid"], "the old Job is still there, not taken"
    assert held["metadata"]["ownerReferences"] == old["metadata"]["ownerReferences"]
    tj = await client.trainjob(ns, "again")
    assert tj is not None
    assert condition(tj, "Misconfigured") is None, tj.get("status")
    await client.kube.merge_patch(JOBS, ns, name, {"metadata": {"finalizers": None}})

    async def its_own() -> list[JSON] | None:
        jobs = await client.jobs(ns, "again")
        uid = new["metadata"]["uid"]
        return jobs if jobs and all(j["metadata"]["ownerReferences"][0]["uid"] == uid for j in jobs) else None

    await wait_for(its_own, "Jobs of the new TrainJob", timeout=60)
    assert not [e for e in await client.events(ns, "again") if e["reason"] == "ErrResourceExists"]
