"""The one place that talks HTTP to the apiserver: typed-less JSON over aiohttp.

kubernetes-asyncio supplies configuration (kubeconfig or in-cluster), TLS and authentication, except
for a kubeconfig that runs no plugin, which :mod:`trainer.framework.kube.kubeconfig` reads the same way
without importing kubernetes-asyncio (whose import costs more CPU than a short CLI command's work); this
module adds the few verbs a controller needs for any resource, as plain JSON: list, watch, get,
server-side apply, status merge-patch, create, update (PUT, for optimistic concurrency) and delete.
Every request is reported to an optional observer (the ``rest_client_requests_total`` metric). A view
made by :meth:`Kube.fenced` checks a write guard right before each write goes out (leader fencing).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import os
import re
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlencode, urlparse

import aiohttp
from aiohttp.client_reqrep import ClientRequest, ClientResponse
from aiohttp.connector import Connection
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from trainer.api.kinds import Resource, resource_of
from trainer.framework import json_codec
from trainer.framework.json_codec import JSON
from trainer.framework.kube.kubeconfig import Endpoint, LeftToLibrary, Source, read_endpoint

if TYPE_CHECKING:
    from kubernetes_asyncio import client

RequestObserver = Callable[[str, str, str, str, str], None]
"""Told of every request once it is answered: ``(method, code, host, verb, resource)``, with ``code`` the
HTTP status as text or ``"<error>"`` when no answer came, as client-go labels
``rest_client_requests_total``; ``verb`` and ``resource`` as :func:`request_kind` names them."""
WriteGuard = Callable[[str, str], None]
"""Asked ``(method, path)`` right before a write is sent; raises to refuse it (then nothing is sent)."""
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LIST_PAGE_SIZE = 500
"""Objects per page of a list (client-go ``tools/pager``'s ``defaultPageSize``)."""
"""Methods a write guard is not asked about: reads (GET, LIST, WATCH)."""


class ApiError(Exception):
    """A non-2xx answer of the apiserver: ``status`` (HTTP code), ``reason`` and ``message`` from its
    ``Status`` body; ``retry_after`` the seconds the answer asked to wait before trying again (a 429 or
    5xx with ``Retry-After``, see :func:`retry_after`), None when it asked for no retry."""

    def __init__(self, status: int, body: JSON | str, retry_after: int | None = None) -> None:
        self.status = status
        self.retry_after = retry_after
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


_RETRY_AFTER = re.compile(r"[+-]?[0-9]+")
_READ_BUFSIZE = 2**21
"""The session's read buffer, as kubernetes_asyncio's ``RESTClientObject`` sets it: one watch event
carries a whole object, up to etcd's 1.5 MiB request limit."""


@dataclass
class _Fence:
    """The write guard of the fenced write being sent, carried into aiohttp by :data:`_FENCE`."""

    guard: WriteGuard
    method: str
    path: str
    refused: bool = False

    def check(self) -> None:
        """Ask the guard; a refusal (whatever it raises, propagated) is remembered: nothing was sent."""
        try:
            self.guard(self.method, self.path)
        except BaseException:
            self.refused = True
            raise


_FENCE: ContextVar[_Fence | None] = ContextVar("trainer_kube_fence", default=None)


class _GuardedRequest(ClientRequest):
    """aiohttp's request (aio-libs/aiohttp ``aiohttp/client_reqrep.py``) that asks the write guard of the
    fenced write being sent, if any, once more when its connection is ready and before its first byte is
    written: every await on the way there (a token refresh hook, a new connection's TCP and TLS set-up)
    is behind that check, so a write that waited across a pause of the process is refused, not sent late.
    """

    async def send(self, conn: Connection) -> ClientResponse:
        fence = _FENCE.get()
        if fence is not None:
            fence.check()
        return await super().send(conn)


def retry_after(status: int, headers: Mapping[str, str]) -> int | None:
    """Seconds (>= 0) the apiserver asks a client to wait before sending the same request again, or
    None when the answer is not to be retried.

    As client-go's ``checkWait`` (k8s.io/client-go ``rest/with_retry.go``; ``rest/request.go`` in older
    releases) with its ``retryAfterSeconds``: only a 429 (API Priority and Fairness throttling, "storage
    is (re)initializing") or a 5xx answer, and only when ``Retry-After`` holds whole seconds; an
    HTTP-date or a missing header means no retry. A negative value means no wait.
    """
    if status != 429 and status < 500:
        return None
    value = headers.get("Retry-After", "").strip()
    if not _RETRY_AFTER.fullmatch(value):
        return None
    return max(0, int(value))


def request_kind(method: str, path: str, query: list[tuple[str, Any]], content_type: str | None) -> tuple[str, str]:
    """``(verb, resource)`` of a request, spelled as the apiserver labels ``apiserver_request_total``
    (k8s.io/apiserver ``pkg/endpoints/metrics/metrics.go``, ``pkg/endpoints/request/requestinfo.go``):
    verb ``LIST``/``WATCH``/``GET``/``POST``/``PUT``/``PATCH``/``APPLY`` (a server-side apply)/``DELETE``;
    resource the plural with ``/<subresource>`` when there is one (``trainjobs/status``), "" for a path
    that names none (``/version``)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        rest = []
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]  # namespaces/<ns>/<resource>...; "namespaces/<name>" is the Namespace itself
    resource = "/".join([rest[0], *rest[2:3]]) if rest else ""
    verb = method.upper()
    if verb == "GET":
        if any(k == "watch" and str(v) == "true" for k, v in query):
            verb = "WATCH"
        elif len(rest) == 1:
            verb = "LIST"
    elif verb == "PATCH" and content_type == "application/apply-patch+yaml":
        verb = "APPLY"
    return verb, resource


IN_CLUSTER_HOST = "KUBERNETES_SERVICE_HOST"
"""Set in every pod: the in-cluster config applies when no kubeconfig is given or found."""


def _kubeconfig_present() -> bool:
    """Whether ``$KUBECONFIG`` names a file that exists, or ``~/.kube/config`` exists (where
    kubernetes_asyncio's ``load_kube_config`` looks, and logs a warning line when it finds none)."""
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or ["~/.kube/config"]
    return any(os.path.exists(os.path.expanduser(p)) for p in paths)


def _text(raw: bytes) -> str:
    """An answer's body as text (undecodable bytes replaced)."""
    return raw.decode("utf-8", errors="replace")


def _environment_proxy(host: str) -> str | None:
    """The proxy URL the environment names for the apiserver URL ``host`` (``HTTPS_PROXY``/``https_proxy``
    or ``HTTP_PROXY`` by its scheme, unless ``NO_PROXY`` covers its host), with credentials from
    ``~/.netrc`` put in its userinfo; None when no proxy applies.

    The same lookup aiohttp does per request for a ``trust_env`` session (``get_env_proxy_for_url``,
    aio-libs/aiohttp ``aiohttp/helpers.py``), done once. Blocking (reads ``~/.netrc``).
    """
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except LookupError:
        return None
    if auth is not None:
        proxy = proxy.with_user(auth.login).with_password(auth.password)
    return str(proxy)


async def _settle_environment(api: client.ApiClient) -> None:
    """Give ``api`` an HTTP session that consults no environment per request.

    kubernetes_asyncio's ``RESTClientObject`` (``kubernetes_asyncio/client/rest.py``) opens its aiohttp
    session with ``trust_env=True``; aiohttp then looks up ``~/.netrc`` (``loop.run_in_executor``) and the
    proxy environment (``asyncio.to_thread``) on every request (``ClientSession._request`` in
    ``aiohttp/client.py``): a thread-pool hop per request. Here the session is replaced by one with
    ``trust_env=False`` over the very same connector (its SSL context carries the CA, client certificate
    and verification settings kubernetes_asyncio built from the configuration), and the proxy is decided
    once: the configuration's own (kubeconfig ``proxy-url``) if any, else the environment's for the
    apiserver host. Its requests check the write guard of a fenced write at the last moment (see
    :class:`_GuardedRequest`). Authentication is untouched: the bearer token (and its refresh hook) is still set per
    request by ``ApiClient``. Raises ``RuntimeError`` if the session has no connector.
    """
    rest = api.rest_client
    stock: aiohttp.ClientSession = rest.pool_manager
    connector = stock.connector
    if connector is None:
        raise RuntimeError("kubernetes_asyncio's HTTP session has no connector")
    stock.detach()  # the new session owns (and closes) the connector
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=_READ_BUFSIZE, request_class=_GuardedRequest
    )
    if not rest.proxy:
        proxy = await asyncio.to_thread(_environment_proxy, str(api.configuration.host))
        if proxy is not None:
            rest.proxy = proxy


async def _library_api(
    kubeconfig: str | None, context: str | None, *, in_pod_without_kubeconfig: bool
) -> client.ApiClient:
    """kubernetes_asyncio's client of ``kubeconfig`` and ``context`` (see :meth:`Kube.connect`), else of
    the in-cluster config, with the session of :func:`_settle_environment`."""
    from kubernetes_asyncio import client, config  # imported only for the configurations it alone reads

    cfg = client.Configuration()
    try:
        if in_pod_without_kubeconfig:
            raise config.ConfigException("in a pod with no kubeconfig")  # not looked for: nothing to say
        await config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    except (config.ConfigException, FileNotFoundError, TypeError):
        if kubeconfig or context:
            raise
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    api = client.ApiClient(configuration=cfg)
    try:
        await _settle_environment(api)
    except BaseException:
        await api.close()
        raise
    return api


CONNECTIONS = 100
"""Simultaneous connections to the apiserver at most (kubernetes_asyncio's ``connection_pool_maxsize``)."""


def ssl_context(endpoint: Endpoint) -> ssl.SSLContext:
    """The TLS context of an https ``endpoint``, as kubernetes_asyncio's ``RESTClientObject`` builds it
    (``kubernetes_asyncio/client/rest.py``): its CA bundle (else the system's), its client certificate
    and key, no verification when ``insecure-skip-tls-verify``. Inline data is written to a private
    temporary directory for loading (as kubernetes_asyncio does), removed once loaded. Raises
    ``ssl.SSLError`` or ``OSError`` for certificates that cannot be loaded."""
    sources = (endpoint.ca, endpoint.client_certificate, endpoint.client_key)
    with contextlib.ExitStack() as stack:
        directory = (
            stack.enter_context(tempfile.TemporaryDirectory(prefix="trainer-kube-"))
            if any(s.data for s in sources)
            else ""
        )

        def path(source: Source, name: str) -> str | None:
            if source.data:
                written = os.path.join(directory, name)
                with open(os.open(written, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                    f.write(source.data)
                return written
            return source.path

        context = ssl.create_default_context(cafile=path(endpoint.ca, "ca.crt"))
        certificate = path(endpoint.client_certificate, "client.crt")
        if certificate:
            context.load_cert_chain(certificate, keyfile=path(endpoint.client_key, "client.key"))
    if not endpoint.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class PlainApi:
    """What :class:`Kube` uses of kubernetes_asyncio's ``ApiClient`` (its ``configuration.host``,
    ``default_headers``, ``rest_client`` session, proxy and TLS server name, ``update_params_for_auth``
    and ``close``), for a kubeconfig :func:`~trainer.framework.kube.kubeconfig.read_endpoint` read."""

    class Configuration:
        """The apiserver's URL, as ``Configuration.host``."""

        def __init__(self, host: str) -> None:
            self.host = host

    class Rest:
        """The HTTP session and where it goes through, as ``RESTClientObject``'s."""

        def __init__(self, session: aiohttp.ClientSession, proxy: str | None, server_hostname: str | None) -> None:
            self.pool_manager = session
            self.proxy = proxy
            self.proxy_headers: dict[str, str] | None = None
            self.server_hostname = server_hostname

    def __init__(self, endpoint: Endpoint, session: aiohttp.ClientSession, proxy: str | None) -> None:
        self.configuration = PlainApi.Configuration(endpoint.host)
        self.default_headers: dict[str, str] = {}
        self.rest_client = PlainApi.Rest(session, proxy, endpoint.tls_server_name)
        self.authorization = endpoint.authorization
        """The ``Authorization`` header of every request (a static token or basic auth), None for none."""

    @classmethod
    async def open(cls, endpoint: Endpoint) -> PlainApi:
        """A session to ``endpoint``: TLS as :func:`ssl_context` builds it, no environment consulted per
        request (as :func:`_settle_environment` makes kubernetes_asyncio's), the cluster's proxy else
        the environment's, read once. Raises what :func:`ssl_context` raises."""
        tls = ssl_context(endpoint) if endpoint.host.startswith("https") else True
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=tls),
            trust_env=False,
            read_bufsize=_READ_BUFSIZE,
            request_class=_GuardedRequest,
        )
        try:
            proxy = endpoint.proxy or await asyncio.to_thread(_environment_proxy, endpoint.host)
        except BaseException:
            await session.close()
            raise
        return cls(endpoint, session, proxy)

    async def update_params_for_auth(
        self, headers: dict[str, str], queries: builtins.list[tuple[str, Any]], auth_settings: builtins.list[str]
    ) -> None:
        """Set the ``Authorization`` header, as ``ApiClient`` does for its ``BearerToken`` setting."""
        if self.authorization and "BearerToken" in auth_settings:
            headers["authorization"] = self.authorization

    async def close(self) -> None:
        """Close the session."""
        await self.rest_client.pool_manager.close()


class Lister(Protocol):
    """What a cache needs of a connection: list, then watch from the list's resourceVersion
    (:class:`Kube`'s :meth:`~Kube.list` and :meth:`~Kube.watch`)."""

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[JSON], str]: ...

    def watch(
        self,
        res: Resource,
        namespace: str | None,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        field_selector: str | None = None,
    ) -> AsyncIterator[tuple[str, JSON]]: ...


