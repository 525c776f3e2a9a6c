"""Admission on the real apiserver: the operator's webhook (URL mode, 127.0.0.1) refuses bad jobs with
messages naming the field; valid twins are admitted, and so is an update of a large TrainJob; overrides
change only while suspended; deletes work while the operator is down. The operator runs with
``--gang-scheduler-name=volcano`` here, so the Volcano queue rules apply."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helpers import ROOT, deep_json, nested, webhook_ca_patched
from e2e.test_gang_volcano import make_queue
from e2e.test_mpijob import mpijob
from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from trainer.api.kinds import MPIJOBS, OPTIMIZATION_JOBS, PODS, TRAINJOBS, VOLCANO_QUEUES, Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e


(PORT,) = reserved_ports(1)
GANG_SCHEDULER = "volcano"
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]


@pytest.fixture(scope="module", autouse=True)
async def webhook_installed(client: Client, operator: Operator) -> None:
    """Wait for the operator to patch the caBundle of the webhook configurations the ``operator``
    fixture applied (calling this module's port; it deletes them after the module)."""
    await wait_for(lambda: webhook_ca_patched(client.kube), "webhook configurations patched")
    await asyncio.sleep(1)


async def refused(client: Client, obj: JSON, ns: str | None = None) -> str:
    """The message of the apiserver refusing ``obj`` (fails if it is admitted)."""
    try:
        await client.apply(obj, ns)
    except ApiError as e:
        assert e.status in (400, 403, 422), e
        return e.message
    raise AssertionError(f"{obj['kind']} {obj['metadata']['name']} was admitted")


async def test_trainjob_rules_refuse_with_the_field_and_admit_the_valid_twin(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer"), rjob("aux")), ns)
    cases: list[tuple[JSON, JSON, str]] = [
        (
            trainjob("no-rt", "missing-rt"),
            trainjob("no-rt", "rt"),
            "spec.runtimeRef: TrainingRuntime 'missing-rt' not found",
        ),
        (
            trainjob(
                "bad-target", "rt", podSpecOverrides=[{"targetJobs": [{"name": "nope"}], "nodeSelector": {"a": "b"}}]
            ),
            trainjob(
                "bad-target", "rt", podSpecOverrides=[{"targetJobs": [{"name": "aux"}], "nodeSelector": {"a": "b"}}]
            ),
            "spec.podSpecOverrides[0].targetJobs: replicated job 'nope' is not in runtime 'rt'",
        ),
        (
            trainjob(
                "bad-container",
                "rt",
                podSpecOverrides=[{"targetJobs": [{"name": "aux"}], "containers": [{"name": "ghost"}]}],
            ),
            trainjob(
                "bad-container",
                "rt",
                podSpecOverrides=[{"targetJobs": [{"name": "aux"}], "containers": [{"name": "aux"}]}],
            ),
            "container 'ghost' is not in replicated job 'aux'",
        ),
        (
            trainjob("reserved", "rt", trainer={"env": [{"name": "PET_MASTER_PORT", "value": "1"}]}),
            trainjob("reserved", "rt", trainer={"env": [{"name": "MY_VAR", "value": "1"}]}),
            "spec.trainer.env: 'PET_MASTER_PORT'",
        ),
        (
            trainjob("a.b", "rt"),
            trainjob("a-b", "rt"),
            "metadata.name 'a.b' must be an RFC 1035 label",
        ),
    ]
    for bad, good, needle in cases:
        message = await refused(client, bad, ns)
        assert needle in message, message
        stored = await client.apply(good, ns)
        assert stored["metadata"]["name"] == good["metadata"]["name"]


async def test_torchtunes_builtin_trainer_is_refused_where_upstream_refuses_it(client: Client, ns: str) -> None:
    """``command: [tune, run]`` on upstream's Qwen2.5 runtime: QLoRA and an immutable config in ``args`` are
    refused with upstream's words; LoRA is admitted."""
    raw = yaml.safe_load((ROOT / "config" / "samples" / "upstream" / "torchtune-qwen2.5-1.5b.yaml").read_text())
    await client.apply({**raw, "kind": "TrainingRuntime"}, ns)
    lora = ["model.lora_attn_modules=[q_proj,v_proj,output_proj]"]
    cases = [
        ([*lora, "model.quantize_base=True"], "spec.runtimeRef.name: QLoRA is not supported for qwen2_5/1.5B model"),
        (
            [*lora, "tokenizer.merges_file=/tmp/m"],
            'spec.trainer.args[1]: must not set immutable config "tokenizer.merges_file"',
        ),
    ]
    for args, needle in cases:
        bad = trainjob("tune", "torchtune-qwen2.5-1.5b", trainer={"command": ["tune", "run"], "args": args})
        message = await refused(client, bad, ns)
        assert needle in message, message
    good = trainjob("tune", "torchtune-qwen2.5-1.5b", trainer={"command": ["tune", "run"], "args": lora})
    assert (await client.apply(good, ns))["spec"]["trainer"]["command"] == ["tune", "run"]


async def test_a_trainjob_nested_a_thousand_levels_deep_is_refused_naming_the_path(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    override = [{"targetJobs": [{"name": "node"}], "metadata": nested(1000)}]
    with deep_json():
        message = await refused(client, trainjob("deep", "rt", podTemplateOverrides=override), ns)
    assert "spec.podTemplateOverrides[0].metadata.x.x" in message and "more than 64" in message, message[:500]
    assert await client.trainjob(ns, "deep") is None


async def test_an_update_of_a_large_trainjob_is_admitted(client: Client, ns: str) -> None:
    """An UPDATE review carries the object and its old self: a TrainJob of 1.2 MB makes a review of
    over 2.4 MB, which the webhook reads whole and admits."""
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    big = trainjob("big", "rt", suspend=True, trainer={"env": [{"name": "BIG", "value": "x" * 1_200_000}]})
    await client.apply(big, ns)
    stored = await client.apply({**big, "metadata": {**big["metadata"], "labels": {"changed": "yes"}}}, ns)
    assert stored["metadata"]["labels"] == {"changed": "yes"}


async def test_volcano_queue_rules_refuse_missing_closed_and_parent_queues(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await make_queue(client, "adm-open")
    job = trainjob("q", "rt")
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "adm-missing"}
    message = await refused(client, job, ns)
    assert "adm-missing" in message and "does not exist" in message
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "root"}
    assert "QueueNotLeaf" not in (msg := await refused(client, job, ns)) and "'root'" in msg
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "adm-open"}
    assert (await client.apply(job, ns))["metadata"]["name"] == "q"


async def test_mpijob_rules(client: Client, ns: str) -> None:
    two = mpijob("two-launchers")
    two["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    assert "spec.mpiReplicaSpecs.Launcher.replicas must be 1" in await refused(client, two, ns)
    none = mpijob("no-workers")
    none["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 0
    assert "spec.mpiReplicaSpecs.Worker.replicas must be at least 1" in await refused(client, none, ns)
    assert "at most 54 characters" in await refused(client, mpijob("m" * 60), ns)
    unknown = mpijob("unknown-impl", mpiImplementation="MVAPICH")
    assert "mpiImplementation" in await refused(client, unknown, ns)
    assert (await client.apply(mpijob("fine"), ns))["metadata"]["name"] == "fine"
    await client.kube.delete(MPIJOBS, ns, "fine")


def optimizationjob(name: str, **spec: Any) -> JSON:
    """An OptimizationJob of one log-uniform parameter over a TrainJob of runtime ``rt``."""
    base: JSON = {
        "objectives": [{"metric": "loss"}],
        "parameters": [{"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1"}}}],
        "trainJobTemplate": {"spec": {"runtimeRef": {"name": "rt", "kind": "TrainingRuntime"}}},
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {"name": name},
        "spec": {**base, **spec},
    }


async def test_optimizationjob_cel_rules_are_upstreams(client: Client, ns: str) -> None:
    """Upstream's CEL rules, on the real apiserver, with upstream's messages; the spec is immutable."""
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    grid_uniform: JSON = {"searchAlgorithm": {"grid": {}}}
    cases: list[tuple[JSON, str]] = [
        ({"numTrials": 2, "parallelTrials": 3}, "parallelTrials cannot exceed numTrials"),
        (grid_uniform, "Grid search requires all parameters to be Categorical"),
        ({"searchAlgorithm": {"grid": {}, "random": {}}}, "exactly one of the fields in [random grid tpe] must be set"),
        (
            {"parameters": [{"name": "x", "searchSpace": {"uniform": {"min": "2", "max": "1"}}}]},
            "min must be strictly less than max",
        ),
        (
            {"parameters": [{"name": "x", "searchSpace": {"logUniform": {"min": "0", "max": "1"}}}]},
            "min must be strictly greater than 0",
        ),
        (
            {"parameters": [{"name": "x", "searchSpace": {}}]},
            "exactly one of the fields in [uniform logUniform categorical] must be set",
        ),
        (
            {"trainJobTemplate": {"metadata": {"name": "t"}, "spec": {"runtimeRef": {"name": "rt"}}}},
            "name and namespace cannot be set in a template.",
        ),
        ({"objectives": [{"metric": "a"}, {"metric": "b"}]}, "spec.objectives"),
        ({"numTrials": 101}, "spec.numTrials"),
        ({"pruneAlgorithm": {}}, "exactly one of the fields in [median] must be set"),
        ({"searchAlgorithm": {"tpe": {"nStartupTrials": 101}}}, "spec.searchAlgorithm.tpe.nStartupTrials"),
    ]
    for i, (spec, message) in enumerate(cases):
        assert message in await refused(client, optimizationjob(f"bad-{i}", **spec), ns), spec
    grid = optimizationjob(
        "grid",
        searchAlgorithm={"grid": {}},
        parameters=[{"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32"]}}}],
        numTrials=2,
        parallelTrials=2,
    )
    created = await client.apply(optimizationjob("fine"), ns)
    assert created["spec"]["searchAlgorithm"] == {"random": {}}  # upstream's default
    assert (created["spec"]["numTrials"], created["spec"]["parallelTrials"]) == (1, 1)
    assert (await client.apply(grid, ns))["metadata"]["name"] == "grid"
    changed = optimizationjob("fine", numTrials=5)
    assert "OptimizationJobSpec is immutable and cannot be updated after creation" in await refused(client, changed, ns)
    pruned = optimizationjob("fine", pruneAlgorithm={"median": {}})
    assert "only spec.suspend can change after creation" in await refused(client, pruned, ns)
    held = await client.apply(optimizationjob("fine", suspend=True), ns)  # suspend alone changes (ours)
    assert held["spec"]["suspend"] is True
    for name in ("fine", "grid"):
        await client.kube.delete(OPTIMIZATION_JOBS, ns, name)


