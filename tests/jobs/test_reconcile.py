"""The reconcilers over a recording double of the project's ``Kube`` (tests/kube_double.py), wired by
the real :class:`~trainer.framework.manager.Manager` from the controllers' declarations.

For every sample (torch TrainJob, TrainJob on the mpi runtime, MPIJob) and every gang scheduler: a
reconcile of a settled object writes nothing (no apply, no status patch, no event), at each stage of
the job's life; the SSH Secret is written exactly once; every informer a reconciler can read is
started, and reading an undeclared resource fails loudly.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import aiohttp
import pytest

from tests.conftest import load_sample
from tests.harness import SAMPLES, World, complete_condition
from tests.kube_double import RecordingKube
from trainer.api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBS,
    MPIJOBS,
    SECRETS,
    TRAINJOBS,
    VOLCANO_PODGROUPS,
)
from trainer.framework.controller import Context, Controller, Owns, Reconcile, UndeclaredRead
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.jobs import gang
from trainer.jobs.child_writer import RETRY_FIRST
from trainer.jobs.reconcile import Reconciler
from trainer.trainjob import controller as trainjob
from trainer.trainjob.kind import kind as trainjob_kind
from trainer.wiring import Settings, new_manager

CASES = [(s, g) for s in SAMPLES for g in sorted(gang.SCHEDULERS)]


@pytest.mark.parametrize(("sample", "scheduler"), CASES)
async def test_a_settled_object_is_not_written_again_at_any_stage(sample: str, scheduler: str) -> None:
    w = World(sample, scheduler)
    await w.settle()
    assert await w.reconcile() == 0

    pod_group = w.kube.objects.get((VOLCANO_PODGROUPS, w.key))
    if pod_group is not None:  # Volcano admits the gang
        w.set_status(VOLCANO_PODGROUPS, pod_group, {"phase": "Running"})
        await w.settle()
        assert await w.reconcile() == 0
    assert w.jobs(), "children were created"
    assert all(not j["spec"].get("suspend") for j in w.jobs()), "released"

    for job in w.jobs():  # every pod ready
        n = int(job["spec"].get("parallelism") or 1)
        w.set_status(JOBS, job, {"active": n, "ready": n})
    await w.settle()
    assert await w.reconcile() == 0

    for job in w.jobs():  # every Job complete
        n = int(job["spec"].get("parallelism") or 1)
        w.set_status(JOBS, job, {"active": 0, "ready": 0, "succeeded": n, "conditions": [complete_condition()]})
    await w.settle()
    assert await w.reconcile() == 0
    status = w.kube.objects[(w.resource, w.key)]["status"]
    done = "Succeeded" if w.resource == MPIJOBS else "Complete"
    assert any(c["type"] == done and c["status"] == "True" for c in status["conditions"]), status


@pytest.mark.parametrize("sample", ["deepspeed-mpi", "mpijob"])
@pytest.mark.parametrize("scheduler", sorted(gang.SCHEDULERS))
async def test_the_ssh_secret_is_written_exactly_once(sample: str, scheduler: str) -> None:
    w = World(sample, scheduler)
    await w.settle()
    for i in range(5):  # five changes of the job, each reconciled
        obj = copy.deepcopy(w.kube.objects[(w.resource, w.key)])
        obj["metadata"].setdefault("annotations", {})["touch"] = str(i)
        w.kube.put(obj)
        await w.settle()
    secrets = [o for (res, _), o in w.kube.objects.items() if res == SECRETS]
    assert len(secrets) == 1 and w.kube.count("create", SECRETS.kind) == 1, "created, as mpi-operator does"
    assert w.kube.count("apply", SECRETS.kind) == 0, "never rewritten"
    hostfile = [x for x in w.kube.writes if x.kind == "ConfigMap" and x.key[1].endswith(("-config", "-mpi-hostfile"))]
    assert len(hostfile) == 1, "the hostfile is written once"


@pytest.mark.parametrize("scheduler", sorted(gang.SCHEDULERS))
def test_every_informer_a_reconciler_can_read_is_started(scheduler: str) -> None:
    manager = new_manager(RecordingKube(), Settings(gang_scheduler_name=scheduler))
    started = {id(i) for i in manager.informers}
    for name, reader in manager.readers.items():
        for res, store in reader.stores.items():
            assert id(store) in started, f"{name} reads {res.kind} from an informer that is never started"
    declared = {(s.resource, s.label, s.field_selector) for c in manager.controllers for s in c.sources()}
    assert {(i.res, i.label_selector, i.field_selector) for i in manager.informers} == declared


async def test_reading_an_undeclared_resource_fails_loudly() -> None:
    kube = RecordingKube()
    kind = trainjob_kind(trainjob.TrainJobOptions(), "none")

    def build(ctx: Context) -> Reconcile:
        return Reconciler(kind, ctx, gang.get("none"), telling=trainjob.TELLING).reconcile

    bare = Controller("trainjob", TRAINJOBS, build, owns=(Owns(JOBS),))
    manager = new_manager(kube, Settings(), declared=[bare])
    kube.connect(manager.informers)
    tj = kube.put(load_sample("trainjob.yaml"))
    for _ in range(8):  # never turned into a condition, however often it happens
        with pytest.raises(UndeclaredRead, match="does not declare it"):
            await manager.reconcilers["trainjob"](key_of(tj))
    assert "status" not in kube.objects[(TRAINJOBS, key_of(tj))]


async def test_a_spec_the_operator_cannot_read_is_failed_once_and_not_retried() -> None:
    w = World("torch", "none")
    obj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    obj["spec"]["trainer"] = {"numNodes": "many"}
    w.kube.put(obj)
    from trainer.framework.controller import TerminalError

    with pytest.raises(TerminalError, match="numNodes"):
        await w.reconcile()
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [("Failed", "ResourcesCreationFailed")]
    assert "spec.trainer.numNodes" in status["conditions"][0]["message"]
    assert await w.reconcile() == 0, "said once: the same refusal is not written again"


def counter(metric: Any) -> float:
    return float(metric.labels("trainjob")._value.get())


async def test_a_terminal_failure_is_counted_once_and_its_own_status_write_does_not_count_again() -> None:
    w = World("torch", "none")
    obj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    obj["spec"]["trainer"] = {"numNodes": "many"}
    w.kube.put(obj)
    m = w.manager.metrics
    succeeded = m.reconcile_total.labels("trainjob", "success")
    # The status write is seen by the informer, which queues the job again: that reconcile ends quietly.
    await w.run_worker(lambda: counter(m.terminal_errors) == 1 and succeeded._value.get() >= 1)
    assert counter(m.terminal_errors) == 1 and counter(m.reconcile_errors) == 1
    queue = w.manager.queues["trainjob"]
    assert queue.failures(w.key) == 0 and len(queue) == 0, "not retried"


async def test_an_unexpected_exception_becomes_a_condition_after_bounded_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainer.jobs.reconcile import RECONCILE_ATTEMPTS

    w = World("torch", "none")

    def broken(*_: Any) -> Any:
        raise RuntimeError("boom: a bug of ours")

    reconciler = w.reconciler()
    monkeypatch.setattr(reconciler, "kind", dataclasses.replace(reconciler.kind, desired=broken))
    m = w.manager.metrics
    await w.run_worker(lambda: counter(m.terminal_errors) == 1)
    tj = w.kube.objects[(TRAINJOBS, w.key)]
    (cond,) = [c for c in tj["status"]["conditions"] if c["type"] == "Misconfigured"]
    assert cond["reason"] == "ReconcileError" and "boom: a bug of ours" in cond["message"], cond
    assert w.jobs() == []
    assert counter(m.reconcile_errors) == RECONCILE_ATTEMPTS, "retried with backoff, a bounded number of times"
    errors = counter(m.reconcile_errors)
    for _ in range(3):  # later events of the job: the failure is said, nothing is counted or written
        writes = len(w.kube.writes)
        assert await w.reconcile() == 0 and len(w.kube.writes) == writes
    await w.run_worker(lambda: True)
    assert counter(m.reconcile_errors) == errors

    monkeypatch.undo()  # the bug fixed: the next change of the job reconciles it and the condition goes
    obj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    obj["spec"]["trainer"]["numNodes"] = 1
    w.kube.put(obj)
    await w.settle()
    assert w.jobs()
    conditions = (w.kube.objects[(TRAINJOBS, w.key)].get("status") or {}).get("conditions") or []
    assert not any(c["type"] == "Misconfigured" for c in conditions), conditions


async def test_an_exception_that_stops_happening_leaves_no_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    w = World("torch", "none")
    calls = []
    reconciler = w.reconciler()
    desired = reconciler.kind.desired

    def flaky(*args: Any) -> Any:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("transient")
        return desired(*args)

    monkeypatch.setattr(reconciler, "kind", dataclasses.replace(reconciler.kind, desired=flaky))
    for _ in range(2):
        with pytest.raises(RuntimeError, match="transient"):
            await w.reconcile()
    await w.settle()
    assert w.jobs()
    conditions = (w.kube.objects[(TRAINJOBS, w.key)].get("status") or {}).get("conditions") or []
    assert not any(c["type"] == "Misconfigured" for c in conditions), conditions


async def test_the_apiservers_errors_are_retried_not_turned_into_a_condition() -> None:
    from trainer.framework.kube.client import ApiError

    w = World("torch", "none")
    w.kube.refuse["Job"] = (500, "etcdserver: request timed out")
    for _ in range(8):
        with pytest.raises(ApiError):
            await w.reconcile()
    conditions = (w.kube.objects[(TRAINJOBS, w.key)].get("status") or {}).get("conditions") or []
    assert not any(c.get("reason") == "ReconcileError" for c in conditions), conditions


@pytest.mark.parametrize(
    "error",
    [ConnectionRefusedError(111, "Connection refused"), aiohttp.ServerDisconnectedError(), TimeoutError()],
    ids=["refused", "disconnected", "timeout"],
)
async def test_no_answer_from_the_apiserver_is_retried_not_turned_into_a_condition(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = World("torch", "none")

    async def unreachable(*args: Any, **kwargs: Any) -> JSON:
        raise error

    monkeypatch.setattr(w.kube, "apply", unreachable)
    monkeypatch.setattr(w.kube, "create", unreachable)
    for _ in range(8):  # more than the attempts an exception of ours gets
        with pytest.raises(type(error)):
            await w.reconcile()
    assert not (w.kube.objects[(TRAINJOBS, w.key)].get("status") or {}).get("conditions")
    monkeypatch.undo()
    await w.settle()  # the apiserver answers again: the job goes on
    assert w.jobs()


async def test_a_child_the_apiserver_refuses_ends_in_a_condition_and_is_not_sent_again() -> None:
    w = World("torch", "none")
    message = 'Job.batch "pytorch-simple-node-0" is invalid: spec.template.spec.containers[0].env[0].name: Invalid'
    w.kube.refuse["Job"] = (422, message)
    await w.settle()
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    (cond,) = [c for c in status["conditions"] if c["type"] == "Misconfigured"]
    assert cond["reason"] == "TrainJobResourcesCreationFailed" and "env[0].name" in cond["message"]
    job_writes = [x for x in w.kube.writes if x.verb in ("apply", "create") and x.kind == "Job"]
    assert len(job_writes) == 1, "the refused Job is not sent again while nothing changed"
    assert await w.reconcile() == 0


async def test_a_refused_child_is_sent_again_after_a_backoff_and_the_condition_goes_when_it_passes() -> None:
    w = World("torch", "none")
    now = [1000.0]
    w.reconciler().children.clock = lambda: now[0]
    w.kube.refuse["Job"] = (403, 'jobs.batch "x" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1')
    requeue = await w.settle()
    assert requeue is not None and 0 < requeue <= RETRY_FIRST, "looked at again when the backoff ends"

    def sends() -> int:
        return sum(1 for x in w.kube.writes if x.verb in ("apply", "create") and x.kind == "Job")

    assert sends() == 1 and await w.reconcile() == 0, "not sent again before the backoff ends"
    now[0] += RETRY_FIRST
    await w.reconcile()
    assert sends() == 2, "sent again once the backoff ended"
    now[0] += RETRY_FIRST  # the second wait is twice the first
    assert await w.reconcile() == 0 and sends() == 2
    events = [x for x in w.kube.writes if x.kind == "Event" and "exceeded quota" in str(x.body)]
    assert len(events) == 1, "the refusal is told once, not at every retry"

    del w.kube.refuse["Job"]  # the quota was raised
    now[0] += RETRY_FIRST
    await w.settle()
    assert w.jobs(), "the Job exists without a restart of the operator"
    assert w.condition("Misconfigured") is None, w.obj["status"]["conditions"]


async def test_input_the_core_cannot_expand_ends_in_a_condition_not_a_retry_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = World("torch", "none")

    def cannot(*_: Any) -> Any:
        raise ValueError("not a quantity: 'lots'")

    monkeypatch.setattr("trainer.trainjob.kind.build_children", cannot)
    from trainer.framework.controller import TerminalError

    with pytest.raises(TerminalError):
        await w.reconcile()
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    (cond,) = [c for c in status["conditions"] if c["type"] == "Misconfigured"]
    assert cond["reason"] == "InvalidSpec" and "fix its spec or its runtime" in cond["message"]
    assert await w.reconcile() == 0, "said once"


async def test_malformed_runtime_patches_fail_the_job_with_the_field_named() -> None:
    w = World("torch", "none")
    obj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    garbage = {"template": {"spec": {"replicatedJobs": "garbage"}}}
    obj["spec"]["runtimePatches"] = [{"manager": "me", "trainingRuntimeSpec": garbage}]
    w.kube.put(obj)
    from trainer.framework.controller import TerminalError

    with pytest.raises(TerminalError):
        await w.reconcile()
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    (cond,) = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert "spec.runtimePatches.0.trainingRuntimeSpec.template.spec.replicatedJobs" in cond["message"]


async def test_a_job_another_controller_manages_is_not_written_even_when_unparsable() -> None:
    w = World("torch", "none")
    obj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    obj["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    obj["spec"]["trainer"] = {"numNodes": "many"}  # not ours to judge
    w.kube.put(obj)
    assert await w.reconcile() == 0
    assert "status" not in w.kube.objects[(TRAINJOBS, w.key)]


async def test_outcomes_are_counted_once_even_when_a_stale_cache_writes_twice() -> None:
    from trainer.api.base import Condition
    from trainer.jobs.features.lifecycle import JobMetrics

    w = World("torch", "none")
    stale = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])  # as a cache that has not seen the write
    reconciler = w.reconciler()
    failed = Condition(type="Failed", status="True", reason="FailedJobs", message="Job x failed")
    await reconciler.status.write(stale, None, [failed])
    await reconciler.status.write(stale, None, [failed])
    assert w.kube.count("patch_status", "TrainJob") == 2, "the stale cache did write twice"
    m = JobMetrics.of(w.manager.metrics)
    labels = ("TrainJob", "default", "torch-distributed")
    assert m.jobs_created.labels(*labels)._value.get() == 1
    assert m.jobs_failed.labels(*labels, "FailedJobs")._value.get() == 1


async def test_a_runtime_the_webhook_would_refuse_fails_the_job_with_the_field_named_when_it_does_not_run() -> None:
    w = World("torch", "none")
    runtime = next(o for (res, _), o in w.kube.objects.items() if res == CLUSTER_TRAINING_RUNTIMES)
    broken = copy.deepcopy(runtime)
    broken["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    w.kube.put(broken)
    await w.settle()
    assert w.jobs() == []
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    (cond,) = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert "replicatedJobs[0].replicas: always must be 1" in cond["message"]


def failed(w: World) -> str:
    """The message of the job's Failed condition (which must be there)."""
    status = w.kube.objects[(w.resource, w.key)]["status"]
    (cond,) = [c for c in status["conditions"] if c["type"] == "Failed" and c["status"] == "True"]
    return str(cond["message"])


