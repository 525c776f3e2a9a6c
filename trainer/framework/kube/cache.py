"""List+watch caches (informers): an in-memory copy of one resource kept current by a watch.

An :class:`Informer` lists once, then watches from the list's resourceVersion (with bookmarks); a watch
that ends normally is reopened from the last resourceVersion seen. On 410 Gone, or after a failure, it
relists and reports the differences as events, so handlers never miss a deletion. Handlers are plain
callables ``(old, new)`` (``old`` None on add, ``new`` None on delete) that must not block: they enqueue
keys.

Failures are retried as client-go's reflector does (k8s.io/client-go ``tools/cache/reflector.go``), with
its backoff (:class:`Backoff`), but promptly when the failure says the apiserver is (re)starting: a
refused or cut connection, a 429/5xx, a 404 for a resource this informer listed before (a restarted
apiserver serves custom resources only once it has read their CRDs) are retried within
:data:`TRANSIENT_WAIT`, so the caches are current again about a second after the apiserver answers. A
``Retry-After`` is honoured up to that too, in the client's own resends as in the informer's: a starting
apiserver answers 503 "the request has been made before all known HTTP paths have been installed" with
``Retry-After: 5`` (k8s.io/apiserver ``pkg/util/notfoundhandler``) and serves within a second.
:attr:`Informer.watching` says whether the cache is being kept current now.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import structlog

from trainer.api.kinds import Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Discovery, Kube, Lister
from trainer.framework.meta import meta

log = structlog.get_logger("trainer.cache")

Key = tuple[str, str]
"""``(namespace, name)``; namespace is "" for cluster-scoped objects."""
Handler = Callable[[JSON | None, JSON | None], None]
Sleep = Callable[[float], Awaitable[None]]

TRANSIENT_WAIT = 1.0
"""Seconds an informer waits at most, jittered down to half, before trying again after a failure that
says the apiserver is (re)starting (see the module docstring), whatever its backoff has grown to."""
NOT_FOUND_GRACE = 60.0
"""Seconds a resource this informer listed before may answer 404 and still be retried within
:data:`TRANSIENT_WAIT`; after that the 404 is believed (the CRD was deleted) and the backoff grows."""


class Backoff:
    """Exponential backoff with jitter that starts over after a quiet period: client-go's
    ``wait.NewExponentialBackoffManager`` (k8s.io/apimachinery ``pkg/util/wait/backoff.go``) with the
    values its reflector uses (k8s.io/client-go ``tools/cache/reflector.go``): 0.8 s, doubling up to a
    30 s cap, each wait plus up to ``jitter`` (100 %) of itself, so [30, 60) s at the cap; back to 0.8 s
    when no wait was asked for ``reset_after`` (2 min). ``clock`` gives seconds (monotonic), ``rand``
    a float in [0, 1)."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial, self.cap, self.factor, self.jitter, self.reset_after = initial, cap, factor, jitter, reset_after
        self.clock, self.rand = clock, rand
        self._step = initial
        self._last: float | None = None

    def next(self) -> float:
        """Seconds to wait now (>= the current step), and step on."""
        now = self.clock()
        if self._last is None or now - self._last > self.reset_after:
            self._step = self.initial
        self._last = now
        wait = self._step
        self._step = min(self._step * self.factor, self.cap)
        return wait * (1 + self.jitter * self.rand())


def key_of(obj: JSON) -> Key:
    """The cache key of an object: ``(namespace or "", name)``. Raises ``KeyError`` without a name. The
    hottest read of metadata (every event, every write): a plain dict read, not :func:`meta`."""
    m = obj.get("metadata") or {}
    return (str(m.get("namespace") or ""), str(m["name"]))


def controller_of(obj: JSON) -> dict[str, Any] | None:
    """The owner reference with ``controller: true``, if any, as a new dict."""
    for ref in meta(obj).owner_references:
        if ref.get("controller"):
            return dict(ref)
    return None


def owner_keys(owner: Resource, *objs: JSON | None) -> list[Key]:
    """The keys of the controllers of ``objs`` (a change's old and new object; None skipped) that are of
    the ``owner`` resource, each once, in order."""
    out: list[Key] = []
    for obj in objs:
        ref = controller_of(obj) if obj is not None else None
        if obj is None or ref is None or ref.get("kind") != owner.kind or ref.get("apiVersion") != owner.api_version:
            continue
        key = (key_of(obj)[0], str(ref["name"]))
        if key not in out:
            out.append(key)
    return out


