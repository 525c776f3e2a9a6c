"""Admission rules without a cluster: unit cases, and a property test over generated manifests."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import load_sample
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.framework.certs import Bundle, generate
from trainer.framework.json_codec import JSON
from trainer.trainjob.validation import RFC1035, SUSPEND_WARNING
from trainer.webhook import rules
from trainer.webhook.rules import default_patch
from trainer.webhook.server import review_response

RUNTIME = load_sample("torch-distributed.yaml")
RUNTIME["spec"]["template"]["spec"]["replicatedJobs"].append(
    {"name": "aux", "template": {"spec": {"template": {"spec": {"containers": [{"name": "aux", "image": "x"}]}}}}}
)


def facts(
    active: int = 0, gang: str = "none", queues: list[JSON] | None = None, max_nodes: int = 1000
) -> rules.AdmissionFacts:
    return rules.AdmissionFacts(
        runtime=lambda kind, name, ns: (
            RUNTIME if (kind, name) == ("ClusterTrainingRuntime", "torch-distributed") else None
        ),
        active_pods=lambda kind, ns, name: active,
        volcano_queues=lambda: queues,
        local_queue_exists=lambda ns, name: False,
        gang=gang,
        max_nodes_per_job=max_nodes,
    )


def tj(name: str = "job", **spec: Any) -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def test_override_changes_need_a_suspended_job_and_no_active_pods() -> None:
    gate = [{"targetJobs": [{"name": "aux"}], "schedulingGates": [{"name": "g"}]}]
    running, changed = tj(), tj(podSpecOverrides=gate)
    (error,) = rules.validate_trainjob(changed, running, facts()).errors
    assert error.startswith("spec.podSpecOverrides: may change only while the TrainJob is suspended"), error
    assert rules.validate_trainjob(tj(suspend=True, podSpecOverrides=gate), tj(suspend=True), facts()).allowed
    resumed = rules.validate_trainjob(tj(suspend=False, podSpecOverrides=gate), tj(suspend=True), facts(active=3))
    assert not resumed.allowed and "3 active pods" in resumed.errors[0]
    assert rules.validate_trainjob(tj(suspend=False, podSpecOverrides=gate), tj(suspend=True), facts()).allowed
    # Active pods refuse a change whichever way suspend goes, as upstream's active replicated jobs do
    # (Kueue stops in two requests: suspend, then, once no pod is active, restore the overrides).
    for new, old in (
        (tj(suspend=True, podSpecOverrides=gate), tj(suspend=True)),
        (tj(suspend=True), tj(podSpecOverrides=gate)),
    ):
        (error,) = rules.validate_trainjob(new, old, facts(active=2)).errors
        assert error.startswith("spec.podSpecOverrides: cannot change while") and "2 active pods" in error, error
    assert rules.validate_trainjob(tj(suspend=True), tj(suspend=False, podSpecOverrides=gate), facts()).allowed


def test_env_of_the_node_container_is_set_through_the_trainer_not_overrides() -> None:
    o = [{"targetJobs": [{"name": "node"}], "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}]
    (err,) = rules.validate_trainjob(tj(podSpecOverrides=o), None, facts()).errors
    assert "spec.trainer.env" in err


def test_volcano_queue_is_checked_only_under_volcano_and_kueue_queue_warns() -> None:
    job = tj()
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "nowhere"}
    assert rules.validate_trainjob(job, None, facts()).allowed
    v = rules.validate_trainjob(job, None, facts(gang="volcano", queues=[]))
    assert not v.allowed and "metadata.annotations[scheduling.volcano.sh/queue-name]" in v.errors[0]
    job["metadata"] = {"name": "job", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    v = rules.validate_trainjob(job, None, facts(gang="kueue"))
    assert v.allowed and "LocalQueue 'lq' does not exist" in v.warnings[0]


def test_defaulting_suspends_kueue_jobs_only_under_kueue() -> None:
    job = tj()
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    assert rules.default_patch(job, "TrainJob", "kueue") == [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert rules.default_patch(job, "TrainJob", "none") == []
    mpi = load_sample("mpijob.yaml")
    mpi["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    assert rules.default_patch(mpi, "MPIJob", "kueue") == [
        {"op": "add", "path": "/spec/runPolicy/suspend", "value": True}
    ]


def test_runtime_rules() -> None:
    rt = load_sample("torch-distributed.yaml")
    assert rules.validate_runtime(rt).allowed
    rt["spec"]["mlPolicy"]["mpi"] = {}
    assert "set only one of torch, mpi" in rules.validate_runtime(rt).errors[0]


DEPRECATED = (
    '"torch-distributed" is deprecated and will be removed in a future release of Kubeflow Trainer. See '
    "runtime deprecation policy: https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html"
    "#runtime-deprecation-policy"
)


def test_a_runtime_template_that_suspends_is_admitted_with_a_warning_that_the_trainjob_decides() -> None:
    """kubeflow/trainer's JobSet plugin replaces the template's suspend with the TrainJob's (Kueue's e2e
    suites create runtimes whose JobSet template says suspend: true): admitted, and said."""
    rt = load_sample("torch-distributed.yaml")
    rt["spec"]["template"]["spec"]["suspend"] = True
    verdict = rules.validate_runtime(rt)
    assert verdict.allowed and verdict.warnings == [SUSPEND_WARNING]
    assert "spec.suspend on the TrainJob" in SUSPEND_WARNING
    rt["spec"]["template"]["spec"]["suspend"] = False
    assert rules.validate_runtime(rt).warnings == []


def test_a_deprecated_cluster_runtime_is_admitted_with_upstreams_warnings() -> None:
    """kubeflow/trainer: a create of a ClusterTrainingRuntime labelled support=deprecated warns (not its
    update), and so does a TrainJob that references it; a namespaced TrainingRuntime never warns."""
    rt = load_sample("torch-distributed.yaml")
    assert rules.validate_runtime(rt).warnings == []
    rt["metadata"]["labels"]["trainer.kubeflow.org/support"] = "deprecated"
    created = rules.validate_runtime(rt)
    assert created.allowed and created.warnings == [f"ClusterTrainingRuntime {DEPRECATED}"]
    assert rules.validate_runtime(rt, old=copy.deepcopy(rt)).warnings == []
    assert rules.validate_runtime({**rt, "kind": "TrainingRuntime"}).warnings == []
    cached = {k: v for k, v in rt.items() if k != "kind"}  # a cache's list items carry no kind
    deprecated = rules.AdmissionFacts(
        runtime=lambda kind, name, ns: (
            cached if (kind, name) == ("ClusterTrainingRuntime", "torch-distributed") else None
        ),
        active_pods=lambda kind, ns, name: 0,
        volcano_queues=lambda: None,
        local_queue_exists=lambda ns, name: False,
        gang="none",
        max_nodes_per_job=1000,
    )
    job = rules.validate_trainjob(tj(), None, deprecated)
    assert job.allowed and job.warnings == [f"Referenced ClusterTrainingRuntime {DEPRECATED}"]
    assert rules.validate_trainjob(tj(), None, facts()).warnings == []


def test_review_response_shapes() -> None:
    body = review_response("u1", rules.Verdict(errors=["a", "b"], warnings=["w"]))
    assert body["response"] == {
        "uid": "u1",
        "allowed": False,
        "status": {"code": 422, "reason": "Invalid", "message": "a; b"},
        "warnings": ["w"],
    }
    patched = review_response("u2", rules.Verdict(), [{"op": "add", "path": "/spec/suspend", "value": True}])
    assert patched["response"]["patchType"] == "JSONPatch" and patched["response"]["allowed"] is True


def test_certificates_cover_the_service_and_rotate_in_their_last_third() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    bundle = generate(["svc.ns.svc"], ["127.0.0.1"], now=now)
    again = Bundle.from_secret_data(bundle.to_secret_data())
    assert again == bundle
    assert not bundle.needs_rotation(now + datetime.timedelta(days=200))
    assert bundle.needs_rotation(now + datetime.timedelta(days=250))


# ---------------------------------------------------------------- property test

TARGETS = ["node", "aux", "ghost"]
CONTAINERS = {"node": "node", "aux": "aux"}
ENV_NAMES = ["FOO", "PET_NNODES", "PET_MASTER_ADDR", "BAR"]
NAMES = ["ok", "a-b-c", "Bad.Name", "x" * 64, "9starts-with-digit", "ends-"]


@st.composite
def manifests(draw: st.DrawFn) -> tuple[JSON, list[str]]:
    """A TrainJob and the reasons an independent oracle expects it to be refused."""
    name = draw(st.sampled_from(NAMES))
    expected: list[str] = []
    if len(name) > 63 or not RFC1035.match(name):
        expected.append("name")
    spec: JSON = {}
    env = draw(st.lists(st.sampled_from(ENV_NAMES), max_size=2, unique=True))
    if env:
        spec["trainer"] = {"env": [{"name": n, "value": "v"} for n in env]}
        if any(n.startswith("PET_") for n in env):
            expected.append("reserved")
    overrides = []
    for target in draw(st.lists(st.sampled_from(TARGETS), max_size=2)):
        o: JSON = {"targetJobs": [{"name": target}]}
        if draw(st.booleans()):
            container = draw(st.sampled_from(["node", "aux", "ghost"]))
            o["containers"] = [{"name": container}]
            if target in CONTAINERS and container != CONTAINERS[target]:
                expected.append("container")
        if target not in CONTAINERS:
            expected.append("target")
        overrides.append(o)
    if overrides:
        spec["podSpecOverrides"] = overrides
    runtime = draw(st.sampled_from(["torch-distributed", "torch-distributed", "gone"]))
    if runtime == "gone":
        expected.append("runtime")
    job = tj(name, **spec)
    job["spec"]["runtimeRef"]["name"] = runtime
    return job, expected


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(manifests())
def test_every_invalid_manifest_is_refused_with_a_message_and_every_valid_one_admitted(
    case: tuple[JSON, list[str]],
) -> None:
    job, expected = case
    verdict = rules.validate_trainjob(job, None, facts())
    if expected:
        assert not verdict.allowed, (job, expected)
        assert all(e.strip() for e in verdict.errors)
    else:
        assert verdict.allowed, (job, verdict.errors)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=1000, deadline=None)
@given(json_values, st.sampled_from(["TrainJob", "MPIJob", "runtime"]))
def test_no_exception_escapes_on_arbitrary_input(junk: Any, kind: str) -> None:
    obj = {"metadata": {"name": "x"}, "spec": junk} if not isinstance(junk, dict) else junk
    if kind == "TrainJob":
        verdict = rules.validate_trainjob(obj, None, facts())
    elif kind == "MPIJob":
        verdict = rules.validate_mpijob(obj, None, facts())
    else:
        verdict = rules.validate_runtime(obj)
    assert verdict.allowed or all(isinstance(e, str) and e for e in verdict.errors)


def test_the_queue_is_immutable_once_the_job_has_started() -> None:
    def queued(q: str, suspend: bool) -> JSON:
        job = tj(suspend=suspend)
        job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": q}
        return job

    (err,) = rules.validate_trainjob(queued("b", False), queued("a", False), facts()).errors
    assert "cannot change from 'a' to 'b'" in err and "scheduling.volcano.sh/queue-name" in err
    assert rules.validate_trainjob(queued("b", True), queued("a", True), facts()).allowed


def test_a_failure_policy_rule_names_existing_replicated_jobs_and_valid_patterns() -> None:
    rt = copy.deepcopy(RUNTIME)
    rt["spec"]["template"]["spec"]["failurePolicy"] = {
        "maxRestarts": 1,
        "rules": [
            {"name": "a", "action": "FailJobSet", "targetReplicatedJobs": ["nope"]},
            {"name": "a", "action": "RestartJobSet", "onJobFailureMessagePatterns": ["("]},
        ],
    }
    errors = rules.validate_runtime(rt).errors
    assert any("rules[0].targetReplicatedJobs: 'nope'" in e for e in errors)
    assert any("rules[1].onJobFailureMessagePatterns" in e for e in errors)
    assert any("name 'a' is used twice" in e for e in errors)
    rt["spec"]["template"]["spec"]["failurePolicy"]["rules"][0]["action"] = "RecreateJob"
    assert any("action" in e for e in rules.validate_runtime(rt).errors), "JobSet actions not implemented are refused"


# ---------------------------------------------------------------- what would end in silence or a retry loop


def test_num_nodes_above_the_operators_limit_is_refused_naming_field_limit_and_flag() -> None:
    (err,) = rules.validate_trainjob(tj(trainer={"numNodes": 9}), None, facts(max_nodes=8)).errors
    assert err.startswith(
        "spec.trainer.numNodes: 9 nodes is more than this operator's limit of 8 (--max-nodes-per-job)"
    )
    assert rules.validate_trainjob(tj(trainer={"numNodes": 8}), None, facts(max_nodes=8)).allowed
    assert rules.validate_trainjob(tj(trainer={"numNodes": 100000}), None, facts(max_nodes=0)).allowed
    assert not rules.validate_trainjob(tj(trainer={"numNodes": 100000}), None, facts()).allowed, "default 1000"


def test_mpijob_workers_above_the_limit_are_refused() -> None:
    mpi = load_sample("mpijob.yaml")
    (err,) = rules.validate_mpijob(mpi, None, facts(max_nodes=1)).errors
    assert err.startswith("spec.mpiReplicaSpecs.Worker.replicas: 2 workers is more than this operator's limit of 1")
    assert rules.validate_mpijob(mpi, None, facts(max_nodes=2)).allowed


def test_an_mpijob_without_a_launcher_is_admitted_with_a_warning_and_two_launchers_are_refused() -> None:
    """mpi-operator's API admits an MPIJob without a Launcher (its controller refuses it; Kueue's e2e suites
    create one): admitted, warned of; the reconcile ends it Failed (InvalidSpec)."""
    mpi = load_sample("mpijob.yaml")
    del mpi["spec"]["mpiReplicaSpecs"]["Launcher"]
    verdict = rules.validate_mpijob(mpi, None, facts())
    assert verdict.allowed, verdict.errors
    (warning,) = verdict.warnings
    assert warning.startswith("spec.mpiReplicaSpecs.Launcher is missing") and "InvalidSpec" in warning
    two = load_sample("mpijob.yaml")
    two["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    (err,) = rules.validate_mpijob(two, None, facts()).errors
    assert err.startswith("spec.mpiReplicaSpecs.Launcher.replicas must be 1")


def test_overrides_naming_a_missing_replicated_job_are_refused_once_with_the_names_that_exist() -> None:
    o = [{"targetJobs": [{"name": "ghost"}], "nodeSelector": {"a": "b"}}]
    (err,) = rules.validate_trainjob(tj(podSpecOverrides=o), None, facts()).errors
    assert err == (
        "spec.podSpecOverrides[0].targetJobs: replicated job 'ghost' is not in runtime 'torch-distributed' "
        "(it has node, aux)"
    )
    patch = {"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "gone"}]}}}}
    (err,) = rules.validate_trainjob(tj(runtimePatches=[patch]), None, facts()).errors
    assert err.startswith(
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs: must not have replicated job "
        "that doesn't exist in the runtime job template: replicated job 'gone'"
    )


def test_runtimes_with_no_replicas_or_unreadable_quantities_are_refused() -> None:
    rt = copy.deepcopy(RUNTIME)
    rt["spec"]["template"]["spec"]["replicatedJobs"][1]["replicas"] = 0
    (err,) = rules.validate_runtime(rt).errors
    assert err.startswith("spec.template.spec.replicatedJobs[1].replicas: must be at least 1 (got 0)")
    rt = copy.deepcopy(RUNTIME)
    rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ] = {"limits": {"cpu": "lots"}}
    (err,) = rules.validate_runtime(rt).errors
    assert "replicatedJobs[1].template.spec.template.spec.containers[0].resources.limits[cpu]: 'lots'" in err


def facts_with_runtime(runtime: JSON) -> rules.AdmissionFacts:
    """:func:`facts` where every runtime reference resolves to ``runtime``."""
    f = facts()
    return rules.AdmissionFacts(
        runtime=lambda kind, name, ns: runtime,
        active_pods=f.active_pods,
        volcano_queues=f.volcano_queues,
        local_queue_exists=f.local_queue_exists,
    )


def test_a_trainjob_on_a_runtime_with_no_replicas_is_refused_naming_the_runtime() -> None:
    broken = copy.deepcopy(RUNTIME)
    broken["spec"]["template"]["spec"]["replicatedJobs"][1]["replicas"] = 0
    (err,) = rules.validate_trainjob(tj(), None, facts_with_runtime(broken)).errors
    assert err.startswith(
        "spec.runtimeRef: runtime 'torch-distributed' is invalid: spec.template.spec.replicatedJobs[1]"
    )


def test_a_runtime_whose_job_template_sets_scheduling_is_refused_and_so_is_a_trainjob_on_it() -> None:
    """A Job's own ``spec.scheduling`` (batch/v1, Kubernetes 1.36+ ``WorkloadWithJob``) would be dropped or
    ignored on the Jobs a TrainJob owns: refused at admission of the runtime and of a TrainJob using it."""
    rt = copy.deepcopy(RUNTIME)
    rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["scheduling"] = {
        "schedulingPolicy": {"gang": {}}
    }
    (err,) = rules.validate_runtime(rt).errors
    assert err.startswith("spec.template.spec.replicatedJobs[1].template.spec.scheduling: ")
    assert "set the runtime's spec.scheduling instead" in err
    namespaced = copy.deepcopy(rt) | {"kind": "TrainingRuntime"}
    namespaced["metadata"] = {**rt["metadata"], "namespace": "ns"}
    assert rules.validate_runtime(namespaced).errors == [err]
    (job_err,) = rules.validate_trainjob(tj(), None, facts_with_runtime(rt)).errors
    assert job_err == f"spec.runtimeRef: runtime 'torch-distributed' is invalid: {err}"


def test_runtime_patch_times_are_stamped_on_create_and_kept_for_unchanged_entries() -> None:
    def tj(*patches: JSON) -> JSON:
        return {"kind": "TrainJob", "spec": {"runtimePatches": list(patches)}}

    kueue = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"metadata": {}}}}
    sdk = {"manager": "trainer.kubeflow.org/sdk", "trainingRuntimeSpec": {}}
    created = default_patch(tj(kueue, {**sdk, "time": "2026-01-01T00:00:00Z"}), "TrainJob", "none", None, "T1")
    assert created == [{"op": "add", "path": "/spec/runtimePatches/0/time", "value": "T1"}], "a set time stays"
    old = tj({**kueue, "time": "T1"}, {**sdk, "time": "T1"})
    changed = {**sdk, "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": "b"}}}}}
    # Kueue's entry unchanged (sent without its time), the SDK's changed, a third one new.
    new = tj(kueue, {**changed, "time": "T1"}, {"manager": "other", "trainingRuntimeSpec": {}})
    assert default_patch(new, "TrainJob", "none", old, "T2") == [
        {"op": "add", "path": "/spec/runtimePatches/0/time", "value": "T1"},
        {"op": "replace", "path": "/spec/runtimePatches/1/time", "value": "T2"},
        {"op": "add", "path": "/spec/runtimePatches/2/time", "value": "T2"},
    ]
    assert default_patch(old, "TrainJob", "none", old, "T2") == [], "an update that changes nothing stamps nothing"


def test_a_queued_trainjob_with_v21_fields_is_warned_that_kueue_drops_them() -> None:
    """Kueue >= 0.17 updates an admitted TrainJob as Trainer v2.2's Go types, which drop v2.1's fields
    (``e2e/test_state.py`` saw its pods start without their annotations): the create is admitted with a
    warning naming each field and the ``runtimePatches`` form; without a queue label, or with a
    ``runtimePatches`` entry only, nothing is said."""
    override = [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {"a": "1"}}}]
    queued = tj(podTemplateOverrides=override, labels={"team": "a"})
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    verdict = rules.validate_trainjob(queued, None, facts())
    assert verdict.allowed
    (warning,) = [w for w in verdict.warnings if "Kueue 0.17" in w]
    assert warning.startswith("spec.labels, spec.podTemplateOverrides: Kueue 0.17 and later")
    assert "drop these fields" in warning and "spec.runtimePatches" in warning

    unqueued = tj(podTemplateOverrides=override)
    assert not [w for w in rules.validate_trainjob(unqueued, None, facts()).warnings if "Kueue 0.17" in w]
    patched = tj(runtimePatches=[{"manager": "example.com/m", "trainingRuntimeSpec": {}}])
    patched["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    assert not [w for w in rules.validate_trainjob(patched, None, facts()).warnings if "Kueue 0.17" in w]


def test_a_queued_trainjob_is_warned_of_every_later_field_kueue_drops() -> None:
    """Fields Trainer v2.2's types lack (ours ahead of upstream, v2.3's grace period) are named with their
    paths, down to a container patch of a ``runtimePatches`` entry; a patch without them says nothing."""
    container: JSON = {"name": "node", "resources": {"limits": {"cpu": "1"}}}
    pod: JSON = {"terminationGracePeriodSeconds": 5, "containers": [container]}
    rjobs = [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]
    entry = {"manager": "example.com/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": rjobs}}}}
    job = tj(ttlSecondsAfterFinished=0, runtimePatches=[entry])
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    at = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
    assert rules.kueue_dropped_fields(TrainJob.model_validate(job)) == (
        [],
        ["spec.ttlSecondsAfterFinished", f"{at}.terminationGracePeriodSeconds", f"{at}.containers[0].resources"],
    )
    warning = rules.kueue_drops_warning(TrainJob.model_validate(job))
    assert warning is not None and "take effect only for a job no such Kueue admits" in warning
    pod.pop("terminationGracePeriodSeconds")
    container.pop("resources")
    quiet = tj(runtimePatches=[entry]) | {"metadata": job["metadata"]}
    assert rules.kueue_drops_warning(TrainJob.model_validate(quiet)) is None
