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

from trainer.api.kinds import Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Index, Key, controller_uid, key_of
from trainer.framework.kube.projection import Projection, strip_managed_fields
from trainer.framework.owner import owner_permission
from trainer.framework.permissions import OWNED, WATCH, Permission

__all__ = [
    "Context",
    "Controller",
    "EventFilter",
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
    from trainer.framework.kube.queue import WorkQueue
    from trainer.framework.metrics import Metrics


class Store(Protocol):
    """A cache of one resource (an informer, or a test's table)."""

    absent: bool
    """True while the apiserver does not serve the resource and never did (a 404 before any list)."""

    def get(self, namespace: str | None, name: str) -> JSON | None: ...

    def items(self) -> list[JSON]: ...

    def owned_by(self, uid: str) -> list[JSON]: ...

    def seen(self, resource_version: int) -> bool: ...

    def add_handler(self, handler: Callable[[JSON | None, JSON | None], None]) -> None:
        """Call ``handler(old, new)`` on every change of the cache."""


class UndeclaredRead(KeyError):
    """A reconciler read a resource its controller did not declare (a wiring bug, never retried)."""


class Reader:
    """What one controller may read: the caches of the resources it declared, by resource."""

    def __init__(
        self, controller: str, stores: dict[Resource, Store], keeps: dict[Resource, Projection] | None = None
    ) -> None:
        self.controller, self.stores, self.keeps = controller, stores, keeps or {}

    def store(self, res: Resource) -> Store:
        """The cache of ``res``. Raises :class:`UndeclaredRead` for an undeclared resource."""
        return self._store(res)

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

    def served(self, res: Resource) -> bool:
        """Whether the apiserver serves ``res``, as its cache found: False while its informer was answered
        404 and never listed it (a CRD not installed, an API group the cluster lacks), True otherwise.
        Raises :class:`UndeclaredRead` for an undeclared resource."""
        return not self._store(res).absent

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
    verbs: tuple[str, ...] = OWNED
    """What the reconciler asks of owned objects besides its informer's list/watch (its RBAC verbs):
    by default server-side apply, get and delete (:data:`~trainer.framework.permissions.OWNED`); an
    object created once and never deleted, e.g. ``("create", "get", "patch")``."""


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
    label: str | None = None
    """Only the objects this label selector matches are listed and watched (e.g.
    ``training.kubeflow.org/operator-name=mpi-operator`` of Pods); None: every one."""
    optional: bool = False
    """Only an optional feature reads it (a migration from another operator): its CRD absent is no
    error (:class:`~trainer.framework.kube.cache.Informer`'s ``optional``)."""


class Source(NamedTuple):
    """One cache a controller declares: the resource, the label and field selectors that narrow it,
    what it keeps of each object and the uid it files each under. Equal sources share one informer."""

    resource: Resource
    label: str | None
    keep: Projection
    field_selector: str | None = None
    index_by: Index = controller_uid
    optional: bool = False


class TerminalError(Exception):
    """A reconcile failure that retrying cannot fix (e.g. a spec the operator cannot read): counted in
    ``controller_runtime_terminal_reconcile_errors_total`` and not retried; the next change of the
    object reconciles it again."""


@dataclass(frozen=True, kw_only=True)
class Context:
    """What the manager hands a reconciler factory: the client to write through, the controller's
    reader, events, metrics and work queue. A kind's own settings are bound in its declaration."""

    kube: KubeClient
    reader: Reader
    events: EventRecorder
    metrics: Metrics | None = None
    """Where job outcomes are counted; None: nowhere."""
    queue: WorkQueue[Key] | None = None
    """The controller's work queue (a reconciler may queue a key for later through it); None: none."""


EventFilter = Callable[[Resource, "JSON | None", "JSON | None"], bool]
"""``(resource, old, new) -> whether this change of a primary or an owned object is reconciled``, as
controller-runtime's ``builder.WithEventFilter`` predicates: a False answer drops the event before any key
is queued."""


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
    event_filter: EventFilter | None = None
    """Asked of every change of the primary and the owned objects before it is queued; None: all are."""
    needs: tuple[Permission, ...] = ()
    """What the reconciler asks of the apiserver besides what :meth:`permissions` derives from the
    declaration (the primary's status), declared where that code is."""

    def permissions(self) -> list[Permission]:
        """Its RBAC: list/watch on the primary and on every owned and watched resource (their informers),
        the :attr:`Owns.verbs` of every owned resource, ``update`` on the primary's finalizers when it
        owns any (:func:`~trainer.framework.owner.owner_permission`) and :attr:`needs`."""
        out = [Permission(self.for_, WATCH, f"the {self.name} controller's primary: its informer")]
        for o in self.owns:
            where = f"of those labelled `{o.label}` (RBAC cannot narrow by label)" if o.label else "of every one"
            verbs = ", ".join(v for v in o.verbs if v not in WATCH)
            out.append(
                Permission(
                    o.resource, (*WATCH, *o.verbs), f"the {self.name} controller owns them: informer {where}; {verbs}"
                )
            )
        for w in self.watches:
            narrowed = [f"`{s}`" for s in (w.label, w.field_selector) if s]
            where = f" of those {' and '.join(narrowed)} selects" if narrowed else ""
            out.append(Permission(w.resource, WATCH, f"the {self.name} controller watches them: informer{where}"))
        if self.owns:
            out.append(owner_permission(self.for_))
        return [*out, *self.needs]

    def sources(self) -> list[Source]:
        """Every cache this controller reads (:class:`Source`), primary first."""
        out = [Source(self.for_, None, strip_managed_fields)]
        out += [Source(o.resource, o.label, o.keep) for o in self.owns]
        out += [Source(w.resource, w.label, w.keep, w.field_selector, w.index_by, w.optional) for w in self.watches]
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
