"""The status server (trainer/statusserver/) and its pod side (trainer/trainjob/spec/injection.py).

A real aiohttp TLS server on 127.0.0.1:0 answers real HTTPS posts; the apiserver is the recording
double, taught to answer TokenReviews from a table of tokens as the apiserver's ServiceAccount token
authenticator would (audiences, ``system:serviceaccount:<ns>:<sa>``, the pod name and uid in the user's
extra); trainer pods are controlled by a Job controlled by their TrainJob, as the Job controller and the
operator make them. Rate limiting is checked by counting status writes, with lower bounds on time only.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import pytest

from tests.conftest import info, load_sample
from tests.harness import World
from tests.kube_double import RecordingKube, reader
from trainer.api.kinds import CONFIGMAPS, JOBS, PODS, SECRETS, TOKEN_REVIEWS, TRAINJOBS, Resource
from trainer.api.trainer_v1alpha1 import TrainerStatus, TrainJob
from trainer.cli import describe, tables
from trainer.client.types import checkpoint_text, duration_text, eta_text, metrics_text, progress_text
from trainer.framework.certs import generate
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key
from trainer.framework.kube.client import ApiError
from trainer.framework.owner import owner_reference
from trainer.statusserver.auth import TokenAuthenticator, bearer_token
from trainer.statusserver.ca_publisher import CAPublisher, ca_config_map
from trainer.statusserver.payload import PayloadError, coalesce, parse_update, status_patch, stored
from trainer.statusserver.rate_limit import WriteLimiter
from trainer.statusserver.server import MAX_BODY, StatusServer, StatusServerSettings, setup
from trainer.trainjob.spec import injection
from trainer.trainjob.spec.injection import token_audience
from trainer.wiring import Settings, new_manager

NS = "team-a"


# --------------------------------------------------------------------------- a recording apiserver double


def jwt(exp: float | None = None, sub: str = "x") -> str:
    """A token shaped like a JWT (the server reads only ``exp``, after the TokenReview accepted it)."""
    claims: JSON = {"sub": sub} | ({"exp": exp} if exp is not None else {})
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{payload}.sig"


@dataclass
class ApiKube(RecordingKube):
    """The recording double plus TokenReviews (answered from :attr:`tokens`), list (for the Secret
    informer of the certificate keeper), and a watch that never sends."""

    tokens: dict[str, JSON] = field(default_factory=dict)
    reviews: list[JSON] = field(default_factory=list)
    answered_audiences: dict[str, list[str]] = field(default_factory=dict)
    """Tokens whose review answers these ``status.audiences`` instead of the ones asked for."""
    gate: asyncio.Event | None = None
    """While set to an unset event, TokenReviews wait for it (reviews held in flight)."""

    def mint(self, pod: JSON, audience: str, *, bound: bool = True, exp: float | None = None) -> str:
        """A token of ``pod``'s ServiceAccount for ``audience`` (bound to the pod unless told not)."""
        meta = pod["metadata"]
        token = jwt(exp, sub=f"{meta['name']}-{len(self.tokens)}")
        extra = {
            "authentication.kubernetes.io/pod-name": [meta["name"]],
            "authentication.kubernetes.io/pod-uid": [meta["uid"]],
        }
        self.tokens[token] = {
            "audiences": [audience],
            "user": {
                "username": f"system:serviceaccount:{meta['namespace']}:default",
                "groups": ["system:serviceaccounts"],
                "extra": extra if bound else {},
            },
        }
        return token

    async def create(
        self, res: Resource, namespace: str | None, obj: JSON, manager: str | None = None, *, dry_run: bool = False
    ) -> JSON:
        if res == TOKEN_REVIEWS:
            self.reviews.append(obj)
            if self.gate is not None:
                await self.gate.wait()
            token = obj["spec"]["token"]
            known, wanted = self.tokens.get(token), obj["spec"]["audiences"]
            if known is None or not set(known["audiences"]) & set(wanted):
                return {**obj, "status": {"authenticated": False, "error": "invalid bearer token"}}
            audiences = self.answered_audiences.get(token, wanted)
            status = {"authenticated": True, "user": known["user"], "audiences": audiences}
            return {**obj, "status": status}
        return await super().create(res, namespace, obj, manager)  # 409 on creating what exists

    async def patch_status(
        self, res: Resource, namespace: str | None, name: str, status: JSON, resource_version: str | None = None
    ) -> JSON:
        if (res, (namespace or "", name)) not in self.objects:
            raise ApiError(404, {"reason": "NotFound", "message": f"{res.kind} {name} not found"})
        return await super().patch_status(res, namespace, name, status, resource_version)

    async def list(
        self, res: Resource, namespace: str | None = None, label_selector: str | None = None, **_: Any
    ) -> tuple[list[JSON], str]:
        return [copy.deepcopy(o) for (r, _k), o in self.objects.items() if r == res], "1"

    async def watch(self, *_: Any, **__: Any) -> AsyncIterator[tuple[str, JSON]]:
        await asyncio.Event().wait()
        yield "", {}  # pragma: no cover


def trainjob(name: str) -> JSON:
    obj = load_sample("trainjob.yaml")
    obj["metadata"] = {"name": name, "namespace": NS}
    return obj


def pod(job: str, name: str, owner: JSON | None = None) -> JSON:
    """A pod labelled as TrainJob ``job``'s, controlled by ``owner`` (none: a bare pod)."""
    meta: JSON = {"name": name, "namespace": NS, "labels": {"jobset.sigs.k8s.io/jobset-name": job}}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "node"}]}}


def batch_job(name: str, owner: JSON | None) -> JSON:
    """A Job ``name`` controlled by ``owner`` (none: a Job of the user's)."""
    meta: JSON = {"name": name, "namespace": NS, "labels": {"jobset.sigs.k8s.io/jobset-name": name}}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {}}


def owned_pod(kube: ApiKube, job: str, name: str) -> JSON:
    """Pod ``name`` of TrainJob ``job`` (stored), through its Job ``<job>-node-0``, as they are made."""
    controller = kube.put(batch_job(f"{job}-node-0", kube.objects[(TRAINJOBS, (NS, job))]))
    return kube.put(pod(job, name, controller))


# --------------------------------------------------------------------------- a served server


