"""The status server: trainer pods post their progress here and it lands in ``status.trainerStatus``.

Follows kubeflow/trainer ``pkg/statusserver`` (``server.go``, ``auth.go``, ``middleware.go``,
``utils.go``) and KEP-2779 (``docs/proposals/2779-trainjob-progress/README.md``): aiohttp over TLS,
one route,

``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status``

with ``Authorization: Bearer <token>`` and a JSON body ``{"trainerStatus": {"progressPercentage":
0-100, "estimatedRemainingSeconds": >= 0, "metrics": [{"name", "value"}] (at most 256, strings of 1 to
64 characters), "lastUpdatedTime": RFC 3339}}`` (every field optional; ``lastUpdatedTime`` defaults
to the time the server received the post). Answers, each but 200 a ``metav1.Status`` JSON:

* 200 with the update as stored (``{"trainerStatus": {...}}``; ``{}`` for a body without one);
* 401 without a bearer token, or when the TokenReview (audience :func:`token_audience` of this
  TrainJob) does not authenticate it;
* 403 when the token is not a ServiceAccount token bound to a pod of this namespace whose label
  ``jobset.sigs.k8s.io/jobset-name`` names this TrainJob (upstream checks the namespace only and
  answers 403 for every refusal);
* 404 for another path or a TrainJob that does not exist; 413 for a body over 64 KiB; 422 for a body
  that is not such JSON; 500 when the apiserver could not be asked.

**Authentication** (:class:`TokenAuthenticator`): a ``authentication.k8s.io/v1`` TokenReview with the
TrainJob's audience; the pod comes from the user's extra ``authentication.kubernetes.io/pod-name`` and
``pod-uid`` (bound tokens, as the kubelet mints for the projected volume), and is read to check its
uid and label. Verdicts are cached per (token, TrainJob): a minute (at most until the token expires),
ten seconds for refusals; a burst of posts with one new token makes one review.

**Writes** (:class:`WriteLimiter`): a JSON merge-patch of ``status.trainerStatus`` (fields the post
leaves out are removed, as upstream's server-side apply does) through the status subresource, at most
one per TrainJob per ``--status-write-interval`` seconds: the first post of an idle TrainJob is
written at once; later ones are answered 200 at once and the latest of them is written when the
interval has passed. The reconciler's status writes patch only the keys they own, so neither
overwrites the other. Limits are per operator replica (every replica serves, as upstream).

**TLS** (:class:`StatusServer`): the webhook's certificate machinery
(:class:`~trainer.webhook.tls.WebhookTLS`: CA, serving certificate, renewal, live reload) on a Secret
of its own, ``trainer-status-server-certs`` in ``--webhook-namespace``, with the SANs of the Service
``--webhook-service`` and of ``--status-server-host``. Its CA reaches the pods through the ConfigMap
``<trainjob>-tls-config`` (:class:`CAPublisher`), made for every TrainJob and updated when the CA
changes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import aiohttp
import structlog
from aiohttp import web
from pydantic import ValidationError

from api.kinds import CONFIGMAPS, PODS, TOKEN_REVIEWS, TRAINJOBS
from api.trainer_v1alpha1 import MANAGED_BY_TRAINER, TrainerStatus
from trainer.builders.labels import JOBSET_NAME
from trainer.controller import Reader
from trainer.kube.cache import Key, key_of
from trainer.kube.client import JSON, ApiError, Kube
from trainer.trainjobstatus import (
    CA_KEY,
    base_url,
    ca_config_map,
    ca_config_map_name,
    status_path,
    token_audience,
)
from trainer.webhook.certs import VALIDITY
from trainer.webhook.tls import WebhookTLS, serving_names

if TYPE_CHECKING:
    from trainer.manager import Manager

log = structlog.get_logger("trainer.statusserver")

SECRET_NAME = "trainer-status-server-certs"
"""The Secret holding the status server's CA and serving certificate (in ``--webhook-namespace``)."""
MAX_BODY = 1 << 16
"""Largest request body accepted, in bytes (upstream ``maxBodySize``)."""
INT32_MAX = 2**31 - 1
CACHE_TTL = 60.0
"""Seconds an accepted token is trusted without a new TokenReview (never beyond its expiry)."""
REFUSED_TTL = 10.0
"""Seconds a refused token stays refused without a new TokenReview."""
CACHE_SIZE = 4096
"""Verdicts kept at most; the oldest go first."""
MAX_REVIEWS = 16
"""TokenReviews in flight at most."""
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