async def test_num_nodes_above_the_limit_fails_the_job_naming_field_limit_and_flag_with_nothing_created() -> None:
    w = World("torch", "none", max_nodes_per_job=1)  # the sample asks for 2 nodes
    await w.settle()
    assert w.jobs() == [] and w.kube.count("apply", "Service") == 0
    message = failed(w)
    assert "spec.trainer.numNodes: 2 nodes is more than this operator's limit of 1 (--max-nodes-per-job)" in message


async def test_a_started_job_raised_above_the_limit_without_the_webhook_grows_by_nothing() -> None:
    """The limit holds for a TrainJob that already has Jobs (the webhook, which refuses such an update,
    may not run): a Misconfigured condition naming the field and the limit, the Jobs as they were, and
    the job goes on once its spec is back under the limit."""
    w = World("torch", "none", max_nodes_per_job=2)  # the sample asks for 2 nodes: admitted
    await w.settle()
    (job,) = w.jobs()
    assert job["spec"]["parallelism"] == 2 and w.condition("Misconfigured") is None
    before = copy.deepcopy(w.jobs())
    writes = w.kube.count("apply", "Job") + w.kube.count("create", "Job")

    raised = copy.deepcopy(w.tj)
    raised["spec"]["trainer"]["numNodes"] = 50
    w.kube.put(raised)
    await w.settle()
    cond = w.condition("Misconfigured")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "NodeLimitExceeded")
    assert (
        "spec.trainer.numNodes: 50 nodes is more than this operator's limit of 2 (--max-nodes-per-job)"
        in (cond["message"])
    )
    assert w.jobs() == before and w.kube.count("apply", "Job") + w.kube.count("create", "Job") == writes
    assert w.condition("Failed") is None, "what runs is not failed"

    back = copy.deepcopy(w.tj)
    back["spec"]["trainer"]["numNodes"] = 2
    w.kube.put(back)
    await w.settle()
    assert w.condition("Misconfigured") is None
    assert [j["spec"]["parallelism"] for j in w.jobs()] == [2]


