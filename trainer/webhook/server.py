"""The admission webhook server (aiohttp over TLS) and the webhook configurations it keeps current.

Serves ``admission.k8s.io/v1`` AdmissionReviews for TrainJob, TrainingRuntime,
ClusterTrainingRuntime (validation) and TrainJob, MPIJob (defaulting and validation); the rules are
the pure functions of :mod:`trainer.webhook.rules`, fed from the operator's caches. The operator
applies its own Validating/MutatingWebhookConfigurations with the CA of its certificates, pointing
either at a URL (``--webhook-host``, e.g. a local apiserver calling 127.0.0.1) or at a Service
(in a cluster), from the same code.

``failurePolicy: Fail`` on CREATE and UPDATE only: while the operator is down no invalid object gets
in, and since DELETE is not intercepted, deletions always work.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from trainer.kube.client import JSON, SECRETS, ApiError, Kube, Resource, register
from trainer.webhook import rules
from trainer.webhook.certs import Bundle, generate

log = structlog.get_logger("trainer.webhook")
VALIDATING = register(
    Resource(
        "admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", False
    )
)
MUTATING = register(
    Resource(
        "admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", False
    )
)
LOCAL_QUEUES = register(Resource("kueue.x-k8s.io", "v1beta1", "LocalQueue", "localqueues"))
CONFIG_NAME = "trainer-webhook"
SECRET_NAME = "trainer-webhook-certs"

# path -> (group, version, resource, kind handled)
VALIDATE = {
    "/validate-trainjob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    "/validate-trainingruntime": ("trainer.kubeflow.org", "v1alpha1", "trainingruntimes"),
    "/validate-clustertrainingruntime": ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"),
    "/validate-mpijob": ("kubeflow.org", "v2beta1", "mpijobs"),
}
MUTATE = {
    "/mutate-trainjob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    "/mutate-mpijob": ("kubeflow.org", "v2beta1", "mpijobs"),
}


@dataclass(frozen=True)
class WebhookSettings:
    """Where the webhook listens and how the apiserver reaches it."""

    port: int
    bind_address: str = "0.0.0.0"
    host: str | None = None
    """URL host the apiserver calls (e.g. 127.0.0.1); None: through the Service below."""
    namespace: str = "default"
    service: str = "trainer-webhook-service"
    service_port: int = 443


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
        self.bundle: Bundle | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="trainer-webhook-"))

    # ---------------------------------------------------------------- admission

    async def handle(self, request: web.Request) -> web.Response:
        """One AdmissionReview. Never raises: an internal error refuses with its message."""
        path = request.path
        try:
            review = await request.json()
            req = review["request"]
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": "not an AdmissionReview"}, status=400)
        try:
            body = await self.review(path, req)
        except Exception as e:
            log.exception("admission failed", path=path)
            body = review_response(
                req.get("uid", ""), rules.Verdict(errors=[f"internal error in the trainer webhook: {e!r}"])
            )
        return web.json_response(body)

    async def review(self, path: str, req: JSON) -> JSON:
        """The AdmissionReview answer for one request."""
        uid, op = str(req.get("uid", "")), req.get("operation")
        obj: JSON = req.get("object") or {}
        old: JSON | None = req.get("oldObject") if op == "UPDATE" else None
        if obj and req.get("namespace") and not (obj.get("metadata") or {}).get("namespace"):
            obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": req["namespace"]}}
        if path in MUTATE:
            kind = "MPIJob" if path == "/mutate-mpijob" else "TrainJob"
            patch = rules.default_patch(obj, kind, self.facts.gang) if op == "CREATE" else []
            return review_response(uid, rules.Verdict(), patch)
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
        kind = "MPIJob" if path == "/validate-mpijob" else "TrainJob"
        queue, _, _ = rules._queue_of(obj, kind)
        ns = str((obj.get("metadata") or {}).get("namespace"))
        exists: bool | None = None
        if queue:
            try:
                exists = await self.kube.get_or_none(LOCAL_QUEUES, ns, queue) is not None
            except ApiError:
                exists = None
        return rules.AdmissionFacts(
            runtime=self.facts.runtime,
            active_pods=self.facts.active_pods,
            volcano_queues=self.facts.volcano_queues,
            local_queue_exists=lambda _ns, _name: exists,
            gang=self.facts.gang,
        )

    # ---------------------------------------------------------------- certificates

    def _sans(self) -> tuple[list[str], list[str]]:
        s = self.settings
        dns = [f"{s.service}.{s.namespace}.svc", f"{s.service}.{s.namespace}.svc.cluster.local", "localhost"]
        ips = ["127.0.0.1"]
        if s.host:
            try:
                ipaddress.ip_address(s.host)
                if s.host not in ips:
                    ips.append(s.host)
            except ValueError:
                dns.insert(0, s.host)
        return dns, ips

    async def ensure_certs(self) -> Bundle:
        """Read the shared certificate Secret, writing a new one when missing or due for rotation."""
        ns = self.settings.namespace
        secret = await self.kube.get_or_none(SECRETS, ns, SECRET_NAME)
        bundle = None
        if secret is not None:
            with contextlib.suppress(KeyError, ValueError):
                bundle = Bundle.from_secret_data(secret.get("data") or {})
        if bundle is None or bundle.needs_rotation():
            fresh = generate(*self._sans())
            meta: JSON = {"name": SECRET_NAME, "namespace": ns}
            body: JSON = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta}
            body["data"] = fresh.to_secret_data()
            try:
                if secret is None:
                    await self.kube.create(SECRETS, ns, body)
                else:
                    meta["resourceVersion"] = secret["metadata"]["resourceVersion"]
                    await self.kube.update(SECRETS, ns, body)
                bundle = fresh
                log.info("webhook certificate written", secret=f"{ns}/{SECRET_NAME}", not_after=str(fresh.not_after()))
            except ApiError as e:
                if not e.conflict:
                    raise
                # Another replica wrote it first: use theirs.
                secret = await self.kube.get(SECRETS, ns, SECRET_NAME)
                bundle = Bundle.from_secret_data(secret["data"])
        self.bundle = bundle
        return bundle

    def ssl_context(self, bundle: Bundle) -> ssl.SSLContext:
        """A server TLS context for ``bundle`` (files in a private temporary directory)."""
        cert, key = self._dir / "tls.crt", self._dir / "tls.key"
        cert.write_text(bundle.cert)
        key.write_text(bundle.key)
        key.chmod(0o600)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        return ctx

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

        def hook(path: str, target: tuple[str, str, str], prefix: str) -> JSON:
            group, version, resource = target
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

    async def install(self, bundle: Bundle) -> None:
        """Apply the webhook configurations with the current CA (server-side apply, idempotent)."""
        validating, mutating = self.configurations(bundle.ca)
        await self.kube.apply(validating, "trainer")
        await self.kube.apply(mutating, "trainer")

    # ---------------------------------------------------------------- serving

    def app(self) -> web.Application:
        """The aiohttp application (one route per webhook path)."""
        app = web.Application()
        for path in (*VALIDATE, *MUTATE):
            app.router.add_post(path, self.handle)
        return app

    async def run(self, ready: asyncio.Event | None = None, rotate_every: float = 3600.0) -> None:
        """Serve until cancelled: certificates, then the listener, then the configurations (only once
        this replica can answer), then a rotation check every ``rotate_every`` seconds."""
        bundle = await self.ensure_certs()
        if ready is not None:
            await ready.wait()  # caches synced: answers would be wrong before
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.bind_address, self.settings.port, ssl_context=self.ssl_context(bundle))
        await site.start()
        log.info("webhook serving", port=self.settings.port, host=self.settings.host or "(service)")
        await self.install(bundle)
        try:
            while True:
                await asyncio.sleep(rotate_every)
                fresh = await self.ensure_certs()
                if fresh.cert != bundle.cert:
                    bundle = fresh
                    await site.stop()
                    site = web.TCPSite(
                        runner, self.settings.bind_address, self.settings.port, ssl_context=self.ssl_context(bundle)
                    )
                    await site.start()
                    await self.install(bundle)
                    log.info("webhook certificate rotated")
        finally:
            await runner.cleanup()


def cache_facts(manager: Any, gang: str) -> rules.AdmissionFacts:
    """Admission facts read from the manager's caches."""
    from trainer.gang.volcano import QUEUES

    caches, mpi = manager.caches, manager.mpi_caches

    def runtime(kind: str, name: str, namespace: str | None) -> JSON | None:
        if kind == "TrainingRuntime":
            return caches.runtimes.get(namespace, name)  # type: ignore[no-any-return]
        return caches.cluster_runtimes.get(None, name)  # type: ignore[no-any-return]

    def active_pods(kind: str, namespace: str, name: str) -> int:
        primary, jobs = (caches.trainjobs, caches.jobs) if kind == "TrainJob" else (mpi.mpijobs, mpi.jobs)
        obj = primary.get(namespace, name)
        if obj is None:
            return 0
        uid = str(obj["metadata"].get("uid"))
        return sum(int((j.get("status") or {}).get("active") or 0) for j in jobs.owned_by(uid))

    def volcano_queues() -> list[JSON] | None:
        informer = caches.gang.get(QUEUES)
        return informer.items() if informer is not None else None

    return rules.AdmissionFacts(
        runtime=runtime,
        active_pods=active_pods,
        volcano_queues=volcano_queues,
        local_queue_exists=lambda _ns, _name: None,
        gang=gang,
    )