# --------------------------------------------------------------------------- answers


def status_body(code: int, reason: str, message: str) -> JSON:
    """A ``metav1.Status`` failure: ``{kind, apiVersion, metadata, status, message, reason, code}``."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    413: "RequestEntityTooLarge",
    422: "Invalid",
    500: "InternalError",
}


def failure(code: int, message: str) -> web.Response:
    """The HTTP answer ``code`` with its :func:`status_body` (401s carry ``WWW-Authenticate: Bearer``)."""
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    return web.json_response(status_body(code, REASONS.get(code, "Unknown"), message), status=code, headers=headers)


# --------------------------------------------------------------------------- the payload


class PayloadError(ValueError):
    """A request body that is not an update (answered 422 with this message)."""


def rfc3339(value: str) -> str:
    """``value`` (RFC 3339 with an offset, fractions allowed) in UTC to the second, as
    ``metav1.Time`` stores it (``2025-01-23T10:30:45Z``). Raises :class:`PayloadError`."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise PayloadError(f"trainerStatus.lastUpdatedTime: not an RFC 3339 time: {value!r}") from None
    if when.tzinfo is None:
        raise PayloadError(f"trainerStatus.lastUpdatedTime: no time zone offset in {value!r}")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_update(body: bytes, now: datetime | None = None) -> TrainerStatus | None:
    """The ``trainerStatus`` of a request body (upstream ``UpdateTrainJobStatusRequest``), None when
    it has none. Types are strict (no strings for numbers, no fractions); bounds are the CRD's, plus
    int32 for ``estimatedRemainingSeconds``; other keys are ignored, as Go's decoder ignores them;
    ``lastUpdatedTime`` defaults to ``now`` (default: the current time). Raises :class:`PayloadError`."""
    try:
        data = json.loads(body)
    except ValueError as e:
        raise PayloadError(f"invalid payload: {e}") from None
    if not isinstance(data, dict):
        raise PayloadError("invalid payload: not a JSON object")
    raw = data.get("trainerStatus")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise PayloadError("trainerStatus: not an object")
    if raw.get("lastUpdatedTime") is None:
        raw = {**raw, "lastUpdatedTime": (now or datetime.now(UTC)).isoformat()}
    try:
        status = TrainerStatus.model_validate(raw, strict=True)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in ("trainerStatus", *err["loc"]))
        raise PayloadError(f"{where}: {err['msg']}") from None
    if (status.estimated_remaining_seconds or 0) > INT32_MAX:
        raise PayloadError(f"trainerStatus.estimatedRemainingSeconds: more than {INT32_MAX}")
    return status.model_copy(update={"last_updated_time": rfc3339(status.last_updated_time)})


def stored(status: TrainerStatus) -> JSON:
    """The ``trainerStatus`` object as written: only the modelled fields, unset ones left out."""
    out: JSON = {}
    if status.progress_percentage is not None:
        out["progressPercentage"] = status.progress_percentage
    if status.estimated_remaining_seconds is not None:
        out["estimatedRemainingSeconds"] = status.estimated_remaining_seconds
    if status.metrics:
        out["metrics"] = [{"name": m.name, "value": m.value} for m in status.metrics]
    out["lastUpdatedTime"] = status.last_updated_time
    return out


def status_patch(status: TrainerStatus) -> JSON:
    """The merge-patch of ``status`` that replaces ``trainerStatus`` whole: every field it leaves out
    is set to null (removed)."""
    fields = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")
    return {"trainerStatus": {k: None for k in fields} | stored(status)}


# --------------------------------------------------------------------------- authentication


@dataclass(frozen=True)
class Verdict:
    """Whether a token may update a TrainJob: ``code`` 200 (yes), 401 or 403, with why."""

    code: int
    message: str
    pod: str = ""
    """The pod the token is bound to, when known."""

    @property
    def allowed(self) -> bool:
        """True for 200."""
        return self.code == 200