@dataclass
class Served:
    kube: ApiKube
    server: StatusServer
    session: aiohttp.ClientSession
    base: str

    async def post(self, job: str, body: Any, token: str | None = None, **headers: str) -> tuple[int, JSON]:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        url = self.base + injection.status_path(NS, job)
        async with self.session.post(url, data=data, headers=headers) as resp:
            return resp.status, await resp.json(content_type=None)

    def writes(self, job: str) -> list[JSON]:
        return [w.body for w in self.kube.writes if w.verb == "patch_status" and w.key == (NS, job)]

    def trainer_status(self, job: str) -> JSON | None:
        status: JSON = self.kube.objects[(TRAINJOBS, (NS, job))].get("status") or {}
        return status.get("trainerStatus")


async def serve(kube: ApiKube, interval: float = 5.0) -> AsyncIterator[Served]:
    bundle = generate(["localhost"], ["127.0.0.1"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert, key = _files(bundle.cert, bundle.key)
    context.load_cert_chain(cert, key)
    server = StatusServer(kube, StatusServerSettings(port=0, bind_address="127.0.0.1", write_interval=interval))
    runner = await server.listen(context)
    client_ctx = ssl.create_default_context(cadata=bundle.ca)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx))
    try:
        yield Served(kube, server, session, f"https://127.0.0.1:{server.port}")
    finally:
        await session.close()
        await server.limiter.close()
        await runner.cleanup()


def _files(cert: str, key: str) -> tuple[str, str]:
    import tempfile

    d = tempfile.mkdtemp(prefix="statusserver-test-")
    paths = (f"{d}/tls.crt", f"{d}/tls.key")
    for path, text in zip(paths, (cert, key), strict=True):
        with open(path, "w") as f:
            f.write(text)
    return paths


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    kube = ApiKube()
    for name in ("a", "b"):
        kube.put(trainjob(name))
        owned_pod(kube, name, f"{name}-node-0-0")
    async for s in serve(kube):
        yield s


def stored_pod(s: Served, name: str) -> JSON:
    return s.kube.objects[(PODS, (NS, name))]


async def one_job(interval: float) -> AsyncIterator[tuple[Served, str]]:
    """A server with write ``interval`` over TrainJob ``a`` and its pod ``a-node-0-0``, and that pod's token."""
    kube = ApiKube()
    kube.put(trainjob("a"))
    owned_pod(kube, "a", "a-node-0-0")
    async for s in serve(kube, interval):
        yield s, kube.mint(stored_pod(s, "a-node-0-0"), token_audience(NS, "a"))


# --------------------------------------------------------------------------- names and payloads


def test_names_match_upstream() -> None:
    assert token_audience("ns", "job") == "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
    assert (
        injection.status_path("ns", "job") == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
    )
    assert injection.ca_config_map_name("job") == "job-tls-config"
    assert (injection.ENV_URL, injection.ENV_CA_CERT, injection.ENV_TOKEN) == (
        "KUBEFLOW_TRAINER_SERVER_URL",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT",
        "KUBEFLOW_TRAINER_SERVER_TOKEN",
    )
    assert injection.base_url("::1", 8082) == "https://[::1]:8082"
    assert StatusServerSettings(port=8082, namespace="trainer-system").url == (
        "https://trainer-webhook-service.trainer-system.svc:8082"
    )


def test_bearer_tokens_are_read_as_rfc_7235_says() -> None:
    assert bearer_token("Bearer abc") == bearer_token("bearer  abc ") == "abc"
    assert bearer_token(None) == bearer_token("Basic abc") == bearer_token("Bearer a b") == bearer_token("Bearer") == ""


def test_the_payload_is_upstreams_with_its_bounds() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
    body = {
        "trainerStatus": {
            "progressPercentage": 45,
            "estimatedRemainingSeconds": 795649,
            "metrics": [{"name": "loss", "value": "0.2347"}],
            "lastUpdatedTime": "2025-01-23T11:30:45.123+01:00",
            "ignored": True,
        },
        "other": 1,
    }
    status = parse_update(json.dumps(body).encode(), now)
    assert status is not None
    assert stored(status) == {
        "progressPercentage": 45,
        "estimatedRemainingSeconds": 795649,
        "metrics": [{"name": "loss", "value": "0.2347"}],
        "lastUpdatedTime": "2025-01-23T10:30:45Z",
    }
    bare = parse_update(b'{"trainerStatus": {"progressPercentage": 3}}', now)
    assert bare is not None and bare.last_updated_time == "2026-01-02T03:04:05Z"
    assert status_patch(bare) == {
        "trainerStatus": {
            "progressPercentage": 3,
            "estimatedRemainingSeconds": None,
            "metrics": None,
            "lastUpdatedTime": "2026-01-02T03:04:05Z",
        }
    }
    assert parse_update(b"{}") is None and parse_update(b'{"trainerStatus": null}') is None
    bad = [
        b"not json",
        b"[]",
        b'{"trainerStatus": 3}',
        b'{"trainerStatus": {"progressPercentage": 101}}',
        b'{"trainerStatus": {"progressPercentage": -1}}',
        b'{"trainerStatus": {"progressPercentage": "5"}}',
        b'{"trainerStatus": {"progressPercentage": 4.5}}',
        b'{"trainerStatus": {"progressPercentage": true}}',
        b'{"trainerStatus": {"estimatedRemainingSeconds": -1}}',
        b'{"trainerStatus": {"estimatedRemainingSeconds": 2147483648}}',
        b'{"trainerStatus": {"metrics": [{"name": "", "value": "1"}]}}',
        b'{"trainerStatus": {"metrics": [{"name": "loss", "value": 1}]}}',
        b'{"trainerStatus": {"metrics": [{"name": "loss"}]}}',
        json.dumps({"trainerStatus": {"metrics": [{"name": "x" * 65, "value": "1"}]}}).encode(),
        json.dumps({"trainerStatus": {"metrics": [{"name": f"m{i}", "value": "1"} for i in range(257)]}}).encode(),
        b'{"trainerStatus": {"lastUpdatedTime": "yesterday"}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2025-01-23T10:30:45"}}',
    ]
    for body_bytes in bad:
        with pytest.raises(PayloadError):
            parse_update(body_bytes, now)