async def test_optimizationjob_webhook_refuses_what_its_trials_could_not_be(client: Client, ns: str) -> None:
    """The webhook's rules (ours): a name its trials' names outgrow, a template on a missing runtime, a
    template claiming a label the controller sets on trials, a parameter's variable set in the template; a
    template's ownerReferences never reach the stored object."""
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    long = optimizationjob("a" * 56)
    assert "metadata.name 'aaaa" in (message := await refused(client, long, ns)) and "use at most 55" in message
    missing = optimizationjob(
        "missing", trainJobTemplate={"spec": {"runtimeRef": {"name": "nowhere", "kind": "TrainingRuntime"}}}
    )
    assert "spec.trainJobTemplate.spec.runtimeRef: TrainingRuntime 'nowhere' not found" in await refused(
        client, missing, ns
    )
    label = optimizationjob(
        "label",
        trainJobTemplate={
            "metadata": {"labels": {"trainer.kubeflow.org/trial-index": "0"}},
            "spec": {"runtimeRef": {"name": "rt", "kind": "TrainingRuntime"}},
        },
    )
    expected = "spec.trainJobTemplate.metadata.labels[trainer.kubeflow.org/trial-index]: set by the operator"
    assert expected in await refused(client, label, ns)
    env = optimizationjob(
        "env",
        trainJobTemplate={
            "spec": {
                "runtimeRef": {"name": "rt", "kind": "TrainingRuntime"},
                "trainer": {"env": [{"name": "KUBEFLOW_TRAINER_OPT_LR", "value": "1"}]},
            }
        },
    )
    assert "spec.trainJobTemplate.spec.trainer.env[KUBEFLOW_TRAINER_OPT_LR]" in await refused(client, env, ns)
    foreign_owner = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u", "controller": True}]
    owned = optimizationjob(
        "owned",
        suspend=True,
        trainJobTemplate={
            "metadata": {"ownerReferences": foreign_owner},
            "spec": {"runtimeRef": {"name": "rt", "kind": "TrainingRuntime"}},
        },
    )
    try:
        stored = await client.apply(owned, ns)
    except ApiError as e:  # the schema has no such field: refused as unknown, or pruned below
        assert "ownerReferences" in e.message, e.message
    else:
        assert "ownerReferences" not in (stored["spec"]["trainJobTemplate"].get("metadata") or {})
        await client.kube.delete(OPTIMIZATION_JOBS, ns, "owned")


