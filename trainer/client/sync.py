"""The blocking client: :class:`TrainerClient` runs an :class:`AsyncTrainerClient` on an event loop
of its own, in a daemon thread, so it works in scripts and in notebooks (whose own loop is
already running) alike. Method names and arguments are those of the kubeflow SDK's
``TrainerClient`` where they overlap."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Collection, Coroutine, Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from trainer.client.aio import DEFAULT_POD_TIMEOUT, DEFAULT_WAIT_TIMEOUT, AsyncTrainerClient
from trainer.client.manifest import Manifest, Source
from trainer.client.multicluster import WorkloadInfo
from trainer.client.types import COMPLETE, Event
from trainer.json_codec import JSON

T = TypeVar("T")


class TrainerClient:
    """Blocking TrainJob client for one namespace; see :class:`AsyncTrainerClient` for what each
    method does and raises.

    ``kubeconfig`` defaults to ``$KUBECONFIG``/``~/.kube/config``, else the in-cluster
    configuration; ``namespace`` to the current context's. Close with :meth:`close` or use as a
    context manager.
    """

    def __init__(self, kubeconfig: str | None = None, namespace: str | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="trainer-client", daemon=True)
        self._thread.start()
        try:
            self._client = self._run(AsyncTrainerClient.connect(kubeconfig, namespace))
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

    def create_job(
        self, manifest: Source, namespace: str | None = None, *, queue: str | None = None, multicluster: bool = False
    ) -> TrainJob:
        """Create one TrainJob from a dict, a YAML path or string, or a :class:`TrainJob`; with
        ``multicluster``, for MultiKueue to run on a worker cluster (``queue``: its LocalQueue)."""
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
        """Server-side apply TrainJobs and runtimes; returns the stored objects. ``queue`` and
        ``multicluster`` mark the TrainJobs as :meth:`create_job` does."""
        return self._run(self._client.apply(manifests, namespace, force, queue=queue, multicluster=multicluster))

    def get_job(self, name: str) -> TrainJob:
        """The TrainJob ``name``."""
        return self._run(self._client.get_job(name))

    def list_jobs(
        self,
        runtime: str | TrainingRuntime | ClusterTrainingRuntime | None = None,
        *,
        label_selector: str | None = None,
        queue: str | None = None,
        all_namespaces: bool = False,
    ) -> list[TrainJob]:
        """TrainJobs, oldest first, filtered by runtime, label selector and queue."""
        return self._run(
            self._client.list_jobs(runtime, label_selector=label_selector, queue=queue, all_namespaces=all_namespaces)
        )

    def wait_for_job_status(
        self,
        name: str,
        status: str | Collection[str] = frozenset({COMPLETE}),
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        callbacks: Iterable[Callable[[TrainJob], None]] | None = None,
    ) -> TrainJob:
        """Wait (on a watch) until the TrainJob has one of ``status``; callbacks run on the
        client's loop thread."""
        return self._run(self._client.wait_for_job_status(name, status, timeout, callbacks))

    def get_job_logs(
        self,
        name: str,
        step: str | None = None,
        node: int | None = None,
        follow: bool = False,
        *,
        container: str | None = None,
        pod_timeout: float = DEFAULT_POD_TIMEOUT,
    ) -> Iterator[str]:
        """Log lines of node ``node`` of step ``step``; waits for the pod to start."""
        return self._iterate(
            self._client.get_job_logs(name, step, node, follow, container=container, pod_timeout=pod_timeout)
        )

    def get_job_events(self, name: str) -> list[Event]:
        """Events about the TrainJob and its Jobs, Pods and PodGroup, oldest first."""
        return self._run(self._client.get_job_events(name))

    def delete_job(self, name: str, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Delete the TrainJob."""
        self._run(self._client.delete_job(name, wait=wait, timeout=timeout))

    def list_runtimes(self) -> list[TrainingRuntime | ClusterTrainingRuntime]:
        """TrainingRuntimes of the namespace, then ClusterTrainingRuntimes."""
        return self._run(self._client.list_runtimes())

    def get_runtime(self, name: str) -> TrainingRuntime | ClusterTrainingRuntime:
        """The TrainingRuntime ``name``, else the ClusterTrainingRuntime."""
        return self._run(self._client.get_runtime(name))

    def get_workload(self, name: str) -> WorkloadInfo | None:
        """The TrainJob's Kueue Workload (``cluster_name``: the worker cluster it runs on), if any."""
        return self._run(self._client.get_workload(name))

    def get_podgroup(self, name: str) -> JSON | None:
        """The Volcano PodGroup named after the TrainJob, if any."""
        return self._run(self._client.get_podgroup(name))