@runtime_checkable
class Discovery(Protocol):
    """What a cache asks of a connection before it lists a kind that may not be served
    (:meth:`Kube.serves`)."""

    async def serves(self, res: Resource) -> bool: ...


class KubeClient(Lister, Protocol):
    """What the operator needs of a connection: :class:`Kube`, or a test's recording double. Every
    method raises :class:`ApiError` for the apiserver's refusals, as :class:`Kube`'s do."""

    async def get(self, res: Resource, namespace: str | None, name: str) -> JSON: ...

    async def get_or_none(self, res: Resource, namespace: str | None, name: str) -> JSON | None: ...

    async def apply(self, obj: JSON, manager: str, force: bool = True) -> JSON: ...

    async def create(self, res: Resource, namespace: str | None, obj: JSON, manager: str | None = None) -> JSON: ...

    async def update(self, res: Resource, namespace: str | None, obj: JSON) -> JSON: ...

    async def patch_status(
        self, res: Resource, namespace: str | None, name: str, status: JSON, resource_version: str | None = None
    ) -> JSON: ...

    async def merge_patch(self, res: Resource, namespace: str | None, name: str, patch: JSON) -> JSON: ...

    async def json_patch(self, res: Resource, namespace: str | None, name: str, ops: builtins.list[JSON]) -> JSON: ...

    async def delete(
        self, res: Resource, namespace: str | None, name: str, propagation: str = "Background", uid: str | None = None
    ) -> bool: ...

    def fenced(self, guard: WriteGuard) -> KubeClient: ...