async def test_runtime_rules(client: Client, ns: str) -> None:
    bad = runtime(
        "dangling", rjob("init"), rjob("node", "trainer", dependsOn=[{"name": "ghost", "status": "Complete"}])
    )
    assert "replicatedJob: node cannot depend on replicatedJob: ghost" in await refused(client, bad, ns)
    twice = runtime("twice", rjob("node", "trainer", replicas=2))
    assert "replicatedJobs[0].replicas: always must be 1" in await refused(client, twice, ns)
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    long_name = trainjob("t" * 50, "rt", trainer={"numNodes": 4})
    assert "pod names generated for this TrainJob will exceed 63 characters" in await refused(client, long_name, ns)
    wordy = runtime("wordy", rjob("a-very-long-node-name", "trainer"))
    assert "replicatedJobs[0].name: must be no more than 20 characters" in await refused(client, wordy, ns)
    job_scheduling = rjob("node", "trainer")
    job_scheduling["template"]["spec"]["scheduling"] = {"schedulingPolicy": {"gang": {}}}
    message = await refused(client, runtime("own-gang", job_scheduling), ns)
    assert "replicatedJobs[0].template.spec.scheduling: a Job's own scheduling" in message
    assert "set the runtime's spec.scheduling instead" in message


async def test_kubectl_shows_upstreams_warnings_for_a_deprecated_cluster_runtime(
    cluster: Any, ns: str, tmp_path: Path
) -> None:
    name = f"deprecated-{ns}"
    ctr = {**runtime(name, rjob("node", "trainer")), "kind": "ClusterTrainingRuntime"}
    ctr["metadata"]["labels"] = {"trainer.kubeflow.org/support": "deprecated"}
    (tmp_path / "ctr.yaml").write_text(json.dumps(ctr))
    (tmp_path / "tj.yaml").write_text(json.dumps(trainjob("user", name, kind="ClusterTrainingRuntime")))
    policy = "See runtime deprecation policy: https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html"
    try:
        created = cluster.run_kubectl("create", "-f", str(tmp_path / "ctr.yaml"))
        assert f'Warning: ClusterTrainingRuntime "{name}" is deprecated and will be removed' in created.stderr
        assert policy in created.stderr
        job = cluster.run_kubectl("create", "-n", ns, "-f", str(tmp_path / "tj.yaml"))
        assert f'Warning: Referenced ClusterTrainingRuntime "{name}" is deprecated' in job.stderr, job.stderr
        assert "trainjob.trainer.kubeflow.org/user created" in job.stdout
    finally:
        cluster.run_kubectl("delete", "clustertrainingruntime", name, "--wait=false", check=False)


