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
import functools
import inspect
import os
import re
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from trainer.client.aio import AsyncTrainerClient
from trainer.client.jobs import legacy_callbacks, legacy_node

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")

Legacy = Callable[[dict[str, Any]], None]
"""Rewrites a call's arguments (by name, defaults filled in) in the caller's thread: an old positional
form, taken with a ``DeprecationWarning`` that names the caller's line."""


def _old_node(arguments: dict[str, Any]) -> None:
    """``get_job_logs(name, step, node)``: :func:`trainer.client.jobs.legacy_node`."""
    arguments["follow"], arguments["node"] = legacy_node(arguments["follow"], arguments["node"], stacklevel=5)


def _old_callbacks(arguments: dict[str, Any]) -> None:
    """``wait_for_job_status(name, status, timeout, callbacks)``: :func:`trainer.client.jobs.legacy_callbacks`."""
    interval, callbacks = arguments["polling_interval"], arguments["callbacks"]
    arguments["polling_interval"], arguments["callbacks"] = legacy_callbacks(interval, callbacks, stacklevel=5)


def _call(method: Callable[..., R], legacy: Legacy | None, client: AsyncTrainerClient, args: Any, kwargs: Any) -> R:
    """``method(client, *args, **kwargs)``, the arguments first rewritten by ``legacy``. Raises
    ``TypeError`` for arguments ``method`` does not take."""
    if legacy is None:
        return method(client, *args, **kwargs)
    call = inspect.signature(method).bind(client, *args, **kwargs)
    call.apply_defaults()
    legacy(call.arguments)
    return method(*call.args, **call.kwargs)


