"""``--metrics-secure`` (kubeflow/trainer#3912): /metrics over HTTPS, for bearer tokens a TokenReview
authenticates and a SubjectAccessReview allows ``get`` on the non-resource URL ``/metrics``, as
controller-runtime's ``filters.WithAuthenticationAndAuthorization``. The recording double answers
the reviews and records what was asked."""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

from tests.kube_double import RecordingKube
from trainer.api.kinds import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, Resource
from trainer.framework.certs import generate
from trainer.framework.delegated_auth import DelegatedAuth
from trainer.framework.json_codec import JSON
from trainer.framework.metrics import Metrics
from trainer.framework.probes import METRICS_SECRET, metrics_app, serve
from trainer.render import rbac
from trainer.wiring.settings import parse_args

PROMETHEUS = "system:serviceaccount:monitoring:prometheus"


@dataclass
class ReviewKube(RecordingKube):
    """The recording double answering TokenReviews from :attr:`users` (token -> username) and
    SubjectAccessReviews from :attr:`may_read` (usernames allowed ``get /metrics``)."""

    users: dict[str, str] = field(default_factory=dict)
    may_read: set[str] = field(default_factory=set)
    asked: list[JSON] = field(default_factory=list)

    async def create(
        self, res: Resource, namespace: str | None, obj: JSON, manager: str | None = None, *, dry_run: bool = False
    ) -> JSON:
        self.asked.append(obj)
        if res == TOKEN_REVIEWS:
            user = self.users.get(obj["spec"]["token"])
            if user is None:
                return {**obj, "status": {"authenticated": False, "error": "invalid bearer token"}}
            info = {"username": user, "uid": f"uid-{user}", "groups": ["system:serviceaccounts"]}
            return {**obj, "status": {"authenticated": True, "user": info}}
        if res == SUBJECT_ACCESS_REVIEWS:
            spec = obj["spec"]
            wanted = spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
            allowed = wanted and spec["user"] in self.may_read
            return {**obj, "status": {"allowed": allowed, **({} if allowed else {"reason": "no RBAC rule"})}}
        return await super().create(res, namespace, obj, manager)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_token_the_apiserver_lets_get_metrics_is_let_in_and_its_decision_cached() -> None:
    kube = ReviewKube(users={"good": PROMETHEUS, "other": "alice"}, may_read={PROMETHEUS})
    clock = Clock()
    auth = DelegatedAuth(kube, clock=clock)
    assert (await auth.decide(None, "get", "/metrics")).code == 401
    assert (await auth.decide("Basic abc", "get", "/metrics")).code == 401
    assert kube.asked == [], "no token, no review"
    unknown = await auth.decide("Bearer nope", "get", "/metrics")
    assert (unknown.code, unknown.message) == (401, "Unauthorized: invalid bearer token")
    denied = await auth.decide("Bearer other", "get", "/metrics")
    assert denied.code == 403
    assert denied.message == "Forbidden (user=alice, verb=get, path=/metrics): no RBAC rule"
    assert (await auth.decide("Bearer good", "get", "/metrics")).allowed
    access = [a["spec"] for a in kube.asked if a["kind"] == "SubjectAccessReview"]
    assert access[-1] == {
        "user": PROMETHEUS,
        "groups": ["system:serviceaccounts"],
        "uid": f"uid-{PROMETHEUS}",
        "extra": {},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    kinds = [a["kind"] for a in kube.asked]
    assert kinds == ["TokenReview", "TokenReview", "SubjectAccessReview", "TokenReview", "SubjectAccessReview"]
    asked = len(kube.asked)
    clock.now = 59.0
    assert (await auth.decide("Bearer good", "get", "/metrics")).allowed
    assert (await auth.decide("Bearer other", "get", "/metrics")).code == 403  # refused for 10 s only
    assert len(kube.asked) == asked + 2, "the allowed one is cached for a minute, the refused one was asked again"
    kube.may_read.clear()  # its ClusterRoleBinding removed: refused once the minute is over
    clock.now = 61.0
    assert (await auth.decide("Bearer good", "get", "/metrics")).code == 403


@pytest.fixture
async def secure() -> AsyncIterator[tuple[ReviewKube, str, ssl.SSLContext]]:
    kube = ReviewKube(users={"good": PROMETHEUS, "other": "alice"}, may_read={PROMETHEUS})
    bundle = generate(["localhost"], ["127.0.0.1"])
    directory = tempfile.mkdtemp(prefix="metrics-test-")
    paths = (f"{directory}/tls.crt", f"{directory}/tls.key")
    for path, text in zip(paths, (bundle.cert, bundle.key), strict=True):
        with open(path, "w") as f:
            f.write(text)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*paths)
    served = await serve(metrics_app(Metrics(), DelegatedAuth(kube)), "127.0.0.1:0", "metrics", context)
    assert served
    try:
        yield kube, f"https://127.0.0.1:{served[1]}/metrics", ssl.create_default_context(cadata=bundle.ca)
    finally:
        await served[0].cleanup()


async def test_metrics_over_https_answer_only_an_allowed_token(secure: tuple[ReviewKube, str, ssl.SSLContext]) -> None:
    _kube, url, trust = secure
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as http:
        answers: list[tuple[int, Any]] = []
        for headers in ({}, {"Authorization": "Bearer other"}, {"Authorization": "Bearer good"}):
            async with http.get(url, headers=headers) as r:
                answers.append((r.status, (await r.text()).splitlines()[0]))
    assert answers[0] == (401, "Unauthorized: a bearer token is required")
    assert answers[1] == (403, "Forbidden (user=alice, verb=get, path=/metrics): no RBAC rule")
    assert answers[2][0] == 200 and answers[2][1].startswith("# HELP")
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientError):  # plain HTTP is not served, nor an untrusted certificate
            async with http.get(url.replace("https", "http")) as r:
                await r.text()


def test_the_flag_is_off_by_default_and_rbac_grants_the_reviews_and_the_secret() -> None:
    assert parse_args([]).metrics_secure is False
    assert parse_args(["--metrics-secure"]).metrics_secure is True
    rules = rbac.cluster_role()["rules"]
    for group, resource in (
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ):
        assert any(r["apiGroups"] == [group] and resource in r["resources"] and "create" in r["verbs"] for r in rules)
    certificates = rbac.role("Role", rbac.CERTIFICATES_ROLE, rbac.in_role(rbac.CERTIFICATES_ROLE))
    secrets = [r for r in certificates["rules"] if r.get("resourceNames")]
    assert METRICS_SECRET in secrets[0]["resourceNames"]