async def test_runtime_patch_times_are_stamped_and_kept_for_unchanged_patches(client: Client, ns: str) -> None:
    """As upstream's e2e "should update Time only for the changed patch on update"."""

    def patch(manager: str, value: str) -> JSON:
        labels = {"trainingRuntimeSpec": {"template": {"metadata": {"labels": {"example.com/x": value}}}}}
        return {"manager": manager, **labels}

    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    first = [patch("example.com/a", "1"), patch("example.com/b", "1")]
    created = await client.kube.create(TRAINJOBS, ns, trainjob("patched", "rt", suspend=True, runtimePatches=first))
    times = [p.get("time") for p in created["spec"]["runtimePatches"]]
    assert all(times), created["spec"]["runtimePatches"]
    await asyncio.sleep(1.1)  # a later second: a new stamp differs
    update = {"spec": {"runtimePatches": [{**created["spec"]["runtimePatches"][0]}, patch("example.com/b", "2")]}}
    updated = await client.kube.merge_patch(TRAINJOBS, ns, "patched", update)
    a, b = updated["spec"]["runtimePatches"]
    assert a["time"] == times[0], "the unchanged patch keeps its time"
    assert b["time"] > times[1], "the changed one is stamped anew"


async def test_gates_change_only_while_suspended_and_reach_pods_after_resume(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("gated", "rt"), ns)
    await wait_for(lambda: _pods(client, ns, "gated"), "pods of the running TrainJob")
    gate = [{"targetJobs": [{"name": "node"}], "schedulingGates": [{"name": "example.com/wait"}]}]
    message = await refused(client, trainjob("gated", "rt", podSpecOverrides=gate), ns)
    assert "may change only while the TrainJob is suspended" in message
    # Suspend (pods go), change the gate while suspended, then resume: new pods carry it.
    await client.apply(trainjob("gated", "rt", suspend=True), ns)
    await wait_for(lambda: _no_pods(client, ns, "gated"), "pods gone after suspend", timeout=60)

    async def gated_while_suspended() -> bool:
        """The webhook refuses the change while the Jobs' status counts active pods (the Job controller
        counts the deleted pods out a moment after they are gone): as its message says, try again."""
        try:
            await client.apply(trainjob("gated", "rt", suspend=True, podSpecOverrides=gate), ns)
        except ApiError as e:
            if "still have" in str(e) and "active pods" in str(e):
                return False
            raise
        return True

    await wait_for(gated_while_suspended, "the gate's change admitted once no Job counts an active pod", timeout=60)
    await client.apply(trainjob("gated", "rt", suspend=False, podSpecOverrides=gate), ns)
    pods = await wait_for(lambda: _pods(client, ns, "gated"), "pods after resume")
    assert all(p["spec"].get("schedulingGates") == [{"name": "example.com/wait"}] for p in pods)


