"""A recording double of the project's own :class:`~trainer.framework.kube.client.KubeClient` interface, for
reconciler-level unit tests (end-to-end tests use the real apiserver).

:class:`RecordingKube` keeps objects in memory, gives them uid, resourceVersion and generation as
the apiserver would, records every write, and feeds each change to the manager's informers (as
their watch would) so that a reconcile sees what the previous one wrote. Label selectors of the
forms ``key`` and ``key=value`` (comma-separated) and field selectors of ``path=value`` and
``path!=value`` terms are understood, as the informers use them.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from trainer.api.kinds import Resource, resource_of
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Index, Informer, Key, controller_uid, key_of
from trainer.framework.kube.client import WriteGuard


class TableStore:
    """A :class:`~trainer.framework.controller.Store` over a fixed list of objects."""

    def __init__(
        self, objects: list[JSON] | None = None, index_by: Index = controller_uid, absent: bool = False
    ) -> None:
        self.objects = {key_of(o): o for o in objects or []}
        self.index_by = index_by
        self.absent = absent
        """The resource is not served (as :attr:`trainer.framework.kube.cache.Informer.absent`)."""

    def get(self, namespace: str | None, name: str) -> JSON | None:
        return self.objects.get((namespace or "", name))

    def items(self) -> list[JSON]:
        return list(self.objects.values())

    def owned_by(self, uid: str) -> list[JSON]:
        return [o for o in self.objects.values() if self.index_by(o) == uid]

    def seen(self, resource_version: int) -> bool:
        return True  # a fixed table is as current as it will ever be

    def add_handler(self, handler: Callable[[JSON | None, JSON | None], None]) -> None:
        pass  # a fixed table never changes


def reader(tables: dict[Resource, list[JSON]] | None = None, name: str = "test") -> Reader:
    """A Reader over fixed objects, one table per resource."""
    return Reader(name, {res: TableStore(objs) for res, objs in (tables or {}).items()})


def _selected(obj: JSON, selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, eq, value = term.partition("=")
        if key not in labels or (eq and labels[key] != value):
            return False
    return True


def _field(obj: JSON, path: str) -> str:
    """A selectable field of ``obj`` as the apiserver reads it: a dotted path, but ``source`` of an
    Event (its ``source.component``, else its ``reportingComponent``)."""
    if path == "source":
        return str((obj.get("source") or {}).get("component") or obj.get("reportingComponent") or "")
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _fields_selected(obj: JSON, selector: str | None) -> bool:
    """Whether ``obj`` matches a field selector of ``path=value`` and ``path!=value`` terms."""
    for term in filter(None, (selector or "").split(",")):
        path, neq, value = term.partition("!=")
        if neq:
            if _field(obj, path) == value:
                return False
            continue
        path, _, value = term.partition("=")
        if _field(obj, path) != value.removeprefix("="):
            return False
    return True


def merge_patch(base: Any, patch: Any) -> Any:
    """``base`` with the JSON merge patch ``patch`` applied (RFC 7386), as the apiserver applies one:
    an object is merged key by key, null deletes a key, anything else (a list) replaces whole."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass
class Write:
    """One recorded write: verb, kind, namespace/name."""

    verb: str
    kind: str
    key: Key
    body: Any = None


