"""The blocking client: :class:`TrainerClient` runs an :class:`AsyncTrainerClient` on an event loop
of its own, in a daemon thread, so it works in scripts and in notebooks (whose own loop is
already running) alike.

It is a drop-in for the kubeflow SDK's ``kubeflow.trainer.TrainerClient`` with its Kubernetes
backend (``kubeflow/trainer/api/trainer_client.py``, ``backends/kubernetes/backend.py``, kubeflow
0.5.0): the same methods with the same positional arguments, returning the same shapes
(:mod:`trainer.client.shapes`: ``TrainJob``, ``Runtime``; :class:`Event` has ``event_time``), each
with more as extra attributes. Errors derive from the builtins the SDK raises (``RuntimeError``,
``TimeoutError``, ``ValueError``; see :mod:`trainer.client.errors`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncGenerator, Callable, Collection, Coroutine, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime
from trainer.client.aio import (
    DEFAULT_POD_TIMEOUT,
    DEFAULT_POLLING_INTERVAL,
    DEFAULT_WAIT_TIMEOUT,
    AsyncTrainerClient,
    legacy_callbacks,
    legacy_node,
)
from trainer.client.manifest import Manifest, Source
from trainer.client.multicluster import WorkloadInfo
from trainer.client.shapes import Runtime, TrainJob
from trainer.client.trainers import (
    BuiltinTrainer,
    CustomTrainer,
    CustomTrainerContainer,
    Initializer,
    Option,
    RuntimeChoice,
)
from trainer.client.types import COMPLETE, Event
from trainer.framework.json_codec import JSON

T = TypeVar("T")


@dataclass
class KubernetesBackendConfig:
    """Where :class:`TrainerClient` connects: the fields of the kubeflow SDK's
    ``KubernetesBackendConfig`` (``kubeflow/common/types.py``). ``config_file`` defaults to
    ``$KUBECONFIG``/``~/.kube/config``, else the in-cluster configuration; ``context`` to the
    current one; ``namespace`` to the context's. ``client_configuration`` (a ``kubernetes``
    ``Configuration``) is not supported: :class:`TrainerClient` raises ``ValueError`` for it."""

    namespace: str | None = None
    config_file: str | None = None
    context: str | None = None
    client_configuration: Any = None


class TrainerClient:
    """Blocking TrainJob client for one namespace; see :class:`AsyncTrainerClient` for what each
    method does and raises.

    ``backend_config`` is a :class:`KubernetesBackendConfig` (the kubeflow SDK's own works too:
    its ``namespace``, ``config_file`` and ``context`` are read), or a kubeconfig path (this
    client's first argument before). ``kubeconfig`` defaults to ``$KUBECONFIG``/``~/.kube/config``,
    else the in-cluster configuration; ``namespace`` to the current context's. A namespace given
    here also wins over a manifest's own in :meth:`create_job`, :meth:`create`, :meth:`apply` and
    :meth:`delete`. Close with :meth:`close` or use as a context manager.

    Raises ``ValueError`` for a ``backend_config`` of another kind (the SDK's local-process and
    container backends) or with a ``client_configuration``; what :meth:`AsyncTrainerClient.connect`
    raises.
    """

    def __init__(
        self,
        backend_config: KubernetesBackendConfig | str | os.PathLike[str] | Any | None = None,
        namespace: str | None = None,
        *,
        kubeconfig: str | None = None,
    ) -> None:
        context = None
        if isinstance(backend_config, str | os.PathLike):
            kubeconfig = kubeconfig or os.fspath(backend_config)
        elif backend_config is not None:
            if not all(hasattr(backend_config, a) for a in ("namespace", "config_file", "context")):
                raise ValueError(f"Invalid backend config '{backend_config}': only a Kubernetes backend is supported")
            if getattr(backend_config, "client_configuration", None) is not None:
                raise ValueError("KubernetesBackendConfig.client_configuration is not supported; use config_file")
            namespace = namespace or backend_config.namespace
            kubeconfig = kubeconfig or backend_config.config_file
            context = backend_config.context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="trainer-client", daemon=True)
        self._thread.start()
        try:
            self._client = self._run(AsyncTrainerClient.connect(kubeconfig, namespace, context))
        except BaseException:
            self._stop_loop()
            raise

    @property
    def namespace(self) -> str:
        """The namespace the client works in."""
        return self._client.namespace

    @property
    def aio(self) -> AsyncTrainerClient:
        """The asyncio client underneath (its coroutines must run on this client's loop)."""
        return self._client

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def _iterate(self, agen: AsyncGenerator[T, None]) -> Iterator[T]:
        async def next_item() -> tuple[bool, T | None]:
            try:
                return True, await anext(agen)
            except StopAsyncIteration:
                return False, None

        try:
            while True:
                more, item = self._run(next_item())
                if not more:
                    return
                yield item  # type: ignore[misc]
        finally:
            if self._loop.is_running():
                self._run(agen.aclose())

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()

    def close(self) -> None:
        """Close the connection and stop the loop thread."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._client.close())
        finally:
            self._stop_loop()

    def __enter__(self) -> TrainerClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def list_runtimes(self) -> list[Runtime]:
        """The runtimes, as the kubeflow SDK lists them (:meth:`AsyncTrainerClient.list_runtimes`)."""
        return self._run(self._client.list_runtimes())

    def get_runtime(self, name: str) -> Runtime:
        """The TrainingRuntime ``name`` of the namespace, else the ClusterTrainingRuntime. Raises
        :class:`NotFoundError` (a ``RuntimeError`` too, as the SDK raises)."""
        return self._run(self._client.get_runtime(name))

    def get_runtime_packages(self, runtime: Runtime) -> None:
        """Print the Python version, packages and GPUs of ``runtime``'s image
        (:meth:`AsyncTrainerClient.get_runtime_packages`)."""
        self._run(self._client.get_runtime_packages(runtime))

    def train(
        self,
        runtime: RuntimeChoice = None,
        initializer: Initializer | None = None,
        trainer: CustomTrainer | CustomTrainerContainer | BuiltinTrainer | None = None,
        options: list[Option] | None = None,
        *,
        ttl_seconds_after_finished: int | None = None,
    ) -> str:
        """Create a TrainJob running ``trainer`` on ``runtime``; returns its name
        (:meth:`AsyncTrainerClient.train`; ``ttl_seconds_after_finished``: ``spec.ttlSecondsAfterFinished``)."""
        return self._run(
            self._client.train(
                runtime, initializer, trainer, options, ttl_seconds_after_finished=ttl_seconds_after_finished
            )
        )

    def create_job(
        self, manifest: Source, namespace: str | None = None, *, queue: str | None = None, multicluster: bool = False
    ) -> TrainJob:
        """Create one TrainJob from a dict, a YAML path or string, or an :mod:`api` TrainJob; with
        ``multicluster``, for MultiKueue to run on a worker cluster (``queue``: its LocalQueue).
        Returns it as :meth:`get_job` does (``.name``; ``.trainjob`` is the stored object)."""
        return self._run(self._client.create_job(manifest, namespace, queue=queue, multicluster=multicluster))

    def apply(
        self,
        manifests: Source,
        namespace: str | None = None,
        force: bool = False,
        *,
        queue: str | None = None,
        multicluster: bool = False,
    ) -> list[Manifest]:
        """Server-side apply TrainJobs and runtimes; returns the stored :mod:`api` objects. ``queue``
        and ``multicluster`` mark the TrainJobs as :meth:`create_job` does."""
        return self._run(self._client.apply(manifests, namespace, force, queue=queue, multicluster=multicluster))

    def create(
        self, manifests: Source, namespace: str | None = None, *, queue: str | None = None, multicluster: bool = False
    ) -> list[Manifest]:
        """Create TrainJobs, MPIJobs and runtimes, a ``metadata.generateName`` completed by the
        apiserver; returns the stored :mod:`api` objects (:meth:`AsyncTrainerClient.create`, for
        what it raises)."""
        return self._run(self._client.create(manifests, namespace, queue=queue, multicluster=multicluster))

    def get_job(self, name: str) -> TrainJob:
        """The TrainJob ``name`` (:class:`trainer.client.shapes.TrainJob`). Raises
        :class:`NotFoundError` (a ``RuntimeError`` too, as the SDK raises)."""
        return self._run(self._client.get_job(name))

    def list_jobs(
        self,
        runtime: str | Runtime | TrainingRuntime | ClusterTrainingRuntime | None = None,
        *,
        label_selector: str | None = None,
        queue: str | None = None,
        all_namespaces: bool = False,
    ) -> list[TrainJob]:
        """TrainJobs, oldest first, of ``runtime`` (a name or a runtime; a :class:`Runtime` matches
        by name, as the SDK), filtered by label selector and queue."""
        return self._run(
            self._client.list_jobs(runtime, label_selector=label_selector, queue=queue, all_namespaces=all_namespaces)
        )

    def get_job_logs(
        self,
        name: str,
        step: str | None = None,
        follow: bool | int = False,
        *,
        node: int | None = None,
        container: str | None = None,
        pod_timeout: float = DEFAULT_POD_TIMEOUT,
    ) -> Iterator[str]:
        """Log lines of ``step`` (``node-0`` by default, or an initializer's name; or ``step`` and
        ``node``); waits for the pod to start. Raises :class:`LogsUnavailableError` (a
        ``RuntimeError``) when the apiserver cannot give them."""
        follow, node = legacy_node(follow, node)
        return self._iterate(
            self._client.get_job_logs(name, step, follow, node=node, container=container, pod_timeout=pod_timeout)
        )

    def get_job_events(self, name: str) -> list[Event]:
        """Events about the TrainJob and its Jobs, Pods and PodGroup, oldest first."""
        return self._run(self._client.get_job_events(name))

    def wait_for_job_status(
        self,
        name: str,
        status: str | Collection[str] = frozenset({COMPLETE}),
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        polling_interval: float | Iterable[Callable[[TrainJob], None]] = DEFAULT_POLLING_INTERVAL,
        callbacks: Iterable[Callable[[TrainJob], None]] | None = None,
    ) -> TrainJob:
        """Wait (on a watch) until the TrainJob has one of ``status``; returns it as :meth:`get_job`
        does; ``callbacks`` run on the client's loop thread
        (:meth:`AsyncTrainerClient.wait_for_job_status`, for what it raises)."""
        polling_interval, callbacks = legacy_callbacks(polling_interval, callbacks)
        return self._run(self._client.wait_for_job_status(name, status, timeout, polling_interval, callbacks))

    def delete_job(self, name: str, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Delete the TrainJob (with ``wait``, return once it is gone). Raises :class:`NotFoundError`."""
        self._run(self._client.delete_job(name, wait=wait, timeout=timeout))

    def delete(
        self, manifests: Source, namespace: str | None = None, *, wait: bool = False, timeout: float = 60.0
    ) -> list[Manifest]:
        """Delete the objects ``manifests`` names; returns them (:meth:`AsyncTrainerClient.delete`,
        for what it raises: :class:`NotFoundError`, :class:`ManifestError`...)."""
        return self._run(self._client.delete(manifests, namespace, wait=wait, timeout=timeout))

    def get_workload(self, name: str) -> WorkloadInfo | None:
        """The TrainJob's Kueue Workload (``cluster_name``: the worker cluster it runs on), if any."""
        return self._run(self._client.get_workload(name))

    def get_podgroup(self, name: str) -> JSON | None:
        """The Volcano PodGroup named after the TrainJob, if any."""
        return self._run(self._client.get_podgroup(name))
