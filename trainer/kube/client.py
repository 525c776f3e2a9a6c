"""The one place that talks HTTP to the apiserver: typed-less JSON over kubernetes-asyncio's transport.

kubernetes-asyncio supplies configuration (kubeconfig or in-cluster), TLS and authentication; this
module adds the few verbs a controller needs for any resource, as plain JSON: list, watch, get,
server-side apply, status merge-patch, create, update (PUT, for optimistic concurrency) and delete.
Every request is reported to an optional observer (the ``rest_client_requests_total`` metric).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlparse

from kubernetes_asyncio import client, config

JSON = dict[str, Any]
RequestObserver = Callable[[str, str, str], None]
"""Told of every request once it is answered: ``(method, code, host)``, with ``code`` the HTTP status
as text or ``"<error>"`` when no answer came, as client-go labels ``rest_client_requests_total``."""


@dataclass(frozen=True)
class Resource:
    """A kind the controller works with: where its REST collection lives."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        """The REST path of the collection (``name`` None) or of one object, optionally a subresource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


JOBS = Resource("batch", "v1", "Job", "jobs")
SERVICES = Resource("", "v1", "Service", "services")
PODS = Resource("", "v1", "Pod", "pods")
EVENTS = Resource("", "v1", "Event", "events")
CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps")
SECRETS = Resource("", "v1", "Secret", "secrets")
CRDS = Resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False)
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes")
CLUSTER_TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False
)
LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases")


class ApiError(Exception):
    """A non-2xx answer of the apiserver: ``status`` (HTTP code), ``reason`` and ``message`` from its
    ``Status`` body."""

    def __init__(self, status: int, body: JSON | str) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": body}
        self.reason = str(self.body.get("reason", ""))
        self.message = str(self.body.get("message", body))
        super().__init__(f"{status} {self.reason}: {self.message}")

    @property
    def not_found(self) -> bool:
        """True for 404."""
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """True for 409 (already exists, or a resourceVersion conflict)."""
        return self.status == 409

    @property
    def gone(self) -> bool:
        """True for 410: a watch's resourceVersion is too old; relist."""
        return self.status == 410

    @property
    def namespace_terminating(self) -> bool:
        """True when the namespace is being deleted: nothing more can be created in it."""
        details = self.body.get("details")
        causes = (details.get("causes") if isinstance(details, dict) else None) or []
        return self.status == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)

    @property
    def invalid(self) -> bool:
        """True for 422: the object was refused by validation; retrying the same write cannot help."""
        return self.status == 422


