"""Admission of a TrainJob (or an OptimizationJob's template) whose runtime the caches have not seen
yet: the webhook reads it from the apiserver before it refuses the job as naming a missing runtime. A
runtime created a moment before its first job (an install script, upstream's e2e setup) is not in the
cache until the watch brings it."""

from __future__ import annotations

import copy
import dataclasses

from tests.kube_double import RecordingKube
from tests.webhook.test_admission import RUNTIME, facts, tj
from tests.webhook.test_optimization import optj
from trainer.framework.json_codec import JSON
from trainer.webhook.server import WebhookServer


def uncached() -> WebhookServer:
    """A webhook whose caches hold no runtime at all, over an apiserver double."""
    nothing = dataclasses.replace(facts(), runtime=lambda kind, name, ns: None)
    return WebhookServer(RecordingKube(), None, nothing)  # type: ignore[arg-type]  # review() reads no settings


def stored_runtime() -> JSON:
    runtime = copy.deepcopy(RUNTIME)
    runtime["metadata"] = {"name": "torch-distributed"}
    return runtime


async def review(server: WebhookServer, path: str, obj: JSON) -> JSON:
    request = {"uid": "u", "operation": "CREATE", "namespace": "ns", "object": obj}
    response: JSON = (await server.review(path, request))["response"]
    return response


async def test_a_runtime_the_cache_has_not_seen_is_read_from_the_apiserver() -> None:
    server = uncached()
    missing = await review(server, "/validate-trainjob", tj())
    assert missing["allowed"] is False
    assert "ClusterTrainingRuntime 'torch-distributed' not found" in missing["status"]["message"]
    server.kube.put(stored_runtime())  # type: ignore[attr-defined]  # the double's own
    assert (await review(server, "/validate-trainjob", tj()))["allowed"] is True


async def test_an_optimizationjobs_template_runtime_is_read_the_same_way() -> None:
    server = uncached()
    template = {"spec": {"runtimeRef": {"name": "torch-distributed"}}}
    assert (await review(server, "/validate-optimizationjob", optj(template=template)))["allowed"] is False
    server.kube.put(stored_runtime())  # type: ignore[attr-defined]
    assert (await review(server, "/validate-optimizationjob", optj(template=template)))["allowed"] is True


async def test_a_namespaced_runtime_is_read_in_the_jobs_namespace_only() -> None:
    server = uncached()
    runtime = {**stored_runtime(), "kind": "TrainingRuntime", "metadata": {"name": "mine", "namespace": "other"}}
    server.kube.put(runtime)  # type: ignore[attr-defined]
    ref = {"name": "mine", "kind": "TrainingRuntime"}
    refused = await review(server, "/validate-trainjob", {**tj(), "spec": {"runtimeRef": ref}})
    assert refused["allowed"] is False
    assert "TrainingRuntime 'mine' not found in namespace 'ns'" in refused["status"]["message"]