def test_a_checkpoint_is_reported_kept_across_posts_and_coalesced() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    body = {"trainerStatus": {"progressPercentage": 40, "lastCheckpoint": {"epoch": 8, "step": 360, "path": "/c/8.pt"}}}
    status = parse_update(json.dumps(body).encode(), now)
    assert status is not None
    saved = {"epoch": 8, "step": 360, "path": "/c/8.pt", "savedTime": "2026-01-02T03:04:05Z"}
    assert stored(status)["lastCheckpoint"] == saved
    with_checkpoint = status_patch(status)
    assert with_checkpoint["trainerStatus"]["lastCheckpoint"] == saved
    later = parse_update(b'{"trainerStatus": {"progressPercentage": 45}}', now)
    assert later is not None
    without = status_patch(later)
    assert "lastCheckpoint" not in without["trainerStatus"], "a post without one leaves the stored one"
    assert coalesce(with_checkpoint, without)["trainerStatus"]["lastCheckpoint"] == saved
    assert coalesce(with_checkpoint, without)["trainerStatus"]["progressPercentage"] == 45
    assert coalesce(None, without) == without and coalesce(without, with_checkpoint) == with_checkpoint
    timed = {"lastCheckpoint": {"epoch": 1, "savedTime": "2026-01-02T04:00:00.5+01:00", "extra": 1}}
    given = parse_update(json.dumps({"trainerStatus": timed}).encode(), now)
    assert given is not None and stored(given)["lastCheckpoint"] == {"epoch": 1, "savedTime": "2026-01-02T03:00:00Z"}
    bad = [
        {"lastCheckpoint": {"epoch": -1}},
        {"lastCheckpoint": {"step": "3"}},
        {"lastCheckpoint": {"path": ""}},
        {"lastCheckpoint": {"path": "p" * 257}},
        {"lastCheckpoint": 3},
    ]
    for raw in bad:
        with pytest.raises(PayloadError, match=r"trainerStatus\.lastCheckpoint"):
            parse_update(json.dumps({"trainerStatus": raw}).encode(), now)
    with pytest.raises(PayloadError, match=r"trainerStatus\.lastCheckpoint\.savedTime"):
        parse_update(b'{"trainerStatus": {"lastCheckpoint": {"savedTime": "2026-01-01T00:00:00"}}}', now)


async def test_a_checkpoint_survives_later_progress_posts_and_their_coalescing() -> None:
    interval = 0.2
    async for s, token in one_job(interval):
        assert (await s.post("a", {"trainerStatus": {"progressPercentage": 10}}, token))[0] == 200
        # Within one interval: a checkpoint, then progress without one; the coalesced write keeps both.
        checkpoint = {"progressPercentage": 20, "lastCheckpoint": {"epoch": 2, "savedTime": "2026-01-01T00:00:00Z"}}
        assert (await s.post("a", {"trainerStatus": checkpoint}, token))[0] == 200
        assert (await s.post("a", {"trainerStatus": {"progressPercentage": 25}}, token))[0] == 200
        await asyncio.sleep(interval * 2 + 0.1)
        held = s.trainer_status("a")
        assert held is not None and held["progressPercentage"] == 25
        assert held["lastCheckpoint"] == {"epoch": 2, "savedTime": "2026-01-01T00:00:00Z"}
        await asyncio.sleep(interval)
        assert (await s.post("a", {"trainerStatus": {"progressPercentage": 30}}, token))[0] == 200
        held = s.trainer_status("a")
        assert held is not None and held["progressPercentage"] == 30 and held["lastCheckpoint"]["epoch"] == 2


def test_the_model_and_the_crd_agree_on_the_payload() -> None:
    status = TrainerStatus.model_validate(
        {"progressPercentage": 1, "metrics": [{"name": "a", "value": "b"}], "lastUpdatedTime": "2026-01-01T00:00:00Z"}
    )
    assert status.to_dict() == {
        "progressPercentage": 1,
        "metrics": [{"name": "a", "value": "b"}],
        "lastUpdatedTime": "2026-01-01T00:00:00Z",
    }
    job = TrainJob.model_validate(trainjob("a") | {"status": {"trainerStatus": status.to_dict()}})
    assert job.status is not None and job.status.trainer_status == status


# --------------------------------------------------------------------------- injection


