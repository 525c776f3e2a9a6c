"""The admission webhook server (aiohttp over TLS) and the webhook configurations it answers for.

Serves ``admission.k8s.io/v1`` AdmissionReviews for TrainJob, TrainingRuntime,
ClusterTrainingRuntime, OptimizationJob (validation), TrainJob, MPIJob (defaulting and validation) and the creation of
an MPIJob's worker pods (their ``training.kubeflow.org/replica-index`` label); the rules are
the pure functions of :mod:`trainer.webhook.rules`, fed from the operator's caches.

The Validating/MutatingWebhookConfigurations (both named :data:`CONFIG_NAME`) are installed with the
operator, not by it: :func:`configurations` is their one source, rendered into
``config/webhook/manifests.yaml`` (and the Helm chart's copy) by ``python -m trainer.render.rbac``, with the
Service clientConfig and no caBundle, so uninstalling the operator removes them. The operator only
patches their ``caBundle`` (:meth:`WebhookServer.install`, RBAC ``get``/``patch`` restricted to that
name), as kubeflow/trainer ships ``manifests/base/webhook/manifests.yaml`` and lets its
cert-controller inject the CA. Out of a cluster (``--webhook-host``) the configurations call a URL:
``python -m trainer.webhook.server --url https://HOST:PORT`` prints them for ``kubectl apply``. The
certificates (the shared Secret, rotation, reloading in place) are :mod:`trainer.framework.tls`'s
business; it calls :meth:`WebhookServer.install` when the CAs change.

``failurePolicy: Fail`` on CREATE and UPDATE only: while the operator is down no invalid object gets
in, and since DELETE is not intercepted, deletions always work.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from functools import partial

import structlog
import yaml
from aiohttp import web

from trainer.api.jobkinds import MPIJOB, TRAINJOB
from trainer.api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBS,
    KUEUE_LOCAL_QUEUES,
    MPIJOBS,
    MUTATING_WEBHOOKS,
    OPTIMIZATION_JOBS,
    POD_GROUPS,
    PODS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    VALIDATING_WEBHOOKS,
    VOLCANO_QUEUES,
    WORKLOADS,
    Resource,
)
from trainer.api.labels import OPERATOR_NAME, OPERATOR_NAME_LABEL, REPLICA_TYPE_LABEL
from trainer.api.snapshot import snapshot_name
from trainer.framework import json_codec
from trainer.framework.certs import VALIDITY
from trainer.framework.clock import now_rfc3339
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.framework.meta import meta
from trainer.framework.metrics import Metrics
from trainer.framework.permissions import Permission
from trainer.framework.tls import WebhookTLS, serving_names
from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.trainjob.features.dra import devices_of
from trainer.webhook import rules
from trainer.webhook.optimization import validate_optimizationjob

log = structlog.get_logger("trainer.webhook")
CONFIG_NAME = "trainer-webhook"
PERMISSIONS = (
    *(
        Permission(
            r,
            ("get", "patch"),
            "read, then patch only the caBundle of the configuration installed with the operator",
            names=(CONFIG_NAME,),
        )
        for r in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS)
    ),
    Permission(KUEUE_LOCAL_QUEUES, ("get",), "admission warns when a Kueue LocalQueue is missing"),
    *(
        Permission(r, ("get",), "admission reads a runtime its cache has not seen yet (created a moment before)")
        for r in (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES)
    ),
)

VALIDATED = (TRAINJOBS, TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES, MPIJOBS, OPTIMIZATION_JOBS)
"""Kinds admission validates, each at ``/validate-<kind>``."""
DEFAULTED = (TRAINJOBS, MPIJOBS)
"""Kinds admission defaults, each at ``/mutate-<kind>``."""
VALIDATE = {f"/validate-{r.kind.lower()}": r for r in VALIDATED}
MUTATE = {f"/mutate-{r.kind.lower()}": r for r in (*DEFAULTED, PODS)}
"""``/mutate-pod`` labels an MPIJob's worker pods with their replica index
(:func:`trainer.webhook.rules.replica_index_patch`): on CREATE only, and only pods matching
:data:`MPI_WORKER_PODS` are sent."""
MPI_WORKER_PODS = {"matchLabels": {OPERATOR_NAME_LABEL: OPERATOR_NAME, REPLICA_TYPE_LABEL: "worker"}}
"""The objectSelector of ``/mutate-pod``: the pods of MPIJob worker Jobs (mpi-operator's labels)."""

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
SERVICE = "trainer-webhook-service"
"""The webhook Service of ``config/`` (``--webhook-service``; the chart's follows the release name)."""
NAMESPACE = "trainer-system"
"""The operator's namespace in ``config/`` (kustomize sets it again; the chart's is the release's)."""
HEADER = "# Generated by `python -m trainer.render.rbac` from trainer/webhook/server.py; do not edit.\n"


class ConfigurationMissing(Exception):
    """A webhook configuration the operator must patch is absent or lacks one of its webhooks; the
    message names it and how to install it."""


def configurations(
    url: str | None = None, namespace: str = NAMESPACE, service: str = SERVICE, port: int = 443
) -> list[JSON]:
    """The ValidatingWebhookConfiguration and the MutatingWebhookConfiguration (both
    :data:`CONFIG_NAME`), without caBundle: one webhook per path of :data:`VALIDATE` and :data:`MUTATE`
    (``validate.<plural>.<group>``, ``default.<plural>.<group>``), CREATE and UPDATE, ``failurePolicy:
    Fail``. clientConfig calls ``url`` + path when ``url`` is given (``https://host:port``), else the
    Service ``namespace/service:port``."""

    def hook(path: str, target: Resource, prefix: str) -> JSON:
        client: JSON = (
            {"url": f"{url}{path}"}
            if url
            else {"service": {"namespace": namespace, "name": service, "path": path, "port": port}}
        )
        group, version, resource = target.group, target.version, target.plural
        pods = target == PODS
        return {
            "name": f"{prefix}.{resource}.{group or 'core'}",
            "clientConfig": client,
            "rules": [
                {
                    "apiGroups": [group],
                    "apiVersions": [version],
                    "resources": [resource],
                    "operations": ["CREATE"] if pods else ["CREATE", "UPDATE"],
                }
            ],
            **({"objectSelector": MPI_WORKER_PODS} if pods else {}),
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


VALIDATING, MUTATING = configurations()


def _b64(ca: str) -> str:
    return base64.b64encode(ca.encode()).decode()


def ca_bundle_ops(found: JSON, ca: str) -> list[JSON]:
    """The JSON patch that sets ``clientConfig.caBundle`` to ``ca`` (PEM) in every webhook of ``found``
    (a configuration as read) whose caBundle differs, and says nothing else; each ``add`` is preceded
    by a ``test`` of that webhook's name, so a configuration reordered meanwhile is refused (422), not
    patched in the wrong place. Empty when every caBundle is ``ca`` already."""
    bundle, ops = _b64(ca), []
    for i, hook in enumerate(found.get("webhooks") or []):
        if (hook.get("clientConfig") or {}).get("caBundle") != bundle:
            ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")})
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle})
    return ops


