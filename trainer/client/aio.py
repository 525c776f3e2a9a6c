"""The asyncio client: :class:`AsyncTrainerClient` for TrainJobs and their runtimes, in the kubeflow
SDK's shapes (over :class:`trainer.client.jobs.AsyncJobClient`, which gives the :mod:`trainer.api` objects of
any training-job kind: TrainJob, MPIJob).

Method names, positional arguments and semantics follow the kubeflow SDK's ``TrainerClient``
(``kubeflow/trainer/api/trainer_client.py``, ``backends/kubernetes/backend.py``, kubeflow 0.5.0):
``list_runtimes``, ``get_runtime``, ``get_runtime_packages``, ``train``, ``list_jobs``, ``get_job``,
``get_job_logs``, ``get_job_events``, ``wait_for_job_status``, ``delete_job``. Differences: they
are coroutines (``get_job_logs`` an async generator); waits follow a watch on the object instead of
polling; logs wait for the pod to start instead of returning nothing (kubeflow/sdk#182), and say
why when the apiserver cannot give them.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import AsyncGenerator, Callable, Collection, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar, cast

from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, OPTIMIZATION_JOBS, PODS, TRAINING_RUNTIMES, Resource
from trainer.api.labels import KUEUE_QUEUE_LABEL
from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import (
    FRAMEWORK_LABEL,
    ClusterTrainingRuntime,
    TrainingRuntime,
    TrainJob,
    runtime_from_dict,
)
from trainer.api.waiting import Waiting
from trainer.client.errors import AlreadyExistsError, NotFoundError, translates_api_errors
from trainer.client.jobs import (
    DEFAULT_POD_TIMEOUT,
    DEFAULT_POLLING_INTERVAL,
    DEFAULT_WAIT_TIMEOUT,
    AsyncJobClient,
    delete_object,
    legacy_callbacks,
    legacy_node,
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
from trainer.client.multicluster import WorkloadInfo, for_multicluster
from trainer.client.optimize import (
    GridSearch,
    MedianStopping,
    Objective,
    RandomSearch,
    TPESearch,
    TrainJobTemplate,
    Trial,
    TrialConfig,
    best_trial,
    list_trials,
    optimization_job,
    wait_for_status,
    with_parameters,
)
from trainer.client.shapes import Runtime, runtime_of, trainjob_of
from trainer.client.shapes import TrainJob as Shape
from trainer.client.trainers import (
    BuiltinTrainer,
    CustomTrainer,
    CustomTrainerContainer,
    Initializer,
    Option,
    RuntimeChoice,
    trainjob_manifest,
)
from trainer.client.types import COMPLETE, TRAINJOB, Event, pod_selector, runtime_framework
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.framework.kube.kubeconfig import LeftToLibrary, context_namespace
from trainer.framework.meta import meta

log = logging.getLogger(__name__)
FIELD_MANAGER = "trainer-client"
"""Field manager of the client's server-side applies."""
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