async def test_a_job_started_under_a_larger_limit_keeps_going() -> None:
    """A TrainJob whose Jobs already run as many pods as it asks for is left be by a smaller limit
    (the operator restarted with a lower --max-nodes-per-job)."""
    w = World("torch", "none", max_nodes_per_job=0)
    await w.settle()
    assert [j["spec"]["parallelism"] for j in w.jobs()] == [2]
    later = World(objects=[copy.deepcopy(o) for o in w.kube.objects.values()], max_nodes_per_job=1)
    await later.settle()
    assert later.condition("Misconfigured") is None and later.condition("Failed") is None
    assert [j["spec"]["parallelism"] for j in later.jobs()] == [2]
    more = copy.deepcopy(later.tj)
    more["spec"]["trainer"]["numNodes"] = 3
    later.kube.put(more)
    await later.settle()
    cond = later.condition("Misconfigured")
    assert cond is not None and "3 nodes is more than this operator's limit of 1" in cond["message"]
    assert [j["spec"]["parallelism"] for j in later.jobs()] == [2]


async def test_no_limit_when_the_flag_is_zero() -> None:
    w = World("torch", "none", max_nodes_per_job=0)
    await w.settle()
    assert w.jobs()


async def test_mpijob_workers_above_the_limit_fail_it_with_nothing_created() -> None:
    w = World("mpijob", "none", max_nodes_per_job=1)
    await w.settle()
    assert w.jobs() == []
    assert "spec.mpiReplicaSpecs.Worker.replicas" in failed(w) and "--max-nodes-per-job" in failed(w)


