"""The asyncio client: :class:`AsyncTrainerClient` for TrainJobs and their runtimes, in the kubeflow
SDK's shapes, and :class:`AsyncJobClient` for the :mod:`api` objects of any training-job kind
(TrainJob, MPIJob).

Method names, positional arguments and semantics follow the kubeflow SDK's ``TrainerClient``
(``kubeflow/trainer/api/trainer_client.py``, ``backends/kubernetes/backend.py``, kubeflow 0.5.0):
``list_runtimes``, ``get_runtime``, ``get_runtime_packages``, ``train``, ``list_jobs``, ``get_job``,
``get_job_logs``, ``get_job_events``, ``wait_for_job_status``, ``delete_job``. Differences: they
are coroutines (``get_job_logs`` an async generator); waits follow a watch on the object instead of
polling; logs wait for the pod to start instead of returning nothing (kubeflow/sdk#182), and say
why when the apiserver cannot give them.

All HTTP goes through :class:`trainer.framework.kube.client.Kube`; the two streams it has no verb for (a watch
with a field selector, and pod logs) use its ``api.call_api`` the way :meth:`Kube.watch` does.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import random
import re
import string
import uuid
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Collection, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, cast

import aiohttp
from kubernetes_asyncio import config

from api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    EVENTS,
    JOBS,
    KUEUE_WORKLOADS,
    PODS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    VOLCANO_PODGROUPS,
    Resource,
)
from api.labels import KUEUE_QUEUE_LABEL
from api.snapshot import runtime_of_snapshot, snapshot_name
from api.trainer_v1alpha1 import (
    FRAMEWORK_LABEL,
    ClusterTrainingRuntime,
    TrainingRuntime,
    TrainJob,
    runtime_from_dict,
)
from trainer.client.errors import (
    AlreadyExistsError,
    JobFailedError,
    JobFinishedError,
    LogsUnavailableError,
    NotFoundError,
    UnknownStepError,
    WaitTimeoutError,
)
from trainer.client.manifest import (
    Manifest,
    Source,
    load_manifests,
    load_trainjob,
    manifest_resource,
    require_names,
    wire_dict,
    with_namespace,
)
from trainer.client.multicluster import JOB_UID_LABEL, WorkloadInfo, for_multicluster, owned_workload
from trainer.client.shapes import Runtime, runtime_of, trainjob_of
from trainer.client.shapes import TrainJob as Shape
from trainer.client.trainers import (
    BuiltinTrainer,
    CustomTrainer,
    CustomTrainerContainer,
    Initializer,
    Option,
    RuntimeChoice,
    builtin_trainer_spec,
    initializer_spec,
    trainer_spec,
)
from trainer.client.types import (
    COMPLETE,
    FAILED,
    TRAINJOB,
    Event,
    J,
    JobKind,
    in_queue,
    pod_selector,
    related_events,
    runtime_framework,
)
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.framework.meta import meta

log = logging.getLogger(__name__)
FIELD_MANAGER = "trainer-client"
"""Field manager of the client's server-side applies."""
DEFAULT_WAIT_TIMEOUT = 600.0
DEFAULT_POD_TIMEOUT = 300.0
DEFAULT_POLLING_INTERVAL = 2
"""The kubeflow SDK's default ``polling_interval`` (accepted, unused: waits follow a watch)."""
WATCH_SECONDS = 240
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


C = TypeVar("C")
M = TypeVar("M", bound=Manifest)