@dataclass
class RecordingKube:
    """In-memory objects by (resource, key), every write recorded in :attr:`writes`."""

    objects: dict[tuple[Resource, Key], JSON] = field(default_factory=dict)
    writes: list[Write] = field(default_factory=list)
    informers: list[Informer] = field(default_factory=list)
    refuse: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Kinds whose apply the double refuses, with the HTTP status and message (as validation would)."""
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    hold: bool = False
    """Keep changes from the informers until :meth:`release` (a watch that lags behind the writes)."""
    _held: list[tuple[Resource, JSON | None, bool, Key | None]] = field(default_factory=list)

    # ------------------------------------------------------------------ test helpers

    def connect(self, informers: list[Informer]) -> None:
        """Feed changes to these informers from now on, and fill them with what exists."""
        self.informers = informers
        for (res, _), obj in self.objects.items():
            self._feed(res, obj, deleted=False)

    def put(self, obj: JSON) -> JSON:
        """Store ``obj`` as a user (or another controller) would, without recording a write."""
        return self._store(resource_of(obj), copy.deepcopy(obj))

    def count(self, verb: str | None = None, kind: str | None = None) -> int:
        """Recorded writes matching ``verb`` and ``kind``."""
        return sum(1 for w in self.writes if (verb in (None, w.verb)) and (kind in (None, w.kind)))

    def release(self) -> None:
        """Deliver the changes kept while :attr:`hold` was set, in order, and stop holding."""
        self.hold = False
        held, self._held = self._held, []
        for change in held:
            self._feed(*change)

    def _feed(self, res: Resource, obj: JSON | None, deleted: bool, key: Key | None = None) -> None:
        if self.hold:
            self._held.append((res, copy.deepcopy(obj), deleted, key))
            return
        for inf in self.informers:
            if inf.res != res:
                continue
            if deleted:
                meta = {"namespace": key[0] if key else "", "name": key[1] if key else ""}
                inf.handle_event("DELETED", {"metadata": {**meta, "resourceVersion": str(next(self._rv))}})
            elif obj is not None and _selected(obj, inf.label_selector) and _fields_selected(obj, inf.field_selector):
                inf.handle_event("MODIFIED", copy.deepcopy(obj))

    def _store(self, res: Resource, obj: JSON) -> JSON:
        key = key_of(obj)
        meta = obj.setdefault("metadata", {})
        old = self.objects.get((res, key))
        meta.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        meta["resourceVersion"] = str(next(self._rv))
        meta.setdefault("generation", 1)
        if res.namespaced:
            meta.setdefault("namespace", key[0])
        self.objects[(res, key)] = obj
        self._feed(res, obj, deleted=False)
        return copy.deepcopy(obj)

    # ------------------------------------------------------------------ the Kube interface

    async def get(self, res: Resource, namespace: str | None, name: str) -> JSON:
        obj = self.objects.get((res, (namespace or "" if res.namespaced else "", name)))
        if obj is None:
            from trainer.framework.kube.client import ApiError

            raise ApiError(404, {"reason": "NotFound", "message": f"{res.kind} {name} not found"})
        return copy.deepcopy(obj)

    async def get_or_none(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        obj = self.objects.get((res, (namespace or "" if res.namespaced else "", name)))
        return copy.deepcopy(obj) if obj is not None else None

    async def apply(self, obj: JSON, manager: str, force: bool = True, *, dry_run: bool = False) -> JSON:
        """Server-side apply; with ``dry_run``, what would be stored, nothing stored."""
        res = resource_of(obj)
        key = key_of(obj)
        self.writes.append(Write("apply", res.kind, key, obj))
        if res.kind in self.refuse:
            from trainer.framework.kube.client import ApiError

            status, message = self.refuse[res.kind]
            raise ApiError(status, {"reason": "Invalid", "message": message})
        old = self.objects.get((res, key))
        merged = copy.deepcopy(obj)
        if old is not None:
            merged["status"] = copy.deepcopy(old.get("status"))
            merged["metadata"] = {**old["metadata"], **merged["metadata"]}
        entries = [
            e
            for e in (merged["metadata"].get("managedFields") or [])
            if e.get("manager") != manager or e.get("operation") != "Apply"
        ]
        merged["metadata"]["managedFields"] = [
            *entries,
            {"manager": manager, "operation": "Apply", "apiVersion": obj.get("apiVersion"), "fieldsV1": {}},
        ]
        return merged if dry_run else self._store(res, merged)

    async def patch_status(
        self, res: Resource, namespace: str | None, name: str, status: JSON, resource_version: str | None = None
    ) -> JSON:
        from trainer.framework.kube.client import ApiError

        key = (namespace or "", name)
        self.writes.append(Write("patch_status", res.kind, key, status))
        obj = copy.deepcopy(self.objects[(res, key)])
        if resource_version is not None and obj["metadata"].get("resourceVersion") != resource_version:
            raise ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})
        obj["status"] = merge_patch(obj.get("status") or {}, status)
        return self._store(res, obj)

    async def merge_patch(self, res: Resource, namespace: str | None, name: str, patch: JSON) -> JSON:
        key = (namespace or "", name)
        self.writes.append(Write("merge_patch", res.kind, key, patch))
        obj = merge_patch(self.objects[(res, key)], patch)
        return self._store(res, obj)

    async def create(
        self, res: Resource, namespace: str | None, obj: JSON, manager: str | None = None, *, dry_run: bool = False
    ) -> JSON:
        """Create; with ``dry_run``, what would be stored, nothing stored."""
        from trainer.framework.kube.client import ApiError

        self.writes.append(Write("create", res.kind, key_of(obj), obj))
        if res.kind in self.refuse:
            status, message = self.refuse[res.kind]
            raise ApiError(status, {"reason": "Invalid", "message": message})
        if (res, key_of(obj)) in self.objects:
            raise ApiError(409, {"reason": "AlreadyExists", "message": f"{res.kind} {key_of(obj)[1]} already exists"})
        new = copy.deepcopy(obj)
        if manager is not None:  # as the apiserver records a create
            entry: JSON = {
                "manager": manager,
                "operation": "Update",
                "apiVersion": obj.get("apiVersion"),
                "fieldsV1": {},
            }
            new.setdefault("metadata", {})["managedFields"] = [entry]
        return new if dry_run else self._store(res, new)

    async def json_patch(self, res: Resource, namespace: str | None, name: str, ops: list[JSON]) -> JSON:
        """The ``replace`` ops of ``metadata`` fields the operator sends; a resourceVersion that is not
        the stored one is a 409, as the apiserver answers."""
        from trainer.framework.kube.client import ApiError

        key = (namespace or "", name)
        self.writes.append(Write("json_patch", res.kind, key, {"ops": ops}))
        obj = copy.deepcopy(self.objects[(res, key)])
        for op in ops:
            assert op["op"] == "replace" and op["path"].startswith("/metadata/"), op
            field = op["path"].removeprefix("/metadata/")
            if field == "resourceVersion":
                if op["value"] != obj["metadata"]["resourceVersion"]:
                    raise ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})
            else:
                obj["metadata"][field] = op["value"]
        return self._store(res, obj)

    async def update(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        self.writes.append(Write("update", res.kind, key_of(obj), obj))
        return self._store(res, copy.deepcopy(obj))

    async def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
        uid: str | None = None,
        *,
        dry_run: bool = False,
    ) -> bool:
        """Delete; with ``uid``, only the object of that uid (else False, as the apiserver's 409 of the
        precondition reads to the operator); with ``dry_run``, nothing is deleted."""
        key = (namespace or "" if res.namespaced else "", name)
        self.writes.append(Write("delete", res.kind, key))
        stored = self.objects.get((res, key))
        if stored is not None and uid and (stored.get("metadata") or {}).get("uid") != uid:
            return False
        if dry_run:
            return stored is not None
        if self.objects.pop((res, key), None) is None:
            return False
        self._feed(res, None, deleted=True, key=key)
        return True

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        field_selector: str | None = None,
    ) -> tuple[list[JSON], str]:
        """The stored objects of ``res`` (in ``namespace``, matching ``label_selector`` and
        ``field_selector``) and the latest resourceVersion."""
        items = [
            copy.deepcopy(obj)
            for (r, (ns, _)), obj in self.objects.items()
            if r == res
            and namespace in (None, ns)
            and _selected(obj, label_selector)
            and _fields_selected(obj, field_selector)
        ]
        return items, str(next(self._rv))

    async def watch(
        self,
        res: Resource,
        namespace: str | None,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        field_selector: str | None = None,
    ) -> AsyncIterator[tuple[str, JSON]]:
        """No events: the double feeds the informers it is connected to itself (:meth:`connect`)."""
        none: list[tuple[str, JSON]] = []
        for event in none:
            yield event

    def fenced(self, guard: WriteGuard) -> RecordingKube:
        """The double itself: its writes are not guarded (leader election is tested on the HTTP double)."""
        return self