def bearer_token(header: str | None) -> str:
    """The credentials of an RFC 7235 ``Bearer`` Authorization header (scheme in any case, any
    whitespace), "" unless it holds exactly one (upstream ``extractRawToken``)."""
    parts = (header or "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim (Unix seconds) of a JWT, read without checking it (only after a TokenReview
    accepted the token), None when it has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None


class TokenAuthenticator:
    """Decides whether a bearer token may update a TrainJob (see the module docstring), caching the
    verdicts. ``clock`` (monotonic seconds) and ``wall`` (Unix seconds) are for tests."""

    def __init__(
        self,
        kube: Kube,
        *,
        ttl: float = CACHE_TTL,
        refused_ttl: float = REFUSED_TTL,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.kube, self.ttl, self.refused_ttl, self.size = kube, ttl, refused_ttl, size
        self._clock, self._wall = clock, wall
        self._cache: OrderedDict[tuple[str, str, str], tuple[float, Verdict]] = OrderedDict()
        self._inflight: dict[tuple[str, str, str], asyncio.Future[tuple[Verdict, float]]] = {}
        self._reviews = asyncio.Semaphore(MAX_REVIEWS)
        self.reviews = 0
        """TokenReviews made so far."""

    async def authorize(self, header: str | None, namespace: str, name: str) -> Verdict:
        """The verdict for the Authorization ``header`` on TrainJob ``namespace/name``. Raises
        :class:`ApiError` or aiohttp's errors when the apiserver could not answer (nothing cached)."""
        token = bearer_token(header)
        if not token:
            return Verdict(401, "a bearer token is required")
        key = (hashlib.sha256(token.encode()).hexdigest(), namespace, name)
        hit = self._cache.get(key)
        if hit is not None:
            if hit[0] > self._clock():
                return hit[1]
            del self._cache[key]
        future = self._inflight.get(key)
        if future is None:
            future = asyncio.ensure_future(self._review(token, namespace, name))
            self._inflight[key] = future
            future.add_done_callback(lambda _f: self._inflight.pop(key, None))
        verdict, ttl = await asyncio.shield(future)
        if ttl > 0:
            self._cache[key] = (self._clock() + ttl, verdict)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return verdict

    async def _review(self, token: str, namespace: str, name: str) -> tuple[Verdict, float]:
        """The verdict and how many seconds it may be cached."""
        review = {
            "apiVersion": TOKEN_REVIEWS.api_version,
            "kind": TOKEN_REVIEWS.kind,
            "spec": {"token": token, "audiences": [token_audience(namespace, name)]},
        }
        async with self._reviews:
            self.reviews += 1
            answer = await self.kube.create(TOKEN_REVIEWS, None, review)
        status = answer.get("status") or {}
        audience = token_audience(namespace, name)
        if not status.get("authenticated") or audience not in (status.get("audiences") or [audience]):
            why = status.get("error") or "not authenticated"
            return Verdict(401, f"the token is not valid for TrainJob {namespace}/{name}: {why}"), self.refused_ttl
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        pod = next(iter(extra.get(POD_NAME_EXTRA) or []), "")
        pod_uid = next(iter(extra.get(POD_UID_EXTRA) or []), "")
        username = str(user.get("username") or "")
        sa_namespace = username.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":")[0]
        if not username.startswith(SERVICE_ACCOUNT_PREFIX) or sa_namespace != namespace or not pod:
            message = f"{username or 'the user'} is not a pod's ServiceAccount token in namespace {namespace}"
            return Verdict(403, message), self.refused_ttl
        found = await self.kube.get_or_none(PODS, namespace, pod)
        meta = (found or {}).get("metadata") or {}
        if found is None or (pod_uid and meta.get("uid") != pod_uid):
            return Verdict(403, f"pod {namespace}/{pod} of the token does not exist", pod), self.refused_ttl
        if (meta.get("labels") or {}).get(JOBSET_NAME) != name:
            return Verdict(403, f"pod {namespace}/{pod} does not belong to TrainJob {namespace}/{name}", pod), (
                self.refused_ttl
            )
        ttl = self.ttl
        expiry = token_expiry(token)
        if expiry is not None:
            ttl = min(ttl, expiry - self._wall())
        return Verdict(200, "", pod), ttl


