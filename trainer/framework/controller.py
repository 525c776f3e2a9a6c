"""Controllers declared once, as controller-runtime's builder declares them (``For`` / ``Owns`` / ``Watches``).

A :class:`Controller` names its primary resource, the resources it owns (with the label every owned
object carries, which narrows their informer) and the resources it watches (with the mapping from a
changed object to the keys of the primaries to reconcile), and how to build its reconciler. The
manager derives everything it starts from these declarations: one informer per (resource, label),
shared between controllers, the event handlers, one work queue and its metrics per controller, and a
:class:`Reader` per controller over exactly the informers that controller declared. A reconciler
reads nothing else: reading an undeclared resource raises, so a cache that is read but never
started cannot exist.

Mirrors kubernetes-sigs/controller-runtime ``pkg/builder/controller.go`` (``For``, ``Owns``,
``Watches`` with ``handler.EnqueueRequestsFromMapFunc``) and ``pkg/reconcile`` (``Reconciler``,
``TerminalError``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from api.kinds import Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Index, Key, controller_uid, key_of
from trainer.framework.kube.projection import Projection, strip_managed_fields
from trainer.jobs.own_writes import OwnWrites
from trainer.jobs.status_writer import IdleLane, NoLane, ProgressClock

__all__ = [
    "Context",
    "Controller",
    "Key",
    "MapFn",
    "Owns",
    "Reader",
    "Reconcile",
    "Source",
    "Store",
    "TerminalError",
    "UndeclaredRead",
    "Watches",
    "every_primary",
]

if TYPE_CHECKING:
    from trainer.framework.kube.client import KubeClient
    from trainer.framework.kube.events import EventRecorder
    from trainer.framework.metrics import Metrics
    from trainer.jobs.gang.base import GangScheduler


class Store(Protocol):
    """A cache of one resource (an informer, or a test's table)."""

    def get(self, namespace: str | None, name: str) -> JSON | None: ...

    def items(self) -> list[JSON]: ...

    def owned_by(self, uid: str) -> list[JSON]: ...

    def seen(self, resource_version: int) -> bool: ...


class UndeclaredRead(KeyError):
    """A reconciler read a resource its controller did not declare (a wiring bug, never retried)."""


class Reader:
    """What one controller may read: the caches of the resources it declared, by resource."""

    def __init__(
        self, controller: str, stores: dict[Resource, Store], keeps: dict[Resource, Projection] | None = None
    ) -> None:
        self.controller, self.stores, self.keeps = controller, stores, keeps or {}

    def _store(self, res: Resource) -> Store:
        store = self.stores.get(res)
        if store is None:
            raise UndeclaredRead(
                f"controller {self.controller!r} reads {res.kind} ({res.api_version}) but does not declare it: "
                "add it to the controller's owns or watches"
            )
        return store

    def get(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        """The cached object, or None. Raises :class:`UndeclaredRead` for an undeclared resource."""
        return self._store(res).get(namespace, name)

    def items(self, res: Resource) -> list[JSON]:
        """Every cached object of ``res``. Raises :class:`UndeclaredRead` for an undeclared resource."""
        return self._store(res).items()

    def owned(self, res: Resource, uid: str) -> list[JSON]:
        """Cached objects of ``res`` whose controller owner reference has ``uid``."""
        return self._store(res).owned_by(uid)

    def about(self, res: Resource, uid: str) -> list[JSON]:
        """Cached objects of ``res`` filed under ``uid`` by their declaration's :attr:`Watches.index_by`
        (an Event: those about the object with ``uid``)."""
        return self._store(res).owned_by(uid)

    def seen(self, res: Resource, resource_version: int) -> bool:
        """Whether the cache of ``res`` has applied every change up to ``resource_version``."""
        return self._store(res).seen(resource_version)

    def kept(self, res: Resource) -> Projection:
        """What the cache of ``res`` keeps of an object (its :attr:`Owns.keep`), without interning: what a
        desired object is compared through, so a projected cache never looks like drift."""
        return self.keeps.get(res, strip_managed_fields)

    def declares(self, res: Resource) -> bool:
        """Whether the controller declared ``res``."""
        return res in self.stores


@dataclass(frozen=True)
class Owns:
    """Objects the controller creates, with a controller owner reference to the primary."""

    resource: Resource
    label: str | None = None
    """A label key every owned object carries; the informer lists only objects that have it."""
    keep: Projection = strip_managed_fields
    """What the cache keeps of each object (:mod:`trainer.framework.kube.projection`): only what the reconciler
    reads (a Job without its Pod template)."""
    urgent: Callable[[JSON | None, JSON], bool] | None = None
    """``(old, new) -> whether this change brings the owner's reconcile at once`` rather than with the
    children batch (a Job that has just finished); None: never."""


MapFn = Callable[[JSON, Reader], Iterable[Key]]
"""``(changed object, reader) -> keys of the primaries to reconcile``."""


@dataclass(frozen=True)
class Watches:
    """Objects the controller reads but does not own; a change maps to primaries to reconcile."""

    resource: Resource
    to_keys: MapFn
    field_selector: str | None = None
    """Only the objects this field selector matches are listed and watched (e.g.
    ``reason=FailedCreate`` of Events); None: every one."""
    keep: Projection = strip_managed_fields
    """What the cache keeps of each object (:mod:`trainer.framework.kube.projection`)."""
    index_by: Index = controller_uid
    """The uid each cached object is filed under for :meth:`Reader.about` (an Event: the object it is
    about); by default its controller owner's."""


class Source(NamedTuple):
    """One cache a controller declares: the resource, the label and field selectors that narrow it,
    what it keeps of each object and the uid it files each under. Equal sources share one informer."""

    resource: Resource
    label: str | None
    keep: Projection
    field_selector: str | None = None
    index_by: Index = controller_uid


class TerminalError(Exception):
    """A reconcile failure that retrying cannot fix (e.g. a spec the operator cannot read): counted in
    ``controller_runtime_terminal_reconcile_errors_total`` and not retried; the next change of the
    object reconciles it again."""


@dataclass(frozen=True, kw_only=True)
class Context:
    """What the manager hands a reconciler factory; a kind's own settings are bound in its declaration."""

    kube: KubeClient
    reader: Reader
    events: EventRecorder
    gang: GangScheduler
    metrics: Metrics | None = None
    """Where job outcomes are counted; None: nowhere."""
    status_coalesce_seconds: float = 1.0
    """``--status-coalesce-seconds``: how long a progress-only status change may wait to be written with
    the next one (0: written at once)."""
    own_writes: OwnWrites = field(default_factory=OwnWrites)
    """What the reconciler wrote, until its caches have it; the manager asks it which watch events are
    echoes of settled writes (:meth:`~trainer.jobs.own_writes.OwnWrites.settled_echo`)."""
    progress_clock: ProgressClock = field(default_factory=ProgressClock)
    """Since when each job's progress-only status change waits; the manager starts it when a child
    changes (see :mod:`trainer.jobs.status_writer`)."""
    lane: IdleLane = field(default_factory=NoLane)
    """The controller's work queue as a job's first status sees it: whether other jobs are new, and
    queueing a job once they are served (see :mod:`trainer.jobs.status_writer`)."""


Reconcile = Callable[[Key], Awaitable[float | None]]
"""Reconcile one key; return seconds to requeue after (None: done); raise to retry with backoff, or
:class:`TerminalError` not to."""


@dataclass(frozen=True)
class Controller:
    """One controller: its primary resource, what it owns and watches, and its reconciler."""

    name: str
    """Lower-case name: the ``controller`` label of the metrics and logs, and the queue's name."""
    for_: Resource
    build: Callable[[Context], Reconcile]
    owns: tuple[Owns, ...] = ()
    watches: tuple[Watches, ...] = field(default_factory=tuple)

    def sources(self) -> list[Source]:
        """Every cache this controller reads (:class:`Source`), primary first."""
        out = [Source(self.for_, None, strip_managed_fields)]
        out += [Source(o.resource, o.label, o.keep) for o in self.owns]
        out += [Source(w.resource, None, w.keep, w.field_selector, w.index_by) for w in self.watches]
        resources = [s.resource for s in out]
        dup = {r.kind for r in resources if resources.count(r) > 1}
        if dup:
            raise ValueError(f"controller {self.name!r} declares {', '.join(sorted(dup))} more than once")
        return out


def every_primary(primary: Resource) -> MapFn:
    """A map function for a cluster-wide object that any primary may depend on (e.g. a Volcano Queue)."""

    def to_keys(_obj: JSON, reader: Reader) -> Iterable[Key]:
        return [key_of(o) for o in reader.items(primary)]

    return to_keys