class Kube:
    """An apiserver connection. Create with :meth:`connect`; close with :meth:`close`."""

    def __init__(self, api: client.ApiClient, observe: RequestObserver | None = None) -> None:
        self.api = api
        self.observe = observe
        """Called after every request (see :data:`RequestObserver`); None: nobody listens."""
        self.host = urlparse(str(api.configuration.host)).netloc

    def _observed(self, method: str, code: int | str) -> None:
        if self.observe is not None:
            self.observe(method, str(code), self.host)

    @classmethod
    async def connect(cls, kubeconfig: str | None = None) -> Kube:
        """Load ``kubeconfig`` (or ``$KUBECONFIG``/``~/.kube/config``), else the in-cluster config."""
        cfg = client.Configuration()
        try:
            await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        except (config.ConfigException, FileNotFoundError, TypeError):
            if kubeconfig:
                raise
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return cls(client.ApiClient(configuration=cfg))

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.api.close()

    async def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 60,
    ) -> JSON:
        """One request; returns the decoded JSON body. Raises :class:`ApiError` on a non-2xx answer."""
        try:
            resp = await self.api.call_api(
                path,
                method,
                query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except Exception:  # no answer (connection refused, timeout, TLS)
            self._observed(method, "<error>")
            raise
        self._observed(method, resp.status)
        try:
            text = await resp.text()
        finally:
            resp.release()
        try:
            data: Any = json.loads(text) if text else {}
        except ValueError:
            data = text  # e.g. "404 page not found" for an API group that is not served
        if resp.status >= 300:
            raise ApiError(resp.status, data if isinstance(data, dict) else text)
        if not isinstance(data, (dict, list)):
            raise ApiError(resp.status, f"not JSON: {text[:200]}")
        return data if isinstance(data, dict) else {"items": data}

    async def get(self, res: Resource, namespace: str | None, name: str) -> JSON:
        """One object. Raises :class:`ApiError` (404 when missing)."""
        return await self.request("GET", res.path(namespace, name))

    async def get_or_none(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        """One object, or None when it does not exist."""
        try:
            return await self.get(res, namespace, name)
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def list(
        self, res: Resource, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[JSON], str]:
        """Every object (in ``namespace`` or all), and the list's resourceVersion to watch from."""
        data = await self.request("GET", res.path(namespace), {"labelSelector": label_selector})
        items = data.get("items") or []
        for item in items:  # list items lack kind/apiVersion
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return items, str((data.get("metadata") or {}).get("resourceVersion", ""))

    async def watch(
        self,
        res: Resource,
        namespace: str | None,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        field_selector: str | None = None,
    ) -> AsyncIterator[tuple[str, JSON]]:
        """Stream ``(type, object)`` watch events from ``resource_version``, with bookmarks, optionally
        narrowed by label and field selectors.

        Ends when the server closes the stream (after ``timeout_seconds``). Raises :class:`ApiError`
        (410 Gone when ``resource_version`` is too old: the caller relists).
        """
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        try:
            resp = await self.api.call_api(
                res.path(namespace),
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout_seconds + 30,
            )
        except Exception:
            self._observed("GET", "<error>")
            raise
        self._observed("GET", resp.status)
        try:
            if resp.status >= 300:
                text = await resp.text()
                raise ApiError(resp.status, json.loads(text) if text.startswith("{") else text)
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(int(obj.get("code", 500)), obj)
                yield str(event.get("type")), obj
        finally:
            resp.release()

    async def apply(self, obj: JSON, manager: str, force: bool = True) -> JSON:
        """Server-side apply ``obj`` (must carry apiVersion, kind, metadata.name) as field manager
        ``manager``; returns the stored object."""
        res = resource_of(obj)
        meta = obj["metadata"]
        return await self.request(
            "PATCH",
            res.path(meta.get("namespace"), meta["name"]),
            {"fieldManager": manager, "force": "true" if force else "false"},
            body=obj,
            content_type="application/apply-patch+yaml",
        )

    async def patch_status(self, res: Resource, namespace: str | None, name: str, status: JSON) -> JSON:
        """JSON merge-patch of the status subresource (lists in ``status`` are replaced whole)."""
        return await self.request(
            "PATCH",
            res.path(namespace, name, "status"),
            body={"status": status},
            content_type="application/merge-patch+json",
        )

    async def merge_patch(self, res: Resource, namespace: str | None, name: str, patch: JSON) -> JSON:
        """JSON merge-patch of an object."""
        return await self.request(
            "PATCH", res.path(namespace, name), body=patch, content_type="application/merge-patch+json"
        )

    async def create(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        """Create ``obj``. Raises :class:`ApiError` (409 when it exists)."""
        return await self.request("POST", res.path(namespace), body=obj)

    async def update(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        """Replace ``obj`` (PUT). With ``metadata.resourceVersion`` set this is a compare-and-swap:
        raises :class:`ApiError` 409 when the stored object changed since that version."""
        return await self.request("PUT", res.path(namespace, obj["metadata"]["name"]), body=obj)

    async def delete(self, res: Resource, namespace: str | None, name: str, propagation: str = "Background") -> bool:
        """Delete one object; False when it was already gone."""
        try:
            await self.request(
                "DELETE", res.path(namespace, name), body={"kind": "DeleteOptions", "propagationPolicy": propagation}
            )
        except ApiError as e:
            if e.not_found:
                return False
            raise
        return True


_KNOWN = {
    (r.api_version, r.kind): r
    for r in (
        JOBS,
        SERVICES,
        PODS,
        EVENTS,
        CONFIGMAPS,
        SECRETS,
        CRDS,
        TRAINJOBS,
        TRAINING_RUNTIMES,
        CLUSTER_TRAINING_RUNTIMES,
        LEASES,
    )
}


def register(res: Resource) -> Resource:
    """Make ``res`` known to :func:`resource_of` (for kinds added by other modules); returns it."""
    _KNOWN[(res.api_version, res.kind)] = res
    return res


def resource_of(obj: JSON) -> Resource:
    """The :class:`Resource` of an object by its apiVersion and kind. Raises ``KeyError`` if unknown."""
    return _KNOWN[(obj["apiVersion"], obj["kind"])]