async def _pods(client: Client, ns: str, name: str) -> list[JSON] | None:
    return await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}") or None


async def _no_pods(client: Client, ns: str, name: str) -> bool:
    return not await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")


async def test_with_the_operator_down_deletes_work_and_creates_are_refused(
    client: Client, ns: str, operator: Operator
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(trainjob("doomed", "rt"), ns)
    await wait_for(lambda: _pods(client, ns, "doomed"), "pods running")
    operator.stop()
    try:
        await client.kube.delete(TRAINJOBS, ns, "doomed")

        async def gone() -> bool:
            return await client.trainjob(ns, "doomed") is None and not await client.pods(
                ns, "jobset.sigs.k8s.io/jobset-name=doomed"
            )

        await wait_for(gone, "TrainJob and its pods deleted while the operator is down", timeout=60)
        # failurePolicy Fail: while the webhook is down nothing gets in unchecked.
        with pytest.raises(ApiError, match="failed calling webhook"):
            await client.apply(trainjob("while-down", "rt"), ns)
    finally:
        operator.start()
        await operator.serving()  # the next test's writes need its webhook again
    items, _ = await client.kube.list(PODS, ns)
    assert not [p for p in items if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == "doomed"]


VOLCANO_JOBS = Resource("batch.volcano.sh", "v1alpha1", "Job", "jobs")
"""Volcano's own Job (volcano.sh/apis ``pkg/apis/batch/v1alpha1``), here only to meet its admission."""


async def test_hierarchical_queues_as_volcano_enforces_them_and_the_operator_agrees(client: Client, ns: str) -> None:
    """Seed 003 (volcano-sh/volcano#4033) on Volcano's own queue admission (vc-webhook-manager):
    a parent whose child runs a job accepts a second child; a job for a parent queue is refused by
    Volcano (its Job) and by the operator (a TrainJob), both naming the queue; a leaf queue with
    running pods gets no first child."""
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    parent, first, second, busy, late = (f"{ns}-{q}" for q in ("a", "a-q1", "a-q2", "b", "b-q1"))
    await make_queue(client, parent)
    await make_queue(client, first, parent=parent)
    await make_queue(client, busy)

    async def running_in(queue: str) -> None:
        job = trainjob(f"in-{queue}", "rt", trainer={"numNodes": 1})
        job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": queue}
        await client.apply(job, ns)

        async def running() -> bool:
            found = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name=in-{queue}")
            return any((p.get("status") or {}).get("phase") == "Running" for p in found)

        await wait_for(running, f"a pod of the job in queue {queue} running", timeout=60)

    await running_in(first)
    await make_queue(client, second, parent=parent)  # the parent has children: a second one is fine

    job = trainjob("in-parent", "rt", trainer={"numNodes": 1})
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": parent}
    ours = await refused(client, job, ns)
    assert repr(parent) in ours and "leaf" in ours and first in ours and second in ours, ours
    task = {"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    volcano_job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "in-parent", "namespace": ns},
        "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": parent, "tasks": [task]},
    }
    with pytest.raises(ApiError) as theirs:
        await client.kube.create(VOLCANO_JOBS, ns, volcano_job)
    assert f"can only submit job to leaf queue, queue `{parent}` has 2 child queues" in theirs.value.message

    await running_in(busy)

    async def pods_allocated() -> bool:
        queue = await client.kube.get_or_none(VOLCANO_QUEUES, None, busy)
        allocated: JSON = ((queue or {}).get("status") or {}).get("allocated") or {}
        return str(allocated.get("pods", "0")) != "0"

    await wait_for(pods_allocated, f"Volcano counting the pods of queue {busy}", timeout=30)
    queue = {"apiVersion": VOLCANO_QUEUES.api_version, "kind": "Queue", "metadata": {"name": late}}
    message = await refused(client, {**queue, "spec": {"weight": 1, "parent": busy}})
    assert f"queue {busy} cannot be the parent queue of queue {late} because it has allocated Pods" in message
