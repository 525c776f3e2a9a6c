"""The asyncio client of the :mod:`trainer.api` objects of any training-job kind (TrainJob, MPIJob):
:class:`AsyncJobClient`, and what it stands on: watching and deleting objects, finding a step's pods
and their containers, the arguments kept from this client's order before the kubeflow SDK's.

All HTTP goes through :class:`trainer.framework.kube.client.Kube`; answers that are not JSON (pod logs,
streamed; a plain-text 404) are read from its :meth:`~trainer.framework.kube.client.Kube.open`.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Collection, Iterable
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import aiohttp

from trainer.api.conditions import is_true
from trainer.api.kinds import (
    CONFIGMAPS,
    EVENTS,
    JOBS,
    KUEUE_WORKLOADS,
    PODS,
    TRAINJOBS,
    VOLCANO_PODGROUPS,
    Resource,
)
from trainer.api.snapshot import runtime_of_snapshot, snapshot_name
from trainer.api.waiting import SUSPENDED, Waiting, why_waiting
from trainer.client.errors import (
    JobFailedError,
    JobFinishedError,
    JobWaitingError,
    LogsUnavailableError,
    NotFoundError,
    PodCannotStartError,
    TrainerClientError,
    UnknownNodeError,
    UnknownStepError,
    WaitTimeoutError,
    translates_api_errors,
)
from trainer.client.multicluster import JOB_UID_LABEL, WorkloadInfo, owned_workload
from trainer.client.types import (
    COMPLETE,
    FAILED,
    Event,
    J,
    JobKind,
    in_queue,
    pod_selector,
    related_events,
)
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.framework.meta import meta

DEFAULT_WAIT_TIMEOUT = 600.0
DEFAULT_POD_TIMEOUT = 300.0
DEFAULT_POLLING_INTERVAL = 2
"""The kubeflow SDK's default ``polling_interval`` (accepted, unused: waits follow a watch)."""
WATCH_SECONDS = 240
WHY_SECONDS = 10.0
"""Seconds a wait that ran out spends at most reading why the job waits (:meth:`AsyncJobClient.why_waiting`)."""

C = TypeVar("C")


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
        version = str(meta(data).resource_version or "")
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
    kube: Kube,
    res: Resource,
    namespace: str | None,
    name: str,
    *,
    wait: bool = False,
    timeout: float = 60.0,
    dry_run: bool = False,
) -> None:
    """Delete one object (its dependents go by background cascading deletion); ``namespace`` is
    ignored for a cluster-scoped ``res``. With ``wait``, return only once it is gone; with
    ``dry_run``, the apiserver checks the deletion (``dryRun=All``) and nothing goes. Raises
    :class:`NotFoundError` when it does not exist, :class:`WaitTimeoutError` when ``wait`` and it is
    still there after ``timeout`` seconds, :class:`ApiError`."""
    namespace = namespace if res.namespaced else None
    if not await kube.delete(res, namespace, name, dry_run=dry_run):
        raise NotFoundError(res.kind, namespace, name)
    if not wait or dry_run:
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


def conditions_of_job(job: Any) -> list[Any]:
    """The conditions of a job of any kind (its ``status.conditions``; empty without a status)."""
    return list(getattr(getattr(job, "status", None), "conditions", None) or [])


def job_waiting(
    job: Any, pods: Iterable[JSON], podgroup: JSON | None = None, workload: WorkloadInfo | None = None
) -> Waiting | None:
    """Why ``job`` (a TrainJob or an MPIJob) waits, from what was read of it: its pods, PodGroup and
    Kueue Workload (:func:`trainer.api.waiting.why_waiting`, the one rule); None when nothing holds it."""
    quota = (workload.name, list(workload.conditions)) if workload is not None else None
    return why_waiting(conditions_of_job(job), pods, podgroup=podgroup, workload=quota)


def _creation_key(obj: Any) -> tuple[str, str]:
    meta = obj.metadata
    return (meta.creation_timestamp or "", meta.name or "")


