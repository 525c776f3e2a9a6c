"""List+watch caches (informers): an in-memory copy of one resource kept current by a watch.

An :class:`Informer` lists once, then watches from the list's resourceVersion (with bookmarks, so a
reconnect rarely needs a relist); on 410 Gone it relists and reports the differences as events, so
handlers never miss a deletion. Handlers are plain callables ``(old, new)`` (``old`` None on add,
``new`` None on delete) that must not block: they enqueue keys.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import aiohttp
import structlog

from api.kinds import Resource
from trainer.kube.client import JSON, ApiError, Kube

log = structlog.get_logger("trainer.cache")

Key = tuple[str, str]
"""``(namespace, name)``; namespace is "" for cluster-scoped objects."""
Handler = Callable[[JSON | None, JSON | None], None]


def key_of(obj: JSON) -> Key:
    """The cache key of an object."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta["name"]))


def controller_of(obj: JSON) -> dict[str, Any] | None:
    """The owner reference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


class Informer:
    """A cache of one resource in one namespace (or all), optionally narrowed by a label selector and a
    field selector (e.g. ``metadata.name=<name>`` for a single object)."""

    def __init__(
        self,
        kube: Kube,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        backoff_max: float = 30.0,
        field_selector: str | None = None,
    ) -> None:
        self.kube, self.res, self.namespace, self.label_selector = kube, res, namespace, label_selector
        self.field_selector = field_selector
        self.synced = asyncio.Event()
        self._store: dict[Key, JSON] = {}
        self._by_owner: dict[str, set[Key]] = {}
        self._handlers: list[Handler] = []
        self._backoff_max = backoff_max

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
        """Cached objects whose controller owner reference has ``uid``."""
        return [self._store[k] for k in self._by_owner.get(uid, ()) if k in self._store]

    def _index(self, key: Key, obj: JSON | None, old: JSON | None) -> None:
        if old is not None and (ref := controller_of(old)):
            self._by_owner.get(ref["uid"], set()).discard(key)
        if obj is not None and (ref := controller_of(obj)):
            self._by_owner.setdefault(ref["uid"], set()).add(key)

    def _set(self, obj: JSON) -> None:
        key = key_of(obj)
        old = self._store.get(key)
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

    async def _relist(self) -> str:
        items, rv = await self.kube.list(
            self.res, self.namespace, self.label_selector, field_selector=self.field_selector
        )
        fresh = {key_of(o): o for o in items}
        for key in [k for k in self._store if k not in fresh]:
            self._remove(key)
        for key, obj in fresh.items():
            old = self._store.get(key)
            if old is None or (old.get("metadata") or {}).get("resourceVersion") != obj["metadata"].get(
                "resourceVersion"
            ):
                self._set(obj)
        self.synced.set()
        return rv

    def handle_event(self, typ: str, obj: JSON) -> None:
        """Apply one watch event (``ADDED``, ``MODIFIED``, ``DELETED``; bookmarks and others are
        ignored) to the cache and tell the handlers."""
        if typ in ("ADDED", "MODIFIED"):
            obj.setdefault("apiVersion", self.res.api_version)
            obj.setdefault("kind", self.res.kind)
            self._set(obj)
        elif typ == "DELETED":
            self._remove(key_of(obj))

    async def run(self) -> None:
        """List and watch until cancelled. Never raises: errors are logged and retried with backoff."""
        delay = 0.5
        while True:
            try:
                rv = await self._relist()
                delay = 0.5
                while True:
                    async for typ, obj in self.kube.watch(
                        self.res,
                        self.namespace,
                        rv,
                        label_selector=self.label_selector,
                        field_selector=self.field_selector,
                    ):
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        self.handle_event(typ, obj)
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                if e.gone:
                    log.info("watch expired, relisting", resource=self.res.plural)
                    continue
                if e.not_found:
                    # The kind is not served (its CRD is not installed): an empty cache, said loudly.
                    self.synced.set()
                    log.error(
                        "resource not served; is its CRD installed?",
                        resource=self.res.api_version + "/" + self.res.plural,
                    )
                    delay = self._backoff_max
                log.warning("list/watch failed", resource=self.res.plural, error=str(e), retry_in=delay)
            except (aiohttp.ClientError, TimeoutError, ValueError) as e:
                log.warning("list/watch connection failed", resource=self.res.plural, error=repr(e), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff_max)


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
