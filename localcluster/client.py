"""A thin client over :class:`trainer.framework.kube.client.Kube` for whoever plays the user of a local
cluster (the end-to-end tests, the demo, the benchmarks): apply as a user would, read TrainJobs and
their children, and wait for conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from localcluster.cluster import LocalCluster
from trainer.api.kinds import EVENTS, JOBS, NAMESPACES, PODS, SERVICE_ACCOUNTS, SERVICES, TRAINJOBS, resource_of
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client.types import trainjob_status
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube

T = TypeVar("T")


async def wait_for(
    probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 60.0, interval: float = 0.25
) -> T:
    """Call ``probe`` until it returns something truthy; raise ``AssertionError`` naming ``what``
    (and the last value seen) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {last!r}")


def condition(obj: JSON | None, type_: str) -> JSON | None:
    """The condition of ``type_`` in ``obj.status.conditions``, or None."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


class Client:
    """What the tests, the demo and the benchmarks need from the apiserver."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    @classmethod
    async def connect(cls, cluster: LocalCluster | Any) -> Client:
        return cls(await Kube.connect(str(cluster.kubeconfig)))

    async def close(self) -> None:
        await self.kube.close()

    async def apply(self, obj: JSON, namespace: str | None = None) -> JSON:
        """Server-side apply as field manager ``e2e``, the user's (the end-to-end tests apply as it too)."""
        if namespace and resource_of(obj).namespaced:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
        return await self.kube.apply(obj, "e2e")

    async def apply_file(self, path: Path, namespace: str | None = None) -> list[JSON]:
        return [await self.apply(doc, namespace) for doc in yaml.safe_load_all(path.read_text()) if doc]

    async def create_namespace(self, name: str) -> None:
        await self.kube.create(NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    async def delete_namespace(self, name: str) -> None:
        await self.kube.delete(NAMESPACES, None, name)

    async def trainjob(self, ns: str, name: str) -> JSON | None:
        return await self.kube.get_or_none(TRAINJOBS, ns, name)

    async def jobs(self, ns: str, trainjob: str) -> list[JSON]:
        items, _ = await self.kube.list(JOBS, ns, f"jobset.sigs.k8s.io/jobset-name={trainjob}")
        return sorted(items, key=lambda j: j["metadata"]["name"])

    async def pods(self, ns: str, selector: str) -> list[JSON]:
        items, _ = await self.kube.list(PODS, ns, selector)
        return sorted(items, key=lambda p: p["metadata"]["name"])

    async def pod_token(self, pod: JSON, audience: str) -> str:
        """A one-hour token of ``pod``'s ServiceAccount bound to the pod, for ``audience``: a TokenRequest,
        as the kubelet makes for a projected ``serviceAccountToken`` volume (KWOK pods run no kubelet)."""
        meta = pod["metadata"]
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience],
                "expirationSeconds": 3600,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
            },
        }
        path = SERVICE_ACCOUNTS.path(meta["namespace"], pod["spec"]["serviceAccountName"], "token")
        answer = await self.kube.request("POST", path, body=request)
        return str(answer["status"]["token"])

    async def service(self, ns: str, name: str) -> JSON | None:
        return await self.kube.get_or_none(SERVICES, ns, name)

    async def events(self, ns: str, name: str) -> list[JSON]:
        items, _ = await self.kube.list(EVENTS, ns)
        return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]

    async def wait_events(
        self, ns: str, name: str, accept: Callable[[list[JSON]], bool], what: str, timeout: float = 15
    ) -> list[JSON]:
        """The events of ``name`` (:meth:`events`) once ``accept`` holds for them: the operator writes
        an Event in the background, a moment after the status that records it. Raises
        ``AssertionError`` naming ``what`` after ``timeout`` seconds."""

        async def probe() -> list[JSON] | None:
            events = await self.events(ns, name)
            return events if accept(events) else None

        return await wait_for(probe, what, timeout)

    async def wait_condition(self, ns: str, name: str, type_: str, status: str = "True", timeout: float = 60) -> JSON:
        """Wait until the TrainJob has condition ``type_`` with ``status``; returns the TrainJob."""

        async def probe() -> JSON | None:
            tj = await self.trainjob(ns, name)
            c = condition(tj, type_)
            return tj if c and c.get("status") == status else None

        return await wait_for(probe, f"TrainJob {ns}/{name} condition {type_}={status}", timeout)

    async def wait_running(self, ns: str, name: str, timeout: float = 60) -> JSON:
        """Wait until the TrainJob runs as the SDK reads it (:func:`trainer.client.types.trainjob_status`:
        every trainer Job ready, with or without a ``Running`` condition); returns the TrainJob."""

        async def probe() -> JSON | None:
            tj = await self.trainjob(ns, name)
            return tj if tj and trainjob_status(TrainJob.model_validate(tj)) == "Running" else None

        return await wait_for(probe, f"TrainJob {ns}/{name} Running", timeout)

    async def wait_gone(self, ns: str, name: str, type_: str, timeout: float = 60) -> JSON:
        """Wait until the TrainJob has no condition ``type_``; returns the TrainJob."""

        async def probe() -> JSON | None:
            tj = await self.trainjob(ns, name)
            return tj if tj and condition(tj, type_) is None else None

        return await wait_for(probe, f"TrainJob {ns}/{name} without condition {type_}", timeout)
