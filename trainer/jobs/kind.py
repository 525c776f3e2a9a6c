"""What a kind of job is to the reconcile every kind shares (:mod:`trainer.jobs.reconcile`): its facts and
a plain function per step, as kubeflow/trainer's ``pkg/runtime/framework/interface.go`` declares one method
per extension point; what it derives once per reconcile (its info, :class:`Expanded`); and what it says when
it cannot be expanded now (:class:`Blocked`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from trainer.api.base import Condition
from trainer.api.jobkinds import KindFacts
from trainer.api.kinds import Resource
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.jobs.child_writer import Desired
from trainer.jobs.gang.base import GangInput, GangPlan

Latest = Callable[[Resource, "str | None", str], "JSON | None"]
"""``(resource, namespace, name) -> the object`` as the controller's caches and its own writes know it
last (:meth:`~trainer.jobs.features.own_writes.OwnWrites.latest`)."""


class Expanded(Protocol):
    """What a kind derives once per reconcile (its info) says of itself."""

    @property
    def gang(self) -> GangInput:
        """The job as its gang scheduler sees it."""
        ...

    @property
    def requeue_after(self) -> float | None:
        """Seconds after which to look again although nothing changed (a TTL, a deadline), or None."""
        ...

    @property
    def pod_ready(self) -> bool:
        """Whether a pod of the job runs now (:func:`trainer.jobs.facts.pod_ready` of its Jobs)."""
        ...


J = TypeVar("J", bound=BaseModel)
I = TypeVar("I", bound=Expanded)  # noqa: E741 (the kind's derived info)

Event = tuple[str, str, str]
"""``(type, reason, message)`` of an Event to record on the job."""


@dataclass
class Blocked:
    """The job cannot be expanded now (e.g. its runtime is missing), or something else runs it (a JobSet
    Kubeflow Trainer made): write ``desired`` and, unless None, these conditions with ``status``; no
    children are built."""

    conditions: list[Condition] | None
    desired: Desired = field(default_factory=Desired)
    status: JSON | None = None
    """Status fields written with ``conditions`` besides them (a JobSet's ``jobsStatus``); None: none."""
    requeue_after: float | None = None
    """Seconds after which to look again although nothing changed (a deadline), or None."""


def no_events(_info: object) -> list[Event]:
    """A kind that tells nothing besides its condition transitions."""
    return []


@dataclass(frozen=True, kw_only=True)
class Kind(Generic[J, I]):
    """One kind of job as :meth:`~trainer.jobs.reconcile.Reconciler.reconcile` runs it: its facts and a
    plain function per step."""

    facts: KindFacts
    expand: Callable[[Reader, JSON, J], I | Blocked]
    """Everything derived from the job (the object as stored, parsed as ``J``) and what it depends on,
    once per reconcile; :class:`Blocked` when it cannot be expanded now."""
    offloaded: Callable[[I], I] | None = None
    """The rest of the expansion when it is pure but slow (an OptimizationJob's sampler): run in a worker
    thread on what ``expand`` returned, so that one tenant's job never holds the event loop every other
    job's reconcile shares; None: ``expand`` does it all."""
    desired: Callable[[Reader, I, GangPlan], Desired]
    """The writes the job needs now."""
    conditions: Callable[[I, GangPlan], list[Condition] | None]
    """The conditions the job should carry (without timestamps); None: write no status."""
    status: Callable[[JSON, I | None, list[JSON] | None], JSON]
    """The whole status to write (info None: the job could not be expanded); every key it names is
    compared with the stored status and merge-patched (None deletes)."""
    events: Callable[[I | None], list[Event]] = no_events
    """Events to record with a status write besides those of condition transitions (a restart)."""
    settle: Callable[[I, Desired, Latest], I] | None = None
    """``info`` as the child writes of ``desired`` just left the children (read through ``Latest``), so
    the reconcile their watch echoes would bring finds nothing to write; None: the kind does not read its
    writes back, and their echoes bring the reconcile that counts them."""
