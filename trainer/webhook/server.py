"""The admission webhook server (aiohttp over TLS) and the webhook configurations it keeps current.

Serves ``admission.k8s.io/v1`` AdmissionReviews for TrainJob, TrainingRuntime,
ClusterTrainingRuntime (validation) and TrainJob, MPIJob (defaulting and validation); the rules are
the pure functions of :mod:`trainer.webhook.rules`, fed from the operator's caches. The operator
applies its own Validating/MutatingWebhookConfigurations with the CA of its certificates, pointing
either at a URL (``--webhook-host``, e.g. a local apiserver calling 127.0.0.1) or at a Service
(in a cluster), from the same code. The certificates (the shared Secret, rotation, reloading in place)
are :mod:`trainer.webhook.tls`'s business; it calls :meth:`WebhookServer.install` when the CAs change.

``failurePolicy: Fail`` on CREATE and UPDATE only: while the operator is down no invalid object gets
in, and since DELETE is not intercepted, deletions always work.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from aiohttp import web

from api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBS,
    KUEUE_LOCAL_QUEUES,
    MPIJOBS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    VOLCANO_QUEUES,
    Resource,
)
from trainer import json_codec
from trainer.controller import Reader
from trainer.json_codec import JSON
from trainer.kube.client import ApiError, Kube
from trainer.runtime_validation import DEFAULT_MAX_NODES_PER_JOB
from trainer.webhook import rules
from trainer.webhook.certs import VALIDITY
from trainer.webhook.tls import WebhookTLS, serving_names

log = structlog.get_logger("trainer.webhook")
CONFIG_NAME = "trainer-webhook"

VALIDATED = (TRAINJOBS, TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES, MPIJOBS)
"""Kinds admission validates, each at ``/validate-<kind>``."""
DEFAULTED = (TRAINJOBS, MPIJOBS)
"""Kinds admission defaults, each at ``/mutate-<kind>``."""
VALIDATE = {f"/validate-{r.kind.lower()}": r for r in VALIDATED}
MUTATE = {f"/mutate-{r.kind.lower()}": r for r in DEFAULTED}

MAX_REVIEW_BYTES = 8 << 20
"""Largest AdmissionReview body read, in bytes (8 MiB; aiohttp's default is 1 MiB). The apiserver takes
request bodies of up to 3 MiB (``MaxRequestBodyBytes``, kubernetes ``staging/src/k8s.io/apiserver/
pkg/server/config.go``) and etcd stores objects of up to 1.5 MiB (``--max-request-bytes``); an UPDATE
review carries the object and ``oldObject``, each up to 3 MiB as JSON, plus the request's envelope
(user info, options): 8 MiB holds the largest review the apiserver can send, with room for the JSON
escaping of its re-encoding. A larger body is answered 413."""
READ_TIMEOUT = 10.0
"""Seconds a review's body may take to arrive once its headers are in (the apiserver gives up on a
webhook after its ``timeoutSeconds``, 10); a slower client is answered 408 and its connection closed."""
HANDLE_TIMEOUT = 9.0
"""Seconds one review may take to decide (its look-ups included), under the apiserver's 10 s; past it
the review is refused with a message."""
IDLE_TIMEOUT = 30.0
"""Seconds a connection may stay without a complete request head, first or next (aiohttp's
``keepalive_timeout``, which also bounds a client that opens a connection and sends its headers slowly
or not at all); then it is closed."""
LINGER_TIMEOUT = 1.0
"""Seconds the rest of a body left unread (a 408 or 413) is drained before the connection is closed
(aiohttp's ``lingering_time``, 10 by default)."""


@dataclass(frozen=True)
class WebhookSettings:
    """Where the webhook listens and how the apiserver reaches it."""

    port: int
    bind_address: str = "0.0.0.0"
    host: str | None = None
    """URL host the apiserver calls (e.g. 127.0.0.1); None: through the Service below."""
    namespace: str = "default"
    """Namespace of the Service and of the certificate Secret."""
    service: str = "trainer-webhook-service"
    service_port: int = 443
    cert_validity: float = VALIDITY.total_seconds()
    """Seconds a serving certificate is valid (renewed in its last third; the CA lives ten years)."""
    reuse_port: bool = False
    """Bind the port with SO_REUSEPORT, so that several replicas on one host share it."""


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type: ``object``, ``array``, ``string``, ``number``,
    ``boolean`` or ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


def bad_request(code: int, message: str) -> web.Response:
    """An HTTP failure ``code`` whose JSON body says why: ``{"error": message}``; the connection is
    closed after it."""
    return web.json_response({"error": message}, status=code, headers={"Connection": "close"})


def review_response(uid: str, verdict: rules.Verdict, patch: list[JSON] | None = None) -> JSON:
    """An AdmissionReview answer for ``verdict`` (and a JSON patch when defaulting)."""
    response: JSON = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 422, "reason": "Invalid", "message": "; ".join(verdict.errors)}
    if verdict.warnings:
        response["warnings"] = verdict.warnings
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class WebhookServer:
    """Serves admission and keeps its certificates and webhook configurations current."""

    def __init__(self, kube: Kube, settings: WebhookSettings, facts: rules.AdmissionFacts) -> None:
        self.kube, self.settings, self.facts = kube, settings, facts
        self.tls: WebhookTLS | None = None
        """The certificate keeper while :meth:`run` serves."""

    # ---------------------------------------------------------------- admission

    async def handle(self, request: web.Request) -> web.Response:
        """One AdmissionReview. Never raises. Answers 400 for a body that is not a JSON object with an
        object ``request``, 413 past :data:`MAX_REVIEW_BYTES`, 408 when the body takes longer than
        :data:`READ_TIMEOUT`; otherwise 200 with the review's answer (an internal error, or a decision
        longer than :data:`HANDLE_TIMEOUT`, refuses with its message)."""
        path = request.path
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                raw = await request.read()
        except TimeoutError:
            return bad_request(408, f"the AdmissionReview did not arrive within {READ_TIMEOUT:g} s")
        except web.HTTPRequestEntityTooLarge:
            return bad_request(413, f"the AdmissionReview is larger than {MAX_REVIEW_BYTES} bytes")
        try:
            review = json_codec.loads(raw)  # orjson reads 1,024 levels, at any stack depth
        except ValueError as e:
            return bad_request(400, f"not an AdmissionReview: the body is not JSON ({e})")
        if not isinstance(review, dict):
            return bad_request(400, f"not an AdmissionReview: the body is a JSON {json_type(review)}, not an object")
        req = review.get("request")
        if not isinstance(req, dict):
            return bad_request(400, f"not an AdmissionReview: request is {json_type(req)}, not an object")
        try:
            async with asyncio.timeout(HANDLE_TIMEOUT):
                body = await self.review(path, req)
        except TimeoutError:
            log.warning("admission timed out", path=path, seconds=HANDLE_TIMEOUT)
            why = f"the trainer webhook did not decide within {HANDLE_TIMEOUT:g} s; retry"
            body = review_response(str(req.get("uid", "")), rules.Verdict(errors=[why]))
        except Exception as e:
            log.exception("admission failed", path=path)
            body = review_response(
                str(req.get("uid", "")), rules.Verdict(errors=[f"internal error in the trainer webhook: {e!r}"])
            )
        return web.json_response(body)

    async def review(self, path: str, req: JSON) -> JSON:
        """The AdmissionReview answer for one request."""
        uid, op = str(req.get("uid", "")), req.get("operation")
        obj: JSON = req.get("object") or {}
        old: JSON | None = req.get("oldObject") if op == "UPDATE" else None
        if not isinstance(obj, dict) or not isinstance(old, dict | None):
            errors = [
                f"request.{k}: a JSON {json_type(v)}, not an object"
                for k, v in (("object", obj), ("oldObject", old))
                if v is not None and not isinstance(v, dict)
            ]
            return review_response(uid, rules.Verdict(errors=errors))
        if obj and req.get("namespace") and not (obj.get("metadata") or {}).get("namespace"):
            obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": req["namespace"]}}
        if path in MUTATE:
            kind = "MPIJob" if path == "/mutate-mpijob" else "TrainJob"
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            patch = rules.default_patch(obj, kind, self.facts.gang, old, now)
            return review_response(uid, rules.Verdict(), patch)
        too_deep = rules.nesting_errors(obj)
        if too_deep:
            log.info("admission refused", path=path, name=(obj.get("metadata") or {}).get("name"), errors=too_deep)
            return review_response(uid, rules.Verdict(errors=too_deep))
        facts = await self._facts_for(obj, path)
        if path == "/validate-trainjob":
            verdict = rules.validate_trainjob(obj, old, facts)
        elif path == "/validate-mpijob":
            verdict = rules.validate_mpijob(obj, old, facts)
        else:
            verdict = rules.validate_runtime(obj)
        if not verdict.allowed:
            meta = obj.get("metadata") or {}
            log.info("admission refused", path=path, name=meta.get("name"), errors=verdict.errors)
        return review_response(uid, verdict)

    async def _facts_for(self, obj: JSON, path: str) -> rules.AdmissionFacts:
        """The cache facts, plus a LocalQueue look-up when Kueue is the gang scheduler."""
        if self.facts.gang != "kueue":
            return self.facts
        queue = rules.admission_queue(obj, self.facts).name
        ns = str((obj.get("metadata") or {}).get("namespace"))
        exists: bool | None = None
        if queue:
            try:
                exists = await self.kube.get_or_none(KUEUE_LOCAL_QUEUES, ns, queue) is not None
            except ApiError:
                exists = None
        return dataclasses.replace(self.facts, local_queue_exists=lambda _ns, _name: exists)

    # ---------------------------------------------------------------- configurations

    def _client_config(self, path: str, ca: str) -> JSON:
        s = self.settings
        cfg: JSON = {"caBundle": base64.b64encode(ca.encode()).decode()}
        if s.host:
            cfg["url"] = f"https://{s.host}:{s.port}{path}"
        else:
            cfg["service"] = {"namespace": s.namespace, "name": s.service, "path": path, "port": s.service_port}
        return cfg

    def configurations(self, ca: str) -> list[JSON]:
        """The Validating and Mutating webhook configurations, with ``ca`` as their caBundle."""

        def hook(path: str, target: Resource, prefix: str) -> JSON:
            group, version, resource = target.group, target.version, target.plural
            return {
                "name": f"{prefix}.{resource}.{group}",
                "clientConfig": self._client_config(path, ca),
                "rules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": [version],
                        "resources": [resource],
                        "operations": ["CREATE", "UPDATE"],
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "matchPolicy": "Equivalent",
                "timeoutSeconds": 10,
            }

        return [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": CONFIG_NAME},
                "webhooks": [hook(p, t, "validate") for p, t in VALIDATE.items()],
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": CONFIG_NAME},
                "webhooks": [hook(p, t, "default") for p, t in MUTATE.items()],
            },
        ]

    async def install(self, ca: str) -> None:
        """Apply the webhook configurations with caBundle ``ca`` (PEM, one or more CAs; server-side
        apply, idempotent). Raises :class:`ApiError` when the apiserver refuses."""
        validating, mutating = self.configurations(ca)
        await self.kube.apply(validating, "trainer")
        await self.kube.apply(mutating, "trainer")

    # ---------------------------------------------------------------- serving

    def app(self) -> web.Application:
        """The aiohttp application (one route per webhook path), reading bodies of up to
        :data:`MAX_REVIEW_BYTES`."""
        app = web.Application(client_max_size=MAX_REVIEW_BYTES)
        for path in (*VALIDATE, *MUTATE):
            app.router.add_post(path, self.handle)
        return app

    def runner(self) -> web.AppRunner:
        """The runner of :meth:`app`: no access log, connections without a request head for
        :data:`IDLE_TIMEOUT` closed, an unread body drained for :data:`LINGER_TIMEOUT` at most. The
        caller sets it up and cleans it up."""
        return web.AppRunner(self.app(), access_log=None, keepalive_timeout=IDLE_TIMEOUT, lingering_time=LINGER_TIMEOUT)

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Serve until cancelled: certificates, then the listener, then the configurations (only once
        this replica can answer; before it when its start put a new CA in the Secret, which configurations
        installed earlier would not trust), then keep the certificate current (see
        :class:`~trainer.webhook.tls.WebhookTLS`). Raises :class:`ApiError` when the certificate Secret
        or the configurations cannot be written at start, ``OSError`` when the port cannot be bound."""
        s = self.settings
        dns, ips = serving_names(s.service, s.namespace, s.host)
        tls = self.tls = WebhookTLS(self.kube, s.namespace, dns, ips, validity=s.cert_validity, install=self.install)
        try:
            await tls.start()
            if ready is not None:
                await ready.wait()  # caches synced: answers would be wrong before
            runner = self.runner()
            await runner.setup()
            try:
                if tls.trust_changed:
                    await tls.install()
                site = web.TCPSite(runner, s.bind_address, s.port, ssl_context=tls.context, reuse_port=s.reuse_port)
                await site.start()
                log.info("webhook serving", port=s.port, host=s.host or "(service)", reuse_port=s.reuse_port)
                await tls.install()
                await tls.run()
            finally:
                await runner.cleanup()
        finally:
            tls.close()


def cache_facts(
    readers: dict[str, Reader], gang: str, max_nodes_per_job: int = DEFAULT_MAX_NODES_PER_JOB
) -> rules.AdmissionFacts:
    """Admission facts read from the controllers' caches (``readers`` by controller name, as
    :attr:`trainer.manager.Manager.readers`), under ``--gang-scheduler-name=gang`` and
    ``--max-nodes-per-job=max_nodes_per_job``."""
    trainjobs, mpijobs = readers["trainjob"], readers["mpijob"]

    def runtime(kind: str, name: str, namespace: str | None) -> JSON | None:
        if kind == TRAINING_RUNTIMES.kind:
            return trainjobs.get(TRAINING_RUNTIMES, namespace, name)
        return trainjobs.get(CLUSTER_TRAINING_RUNTIMES, None, name)

    def active_pods(kind: str, namespace: str, name: str) -> int:
        reader, primary = (trainjobs, TRAINJOBS) if kind == TRAINJOBS.kind else (mpijobs, MPIJOBS)
        obj = reader.get(primary, namespace, name)
        if obj is None:
            return 0
        jobs = reader.owned(JOBS, str(obj["metadata"].get("uid")))
        return sum(int((j.get("status") or {}).get("active") or 0) for j in jobs)

    def volcano_queues() -> list[JSON] | None:
        return trainjobs.items(VOLCANO_QUEUES) if trainjobs.declares(VOLCANO_QUEUES) else None

    return rules.AdmissionFacts(
        runtime=runtime,
        active_pods=active_pods,
        volcano_queues=volcano_queues,
        local_queue_exists=lambda _ns, _name: None,
        gang=gang,
        max_nodes_per_job=max_nodes_per_job,
    )
