"""The errors the client raises, one class per thing a caller may want to handle.

Every class derives from :class:`TrainerClientError`. Where the kubeflow SDK
(``kubeflow/trainer/backends/kubernetes/backend.py``) raises a builtin for the same situation the
class derives from that builtin too, so code written against the SDK keeps working:
``TimeoutError`` for a wait that ran out, ``RuntimeError`` for a job that Failed, an object that
does not exist or logs that cannot be read, ``ValueError`` for bad input.

The apiserver's refusals are :class:`ApiServerError` and its subclasses by HTTP status
(:class:`NotFoundError` 404, :class:`ForbiddenError` 403, :class:`ConflictError` 409 with
:class:`AlreadyExistsError`, :class:`InvalidError` 422 with the apiserver's ``causes``): the public
methods of :class:`~trainer.client.AsyncTrainerClient`, :class:`~trainer.client.AsyncJobClient` and
so :class:`~trainer.client.TrainerClient` translate the transport's error at their boundary
(:func:`translates_api_errors`), keeping it as ``__cause__``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from trainer.api.waiting import Waiting
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

C = TypeVar("C", bound=type)


class TrainerClientError(Exception):
    """Base of every error of :mod:`trainer.client`."""


TrainerError = TrainerClientError
"""The base of every error of :mod:`trainer.client` (another name of :class:`TrainerClientError`)."""


@dataclass(frozen=True)
class Cause:
    """One of the ``details.causes`` of the apiserver's ``Status`` (``k8s.io/apimachinery``
    ``pkg/apis/meta/v1/types.go`` ``StatusCause``): ``field`` (e.g. ``spec.trainer.numNodes``, may be
    empty), ``reason`` (``FieldValueInvalid``, ``FieldValueRequired``...) and ``message``."""

    field: str
    reason: str
    message: str


class ApiServerError(TrainerClientError, ApiError, RuntimeError):
    """The apiserver refused a request: ``status`` (HTTP code), ``reason`` (the ``Status`` reason,
    e.g. ``Invalid``) and ``message`` are its answer's, ``causes`` (:class:`Cause`) its
    ``details.causes``. A ``RuntimeError`` too, as the kubeflow SDK raises for a failed call. The
    message of one translated from the transport is ``the apiserver refused: <status> <reason>:
    <message>``; its ``__cause__`` is that error. It is a
    :class:`~trainer.framework.kube.client.ApiError` as well (``body``, ``not_found``...), so code
    of this project that handles the transport's error handles it alike."""

    def __init__(
        self,
        text: str,
        *,
        status: int,
        reason: str = "",
        message: str = "",
        causes: Iterable[Cause] = (),
        body: JSON | None = None,
    ) -> None:
        self.status, self.reason, self.message, self.causes = status, reason, message or text, tuple(causes)
        self.body = body if body is not None else {"kind": "Status", "code": status, "reason": reason, "message": text}
        self.retry_after = None
        Exception.__init__(self, text)  # not ApiError's: its arguments are the answer's


class ForbiddenError(ApiServerError):
    """HTTP 403: the credentials may not do this (RBAC), or the namespace is being deleted."""


class ConflictError(ApiServerError):
    """HTTP 409: the object exists already, was changed meanwhile (resourceVersion), or a
    server-side apply conflicts with another field manager's fields (``force`` takes them)."""


class InvalidError(ApiServerError, ValueError):
    """HTTP 422: the apiserver's validation (the CRD schema, its CEL rules or an admission webhook)
    refused the object; ``causes`` name the fields. A ``ValueError`` too: retrying the same
    request cannot help."""


class ManifestError(TrainerClientError, ValueError):
    """A manifest could not be read or is not a valid object of a supported kind. The message is one
    line that names the file (or ``<string>``/``<object>``) and document it comes from."""