# --------------------------------------------------------------------------- rate limiting


@dataclass
class _Slot:
    last: float = -math.inf
    pending: JSON | None = None
    flusher: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


Writer = Callable[[Key, JSON], Awaitable[None]]
"""Writes one patch for a TrainJob key; raises what the apiserver answers."""


class WriteLimiter:
    """At most one write per key per ``interval`` seconds; posts in between are coalesced into the
    next write (the latest wins). ``clock`` (monotonic seconds) is for tests."""

    def __init__(self, write: Writer, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        if interval <= 0:
            raise ValueError(f"the write interval must be positive, not {interval}")
        self._write, self.interval, self._clock = write, interval, clock
        self._slots: dict[Key, _Slot] = {}
        self.writes = 0
        """Writes started so far."""

    async def submit(self, key: Key, patch: JSON) -> bool:
        """Write ``patch`` for ``key`` now if the interval since its last write has passed (True, once
        written; raises what the write raises), else keep it for the next write (False)."""
        slot = self._slots.get(key)
        if slot is None:
            self._prune()
            slot = self._slots[key] = _Slot()
        if slot.flusher is None and self._clock() - slot.last >= self.interval:
            slot.last = self._clock()
            async with slot.lock:
                self.writes += 1
                await self._write(key, patch)
            return True
        slot.pending = patch
        if slot.flusher is None:
            slot.flusher = asyncio.ensure_future(self._flush(key, slot))
        return False

    async def _flush(self, key: Key, slot: _Slot) -> None:
        try:
            while slot.pending is not None:
                wait = slot.last + self.interval - self._clock()
                if wait > 0:
                    await asyncio.sleep(wait)
                patch, slot.pending = slot.pending, None
                slot.last = self._clock()
                async with slot.lock:
                    self.writes += 1
                    try:
                        await self._write(key, patch)
                    except ApiError as e:
                        level = log.debug if e.not_found else log.warning
                        level("trainer status not written", trainjob=f"{key[0]}/{key[1]}", error=str(e))
                    except Exception as e:  # a later post writes again
                        log.warning("trainer status not written", trainjob=f"{key[0]}/{key[1]}", error=repr(e))
        finally:
            slot.flusher = None

    def _prune(self) -> None:
        """Forget keys idle for an interval, once there are many."""
        if len(self._slots) < 1024:
            return
        now = self._clock()
        idle = [k for k, s in self._slots.items() if s.flusher is None and not s.lock.locked()]
        for key in [k for k in idle if now - self._slots[k].last >= self.interval]:
            del self._slots[key]

    async def close(self) -> None:
        """Drop what is pending (posts after a restart write again)."""
        tasks = [s.flusher for s in self._slots.values() if s.flusher is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


# --------------------------------------------------------------------------- the CA ConfigMaps


def _ours(obj: JSON) -> bool:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return not meta.get("deletionTimestamp") and spec.get("managedBy") in (None, "", MANAGED_BY_TRAINER)


class CAPublisher:
    """Keeps ConfigMap ``<trainjob>-tls-config`` (``ca.crt``) current for every TrainJob this operator
    runs, from the TrainJob and ConfigMap caches of ``reader`` (the TrainJob controller's): fed by
    :meth:`on_trainjob` (an informer handler) and :meth:`set_ca` (the certificate keeper's installer),
    written by :meth:`run`. Failed writes are retried after ``retry_delay`` seconds."""

    def __init__(self, kube: Kube, reader: Reader, retry_delay: float = 5.0) -> None:
        self.kube, self.reader, self.retry_delay = kube, reader, retry_delay
        self.ca: str | None = None
        self._pending: set[Key] = set()
        self._written: dict[Key, tuple[str, str]] = {}
        self._wake = asyncio.Event()

    def _due(self, obj: JSON) -> bool:
        if self.ca is None or not _ours(obj):
            return False
        ns, name = key_of(obj)
        if self._written.get((ns, name)) == (str(obj["metadata"].get("uid")), self.ca):
            return False
        cm = self.reader.get(CONFIGMAPS, ns, ca_config_map_name(name))
        return cm is None or (cm.get("data") or {}).get(CA_KEY) != self.ca

    def on_trainjob(self, old: JSON | None, new: JSON | None) -> None:
        """Informer handler: queue a TrainJob whose ConfigMap is missing or stale."""
        if new is None:
            if old is not None:
                self._written.pop(key_of(old), None)
            return
        if self._due(new):
            self._pending.add(key_of(new))
            self._wake.set()

    async def set_ca(self, ca: str) -> None:
        """Publish ``ca`` (PEM) to every TrainJob's ConfigMap from now on (the writes happen in
        :meth:`run`)."""
        self.ca = ca
        self._pending |= {key_of(o) for o in self.reader.items(TRAINJOBS) if self._due(o)}
        self._wake.set()

    async def publish(self, key: Key) -> None:
        """Create or update the ConfigMap of TrainJob ``key`` when due. Raises :class:`ApiError` (but
        for a namespace or TrainJob that is gone)."""
        obj = self.reader.get(TRAINJOBS, *key)
        if obj is None or self.ca is None or not self._due(obj):
            return
        ca, body = self.ca, ca_config_map(obj, self.ca)
        try:
            try:
                await self.kube.create(CONFIGMAPS, key[0], body)
            except ApiError as e:
                if not e.conflict:
                    raise
                patch = {"metadata": {k: body["metadata"][k] for k in ("labels", "ownerReferences")}}
                await self.kube.merge_patch(
                    CONFIGMAPS, key[0], body["metadata"]["name"], patch | {"data": body["data"]}
                )
        except ApiError as e:
            if e.namespace_terminating or e.not_found:
                return
            raise
        self._written[key] = (str(obj["metadata"].get("uid")), ca)
        log.info("status server CA published", configmap=f"{key[0]}/{body['metadata']['name']}")

    async def run(self) -> None:
        """Write what is queued until cancelled; failures are logged and retried."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            keys, self._pending = self._pending, set()
            failed = set()
            for key in sorted(keys):
                try:
                    await self.publish(key)
                except Exception as e:
                    log.warning("status server CA not published", trainjob=f"{key[0]}/{key[1]}", error=str(e))
                    failed.add(key)
            if failed:
                await asyncio.sleep(self.retry_delay)
                self._pending |= failed
                self._wake.set()


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class StatusServerSettings:
    """Where the status server listens, how pods reach it, and how often it writes."""

    port: int
    """Port it listens on (0: any free port, for tests) and pods call."""
    host: str | None = None
    """Host in the URL pods call (``--status-server-host``); None: ``<service>.<namespace>.svc``."""
    namespace: str = "default"
    """Namespace of the Service and of the certificate Secret (``--webhook-namespace``)."""
    service: str = "trainer-webhook-service"
    """Service in front of the operator (``--webhook-service``); it must map :attr:`port`."""
    bind_address: str = "0.0.0.0"
    write_interval: float = 5.0
    """Seconds between two status writes of one TrainJob at least (``--status-write-interval``)."""
    cert_validity: float = VALIDITY.total_seconds()
    """Seconds a serving certificate is valid (``--webhook-cert-validity``)."""
    reuse_port: bool = False
    """Bind with SO_REUSEPORT (``--webhook-reuse-port``)."""
    secret_name: str = SECRET_NAME

    @property
    def url(self) -> str:
        """``https://<host>:<port>`` as the pods call it."""
        return base_url(self.host or f"{self.service}.{self.namespace}.svc", self.port)


class StatusServer:
    """Serves the status endpoint (see the module docstring)."""

    def __init__(self, kube: Kube, settings: StatusServerSettings, reader: Reader | None = None) -> None:
        self.kube, self.settings = kube, settings
        self.auth = TokenAuthenticator(kube)
        self.limiter = WriteLimiter(self._write, settings.write_interval)
        self.publisher = CAPublisher(kube, reader) if reader is not None else None
        self.tls: WebhookTLS | None = None
        """The certificate keeper while :meth:`run` serves."""
        self.port: int | None = None
        """The port bound by :meth:`listen`."""

    async def _write(self, key: Key, patch: JSON) -> None:
        await self.kube.patch_status(TRAINJOBS, key[0], key[1], patch)

    async def handle(self, request: web.Request) -> web.Response:
        """One post (upstream ``handleTrainJobRuntimeStatus``). Never raises."""
        ns, name = request.match_info["namespace"], request.match_info["name"]
        if (request.content_length or 0) > MAX_BODY:
            return failure(413, "Payload too large")
        try:
            verdict = await self.auth.authorize(request.headers.get("Authorization"), ns, name)
        except Exception:
            log.exception("token review failed", trainjob=f"{ns}/{name}")
            return failure(500, "Internal error")
        if not verdict.allowed:
            log.debug("status post refused", trainjob=f"{ns}/{name}", code=verdict.code, why=verdict.message)
            return failure(verdict.code, verdict.message)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return failure(413, "Payload too large")
        try:
            status = parse_update(body)
        except PayloadError as e:
            return failure(422, str(e))
        if status is None:
            return web.json_response({})
        try:
            await self.limiter.submit((ns, name), status_patch(status))
        except ApiError as e:
            if e.not_found:
                return failure(404, "Train job not found")
            if e.invalid or e.status == 400:
                return failure(422, e.message)
            log.warning("trainer status not written", trainjob=f"{ns}/{name}", error=str(e))
            return failure(500, "Internal error")
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("trainer status not written", trainjob=f"{ns}/{name}", error=repr(e))
            return failure(500, "Internal error")
        return web.json_response({"trainerStatus": stored(status)})

    async def not_found(self, _request: web.Request) -> web.Response:
        """Any other path or method (upstream ``handleDefault``)."""
        return failure(404, "Not found")

    def app(self) -> web.Application:
        """The aiohttp application: the status route, and 404 for everything else."""
        app = web.Application(client_max_size=MAX_BODY)
        route = f"/apis/{TRAINJOBS.api_version}/namespaces/{{namespace}}/{TRAINJOBS.plural}/{{name}}/status"
        assert status_path("ns", "job") == route.format(namespace="ns", name="job")
        app.router.add_post(route, self.handle)
        app.router.add_route("*", "/{tail:.*}", self.not_found)
        return app

    async def listen(self, context: ssl.SSLContext) -> web.AppRunner:
        """Serve :meth:`app` over TLS with ``context`` on the configured address; sets :attr:`port`
        (the bound one, when configured 0). The caller cleans the runner up. Raises ``OSError``."""
        s = self.settings
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, s.bind_address, s.port, ssl_context=context, reuse_port=s.reuse_port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.port = next((a[1] for a in runner.addresses if isinstance(a, tuple)), s.port)
        return runner

    async def run(self) -> None:
        """Serve until cancelled: certificates from the Secret (created or renewed when due), their CA
        handed to the :class:`CAPublisher`, the listener, then keep the certificate current and the
        ConfigMaps written. Raises :class:`ApiError` when the Secret cannot be read or written at
        start, ``OSError`` when the port cannot be bound."""
        s = self.settings
        dns, ips = serving_names(s.service, s.namespace, s.host)
        publisher = self.publisher
        install = publisher.set_ca if publisher is not None else None
        tls = self.tls = WebhookTLS(
            self.kube, s.namespace, dns, ips, validity=s.cert_validity, secret_name=s.secret_name, install=install
        )
        try:
            await tls.start()
            await tls.install()
            runner = await self.listen(tls.context)
            try:
                log.info("status server serving", port=self.port, url=s.url, write_interval=s.write_interval)
                loops = [tls.run(), *([publisher.run()] if publisher is not None else [])]
                await asyncio.gather(*loops)
            finally:
                await self.limiter.close()
                await runner.cleanup()
        finally:
            tls.close()


def setup(kube: Kube, settings: StatusServerSettings, manager: Manager) -> StatusServer:
    """The status server for the operator run by ``manager`` (upstream ``SetupServer``), whose
    settings name the same URL (``Settings.status_server_url``, which injects it into trainer pods);
    feeds the CA publisher from the manager's TrainJob informer. Call before the manager runs."""
    reader = manager.readers["trainjob"]
    server = StatusServer(kube, settings, reader)
    assert server.publisher is not None
    for informer in manager.informers:
        if informer.res == TRAINJOBS:
            informer.add_handler(server.publisher.on_trainjob)
    return server