def test_trainer_pods_get_the_env_and_the_token_volume_only_when_enabled(runtime: Any, trainjob: TrainJob) -> None:
    trainjob.metadata.namespace = NS
    plain = info(trainjob, runtime).info.pod_set("node").template
    assert "volumes" not in plain["spec"] or all(
        v["name"] != "kubeflow-trainer-token" for v in plain["spec"]["volumes"]
    )

    where = injection.Injection("https://127.0.0.1:8443")
    template = info(trainjob, runtime, injection=where).info.pod_set("node").template
    (node,) = template["spec"]["containers"]
    env = {e["name"]: e["value"] for e in node["env"] if "value" in e}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://127.0.0.1:8443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/pytorch-simple/status"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    assert {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer", "readOnly": True} in (
        node["volumeMounts"]
    )
    (volume,) = [v for v in template["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token"]
    token, ca = volume["projected"]["sources"]
    assert token == {
        "serviceAccountToken": {
            "audience": "trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/pytorch-simple/status",
            "expirationSeconds": 3600,
            "path": "token",
        }
    }
    assert ca == {"configMap": {"name": "pytorch-simple-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    again = info(trainjob, runtime, injection=where).info.pod_set("node").template
    assert again == template, "idempotent: the same template every reconcile"


def test_a_user_variable_of_the_same_name_is_replaced() -> None:
    where = injection.Injection("https://h:1")
    job = TrainJob.model_validate(trainjob("a"))
    pod_spec: JSON = {
        "spec": {"containers": [{"name": "node", "env": [{"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": "x"}]}]}
    }
    injection.inject(job, pod_spec, where)
    injection.inject(job, pod_spec, where)
    env = pod_spec["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env].count("KUBEFLOW_TRAINER_SERVER_URL") == 1
    assert len(pod_spec["spec"]["volumes"]) == 1 and len(pod_spec["spec"]["containers"][0]["volumeMounts"]) == 1


# --------------------------------------------------------------------------- the endpoint


async def test_a_pod_of_the_job_posts_and_it_lands_in_trainer_status(served: Served) -> None:
    token = served.kube.mint(stored_pod(served, "a-node-0-0"), token_audience(NS, "a"))
    body = {"trainerStatus": {"progressPercentage": 45, "metrics": [{"name": "loss", "value": "0.5"}]}}
    code, answer = await served.post("a", body, token)
    assert code == 200, answer
    assert answer["trainerStatus"]["progressPercentage"] == 45
    stored = served.trainer_status("a")
    assert stored is not None and stored == answer["trainerStatus"]
    assert (stored["metrics"], "estimatedRemainingSeconds" in stored) == ([{"name": "loss", "value": "0.5"}], False)
    assert served.trainer_status("b") is None
    (review,) = served.kube.reviews
    assert review["spec"]["audiences"] == ["trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/a/status"]
    assert review["apiVersion"] == "authentication.k8s.io/v1" and review["kind"] == "TokenReview"


async def test_no_or_a_bad_token_is_401_and_another_jobs_pod_is_403(served: Served) -> None:
    body = {"trainerStatus": {"progressPercentage": 1}}
    code, answer = await served.post("a", body)
    assert (code, answer["reason"], answer["kind"]) == (401, "Unauthorized", "Status")
    assert (await served.post("a", body, "garbage"))[0] == 401

    other = stored_pod(served, "b-node-0-0")
    # A token of b's pod for b's audience: the TokenReview for a's audience refuses it.
    code, answer = await served.post("a", body, served.kube.mint(other, token_audience(NS, "b")))
    assert code == 401, answer
    # b's pod asked for a's audience (its pod spec is the user's): authenticated, but not a's pod.
    code, answer = await served.post("a", body, served.kube.mint(other, token_audience(NS, "a")))
    assert (code, answer["reason"]) == (403, "Forbidden") and "does not belong to TrainJob team-a/a" in answer[
        "message"
    ]
    # A ServiceAccount token bound to no pod.
    unbound = served.kube.mint(stored_pod(served, "a-node-0-0"), token_audience(NS, "a"), bound=False)
    assert (await served.post("a", body, unbound))[0] == 403
    # A token of a pod that was deleted and made again under the same name (another uid).
    token = served.kube.mint(stored_pod(served, "a-node-0-0"), token_audience(NS, "a"))
    again = copy.deepcopy(stored_pod(served, "a-node-0-0"))
    again["metadata"]["uid"] = "another"
    served.kube.objects[(PODS, (NS, "a-node-0-0"))] = again
    assert (await served.post("a", body, token))[0] == 403
    assert served.writes("a") == [] and served.writes("b") == []


async def test_a_review_that_does_not_confirm_the_audience_is_401(served: Served) -> None:
    body = {"trainerStatus": {"progressPercentage": 1}}
    for answered in ([], ["https://kubernetes.default.svc"]):
        token = served.kube.mint(stored_pod(served, "a-node-0-0"), token_audience(NS, "a"))
        served.kube.answered_audiences[token] = answered
        code, answer = await served.post("a", body, token)
        assert (code, answer["reason"]) == (401, "Unauthorized"), answer
        assert f"the TokenReview confirmed the audiences {answered}" in answer["message"]
        assert token_audience(NS, "a") in answer["message"]
    assert served.writes("a") == []


async def test_a_pod_is_the_jobs_by_its_controller_chain_not_its_label(served: Served) -> None:
    """Only Pod -> Job -> TrainJob (controller references, uids) lets a pod in: a pod labelled as a's
    but bare, or controlled by a Job of the user's, or by a Job of an earlier TrainJob a, is refused."""
    kube, body = served.kube, {"trainerStatus": {"progressPercentage": 7}}

    async def refused(pod_obj: JSON, why: str) -> None:
        code, answer = await served.post("a", body, kube.mint(kube.put(pod_obj), token_audience(NS, "a")))
        assert (code, answer["reason"]) == (403, "Forbidden"), answer
        assert answer["message"].startswith(f"pod {NS}/{pod_obj['metadata']['name']} does not belong to TrainJob")
        assert why in answer["message"], answer

    await refused(pod("a", "forged-bare"), "its controller is nothing, not a Job")
    user_job = kube.put(batch_job("mine", None))
    await refused(pod("a", "forged-job", user_job), "its Job mine is controlled by nothing")
    replica_set = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "uid": "rs-uid"}}
    await refused(pod("a", "forged-rs", replica_set), "its controller is ReplicaSet rs, not a Job")
    other = kube.put(batch_job("other", kube.objects[(TRAINJOBS, (NS, "b"))]))
    await refused(pod("a", "forged-other", other), "its Job other is controlled by TrainJob b")
    # A Job of a's name and a stale uid (the ownerReference names a Job deleted since).
    stale_ref = {**kube.objects[(JOBS, (NS, "a-node-0"))], "metadata": {"name": "a-node-0", "uid": "gone"}}
    await refused(pod("a", "stale-job", stale_ref), "its controller Job a-node-0 does not exist")
    # Jobs left by an earlier TrainJob a (deleted and made again: another uid).
    earlier = {**trainjob("a"), "metadata": {"name": "a", "namespace": NS, "uid": "earlier"}}
    old_job = kube.put(batch_job("old", earlier))
    await refused(pod("a", "old-pod", old_job), "controlled by an earlier TrainJob of that name (uid earlier)")
    assert served.writes("a") == []

    # The chain the operator and the Job controller make is let in, whatever the pod's labels.
    real = owned_pod(kube, "a", "a-node-0-1")
    real["metadata"]["labels"] = {}
    kube.put(real)
    code, answer = await served.post("a", body, kube.mint(real, token_audience(NS, "a")))
    assert code == 200, answer


async def test_the_chain_is_read_from_the_caches_when_there_are_some() -> None:
    kube = ApiKube()
    tj_obj = kube.put(trainjob("a"))
    job_obj = kube.put(batch_job("a-node-0", tj_obj))
    token = kube.mint(kube.put(pod("a", "p", job_obj)), token_audience(NS, "a"))
    caches = reader({JOBS: [copy.deepcopy(job_obj)], TRAINJOBS: [copy.deepcopy(tj_obj)]})
    for res in (JOBS, TRAINJOBS):  # only the caches have them now
        del kube.objects[(res, (NS, "a" if res == TRAINJOBS else "a-node-0"))]
    assert (await TokenAuthenticator(kube, caches).authorize(f"Bearer {token}", NS, "a")).allowed
    verdict = await TokenAuthenticator(kube).authorize(f"Bearer {token}", NS, "a")
    assert (verdict.code, verdict.message) == (
        403,
        f"pod {NS}/p does not belong to TrainJob {NS}/a: its controller Job a-node-0 does not exist",
    )


async def test_reviews_are_bounded_and_a_new_token_past_the_bound_is_429() -> None:
    kube = ApiKube(gate=asyncio.Event())
    kube.put(trainjob("a"))
    pods = [owned_pod(kube, "a", f"a-node-0-{i}") for i in range(4)]
    tokens = [kube.mint(p, token_audience(NS, "a")) for p in pods]
    auth = TokenAuthenticator(kube, max_reviews=1, max_waiting=1)
    first = asyncio.ensure_future(auth.authorize(f"Bearer {tokens[0]}", NS, "a"))
    second = asyncio.ensure_future(auth.authorize(f"Bearer {tokens[1]}", NS, "a"))
    again = asyncio.ensure_future(auth.authorize(f"Bearer {tokens[0]}", NS, "a"))  # joins the first review
    await asyncio.sleep(0.05)
    assert len(kube.reviews) == 1, "one review runs, the other waits"
    full = await auth.authorize(f"Bearer {tokens[2]}", NS, "a")
    assert (full.code, full.retry_after) == (429, 1) and "2 token reviews are running or waiting" in full.message
    assert not (first.done() or second.done() or again.done())
    assert kube.gate is not None
    kube.gate.set()
    assert all(v.allowed for v in await asyncio.gather(first, second, again))
    assert len(kube.reviews) == 2 and auth.turned_away == 1
    assert (await auth.authorize(f"Bearer {tokens[2]}", NS, "a")).allowed, "refused for now, not remembered"


async def test_the_server_answers_429_with_retry_after(served: Served) -> None:
    served.kube.gate = asyncio.Event()
    served.server.auth = TokenAuthenticator(served.kube, max_reviews=1, max_waiting=0)
    a, b = (served.kube.mint(stored_pod(served, "a-node-0-0"), token_audience(NS, "a")) for _ in range(2))
    held = asyncio.ensure_future(served.post("a", {"trainerStatus": {}}, a))
    await until(lambda: served.kube.reviews)
    url = served.base + injection.status_path(NS, "a")
    async with served.session.post(url, json={"trainerStatus": {}}, headers={"Authorization": f"Bearer {b}"}) as r:
        answer = await r.json()
        assert (r.status, r.headers.get("Retry-After"), answer["reason"]) == (429, "1", "TooManyRequests")
    served.kube.gate.set()
    assert (await held)[0] == 200


async def test_other_paths_big_or_bad_bodies_and_missing_jobs(served: Served) -> None:
    token = served.kube.mint(stored_pod(served, "a-node-0-0"), token_audience(NS, "a"))
    async with served.session.get(served.base + injection.status_path(NS, "a")) as resp:
        assert resp.status == 404
    async with served.session.post(served.base + "/healthz") as resp:
        assert resp.status == 404 and (await resp.json())["reason"] == "NotFound"
    big = b'{"trainerStatus": {"metrics": [' + b" " * MAX_BODY + b"]}}"
    assert (await served.post("a", big, token))[0] == 413
    code, answer = await served.post("a", b"{nope", token)
    assert (code, answer["reason"]) == (422, "Invalid")
    assert (await served.post("a", {"trainerStatus": {"progressPercentage": 200}}, token))[0] == 422
    assert await served.post("a", {}, token) == (200, {})
    assert served.writes("a") == []

    served.kube.put(trainjob("c"))
    gone = served.kube.mint(owned_pod(served.kube, "c", "c-node-0-0"), token_audience(NS, "c"))
    del served.kube.objects[(TRAINJOBS, (NS, "c"))]
    code, answer = await served.post("c", {"trainerStatus": {"progressPercentage": 1}}, gone)
    assert (code, answer["message"]) == (404, "Train job not found")


async def test_a_token_is_reviewed_once_for_a_burst(served: Served) -> None:
    token = served.kube.mint(stored_pod(served, "a-node-0-0"), token_audience(NS, "a"))
    codes = await asyncio.gather(
        *(served.post("a", {"trainerStatus": {"progressPercentage": i}}, token) for i in range(40))
    )
    assert {c for c, _ in codes} == {200}
    assert len(served.kube.reviews) == 1
    refused = served.kube.mint(stored_pod(served, "b-node-0-0"), token_audience(NS, "a"))
    for _ in range(5):
        assert (await served.post("a", {"trainerStatus": {}}, refused))[0] == 403
    assert len(served.kube.reviews) == 2


async def test_an_expiring_token_is_not_trusted_beyond_its_expiry() -> None:
    kube = ApiKube()
    kube.put(trainjob("a"))
    owned_pod(kube, "a", "p")
    auth = TokenAuthenticator(kube)
    token = kube.mint(kube.objects[(PODS, (NS, "p"))], token_audience(NS, "a"), exp=time.time() - 1)
    assert (await auth.authorize(f"Bearer {token}", NS, "a")).allowed
    assert (await auth.authorize(f"Bearer {token}", NS, "a")).allowed
    assert auth.reviews == 2, "an expired token is reviewed again (and the apiserver refuses it)"


# --------------------------------------------------------------------------- rate limiting


async def test_a_chatty_job_gets_at_most_one_write_per_interval_and_the_last_post_wins() -> None:
    interval = 0.25
    async for s, token in one_job(interval):
        start = time.monotonic()
        for i in range(200):
            code, _ = await s.post(
                "a", {"trainerStatus": {"progressPercentage": i % 101, "estimatedRemainingSeconds": i}}, token
            )
            assert code == 200
            await asyncio.sleep(0.004)
        elapsed = time.monotonic() - start
        assert elapsed >= 0.8
        await asyncio.sleep(interval * 2 + 0.1)  # the coalesced last post is written
        writes = s.writes("a")
        assert 2 <= len(writes) <= int(elapsed / interval) + 2, (len(writes), elapsed)
        assert s.server.limiter.writes == len(writes)
        last = s.trainer_status("a")
        assert last is not None and last["estimatedRemainingSeconds"] == 199, "the latest post is what stays"
        assert last["progressPercentage"] == 199 % 101


def report(progress: int, at: str) -> JSON:
    status = parse_update(
        json.dumps({"trainerStatus": {"progressPercentage": progress, "lastUpdatedTime": at}}).encode()
    )
    assert status is not None
    return status_patch(status)


async def test_a_replicas_late_write_of_an_older_report_does_not_replace_a_newer_one() -> None:
    """Two replicas serve posts behind one Service and each coalesces its own: replica B's write of the
    50% report, due after replica A wrote the 100% report made later, is dropped."""
    kube = ApiKube()
    kube.put(trainjob("a"))
    settings = StatusServerSettings(port=0, write_interval=5.0)
    a, b = StatusServer(kube, settings), StatusServer(kube, settings)
    await b._write((NS, "a"), report(50, "2026-11-27T10:00:00Z"))
    await a._write((NS, "a"), report(100, "2026-11-27T10:00:03Z"))
    await b._write((NS, "a"), report(50, "2026-11-27T10:00:01Z"))  # B's coalesced, older report, late
    held = kube.objects[(TRAINJOBS, (NS, "a"))]["status"]["trainerStatus"]
    assert (held["progressPercentage"], held["lastUpdatedTime"]) == (100, "2026-11-27T10:00:03Z")
    assert (a.stale_reports, b.stale_reports) == (0, 1)
    await a._write((NS, "a"), report(100, "2026-11-27T10:00:03Z"))  # the same time again: written
    assert len([w for w in kube.writes if w.verb == "patch_status"]) == 3
    # Within the one second the time keeps, the lower progress is the older report (87% after 100%).
    await b._write((NS, "a"), report(87, "2026-11-27T10:00:03Z"))
    assert kube.objects[(TRAINJOBS, (NS, "a"))]["status"]["trainerStatus"]["progressPercentage"] == 100
    assert b.stale_reports == 2


async def test_a_status_write_that_meets_another_writers_change_reads_again() -> None:
    kube = ApiKube()
    kube.put(trainjob("a"))
    server = StatusServer(kube, StatusServerSettings(port=0))
    read = kube.get
    raced: list[bool] = []

    async def get_then_someone_writes(res: Resource, namespace: str | None, name: str) -> JSON:
        obj = await read(res, namespace, name)
        if not raced:  # another writer changes the TrainJob between this read and the write
            raced.append(True)
            kube.put(copy.deepcopy(kube.objects[(TRAINJOBS, (NS, "a"))]))  # a new resourceVersion
        return obj

    kube.get = get_then_someone_writes  # type: ignore[method-assign]
    await server._write((NS, "a"), report(40, "2026-11-27T10:00:00Z"))
    writes = [w for w in kube.writes if w.verb == "patch_status"]
    assert len(writes) == 2, "the first, conditional on the old resourceVersion, met a 409 and was read again"
    assert kube.objects[(TRAINJOBS, (NS, "a"))]["status"]["trainerStatus"]["progressPercentage"] == 40


async def test_a_status_write_reads_the_cache_first_and_a_stale_cache_costs_one_conflict() -> None:
    kube = ApiKube()
    stored = kube.put(trainjob("a"))
    server = StatusServer(kube, StatusServerSettings(port=0))
    server.auth.reader = reader({TRAINJOBS: [copy.deepcopy(stored)]})
    gets = []
    read = kube.get

    async def counted_get(res: Resource, namespace: str | None, name: str) -> JSON:
        gets.append(name)
        return await read(res, namespace, name)

    kube.get = counted_get  # type: ignore[method-assign]
    await server._write((NS, "a"), report(40, "2026-11-27T10:00:00Z"))
    assert gets == [], "the cached TrainJob was current: no GET"
    await server._write((NS, "a"), report(60, "2026-11-27T10:00:05Z"))  # the cache still holds the old version
    assert gets == ["a"], "the stale cache's resourceVersion met a 409, then one GET"
    assert kube.objects[(TRAINJOBS, (NS, "a"))]["status"]["trainerStatus"]["progressPercentage"] == 60


async def test_the_limiter_writes_at_once_when_idle_and_keys_are_independent() -> None:
    written: list[tuple[Key, JSON]] = []

    async def write(key: Key, patch: JSON) -> None:
        written.append((key, patch))

    limiter = WriteLimiter(write, 0.2)
    assert await limiter.submit(("n", "a"), {"i": 1}) is True
    assert await limiter.submit(("n", "b"), {"i": 1}) is True, "another TrainJob has its own budget"
    for i in range(2, 50):
        assert await limiter.submit(("n", "a"), {"i": i}) is False
    assert len(written) == 2
    start = time.monotonic()
    while len(written) < 3:
        await asyncio.sleep(0.01)
    assert time.monotonic() - start >= 0.1
    assert written[-1] == (("n", "a"), {"i": 49})
    await asyncio.sleep(0.3)
    assert len(written) == 3
    await limiter.close()
    with pytest.raises(ValueError):
        WriteLimiter(write, 0)


# --------------------------------------------------------------------------- the reconciler's writes


async def test_the_reconciler_never_overwrites_trainer_status() -> None:
    w = World("torch", "none")
    await w.settle()
    reported = {"progressPercentage": 30, "lastUpdatedTime": "2026-01-01T00:00:00Z"}
    await w.kube.patch_status(TRAINJOBS, w.key[0], w.key[1], {"trainerStatus": reported})
    for job in w.jobs():  # pods become ready, then the Jobs complete: two status changes
        n = int(job["spec"].get("parallelism") or 1)
        w.set_status(JOBS, job, {"active": n, "ready": n})
    await w.settle()
    for job in w.jobs():
        n = int(job["spec"].get("parallelism") or 1)
        complete = {"type": "Complete", "status": "True", "reason": "CompletionsReached"}
        w.set_status(JOBS, job, {"active": 0, "ready": 0, "succeeded": n, "conditions": [complete]})
    await w.settle()
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    assert status["trainerStatus"] == reported
    assert any(c["type"] == "Complete" for c in status["conditions"])
    status_writes = [x.body for x in w.kube.writes if x.verb == "patch_status" and x.kind == "TrainJob"]
    assert len(status_writes) >= 3, "the reconciler wrote the status twice after the report"
    assert [body for body in status_writes if "trainerStatus" in body] == [{"trainerStatus": reported}], (
        "only the report names trainerStatus"
    )


# --------------------------------------------------------------------------- the CA and the whole server


async def test_run_serves_with_the_secret_and_publishes_its_ca_to_every_trainjob() -> None:
    kube = ApiKube()
    manager = new_manager(kube, Settings(status_coalesce_seconds=0))
    settings = StatusServerSettings(port=0, bind_address="127.0.0.1", host="127.0.0.1", namespace="ops")
    server = setup(kube, settings, manager)
    assert server.auth.reader is manager.readers["trainjob"], "pods' Jobs and TrainJobs come from the caches"
    kube.connect(manager.informers)
    kube.put(load_sample("torch-distributed.yaml"))
    first = kube.put(trainjob("a"))
    elsewhere = kube.put(trainjob("mk") | {"spec": trainjob("mk")["spec"] | {"managedBy": "kueue.x-k8s.io/multikueue"}})
    assert elsewhere["metadata"]["uid"]
    task = asyncio.ensure_future(server.run())
    try:
        cm = await until(lambda: kube.objects.get((CONFIGMAPS, (NS, "a-tls-config"))))
        secret = kube.objects[(SECRETS, ("ops", "trainer-status-server-certs"))]
        ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
        assert cm["data"] == {"ca.crt": ca}
        assert cm["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-name": "a"}
        assert cm["metadata"]["ownerReferences"][0]["uid"] == first["metadata"]["uid"]
        trainjobs = manager.readers["trainjob"]
        assert trainjobs.get(CONFIGMAPS, NS, "a-tls-config") is None, "not held by the ConfigMap cache"
        assert (CONFIGMAPS, (NS, "mk-tls-config")) not in kube.objects, "not for a job another controller runs"

        kube.put(trainjob("later"))  # a new TrainJob gets one through the informer
        await until(lambda: kube.objects.get((CONFIGMAPS, (NS, "later-tls-config"))))

        # The server answers over TLS with a certificate of that CA, for 127.0.0.1.
        await until(lambda: server.port)
        ctx = ssl.create_default_context(cadata=ca)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            url = f"https://127.0.0.1:{server.port}{injection.status_path(NS, 'a')}"
            async with session.post(url, json={"trainerStatus": {}}) as resp:
                assert resp.status == 401

        # A new CA (rotation) reaches the ConfigMaps.
        assert server.publisher is not None
        await server.publisher.set_ca("NEW CA")
        await until(lambda: kube.objects[(CONFIGMAPS, (NS, "a-tls-config"))]["data"] == {"ca.crt": "NEW CA"})
        assert kube.count("apply", "ConfigMap") >= 2, "a rotation is applied through the child writer"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def until(probe: Callable[[], Any], timeout: float = 5.0) -> Any:
    """Poll ``probe`` until it returns something truthy; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out; last seen {got!r}")


# --------------------------------------------------------------------------- the CLI


def test_get_and_describe_show_progress_eta_and_metrics() -> None:
    now = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    obj = trainjob("a")
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    plain = TrainJob.model_validate(obj)
    assert (progress_text(plain), eta_text(plain), metrics_text(plain)) == ("-", "-", "")
    obj["status"] = {
        "trainerStatus": {
            "progressPercentage": 45,
            "estimatedRemainingSeconds": 11520,
            "metrics": [{"name": "loss", "value": "0.23"}, {"name": "accuracy", "value": "0.98"}],
            "lastUpdatedTime": "2026-01-01T00:08:00Z",
        }
    }
    job = TrainJob.model_validate(obj)
    assert (progress_text(job), eta_text(job), metrics_text(job)) == ("45%", "3h12m", "loss=0.23, accuracy=0.98")
    lines = _render(tables.jobs_table([job, plain], now)).splitlines()
    assert lines[0].split() == ["NAME", "STATE", "RUNTIME", "NODES", "JOBS", "QUEUE", "PROGRESS", "ETA", "AGE"]
    assert lines[1].split()[-3:] == ["45%", "3h12m", "10m"]
    assert lines[2].split()[-3:] == ["-", "-", "10m"]
    assert _render(tables.jobs_table([plain], now)).splitlines()[0].split() == list(tables.JOB_COLUMNS)
    text = "\n".join(_render(t) for t in describe.describe_tables(job, None, [], now))
    assert "45% (reported 2m ago)" in text and "3h12m" in text
    assert "Metrics:" in text and "loss" in text and "0.98" in text
    assert "Metrics:" not in "\n".join(_render(t) for t in describe.describe_tables(plain, None, [], now))
    assert "Checkpoint:" not in text and checkpoint_text(job) == ""
    obj["status"]["trainerStatus"]["lastCheckpoint"] = {"epoch": 7, "step": 1400, "savedTime": "2026-01-01T00:07:00Z"}
    saved = TrainJob.model_validate(obj)
    assert checkpoint_text(saved) == "epoch 7, step 1400, saved 2026-01-01T00:07:00Z"
    text = "\n".join(_render(t) for t in describe.describe_tables(saved, None, [], now))
    assert "Checkpoint:" in text and "epoch 7, step 1400" in text
    assert [duration_text(s) for s in (0, 45, 330, 900, 3600, 11520, 86400, 93600)] == [
        "0s",
        "45s",
        "5m30s",
        "15m",
        "1h",
        "3h12m",
        "1d",
        "1d2h",
    ]


def _render(table: Any) -> str:
    console = tables.console()
    with console.capture() as captured:
        console.print(table)
    return captured.get()


# --------------------------------------------------------------------------- flags


def test_the_flags() -> None:
    from trainer.wiring.settings import parse_args

    args = parse_args([])
    assert (args.status_server_port, args.status_server_host, args.status_write_interval) == (0, None, 5.0)
    args = parse_args(
        ["--status-server-port", "8082", "--status-server-host", "127.0.0.1", "--status-write-interval", "2"]
    )
    assert (args.status_server_port, args.status_server_host, args.status_write_interval) == (8082, "127.0.0.1", 2.0)
    with pytest.raises(SystemExit):
        parse_args(["--status-write-interval", "0"])


async def test_healthz_and_readyz_fail_while_the_status_server_does_not_listen() -> None:
    """kubeflow/trainer#3338: the status server's check is on both probes; it fails until the server
    listens and again once it stopped."""
    from trainer.framework.probes import probes_app
    from trainer.framework.probes import serve as serve_http

    server = StatusServer(ApiKube(), StatusServerSettings(port=0, bind_address="127.0.0.1"))
    check = {"status-server": server.not_serving}
    probes = await serve_http(probes_app(lambda: None, check, check), "127.0.0.1:0", "probes")
    assert probes
    bundle = generate(["localhost"], ["127.0.0.1"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*_files(bundle.cert, bundle.key))
    try:
        async with aiohttp.ClientSession() as http:

            async def answers() -> list[tuple[int, str]]:
                out = []
                for path in ("/healthz", "/readyz"):
                    async with http.get(f"http://127.0.0.1:{probes[1]}{path}") as r:
                        out.append((r.status, await r.text()))
                return out

            failed = "[-]status-server failed: not serving yet: no serving certificate or listener\n"
            assert await answers() == [(500, f"{failed}healthz check failed\n")] * 2
            runner = await server.listen(context)
            assert await answers() == [(200, "ok")] * 2
            await runner.cleanup()
    finally:
        await probes[0].cleanup()


class _Caches:
    """The TrainJob controller's TrainJob cache as the CA publisher reads it."""

    def __init__(self, *jobs: JSON) -> None:
        self.jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in jobs}

    def get(self, res: Any, namespace: str | None, name: str) -> JSON | None:
        return self.jobs.get((str(namespace), name)) if res == TRAINJOBS else None

    def items(self, res: Any) -> list[JSON]:
        return list(self.jobs.values()) if res == TRAINJOBS else []


class _Writer:
    """Records each ConfigMap applied, and accepts it (or refuses those named in :attr:`refused`, to be
    tried again in 0.1 s)."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, str]] = []
        self.refused: set[str] = set()
        self.clock = time.monotonic

    async def apply(self, owner: JSON, body: JSON, cached: JSON | None) -> tuple[Any, JSON]:
        assert cached is None, "the ConfigMaps are not cached"
        name = body["metadata"]["name"]
        self.applied.append((name, body["data"]["ca.crt"]))
        refusal = SimpleNamespace(message="taken", retry_at=self.clock() + 0.1)
        return (refusal if name in self.refused else None), body


@dataclass
class _FailingList(RecordingKube):
    """Answers its first ``failures`` lists with 500."""

    failures: int = 0

    async def list(self, *args: Any, **kwargs: Any) -> tuple[list[JSON], str]:
        if self.failures:
            self.failures -= 1
            raise ApiError(500, {"reason": "InternalError", "message": "etcd"})
        return await super().list(*args, **kwargs)


def _job(name: str, uid: str) -> JSON:
    return trainjob(name) | {"metadata": {"name": name, "namespace": NS, "uid": uid}}


def _ca_config_map(job: JSON, ca: str, name: str | None = None) -> JSON:
    cm = ca_config_map(job, ca)
    cm["metadata"]["name"] = name or cm["metadata"]["name"]
    return cm


async def _settled(publisher: CAPublisher, writer: _Writer, count: int) -> list[tuple[str, str]]:
    await until(lambda: len(writer.applied) >= count)
    await asyncio.sleep(0.05)  # nothing more comes
    return sorted(writer.applied)


async def test_the_ca_is_listed_once_then_written_to_each_trainjob_whose_config_map_lacks_it() -> None:
    """A restart finds the ConfigMaps by one list: what carries the CA is not written again; one of an
    older CA, none, or one only named after another TrainJob's (a tenant's) is."""
    a, b, c, d = _job("a", "u1"), _job("b", "u2"), _job("c", "u3"), _job("d", "u4")
    kube = _FailingList(failures=1)
    kube.put(_ca_config_map(a, "CA 1"))
    kube.put(_ca_config_map(b, "CA 0"))
    kube.put(_ca_config_map(c, "CA 1", name="other-tls-config"))  # controlled by c, not its name
    caches, writer = _Caches(a, b, c, d), _Writer()
    publisher = CAPublisher(cast(Any, writer), cast(Any, caches), kube, NS, retry_delay=0.01)
    task = asyncio.ensure_future(publisher.run())
    try:
        publisher.on_trainjob(None, a)  # before any CA: nothing due
        await publisher.set_ca("CA 1")
        written = await _settled(publisher, writer, 3)
        assert written == [("b-tls-config", "CA 1"), ("c-tls-config", "CA 1"), ("d-tls-config", "CA 1")]
        assert kube.failures == 0, "the failed list was tried again"

        for job in (a, b, c, d):  # status writes echoed: the ConfigMaps are not written again
            publisher.on_trainjob(job, job)
        await asyncio.sleep(0.05)
        assert len(writer.applied) == 3

        await publisher.set_ca("CA 2")  # a rotation: every one, the list finding none of the new CA
        written = await _settled(publisher, writer, 7)
        assert [w for w in written if w[1] == "CA 2"] == [(f"{n}-tls-config", "CA 2") for n in "abcd"]

        publisher.on_trainjob(a, None)  # deleted, then made again under the same name
        again = _job("a", "u5")
        caches.jobs[(NS, "a")] = again
        publisher.on_trainjob(None, again)
        await _settled(publisher, writer, 8)
        assert writer.applied[-1] == ("a-tls-config", "CA 2")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_refused_config_map_is_sent_again_after_the_backoff_until_written() -> None:
    a = _job("a", "u1")
    caches, writer = _Caches(a), _Writer()
    writer.refused.add("a-tls-config")
    publisher = CAPublisher(cast(Any, writer), cast(Any, caches), RecordingKube(), None, retry_delay=0.01)
    task = asyncio.ensure_future(publisher.run())
    try:
        await publisher.set_ca("CA 1")
        await until(lambda: writer.applied)
        await asyncio.sleep(0.02)
        assert len(writer.applied) == 1, "not before the backoff"
        writer.refused.clear()  # the tenant's object is gone: the retry after the backoff writes it
        await until(lambda: len(writer.applied) == 2)  # with no change of the TrainJob
        await asyncio.sleep(0.3)
        publisher.on_trainjob(a, a)
        await asyncio.sleep(0.05)
        assert writer.applied == [("a-tls-config", "CA 1")] * 2, "written: nothing more"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