class NotFoundError(ApiServerError, LookupError):
    """The named object does not exist (HTTP 404): ``kind``, ``namespace`` (None for a
    cluster-scoped one or when unknown), ``name``. A ``RuntimeError`` too: the SDK raises one
    ("Failed to get TrainJob"). ``text`` replaces the message ``<kind> <namespace>/<name> not found``."""

    def __init__(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        text: str | None = None,
        reason: str = "NotFound",
        message: str = "",
        causes: Iterable[Cause] = (),
    ) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        where = f"{namespace}/{name}" if namespace else name
        text = text or f"{kind} {where} not found"
        super().__init__(text, status=404, reason=reason, message=message, causes=causes)


class AlreadyExistsError(ConflictError):
    """An object of that name exists already (HTTP 409 on create)."""

    def __init__(self, kind: str, namespace: str | None, name: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        where = f"{namespace}/{name}" if namespace else name
        super().__init__(f"{kind} {where} already exists", status=409, reason="AlreadyExists")


class JobFailedError(TrainerClientError, RuntimeError):
    """The job reached ``Failed`` while a wait wanted another status. ``message`` is the ``Failed``
    condition's ``reason: message``."""

    def __init__(self, kind: str, namespace: str, name: str, message: str) -> None:
        self.kind, self.namespace, self.name, self.message = kind, namespace, name, message
        super().__init__(f"{kind} {namespace}/{name} is Failed: {message}")


class JobFinishedError(TrainerClientError, RuntimeError):
    """The job finished (``Complete``) while a wait wanted a status it can no longer reach."""

    def __init__(self, kind: str, namespace: str, name: str, status: str, wanted: Iterable[str]) -> None:
        self.kind, self.namespace, self.name, self.status = kind, namespace, name, status
        self.wanted = sorted(wanted)
        super().__init__(f"{kind} {namespace}/{name} is {status}; it will not become {' or '.join(self.wanted)}")


class WaitTimeoutError(TrainerClientError, TimeoutError):
    """A wait ran out of time. ``last`` is the last status (or state) seen."""

    def __init__(self, what: str, timeout: float, last: str | None) -> None:
        self.what, self.timeout, self.last = what, timeout, last
        seen = f"; last seen: {last}" if last else ""
        super().__init__(f"timed out after {timeout:g}s waiting for {what}{seen}")


def why_text(why: Waiting) -> str:
    """``<reason>: <message> (<source>); next: <step>; see <doc>``: a :class:`~trainer.api.waiting.Waiting` on one
    line, as the errors that carry one end their message."""
    said = f"{why.reason}: {why.message}" if why.message else why.reason
    return f"{said}; next: {why.next_step}; see {why.doc}"


class JobWaitingError(WaitTimeoutError):
    """A wait ran out of time while something holds the job: ``why`` (:class:`trainer.api.waiting.Waiting`:
    ``reason``, ``message``, ``next_step``, ``doc``) says what, by the rule of
    :func:`trainer.api.waiting.why_waiting`. A :class:`WaitTimeoutError` (and ``TimeoutError``) as before."""

    def __init__(self, what: str, timeout: float, last: str | None, why: Waiting) -> None:
        super().__init__(what, timeout, last)
        self.why = why
        self.args = (f"{self.args[0]}; why: {why_text(why)}",)


class PodCannotStartError(TrainerClientError, RuntimeError):
    """A wait for a pod to start stopped early: a container of it cannot start without a change
    (:data:`trainer.api.waiting.CANNOT_START`: ``ImagePullBackOff``, ``InvalidImageName``,
    ``CreateContainerConfigError``...). ``why`` (:class:`trainer.api.waiting.Waiting`) says which and what to do."""

    def __init__(self, what: str, why: Waiting) -> None:
        self.what, self.why = what, why
        super().__init__(f"{what} cannot start: {why_text(why)}")


class LogsUnavailableError(TrainerClientError, RuntimeError):
    """The apiserver could not give a container's logs, e.g. because the node has no kubelet to ask
    (KWOK nodes) or the kubelet is unreachable: the apiserver answers ``500`` with ``Get
    "https://<node>:<port>/containerLogs/<ns>/<pod>/<container>": dial tcp ...``. ``status`` and
    ``detail`` are the apiserver's HTTP code and message."""

    def __init__(self, namespace: str, pod: str, container: str, node: str | None, status: int, detail: str) -> None:
        self.namespace, self.pod, self.container, self.node = namespace, pod, container, node
        self.status, self.detail = status, detail
        on = f" on node {node}" if node else ""
        super().__init__(
            f"logs of container {container!r} of pod {namespace}/{pod}{on} are unavailable "
            f"(apiserver answered {status}): {detail}"
        )


class UnknownNodeError(TrainerClientError, LookupError):
    """A node (pod index) the job's step does not have was asked for, e.g. ``logs --node 5`` of a
    2-node job: ``nodes`` are the indices it has (empty: no pod of the step exists)."""

    def __init__(self, name: str, step: str, node: int, nodes: Iterable[int]) -> None:
        self.name, self.step, self.node, self.nodes = name, step, node, sorted(set(nodes))
        have = f"its nodes are: {', '.join(map(str, self.nodes))}" if self.nodes else "it has no pod of that step"
        super().__init__(f"{name} has no node {node} in step {step!r}; {have}")


class UnknownStepError(TrainerClientError, ValueError):
    """A step (replicated job) the job does not have was asked for."""

    def __init__(self, name: str, step: str, steps: Iterable[str]) -> None:
        self.name, self.step, self.steps = name, step, sorted(steps)
        super().__init__(f"{name} has no step {step!r}; its steps are: {', '.join(self.steps) or '(none yet)'}")


def _causes(error: ApiError) -> list[Cause]:
    """The ``details.causes`` of the apiserver's answer (none when it has none)."""
    details = error.body.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(causes, list):
        return []
    return [
        Cause(str(c.get("field", "")), str(c.get("reason", "")), str(c.get("message", "")))
        for c in causes
        if isinstance(c, dict)
    ]


def from_api_error(error: ApiError) -> ApiServerError:
    """The :class:`ApiServerError` subclass of ``error``'s status (404, 403, 409, 422; else
    :class:`ApiServerError`) with its status, reason, message and causes; the message is ``the
    apiserver refused: <status> <reason>: <message>``. A 404 names what its ``details`` name
    (``kind``: the resource, e.g. ``trainjobs``; ``name``)."""
    text, causes = f"the apiserver refused: {error}", _causes(error)
    if error.status == 404:
        details = error.body.get("details")
        what = details if isinstance(details, dict) else {}
        kind, name = str(what.get("kind", "")), str(what.get("name", ""))
        found = NotFoundError(kind, None, name, text=text, reason=error.reason, message=error.message, causes=causes)
        found.body, found.retry_after = error.body, error.retry_after
        return found
    refusal = {403: ForbiddenError, 409: ConflictError, 422: InvalidError}.get(error.status, ApiServerError)
    translated = refusal(text, status=error.status, reason=error.reason, message=error.message, causes=causes)
    translated.body, translated.retry_after = error.body, error.retry_after
    return translated


Method = Callable[..., Any]


def _translating(method: Method) -> Method:
    """``method`` (a coroutine function or an async generator function) raising
    :func:`from_api_error` of the :class:`ApiError` it raises, that error as ``__cause__``."""
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def generator(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            try:
                async with contextlib.aclosing(method(*args, **kwargs)) as items:
                    async for item in items:
                        yield item
            except ApiError as e:
                if isinstance(e, ApiServerError):
                    raise
                raise from_api_error(e) from e

        return generator

    @functools.wraps(method)
    async def coroutine(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except ApiError as e:
            if isinstance(e, ApiServerError):
                raise
            raise from_api_error(e) from e

    return coroutine


def translates_api_errors(cls: C) -> C:
    """Class decorator: every public coroutine and async generator method of ``cls`` (defined on it)
    raises :class:`ApiServerError` (by :func:`from_api_error`) where the transport raised
    :class:`~trainer.framework.kube.client.ApiError`; the one place the client translates them."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and (inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value)):
            setattr(cls, name, _translating(value))
    return cls