def install_problem(expected: JSON, found: JSON | None) -> str | None:
    """Why ``found`` (the configuration read, None when absent) cannot be patched for ``expected`` (one
    of :func:`configurations`): absent, or without some of its webhooks (by name); None when it can."""
    what = f"{expected['kind']} {expected['metadata']['name']}"
    how = "install it with the operator (config/default or the Helm chart; out of a cluster: the output of "
    how += "`python -m trainer.webhook.server --url https://HOST:PORT`)"
    if found is None:
        return f"{what} not found: {how}"
    have = {h.get("name") for h in found.get("webhooks") or []}
    lacking = [h["name"] for h in expected["webhooks"] if h["name"] not in have]
    if lacking:
        return f"{what} lacks webhooks {', '.join(lacking)}: {how}"
    return None


def render(url: str | None = None) -> str:
    """:func:`configurations` as a YAML stream with :data:`HEADER` (``config/webhook/manifests.yaml``
    when ``url`` is None)."""
    docs = configurations(url)
    return HEADER + "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)


@dataclass(frozen=True)
class WebhookSettings:
    """Where the webhook listens and how the apiserver reaches it."""

    port: int
    bind_address: str = "0.0.0.0"
    host: str | None = None
    """Host the apiserver calls, in the serving certificate (e.g. 127.0.0.1 for configurations with a
    URL clientConfig); None: only the Service below."""
    namespace: str = "default"
    """Namespace of the Service and of the certificate Secret (the operator's own: its Role grants that
    Secret)."""
    service: str = SERVICE
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

    def __init__(
        self, kube: Kube, settings: WebhookSettings, facts: rules.AdmissionFacts, metrics: Metrics | None = None
    ) -> None:
        self.kube, self.settings, self.facts = kube, settings, facts
        self.metrics = metrics
        """Where each answer is counted (controller-runtime's webhook metrics), if anywhere."""
        self.tls: WebhookTLS | None = None
        """The certificate keeper while :meth:`run` serves."""
        self.problem: str | None = "webhook configurations not patched yet"
        """Why the configurations do not carry the served CA (None once they do); see :meth:`not_ready`."""

    # ---------------------------------------------------------------- admission

    async def measured(self, request: web.Request) -> web.Response:
        """:meth:`handle`, counted in :attr:`metrics` by path and HTTP status, with its latency."""
        if self.metrics is None:
            return await self.handle(request)
        start = time.monotonic()
        self.metrics.webhook_started(request.path)
        response = await self.handle(request)
        self.metrics.webhook_answered(request.path, response.status, time.monotonic() - start)
        return response

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
        if obj and req.get("namespace") and not meta(obj).namespace:
            obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": req["namespace"]}}
        if path == "/mutate-pod":
            return review_response(uid, rules.Verdict(), rules.replica_index_patch(obj, self.facts))
        if path in MUTATE:
            kind = (MPIJOB if path == "/mutate-mpijob" else TRAINJOB).resource.kind
            now = now_rfc3339()
            patch = rules.default_patch(obj, kind, self.facts.gang, old, now)
            return review_response(uid, rules.Verdict(), patch)
        too_deep = rules.nesting_errors(obj)
        if too_deep:
            log.info("admission refused", path=path, name=meta(obj).name, errors=too_deep)
            return review_response(uid, rules.Verdict(errors=too_deep))
        facts = await self._facts_for(obj, path)
        if path == "/validate-trainjob":
            verdict = rules.validate_trainjob(obj, old, facts)
        elif path == "/validate-mpijob":
            verdict = rules.validate_mpijob(obj, old, facts)
        elif path == "/validate-optimizationjob":
            verdict = validate_optimizationjob(obj, old, facts)
        else:
            verdict = rules.validate_runtime(obj, old, facts)
        if not verdict.allowed:
            log.info("admission refused", path=path, name=meta(obj).name, errors=verdict.errors)
        return review_response(uid, verdict)

    async def _facts_for(self, obj: JSON, path: str) -> rules.AdmissionFacts:
        """The cache facts, with the runtime a TrainJob (or an OptimizationJob's template) names read from
        the apiserver when the cache has not seen it yet, plus a LocalQueue look-up when Kueue is the gang
        scheduler (a TrainJob's or an MPIJob's)."""
        facts = await self._with_runtime(obj, path)
        if facts.gang != "kueue" or path == "/validate-optimizationjob":
            return facts
        queue = rules.admission_queue(obj, facts).name
        ns = str(meta(obj).namespace)
        exists: bool | None = None
        if queue:
            try:
                exists = await self.kube.get_or_none(KUEUE_LOCAL_QUEUES, ns, queue) is not None
            except ApiError:
                exists = None
        return dataclasses.replace(facts, local_queue_exists=lambda _ns, _name: exists)

    async def _with_runtime(self, obj: JSON, path: str) -> rules.AdmissionFacts:
        """:attr:`facts`, or, when the runtime ``obj`` names (``spec.runtimeRef`` of a TrainJob,
        ``spec.trainJobTemplate.spec.runtimeRef`` of an OptimizationJob) is not in the cache, the same
        facts with that runtime as a GET finds it: a runtime created just before the job (an install
        script, upstream's e2e setup) may not have reached the cache's watch yet. A failed GET leaves the
        cache's answer."""
        spec = obj.get("spec")
        if path == "/validate-optimizationjob" and isinstance(spec, dict):
            template = spec.get("trainJobTemplate")
            spec = template.get("spec") if isinstance(template, dict) else None
        elif path != "/validate-trainjob":
            return self.facts
        ref = spec.get("runtimeRef") if isinstance(spec, dict) else None
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not ref["name"]:
            return self.facts
        kind, name = ref.get("kind") or CLUSTER_TRAINING_RUNTIMES.kind, ref["name"]
        namespaced = kind == TRAINING_RUNTIMES.kind
        ns = meta(obj).namespace if namespaced else None
        if kind not in (TRAINING_RUNTIMES.kind, CLUSTER_TRAINING_RUNTIMES.kind) or (namespaced and not ns):
            return self.facts
        if self.facts.runtime(kind, name, ns) is not None:
            return self.facts
        try:
            if namespaced:
                found = await self.kube.get_or_none(TRAINING_RUNTIMES, ns, name)
            else:
                found = await self.kube.get_or_none(CLUSTER_TRAINING_RUNTIMES, None, name)
        except ApiError as e:
            log.info("runtime not read", kind=kind, name=name, error=str(e))
            return self.facts
        if found is None:
            return self.facts
        cached = self.facts.runtime

        def runtime(k: str, n: str, namespace: str | None) -> JSON | None:
            return found if (k, n, namespace) == (kind, name, ns) else cached(k, n, namespace)

        return dataclasses.replace(self.facts, runtime=runtime)

    # ---------------------------------------------------------------- configurations

    def not_ready(self) -> str | None:
        """Why admission cannot work yet (``/readyz`` check ``webhook-configurations``), None when the
        configurations carry the served CA: e.g. ``ValidatingWebhookConfiguration trainer-webhook not
        found: ...`` while one is missing."""
        return self.problem

    async def install(self, ca: str) -> None:
        """Put ``ca`` (PEM, one or more CAs) into the caBundle of both webhook configurations: read each
        (``get``), check it has this operator's webhooks, then JSON-patch only the caBundles that
        differ (:func:`ca_bundle_ops`; nothing when all are ``ca``). Raises :class:`ConfigurationMissing`
        naming a configuration that is absent or lacks a webhook, :class:`ApiError` when the apiserver
        refuses (404 when it was deleted meanwhile); either is kept as :meth:`not_ready`'s reason until
        an install succeeds."""
        try:
            for res, expected in ((VALIDATING_WEBHOOKS, VALIDATING), (MUTATING_WEBHOOKS, MUTATING)):
                found = await self.kube.get_or_none(res, None, CONFIG_NAME)
                problem = install_problem(expected, found)
                if problem:
                    raise ConfigurationMissing(problem)
                assert found is not None
                ops = ca_bundle_ops(found, ca)
                if ops:
                    await self.kube.json_patch(res, None, CONFIG_NAME, ops)
        except (ConfigurationMissing, ApiError) as e:
            self.problem = str(e)
            raise
        if self.problem is not None:
            log.info("webhook configurations carry the served CA", configuration=CONFIG_NAME)
        self.problem = None

    async def _install_or_say(self, tls: WebhookTLS) -> None:
        """:meth:`WebhookTLS.install`, a failure logged (and kept for ``/readyz``) rather than raised:
        :meth:`WebhookTLS.run` tries again within seconds, so a configuration installed later is
        patched then, without a restart."""
        try:
            await tls.install()
        except (ConfigurationMissing, ApiError) as e:
            log.error("webhook configurations not patched; admission calls will fail until they are", error=str(e))

    # ---------------------------------------------------------------- serving

    def app(self) -> web.Application:
        """The aiohttp application (one route per webhook path), reading bodies of up to
        :data:`MAX_REVIEW_BYTES`."""
        app = web.Application(client_max_size=MAX_REVIEW_BYTES)
        for path in (*VALIDATE, *MUTATE):
            app.router.add_post(path, self.measured)
            if self.metrics is not None:
                self.metrics.webhook(path)
        return app

    def runner(self) -> web.AppRunner:
        """The runner of :meth:`app`: no access log, connections without a request head for
        :data:`IDLE_TIMEOUT` closed, an unread body drained for :data:`LINGER_TIMEOUT` at most. The
        caller sets it up and cleans it up."""
        return web.AppRunner(self.app(), access_log=None, keepalive_timeout=IDLE_TIMEOUT, lingering_time=LINGER_TIMEOUT)

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Serve until cancelled: certificates, then the listener, then the configurations (only once
        this replica can answer; before it when its start put a new CA in the Secret, which configurations
        patched earlier would not trust), then keep the certificate current (see
        :class:`~trainer.framework.tls.WebhookTLS`). A configuration missing or not patchable is logged
        and tried again, never fatal (see :meth:`not_ready`). Raises :class:`ApiError` when the
        certificate Secret cannot be read or written at start, ``OSError`` when the port cannot be bound."""
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
                    await self._install_or_say(tls)
                site = web.TCPSite(runner, s.bind_address, s.port, ssl_context=tls.context, reuse_port=s.reuse_port)
                await site.start()
                log.info("webhook serving", port=s.port, host=s.host or "(service)", reuse_port=s.reuse_port)
                await self._install_or_say(tls)
                await tls.run()
            finally:
                await runner.cleanup()
        finally:
            tls.close()


def cache_facts(
    readers: dict[str, Reader],
    gang: str,
    max_nodes_per_job: int = DEFAULT_MAX_NODES_PER_JOB,
    status_server: bool | None = None,
) -> rules.AdmissionFacts:
    """Admission facts read from the controllers' caches (``readers`` by controller name, as
    :attr:`trainer.framework.manager.Manager.readers`), under ``--gang-scheduler-name=gang``,
    ``--max-nodes-per-job=max_nodes_per_job`` and with the status server on or off (``status_server``)."""
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

    def workload_api() -> bool | None:
        if not trainjobs.declares(WORKLOADS):
            return None
        return trainjobs.served(WORKLOADS) and trainjobs.served(POD_GROUPS)

    return rules.AdmissionFacts(
        runtime=runtime,
        active_pods=active_pods,
        volcano_queues=volcano_queues,
        local_queue_exists=lambda _ns, _name: None,
        gang=gang,
        mpijob=lambda namespace, name: mpijobs.get(MPIJOBS, namespace, name),
        max_nodes_per_job=max_nodes_per_job,
        snapshot=lambda namespace, name: trainjobs.get(CONFIGMAPS, namespace, snapshot_name(name)),
        workload_api=workload_api,
        devices=partial(devices_of, trainjobs),
        status_server=status_server,
    )


def main(argv: list[str] | None = None) -> int:
    """Print the webhook configurations (``--url``: calling that base URL instead of the Service)."""
    p = argparse.ArgumentParser(
        prog="python -m trainer.webhook.server",
        description="Print the webhook configurations for `kubectl apply --server-side -f -` (the operator "
        "only patches their caBundle).",
    )
    p.add_argument(
        "--url",
        help="base URL the apiserver calls, e.g. https://127.0.0.1:9443 for an operator run with "
        "--webhook-host 127.0.0.1 --webhook-port 9443; default: the Service of config/",
    )
    args = p.parse_args(argv)
    sys.stdout.write(render(args.url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