M = TypeVar("M", bound=Manifest)


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's ``context`` (default: the current one), else the in-cluster
    service account's, else ``default`` (as the kubeflow SDK's ``get_default_target_namespace``)."""
    try:
        namespace = context_namespace(kubeconfig, context)
        if namespace:
            return namespace
    except LeftToLibrary:  # no kubeconfig, or one that cannot be read
        pass
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def wire_form(obj: Manifest, queue: str | None, multicluster: bool) -> JSON:
    """What is sent for ``obj``: :func:`wire_dict`, a TrainJob marked by :func:`_dispatched`."""
    return _dispatched(wire_dict(obj), queue, multicluster) if isinstance(obj, TrainJob) else wire_dict(obj)


def _dispatched(body: JSON, queue: str | None, multicluster: bool) -> JSON:
    """A TrainJob's wire form with the queue label ``queue`` (when given) and, with
    ``multicluster``, marked for MultiKueue (:func:`for_multicluster`)."""
    if multicluster:
        return for_multicluster(body, queue)
    if queue:
        m = meta(body)
        return {**body, "metadata": {**m.data, "labels": {**m.labels, KUEUE_QUEUE_LABEL: queue}}}
    return body


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


@translates_api_errors
class AsyncTrainerClient:
    """TrainJobs (``trainer.kubeflow.org/v1alpha1``) and their runtimes in one namespace: the kubeflow
    SDK's ``TrainerClient`` (``kubeflow/trainer/api/trainer_client.py``, kubeflow 0.5.0) as
    coroutines, with its method names, positional arguments and return shapes
    (:mod:`trainer.client.shapes`: ``TrainJob``, ``Runtime``; :class:`Event`), plus manifests
    (:meth:`create_job`, :meth:`apply`), queues, :meth:`get_workload` and :meth:`get_podgroup`.
    The :mod:`trainer.api` objects a shape was read from are its ``trainjob``/``object`` attribute;
    :class:`AsyncJobClient` gives them directly, for any job kind.

    The apiserver's refusals are raised as :class:`ApiServerError` (by
    status: :class:`NotFoundError`, ``ForbiddenError``, ``ConflictError``, ``InvalidError``), the
    transport's error as ``__cause__`` (:func:`~trainer.client.errors.translates_api_errors`).

    Create with :meth:`connect` (or around an existing :class:`Kube`); use as an async context
    manager (``async with await AsyncTrainerClient.connect() as c``: ``__aexit__`` closes it) or
    call :meth:`close` before the loop ends, else aiohttp warns ``Unclosed client session`` at exit.
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
        :class:`ApiServerError`."""
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
        :class:`ApiServerError`."""
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
        """Create a TrainJob from a runtime (a name, :class:`Runtime` or :mod:`trainer.api` runtime; default
        ``$DEFAULT_TRAINING_RUNTIME``, else ``torch-distributed``), an optional :class:`Initializer`
        and trainer, in the client's namespace; returns its name (``options`` may set it, else a
        letter and 11 hex digits), as the kubeflow SDK's ``train``
        (``kubeflow/trainer/backends/kubernetes/backend.py``).

        ``trainer`` becomes ``spec.trainer`` (:func:`trainer.client.trainers.trainer_spec`: a
        :class:`CustomTrainer`'s function becomes the container command;
        :func:`trainer.client.trainers.builtin_trainer_spec`: a :class:`BuiltinTrainer` on a
        torchtune runtime becomes ``command: [tune, run]`` and its config's overrides as ``args``,
        the spec the kubeflow SDK makes; the operator derives the recipe and config from the runtime as
        Kubeflow Trainer does). ``options`` are called as
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
        job = load_trainjob(trainjob_manifest(runtime, initializer, trainer, job_spec, ttl_seconds_after_finished))
        await self._create(job, wire_form(job, None, False), None)
        return job.metadata.name or ""

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

    async def _create(self, obj: M, body: JSON, namespace: str | None, dry_run: bool = False) -> M:
        """Create ``obj`` as ``body`` (:func:`wire_form`) where :meth:`create_job` puts a TrainJob;
        returns the stored object (with the name the apiserver made of a ``generateName``), or with
        ``dry_run`` the object as the apiserver would store it."""
        ns = self._namespace_for(obj, namespace)
        try:
            created = await self.kube.create(manifest_resource(obj), ns, with_namespace(body, ns), dry_run=dry_run)
        except ApiError as e:
            if e.conflict:
                raise AlreadyExistsError(obj.kind, ns, obj.metadata.name or "") from e
            raise
        return cast(M, type(obj).model_validate(created))

    async def create_job(
        self, manifest: Source, namespace: str | None = None, *, queue: str | None = None, multicluster: bool = False
    ) -> Shape:
        """Create the TrainJob ``manifest`` holds (a dict, a YAML path or string, or an :mod:`trainer.api`
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
        the name is taken; :class:`ApiServerError` when the apiserver refuses it (e.g. 422 from the CRD's
        validation).
        """
        job = load_trainjob(manifest)
        return await self._shape(await self._create(job, wire_form(job, queue, multicluster), namespace))

    async def create(
        self,
        manifests: Source,
        namespace: str | None = None,
        *,
        queue: str | None = None,
        multicluster: bool = False,
        dry_run: bool = False,
    ) -> list[Manifest]:
        """Create every object of ``manifests`` (TrainJobs, MPIJobs, TrainingRuntimes,
        ClusterTrainingRuntimes), in order, like ``kubectl create``: an object may have
        ``metadata.generateName`` instead of a name, which the apiserver completes. Namespaced
        objects go where :meth:`create_job` puts a TrainJob; ``queue`` and ``multicluster`` apply to
        the TrainJobs as there. Returns the stored :mod:`trainer.api` objects (with their names). All are
        validated (and marked) before the first is sent. With ``dry_run`` the apiserver checks each
        (``dryRun=All``: admission included) and stores none; what it would store is returned.

        Raises :class:`ManifestError` for invalid input (or a TrainJob ``multicluster`` cannot
        mark); :class:`AlreadyExistsError` when a name is taken (the objects before it stay
        created); :class:`ApiServerError` when the apiserver refuses one.
        """
        objs = load_manifests(manifests)
        bodies = [wire_form(o, queue, multicluster) for o in objs]
        return [await self._create(o, body, namespace, dry_run) for o, body in zip(objs, bodies, strict=True)]

    async def apply(
        self,
        manifests: Source,
        namespace: str | None = None,
        force: bool = False,
        *,
        queue: str | None = None,
        multicluster: bool = False,
        dry_run: bool = False,
    ) -> list[Manifest]:
        """Server-side apply every object of ``manifests`` (TrainJobs, MPIJobs, TrainingRuntimes,
        ClusterTrainingRuntimes) as field manager ``trainer-client``, like ``kubectl apply
        --server-side``; namespaced objects go where :meth:`create_job` puts a TrainJob. ``queue``
        and ``multicluster`` apply to the TrainJobs as in :meth:`create_job`.
        Returns the stored :mod:`trainer.api` objects. All are validated (and marked) before the first is sent.
        With ``dry_run`` (``dryRun=All``) nothing is stored; what would be is returned.

        Raises :class:`ManifestError` for invalid input, an object without ``metadata.name`` (a
        ``generateName`` only: :meth:`create` it), or a TrainJob ``multicluster`` cannot mark;
        :class:`ApiServerError` when the apiserver refuses one (409 on a field conflict unless ``force``).
        """
        objs = load_manifests(manifests)
        require_names(objs, "apply")
        bodies = [wire_form(o, queue, multicluster) for o in objs]
        out: list[Manifest] = []
        for obj, wire in zip(objs, bodies, strict=True):
            body = with_namespace(wire, self._namespace_for(obj, namespace))
            stored = await self.kube.apply(body, FIELD_MANAGER, force=force, dry_run=dry_run)
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
        ``spec.runtimeRef`` names it (a name or a :class:`Runtime`, as the SDK; an :mod:`trainer.api`
        runtime must match by kind too); ``label_selector``, ``queue`` and ``all_namespaces`` as
        :meth:`AsyncJobClient.list_jobs`. Raises :class:`ApiServerError`."""
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
        :class:`NotFoundError` (a ``RuntimeError`` too, as the SDK raises), :class:`ApiServerError`."""
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
        ``TimeoutError``; :class:`JobWaitingError`, whose ``why`` says what holds the job, when
        something does), :class:`NotFoundError` (see :meth:`AsyncJobClient.wait_for_job_status`)."""
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
        self,
        manifests: Source,
        namespace: str | None = None,
        *,
        wait: bool = False,
        timeout: float = 60.0,
        dry_run: bool = False,
    ) -> list[Manifest]:
        """Delete every object ``manifests`` names (by kind and ``metadata.name``; namespaced ones
        where :meth:`create_job` puts a TrainJob), in order, like ``kubectl delete -f``; with
        ``wait``, each is gone before the next is deleted; with ``dry_run`` (``dryRun=All``) the
        apiserver checks each deletion and nothing goes. Returns the objects as read.

        Raises :class:`ManifestError` for invalid input or an object without ``metadata.name``,
        before anything is deleted; :class:`NotFoundError` for one that does not exist (those
        before it stay deleted); :class:`WaitTimeoutError`, :class:`ApiServerError` (:func:`delete_object`).
        """
        objs = load_manifests(manifests)
        require_names(objs, "delete")
        for obj in objs:
            res, ns, name = manifest_resource(obj), self._namespace_for(obj, namespace), obj.metadata.name or ""
            await delete_object(self.kube, res, ns, name, wait=wait, timeout=timeout, dry_run=dry_run)
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

    async def why_waiting(self, name: str) -> Waiting | None:
        """Why the TrainJob waits (reason, message, next step, docs entry), None when nothing holds
        it (:meth:`AsyncJobClient.why_waiting`)."""
        return await self._jobs.why_waiting(name)

    # ----------------------------------------------------------------------- OptimizationJobs

    async def optimize(
        self,
        trial_template: TrainJobTemplate,
        *,
        trial_config: TrialConfig | None = None,
        search_space: dict[str, Any],
        objectives: list[Objective] | None = None,
        algorithm: RandomSearch | GridSearch | TPESearch | None = None,
        name: str | None = None,
        early_stopping: MedianStopping | None = None,
        suspend: bool = False,
    ) -> str:
        """Create an OptimizationJob in the client's namespace and return its name, as the kubeflow SDK's
        ``OptimizerClient.optimize()`` (``kubeflow/optimizer/api/optimizer_client.py``, kubeflow 0.5.0;
        its types or :mod:`trainer.client.optimize`'s): each trial is a TrainJob made from
        ``trial_template`` as :meth:`train` makes one (its runtime read here), its parameters drawn from
        ``search_space`` (``{"lr": Search.loguniform(1e-4, 1e-1), "batch": Search.choice([16, 32])}``)
        and given to the trainer as ``KUBEFLOW_TRAINER_OPT_<NAME>`` and, to a :class:`CustomTrainer`'s
        function that takes them (by name or ``**kwargs``), as keyword arguments (strings, as the SDK's
        Katib trials get them: :func:`trainer.client.optimize.with_parameters`); ``objectives`` default to
        minimizing ``loss``, a metric the trainer reports to the status server; ``algorithm`` defaults
        to random search (:class:`~trainer.client.optimize.TPESearch`: TPE); ``trial_config`` to 10 trials,
        one at a time. Not in the SDK: ``name``, the job's name, else a letter and 11 hex digits;
        ``early_stopping`` (:class:`~trainer.client.optimize.MedianStopping`: median stopping, trials
        ``EarlyStopped``); ``suspend``: created held, no trial until :meth:`resume_optimization_job`.

        Raises ``ValueError`` naming the argument (:func:`trainer.client.optimize.optimization_job`);
        :class:`NotFoundError` when the runtime does not exist; :class:`AlreadyExistsError` when the
        name is taken; :class:`ApiError` when the apiserver refuses it (the OptimizationJob CRD not
        installed: 404)."""
        runtime = trial_template.runtime or os.getenv("DEFAULT_TRAINING_RUNTIME", "torch-distributed")
        if isinstance(runtime, str):
            runtime = await self.get_runtime(runtime)
        elif isinstance(runtime, TrainingRuntime | ClusterTrainingRuntime):
            runtime = runtime_of(runtime)
        trainer = with_parameters(trial_template.trainer, list(search_space))
        trial = trainjob_manifest(runtime, trial_template.initializer, trainer, {})
        job = optimization_job(
            name or str(trial["metadata"]["name"]),
            trial["spec"],
            search_space,
            objectives,
            algorithm,
            trial_config,
            early_stopping=early_stopping,
            suspend=suspend,
        )
        try:
            body = {k: v for k, v in job.to_dict().items() if k != "status"}
            await self.kube.create(OPTIMIZATION_JOBS, self.namespace, with_namespace(body, self.namespace))
        except ApiError as e:
            if e.conflict:
                raise AlreadyExistsError(OPTIMIZATION_JOBS.kind, self.namespace, job.metadata.name or "") from None
            raise
        return job.metadata.name or ""

    async def get_optimization_job(self, name: str) -> OptimizationJob:
        """The OptimizationJob ``name`` (:class:`trainer.api.optimizationjob.OptimizationJob`). Raises
        :class:`NotFoundError`, :class:`ApiError`."""
        obj = await self.kube.get_or_none(OPTIMIZATION_JOBS, self.namespace, name)
        if obj is None:
            raise NotFoundError(OPTIMIZATION_JOBS.kind, self.namespace, name)
        return OptimizationJob.model_validate(obj)

    async def list_optimization_jobs(
        self, *, label_selector: str | None = None, all_namespaces: bool = False
    ) -> list[OptimizationJob]:
        """The OptimizationJobs of the namespace (or of every namespace), oldest first. Raises :class:`ApiError`."""
        items, _ = await self.kube.list(OPTIMIZATION_JOBS, None if all_namespaces else self.namespace, label_selector)
        jobs = [OptimizationJob.model_validate(i) for i in items]
        return sorted(jobs, key=lambda j: (j.metadata.creation_timestamp or "", j.metadata.name or ""))

    async def list_trials(self, name: str) -> list[Trial]:
        """The trials of OptimizationJob ``name`` by index: name, state, parameters, objective value and
        TrainJob (:func:`trainer.client.optimize.trials_of`). Raises :class:`NotFoundError`, :class:`ApiError`."""
        return await list_trials(self.kube, self.namespace, await self.get_optimization_job(name))

    async def get_best_results(self, name: str) -> Trial | None:
        """The best trial so far (``status.result``) with its parameters and objective value, as the
        kubeflow SDK's ``get_best_results``; None before a trial reported the objective. Raises
        :class:`NotFoundError`, :class:`ApiError`."""
        job = await self.get_optimization_job(name)
        return best_trial(job, await list_trials(self.kube, self.namespace, job))

    async def wait_for_optimization_job_status(
        self,
        name: str,
        status: str | Collection[str] = frozenset({COMPLETE}),
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        callbacks: Iterable[Callable[[OptimizationJob], None]] | None = None,
    ) -> OptimizationJob:
        """Wait until the OptimizationJob's status (``Created``, ``Suspended``, ``Running``, ``Complete``, ``Failed``:
        :func:`trainer.client.optimize.optimization_status`) is one of ``status``, following a watch;
        each version seen goes to every callback. Raises what
        :func:`trainer.client.optimize.wait_for_status` raises."""
        wanted = {status} if isinstance(status, str) else set(status)
        return await wait_for_status(self.kube, self.namespace, name, wanted, timeout, list(callbacks or []))

    async def suspend_optimization_job(self, name: str) -> None:
        """Hold the search (``spec.suspend: true``, a merge patch): no new trial, the running ones suspended.
        Raises :class:`NotFoundError`, :class:`ApiError`."""
        await self._set_optimization_suspend(name, True)

    async def resume_optimization_job(self, name: str) -> None:
        """Go on with the search (``spec.suspend: false``): its held trials resume, new ones are created.
        Raises :class:`NotFoundError`, :class:`ApiError`."""
        await self._set_optimization_suspend(name, False)

    async def _set_optimization_suspend(self, name: str, suspend: bool) -> None:
        try:
            await self.kube.merge_patch(OPTIMIZATION_JOBS, self.namespace, name, {"spec": {"suspend": suspend}})
        except ApiError as e:
            if e.not_found:
                raise NotFoundError(OPTIMIZATION_JOBS.kind, self.namespace, name) from None
            raise

    async def delete_optimization_job(self, name: str, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Delete the OptimizationJob (its trials go with it: they are its dependents). Raises
        :class:`NotFoundError`, :class:`WaitTimeoutError` with ``wait``, :class:`ApiError`."""
        await delete_object(self.kube, OPTIMIZATION_JOBS, self.namespace, name, wait=wait, timeout=timeout)
