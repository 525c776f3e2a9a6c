"""JobSet's exclusive placement (``alpha.jobset.sigs.k8s.io/exclusive-topology``) on the Jobs a TrainJob
expands into: the pod affinities JobSet's pod webhook writes, its node-selector strategy, and where the
annotation may be set."""

from __future__ import annotations

import hashlib
from typing import Any

from tests.conftest import info
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.trainjob.children import build_children

EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR = "alpha.jobset.sigs.k8s.io/node-selector"
ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"


def rjob(
    name: str, replicas: int = 2, annotations: dict[str, str] | None = None, pod: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": annotations or {}},
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "template": {"spec": {"containers": [{"name": name, "image": "busybox"}], **(pod or {})}},
            },
        },
    }


def expand(
    *rjobs: dict[str, Any], annotations: dict[str, str] | None = None, tj_annotations: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """The Jobs, by name, of TrainJob ``t`` in namespace ``ns`` on a runtime of ``rjobs`` whose
    template carries ``annotations``."""
    runtime = ClusterTrainingRuntime.model_validate(
        {
            "metadata": {"name": "rt"},
            "spec": {"template": {"metadata": {"annotations": annotations or {}}, "spec": {"replicatedJobs": rjobs}}},
        }
    )
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
            "spec": {"runtimeRef": {"name": "rt"}, "annotations": tj_annotations or {}},
        }
    )
    return {j["metadata"]["name"]: j for j in build_children(info(tj, runtime), suspend=False).jobs}


def key(job: str) -> str:
    return hashlib.sha1(f"ns/{job}".encode()).hexdigest()


def spec_of(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def affinity_terms(job_name: str, topology: str) -> dict[str, Any]:
    """The terms JobSet's pod webhook gives a pod of ``job_name`` (``setExclusiveAffinities``)."""
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "jobset.sigs.k8s.io/job-key", "operator": "In", "values": [key(job_name)]}
                        ]
                    },
                    "topologyKey": topology,
                    "namespaceSelector": {},
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "jobset.sigs.k8s.io/job-key", "operator": "Exists"},
                            {"key": "jobset.sigs.k8s.io/job-key", "operator": "NotIn", "values": [key(job_name)]},
                        ]
                    },
                    "topologyKey": topology,
                    "namespaceSelector": {},
                }
            ]
        },
    }


def test_runtime_template_annotation_gives_every_job_its_own_domain_by_pod_affinity() -> None:
    jobs = expand(rjob("a"), rjob("b", replicas=1), annotations={EXCLUSIVE: ZONE})
    assert sorted(jobs) == ["t-a-0", "t-a-1", "t-b-0"]
    for name, job in jobs.items():
        pod_meta = job["spec"]["template"]["metadata"]
        assert pod_meta["labels"]["jobset.sigs.k8s.io/job-key"] == key(name)
        assert job["metadata"]["annotations"][EXCLUSIVE] == pod_meta["annotations"][EXCLUSIVE] == ZONE
        assert spec_of(job)["affinity"] == affinity_terms(name, ZONE)
        assert "nodeSelector" not in spec_of(job)
        assert "tolerations" not in spec_of(job)
        assert NODE_SELECTOR not in pod_meta["annotations"]


def test_trainjob_spec_annotations_count_as_the_jobsets() -> None:
    jobs = expand(rjob("a"), tj_annotations={EXCLUSIVE: RACK})
    assert spec_of(jobs["t-a-1"])["affinity"] == affinity_terms("t-a-1", RACK)


def test_a_replicated_jobs_annotation_scopes_it_to_its_jobs_and_wins_over_the_runtimes() -> None:
    jobs = expand(rjob("a", annotations={EXCLUSIVE: RACK}), rjob("b"))
    assert spec_of(jobs["t-a-0"])["affinity"] == affinity_terms("t-a-0", RACK)
    assert spec_of(jobs["t-a-1"])["affinity"] == affinity_terms("t-a-1", RACK)
    for name in ("t-b-0", "t-b-1"):
        assert "affinity" not in spec_of(jobs[name])
        assert EXCLUSIVE not in jobs[name]["metadata"]["annotations"]
        assert EXCLUSIVE not in jobs[name]["spec"]["template"]["metadata"]["annotations"]
    jobs = expand(rjob("a", annotations={EXCLUSIVE: RACK}), rjob("b"), annotations={EXCLUSIVE: ZONE})
    assert jobs["t-a-0"]["metadata"]["annotations"][EXCLUSIVE] == RACK
    assert spec_of(jobs["t-a-0"])["affinity"] == affinity_terms("t-a-0", RACK)
    assert spec_of(jobs["t-b-0"])["affinity"] == affinity_terms("t-b-0", ZONE)


def test_the_templates_own_affinity_terms_are_kept() -> None:
    own = {
        "labelSelector": {"matchLabels": {"app": "x"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    node: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    pod = {
        "affinity": {"nodeAffinity": node, "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}}
    }
    jobs = expand(rjob("a", replicas=1, pod=pod), annotations={EXCLUSIVE: ZONE})
    affinity = spec_of(jobs["t-a-0"])["affinity"]
    want = affinity_terms("t-a-0", ZONE)
    assert affinity["nodeAffinity"] == node
    assert affinity["podAffinity"] == want["podAffinity"]
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        own,
        *want["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
    ]


def test_node_selector_strategy_selects_the_jobs_nodes_and_tolerates_the_taint() -> None:
    own = {"key": "gpu", "operator": "Exists"}
    jobs = expand(
        rjob("a", pod={"nodeSelector": {"pool": "p"}, "tolerations": [own]}),
        annotations={EXCLUSIVE: ZONE, NODE_SELECTOR: "true"},
    )
    for name, job in jobs.items():
        spec = spec_of(job)
        assert spec["nodeSelector"] == {"pool": "p", "alpha.jobset.sigs.k8s.io/namespaced-job": f"ns_{name}"}
        assert spec["tolerations"] == [
            own,
            {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "operator": "Exists", "effect": "NoSchedule"},
        ]
        assert "affinity" not in spec
        assert job["metadata"]["annotations"][NODE_SELECTOR] == "true"
        assert job["spec"]["template"]["metadata"]["annotations"][NODE_SELECTOR] == "true"


def test_node_selector_is_read_at_the_level_of_the_topology() -> None:
    jobs = expand(rjob("a", annotations={EXCLUSIVE: RACK}), annotations={EXCLUSIVE: ZONE, NODE_SELECTOR: "true"})
    spec = spec_of(jobs["t-a-0"])
    assert spec["affinity"] == affinity_terms("t-a-0", RACK)
    assert "nodeSelector" not in spec
    assert NODE_SELECTOR not in jobs["t-a-0"]["spec"]["template"]["metadata"]["annotations"]
    jobs = expand(rjob("a", annotations={EXCLUSIVE: RACK, NODE_SELECTOR: ""}))
    assert spec_of(jobs["t-a-0"])["nodeSelector"] == {"alpha.jobset.sigs.k8s.io/namespaced-job": "ns_t-a-0"}


def test_without_the_annotation_nothing_changes() -> None:
    jobs = expand(rjob("a"), annotations={NODE_SELECTOR: "true"})
    for job in jobs.values():
        spec = spec_of(job)
        assert "affinity" not in spec
        assert "nodeSelector" not in spec
        assert EXCLUSIVE not in job["spec"]["template"]["metadata"]["annotations"]
