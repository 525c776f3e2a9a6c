"""Read-your-own-writes over the caches: a reconcile that runs before the informer has delivered what
the previous reconcile wrote sees that write, not the older cached object, so it does not write the
same child or the same status again.

The apiserver answers every write with the stored object; :class:`OwnWrites` keeps the last answer per
object until the cache has caught up with it. Whether it has is decided by resourceVersion, compared
as a number: an object's own resourceVersion only grows, and an informer that has delivered an event
at or after a given resourceVersion has delivered every change before it (one etcd revision sequence;
what the Kubernetes "comparable resource version" semantics, KEP-5504, guarantee). A resourceVersion
that is not a number makes the cache win, as without this module. Client-go's controllers solve the
same problem with per-object "expectations" (k8s.io/kubernetes ``pkg/controller/controller_utils.go``
``ControllerExpectations``); this keeps the object itself, so the next reconcile compares against
what is really stored.

A write may also be remembered as *settled*: one after which a reconcile would write nothing (a status
write that changed only progress counts, which no decision reads back; a child written by a reconciler
that reads its writes back before its status, ``settles_children``). The watch's report of that very
version (same resourceVersion) is then its echo, and :meth:`OwnWrites.settled_echo` says so once, so the
manager does not reconcile the job again for it. Any other version (someone else's write since) is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.api.kinds import Resource
from trainer.framework.bounded import BoundedDict
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

if TYPE_CHECKING:
    from trainer.framework.controller import Reader

MAX_KEPT = 512
"""Answers kept at most (the oldest go first): enough for every reconcile in flight under a burst; the
cache catches up within milliseconds, after which an entry is dropped at its next read."""
MAX_SETTLED = 4096
"""Settled writes whose echo is awaited, at most (the oldest go first; an entry is a key and a number):
a burst of N jobs writes ~3N children, whose echoes a loaded watch may bring seconds later. One that
went too soon costs a reconcile that writes nothing, never a missed change."""


def resource_version(obj: JSON | None) -> int | None:
    """``metadata.resourceVersion`` as a number, or None when absent or not a number."""
    value = meta(obj).resource_version
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _key(res: Resource, obj: JSON) -> tuple[Resource, str, str]:
    """``(res, namespace, name)`` of ``obj``; the namespace is "" for a cluster-scoped object."""
    m = meta(obj)
    return res, str(m.namespace or ""), str(m.name or "")


class OwnWrites:
    """The apiserver's answers to this controller's writes, until its caches have them."""

    def __init__(self, limit: int = MAX_KEPT, settled_limit: int = MAX_SETTLED) -> None:
        self._kept: BoundedDict[tuple[Resource, str, str], tuple[int, JSON]] = BoundedDict(limit)
        self._settled: BoundedDict[tuple[Resource, str, str], int] = BoundedDict(settled_limit)
        """Writes remembered as settled whose echo has not come yet: key -> resourceVersion."""

    def __len__(self) -> int:
        return len(self._kept)

    def remember(self, res: Resource, stored: JSON, settled: bool = False) -> None:
        """Keep ``stored`` (the object a write of ``res`` returned, as the cache would keep it);
        ``settled``: a reconcile of exactly this version would write nothing (see :meth:`settled_echo`)."""
        rv = resource_version(stored)
        if rv is None or not meta(stored).name:
            return
        key = _key(res, stored)
        self._kept.pop(key, None)
        self._kept[key] = (rv, stored)
        self._settled.pop(key, None)
        if settled:
            self._settled[key] = rv

    def settled_echo(self, res: Resource, obj: JSON) -> bool:
        """Whether ``obj`` (as a watch of ``res`` reports it) is the very version a write remembered as
        settled returned; True once per such write."""
        key = _key(res, obj)
        rv = self._settled.get(key)
        if rv is None or rv != resource_version(obj):
            return False
        del self._settled[key]
        return True

    def latest(self, reader: Reader, res: Resource, namespace: str | None, name: str) -> JSON | None:
        """The newer of the cached object and the last answer to a write of it: the answer while the
        cache has not caught up with it (an older object, or none yet), else the cached object (None when
        it was deleted since)."""
        key = (res, namespace or "", name)
        cached = reader.get(res, namespace, name)
        kept = self._kept.get(key)
        if kept is None:
            return cached
        rv, stored = kept
        if cached is None:
            if reader.seen(res, rv):
                del self._kept[key]  # the cache has seen our write, and the object is gone since
                return None
            return stored
        cached_rv = resource_version(cached)
        if cached_rv is None or cached_rv >= rv:
            del self._kept[key]
            return cached
        return stored