def runtime_of(w: World) -> JSON:
    return copy.deepcopy(next(o for (res, _), o in w.kube.objects.items() if res == CLUSTER_TRAINING_RUNTIMES))


async def test_a_replicated_job_with_no_replicas_fails_the_job_when_the_webhook_does_not_run() -> None:
    w = World("torch", "none")
    runtime = runtime_of(w)
    aux = copy.deepcopy(runtime["spec"]["template"]["spec"]["replicatedJobs"][0])
    aux["name"], aux["replicas"] = "aux", 0
    aux["template"]["metadata"] = {}
    runtime["spec"]["template"]["spec"]["replicatedJobs"].append(aux)
    w.kube.put(runtime)
    await w.settle()
    assert w.jobs() == []
    assert "replicatedJobs[1].replicas: must be at least 1 (got 0)" in failed(w)


async def test_overrides_of_a_missing_replicated_job_fail_the_job_naming_the_field_and_the_names() -> None:
    w = World("torch", "none")
    obj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    obj["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "ghost"}], "metadata": {"labels": {"a": "b"}}}]
    w.kube.put(obj)
    await w.settle()
    assert w.jobs() == []
    message = failed(w)
    assert "spec.podTemplateOverrides[0].targetJobs: replicated job 'ghost' is not in runtime" in message
    assert "(it has node)" in message


async def test_a_runtime_quantity_the_apiserver_cannot_read_fails_the_job_before_any_write() -> None:
    w = World("torch", "none")
    runtime = runtime_of(w)
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"limits": {"cpu": "lots"}}
    w.kube.put(runtime)
    await w.settle()
    assert w.jobs() == [] and w.kube.count("apply", "Job") == 0
    assert "containers[0].resources.limits[cpu]: 'lots' is not a quantity" in failed(w)