def _blocking(
    method: Callable[Concatenate[AsyncTrainerClient, P], Coroutine[Any, Any, T]], legacy: Legacy | None = None
) -> Callable[Concatenate[TrainerClient, P], T]:
    """The blocking method of :class:`TrainerClient` that runs the coroutine ``method`` of
    :class:`AsyncTrainerClient` on the client's loop and returns its result (or raises what it
    raises); its name, docstring and signature are ``method``'s."""

    @functools.wraps(method)
    def blocking(self: TrainerClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(_call(method, legacy, self._client, args, kwargs))

    blocking.__qualname__, blocking.__module__ = f"TrainerClient.{method.__name__}", __name__
    return blocking


def _iterating(
    method: Callable[Concatenate[AsyncTrainerClient, P], AsyncGenerator[T, None]], legacy: Legacy | None = None
) -> Callable[Concatenate[TrainerClient, P], Iterator[T]]:
    """The method of :class:`TrainerClient` that returns an iterator over what the async generator
    ``method`` of :class:`AsyncTrainerClient` yields, each item fetched on the client's loop; its
    name, docstring and signature are ``method``'s (returning an ``Iterator``)."""

    @functools.wraps(method)
    def iterating(self: TrainerClient, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._iterate(_call(method, legacy, self._client, args, kwargs))

    iterating.__qualname__, iterating.__module__ = f"TrainerClient.{method.__name__}", __name__
    signature = inspect.signature(method)
    returns = re.sub(r"^AsyncGenerator\[(.*), None\]$", r"Iterator[\1]", str(signature.return_annotation))
    iterating.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
    return iterating


CLOSE_TIMEOUT = 10.0
"""Seconds :func:`_shut_down` waits for the connection to close and for the loop thread to end."""


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread of :class:`TrainerClient`: run ``loop`` until stopped, then close it."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _shut_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread, client: AsyncTrainerClient | None) -> None:
    """Close ``client`` (when given) on ``loop``, then stop the loop, which ends its ``thread``
    (:func:`_serve`). :class:`TrainerClient`'s finalizer: run once, by :meth:`TrainerClient.close`,
    when the client is garbage-collected or at interpreter exit, whichever comes first. Run on the
    loop's own thread (a callback dropped the last reference), it schedules the same and returns.
    Raises ``TimeoutError`` when the connection is not closed within :data:`CLOSE_TIMEOUT` seconds
    (the loop is stopped all the same)."""
    if threading.current_thread() is thread:
        if client is None:
            loop.stop()
        else:
            loop.create_task(client.close()).add_done_callback(lambda _: loop.stop())
        return
    try:
        if client is not None and thread.is_alive():
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=CLOSE_TIMEOUT)
    finally:
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=CLOSE_TIMEOUT)


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
    """Blocking TrainJob client for one namespace: each method is the :class:`AsyncTrainerClient`
    method of the same name (its docstring says what it does and raises), run to its end on the
    client's own loop; ``get_job_logs`` returns an iterator, and the callbacks of
    ``wait_for_job_status`` run on the loop's thread.

    ``backend_config`` is a :class:`KubernetesBackendConfig` (the kubeflow SDK's own works too:
    its ``namespace``, ``config_file`` and ``context`` are read), or a kubeconfig path (this
    client's first argument before). ``kubeconfig`` defaults to ``$KUBECONFIG``/``~/.kube/config``,
    else the in-cluster configuration; ``namespace`` to the current context's. A namespace given
    here also wins over a manifest's own in :meth:`create_job`, :meth:`create`, :meth:`apply` and
    :meth:`delete`.

    The connection (an aiohttp session) is closed by :meth:`close`, on leaving a ``with`` block, when
    the client is garbage-collected, and at interpreter exit for a client still open then, so a
    script that never closes it ends without aiohttp's ``Unclosed client session`` warnings.

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
        self._thread = threading.Thread(target=_serve, args=(self._loop,), name="trainer-client", daemon=True)
        self._thread.start()
        try:
            self._client = self._run(AsyncTrainerClient.connect(kubeconfig, namespace, context))
        except BaseException:
            _shut_down(self._loop, self._thread, None)
            raise
        self._finalizer = weakref.finalize(self, _shut_down, self._loop, self._thread, self._client)

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

    def close(self) -> None:
        """Close the connection and stop the loop thread; closing again does nothing."""
        self._finalizer()

    def __enter__(self) -> TrainerClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    list_runtimes = _blocking(AsyncTrainerClient.list_runtimes)
    get_runtime = _blocking(AsyncTrainerClient.get_runtime)
    get_runtime_packages = _blocking(AsyncTrainerClient.get_runtime_packages)
    train = _blocking(AsyncTrainerClient.train)
    create_job = _blocking(AsyncTrainerClient.create_job)
    apply = _blocking(AsyncTrainerClient.apply)
    create = _blocking(AsyncTrainerClient.create)
    get_job = _blocking(AsyncTrainerClient.get_job)
    list_jobs = _blocking(AsyncTrainerClient.list_jobs)
    get_job_logs = _iterating(AsyncTrainerClient.get_job_logs, _old_node)
    get_job_events = _blocking(AsyncTrainerClient.get_job_events)
    wait_for_job_status = _blocking(AsyncTrainerClient.wait_for_job_status, _old_callbacks)
    delete_job = _blocking(AsyncTrainerClient.delete_job)
    delete = _blocking(AsyncTrainerClient.delete)
    get_workload = _blocking(AsyncTrainerClient.get_workload)
    get_podgroup = _blocking(AsyncTrainerClient.get_podgroup)
    why_waiting = _blocking(AsyncTrainerClient.why_waiting)
    optimize = _blocking(AsyncTrainerClient.optimize)
    get_optimization_job = _blocking(AsyncTrainerClient.get_optimization_job)
    list_optimization_jobs = _blocking(AsyncTrainerClient.list_optimization_jobs)
    list_trials = _blocking(AsyncTrainerClient.list_trials)
    get_best_results = _blocking(AsyncTrainerClient.get_best_results)
    wait_for_optimization_job_status = _blocking(AsyncTrainerClient.wait_for_optimization_job_status)
    suspend_optimization_job = _blocking(AsyncTrainerClient.suspend_optimization_job)
    resume_optimization_job = _blocking(AsyncTrainerClient.resume_optimization_job)
    delete_optimization_job = _blocking(AsyncTrainerClient.delete_optimization_job)