def legacy_callbacks(
    polling_interval: float | Iterable[C], callbacks: Iterable[C] | None, stacklevel: int = 3
) -> tuple[float, Iterable[C] | None]:
    """``(polling_interval, callbacks)`` of a ``wait_for_job_status`` call: callbacks passed as the
    4th positional argument (this client's order before the kubeflow SDK's) are taken as
    ``callbacks``, with a ``DeprecationWarning``."""
    if isinstance(polling_interval, int | float):
        return polling_interval, callbacks
    warnings.warn(
        "wait_for_job_status(name, status, timeout, callbacks) is deprecated: the 4th argument is "
        "polling_interval, as in the kubeflow SDK; pass callbacks=",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return DEFAULT_POLLING_INTERVAL, polling_interval


def legacy_node(follow: bool | int, node: int | None, stacklevel: int = 3) -> tuple[bool, int | None]:
    """``(follow, node)`` of a ``get_job_logs`` call: an integer (not a bool) as the 3rd positional
    argument is a node index (this client's order before the kubeflow SDK's), taken with a
    ``DeprecationWarning``."""
    if isinstance(follow, bool):
        return follow, node
    warnings.warn(
        "get_job_logs(name, step, node) is deprecated: the 3rd argument is follow, as in the kubeflow SDK; pass node=",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return False, follow


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's ``context`` (default: the current one), else the in-cluster
    service account's, else ``default`` (as the kubeflow SDK's ``get_default_target_namespace``)."""
    try:
        contexts, current = config.list_kube_config_contexts(kubeconfig)
        if context:
            current = next((c for c in contexts or [] if c.get("name") == context), None)
        namespace = ((current or {}).get("context") or {}).get("namespace")
        if namespace:
            return str(namespace)
    except (config.ConfigException, OSError, KeyError, TypeError, ValueError):
        pass
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def resolve_step(step: str | None, node: int | None, steps: Collection[str], default: str) -> tuple[str, int]:
    """``(step, node)`` from a step name and node index.

    The SDK names steps ``node-0``, ``node-1``: when ``node`` is None and ``step`` ends in
    ``-<n>`` and is not itself a step of the job, it is read as step ``<name>`` node ``<n>``.
    """
    name = step or default
    if node is not None:
        return name, node
    match = re.fullmatch(r"(.+)-(\d+)", name)
    if match and name not in steps and (not steps or match.group(1) in steps):
        return match.group(1), int(match.group(2))
    return name, 0


def pick_container(pod: JSON, step: str, default: str) -> str:
    """The container whose logs a step means: the only one, else the one named after the step
    (initializers), else ``default`` (``node``), else the first."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if len(names) == 1:
        return names[0]
    for candidate in (step, default):
        if candidate in names:
            return candidate
    return names[0] if names else default


def _started(pod: JSON) -> bool:
    return ((pod.get("status") or {}).get("phase") or "Pending") != "Pending"


def _age_key(pod: JSON) -> tuple[str, str]:
    """Sorts pods oldest first: by creation time, then name."""
    return (meta(pod).creation_timestamp or "", str(pod["metadata"]["name"]))


def _status_detail(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return " ".join(text.split())
    return " ".join(str(body.get("message", text) if isinstance(body, dict) else text).split())


async def watch_objects(
    kube: Kube,
    res: Resource,
    namespace: str | None,
    resource_version: str,
    *,
    field_selector: str | None = None,
    label_selector: str | None = None,
    timeout_seconds: int = WATCH_SECONDS,
) -> AsyncIterator[tuple[str, JSON]]:
    """Stream ``(type, object)`` watch events of ``res`` from ``resource_version`` (bookmarks
    included), optionally narrowed by field and label selectors: :meth:`Kube.watch`. Ends when the
    server closes the stream. Raises :class:`ApiError` (410 Gone: the caller lists again)."""
    async for event in kube.watch(
        res,
        namespace,
        resource_version,
        label_selector=label_selector,
        timeout_seconds=timeout_seconds,
        field_selector=field_selector,
    ):
        yield event


async def observe(
    kube: Kube,
    res: Resource,
    namespace: str | None,
    *,
    field_selector: str | None = None,
    label_selector: str | None = None,
) -> AsyncIterator[dict[str, JSON]]:
    """The matching objects by name: first as listed, then again after every change a watch
    reports. Never ends by itself (the caller stops iterating); lists again when a watch ends or
    its resourceVersion is gone (410). Raises :class:`ApiError` on other failures."""
    while True:
        data = await kube.request(
            "GET", res.path(namespace), {"fieldSelector": field_selector, "labelSelector": label_selector}
        )
        items = {str(i["metadata"]["name"]): i for i in data.get("items") or []}
        version = str((data.get("metadata") or {}).get("resourceVersion", ""))
        yield items
        try:
            async for type_, obj in watch_objects(
                kube, res, namespace, version, field_selector=field_selector, label_selector=label_selector
            ):
                if type_ == "BOOKMARK":
                    continue
                name = str(meta(obj).name)
                if type_ == "DELETED":
                    items.pop(name, None)
                else:
                    items[name] = obj
                yield items
        except ApiError as e:
            if not e.gone:
                raise


async def delete_object(
    kube: Kube, res: Resource, namespace: str | None, name: str, *, wait: bool = False, timeout: float = 60.0
) -> None:
    """Delete one object (its dependents go by background cascading deletion); ``namespace`` is
    ignored for a cluster-scoped ``res``. With ``wait``, return only once it is gone. Raises
    :class:`NotFoundError` when it does not exist, :class:`WaitTimeoutError` when ``wait`` and it is
    still there after ``timeout`` seconds, :class:`ApiError`."""
    namespace = namespace if res.namespaced else None
    if not await kube.delete(res, namespace, name):
        raise NotFoundError(res.kind, namespace, name)
    if not wait:
        return
    try:
        async with asyncio.timeout(timeout) as scope:
            async for items in observe(kube, res, namespace, field_selector=f"metadata.name={name}"):
                if name not in items:
                    return
    except TimeoutError:
        if not scope.expired():
            raise
        where = f"{namespace}/{name}" if namespace else name
        raise WaitTimeoutError(f"{res.kind} {where} to be deleted", timeout, "still there") from None


class AsyncJobClient(Generic[J]):
    """Jobs of one :class:`JobKind` in one namespace.

    ``kube`` is the apiserver connection; it is closed by :meth:`close` only when ``owns_kube``.
    """

    def __init__(self, kube: Kube, namespace: str, kind: JobKind[J], owns_kube: bool = False) -> None:
        self.kube = kube
        self.namespace = namespace
        self.kind = kind
        self._owns_kube = owns_kube

    async def close(self) -> None:
        """Close the connection if this client opened it."""
        if self._owns_kube:
            await self.kube.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _parse(self, obj: JSON) -> J:
        return self.kind.model.model_validate(obj)

    def _what(self, name: str) -> str:
        return f"{self.kind.resource.kind} {self.namespace}/{name}"

    async def get_job(self, name: str) -> J:
        """The job ``name``. Raises :class:`NotFoundError`, or :class:`ApiError` on other failures."""
        obj = await self.kube.get_or_none(self.kind.resource, self.namespace, name)
        if obj is None:
            raise NotFoundError(self.kind.resource.kind, self.namespace, name)
        return self._parse(obj)

    async def list_jobs(
        self, *, label_selector: str | None = None, queue: str | None = None, all_namespaces: bool = False
    ) -> list[J]:
        """The jobs in the namespace (or every namespace), oldest first, optionally only those
        matching ``label_selector`` and naming ``queue`` (Kueue label ``kueue.x-k8s.io/queue-name``
        or Volcano annotation ``scheduling.volcano.sh/queue-name``)."""
        items, _ = await self.kube.list(self.kind.resource, None if all_namespaces else self.namespace, label_selector)
        jobs = [self._parse(i) for i in items]
        if queue is not None:
            jobs = [j for j in jobs if in_queue(j, queue)]
        return sorted(jobs, key=_creation_key)

    async def wait_for_job_status(
        self,
        name: str,
        status: str | Collection[str] = frozenset({COMPLETE}),
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        polling_interval: float | Iterable[Callable[[J], None]] = DEFAULT_POLLING_INTERVAL,
        callbacks: Iterable[Callable[[J], None]] | None = None,
    ) -> J:
        """Wait until the job's status (``kind.status_of``) is one of ``status``; returns the job.

        Arguments are positioned as in the kubeflow SDK's ``wait_for_job_status`` (``name, status,
        timeout, polling_interval, callbacks``). The wait follows a watch on the job, so it returns as
        soon as the apiserver has the change; ``polling_interval`` (seconds, > 0) is accepted for
        compatibility and changes nothing. Every version of the job seen is passed to each of
        ``callbacks``. Callbacks passed as the 4th positional argument (this client's order before)
        still work, with a ``DeprecationWarning``.

        Raises ``ValueError`` for a status the kind does not have, a timeout <= 0 or a
        polling_interval <= 0;
        :class:`JobFailedError` when the job reaches ``Failed`` and ``Failed`` is not wanted;
        :class:`JobFinishedError` when it is ``Complete`` and that is not wanted (it will not change
        any more); :class:`WaitTimeoutError` after ``timeout`` seconds; :class:`NotFoundError` when
        the job does not exist or is deleted meanwhile.
        """
        polling_interval, callbacks = legacy_callbacks(polling_interval, callbacks)
        hooks = list(callbacks or [])

        async def call_hooks(job: J) -> None:
            for hook in hooks:
                hook(job)

        return await self._wait_for(name, status, timeout, polling_interval, call_hooks)

    async def _wait_for(
        self,
        name: str,
        status: str | Collection[str],
        timeout: float,
        polling_interval: float,
        on_change: Callable[[J], Awaitable[None]],
    ) -> J:
        """:meth:`wait_for_job_status` with an awaitable called on every version of the job."""
        wanted = {status} if isinstance(status, str) else set(status)
        unknown = wanted - set(self.kind.statuses)
        if not wanted or unknown:
            raise ValueError(f"status must be a non-empty subset of {', '.join(self.kind.statuses)}; got {wanted}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if polling_interval <= 0:
            raise ValueError(f"polling_interval must be positive, got {polling_interval}")
        last: list[str] = []

        async def run() -> J:
            async for items in observe(
                self.kube, self.kind.resource, self.namespace, field_selector=f"metadata.name={name}"
            ):
                obj = items.get(name)
                if obj is None:
                    raise NotFoundError(self.kind.resource.kind, self.namespace, name)
                job = self._parse(obj)
                current = self.kind.status_of(job)
                last[:] = [current]
                await on_change(job)
                if current in wanted:
                    return job
                if current == FAILED:
                    raise JobFailedError(self.kind.resource.kind, self.namespace, name, self.kind.failure_of(job))
                if current == COMPLETE:
                    raise JobFinishedError(self.kind.resource.kind, self.namespace, name, current, wanted)
            raise NotFoundError(self.kind.resource.kind, self.namespace, name)  # observe never ends

        try:
            async with asyncio.timeout(timeout) as scope:
                return await run()
        except TimeoutError:
            if not scope.expired():
                raise
            what = f"{self._what(name)} to be {' or '.join(sorted(wanted))}"
            raise WaitTimeoutError(what, timeout, last[0] if last else None) from None

    async def wait_for_pod(
        self, name: str, step: str | None = None, node: int | None = None, timeout: float = DEFAULT_POD_TIMEOUT
    ) -> JSON:
        """The newest started (not ``Pending``) pod of ``step`` (default ``kind.default_step``)
        node ``node`` (default 0; ``step`` may be given as ``node-1`` like the SDK) of job ``name``,
        waiting for it to exist and start. Raises what :meth:`wait_for_pods` raises."""
        return (await self.wait_for_pods(name, step, node, timeout))[0]

    def _node_of(self, pod: JSON) -> tuple[int, int]:
        """``(Job index, node index)`` of a pod from its labels; 0 for a label it lacks (the one pod
        of a Job that is not Indexed, such as an MPIJob's launcher)."""
        labels = meta(pod).labels
        group = labels.get(self.kind.group_label, "0") if self.kind.group_label else "0"
        index = labels.get(self.kind.node_label, "0")
        return (int(group) if group.isdigit() else 0, int(index) if index.isdigit() else 0)

    async def wait_for_pods(
        self,
        name: str,
        step: str | None = None,
        node: int | None = None,
        timeout: float = DEFAULT_POD_TIMEOUT,
        *,
        all_nodes: bool = False,
    ) -> list[JSON]:
        """The newest started (not ``Pending``) pod of each node of ``step`` (default
        ``kind.default_step``) of job ``name``, ordered by Job and node index: of node ``node``
        only (default 0; ``step`` may be given as ``node-1`` like the SDK), or, with ``all_nodes``,
        of every node that has one. Waits until at least one such pod started.

        Raises :class:`NotFoundError` when the job does not exist, or is finished and has no such
        pod; :class:`UnknownStepError` for a step the job does not have; :class:`WaitTimeoutError`
        when no such pod started within ``timeout`` seconds.
        """
        job = await self.get_job(name)
        steps = self.kind.steps_of(job) or await self._frozen_steps(name)
        step_name, index = resolve_step(step, node, steps, self.kind.default_step)
        if steps and step_name not in steps:
            raise UnknownStepError(self._what(name), step_name, steps)
        selector = pod_selector(self.kind, name, step_name)
        finished = self.kind.status_of(job) in (COMPLETE, FAILED)
        which = f"step {step_name!r}" if all_nodes else f"step {step_name!r} node {index}"
        last: list[str] = []
        try:
            async with asyncio.timeout(timeout) as scope:
                async for pods in observe(self.kube, PODS, self.namespace, label_selector=selector):
                    mine = [p for p in pods.values() if all_nodes or self._node_of(p)[1] == index]
                    newest: dict[tuple[int, int], JSON] = {}
                    for pod in sorted(filter(_started, mine), key=_age_key):
                        newest[self._node_of(pod)] = pod
                    if newest:
                        return [newest[k] for k in sorted(newest)]
                    if not mine and finished:
                        raise NotFoundError("Pod", self.namespace, f"of {which} of {name}")
                    finished = False  # only the first list can tell; later the pods may be on their way
                    names = sorted(str(p["metadata"]["name"]) for p in mine)
                    last[:] = [", ".join(f"pod {n} Pending" for n in names) or "no pod yet"]
        except TimeoutError:
            if not scope.expired():
                raise
            what = f"a started pod of {which} of {self._what(name)}"
            raise WaitTimeoutError(what, timeout, last[0] if last else None) from None
        raise NotFoundError("Pod", self.namespace, selector)  # observe never ends

    async def read_pod_logs(
        self,
        pod: JSON,
        container: str,
        follow: bool = False,
        *,
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        previous: bool = False,
    ) -> AsyncGenerator[str, None]:
        """The lines of one container's log (``GET .../pods/<pod>/log``), streamed as they come
        when ``follow``; only the last ``tail_lines``, only those of the last ``since_seconds``, or
        those of the previous instance of the container (``previous``), as ``kubectl logs``. Raises
        :class:`LogsUnavailableError` when the apiserver answers with an error, e.g. for a pod on a
        node without a kubelet (KWOK): ``500 Get "https://<node>:<port>/containerLogs/...": dial tcp ...``."""
        m = meta(pod)
        namespace, name = str(m.namespace or self.namespace), str(m.data["name"])
        query = [("container", container)]
        if follow:
            query.append(("follow", "true"))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        if since_seconds is not None:
            query.append(("sinceSeconds", str(since_seconds)))
        if previous:
            query.append(("previous", "true"))
        resp = await self.kube.api.call_api(
            PODS.path(namespace, name, "log"),
            "GET",
            query_params=query,
            header_params={"Accept": "*/*"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(sock_connect=30) if follow else aiohttp.ClientTimeout(total=300),
        )
        try:
            if resp.status >= 300:
                node = (pod.get("spec") or {}).get("nodeName")
                detail = _status_detail(await resp.text())
                raise LogsUnavailableError(namespace, name, container, node, resp.status, detail)
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                yield line.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")
        finally:
            resp.release()

    async def get_job_logs(
        self,
        name: str,
        step: str | None = None,
        follow: bool | int = False,
        *,
        node: int | None = None,
        container: str | None = None,
        pod_timeout: float = DEFAULT_POD_TIMEOUT,
    ) -> AsyncGenerator[str, None]:
        """Log lines of one node of one step: the pod of replicated job ``step`` (default
        ``node``) with completion index ``node`` (default 0; ``step`` may say it as the kubeflow
        SDK does, ``node-1``). ``follow`` streams until the container ends. ``container`` defaults
        to the pod's only container, else the one named after the step, else ``node``.

        Positional arguments are the kubeflow SDK's (``name, step, follow``); an integer (not a
        bool) as ``follow`` is read as ``node``, this client's order before, with a
        ``DeprecationWarning``.

        Waits up to ``pod_timeout`` seconds for the pod to exist and start (kubeflow/sdk#182)
        instead of yielding nothing. Raises what :meth:`wait_for_pod` and :meth:`read_pod_logs`
        raise.
        """
        follow, node = legacy_node(follow, node)
        pod = await self.wait_for_pod(name, step, node, pod_timeout)
        step_name = str(meta(pod).labels.get(self.kind.step_label, step or ""))
        chosen = container or pick_container(pod, step_name, self.kind.default_container)
        async for line in self.read_pod_logs(pod, chosen, follow):
            yield line

    async def get_job_events(self, name: str) -> list[Event]:
        """Events about the job and its current child Jobs, Pods and PodGroup, oldest first (not
        those of an earlier job of the same name). Raises :class:`ApiError` on failures."""
        selector = pod_selector(self.kind, name)
        job = await self.kube.get_or_none(self.kind.resource, self.namespace, name)
        jobs, _ = await self.kube.list(JOBS, self.namespace, selector)
        pods, _ = await self.kube.list(PODS, self.namespace, selector)
        events, _ = await self.kube.list(EVENTS, self.namespace)
        uid = str((job or {}).get("metadata", {}).get("uid") or "") or None
        workload = await self._workload(uid) if uid else None
        objects: dict[tuple[str, str], str | None] = {(self.kind.resource.kind, name): uid, ("PodGroup", name): None}
        for kind, items in (("Job", jobs), ("Pod", pods), ("Workload", [workload] if workload else [])):
            for item in items:
                objects[(kind, str(item["metadata"]["name"]))] = item["metadata"].get("uid")
        return related_events(events, objects)

    async def _frozen_steps(self, name: str) -> list[str]:
        """The replicated jobs of TrainJob ``name`` from the runtime snapshot the operator writes before
        any child (``<name>-runtime-snapshot``), for when ``jobsStatus`` does not list them yet (the
        operator writes no status before the Job controller counted something); empty when there is no
        snapshot (yet) or it cannot be read."""
        if self.kind.resource != TRAINJOBS:
            return []
        try:
            snapshot = await self.kube.get_or_none(CONFIGMAPS, self.namespace, snapshot_name(name))
        except ApiError:
            return []
        runtime = runtime_of_snapshot(snapshot) if snapshot is not None else None
        template = (((runtime or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        return [str(r.get("name")) for r in template.get("replicatedJobs") or [] if isinstance(r, dict)]

    async def _get_optional(self, path: str, query: dict[str, str] | None = None) -> JSON | None:
        """``GET path``: the object, or None on 404 (also when the kind's CRD is not installed: the
        apiserver then answers with a plain-text body, which :meth:`Kube.request` cannot decode,
        hence the raw request). Raises :class:`ApiError` on other failures."""
        resp = await self.kube.api.call_api(
            path,
            "GET",
            query_params=list((query or {}).items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=60,
        )
        try:
            text = await resp.text()
        finally:
            resp.release()
        if resp.status == 404:
            return None
        body: Any = json.loads(text) if text.startswith("{") else text
        if resp.status >= 300:
            raise ApiError(resp.status, body)
        return body if isinstance(body, dict) else None

    async def _workload(self, uid: str) -> JSON | None:
        """The Workload object Kueue made for the job of ``uid``, or None (none, or no Kueue)."""
        found = await self._get_optional(
            KUEUE_WORKLOADS.path(self.namespace), {"labelSelector": f"{JOB_UID_LABEL}={uid}"}
        )
        return owned_workload((found or {}).get("items") or [], uid)

    async def get_workload(self, name: str) -> WorkloadInfo | None:
        """The Kueue Workload (``kueue.x-k8s.io/v1beta2``) of job ``name``: its queue, admission,
        admission checks and, on a MultiKueue manager, ``cluster_name``, the worker cluster the job
        was dispatched to. None when Kueue made none (or Kueue's CRDs are not installed). Raises
        :class:`NotFoundError` when the job does not exist, :class:`ApiError` on other failures."""
        job = await self.kube.get_or_none(self.kind.resource, self.namespace, name)
        if job is None:
            raise NotFoundError(self.kind.resource.kind, self.namespace, name)
        workload = await self._workload(str(job["metadata"]["uid"]))
        return WorkloadInfo.from_dict(workload) if workload else None

    async def delete_job(self, name: str, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Delete the job (its children go by background cascading deletion). With ``wait``, return
        only once it is gone. Raises :class:`NotFoundError` when it does not exist,
        :class:`WaitTimeoutError` when ``wait`` and it is still there after ``timeout`` seconds
        (:func:`delete_object`)."""
        await delete_object(self.kube, self.kind.resource, self.namespace, name, wait=wait, timeout=timeout)

    async def get_podgroup(self, name: str) -> JSON | None:
        """The Volcano PodGroup (``scheduling.volcano.sh/v1beta1``) named after the job, or None
        when there is none or Volcano's CRDs are not installed (the apiserver then answers 404 with
        a plain-text body, which :meth:`Kube.request` cannot decode, hence the raw request).
        Raises :class:`ApiError` on other failures."""
        return await self._get_optional(VOLCANO_PODGROUPS.path(self.namespace, name))


def _wire(obj: Manifest, queue: str | None, multicluster: bool) -> JSON:
    """What is sent for ``obj``: :func:`wire_dict`, a TrainJob marked by :func:`_dispatched`."""
    return _dispatched(wire_dict(obj), queue, multicluster) if isinstance(obj, TrainJob) else wire_dict(obj)


def _dispatched(body: JSON, queue: str | None, multicluster: bool) -> JSON:
    """A TrainJob's wire form with the queue label ``queue`` (when given) and, with
    ``multicluster``, marked for MultiKueue (:func:`for_multicluster`)."""
    if multicluster:
        return for_multicluster(body, queue)
    if queue:
        meta = body.get("metadata") or {}
        return {**body, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), KUEUE_QUEUE_LABEL: queue}}}
    return body


def _creation_key(obj: Any) -> tuple[str, str]:
    meta = obj.metadata
    return (meta.creation_timestamp or "", meta.name or "")


RuntimeCache = dict[tuple[str, str], Runtime | None]
"""Runtimes in the kubeflow SDK's shape by ``(kind, name)`` (None: not found), read once per call."""


def _train_packages() -> None:
    """Prints what :meth:`AsyncTrainerClient.get_runtime_packages` shows (run in the runtime's image)."""
    import shutil
    import subprocess
    import sys

    print(f"Python: {sys.version}")
    if shutil.which("pip"):
        print(subprocess.run(["pip", "list"], capture_output=True, text=True).stdout)
    else:
        print("Unable to get installed packages: pip command not found")
    if shutil.which("nvidia-smi"):
        print("Available GPUs on the single training node")
        print(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)


class AsyncTrainerClient:
    """TrainJobs (``trainer.kubeflow.org/v1alpha1``) and their runtimes in one namespace: the kubeflow
    SDK's ``TrainerClient`` (``kubeflow/trainer/api/trainer_client.py``, kubeflow 0.5.0) as
    coroutines, with its method names, positional arguments and return shapes
    (:mod:`trainer.client.shapes`: ``TrainJob``, ``Runtime``; :class:`Event`), plus manifests
    (:meth:`create_job`, :meth:`apply`), queues, :meth:`get_workload` and :meth:`get_podgroup`.
    The :mod:`api` objects a shape was read from are its ``trainjob``/``object`` attribute;
    :class:`AsyncJobClient` gives them directly, for any job kind.

    Create with :meth:`connect` (or around an existing :class:`Kube`); use as an async context
    manager or call :meth:`close`.
    """

    def __init__(self, kube: Kube, namespace: str | None = None, owns_kube: bool = False) -> None:
        self.kube = kube
        self._jobs = AsyncJobClient(kube, namespace or "default", TRAINJOB, owns_kube)
        self.namespace_given = namespace is not None
        """Whether the namespace was given (it then wins over a manifest's own), not defaulted."""

    @property
    def namespace(self) -> str:
        """The namespace the client works in."""
        return self._jobs.namespace

    @classmethod
    async def connect(
        cls, kubeconfig: str | None = None, namespace: str | None = None, context: str | None = None
    ) -> Self:
        """Connect with ``kubeconfig`` (else ``$KUBECONFIG``/``~/.kube/config``, else in-cluster)
        and its ``context`` (default: the current one); ``namespace`` defaults to
        :func:`default_namespace`. Raises ``kubernetes_asyncio.config.ConfigException`` or
        ``FileNotFoundError`` when no configuration can be loaded (``FileNotFoundError`` naming
        ``kubeconfig`` when that file does not exist)."""
        if kubeconfig and not Path(kubeconfig).expanduser().is_file():
            raise FileNotFoundError(errno.ENOENT, "kubeconfig not found", kubeconfig)
        kube = await Kube.connect(kubeconfig, context)
        client = cls(kube, namespace or default_namespace(kubeconfig, context), owns_kube=True)
        client.namespace_given = namespace is not None
        return client

    async def close(self) -> None:
        """Close the connection if this client opened it."""
        await self._jobs.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ----------------------------------------------------------------------- runtimes

    async def _runtime_objects(
        self,
        kinds: Iterable[Resource] = (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES),
        *,
        label_selector: str | None = None,
        all_namespaces: bool = False,
    ) -> list[TrainingRuntime | ClusterTrainingRuntime]:
        """Every TrainingRuntime of the namespace (of every namespace with ``all_namespaces``), then
        every ClusterTrainingRuntime, each by namespace and name, of ``kinds`` (those two resources)
        and the label selector: also those without the ``trainer.kubeflow.org/framework`` label, and
        a name present in both scopes twice (``spec.runtimeRef.kind`` picks one); none of a kind
        whose CRD is not installed. Raises :class:`ApiError`."""
        out: list[TrainingRuntime | ClusterTrainingRuntime] = []
        for res in kinds:
            ns = self.namespace if res.namespaced and not all_namespaces else None
            try:
                items, _ = await self.kube.list(res, ns, label_selector)
            except ApiError as e:
                if e.not_found:  # the CRD is not installed
                    continue
                raise
            found = (runtime_from_dict(i) for i in items)
            out += sorted(found, key=lambda r: (r.metadata.namespace or "", r.metadata.name or ""))
        return out

    async def list_runtimes(self) -> list[Runtime]:
        """The runtimes as the kubeflow SDK lists them (:func:`trainer.client.shapes.runtime_of`):
        the namespace's TrainingRuntimes, then the ClusterTrainingRuntimes, each by name; a
        TrainingRuntime hides a ClusterTrainingRuntime of the same name, and a runtime without the
        label ``trainer.kubeflow.org/framework`` is left out (with a logged warning). Raises
        :class:`ApiError`."""
        seen: dict[str, Runtime] = {}
        for obj in await self._runtime_objects():
            name = obj.metadata.name or ""
            if name in seen:
                continue
            if runtime_framework(obj) is None:
                log.warning("runtime %s has no %s label; left out, as the kubeflow SDK does", name, FRAMEWORK_LABEL)
                continue
            seen[name] = runtime_of(obj)
        return list(seen.values())

    async def get_runtime(self, name: str) -> Runtime:
        """The TrainingRuntime ``name`` of the namespace, else the ClusterTrainingRuntime (as the SDK),
        as :func:`trainer.client.shapes.runtime_of` reads it. Raises :class:`NotFoundError` (a
        ``RuntimeError`` too, as the SDK raises) when neither exists."""
        for res, ns in ((TRAINING_RUNTIMES, self.namespace), (CLUSTER_TRAINING_RUNTIMES, None)):
            obj = await self.kube.get_or_none(res, ns, name)
            if obj is not None:
                return runtime_of(runtime_from_dict(obj))
        raise NotFoundError("TrainingRuntime or ClusterTrainingRuntime", None, name)

    async def _runtime_of_kind(self, name: str, kind: str, cache: RuntimeCache) -> Runtime | None:
        """The runtime ``name`` of ``kind`` (``TrainingRuntime`` or ``ClusterTrainingRuntime``) in
        the SDK's shape, None when it does not exist; read once per ``cache``."""
        key = (kind, name)
        if key not in cache:
            res, ns = (
                (TRAINING_RUNTIMES, self.namespace)
                if kind == TrainingRuntime.KIND
                else (CLUSTER_TRAINING_RUNTIMES, None)
            )
            obj = await self.kube.get_or_none(res, ns, name)
            cache[key] = runtime_of(runtime_from_dict(obj)) if obj is not None else None
        return cache[key]

    async def get_runtime_packages(self, runtime: Runtime) -> None:
        """Print the Python version, packages and GPUs of ``runtime``'s image, as the SDK does: runs a
        one-node TrainJob (1 CPU unless the runtime has GPUs), waits for it, prints its logs and
        deletes it. Raises ``ValueError`` for a builtin-trainer runtime; what :meth:`train`,
        :meth:`wait_for_job_status` and :meth:`get_job_logs` raise."""
        if runtime.trainer.trainer_type.value != "CustomTrainer":
            raise ValueError("Cannot get Runtime packages for BuiltinTrainer")
        resources = {"cpu": 1} if runtime.trainer.device != "gpu" else None
        trainer = CustomTrainer(func=_train_packages, num_nodes=1, resources_per_node=resources)
        name = None
        try:
            name = await self.train(runtime, trainer=trainer)
            await self.wait_for_job_status(name)
            print("\n".join([line async for line in self.get_job_logs(name)]))
        finally:
            if name is not None:
                await self.delete_job(name)

    # ----------------------------------------------------------------------- jobs

    async def _shape(self, job: TrainJob, runtimes: RuntimeCache | None = None) -> Shape:
        """``job`` in the kubeflow SDK's shape (:func:`trainer.client.shapes.trainjob_of`): its runtime
        (None when it does not exist; ``runtimes`` caches them) and its pods as steps. Raises
        :class:`ApiError`."""
        ref = job.spec.runtime_ref
        cache = {} if runtimes is None else runtimes
        runtime = await self._runtime_of_kind(ref.name, ref.kind or ClusterTrainingRuntime.KIND, cache)
        pods, _ = await self.kube.list(
            PODS, job.metadata.namespace or self.namespace, pod_selector(TRAINJOB, job.metadata.name or "")
        )
        return trainjob_of(job, runtime, pods)

    async def train(
        self,
        runtime: RuntimeChoice = None,
        initializer: Initializer | None = None,
        trainer: CustomTrainer | CustomTrainerContainer | BuiltinTrainer | None = None,
        options: list[Option] | None = None,
        *,
        ttl_seconds_after_finished: int | None = None,
    ) -> str:
        """Create a TrainJob from a runtime (a name, :class:`Runtime` or :mod:`api` runtime; default
        ``$DEFAULT_TRAINING_RUNTIME``, else ``torch-distributed``), an optional :class:`Initializer`
        and trainer, in the client's namespace; returns its name (``options`` may set it, else a
        letter and 11 hex digits), as the kubeflow SDK's ``train``
        (``kubeflow/trainer/backends/kubernetes/backend.py``).

        ``trainer`` becomes ``spec.trainer`` (:func:`trainer.client.trainers.trainer_spec`: a
        :class:`CustomTrainer`'s function becomes the container command;
        :func:`trainer.client.trainers.builtin_trainer_spec`: a :class:`BuiltinTrainer` on a
        torchtune runtime becomes ``command: [tune, run]`` and its config's overrides as ``args``,
        the spec the kubeflow SDK makes, which this operator refuses at ``spec.trainer.command``:
        it does not derive the recipe and config from the runtime as Kubeflow Trainer does). ``options`` are called as
        the kubeflow SDK calls its options, ``option(job_spec, trainer, client)``, on a dict whose
        ``metadata.name``/``labels``/``annotations`` and ``spec.trainer.command``/``args``,
        ``spec.runtimePatches``, ``spec.activeDeadlineSeconds`` and ``spec.ttlSecondsAfterFinished`` are
        used (the SDK's own Kubernetes options refuse any client but its own; ``Name`` works).

        ``ttl_seconds_after_finished`` (seconds, >= 0) becomes ``spec.ttlSecondsAfterFinished``: that
        long after the TrainJob finished it is deleted with its children (KEP-2899's
        ``ttl_seconds_after_finished``, kubeflow/trainer#4052); None: the runtime's
        ``runPolicy.ttlSecondsAfterFinished``, if any.

        Raises ``ValueError`` for a trainer of another type or one the runtime cannot run (naming
        the field), or a negative ``ttl_seconds_after_finished``; :class:`NotFoundError` when the
        runtime does not exist; what :meth:`create_job` raises.
        """
        if ttl_seconds_after_finished is not None and ttl_seconds_after_finished < 0:
            raise ValueError(f"ttl_seconds_after_finished must be >= 0, not {ttl_seconds_after_finished}")
        if runtime is None:
            runtime = os.getenv("DEFAULT_TRAINING_RUNTIME", "torch-distributed")
        if isinstance(runtime, str):
            runtime = await self.get_runtime(runtime)
        elif isinstance(runtime, TrainingRuntime | ClusterTrainingRuntime):
            runtime = runtime_of(runtime)
        job_spec: JSON = {}
        for option in options or []:
            option(job_spec, trainer, self)
        meta = job_spec.get("metadata") or {}
        given = job_spec.get("spec") or {}
        spec: JSON = {"runtimeRef": {"name": runtime.name, "kind": runtime.kind.value}}
        if isinstance(trainer, CustomTrainer | CustomTrainerContainer):
            trainer_fields = trainer_spec(runtime, trainer)
        elif isinstance(trainer, BuiltinTrainer):
            trainer_fields = builtin_trainer_spec(runtime, trainer, initializer)
        elif trainer is None:
            trainer_fields = {}
        else:
            raise ValueError(
                f"trainer {type(trainer).__name__} is not supported; "
                "use CustomTrainer, CustomTrainerContainer or BuiltinTrainer"
            )
        trainer_fields.update({k: v for k, v in (given.get("trainer") or {}).items() if k in ("command", "args")})
        if trainer_fields:
            spec["trainer"] = trainer_fields
        init = initializer_spec(initializer) if initializer else None
        if init:
            spec["initializer"] = init
        for key in ("runtimePatches", "activeDeadlineSeconds"):
            if given.get(key):
                spec[key] = given[key]
        ttl = (
            ttl_seconds_after_finished
            if ttl_seconds_after_finished is not None
            else given.get("ttlSecondsAfterFinished")
        )
        if ttl is not None:
            spec["ttlSecondsAfterFinished"] = ttl
        name = str(meta.get("name") or random.choice(string.ascii_lowercase) + uuid.uuid4().hex[:11])
        metadata: JSON = {"name": name}
        for key in ("labels", "annotations"):
            if meta.get(key):
                metadata[key] = dict(meta[key])
        body = {"apiVersion": TrainJob.model_fields["api_version"].default, "kind": TrainJob.KIND, "metadata": metadata}
        job = load_trainjob({**body, "spec": spec})
        await self._create(job, _wire(job, None, False), None)
        return name

    def _namespace_for(self, obj: Manifest, namespace: str | None) -> str | None:
        """Where a namespaced object goes: ``namespace`` if given, else the client's when it was
        given, else the object's own, else the client's (its context's)."""
        if not manifest_resource(obj).namespaced:
            return None
        if namespace:
            return namespace
        if self.namespace_given:
            return self.namespace
        return obj.metadata.namespace or self.namespace

    async def _create(self, obj: M, body: JSON, namespace: str | None) -> M:
        """Create ``obj`` as ``body`` (:func:`_wire`) where :meth:`create_job` puts a TrainJob;
        returns the stored object (with the name the apiserver made of a ``generateName``)."""
        ns = self._namespace_for(obj, namespace)
        try:
            created = await self.kube.create(manifest_resource(obj), ns, with_namespace(body, ns))
        except ApiError as e:
            if e.conflict:
                raise AlreadyExistsError(obj.kind, ns, obj.metadata.name or "") from None
            raise
        return cast(M, type(obj).model_validate(created))

    async def create_job(
        self, manifest: Source, namespace: str | None = None, *, queue: str | None = None, multicluster: bool = False
    ) -> Shape:
        """Create the TrainJob ``manifest`` holds (a dict, a YAML path or string, or an :mod:`api`
        TrainJob), in ``namespace`` if given, else in the client's when that was given
        (``connect(namespace=...)``), else in its own, else in the client's. Returns it as
        :meth:`get_job` does (``.trainjob`` is the stored object).

        ``queue`` sets the Kueue LocalQueue label (``kueue.x-k8s.io/queue-name``). ``multicluster``
        submits it to a MultiKueue manager cluster: ``managedBy: kueue.x-k8s.io/multikueue``, the
        queue label (``queue``, else the manifest's) and ``suspend: true`` (see
        :func:`trainer.client.multicluster.for_multicluster`); Kueue then runs it on a worker
        cluster and :meth:`get_workload` says which.

        Raises :class:`ManifestError` for anything but exactly one valid TrainJob, or when
        ``multicluster`` finds no queue or another ``managedBy``; :class:`AlreadyExistsError` when
        the name is taken; :class:`ApiError` when the apiserver refuses it (e.g. 422 from the CRD's
        validation).
        """
        job = load_trainjob(manifest)
        return await self._shape(await self._create(job, _wire(job, queue, multicluster), namespace))

    async def create(
        self, manifests: Source, namespace: str | None = None, *, queue: str | None = None, multicluster: bool = False
    ) -> list[Manifest]:
        """Create every object of ``manifests`` (TrainJobs, MPIJobs, TrainingRuntimes,
        ClusterTrainingRuntimes), in order, like ``kubectl create``: an object may have
        ``metadata.generateName`` instead of a name, which the apiserver completes. Namespaced
        objects go where :meth:`create_job` puts a TrainJob; ``queue`` and ``multicluster`` apply to
        the TrainJobs as there. Returns the stored :mod:`api` objects (with their names). All are
        validated (and marked) before the first is sent.

        Raises :class:`ManifestError` for invalid input (or a TrainJob ``multicluster`` cannot
        mark); :class:`AlreadyExistsError` when a name is taken (the objects before it stay
        created); :class:`ApiError` when the apiserver refuses one.
        """
        objs = load_manifests(manifests)
        bodies = [_wire(o, queue, multicluster) for o in objs]
        return [await self._create(o, body, namespace) for o, body in zip(objs, bodies, strict=True)]

    async def apply(
        self,
        manifests: Source,
        namespace: str | None = None,
        force: bool = False,
        *,
        queue: str | None = None,
        multicluster: bool = False,
    ) -> list[Manifest]:
        """Server-side apply every object of ``manifests`` (TrainJobs, MPIJobs, TrainingRuntimes,
        ClusterTrainingRuntimes) as field manager ``trainer-client``, like ``kubectl apply
        --server-side``; namespaced objects go where :meth:`create_job` puts a TrainJob. ``queue``
        and ``multicluster`` apply to the TrainJobs as in :meth:`create_job`.
        Returns the stored :mod:`api` objects. All are validated (and marked) before the first is sent.

        Raises :class:`ManifestError` for invalid input, an object without ``metadata.name`` (a
        ``generateName`` only: :meth:`create` it), or a TrainJob ``multicluster`` cannot mark;
        :class:`ApiError` when the apiserver refuses one (409 on a field conflict unless ``force``).
        """
        objs = load_manifests(manifests)
        require_names(objs, "apply")
        bodies = [_wire(o, queue, multicluster) for o in objs]
        out: list[Manifest] = []
        for obj, wire in zip(objs, bodies, strict=True):
            body = with_namespace(wire, self._namespace_for(obj, namespace))
            stored = await self.kube.apply(body, FIELD_MANAGER, force=force)
            out.append(type(obj).model_validate(stored))
        return out

    async def list_jobs(
        self,
        runtime: str | Runtime | TrainingRuntime | ClusterTrainingRuntime | None = None,
        *,
        label_selector: str | None = None,
        queue: str | None = None,
        all_namespaces: bool = False,
    ) -> list[Shape]:
        """TrainJobs, oldest first, as :meth:`get_job` returns them; ``runtime`` keeps those whose
        ``spec.runtimeRef`` names it (a name or a :class:`Runtime`, as the SDK; an :mod:`api`
        runtime must match by kind too); ``label_selector``, ``queue`` and ``all_namespaces`` as
        :meth:`AsyncJobClient.list_jobs`. Raises :class:`ApiError`."""
        jobs = await self._jobs.list_jobs(label_selector=label_selector, queue=queue, all_namespaces=all_namespaces)
        if isinstance(runtime, str | Runtime):
            name = runtime if isinstance(runtime, str) else runtime.name
            jobs = [j for j in jobs if j.spec.runtime_ref.name == name]
        elif runtime is not None:
            jobs = [
                j
                for j in jobs
                if j.spec.runtime_ref.name == runtime.metadata.name
                and (j.spec.runtime_ref.kind or ClusterTrainingRuntime.KIND) == runtime.kind
            ]
        cache: RuntimeCache = {}
        return [await self._shape(j, cache) for j in jobs]

    async def get_job(self, name: str) -> Shape:
        """The TrainJob ``name`` in the SDK's shape (:class:`trainer.client.shapes.TrainJob`; its
        ``runtime`` is None when the runtime does not exist, where the SDK raises). Raises
        :class:`NotFoundError` (a ``RuntimeError`` too, as the SDK raises), :class:`ApiError`."""
        return await self._shape(await self._jobs.get_job(name))

    async def get_job_logs(
        self,
        name: str,
        step: str | None = None,
        follow: bool | int = False,
        *,
        node: int | None = None,
        container: str | None = None,
        pod_timeout: float = DEFAULT_POD_TIMEOUT,
    ) -> AsyncGenerator[str, None]:
        """Log lines of ``step`` (``node-0`` by default, or an initializer's name; or ``step`` and
        ``node``); ``follow`` streams until the container ends. Waits up to ``pod_timeout`` seconds
        for the pod to start (kubeflow/sdk#182) instead of yielding nothing. See
        :meth:`AsyncJobClient.get_job_logs` for the arguments and what it raises
        (:class:`LogsUnavailableError`, a ``RuntimeError``, when the apiserver cannot give them)."""
        follow, node = legacy_node(follow, node)
        async for line in self._jobs.get_job_logs(
            name, step, follow, node=node, container=container, pod_timeout=pod_timeout
        ):
            yield line

    async def get_job_events(self, name: str) -> list[Event]:
        """Events about the TrainJob and its Jobs, Pods, PodGroup and Workload, oldest first
        (:meth:`AsyncJobClient.get_job_events`)."""
        return await self._jobs.get_job_events(name)

    async def wait_for_job_status(
        self,
        name: str,
        status: str | Collection[str] = frozenset({COMPLETE}),
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        polling_interval: float | Iterable[Callable[[Shape], None]] = DEFAULT_POLLING_INTERVAL,
        callbacks: Iterable[Callable[[Shape], None]] | None = None,
    ) -> Shape:
        """Wait (on a watch) until the TrainJob has one of ``status``; returns it as :meth:`get_job`
        does. Each of ``callbacks`` gets every version seen, in that shape. ``polling_interval``
        must be > 0 and < ``timeout``, as the SDK checks, and changes nothing else; callbacks as the
        4th positional argument (this client's order before) still work, with a
        ``DeprecationWarning``. Raises ``ValueError`` for bad arguments, :class:`JobFailedError` (a
        ``RuntimeError``), :class:`JobFinishedError`, :class:`WaitTimeoutError` (a
        ``TimeoutError``), :class:`NotFoundError` (see :meth:`AsyncJobClient.wait_for_job_status`)."""
        polling_interval, callbacks = legacy_callbacks(polling_interval, callbacks)
        if polling_interval <= 0 or polling_interval >= timeout:
            raise ValueError(
                f"polling_interval must be positive and less than timeout, got {polling_interval} and {timeout}"
            )
        hooks = list(callbacks or [])
        cache: RuntimeCache = {}

        async def on_change(job: TrainJob) -> None:
            if hooks:
                shaped = await self._shape(job, cache)
                for hook in hooks:
                    hook(shaped)

        done = await self._jobs._wait_for(name, status, timeout, polling_interval, on_change)
        return await self._shape(done, cache)

    async def delete_job(self, name: str, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Delete the TrainJob (its children go by background cascading deletion); with ``wait``,
        return once it is gone. Raises :class:`NotFoundError` (a ``RuntimeError``, as the SDK),
        :class:`WaitTimeoutError` when ``wait`` and it is still there after ``timeout`` seconds."""
        await self._jobs.delete_job(name, wait=wait, timeout=timeout)

    async def delete(
        self, manifests: Source, namespace: str | None = None, *, wait: bool = False, timeout: float = 60.0
    ) -> list[Manifest]:
        """Delete every object ``manifests`` names (by kind and ``metadata.name``; namespaced ones
        where :meth:`create_job` puts a TrainJob), in order, like ``kubectl delete -f``; with
        ``wait``, each is gone before the next is deleted. Returns the objects as read.

        Raises :class:`ManifestError` for invalid input or an object without ``metadata.name``,
        before anything is deleted; :class:`NotFoundError` for one that does not exist (those
        before it stay deleted); :class:`WaitTimeoutError`, :class:`ApiError` (:func:`delete_object`).
        """
        objs = load_manifests(manifests)
        require_names(objs, "delete")
        for obj in objs:
            res, ns, name = manifest_resource(obj), self._namespace_for(obj, namespace), obj.metadata.name or ""
            await delete_object(self.kube, res, ns, name, wait=wait, timeout=timeout)
        return objs

    async def wait_for_pod(
        self, name: str, step: str | None = None, node: int | None = None, timeout: float = DEFAULT_POD_TIMEOUT
    ) -> JSON:
        """The newest started pod of ``step`` node ``node`` of the TrainJob
        (:meth:`AsyncJobClient.wait_for_pod`)."""
        return await self._jobs.wait_for_pod(name, step, node, timeout)

    async def get_workload(self, name: str) -> WorkloadInfo | None:
        """The TrainJob's Kueue Workload (``cluster_name``: the worker cluster it runs on), if any
        (:meth:`AsyncJobClient.get_workload`)."""
        return await self._jobs.get_workload(name)

    async def get_podgroup(self, name: str) -> JSON | None:
        """The Volcano PodGroup named after the TrainJob, if any (:meth:`AsyncJobClient.get_podgroup`)."""
        return await self._jobs.get_podgroup(name)