DRY_RUN = "All"
"""The ``dryRun`` query value of a write the apiserver checks (admission included) without storing it."""


class Kube:
    """An apiserver connection. Create with :meth:`connect`; close with :meth:`close`."""

    def __init__(
        self,
        api: client.ApiClient | PlainApi,
        observe: RequestObserver | None = None,
        *,
        max_attempts: int = 5,
        max_retry_wait: float = 10.0,
    ) -> None:
        """Wrap ``api`` as it is (use :meth:`connect` for a session that skips per-request environment
        lookups). ``max_attempts`` (>= 1) bounds the sends of one request that the server keeps answering
        with a retryable ``Retry-After`` (client-go allows 1 + 10); ``max_retry_wait`` (seconds) caps each
        wait the server asks for."""
        self.api = api
        self.observe = observe
        """Called after every request (see :data:`RequestObserver`); None: nobody listens."""
        self.host = urlparse(str(api.configuration.host)).netloc
        self.max_attempts = max(1, max_attempts)
        """Sends of one request at most, the first included (see :func:`retry_after`)."""
        self.max_retry_wait = max_retry_wait
        """Longest wait, in seconds, before a retry, whatever ``Retry-After`` asks."""
        self.write_guard: WriteGuard | None = None
        """Asked before every write of this view; None: writes are not guarded (see :meth:`fenced`)."""

    def fenced(self, guard: WriteGuard) -> Kube:
        """A view of this connection (same session, same :attr:`observe` as now) whose writes, every
        method but GET, HEAD and OPTIONS, first ask ``guard(method, path)``: right before the request is
        handed to the HTTP session, again right before its first byte is written (after every awaited step
        on the way: a token refresh, a new connection; sessions made by :meth:`connect`), and before each
        resend after a 429/5xx. A guard that raises refuses the write: nothing is sent or reported to
        :attr:`observe`, and its exception reaches the caller. Reads are never guarded. The view shares the
        session: close the original, once.

        This is how a leader's writes are fenced by its renew deadline (:mod:`trainer.framework.kube.leader`):
        client-go's leader election (k8s.io/client-go ``tools/leaderelection/leaderelection.go``) stops
        the controllers once the deadline passes; the guard makes sure no write is sent after it either.
        """
        view = copy.copy(self)
        view.write_guard = guard
        return view

    def _observed(self, method: str, code: int | str, kind: tuple[str, str]) -> None:
        if self.observe is not None:
            self.observe(method, str(code), self.host, *kind)

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        """Load ``kubeconfig`` (or ``$KUBECONFIG``/``~/.kube/config``) with its ``context`` (default:
        the current one), else the in-cluster config.

        A kubeconfig whose user runs no plugin is read by :func:`~trainer.framework.kube.kubeconfig.read_endpoint`
        and its TLS session built here, as kubernetes_asyncio would (without importing it); any other
        configuration (an ``exec`` or ``auth-provider`` user, in-cluster, a kubeconfig that cannot be
        read) is kubernetes_asyncio's, TLS and authentication included. The proxy (the kubeconfig's
        ``proxy-url``, else ``HTTPS_PROXY``, or ``HTTP_PROXY`` for an http server, unless ``NO_PROXY``
        covers the apiserver host) is read here once, so requests make no thread-pool call. Raises
        ``kubernetes_asyncio.config.ConfigException`` or ``FileNotFoundError`` when an explicit
        ``kubeconfig`` cannot be loaded, ``ConfigException`` when neither config exists, and
        ``ssl.SSLError`` or ``OSError`` for certificates that cannot be loaded.
        """
        in_pod_without_kubeconfig = not (kubeconfig or context or _kubeconfig_present()) and os.environ.get(
            IN_CLUSTER_HOST
        )
        if not in_pod_without_kubeconfig:
            try:
                endpoint = read_endpoint(kubeconfig, context)
            except LeftToLibrary:
                pass
            else:
                return cls(await PlainApi.open(endpoint))
        return cls(await _library_api(kubeconfig, context, in_pod_without_kubeconfig=bool(in_pod_without_kubeconfig)))

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.api.close()

    async def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]],
        headers: dict[str, str],
        body: Any,
        timeout: float | aiohttp.ClientTimeout | None,
    ) -> aiohttp.ClientResponse:
        """Send until the answer is final (see :func:`retry_after`); returns it unread, to be released.
        A write of a fenced view asks its guard first (see :meth:`fenced`) and raises what it raises."""
        attempt = 1
        data = None if body is None else json_codec.dumps(body)  # once, whatever the retries
        kind = request_kind(method, path, query, headers.get("Content-Type")) if self.observe is not None else ("", "")
        guard = None if method.upper() in READ_METHODS else self.write_guard
        fence = None if guard is None else _Fence(guard, method.upper(), path)
        while True:
            if fence is not None:
                fence.check()  # raises when refused: nothing sent
            token = _FENCE.set(fence)  # checked again by _GuardedRequest, right before the first byte
            try:
                resp = await self._request_once(method, path, query, headers, data, timeout)
            except Exception:  # no answer (connection refused, timeout, TLS), or the write was refused
                if fence is None or not fence.refused:
                    self._observed(method, "<error>", kind)
                raise
            finally:
                _FENCE.reset(token)
            self._observed(method, resp.status, kind)
            wait = retry_after(resp.status, resp.headers)
            if wait is None or attempt >= self.max_attempts:
                return resp
            try:
                await resp.read()  # drained, the connection goes back to the pool
            finally:
                resp.release()
            await asyncio.sleep(min(wait, self.max_retry_wait))
            attempt += 1

    async def _request_once(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]],
        headers: dict[str, str],
        data: bytes | None,
        timeout: float | aiohttp.ClientTimeout | None,
    ) -> aiohttp.ClientResponse:
        """One send on kubernetes_asyncio's session, with its authentication (the bearer token, refreshed
        by its hook) and its proxy and TLS server name, but without its generic layer: ``ApiClient.call_api``
        walks every request body through ``sanitize_for_serialization`` (a deep copy) before its
        ``RESTClientObject.request`` serializes it again (``kubernetes_asyncio/client/api_client.py``,
        ``rest.py``); here the body is serialized once by the caller."""
        api, rest = self.api, self.api.rest_client
        headers = {**api.default_headers, **headers}
        query = list(query)
        await api.update_params_for_auth(headers, query, ["BearerToken"])
        url = f"{api.configuration.host}{path}"
        if query:
            url += "?" + urlencode(query)
        extra: dict[str, Any] = {}
        if rest.proxy:
            extra["proxy"] = rest.proxy
        if rest.proxy_headers:
            extra["proxy_headers"] = rest.proxy_headers
        if getattr(rest, "server_hostname", None):
            extra["server_hostname"] = rest.server_hostname
        response: aiohttp.ClientResponse = await rest.pool_manager.request(
            method,
            url,
            data=data,
            headers=headers,
            timeout=timeout
            if isinstance(timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=timeout)
            if timeout
            else aiohttp.ClientTimeout(),
            **extra,
        )
        return response

    async def open(
        self,
        method: str,
        path: str,
        query: builtins.list[tuple[str, Any]] | None = None,
        accept: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = 60,
    ) -> aiohttp.ClientResponse:
        """One request without a body whose answer comes back unread, whatever its status: for answers
        that are not JSON (a container's log, streamed; a plain-text 404). The caller reads and
        releases it. ``timeout``: seconds bounding each send, or aiohttp's ``ClientTimeout``. Retried
        and reported as :meth:`request`'s; raises aiohttp's or asyncio's errors when no answer came."""
        return await self._send(method, path, list(query or []), {"Accept": accept}, None, timeout)

    async def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 60,
    ) -> JSON:
        """One request; returns the decoded JSON body (a JSON list comes back as ``{"items": [...]}``).

        ``query`` entries that are None are left out; ``timeout`` (seconds, None: none) bounds each send.
        A 429 or 5xx answer with ``Retry-After`` is sent again, whatever the verb, after the wait it asks
        (capped at :attr:`max_retry_wait`), up to :attr:`max_attempts` sends, as client-go's
        ``rest.Request`` does (k8s.io/client-go ``rest/request.go``, ``rest/with_retry.go``); every send
        is reported to :attr:`observe`. Raises :class:`ApiError` on a non-2xx final answer, and aiohttp's
        or asyncio's errors when no answer came (connection refused, timeout, TLS).
        """
        resp = await self._send(
            method,
            path,
            [(k, v) for k, v in (query or {}).items() if v is not None],
            {"Content-Type": content_type, "Accept": "application/json"},
            body,
            timeout,
        )
        try:
            raw = await resp.read()
        finally:
            resp.release()
        try:
            data: Any = json_codec.loads(raw) if raw else {}
        except ValueError:
            data = None  # e.g. "404 page not found" for an API group that is not served
        if resp.status >= 300:
            wait = retry_after(resp.status, resp.headers)
            raise ApiError(resp.status, data if isinstance(data, dict) else _text(raw), wait)
        if not isinstance(data, (dict, list)):
            raise ApiError(resp.status, f"not JSON: {_text(raw)[:200]}")
        return data if isinstance(data, dict) else {"items": data}

    async def serves(self, res: Resource) -> bool:
        """Whether the apiserver serves ``res`` now: one discovery GET of its group version
        (``/apis/<group>/<version>``, ``/api/v1``), answered from the apiserver's discovery, not from
        storage, and allowed to every authenticated user (the ``system:discovery`` ClusterRole). False
        when the group version is not served (404) or does not list the resource's plural. Raises
        :class:`ApiError` for another refusal, aiohttp's or asyncio's errors when no answer came."""
        path = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
        try:
            found = await self.request("GET", path)
        except ApiError as e:
            if e.not_found:
                return False
            raise
        return any(r.get("name") == res.plural for r in found.get("resources") or [] if isinstance(r, dict))

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
        self,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        field_selector: str | None = None,
    ) -> tuple[list[JSON], str]:
        """Every object (in ``namespace`` or all, optionally narrowed by label and field selectors),
        and the list's resourceVersion to watch from (read in pages: :meth:`list_pages`)."""
        items: builtins.list[JSON] = []
        rv = ""
        async for page, page_rv in self.list_pages(res, namespace, label_selector, field_selector=field_selector):
            items += page
            rv = page_rv
        return items, rv

    async def list_pages(
        self,
        res: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        field_selector: str | None = None,
        limit: int = LIST_PAGE_SIZE,
    ) -> AsyncIterator[tuple[builtins.list[JSON], str]]:
        """The objects of one list, ``limit`` at a time: ``(page, resourceVersion)`` per page, the
        resourceVersion that of the list's snapshot (each page's ``continue`` token asks for the next;
        client-go ``tools/pager``, as its reflector lists). Raises :class:`ApiError`: 410 Gone when the
        token expired mid-list (the caller lists again)."""
        token: str | None = None
        while True:
            query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": str(limit)}
            if token:
                query["continue"] = token
            data = await self.request("GET", res.path(namespace), query)
            items = data.get("items") or []
            for item in items:  # list items lack kind/apiVersion
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
            meta = data.get("metadata") or {}
            yield items, str(meta.get("resourceVersion", ""))
            token = meta.get("continue") or None
            if not token:
                return

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

        Ends when the server closes the stream (after ``timeout_seconds``). Opening the stream is
        retried on 429/5xx with ``Retry-After`` like :meth:`request` (client-go's ``Request.Watch`` does
        too). Raises :class:`ApiError` (410 Gone when ``resource_version`` is too old: the caller relists),
        and aiohttp's or asyncio's errors when the connection fails.
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
        resp = await self._send(
            "GET", res.path(namespace), query, {"Accept": "application/json"}, None, timeout_seconds + 30
        )
        try:
            if resp.status >= 300:
                text = await resp.text()
                wait = retry_after(resp.status, resp.headers)
                raise ApiError(resp.status, json_codec.loads(text) if text.startswith("{") else text, wait)
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                event = json_codec.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(int(obj.get("code", 500)), obj)
                yield str(event.get("type")), obj
        finally:
            resp.release()

    async def apply(self, obj: JSON, manager: str, force: bool = True, *, dry_run: bool = False) -> JSON:
        """Server-side apply ``obj`` (must carry apiVersion, kind, metadata.name) as field manager
        ``manager``; returns the stored object (with ``dry_run``, the apiserver's ``dryRun=All``:
        the object as it would be stored, nothing stored)."""
        res = resource_of(obj)
        meta = obj["metadata"]
        return await self.request(
            "PATCH",
            res.path(meta.get("namespace"), meta["name"]),
            {"fieldManager": manager, "force": "true" if force else "false", "dryRun": DRY_RUN if dry_run else None},
            body=obj,
            content_type="application/apply-patch+yaml",
        )

    async def patch_status(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        status: JSON,
        resource_version: str | None = None,
        manager: str = "trainer",
    ) -> JSON:
        """JSON merge-patch of the status subresource (lists in ``status`` are replaced whole), recorded
        in ``managedFields`` under field manager ``manager``. With ``resource_version`` the patch applies
        only to that version of the object (:class:`ApiError` 409 when it changed since)."""
        body: JSON = {"status": status}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self.request(
            "PATCH",
            res.path(namespace, name, "status"),
            {"fieldManager": manager},
            body=body,
            content_type="application/merge-patch+json",
        )

    async def merge_patch(self, res: Resource, namespace: str | None, name: str, patch: JSON) -> JSON:
        """JSON merge-patch of an object."""
        return await self.request(
            "PATCH", res.path(namespace, name), body=patch, content_type="application/merge-patch+json"
        )

    async def json_patch(self, res: Resource, namespace: str | None, name: str, ops: builtins.list[JSON]) -> JSON:
        """JSON patch (RFC 6902) of an object: ``ops`` in order, all or none. Raises :class:`ApiError`
        (409 when an op sets ``/metadata/resourceVersion`` to one the object no longer has)."""
        return await self.request(
            "PATCH", res.path(namespace, name), body=ops, content_type="application/json-patch+json"
        )

    async def create(
        self, res: Resource, namespace: str | None, obj: JSON, manager: str | None = None, *, dry_run: bool = False
    ) -> JSON:
        """Create ``obj``, recorded in ``managedFields`` under field manager ``manager`` (None: the
        apiserver's default, from the user agent); with ``dry_run`` (``dryRun=All``) nothing is
        stored and the object is returned as it would be. Raises :class:`ApiError` (409 when it exists)."""
        query = {"fieldManager": manager, "dryRun": DRY_RUN if dry_run else None}
        return await self.request("POST", res.path(namespace), query, body=obj)

    async def update(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        """Replace ``obj`` (PUT). With ``metadata.resourceVersion`` set this is a compare-and-swap:
        raises :class:`ApiError` 409 when the stored object changed since that version."""
        return await self.request("PUT", res.path(namespace, obj["metadata"]["name"]), body=obj)

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
        """Delete one object; False when it was already gone, or (with ``uid``, a precondition) when the
        object of that name now is another one (a 409 of the precondition). With ``dry_run``
        (``DeleteOptions.dryRun: [All]``, in the body: with a body the apiserver reads no query
        options) the apiserver checks the deletion and deletes nothing."""
        body: JSON = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        if dry_run:
            body["dryRun"] = [DRY_RUN]
        try:
            await self.request("DELETE", res.path(namespace, name), body=body)
        except ApiError as e:
            if e.not_found or (uid and e.conflict):
                return False
            raise
        return True
