"""The errors the client raises, one class per thing a caller may want to handle.

Every class derives from :class:`TrainerClientError`. Where the kubeflow SDK
(``kubeflow/trainer/backends/kubernetes/backend.py``) raises a builtin for the same situation the
class derives from that builtin too, so code written against the SDK keeps working:
``TimeoutError`` for a wait that ran out, ``RuntimeError`` for a job that Failed, an object that
does not exist or logs that cannot be read, ``ValueError`` for bad input.
"""

from __future__ import annotations

from collections.abc import Iterable

from api.waiting import Waiting


class TrainerClientError(Exception):
    """Base of every error of :mod:`trainer.client`."""


class ManifestError(TrainerClientError, ValueError):
    """A manifest could not be read or is not a valid object of a supported kind. The message is one
    line that names the file (or ``<string>``/``<object>``) and document it comes from."""


class NotFoundError(TrainerClientError, LookupError, RuntimeError):
    """The named object does not exist (HTTP 404). A ``RuntimeError`` too: the SDK raises one
    ("Failed to get TrainJob")."""

    def __init__(self, kind: str, namespace: str | None, name: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        where = f"{namespace}/{name}" if namespace else name
        super().__init__(f"{kind} {where} not found")


class AlreadyExistsError(TrainerClientError):
    """An object of that name exists already (HTTP 409 on create)."""

    def __init__(self, kind: str, namespace: str | None, name: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        where = f"{namespace}/{name}" if namespace else name
        super().__init__(f"{kind} {where} already exists")


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
    """``<reason>: <message> (<source>); next: <step>; see <doc>``: a :class:`~api.waiting.Waiting` on one
    line, as the errors that carry one end their message."""
    said = f"{why.reason}: {why.message}" if why.message else why.reason
    return f"{said}; next: {why.next_step}; see {why.doc}"


class JobWaitingError(WaitTimeoutError):
    """A wait ran out of time while something holds the job: ``why`` (:class:`api.waiting.Waiting`:
    ``reason``, ``message``, ``next_step``, ``doc``) says what, by the rule of
    :func:`api.waiting.why_waiting`. A :class:`WaitTimeoutError` (and ``TimeoutError``) as before."""

    def __init__(self, what: str, timeout: float, last: str | None, why: Waiting) -> None:
        super().__init__(what, timeout, last)
        self.why = why
        self.args = (f"{self.args[0]}; why: {why_text(why)}",)


class PodCannotStartError(TrainerClientError, RuntimeError):
    """A wait for a pod to start stopped early: a container of it cannot start without a change
    (:data:`api.waiting.CANNOT_START`: ``ImagePullBackOff``, ``InvalidImageName``,
    ``CreateContainerConfigError``...). ``why`` (:class:`api.waiting.Waiting`) says which and what to do."""

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
