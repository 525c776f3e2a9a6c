"""Helpers of the end-to-end tests: a thin client over :class:`trainer.framework.kube.client.Kube` and waits."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml

from api.kinds import (
    EVENTS,
    JOBS,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    PODS,
    SERVICES,
    TRAINJOBS,
    VALIDATING_WEBHOOKS,
    resource_of,
)
from api.trainer_v1alpha1 import TrainJob
from e2e.cluster import LocalCluster
from trainer.client.types import trainjob_status
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.webhook.server import CONFIG_NAME

ROOT = Path(__file__).resolve().parent.parent
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


async def kueue_sees_runtime(
    kube: Kube, ns: str, runtime: str, queue: str, timeout: float = 30.0, kind: str = "TrainingRuntime"
) -> None:
    """Wait until Kueue's TrainJob webhook admits a job of ``runtime`` (of ``kind``, or a
    ``ClusterTrainingRuntime``) queued to ``queue`` in ``ns``
    (a dry-run create through the admission chain): it looks the runtime up in its informer cache,
    and refuses "runtime '<name>' not found" until that has the runtime just applied. Raises
    ``AssertionError`` after ``timeout`` seconds, :class:`trainer.framework.kube.client.ApiError` on any
    other refusal."""
    probe = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainJob",
        "metadata": {"generateName": "kueue-probe-", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"runtimeRef": {"name": runtime, "kind": kind}, "suspend": True},
    }

    async def admitted() -> bool:
        try:
            await kube.request("POST", TRAINJOBS.path(ns), {"dryRun": "All"}, body=probe)
        except ApiError as e:
            if f"runtime '{runtime}' not found" not in e.message:
                raise
            return False
        return True

    await wait_for(admitted, f"Kueue's webhook to know runtime {runtime} in {ns}", timeout)


def condition(obj: JSON | None, type_: str) -> JSON | None:
    """The condition of ``type_`` in ``obj.status.conditions``, or None."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


class Client:
    """What the tests need from the apiserver."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    @classmethod
    async def connect(cls, cluster: LocalCluster | Any) -> Client:
        return cls(await Kube.connect(str(cluster.kubeconfig)))

    async def close(self) -> None:
        await self.kube.close()

    async def apply(self, obj: JSON, namespace: str | None = None) -> JSON:
        """Server-side apply as field manager ``e2e`` (a test plays the user)."""
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

    async def service(self, ns: str, name: str) -> JSON | None:
        return await self.kube.get_or_none(SERVICES, ns, name)

    async def events(self, ns: str, name: str) -> list[JSON]:
        items, _ = await self.kube.list(EVENTS, ns)
        return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]

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


def log_events(path: Path, offset: int = 0) -> list[JSON]:
    """The JSON log lines of an operator from byte ``offset``."""
    if not path.exists():
        return []
    with path.open("rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    out = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def nested(levels: int) -> JSON:
    """``{"x": {"x": ... {}}}``: ``levels`` objects, each inside the one before (built without recursion)."""
    root: JSON = {}
    node = root
    for _ in range(levels - 1):
        node["x"] = {}
        node = node["x"]
    return root


@contextlib.contextmanager
def deep_json() -> Iterator[None]:
    """Let this process encode JSON nested about a thousand levels (a tenant's object, as kubectl
    sends it): orjson stops at 255, and the standard library at the interpreter's recursion limit."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


async def webhook_ca_patched(kube: Kube) -> bool:
    """Whether both webhook configurations exist and every webhook of theirs carries a caBundle (the
    operator patched them)."""
    for res in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
        config = await kube.get_or_none(res, None, CONFIG_NAME)
        if config is None or not all(h.get("clientConfig", {}).get("caBundle") for h in config.get("webhooks") or []):
            return False
    return True
