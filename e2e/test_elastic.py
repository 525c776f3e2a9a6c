"""An elastic TrainJob (``mlPolicy.torch.elasticPolicy``, kubeflow/trainer KEP-2903) on the real local
cluster (KWOK nodes): created with torchrun's c10d rendezvous environment, grown from 1 to 2 pods while
it runs by ``kubectl scale trainjob/<name> --replicas=2`` (the CRD's ``/scale``; its Job's parallelism
and completions patched in place), scaling beyond ``maxNodes`` or below ``minNodes`` refused by the CRD
naming the bound, a running TrainJob that is not elastic refused as before, and bad policies refused at
admission with their messages (the operator's webhook served as in e2e/test_admission.py)."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.test_admission import OPERATOR_ARGS, webhook_installed
from e2e.test_resize import n_pods
from e2e.test_trainjob import RUN_FOR, env, rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from trainer.api.kinds import TRAINING_RUNTIMES, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e
__all__ = ["OPERATOR_ARGS", "webhook_installed"]  # the operator serves its webhook, installed before the tests


def elastic_runtime(name: str, **policy: Any) -> JSON:
    rt = runtime(name, rjob("node", "trainer", RUN_FOR))
    rt["spec"]["mlPolicy"]["torch"]["elasticPolicy"] = policy
    return rt


async def elastic_reported(client: Client, ns: str, name: str) -> JSON | None:
    """The TrainJob once its status reports its elastic bounds (what the CRD's rules read), else None."""
    tj = await client.kube.get_or_none(TRAINJOBS, ns, name)
    return tj if tj is not None and (tj.get("status") or {}).get("elastic") else None


async def test_an_elastic_trainjob_scales_with_kubectl_within_its_bounds(cluster: Any, client: Client, ns: str) -> None:
    await client.apply(elastic_runtime("ert", minNodes=1, maxNodes=2, maxRestarts=3), ns)
    await client.apply(trainjob("el", "ert", trainer={"numNodes": 1}), ns)
    _, (pod,) = await wait_for(lambda: n_pods(client, ns, "el", 1), "1 pod running")
    got = env(pod["spec"]["containers"][0])
    assert got["PET_NNODES"] == "1:2"
    assert got["PET_RDZV_BACKEND"] == "c10d"
    assert got["PET_RDZV_ENDPOINT"] == f"el-node-0-0.el.{ns}.svc.cluster.local:29500"
    assert got["PET_MAX_RESTARTS"] == "3"
    tj = await wait_for(lambda: elastic_reported(client, ns, "el"), "status.elastic reported")
    assert tj["status"]["elastic"] == {"minNodes": 1, "maxNodes": 2}
    assert tj["status"]["selector"] == "jobset.sigs.k8s.io/jobset-name=el,jobset.sigs.k8s.io/replicatedjob-name=node"

    scaled = cluster.run_kubectl("scale", "-n", ns, "trainjob/el", "--replicas=2")
    assert "scaled" in scaled.stdout, scaled.stderr
    _, pods = await wait_for(lambda: n_pods(client, ns, "el", 2), "2 pods after kubectl scale", timeout=60)
    assert {env(p["spec"]["containers"][0])["PET_NNODES"] for p in pods} == {"1:2"}
    (job,) = await client.jobs(ns, "el")
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (2, 2)
    scaled = await client.wait_events(ns, "el", lambda es: any(e["reason"] == "Scaled" for e in es), "Scaled")
    events = [e for e in scaled if e["reason"] == "Scaled"]
    assert events and events[0]["message"] == "Scaled in place: Job el-node-0 from 1 to 2 pods"
    assert not {e["reason"] for e in await client.events(ns, "el")} & {"Resized", "RecreatingJob"}

    above = cluster.run_kubectl("scale", "-n", ns, "trainjob/el", "--replicas=3", check=False)
    assert above.returncode != 0
    bounds = "elastic TrainJob: scale between status.elastic.minNodes and status.elastic.maxNodes"
    assert f"numNodes is above mlPolicy.torch.elasticPolicy.maxNodes of this {bounds}" in above.stderr, above.stderr
    below = cluster.run_kubectl("scale", "-n", ns, "trainjob/el", "--replicas=0", check=False)
    assert f"numNodes is below mlPolicy.torch.elasticPolicy.minNodes of this {bounds}" in below.stderr, below.stderr
    shown = cluster.run_kubectl("get", "-n", ns, "trainjob/el", "--subresource=scale", "-o", "json")
    assert '"replicas": 2' in shown.stdout

    await client.apply(runtime("static", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("st", "static", trainer={"numNodes": 1}), ns)
    await wait_for(lambda: n_pods(client, ns, "st", 1), "the static job's pod running")
    static = cluster.run_kubectl("scale", "-n", ns, "trainjob/st", "--replicas=2", check=False)
    assert "numNodes may change only while the TrainJob is suspended" in static.stderr, static.stderr


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"minNodes": 3, "maxNodes": 2}, "elasticPolicy.minNodes must be <= elasticPolicy.maxNodes"),
        ({"minNodes": 1}, "elasticPolicy.maxNodes is required"),
        ({"minNodes": 0, "maxNodes": 2}, "minNodes"),
        (
            {"maxNodes": 2, "metrics": [{"type": "Resource", "resource": {"name": "cpu"}}]},
            "mlPolicy.torch.elasticPolicy.metrics is not supported",
        ),
    ],
)
async def test_a_bad_elastic_policy_is_refused_naming_the_field(
    client: Client, ns: str, policy: JSON, message: str
) -> None:
    with pytest.raises(ApiError) as refused:
        await client.apply(elastic_runtime("bad", **policy), ns)
    assert refused.value.status == 422 and message in refused.value.message, refused.value.message
    assert await client.kube.get_or_none(TRAINING_RUNTIMES, ns, "bad") is None


async def test_a_trainjob_outside_the_bounds_is_refused_by_the_webhook(client: Client, ns: str) -> None:
    bounded = elastic_runtime("bounded", minNodes=2, maxNodes=3)
    bounded["spec"]["mlPolicy"]["numNodes"] = 2
    await client.apply(bounded, ns)
    with pytest.raises(ApiError) as refused:
        await client.apply(trainjob("big", "bounded", trainer={"numNodes": 4}), ns)
    assert (
        "spec.trainer.numNodes: 4 is above mlPolicy.torch.elasticPolicy.maxNodes 3; set it between 2 and 3"
        in refused.value.message
    )