@translates_api_errors
class AsyncJobClient(Generic[J]):
    """Jobs of one :class:`JobKind` in one namespace.

    ``kube`` is the apiserver connection; it is closed by :meth:`close` only when ``owns_kube``.
    The public methods raise the apiserver's refusals as :class:`~trainer.client.errors.ApiServerError`
    (by status; :func:`~trainer.client.errors.translates_api_errors`).
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
        """The job ``name``. Raises :class:`NotFoundError`, or :class:`ApiServerError` on other failures."""
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
            why = await self._why_quietly(name)
            if why is not None:
                raise JobWaitingError(what, timeout, last[0] if last else None, why) from None
            raise WaitTimeoutError(what, timeout, last[0] if last else None) from None

    async def why_waiting(self, name: str, job: J | None = None) -> Waiting | None:
        """Why job ``name`` waits (:func:`trainer.api.waiting.why_waiting`: a condition that holds it, an
        image that cannot be pulled, a pod the scheduler cannot place, a container that cannot
        start, its PodGroup, its Kueue Workload); None when nothing holds it or it finished.
        ``job``: the job when already read. Reads the job's pods, PodGroup and (when it is
        suspended) Workload. Raises :class:`NotFoundError` when the job does not exist,
        :class:`ApiServerError` on other failures."""
        job = job if job is not None else await self.get_job(name)
        pods, _ = await self.kube.list(PODS, self.namespace, pod_selector(self.kind, name))
        podgroup = await self.get_podgroup(name)
        workload = await self.get_workload(name) if is_true(conditions_of_job(job), SUSPENDED) else None
        return job_waiting(job, pods, podgroup, workload)

    async def _why_quietly(self, name: str) -> Waiting | None:
        """:meth:`why_waiting` for an error message: None when it cannot be read within
        :data:`WHY_SECONDS` or fails."""
        try:
            async with asyncio.timeout(WHY_SECONDS):
                return await self.why_waiting(name)
        except (TrainerClientError, ApiError, aiohttp.ClientError, TimeoutError, ValueError):
            return None

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

        Raises :class:`NotFoundError` when the job does not exist; :class:`UnknownStepError` for a
        step the job does not have; :class:`UnknownNodeError` (naming the nodes it has) for a node
        the step has no pod of while it has others, all started, or when the job is finished and has
        no such pod; :class:`WaitTimeoutError` when no such pod started within ``timeout`` seconds.
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
        held: list[Waiting] = []
        nodes: int | None = None  # of the step's Jobs, asked once when needed
        try:
            async with asyncio.timeout(timeout) as scope:
                async for pods in observe(self.kube, PODS, self.namespace, label_selector=selector):
                    mine = [p for p in pods.values() if all_nodes or self._node_of(p)[1] == index]
                    if not mine and all_nodes and finished:
                        raise NotFoundError("Pod", self.namespace, f"of {which} of {name}")
                    others = {self._node_of(p)[1] for p in pods.values()}
                    settled = not mine and bool(others) and all(_started(p) for p in pods.values())
                    if settled and nodes is None:
                        nodes = await self._nodes_of_step(selector)
                    if not mine and (finished or (settled and index >= (nodes or 0))):
                        # the step's pods are all there, none of this node
                        raise UnknownNodeError(self._what(name), step_name, index, others)
                    newest: dict[tuple[int, int], JSON] = {}
                    for pod in sorted(filter(_started, mine), key=_age_key):
                        newest[self._node_of(pod)] = pod
                    if newest:
                        return [newest[k] for k in sorted(newest)]
                    finished = False  # only the first list can tell; later the pods may be on their way
                    names = sorted(str(p["metadata"]["name"]) for p in mine)
                    last[:] = [", ".join(f"pod {n} Pending" for n in names) or "no pod yet"]
                    why = why_waiting((), mine)
                    held[:] = [why] if why is not None else []
                    if why is not None and why.cannot_start:
                        raise PodCannotStartError(f"{which} of {self._what(name)}", why)
        except TimeoutError:
            if not scope.expired():
                raise
            what = f"a started pod of {which} of {self._what(name)}"
            why = held[0] if held else await self._why_quietly(name)
            if why is not None:
                raise JobWaitingError(what, timeout, last[0] if last else None, why) from None
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
        resp = await self.kube.open(
            "GET",
            PODS.path(namespace, name, "log"),
            query,
            accept="*/*",
            timeout=aiohttp.ClientTimeout(sock_connect=30) if follow else aiohttp.ClientTimeout(total=300),
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
        those of an earlier job of the same name). Raises :class:`ApiServerError` on failures."""
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

    async def _nodes_of_step(self, selector: str) -> int:
        """How many nodes the Jobs of a step (``selector``, their pods') have: the most ``completions``
        (else ``parallelism``, else 1) of one of them. A Job creates its pods in batches (one first, as
        the Job controller's slow start does), so a node below it may have no pod yet; 0 when no Job
        is found."""
        jobs, _ = await self.kube.list(JOBS, self.namespace, selector)
        spec = [j.get("spec") or {} for j in jobs]
        return max((int(s.get("completions") or s.get("parallelism") or 1) for s in spec), default=0)

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
        hence the raw request). Raises :class:`ApiServerError` on other failures."""
        resp = await self.kube.open("GET", path, list((query or {}).items()))
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
        :class:`NotFoundError` when the job does not exist, :class:`ApiServerError` on other failures."""
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
        Raises :class:`ApiServerError` on other failures."""
        return await self._get_optional(VOLCANO_PODGROUPS.path(self.namespace, name))