Index = Callable[[JSON], str | None]
"""``object -> the uid it is filed under`` in a cache (:meth:`Informer.owned_by`), or None: not filed."""


def controller_uid(obj: JSON) -> str | None:
    """The uid of an object's controller owner (:func:`controller_of`), the default :data:`Index`."""
    ref = controller_of(obj)
    return str(ref["uid"]) if ref is not None and ref.get("uid") else None


class Informer:
    """A cache of one resource in one namespace (or all), optionally narrowed by a label selector and a
    field selector (e.g. ``metadata.name=<name>`` for a single object)."""

    def __init__(
        self,
        kube: Lister,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        backoff_max: float = 30.0,
        field_selector: str | None = None,
        transform: Callable[[JSON, JSON | None], JSON] | None = None,
        *,
        index: Index = controller_uid,
        optional: bool = False,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """``transform`` makes what is cached of each listed or watched object from it and the version
        cached before (None: none; see :mod:`trainer.framework.kube.projection`); handlers receive the transformed
        objects. ``index`` files each cached object under a uid for :meth:`owned_by` (default: its
        controller owner's; an Event's: the object it is about). ``backoff_max`` (seconds) is the wait
        after a 404 for a resource never served, and the cap of :class:`Backoff`. ``optional``: only an
        optional feature reads the resource (a migration from another operator): while it is not served
        that is said once, at info, and asked of discovery (:meth:`Kube.serves`) before it is listed, then
        said again when it is served. ``sleep``, ``clock``
        (monotonic seconds) and ``rand`` ([0, 1)) are what the retries use."""
        self.kube, self.res, self.namespace, self.label_selector = kube, res, namespace, label_selector
        self.field_selector = field_selector
        self._transform, self._uid_of = transform, index
        self.synced = asyncio.Event()
        self._store: dict[Key, JSON] = {}
        self._by_owner: dict[str, Key | set[Key]] = {}
        """Owner uid -> the key of its one cached object, or a set of keys when it has several: most jobs
        have one child of each kind, and a set costs 216 bytes where the key is already held."""
        self._handlers: list[Handler] = []
        self._backoff_max = backoff_max
        self.optional = optional
        self._sleep, self._clock, self._rand = sleep, clock, rand
        self._backoff = Backoff(cap=backoff_max, clock=clock, rand=rand)
        self.watching = False
        """True from a successful list on, while its watch runs (and is reopened after a normal end);
        False from any failure until the next successful list."""
        self.absent = False
        """True while the resource is not served and never was (404 before any successful list: its CRD
        is not installed): the cache is empty, rightly."""
        self.failures = 0
        """Failed list or watch attempts since the last successful list."""
        self.rejected = 0
        """Objects whose projection raised (each kept as it came, so the cache goes on)."""
        self._served = False
        self._failing_since: float | None = None
        self._not_found_since: float | None = None
        self.resource_version = ""
        """The resourceVersion of the last list or watch event (bookmarks included) this cache applied."""

    @property
    def name(self) -> str:
        """``<plural>.<group>`` (``<plural>`` for the core group), with the selectors that narrow it."""
        name = f"{self.res.plural}.{self.res.group}" if self.res.group else self.res.plural
        selectors = [s for s in (self.label_selector, self.field_selector) if s]
        return f"{name} ({'; '.join(selectors)})" if selectors else name

    @property
    def healthy(self) -> bool:
        """Listed once and being kept current now: :attr:`watching`, or :attr:`absent`."""
        return self.synced.is_set() and (self.watching or self.absent)

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler(old, new)`` on every change (and once per object on the first list)."""
        self._handlers.append(handler)

    def get(self, namespace: str | None, name: str) -> JSON | None:
        """The cached object, or None."""
        return self._store.get((namespace or "", name))

    def items(self) -> list[JSON]:
        """Every cached object."""
        return list(self._store.values())

    def owned_by(self, uid: str) -> list[JSON]:
        """Cached objects filed under ``uid`` (by default: whose controller owner reference has it)."""
        keys = self._by_owner.get(uid)
        if keys is None:
            return []
        return [self._store[k] for k in ((keys,) if isinstance(keys, tuple) else keys) if k in self._store]

    def seen(self, resource_version: int) -> bool:
        """Whether this cache has applied every change up to ``resource_version`` (compared as numbers:
        see :mod:`trainer.jobs.features.own_writes`); False when its own is not a number."""
        try:
            return int(self.resource_version) >= resource_version
        except ValueError:
            return False

    def _index(self, key: Key, obj: JSON | None, old: JSON | None) -> None:
        index = self._by_owner
        if old is not None and (uid := self._uid_of(old)) and (keys := index.get(uid)) is not None:
            if isinstance(keys, tuple):
                if keys == key:
                    del index[uid]
            else:
                keys.discard(key)
                if len(keys) == 1:
                    index[uid] = next(iter(keys))
        if obj is not None and (uid := self._uid_of(obj)):
            keys = index.get(uid)
            if keys is None:
                index[uid] = key
            elif isinstance(keys, tuple):
                if keys != key:
                    index[uid] = {keys, key}
            else:
                keys.add(key)

    def _set(self, obj: JSON) -> None:
        key = key_of(obj)
        old = self._store.get(key)
        if self._transform is not None:
            try:
                obj = self._transform(obj, old)
            except Exception as e:  # one tenant's object never stops the cache: kept as it came
                self.rejected += 1
                log.error(
                    "cannot project a cached object; kept whole", resource=self.name, key="/".join(key), error=repr(e)
                )
        self._store[key] = obj
        self._index(key, obj, old)
        self._notify(old, obj)

    def _remove(self, key: Key) -> None:
        old = self._store.pop(key, None)
        if old is not None:
            self._index(key, None, old)
            self._notify(old, None)

    def _notify(self, old: JSON | None, new: JSON | None) -> None:
        for handler in self._handlers:
            try:
                handler(old, new)
            except Exception:
                log.exception("cache handler failed", resource=self.res.plural)

    async def _relist(self, kube: Lister) -> str:
        """List (a page at a time from :class:`Kube`: only one page of whole objects is held before
        projection), cache what is new or changed, then drop what the list no longer has."""
        fresh: set[Key] = set()
        rv = ""
        async for items, page_rv in pages(kube, self.res, self.namespace, self.label_selector, self.field_selector):
            rv = page_rv
            for obj in items:
                key = key_of(obj)
                fresh.add(key)
                old = self._store.get(key)
                if old is None or meta(old).resource_version != obj["metadata"].get("resourceVersion"):
                    self._set(obj)
            del items
        for key in [k for k in self._store if k not in fresh]:
            self._remove(key)
        self.synced.set()
        self.resource_version = rv
        return rv

    def handle_event(self, typ: str, obj: JSON) -> None:
        """Apply one watch event (``ADDED``, ``MODIFIED``, ``DELETED``; bookmarks and others are
        ignored) to the cache and tell the handlers; every event with a resourceVersion (bookmarks too)
        moves :attr:`resource_version`."""
        rv = meta(obj).resource_version
        if rv:
            self.resource_version = str(rv)
        if typ in ("ADDED", "MODIFIED"):
            obj.setdefault("apiVersion", self.res.api_version)
            obj.setdefault("kind", self.res.kind)
            self._set(obj)
        elif typ == "DELETED":
            self._remove(key_of(obj))

    def _listed(self) -> None:
        """A list succeeded: the cache is current and its watch about to open."""
        if self.failures and self._failing_since is not None:
            log.info(
                "watching again",
                resource=self.name,
                failures=self.failures,
                seconds=round(self._clock() - self._failing_since, 3),
            )
        if self.absent:
            log.info("resource served now", resource=self.name)
        self.watching, self.absent, self._served = True, False, True
        self.failures, self._failing_since, self._not_found_since = 0, None, None

    def _not_served(self) -> None:
        """The kind is not served (its CRD is not installed): an empty cache, said loudly each time, or
        for an optional kind once, at info."""
        first = not self.absent
        self.absent = True
        self.synced.set()
        if not self.optional:
            log.error("resource not served; is its CRD installed?", resource=self.name, retry_in=self._backoff_max)
        elif first:
            log.info("resource not served: what reads it is off until its CRD is installed", resource=self.name)

    async def _served_now(self, kube: Lister) -> bool:
        """Whether to list now: always, but for a kind not served yet (absent, or optional and never
        listed), which discovery must serve first (a connection that has no discovery: list)."""
        if not (self.absent or (self.optional and not self._served)) or not isinstance(kube, Discovery):
            return True
        if await kube.serves(self.res):
            return True
        self._not_served()
        return False

    def _transient_wait(self) -> float:
        return TRANSIENT_WAIT * (1 - 0.5 * self._rand())

    def _failed(self, error: Exception) -> float:
        """Record a failed list or watch; returns the seconds to wait before listing again."""
        now = self._clock()
        self.watching = False
        self.failures += 1
        if self._failing_since is None:
            self._failing_since = now
        wait = self._backoff.next()
        if isinstance(error, ApiError):
            if error.not_found and not self._served:
                self._not_served()
                return self._backoff_max
            if error.not_found:
                self._not_found_since = self._not_found_since if self._not_found_since is not None else now
                transient = now - self._not_found_since < NOT_FOUND_GRACE
            else:
                self._not_found_since = None
                transient = error.status == 429 or error.status >= 500
            if error.retry_after is not None:  # asked for a wait (429/5xx): as asked, up to TRANSIENT_WAIT
                wait = min(max(float(error.retry_after), 0.1), TRANSIENT_WAIT)
            elif transient:
                wait = min(wait, self._transient_wait())
            what, detail = "list/watch failed", str(error)
        else:  # no answer: refused, reset, cut stream, timeout
            self._not_found_since = None
            wait = min(wait, self._transient_wait())
            what, detail = "list/watch connection failed", repr(error)
        # The first failure of a run is a warning; the retries that follow, debug.
        emit = log.warning if self.failures == 1 else log.debug
        emit(what, resource=self.name, error=detail, failures=self.failures, retry_in=round(wait, 3))
        return wait

    async def run(self) -> None:
        """List and watch until cancelled. Never raises: failures are logged and retried, promptly
        when they say the apiserver is (re)starting, else with :class:`Backoff` (see the module
        docstring); a 404 for a resource never served sets :attr:`absent` and :attr:`synced`, and
        discovery is asked every ``backoff_max`` seconds whether it is served before it is listed again
        (an optional kind: before its first list too). A watch that ends normally is reopened at once; a 410
        Gone relists at once."""
        while True:
            kube = _prompt(self.kube)
            try:
                if not await self._served_now(kube):
                    await self._sleep(self._backoff_max)
                    continue
                rv = await self._relist(kube)
                self._listed()
                while True:
                    opened, events = self._clock(), 0
                    async for typ, obj in kube.watch(
                        self.res,
                        self.namespace,
                        rv,
                        label_selector=self.label_selector,
                        field_selector=self.field_selector,
                    ):
                        events += 1
                        rv = str(meta(obj).resource_version or rv)
                        self.handle_event(typ, obj)
                    if not events and self._clock() - opened < 1.0:
                        # As client-go's handleWatch: a watch closed within a second with nothing in it
                        # is an unexpected close (e.g. an apiserver going down), not a normal end.
                        raise ConnectionResetError("watch closed within a second with no event")
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                if e.gone:
                    log.info("watch expired, relisting", resource=self.name)
                    continue
                wait = self._failed(e)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
                wait = self._failed(e)
            await self._sleep(wait)


async def pages(
    kube: Lister, res: Resource, namespace: str | None, label_selector: str | None, field_selector: str | None
) -> AsyncIterator[tuple[list[JSON], str]]:
    """The pages of one list: :meth:`Kube.list_pages`, or the whole list as one page from another
    :class:`Lister` (a test's double)."""
    if isinstance(kube, Kube):
        async for page in kube.list_pages(res, namespace, label_selector, field_selector=field_selector):
            yield page
        return
    yield await kube.list(res, namespace, label_selector, field_selector=field_selector)


def _prompt(kube: Lister) -> Lister:
    """``kube``, or a view of it whose resends after a 429/5xx wait at most :data:`TRANSIENT_WAIT`."""
    if not isinstance(kube, Kube) or kube.max_retry_wait <= TRANSIENT_WAIT:
        return kube  # a test double, or already prompt
    view = copy.copy(kube)
    view.max_retry_wait = TRANSIENT_WAIT
    return view


async def wait_synced(informers: list[Informer]) -> None:
    """Wait until every informer has listed once."""
    waits = [asyncio.ensure_future(i.synced.wait()) for i in informers]
    try:
        await asyncio.gather(*waits)
    finally:
        for w in waits:
            if not w.done():
                w.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await w