def test_the_flag_reaches_the_reconcilers_and_the_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB
    from trainer.webhook.server import cache_facts
    from trainer.wiring.settings import parse_args

    assert parse_args([]).max_nodes_per_job == DEFAULT_MAX_NODES_PER_JOB > 0
    assert parse_args(["--max-nodes-per-job", "0"]).max_nodes_per_job == 0
    monkeypatch.setenv("TRAINER_MAX_NODES_PER_JOB", "7")
    assert parse_args([]).max_nodes_per_job == 7
    assert parse_args(["--max-nodes-per-job=9"]).max_nodes_per_job == 9
    with pytest.raises(SystemExit):
        parse_args(["--max-nodes-per-job=-1"])
    manager = new_manager(RecordingKube(), Settings(max_nodes_per_job=7))
    for name in ("trainjob", "mpijob"):  # the kinds with options (an OptimizationJob has none)
        options = manager.reconcilers[name].__self__.kind.expand.args[0]  # type: ignore[attr-defined]  # the partial's options
        assert options.max_nodes_per_job == 7
    assert cache_facts(manager.readers, "none", 7).max_nodes_per_job == 7


async def test_a_started_mpijob_grown_past_the_node_limit_keeps_what_runs_and_says_so() -> None:
    """As for a TrainJob: without the webhook, raising a running MPIJob's workers past
    --max-nodes-per-job writes nothing and says NodeLimitExceeded; back under the limit, it goes on."""
    w = World("mpijob", "none", max_nodes_per_job=2)  # the sample has 2 workers: admitted
    await w.settle()
    before = copy.deepcopy(w.jobs())
    writes = w.kube.count("apply", "Job") + w.kube.count("create", "Job")
    raised = copy.deepcopy(w.obj)
    raised["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 9
    w.kube.put(raised)
    await w.settle()
    cond = w.condition("Misconfigured")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "NodeLimitExceeded")
    assert "spec.mpiReplicaSpecs.Worker.replicas: 9 workers is more than this operator's limit of 2" in cond["message"]
    assert w.jobs() == before and w.kube.count("apply", "Job") + w.kube.count("create", "Job") == writes
    assert w.condition("Failed") is None
    back = copy.deepcopy(w.obj)
    back["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 2
    w.kube.put(back)
    await w.settle()
    assert w.condition("Misconfigured") is None
